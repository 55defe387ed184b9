"""`POST /v1/resume` over real HTTP against `baton serve`: one, two and zero candidates, a terminal one, the budget
one byte below and exactly at the required size (measured on the raw body), an OpenCheckpoint document, and
another agent's work with and without `*`."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.builders import SEED_DOCUMENT, save_body
from tests.e2e.conftest import table_snapshot
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

OPENCHECKPOINT = "opencheckpoint/0.1"


@pytest.fixture
def subject() -> str:
    return f"e2e-resume-{uuid.uuid4().hex}"


def put(client: httpx.Client, subject_id: str, **fields: Any) -> str:
    """Save on `subject_id`; the checkpoint's id."""
    answer = client.post("/v1/checkpoints", json=save_body(subject_id=subject_id, **fields))
    assert answer.status_code in (200, 201), answer.text
    checkpoint_id: str = answer.json()["data"]["checkpoint_id"]
    return checkpoint_id


def resume(client: httpx.Client, subject_id: str, **body: Any) -> httpx.Response:
    answer = client.post("/v1/resume", json={"subject_id": subject_id, **body})
    record("resume (e2e)", requests=1)
    return answer


def data_bytes(answer: httpx.Response) -> bytes:
    """The `data` value's bytes exactly as the body carries them: between `{"data":` and `,"meta":`."""
    body = answer.content
    assert body.startswith(b'{"data":'), body[:80]
    return body[len(b'{"data":') : body.rindex(b',"meta":')]


def test_zero_candidates_is_none(http: httpx.Client, subject: str) -> None:
    answer = resume(http, subject)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert data_bytes(answer) == b'{"status":"none"}'


def test_one_candidate_is_ready_with_the_record_get_by_id_answers(http: httpx.Client, subject: str) -> None:
    checkpoint_id = put(http, subject, state={"step": 4, "of": 7})
    answer = resume(http, subject)
    assert answer.status_code == 200
    by_id = http.get(f"/v1/checkpoints/{checkpoint_id}")
    assert data_bytes(answer) == b'{"status":"ready","checkpoint":' + data_bytes(by_id) + b"}"
    assert answer.json()["data"]["checkpoint"]["state"] == {"step": 4, "of": 7}


def test_two_candidates_are_ambiguous_and_never_a_guess(http: httpx.Client, subject: str) -> None:
    older = put(http, subject, kind="workflow")
    newer = put(http, subject, kind="cursor")
    data = resume(http, subject).json()["data"]
    assert data["status"] == "ambiguous"
    assert data["candidate_count"] == 2
    assert [c["checkpoint_id"] for c in data["candidates"]] == [newer, older]
    assert all("state" not in c for c in data["candidates"])


def test_a_terminal_one_is_closed_and_an_active_one_beside_it_is_ready(http: httpx.Client, subject: str) -> None:
    done = put(http, subject, kind="workflow", status="completed")
    closed = resume(http, subject).json()["data"]
    assert closed["status"] == "closed"
    assert closed["checkpoint"]["checkpoint_id"] == done
    assert "state" not in closed["checkpoint"]
    active = put(http, subject, kind="cursor")
    ready = resume(http, subject).json()["data"]
    assert (ready["status"], ready["checkpoint"]["checkpoint_id"]) == ("ready", active)


def test_a_budget_one_byte_below_the_required_size_is_omitted_and_exactly_at_it_is_ready(
    http: httpx.Client, table: Any, subject: str
) -> None:
    checkpoint_id = put(http, subject, state={"notes": "çà et là — " * 300})
    required = len(data_bytes(resume(http, subject)))
    before = table_snapshot(table)
    below = resume(http, subject, budget_bytes=required - 1)
    at = resume(http, subject, budget_bytes=required)
    # One byte short: the size and the summary, no part of the state
    omitted = below.json()["data"]
    assert omitted["status"] == "omitted"
    assert omitted["required_bytes"] == required
    assert omitted["checkpoint"]["checkpoint_id"] == checkpoint_id
    assert "çà et là".encode() not in below.content
    # Exactly at it: the whole checkpoint, its data exactly required_bytes long on the wire
    assert at.json()["data"]["status"] == "ready"
    assert len(data_bytes(at)) == required
    # Nothing was written by either
    assert table_snapshot(table) == before


def test_an_opencheckpoint_document_lists_pending_operations_and_stop_conditions(
    http: httpx.Client, subject: str
) -> None:
    put(http, subject, state=SEED_DOCUMENT, format=OPENCHECKPOINT)
    data = resume(http, subject).json()["data"]
    assert data["status"] == "ready"
    assert data["pending_operations"] == SEED_DOCUMENT["operations"]
    assert data["stop_conditions"] == SEED_DOCUMENT["continuation"]["stop_conditions"]


def test_another_agents_work_with_and_without_star(http: httpx.Client, baton: BatonServe, subject: str) -> None:
    # A key of agent `helper` without `*`, which saves its own checkpoint
    created = http.post("/v1/keys", json={"agent_id": "helper", "scopes": ["checkpoints:read", "checkpoints:write"]})
    assert created.status_code == 201, created.text
    with httpx.Client(
        base_url=baton.url, headers={"Authorization": f"Bearer {created.json()['data']['secret']}"}, timeout=30
    ) as helper:
        theirs = put(helper, subject)
        put(http, subject)
        # The `*` key names the agent: its checkpoint, ready
        named = resume(http, subject, agent_id="helper").json()["data"]
        assert (named["status"], named["checkpoint"]["checkpoint_id"]) == ("ready", theirs)
        # The key without `*` naming the operator's agent: the 404 of a missing checkpoint, byte for byte
        refused = resume(helper, subject, agent_id="operator")
        missing = helper.get("/v1/checkpoints/ckpt_" + "0" * 32)
        assert refused.status_code == missing.status_code == 404
        assert refused.json()["error"] == missing.json()["error"]
        assert refused.content.replace(refused.json()["meta"]["request_id"].encode(), b"") == missing.content.replace(
            missing.json()["meta"]["request_id"].encode(), b""
        )
        # Without agent_id it sees only its own
        own = resume(helper, subject).json()["data"]
        assert (own["status"], own["checkpoint"]["checkpoint_id"]) == ("ready", theirs)
