"""History over real HTTP against `baton serve`: kept revisions listed (newest first, paginated) and read, restore as
a new revision (conditional, idempotent), revisions gone with their checkpoint, and saves and restores racing on
concurrent connections with history on."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from baton_checkpoints.store import layout
from tests.builders import save_body
from tests.e2e.conftest import TABLE, table_snapshot
from tests.e2e.server_process import BatonServe
from tests.e2e.test_concurrency import all_at_once
from tests.proof_counts import record

SUITE = "history (e2e)"
TENANT = "dev"
"""The tenant of `baton serve`'s development key."""


def new_subject() -> str:
    return f"e2e-history-{uuid.uuid4().hex}"


def saved_steps(client: httpx.Client, subject_id: str, last: int, **first: Any) -> tuple[str, list[bytes]]:
    """Save `{"step": n}` for n in 1..last, the first save with `first`; the checkpoint's id and, per revision,
    its record (the body of GET by id minus the request id) as it was when that revision was current."""
    checkpoint_id = ""
    records: list[bytes] = []
    for n in range(1, last + 1):
        answer = client.post(
            "/v1/checkpoints", json=save_body(subject_id=subject_id, state={"step": n}, **(first if n == 1 else {}))
        )
        assert answer.status_code in (200, 201), answer.text
        assert answer.json()["data"]["revision"] == n
        checkpoint_id = answer.json()["data"]["checkpoint_id"]
        records.append(record_bytes(client.get(f"/v1/checkpoints/{checkpoint_id}")))
    return checkpoint_id, records


def record_bytes(answer: httpx.Response) -> bytes:
    """The `data` of a record answer exactly as sent (the meta with its request id cut off)."""
    assert answer.status_code == 200, answer.text
    body = answer.content
    return body[: body.rindex(b',"meta":')]


def revisions(client: httpx.Client, checkpoint_id: str, **query: Any) -> httpx.Response:
    record(SUITE, requests=1)
    return client.get(f"/v1/checkpoints/{checkpoint_id}/revisions", params=query)


def revision(client: httpx.Client, checkpoint_id: str, number: int) -> httpx.Response:
    record(SUITE, requests=1)
    return client.get(f"/v1/checkpoints/{checkpoint_id}/revisions/{number}")


def restore(client: httpx.Client, checkpoint_id: str, key: str | None = None, **body: Any) -> httpx.Response:
    record(SUITE, requests=1)
    headers = {"Idempotency-Key": key} if key is not None else None
    return client.post(f"/v1/checkpoints/{checkpoint_id}/restore", json=body, headers=headers)


def listed_numbers(answer: httpx.Response) -> list[int]:
    assert answer.status_code == 200, answer.text
    return [summary["revision"] for summary in answer.json()["data"]]


def current(client: httpx.Client, checkpoint_id: str) -> dict[str, Any]:
    answer = client.get(f"/v1/checkpoints/{checkpoint_id}")
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def partition(table: Any, subject_id: str) -> list[dict[str, Any]]:
    """Every item of the subject's partition, read from moto directly: the checkpoint and its kept revisions."""
    found = table.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": layout.checkpoint_pk(TENANT, subject_id)}},
        ConsistentRead=True,
    )
    return sorted(found["Items"], key=lambda item: item["sk"]["S"])


def test_kept_revisions_are_listed_newest_first_paginated_and_read_as_they_were(http: httpx.Client) -> None:
    subject = new_subject()
    checkpoint_id, records = saved_steps(http, subject, 6, keep_revisions=4)
    # The last four superseded revisions, newest first, as summaries
    listed = revisions(http, checkpoint_id)
    assert listed_numbers(listed) == [5, 4, 3, 2]
    assert listed.json()["meta"]["next_cursor"] is None
    for summary in listed.json()["data"]:
        assert summary["checkpoint_id"] == checkpoint_id
        assert summary["subject_id"] == subject
        assert "state" not in summary
    # Page by page with a cursor, until it is null
    pages: list[list[int]] = []
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = revisions(http, checkpoint_id, **query)
        pages.append(listed_numbers(page))
        cursor = page.json()["meta"]["next_cursor"]
        if cursor is None:
            break
    assert pages == [[5, 4, 3], [2]]
    # Each kept revision reads back as the record was while it was current, with its own ETag
    for number in (5, 4, 3, 2):
        kept = revision(http, checkpoint_id, number)
        assert kept.headers["ETag"] == f'W/"{checkpoint_id}:{number}"'
        assert kept.json()["data"]["state"] == {"step": number}
        assert record_bytes(kept) == records[number - 1], number
    # Out of the window: pruned
    missing = revision(http, checkpoint_id, 1)
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["code"] == "NOT_FOUND"
    record(SUITE, revisions_read=4)


