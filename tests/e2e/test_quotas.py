"""Quotas over real HTTP against `baton serve`: its stream consumer counts what a tenant stores, and its containers
refuse a save past the tenant's quota while a delete goes through, and serve the save again once the delete is
counted. Real time: the counts arrive with the stream (documented lag: about 20 seconds at most)."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.e2e.server_process import BatonServe, serve_table
from tests.e2e.test_checkpoints import client_for
from tests.proof_counts import record

SUITE = "quotas (e2e)"
LAG_SECONDS = 30.0
"""How long the test waits for a count to reach the containers (the documented bound is about 20 s)."""


@pytest.fixture(scope="module")
def baton(moto_endpoint: str) -> Iterator[BatonServe]:
    """`baton serve` with its reaper (which counts) and its four containers, on a table of its own (the session's
    server runs without a reaper)."""
    server = serve_table(moto_endpoint, f"baton-e2e-quotas-{uuid.uuid4().hex[:8]}", containers=4)
    yield server
    server.stop()


def new_tenant(http: httpx.Client, **limits: int) -> str:
    """A fresh tenant with these limits (a burst of 10: a share of 1, so every request takes, and learns the counts),
    and a `*` key of it: the key's secret."""
    tenant = f"q-{uuid.uuid4().hex[:12]}"
    answer = http.put(f"/v1/tenants/{tenant}/limits", json={"requests_per_minute": 6000, "burst": 10, **limits})
    assert answer.status_code == 200, answer.text
    created = http.post("/v1/keys", json={"tenant_id": tenant, "agent_id": "worker", "scopes": ["*"]})
    assert created.status_code == 201, created.text
    secret: str = created.json()["data"]["secret"]
    return secret


def until_refused(attempt: Callable[[int], httpx.Response]) -> tuple[httpx.Response, int, float]:
    """Make attempt 0, 1, 2... a second apart (each a write that would create or add), until one is refused (within
    `LAG_SECONDS`): the refusal, how many went through before it (the lag's overshoot), and how long it took."""
    started = time.monotonic()
    served = 0
    while True:
        got = attempt(served)
        if got.status_code != 201 or time.monotonic() - started > LAG_SECONDS:
            return got, served, time.monotonic() - started
        served += 1
        time.sleep(1.0)


def until_served(attempt: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    """Make the attempt a second apart until it is served (within `LAG_SECONDS`)."""
    started = time.monotonic()
    while True:
        got = attempt()
        if got.status_code == 201 or time.monotonic() - started > LAG_SECONDS:
            return got, time.monotonic() - started
        time.sleep(1.0)


def save(client: httpx.Client, subject: str, state: object) -> httpx.Response:
    return client.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": state})


def test_a_quota_refuses_a_save_and_allows_a_delete(baton: BatonServe, http: httpx.Client) -> None:
    secret = new_tenant(http, checkpoints=2)
    with client_for(baton, secret) as client:
        # Given a tenant that may keep two checkpoints, and keeps two
        first = save(client, "first", {"step": 1})
        assert first.status_code == 201, first.text
        assert save(client, "second", {"step": 1}).status_code == 201
        # When it saves new ones, then once the stream has counted what it keeps, they are refused, naming the quota
        refused, overshoot, lag = until_refused(lambda n: save(client, f"new-{n}", {"step": 1}))
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "QUOTA_EXCEEDED"
        assert error["details"] == {"quota": "checkpoints", "limit": 2, "used": 2 + overshoot}
        # And the checkpoints it has are still read and updated
        assert client.get(f"/v1/checkpoints/{first.json()['data']['checkpoint_id']}").status_code == 200
        assert save(client, "first", {"step": 2}).status_code == 200
        # And deletes are never refused; once they are counted, a new save is served
        assert client.delete(f"/v1/checkpoints/{first.json()['data']['checkpoint_id']}").status_code == 200
        for n in range(overshoot):
            kept = client.get("/v1/checkpoints", params={"subject_id": f"new-{n}", "kind": "task_state"})
            assert client.delete(f"/v1/checkpoints/{kept.json()['data']['checkpoint_id']}").status_code == 200
        served, freed = until_served(lambda: save(client, "after", {"step": 1}))
        assert served.status_code == 201, served.text
    record(SUITE, refusal_lag_ms=int(lag * 1000), delete_lag_ms=int(freed * 1000), overshoot=overshoot)


def test_a_storage_quota_refuses_what_would_not_fit(baton: BatonServe, http: httpx.Client) -> None:
    secret = new_tenant(http, storage_bytes=40_000)
    with client_for(baton, secret) as client:
        # Given a tenant that stores about 15 KB of its 40 KB (random text: what is stored is what is sent, no smaller
        # once packed)
        assert save(client, "big", {"text": secrets.token_hex(7_500)}).status_code == 201
        # When it keeps saving 10 KB more, then once counted a save that would not fit is refused, storing nothing
        refused, overshoot, _ = until_refused(lambda n: save(client, f"more-{n}", {"text": secrets.token_hex(5_000)}))
        assert refused.status_code == 403, refused.text
        details = refused.json()["error"]["details"]
        assert details["quota"] == "storage_bytes"
        assert details["used"] + 10_000 > 40_000
        missing = client.get("/v1/checkpoints", params={"subject_id": f"more-{overshoot}", "kind": "task_state"})
        assert missing.status_code == 404
        # And a small save still fits while there is room
        if details["used"] < 39_000:
            assert save(client, "small", {"step": 1}).status_code == 201
