"""Purge over real HTTP against `baton serve`: a subject with more checkpoints than one page of the purge (25) goes
in one request, for every agent, and reads as empty afterwards; nothing of another subject goes with it."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import httpx

from baton_checkpoints.store import layout
from tests import proof_counts
from tests.builders import save_body
from tests.e2e.conftest import TABLE
from tests.e2e.server_process import BatonServe
from tests.e2e.test_checkpoints import client_for, created, issue_key

SUITE = "purge (e2e)"
TENANT = "dev"
"""The tenant of `baton serve`'s development key."""
KINDS = ("task_state", "conversation", "workflow", "cursor")
CHECKPOINTS = 30
"""More than one page of the purge (25 keys)."""


def subject_items(table: Any, subject: str) -> list[str]:
    """The sort keys of what the table holds in the subject's partition (read from moto directly)."""
    found = table.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": layout.checkpoint_pk(TENANT, subject)}},
        ConsistentRead=True,
    )
    return sorted(item["sk"]["S"] for item in found["Items"])


def purge(client: httpx.Client, subject: str) -> httpx.Response:
    proof_counts.record(SUITE, purge_requests=1)
    return client.delete(f"/v1/subjects/{quote(subject, safe='')}")


def test_a_subject_with_more_checkpoints_than_a_page_is_purged_whole(
    http: httpx.Client, baton: BatonServe, table: Any
) -> None:
    # Given 30 checkpoints of one subject (8 agents, 4 kinds; a subject id that needs percent-encoding), and a
    # neighbouring subject's checkpoint
    subject = f"e2e-purge {uuid.uuid4().hex}/#é"
    neighbour = f"{subject}-2"
    slots = [(f"agent-{n}", kind) for n in range(8) for kind in KINDS][:CHECKPOINTS]
    saved = [
        created(http.post("/v1/checkpoints", json=save_body(subject_id=subject, agent_id=agent, kind=kind)))
        for agent, kind in slots
    ]
    kept = created(http.post("/v1/checkpoints", json=save_body(subject_id=neighbour)))
    listed = http.get(f"/v1/subjects/{quote(subject, safe='')}/checkpoints", params={"limit": 200})
    assert len(listed.json()["data"]) == CHECKPOINTS
    assert len(subject_items(table, subject)) == CHECKPOINTS

    # When a key without subjects:purge tries, it is refused and nothing goes
    reader = issue_key(http, "operator", ["checkpoints:read", "checkpoints:write", "checkpoints:delete"])
    with client_for(baton, reader) as without_scope:
        refused = purge(without_scope, subject)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "FORBIDDEN"
    assert len(subject_items(table, subject)) == CHECKPOINTS

    # When the subject is purged
    purged = purge(http, subject)

    # Then one request removed all 30, for every agent
    assert purged.status_code == 200, purged.text
    assert purged.headers["content-type"].startswith("application/json")
    body = purged.json()
    assert body["data"] == {"subject_id": subject, "deleted_checkpoints": CHECKPOINTS, "complete": True}
    assert body["meta"]["request_id"]
    assert subject_items(table, subject) == []
    # And the subject reads as empty: its list is empty, every checkpoint answers 404 by id and by lookup
    listed = http.get(f"/v1/subjects/{quote(subject, safe='')}/checkpoints", params={"limit": 200})
    assert (listed.status_code, listed.json()["data"]) == (200, [])
    for checkpoint in saved:
        assert http.get(f"/v1/checkpoints/{checkpoint['checkpoint_id']}").status_code == 404
    for agent, kind in (slots[0], slots[13], slots[-1]):
        lookup = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": kind, "agent_id": agent})
        assert lookup.status_code == 404, lookup.text
    # And the neighbouring subject keeps its checkpoint
    assert http.get(f"/v1/checkpoints/{kept['checkpoint_id']}").status_code == 200

    # When it is purged again, there is nothing left to do, and it says so (never 404)
    again = purge(http, subject)
    assert again.status_code == 200, again.text
    assert again.json()["data"] == {"subject_id": subject, "deleted_checkpoints": 0, "complete": True}
    proof_counts.record(SUITE, checkpoints_purged=CHECKPOINTS, reads_after_purge=CHECKPOINTS + 3)


def test_a_bad_subject_path_is_400_naming_subject_id(http: httpx.Client) -> None:
    answer = http.delete("/v1/subjects/bad%00subject")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [e["pointer"] for e in error["details"]["errors"]] == ["/subject_id"]
