"""Checkpoints over real HTTP: save, read, conditional requests, delete, list, visibility, idempotency."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from baton_checkpoints.store import items, layout
from tests.builders import save_body
from tests.e2e.conftest import TABLE
from tests.e2e.server_process import BatonServe

TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
CHECKPOINT_ID = re.compile(r"^ckpt_[0-9a-f]{32}$")


def new_subject(label: str = "cp") -> str:
    return f"e2e-{label}-{uuid.uuid4().hex}"


def save(client: httpx.Client, subject_id: str, state: Any, kind: str = "task_state", **extra: Any) -> httpx.Response:
    """POST a save (`tests.builders.save_body`) over HTTP; `headers=` goes with the request, not in the body."""
    headers = extra.pop("headers", None)
    return client.post(
        "/v1/checkpoints", json=save_body(subject_id=subject_id, kind=kind, state=state, **extra), headers=headers
    )


def created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def parse_time_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def issue_key(http: httpx.Client, agent_id: str, scopes: list[str], tenant_id: str | None = None) -> str:
    body: dict[str, Any] = {"agent_id": agent_id, "scopes": scopes}
    if tenant_id is not None:
        body["tenant_id"] = tenant_id
    response = http.post("/v1/keys", json=body)
    assert response.status_code == 201, response.text
    secret: str = response.json()["data"]["secret"]
    return secret


def client_for(baton: BatonServe, secret: str) -> httpx.Client:
    return httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)


def without_request_id(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert body["meta"]["request_id"], body
    return {**body, "meta": {k: v for k, v in body["meta"].items() if k != "request_id"}}


def bytes_without_request_id(response: httpx.Response) -> bytes:
    request_id = response.json()["meta"]["request_id"]
    return response.content.replace(request_id.encode("utf-8"), b"<request_id>")


def expire_in_table(table: Any, subject_id: str, agent_id: str = "operator", kind: str = "task_state") -> None:
    """Move the item's expiry into the past, as if its ttl had run out (expiry is enforced on read)."""
    past = f"{time.time() - 5:.3f}"
    table.update_item(
        TableName=TABLE,
        Key=layout.checkpoint_key("dev", subject_id, agent_id, kind),
        UpdateExpression="SET #expires = :past",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeNames={"#expires": items.EXPIRES},
        ExpressionAttributeValues={":past": {"N": past}},
    )


# -- save ---------------------------------------------------------------------------------------------------


def test_create_answers_201_and_update_200_with_the_same_id_and_a_weak_etag(http: httpx.Client) -> None:
    # Given a subject nothing was saved for
    subject = new_subject()
    first = save(http, subject, {"step": 1})
    second = save(http, subject, {"step": 2})
    # Then the first creates at revision 1 and the second updates the same checkpoint to revision 2
    assert first.status_code == 201, first.text
    assert second.status_code == 200, second.text
    one, two = first.json()["data"], second.json()["data"]
    assert CHECKPOINT_ID.match(one["checkpoint_id"])
    assert two["checkpoint_id"] == one["checkpoint_id"]
    assert (one["revision"], one["updated"]) == (1, False)
    assert (two["revision"], two["updated"]) == (2, True)
    assert first.headers["ETag"] == f'W/"{one["checkpoint_id"]}:1"'
    assert second.headers["ETag"] == f'W/"{one["checkpoint_id"]}:2"'
    assert first.json()["meta"]["request_id"] != second.json()["meta"]["request_id"]


def test_save_answers_the_contract_fields(http: httpx.Client) -> None:
    # Given a state whose canonical JSON is known
    subject = new_subject()
    state = {"b": [1, 2], "a": "ü"}
    canonical = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    data = created(save(http, subject, state, kind="workflow"))
    # Then the answer has exactly the save fields, with the hash and size of the canonical JSON
    assert set(data) == {
        "checkpoint_id",
        "subject_id",
        "agent_id",
        "kind",
        "revision",
        "status",
        "state_hash",
        "state_bytes",
        "expires_at",
        "updated",
    }
    assert data["subject_id"] == subject
    assert data["agent_id"] == "operator"
    assert data["kind"] == "workflow"
    assert data["status"] == "active"
    assert data["state_bytes"] == len(canonical)
    assert data["state_hash"] == hashlib.sha256(canonical).hexdigest()
    assert TIME.match(data["expires_at"])


