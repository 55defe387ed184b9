"""Cross-agent reads over real HTTP against `baton serve`: a key holding `*` names another agent of its tenant and
gets that agent's work (lookup, list, resume, and the routes addressed by id); any other key (another agent's
without `*`, another tenant's with `*`) gets the 404 of a missing checkpoint, byte for byte but the request id."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.builders import save_body
from tests.e2e.conftest import table_snapshot
from tests.e2e.server_process import BatonServe
from tests.e2e.test_checkpoints import client_for, issue_key
from tests.proof_counts import record

SUITE = "cross-agent (e2e)"
MISSING_ID = "ckpt_" + "0" * 32


@dataclass(frozen=True)
class Callers:
    """The owner of the work, a `*` key of the same tenant, a key of another agent without `*` (every other
    scope the routes need), and a `*` key of another tenant."""

    owner_agent: str
    owner: httpx.Client
    star: httpx.Client
    peer: httpx.Client
    other_tenant: httpx.Client


@pytest.fixture(scope="module")
def callers(baton: BatonServe) -> Iterator[Callers]:
    suffix = uuid.uuid4().hex[:8]
    owner_agent = f"owner-{suffix}"
    with client_for(baton, baton.key) as operator:
        owner_key = issue_key(operator, owner_agent, ["checkpoints:read", "checkpoints:write"])
        star_key = issue_key(operator, f"lead-{suffix}", ["*"])
        peer_key = issue_key(
            operator,
            f"peer-{suffix}",
            ["checkpoints:read", "checkpoints:write", "checkpoints:delete", "leases:write"],
        )
        other_tenant_key = issue_key(operator, owner_agent, ["*"], tenant_id=f"other-{suffix}")
    clients = [client_for(baton, key) for key in (owner_key, star_key, peer_key, other_tenant_key)]
    yield Callers(owner_agent, *clients)
    for client in clients:
        client.close()


def new_subject() -> str:
    return f"e2e-cross-{uuid.uuid4().hex}"


def owned_checkpoint(callers: Callers, subject: str, **fields: Any) -> str:
    """The owner saves on `subject`; the checkpoint's id."""
    answer = callers.owner.post("/v1/checkpoints", json=save_body(subject_id=subject, **fields))
    assert answer.status_code == 201, answer.text
    assert answer.json()["data"]["agent_id"] == callers.owner_agent
    checkpoint_id: str = answer.json()["data"]["checkpoint_id"]
    return checkpoint_id


def normalized(answer: httpx.Response) -> tuple[int, str, bytes]:
    """Status, media type and body of an answer, its request id blanked: what two answers compare on."""
    request_id = answer.json()["meta"]["request_id"]
    assert request_id
    return answer.status_code, answer.headers["content-type"], answer.content.replace(request_id.encode(), b"<id>")


def lookup(client: httpx.Client, subject: str, **query: str) -> httpx.Response:
    record(SUITE, requests=1)
    return client.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state", **query})


def listing(client: httpx.Client, subject: str, **query: str) -> httpx.Response:
    record(SUITE, requests=1)
    return client.get(f"/v1/subjects/{quote(subject, safe='')}/checkpoints", params=query)


def resume(client: httpx.Client, subject: str, **body: str) -> httpx.Response:
    record(SUITE, requests=1)
    return client.post("/v1/resume", json={"subject_id": subject, **body})


def missing_checkpoint(client: httpx.Client) -> tuple[int, str, bytes]:
    """The 404 of a checkpoint that does not exist, as `client` gets it (by id and by lookup: the same answer)."""
    by_id = normalized(client.get(f"/v1/checkpoints/{MISSING_ID}"))
    by_lookup = normalized(lookup(client, new_subject()))
    assert by_id == by_lookup
    status, _, body = by_id
    assert status == 404
    error = httpx.Response(404, content=body).json()["error"]
    assert error == {"code": "NOT_FOUND", "message": "Resource was not found."}  # no details
    return by_id


def test_a_star_key_reads_lists_and_resumes_another_agents_work(callers: Callers) -> None:
    subject = new_subject()
    checkpoint_id = owned_checkpoint(callers, subject, state={"task": "triage", "step": 3})
    agent = callers.owner_agent
    # Lookup: the owner's record, byte for byte, with its ETag
    own, named = lookup(callers.owner, subject), lookup(callers.star, subject, agent_id=agent)
    assert named.status_code == 200, named.text
    assert named.json()["data"]["checkpoint_id"] == checkpoint_id
    assert named.json()["data"]["state"] == {"task": "triage", "step": 3}
    assert normalized(named) == normalized(own)
    assert named.headers["ETag"] == own.headers["ETag"]
    # List with agent_id: the owner's summaries
    own_list, named_list = listing(callers.owner, subject), listing(callers.star, subject, agent_id=agent)
    assert named_list.status_code == 200, named_list.text
    assert [s["checkpoint_id"] for s in named_list.json()["data"]] == [checkpoint_id]
    assert normalized(named_list) == normalized(own_list)
    # Resume with agent_id: ready, with the owner's checkpoint
    own_resume, named_resume = resume(callers.owner, subject), resume(callers.star, subject, agent_id=agent)
    assert named_resume.status_code == 200, named_resume.text
    assert named_resume.json()["data"]["status"] == "ready"
    assert named_resume.json()["data"]["checkpoint"]["checkpoint_id"] == checkpoint_id
    assert normalized(named_resume) == normalized(own_resume)
    # Not naming an agent, the `*` key looks up its own agent's work: none here
    assert normalized(lookup(callers.star, subject)) == missing_checkpoint(callers.star)
    record(SUITE, star_reads=3)