def test_restore_writes_an_old_state_as_a_new_revision(http: httpx.Client) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 4, keep_revisions=3)
    kept = revision(http, checkpoint_id, 2).json()["data"]
    restored = restore(http, checkpoint_id, revision=2, expected_revision=4)
    assert restored.status_code == 200, restored.text
    data = restored.json()["data"]
    assert data["revision"] == 5
    assert data["checkpoint_id"] == checkpoint_id
    assert data["state_hash"] == kept["state_hash"]
    assert data["updated"] is True
    assert restored.headers["ETag"] == f'W/"{checkpoint_id}:5"'
    # Never a rewind: revision 5 holds revision 2's state, and revision 4 became a kept one
    now = current(http, checkpoint_id)
    assert (now["revision"], now["state"]) == (5, {"step": 2})
    assert listed_numbers(revisions(http, checkpoint_id)) == [4, 3, 2]
    assert revision(http, checkpoint_id, 4).json()["data"]["state"] == {"step": 4}
    # Restoring a revision that is not kept (the current one, one never kept, one pruned) finds nothing
    for number in (5, 6, 1):
        answer = restore(http, checkpoint_id, revision=number)
        assert answer.status_code == 404, (number, answer.text)
    assert current(http, checkpoint_id)["revision"] == 5


def test_restore_with_a_stale_expected_revision_is_refused_and_writes_nothing(http: httpx.Client, table: Any) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 3, keep_revisions=5)
    before = partition(table, subject)
    for stale in (1, 2, 4):
        refused = restore(http, checkpoint_id, revision=1, expected_revision=stale)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "REVISION_CONFLICT"
        assert error["details"] == {"current_revision": 3}
        record(SUITE, refused_restores=1)
    assert partition(table, subject) == before
    now = current(http, checkpoint_id)
    assert (now["revision"], now["state"]) == (3, {"step": 3})
    assert listed_numbers(revisions(http, checkpoint_id)) == [2, 1]


def test_restore_with_an_idempotency_key_is_replayed_and_writes_once(http: httpx.Client, table: Any) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 3, keep_revisions=5)
    key = f"e2e-restore-{uuid.uuid4()}"
    first = restore(http, checkpoint_id, key, revision=1)
    assert first.status_code == 200, first.text
    assert first.headers.get("Idempotent-Replayed") is None
    assert first.json()["data"]["revision"] == 4
    after_first = partition(table, subject)
    replay = restore(http, checkpoint_id, key, revision=1)
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["data"] == first.json()["data"]
    assert replay.headers["ETag"] == first.headers["ETag"]
    assert replay.json()["meta"]["request_id"] != first.json()["meta"]["request_id"]
    assert partition(table, subject) == after_first
    # Still the first answer after a later revision
    later = http.post("/v1/checkpoints", json=save_body(subject_id=subject, state={"step": 5}))
    assert later.status_code == 200, later.text
    late_replay = restore(http, checkpoint_id, key, revision=1)
    assert late_replay.status_code == 200, late_replay.text
    assert late_replay.json()["data"] == first.json()["data"]
    assert late_replay.headers["ETag"] == f'W/"{checkpoint_id}:4"'
    assert current(http, checkpoint_id)["revision"] == 5
    # The same key with another request: 422, nothing written
    snapshot = table_snapshot(table)
    reused = restore(http, checkpoint_id, key, revision=2)
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert table_snapshot(table) == snapshot
    record(SUITE, replays=2)