# -- read -----------------------------------------------------------------------------------------------------


def test_lookup_and_get_by_id_return_the_full_record_with_parsed_state_and_times(http: httpx.Client) -> None:
    # Given a checkpoint saved twice with a ttl of one hour
    subject = new_subject()
    created(save(http, subject, {"step": 1}, ttl_seconds=3600))
    state = {"step": 2, "notes": ["ü", None, 1.5, True], "nested": {"z": 1, "a": 2}}
    saved = created(save(http, subject, state))
    checkpoint_id = saved["checkpoint_id"]
    # When it is looked up by (subject, kind) and fetched by id
    lookup = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    by_id = http.get(f"/v1/checkpoints/{checkpoint_id}")
    # Then both answer the same record: the state parsed, revision 2, RFC 3339 times, expiry = update + ttl
    assert lookup.status_code == 200, lookup.text
    assert by_id.status_code == 200, by_id.text
    record = lookup.json()["data"]
    assert by_id.json()["data"] == record
    assert record["checkpoint_id"] == checkpoint_id
    assert record["state"] == state
    assert record["revision"] == 2
    assert record["ttl_seconds"] == 3600, "a save without ttl_seconds keeps the stored one"
    for name in ("expires_at", "created_at", "updated_at"):
        assert TIME.match(record[name]), (name, record[name])
    assert parse_time_ms(record["expires_at"]) == parse_time_ms(record["updated_at"]) + 3600 * 1000
    assert parse_time_ms(record["created_at"]) <= parse_time_ms(record["updated_at"])
    assert record["expires_at"] == saved["expires_at"]
    assert lookup.headers["ETag"] == by_id.headers["ETag"] == f'W/"{checkpoint_id}:2"'


def test_if_none_match_with_the_current_etag_answers_304_without_a_body(http: httpx.Client) -> None:
    # Given a checkpoint and its current ETag
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"step": 1}))["checkpoint_id"]
    etag = http.get(f"/v1/checkpoints/{checkpoint_id}").headers["ETag"]
    # When it is read again with If-None-Match, by id and by lookup
    by_id = http.get(f"/v1/checkpoints/{checkpoint_id}", headers={"If-None-Match": etag})
    lookup = http.get(
        "/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}, headers={"If-None-Match": etag}
    )
    # Then both answer 304 with no body and the same tag
    for response in (by_id, lookup):
        assert response.status_code == 304, response.text
        assert response.content == b""
        assert response.headers["ETag"] == etag


def test_if_none_match_with_a_stale_etag_answers_200(http: httpx.Client) -> None:
    # Given a checkpoint whose tag was taken before a later save
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"step": 1}))["checkpoint_id"]
    stale = f'W/"{checkpoint_id}:1"'
    created(save(http, subject, {"step": 2}))
    response = http.get(f"/v1/checkpoints/{checkpoint_id}", headers={"If-None-Match": stale})
    # Then the new revision is sent in full
    assert response.status_code == 200, response.text
    assert response.json()["data"]["state"] == {"step": 2}
    assert response.headers["ETag"] == f'W/"{checkpoint_id}:2"'


# -- delete ---------------------------------------------------------------------------------------------------


def test_delete_answers_deleted_and_a_second_delete_404(http: httpx.Client) -> None:
    # Given a checkpoint
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"step": 1}))["checkpoint_id"]
    # When it is deleted twice
    first = http.delete(f"/v1/checkpoints/{checkpoint_id}")
    second = http.delete(f"/v1/checkpoints/{checkpoint_id}")
    # Then the first deletes it, the second finds nothing, and reads find nothing either
    assert first.status_code == 200, first.text
    assert first.json()["data"] == {"checkpoint_id": checkpoint_id, "deleted": True}
    assert second.status_code == 404, second.text
    assert second.json()["error"]["code"] == "NOT_FOUND"
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 404
    assert http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).status_code == 404


