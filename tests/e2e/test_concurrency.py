"""Concurrent writers over real HTTP: no lost update, exactly one winner, one write per idempotency key."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.e2e.server_process import BatonServe


def new_subject() -> str:
    return f"e2e-race-{uuid.uuid4().hex}"


def all_at_once(
    baton: BatonServe, count: int, send: Callable[[httpx.Client, int], httpx.Response]
) -> list[httpx.Response]:
    """Runs `send` on `count` threads, each with its own connection, released together by a barrier."""
    barrier = threading.Barrier(count)

    def run(index: int) -> httpx.Response:
        with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=60) as client:
            client.get("/v1/health")  # open the connection before the start line
            barrier.wait(timeout=30)
            return send(client, index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def lookup(http: httpx.Client, subject: str) -> dict[str, Any]:
    response = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_parallel_first_saves_create_once_and_lose_no_update(baton: BatonServe, http: httpx.Client) -> None:
    # Given a (subject, kind) nothing was saved for
    subject = new_subject()
    # When 12 clients save it at the same moment
    answers = all_at_once(
        baton,
        12,
        lambda client, i: client.post(
            "/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": {"writer": i}}
        ),
    )
    # Then exactly one created it, eleven updated it, all the same checkpoint, and every write counted
    statuses = Counter(r.status_code for r in answers)
    assert statuses == Counter({201: 1, 200: 11}), [r.text for r in answers]
    assert len({r.json()["data"]["checkpoint_id"] for r in answers}) == 1
    assert sorted(r.json()["data"]["revision"] for r in answers) == list(range(1, 13))
    created = next(r for r in answers if r.status_code == 201)
    assert created.json()["data"]["revision"] == 1
    final = lookup(http, subject)
    assert final["revision"] == 12
    assert final["checkpoint_id"] == created.json()["data"]["checkpoint_id"]
    last_writer = next(r for r in answers if r.json()["data"]["revision"] == 12)
    assert final["state_hash"] == last_writer.json()["data"]["state_hash"]


def test_parallel_saves_with_the_same_expected_revision_have_exactly_one_winner(
    baton: BatonServe, http: httpx.Client
) -> None:
    # Given a checkpoint at revision 1
    subject = new_subject()
    first = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": {"v": 0}})
    assert first.status_code == 201, first.text
    # When 10 clients save it at the same moment, all expecting revision 1
    answers = all_at_once(
        baton,
        10,
        lambda client, i: client.post(
            "/v1/checkpoints",
            json={"subject_id": subject, "kind": "task_state", "state": {"v": i}, "expected_revision": 1},
        ),
    )
    # Then one wins with revision 2 and nine are told the current revision is 2
    statuses = Counter(r.status_code for r in answers)
    assert statuses == Counter({200: 1, 409: 9}), [r.text for r in answers]
    winner = next(r for r in answers if r.status_code == 200)
    assert winner.json()["data"]["revision"] == 2
    for loser in (r for r in answers if r.status_code == 409):
        error = loser.json()["error"]
        assert error["code"] == "REVISION_CONFLICT"
        assert error["details"]["current_revision"] == 2
    # And the stored state is the winner's
    final = lookup(http, subject)
    assert final["revision"] == 2
    assert final["state_hash"] == winner.json()["data"]["state_hash"]


def test_parallel_saves_with_the_same_idempotency_key_write_once(baton: BatonServe, http: httpx.Client) -> None:
    # Given a checkpoint at revision 1
    subject = new_subject()
    first = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": {"v": 0}})
    assert first.status_code == 201, first.text
    key = f"e2e-{uuid.uuid4()}"
    body = {"subject_id": subject, "kind": "task_state", "state": {"v": "once"}}
    # When 10 clients send the same request with the same Idempotency-Key at the same moment
    answers = all_at_once(
        baton, 10, lambda client, _: client.post("/v1/checkpoints", json=body, headers={"Idempotency-Key": key})
    )
    # Then all answer the one write, and only one of them is not a replay
    assert [r.status_code for r in answers] == [200] * 10, [r.text for r in answers]
    data = [r.json()["data"] for r in answers]
    assert all(d == data[0] for d in data)
    assert data[0]["revision"] == 2
    assert len({r.headers["ETag"] for r in answers}) == 1
    replayed = [r.headers.get("Idempotent-Replayed") == "true" for r in answers]
    assert replayed.count(False) == 1, [dict(r.headers) for r in answers]
    assert len({r.json()["meta"]["request_id"] for r in answers}) == 10
    # And the checkpoint took exactly one write
    final = lookup(http, subject)
    assert final["revision"] == 2
    assert final["state"] == {"v": "once"}


def test_parallel_requests_of_different_callers_each_get_their_own_answer(
    baton: BatonServe, http: httpx.Client
) -> None:
    # Given the operator's key and another agent's key
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    issued = http.post("/v1/keys", json={"agent_id": agent_id, "scopes": ["checkpoints:read", "checkpoints:write"]})
    assert issued.status_code == 201, issued.text
    secrets = [baton.key, issued.json()["data"]["secret"]]
    owners = ["operator", agent_id]
    subjects = [new_subject() for _ in range(24)]

    # When 24 saves of 24 different subjects, alternating between the two keys, arrive at the same moment
    def send(client: httpx.Client, i: int) -> httpx.Response:
        return client.post(
            "/v1/checkpoints",
            json={"subject_id": subjects[i], "kind": "task_state", "state": {"i": i}},
            headers={"Authorization": f"Bearer {secrets[i % 2]}"},
        )

    answers = all_at_once(baton, 24, send)
    # Then every request created its own checkpoint, for its own subject, owned by its own caller
    seen = [
        (r.status_code, r.json().get("data", {}).get("subject_id"), r.json().get("data", {}).get("agent_id"))
        for r in answers
    ]
    assert seen == [(201, subjects[i], owners[i % 2]) for i in range(24)]