def test_revisions_disappear_when_the_checkpoint_is_deleted(http: httpx.Client) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 4, keep_revisions=5)
    assert listed_numbers(revisions(http, checkpoint_id)) == [3, 2, 1]
    deleted = http.delete(f"/v1/checkpoints/{checkpoint_id}")
    assert deleted.status_code == 200, deleted.text
    missing = http.get("/v1/checkpoints/ckpt_" + "0" * 32)
    gone = [revisions(http, checkpoint_id)] + [revision(http, checkpoint_id, n) for n in (1, 2, 3)]
    gone.append(restore(http, checkpoint_id, revision=1))
    for answer in gone:
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"] == missing.json()["error"]
    # The slot's next checkpoint is a new one, with no past (whatever of the old one the reaper has yet to remove)
    again, _ = saved_steps(http, subject, 2, keep_revisions=5)
    assert again != checkpoint_id
    assert listed_numbers(revisions(http, again)) == [1]
    assert revision(http, again, 1).json()["data"]["state"] == {"step": 1}
    assert revision(http, again, 2).status_code == 404
    assert revisions(http, checkpoint_id).status_code == 404


def test_parallel_saves_with_history_on_lose_no_update_and_keep_each_superseded_state(
    http: httpx.Client, baton: BatonServe
) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 1, keep_revisions=5)
    first_hash = current(http, checkpoint_id)["state_hash"]
    # Eight saves at once: each reads, then writes the checkpoint and the revision it keeps in one transaction
    answers = all_at_once(
        baton,
        8,
        lambda client, i: client.post("/v1/checkpoints", json=save_body(subject_id=subject, state={"writer": i})),
    )
    # Every one is accepted: a writer that meets another's transaction reads again after a short random pause
    accepted = [a for a in answers if a.status_code == 200]
    record(SUITE, parallel_saves=8, requests=8)
    assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers if a.status_code != 200]
    assert len(accepted) >= 1
    by_revision = {a.json()["data"]["revision"]: a.json()["data"]["state_hash"] for a in accepted}
    last = 1 + len(accepted)
    by_revision[1] = first_hash
    assert sorted(by_revision) == list(range(1, last + 1))  # every accepted write counted once, no other write
    assert current(http, checkpoint_id)["revision"] == last
    # The window holds the last five superseded revisions, each with the state its own writer wrote
    window = list(range(last - 1, max(0, last - 6), -1))
    assert listed_numbers(revisions(http, checkpoint_id)) == window
    for number in window:
        kept = revision(http, checkpoint_id, number).json()["data"]
        assert kept["state_hash"] == by_revision[number], number


def test_parallel_restores_with_the_same_expected_revision_have_exactly_one_winner(
    http: httpx.Client, baton: BatonServe, table: Any
) -> None:
    subject = new_subject()
    checkpoint_id, _ = saved_steps(http, subject, 3, keep_revisions=5)
    answers = all_at_once(
        baton,
        8,
        lambda client, i: client.post(
            f"/v1/checkpoints/{checkpoint_id}/restore", json={"revision": 1 + i % 2, "expected_revision": 3}
        ),
    )
    record(SUITE, parallel_restores=8, requests=8)
    assert sorted(a.status_code for a in answers) == [200] + [409] * 7, [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 200)
    assert winner.json()["data"]["revision"] == 4
    for loser in (a for a in answers if a.status_code == 409):
        assert loser.json()["error"]["code"] == "REVISION_CONFLICT"
        assert loser.json()["error"]["details"] == {"current_revision": 4}
    now = current(http, checkpoint_id)
    assert now["revision"] == 4
    assert now["state_hash"] == winner.json()["data"]["state_hash"]
    assert listed_numbers(revisions(http, checkpoint_id)) == [3, 2, 1]
    assert len([item for item in partition(table, subject) if item["sk"]["S"].startswith("V#")]) == 3