def test_delete_with_a_stale_if_match_answers_409_and_deletes_nothing(http: httpx.Client) -> None:
    # Given a checkpoint at revision 2 and the tag of revision 1
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"step": 1}))["checkpoint_id"]
    created(save(http, subject, {"step": 2}))
    response = http.delete(f"/v1/checkpoints/{checkpoint_id}", headers={"If-Match": f'W/"{checkpoint_id}:1"'})
    # Then the delete is refused with the current revision, and the checkpoint is still there
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "REVISION_CONFLICT"
    assert error["details"]["current_revision"] == 2
    still = http.get(f"/v1/checkpoints/{checkpoint_id}")
    assert still.status_code == 200, still.text
    assert still.json()["data"]["revision"] == 2


def test_delete_with_the_current_if_match_deletes(http: httpx.Client) -> None:
    # Given a checkpoint and its current tag
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"step": 1}))["checkpoint_id"]
    etag = http.get(f"/v1/checkpoints/{checkpoint_id}").headers["ETag"]
    response = http.delete(f"/v1/checkpoints/{checkpoint_id}", headers={"If-Match": etag})
    assert response.status_code == 200, response.text
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 404


# -- list -----------------------------------------------------------------------------------------------------


def save_three_kinds(http: httpx.Client, subject: str) -> list[str]:
    """Saves task_state, then workflow, then cursor, each at a later millisecond; returns their ids."""
    ids = []
    for kind in ("task_state", "workflow", "cursor"):
        ids.append(created(save(http, subject, {"kind": kind}, kind=kind))["checkpoint_id"])
        time.sleep(0.005)  # distinct updated_at milliseconds, so "newest first" has one right answer
    return ids


def test_list_returns_summaries_newest_first(http: httpx.Client) -> None:
    # Given three checkpoints of one subject, saved one after the other
    subject = new_subject()
    ids = save_three_kinds(http, subject)
    # When the subject's checkpoints are listed
    response = http.get(f"/v1/subjects/{subject}/checkpoints")
    # Then they come as summaries (no state), newest updated_at first, on one page
    assert response.status_code == 200, response.text
    body = response.json()
    items = body["data"]
    assert [item["checkpoint_id"] for item in items] == list(reversed(ids))
    assert all("state" not in item for item in items)
    assert all(item["subject_id"] == subject for item in items)
    updated = [item["updated_at"] for item in items]
    assert updated == sorted(updated, reverse=True)
    assert body["meta"]["next_cursor"] is None
    assert body["meta"]["request_id"]


def test_list_paginates_one_by_one_until_next_cursor_is_null(http: httpx.Client) -> None:
    # Given three checkpoints of one subject
    subject = new_subject()
    ids = save_three_kinds(http, subject)
    # When the list is walked with limit=1
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1}
        if cursor is not None:
            params["cursor"] = cursor
        response = http.get(f"/v1/subjects/{subject}/checkpoints", params=params)
        assert response.status_code == 200, response.text
        pages.append([item["checkpoint_id"] for item in response.json()["data"]])
        cursor = response.json()["meta"]["next_cursor"]
        if cursor is None or len(pages) > 5:
            break
    # Then each page holds one checkpoint, newest first, and the third (last) page has no next_cursor
    assert pages == [[ids[2]], [ids[1]], [ids[0]]]


def test_a_cursor_reused_with_another_query_is_refused_naming_cursor(http: httpx.Client) -> None:
    # Given a cursor from the first page of an unfiltered list
    subject = new_subject()
    save_three_kinds(http, subject)
    first = http.get(f"/v1/subjects/{subject}/checkpoints", params={"limit": 1})
    cursor = first.json()["meta"]["next_cursor"]
    assert cursor, first.text
    # When it is sent with a kind filter
    response = http.get(
        f"/v1/subjects/{subject}/checkpoints", params={"limit": 1, "kind": "workflow", "cursor": cursor}
    )
    # Then it is a validation error naming cursor
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert "cursor" in error["message"]
    assert [e["pointer"] for e in error["details"]["errors"]] == ["/cursor"]


