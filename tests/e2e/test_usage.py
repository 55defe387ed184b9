"""Usage over real HTTP against `baton serve` with four containers and its stream consumer: a tenant's figures for
the day equal what the test did, request by request, whichever container served each (`baton serve` writes each
request's counts at its end), and what it stores reaches them from the stream within the documented lag."""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.e2e.oauth_flow import MCP_ACCEPT, mcp_message
from tests.e2e.server_process import BatonServe, serve_table
from tests.e2e.test_checkpoints import client_for
from tests.proof_counts import record

SUITE = "usage (e2e)"
LAG_SECONDS = 30.0
"""How long the test waits for the stream's count (the documented bound is about 20 s)."""


@pytest.fixture(scope="module")
def baton(moto_endpoint: str) -> Iterator[BatonServe]:
    """`baton serve` with its reaper (which counts what is stored) and four containers, on a table of its own."""
    server = serve_table(moto_endpoint, f"baton-e2e-usage-{uuid.uuid4().hex[:8]}", containers=4)
    yield server
    server.stop()


def today(http: httpx.Client, tenant: str) -> dict[str, Any]:
    """The tenant's figures for today, as the operator reads them."""
    answer = http.get("/v1/usage", params={"tenant_id": tenant})
    assert answer.status_code == 200, answer.text
    day: dict[str, Any] = answer.json()["data"]["days"][-1]
    assert day["date"] == datetime.now(UTC).date().isoformat()
    return day


def test_usage_figures_equal_what_the_test_did(baton: BatonServe, http: httpx.Client) -> None:
    # Given a fresh tenant and a `*` key of it
    tenant = f"u-{uuid.uuid4().hex[:12]}"
    created = http.post("/v1/keys", json={"tenant_id": tenant, "agent_id": "worker", "scopes": ["*"]})
    assert created.status_code == 201, created.text
    big_state = {"text": secrets.token_hex(20_000)}  # random hex: packed, still past an item's 16 KB (S3)
    with client_for(baton, created.json()["data"]["secret"]) as client:
        # When it saves three checkpoints (one big), reads the big one, looks one up and deletes another
        saved = [
            client.post("/v1/checkpoints", json={"subject_id": f"s{n}", "kind": "task_state", "state": state})
            for n, state in enumerate(({"n": 0}, {"n": 1}, big_state))
        ]
        assert [a.status_code for a in saved] == [201, 201, 201], [a.text for a in saved]
        ids = [a.json()["data"]["checkpoint_id"] for a in saved]
        assert client.get(f"/v1/checkpoints/{ids[2]}").json()["data"]["state"] == big_state
        assert client.get("/v1/checkpoints", params={"subject_id": "s1", "kind": "task_state"}).status_code == 200
        assert client.delete(f"/v1/checkpoints/{ids[0]}").status_code == 200
        # and declares a blob, asks who it is, and calls a tool over MCP
        blob = {"sha256": hashlib.sha256(b"hello").hexdigest(), "size": 5, "media_type": "text/plain"}
        assert client.post("/v1/blobs", json=blob).status_code == 201
        assert client.get("/v1/whoami").status_code == 200
        listed = client.post("/mcp", json=mcp_message("tools/list"), headers=MCP_ACCEPT)
        assert listed.status_code == 200, listed.text
    # Then the day counts each of its requests under its family, whichever container served it
    day = today(http, tenant)
    assert day["requests"] == {"blobs": 1, "checkpoints": 6, "keys": 1, "mcp": 1}
    # and S3's share: the big state's write and its read, and the upload URL handed out
    assert day["s3"]["requests"] == 2
    assert day["s3"]["bytes_written"] == day["s3"]["bytes_read"] > 16_000
    assert (day["s3"]["presigned_urls"], day["s3"]["presigned_upload_bytes"]) == (1, 5)
    assert day["dynamodb"]["write_units"] > 0
    assert day["dynamodb"]["read_units"] > 0
    # And once the stream is counted, what it stores now: two checkpoints, the big one's bytes among them
    started = time.monotonic()
    while (day["checkpoints"], day["stored_bytes"] > 16_000) != (2, True):
        assert time.monotonic() - started < LAG_SECONDS, day
        time.sleep(1.0)
        day = today(http, tenant)
    record(SUITE, figures_checked=1, stored_lag_ms=int((time.monotonic() - started) * 1000))