def test_without_star_another_agents_work_answers_exactly_the_404_of_a_missing_checkpoint(
    callers: Callers, table: Any
) -> None:
    subject = new_subject()
    owned_checkpoint(callers, subject)
    agent = callers.owner_agent
    empty_subject = new_subject()
    before = table_snapshot(table)
    peer = callers.peer
    missing = missing_checkpoint(peer)
    refused = [
        lookup(peer, subject, agent_id=agent),
        listing(peer, subject, agent_id=agent),
        resume(peer, subject, agent_id=agent),
        # the same questions about a subject the owner has nothing on: no oracle either way
        lookup(peer, empty_subject, agent_id=agent),
        listing(peer, empty_subject, agent_id=agent),
        resume(peer, empty_subject, agent_id=agent),
        # an agent that does not exist at all
        lookup(peer, subject, agent_id="no-such-agent"),
        resume(peer, subject, agent_id="no-such-agent"),
    ]
    for answer in refused:
        assert normalized(answer) == missing, (answer.request.method, answer.request.url)
        record(SUITE, refused_reads=1)
    # Without agent_id, the peer sees only its own (nothing), never the owner's
    assert normalized(lookup(peer, subject)) == missing
    own_list = listing(peer, subject)
    assert own_list.status_code == 200, own_list.text
    assert own_list.json()["data"] == []
    assert resume(peer, subject).json()["data"] == {"status": "none"}
    # A `*` key of another tenant, whose agent has the owner's name: the subject reads exactly as an empty one
    foreign = callers.other_tenant
    for ask in (lookup, listing, resume):
        assert normalized(ask(foreign, subject, agent_id=agent)) == normalized(
            ask(foreign, empty_subject, agent_id=agent)
        )
        assert normalized(ask(foreign, subject)) == normalized(ask(foreign, empty_subject))
        record(SUITE, other_tenant_reads=2)
    assert normalized(lookup(foreign, subject, agent_id=agent)) == missing_checkpoint(foreign)
    # And reading wrote nothing
    assert table_snapshot(table) == before


def test_routes_addressed_by_id_follow_the_same_rule(callers: Callers, table: Any) -> None:
    subject = new_subject()
    checkpoint_id = owned_checkpoint(callers, subject, state={"step": 1}, keep_revisions=3)
    saved = callers.owner.post("/v1/checkpoints", json=save_body(subject_id=subject, state={"step": 2}))
    assert saved.status_code == 200, saved.text
    base = f"/v1/checkpoints/{checkpoint_id}"
    before = table_snapshot(table)
    # Without `*` (or from another tenant): every route answers the missing checkpoint's 404 and changes nothing
    for client in (callers.peer, callers.other_tenant):
        missing = missing_checkpoint(client)
        attempts = [
            client.get(base),
            client.get(f"{base}/revisions"),
            client.get(f"{base}/revisions/1"),
            client.post(f"{base}/restore", json={"revision": 1}),
            client.post(f"{base}/lease", json={"ttl_seconds": 60}),
            client.delete(f"{base}/lease", headers={"Lease-Token": "1." + "0" * 32}),
            client.delete(base),
        ]
        for answer in attempts:
            assert normalized(answer) == missing, (answer.request.method, answer.request.url)
            record(SUITE, refused_by_id=1)
    assert table_snapshot(table) == before
    # With `*`: no agent_id needed
    star = callers.star
    assert star.get(base).json()["data"]["state"] == {"step": 2}
    assert [r["revision"] for r in star.get(f"{base}/revisions").json()["data"]] == [1]
    assert star.get(f"{base}/revisions/1").json()["data"]["state"] == {"step": 1}
    lease = star.post(f"{base}/lease", json={"ttl_seconds": 60, "holder": "lead-session"})
    assert lease.status_code == 201, lease.text
    token = lease.json()["data"]["lease_token"]
    restored = star.post(f"{base}/restore", json={"revision": 1, "lease_token": token})
    assert restored.status_code == 200, restored.text
    assert restored.json()["data"]["agent_id"] == callers.owner_agent
    assert callers.owner.get(base).json()["data"]["state"] == {"step": 1}
    assert star.delete(f"{base}/lease", headers={"Lease-Token": token}).status_code == 200
    assert star.delete(base).status_code == 200
    assert callers.owner.get(base).status_code == 404
    record(SUITE, star_by_id=7)