def test_a_cursor_reused_for_another_subject_is_refused(http: httpx.Client) -> None:
    # Given a cursor from one subject's list
    subject = new_subject()
    save_three_kinds(http, subject)
    cursor = http.get(f"/v1/subjects/{subject}/checkpoints", params={"limit": 1}).json()["meta"]["next_cursor"]
    assert cursor
    # When it is sent to another subject's list
    response = http.get(f"/v1/subjects/{new_subject()}/checkpoints", params={"limit": 1, "cursor": cursor})
    # Then it is refused naming cursor
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["errors"][0]["pointer"] == "/cursor"


def test_list_leaves_out_expired_checkpoints(http: httpx.Client, table: Any) -> None:
    # Given two checkpoints of a subject, one of them expired
    subject = new_subject()
    created(save(http, subject, {"k": 1}, kind="task_state", ttl_seconds=60))
    kept = created(save(http, subject, {"k": 2}, kind="workflow"))["checkpoint_id"]
    expire_in_table(table, subject, kind="task_state")
    response = http.get(f"/v1/subjects/{subject}/checkpoints")
    # Then only the live one appears
    assert response.status_code == 200, response.text
    assert [item["checkpoint_id"] for item in response.json()["data"]] == [kept]


# -- what the caller may not see answers the same 404 ------------------------------------------------------------


def test_missing_expired_other_agent_and_other_tenant_answer_identical_404s(
    http: httpx.Client, baton: BatonServe, table: Any
) -> None:
    # Given a live checkpoint of the operator, an expired one, and keys of another agent and another tenant
    subject = new_subject()
    live_id = created(save(http, subject, {"mine": True}))["checkpoint_id"]
    expired_subject = new_subject("expired")
    expired_id = created(save(http, expired_subject, {"old": True}, ttl_seconds=60))["checkpoint_id"]
    expire_in_table(table, expired_subject)
    agent_secret = issue_key(http, f"agent-{uuid.uuid4().hex[:8]}", ["checkpoints:read", "checkpoints:write"])
    tenant_secret = issue_key(http, "operator", ["*"], tenant_id="other")
    missing_id = "ckpt_" + uuid.uuid4().hex
    with client_for(baton, agent_secret) as agent, client_for(baton, tenant_secret) as other_tenant:
        answers = {
            "missing by id": http.get(f"/v1/checkpoints/{missing_id}"),
            "missing by lookup": http.get("/v1/checkpoints", params={"subject_id": new_subject(), "kind": "cursor"}),
            "expired by id": http.get(f"/v1/checkpoints/{expired_id}"),
            "expired by lookup": http.get(
                "/v1/checkpoints", params={"subject_id": expired_subject, "kind": "task_state"}
            ),
            "other agent by id": agent.get(f"/v1/checkpoints/{live_id}"),
            "other agent by lookup": agent.get(
                "/v1/checkpoints", params={"subject_id": subject, "kind": "task_state", "agent_id": "operator"}
            ),
            "other agent by own lookup": agent.get(
                "/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}
            ),
            "other tenant by id": other_tenant.get(f"/v1/checkpoints/{live_id}"),
            "other tenant by lookup": other_tenant.get(
                "/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}
            ),
        }
    # Then every answer is the same 404, byte for byte but for its request id
    reference = answers["missing by id"]
    assert reference.status_code == 404, reference.text
    assert without_request_id(reference) == {
        "error": {"code": "NOT_FOUND", "message": "Resource was not found."},
        "meta": {},
    }
    for name, response in answers.items():
        assert response.status_code == 404, (name, response.text)
        assert without_request_id(response) == without_request_id(reference), name
        assert bytes_without_request_id(response) == bytes_without_request_id(reference), name
        assert response.headers.get("content-type") == reference.headers.get("content-type"), name
        assert "etag" not in response.headers, name
    request_ids = {r.json()["meta"]["request_id"] for r in answers.values()}
    assert len(request_ids) == len(answers)
    # And the operator still sees its own checkpoint
    assert http.get(f"/v1/checkpoints/{live_id}").status_code == 200


def test_another_agent_cannot_delete_or_list_the_operators_checkpoint(http: httpx.Client, baton: BatonServe) -> None:
    # Given the operator's checkpoint and another agent's key that may read, write and delete
    subject = new_subject()
    checkpoint_id = created(save(http, subject, {"mine": True}))["checkpoint_id"]
    secret = issue_key(http, f"agent-{uuid.uuid4().hex[:8]}", ["checkpoints:read", "checkpoints:delete"])
    # When that agent deletes it and lists the subject
    with client_for(baton, secret) as agent:
        deleted = agent.delete(f"/v1/checkpoints/{checkpoint_id}")
        listed = agent.get(f"/v1/subjects/{subject}/checkpoints")
    # Then the delete is a 404, the list is empty, and the checkpoint is still there
    assert deleted.status_code == 404, deleted.text
    assert deleted.json()["error"]["message"] == "Resource was not found."
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"] == []
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 200


def test_an_expired_checkpoint_saved_over_is_a_new_checkpoint(http: httpx.Client, table: Any) -> None:
    # Given a checkpoint at revision 2 whose ttl has run out
    subject = new_subject()
    old_id = created(save(http, subject, {"step": 1}, ttl_seconds=60))["checkpoint_id"]
    created(save(http, subject, {"step": 2}))
    expire_in_table(table, subject)
    # When the same (subject, kind) is saved again
    response = save(http, subject, {"step": "fresh"})
    # Then it is a create: a new id, revision 1, 201, with the default ttl rather than the expired one's
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["checkpoint_id"] != old_id
    assert CHECKPOINT_ID.match(data["checkpoint_id"])
    assert (data["revision"], data["updated"]) == (1, False)
    assert response.headers["ETag"] == f'W/"{data["checkpoint_id"]}:1"'
    record = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).json()["data"]
    assert record["checkpoint_id"] == data["checkpoint_id"]
    assert record["state"] == {"step": "fresh"}
    assert record["ttl_seconds"] == 86_400
    assert record["created_at"] == record["updated_at"]
    # And the old id is gone
    assert http.get(f"/v1/checkpoints/{old_id}").status_code == 404


# -- idempotency ----------------------------------------------------------------------------------------------


def test_an_idempotent_replay_after_later_revisions_repeats_the_first_answer(http: httpx.Client) -> None:
    # Given a save with an Idempotency-Key, followed by two later revisions
    subject = new_subject()
    key = f"e2e-{uuid.uuid4()}"
    body = {"subject_id": subject, "kind": "task_state", "state": {"step": 1}}
    first = http.post("/v1/checkpoints", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 201, first.text
    created(save(http, subject, {"step": 2}))
    created(save(http, subject, {"step": 3}))
    # When the first request is sent again with the same key
    replay = http.post("/v1/checkpoints", json=body, headers={"Idempotency-Key": key})
    # Then it repeats the first answer: status, data and ETag, with its own request id, marked as a replay
    assert replay.status_code == 201, replay.text
    assert replay.json()["data"] == first.json()["data"]
    assert replay.json()["data"]["revision"] == 1
    assert replay.headers["ETag"] == first.headers["ETag"]
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert "idempotent-replayed" not in first.headers
    assert replay.json()["meta"]["request_id"] != first.json()["meta"]["request_id"]
    # And nothing was written again
    current = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).json()["data"]
    assert (current["revision"], current["state"]) == (3, {"step": 3})


def test_the_same_idempotency_key_with_another_body_answers_422(http: httpx.Client) -> None:
    # Given a save with an Idempotency-Key
    subject = new_subject()
    key = f"e2e-{uuid.uuid4()}"
    first = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"step": 1}},
        headers={"Idempotency-Key": key},
    )
    assert first.status_code == 201, first.text
    # When the same key is sent with a different body
    reused = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"step": 2}},
        headers={"Idempotency-Key": key},
    )
    # Then it is refused and nothing is written
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert "Idempotency-Key" in reused.json()["error"]["message"]
    current = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).json()["data"]
    assert (current["revision"], current["state"]) == (1, {"step": 1})


def test_an_idempotency_key_is_not_consumed_by_a_rejected_request(http: httpx.Client) -> None:
    # Given a save with an Idempotency-Key that is refused (stale expected_revision on a missing checkpoint)
    subject = new_subject()
    key = f"e2e-{uuid.uuid4()}"
    refused = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"step": 1}, "expected_revision": 3},
        headers={"Idempotency-Key": key},
    )
    assert refused.status_code == 409, refused.text
    # When the same key is used for a corrected request
    accepted = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"step": 1}},
        headers={"Idempotency-Key": key},
    )
    # Then the corrected request is performed, not refused as a reuse
    assert accepted.status_code == 201, accepted.text
    assert "idempotent-replayed" not in accepted.headers


# -- lifecycle ------------------------------------------------------------------------------------------------


def test_a_completed_checkpoint_takes_no_more_saves_but_can_be_deleted(http: httpx.Client) -> None:
    # Given a checkpoint saved with status completed
    subject = new_subject()
    created(save(http, subject, {"step": 1}))
    done = created(save(http, subject, {"step": "done"}, status="completed"))
    assert (done["status"], done["revision"]) == ("completed", 2)
    # When it is saved again, with or without a status
    again = save(http, subject, {"step": 3})
    reopen = save(http, subject, {"step": 3}, status="active")
    # Then both saves are refused as closed and the checkpoint is unchanged
    for response in (again, reopen):
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "CHECKPOINT_CLOSED"
    record = http.get(f"/v1/checkpoints/{done['checkpoint_id']}").json()["data"]
    assert (record["revision"], record["status"], record["state"]) == (2, "completed", {"step": "done"})
    # And it can still be deleted
    deleted = http.delete(f"/v1/checkpoints/{done['checkpoint_id']}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["data"] == {"checkpoint_id": done["checkpoint_id"], "deleted": True}


def test_closed_is_ranked_before_revision_conflict(http: httpx.Client) -> None:
    # Given a cancelled checkpoint at revision 1
    subject = new_subject()
    created(save(http, subject, {"step": 1}, status="cancelled"))
    # When it is saved with a wrong expected_revision
    response = save(http, subject, {"step": 2}, expected_revision=7)
    # Then the closed checkpoint answers first
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "CHECKPOINT_CLOSED"


# -- subjects with any characters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    ["a/b #ü 漢", "C#dev#x", "%2F..%20?&=+", "  leading and trailing  "],
    ids=["slash-hash-unicode", "looks-like-a-key", "percent-and-query-characters", "spaces"],
)
def test_a_subject_with_any_characters_round_trips(http: httpx.Client, prefix: str) -> None:
    # Given a subject id with spaces, slashes, '#', percent signs or unicode
    subject = f"{prefix}{uuid.uuid4().hex}"
    # When it is saved, looked up and listed (URL-encoded in the path)
    saved = save(http, subject, {"who": subject})
    lookup = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    listed = http.get(f"/v1/subjects/{quote(subject, safe='')}/checkpoints")
    # Then each answers that very subject
    assert saved.status_code == 201, saved.text
    assert saved.json()["data"]["subject_id"] == subject
    assert lookup.status_code == 200, lookup.text
    assert lookup.json()["data"]["subject_id"] == subject
    assert lookup.json()["data"]["state"] == {"who": subject}
    assert listed.status_code == 200, listed.text
    assert [item["checkpoint_id"] for item in listed.json()["data"]] == [saved.json()["data"]["checkpoint_id"]]
    assert listed.json()["data"][0]["subject_id"] == subject


def test_subjects_that_share_a_prefix_do_not_mix(http: httpx.Client) -> None:
    # Given two subjects, one the other's prefix followed by '#'
    base = new_subject("prefix")
    created(save(http, base, {"who": "base"}))
    created(save(http, f"{base}#task_state", {"who": "longer"}))
    # When the shorter one is listed and looked up
    listed = http.get(f"/v1/subjects/{quote(base, safe='')}/checkpoints")
    lookup = http.get("/v1/checkpoints", params={"subject_id": base, "kind": "task_state"})
    # Then only its own checkpoint answers
    assert [item["subject_id"] for item in listed.json()["data"]] == [base]
    assert lookup.json()["data"]["state"] == {"who": "base"}
