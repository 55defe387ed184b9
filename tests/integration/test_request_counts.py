"""DynamoDB requests per operation, counted exactly: the budgets of performance.md's "Counts" table.

Every test authenticates once first (a warm-up call), so the key record is cached in the container and the
counts below are the operation's own, unless the test is about authentication itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import time_machine

from tests.integration.conftest import put_key
from tests.integration.driver import ApiDriver, CallCounter, Result

PLAIN = {"idempotency-key": None}
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
READER_SECRET = "btn_test_reader_secret_0001"
SUBJECT = "user_rama"
KIND = "task_state"


def body(state: Any = None, **extra: Any) -> dict[str, Any]:
    """A save request body for the test subject."""
    return {"subject_id": SUBJECT, "kind": KIND, "state": state if state is not None else {"step": 1}, **extra}


def warm_up(api: ApiDriver, counter: CallCounter) -> None:
    """Authenticate once so the key record is cached, then start counting from zero."""
    assert api.invoke("list_keys").status == 200
    counter.reset()


def plain_save(api: ApiDriver, **fields: Any) -> Result:
    return api.invoke("save_checkpoint", body=body(**fields), headers=PLAIN)


def test_plain_save_that_creates_costs_exactly_one_update_item(api: ApiDriver, counter: CallCounter) -> None:
    # Given an authenticated caller and no checkpoint yet
    warm_up(api, counter)
    # When it saves without an Idempotency-Key
    created = plain_save(api)
    # Then one conditional UpdateItem created it, and nothing else was asked of DynamoDB
    assert created.status == 201
    assert dict(counter.calls) == {"UpdateItem": 1}


def test_plain_save_that_updates_costs_exactly_one_update_item(api: ApiDriver, counter: CallCounter) -> None:
    # Given an existing checkpoint
    assert plain_save(api, state={"step": 1}).status == 201
    counter.reset()
    # When it is saved again without an Idempotency-Key
    updated = plain_save(api, state={"step": 2})
    # Then one conditional UpdateItem updated it: no read first
    assert updated.status == 200
    assert updated.data["revision"] == 2
    assert dict(counter.calls) == {"UpdateItem": 1}


def test_save_with_idempotency_key_costs_one_batch_get_and_one_transaction(
    api: ApiDriver, counter: CallCounter
) -> None:
    # Given an authenticated caller
    warm_up(api, counter)
    # When it saves with an Idempotency-Key
    saved = api.invoke("save_checkpoint", body=body(), headers={"idempotency-key": "count-me"})
    # Then one consistent BatchGetItem and one TransactWriteItems did it
    assert saved.status == 201
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_save_with_idempotency_key_over_an_existing_checkpoint_costs_the_same(
    api: ApiDriver, counter: CallCounter
) -> None:
    # Given an existing checkpoint
    assert plain_save(api).status == 201
    counter.reset()
    # When it is updated with an Idempotency-Key
    saved = api.invoke("save_checkpoint", body=body(state={"step": 2}), headers={"idempotency-key": "update-1"})
    # Then still one BatchGetItem and one TransactWriteItems
    assert saved.status == 200
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_idempotent_replay_costs_one_batch_get_and_writes_nothing(api: ApiDriver, counter: CallCounter) -> None:
    # Given a save made with an Idempotency-Key
    headers = {"idempotency-key": "replay-me"}
    assert api.invoke("save_checkpoint", body=body(), headers=headers).status == 201
    counter.reset()
    # When the same request is sent again
    replay = api.invoke("save_checkpoint", body=body(), headers=headers)
    # Then it is answered from the one read
    assert replay.header("Idempotent-Replayed") == "true"
    assert dict(counter.calls) == {"BatchGetItem": 1}


def test_lookup_costs_one_get_item(api: ApiDriver, counter: CallCounter) -> None:
    # Given a checkpoint
    assert plain_save(api).status == 201
    counter.reset()
    # When it is looked up by (subject_id, kind)
    found = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    # Then one consistent GetItem answered
    assert found.status == 200
    assert dict(counter.calls) == {"GetItem": 1}


def test_get_by_id_costs_one_index_query_and_one_get_item(api: ApiDriver, counter: CallCounter) -> None:
    # Given a checkpoint
    checkpoint_id = plain_save(api).data["checkpoint_id"]
    counter.reset()
    # When it is read by its id
    found = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")
    # Then one Query of the id index and one consistent GetItem answered
    assert found.status == 200
    assert dict(counter.calls) == {"Query": 1, "GetItem": 1}


def test_list_page_costs_one_query(api: ApiDriver, counter: CallCounter) -> None:
    # Given two checkpoints of a subject
    assert plain_save(api).status == 201
    assert api.invoke("save_checkpoint", body=body() | {"kind": "cursor"}, headers=PLAIN).status == 201
    counter.reset()
    # When the subject's checkpoints are listed
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints", query={})
    # Then one Query produced the page
    assert listed.status == 200
    assert len(listed.data) == 2
    assert dict(counter.calls) == {"Query": 1}


def test_delete_costs_one_index_query_and_one_delete_item(api: ApiDriver, counter: CallCounter) -> None:
    # Given a checkpoint
    checkpoint_id = plain_save(api).data["checkpoint_id"]
    counter.reset()
    # When it is deleted by id
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None})
    # Then one Query of the id index and one conditional DeleteItem did it
    assert deleted.status == 200
    assert dict(counter.calls) == {"Query": 1, "DeleteItem": 1}


def test_authentication_costs_one_get_item_until_the_key_is_cached_then_none(
    api: ApiDriver, counter: CallCounter
) -> None:
    # Given a container that has not seen the operator key yet
    # When the same authenticated request (one Query of its own) is made twice
    first = api.invoke("list_keys")
    first_calls = dict(counter.calls)
    counter.reset()
    second = api.invoke("list_keys")
    second_calls = dict(counter.calls)
    # Then the first paid one GetItem for the key record and the second none
    assert first.status == second.status == 200
    assert first_calls == {"GetItem": 1, "Query": 1}
    assert second_calls == {"Query": 1}


def test_health_touches_no_aws(api: ApiDriver, counter: CallCounter) -> None:
    # Given the health event without any key
    # When it is sent
    health = api.invoke("health", headers={"authorization": None})
    # Then it answers without a single DynamoDB request
    assert health.status == 200
    assert counter.total == 0


def test_plain_save_over_an_expired_item_costs_at_most_one_more_conditional_write(
    api: ApiDriver, counter: CallCounter
) -> None:
    start = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        # Given a checkpoint that expired a minute ago and that TTL has not removed yet
        first = plain_save(api, ttl_seconds=60)
        assert first.status == 201
        traveller.shift(timedelta(seconds=120))
        warm_up(api, counter)
        # When it is saved over without an Idempotency-Key
        again = plain_save(api, state={"step": 2})
        # Then the failed UpdateItem is followed by one conditional PutItem, and a new checkpoint is created
        assert again.status == 201
        assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
        assert dict(counter.calls) == {"UpdateItem": 1, "PutItem": 1}


def test_plain_save_over_an_item_whose_expiry_was_written_into_the_past_costs_one_more_write(
    api: ApiDriver, services: Any, counter: CallCounter
) -> None:
    # Given a checkpoint whose expires_at lies in the past, as DynamoDB's TTL has not removed it yet
    first = plain_save(api)
    assert first.status == 201
    services.dynamodb.update_item(
        TableName=services.settings.table_name,
        Key={"pk": {"S": f"C#acme#{SUBJECT}"}, "sk": {"S": f"C#operator#{KIND}"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1700000000.000"}},
    )
    counter.reset()
    # When it is saved over
    again = plain_save(api, state={"step": 2})
    # Then one UpdateItem and one PutItem made a new checkpoint
    assert again.status == 201
    assert again.data["revision"] == 1
    assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
    assert dict(counter.calls) == {"UpdateItem": 1, "PutItem": 1}


def test_idempotent_save_over_an_expired_item_still_costs_one_read_and_one_transaction(
    api: ApiDriver, counter: CallCounter
) -> None:
    start = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        # Given an expired checkpoint not yet removed
        assert plain_save(api, ttl_seconds=60).status == 201
        traveller.shift(timedelta(seconds=120))
        warm_up(api, counter)
        # When it is saved over with an Idempotency-Key
        again = api.invoke("save_checkpoint", body=body(state={"step": 2}), headers={"idempotency-key": "late"})
        # Then the read already saw the expiry: no extra write
        assert again.status == 201
        assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_requests_rejected_before_the_store_make_no_write_call(
    api: ApiDriver, services: Any, counter: CallCounter
) -> None:
    # Given an existing checkpoint written with an Idempotency-Key, and a read-only key
    assert api.invoke("save_checkpoint", body=body(), headers={"idempotency-key": "used"}).status == 201
    put_key(services, READER_SECRET, "acme", "operator", {"checkpoints:read"}, "key_" + "b" * 32)
    assert api.invoke("lookup_checkpoint", secret=READER_SECRET).status == 200
    warm_up(api, counter)
    # When requests are rejected: invalid body, no key, wrong media type, too-large state, reused idempotency key
    rejected = [
        api.invoke("save_checkpoint", body={"subject_id": SUBJECT, "kind": "nope", "state": {}}, headers=PLAIN),
        api.invoke("save_checkpoint", body=body(), headers={"authorization": None, **PLAIN}),
        api.invoke("save_checkpoint", body=body(), headers=PLAIN, secret=READER_SECRET),
        api.invoke("save_checkpoint", body=body(), headers={"content-type": "text/plain", **PLAIN}),
        plain_save(api, state={"blob": "x" * 70_000}),
        api.invoke("save_checkpoint", body=body(state={"other": True}), headers={"idempotency-key": "used"}),
    ]
    # Then each was refused, and DynamoDB received no write of any kind
    assert [r.status for r in rejected] == [400, 401, 403, 415, 413, 422]
    assert not WRITE_OPERATIONS & set(counter.calls), dict(counter.calls)


def test_a_revision_conflict_costs_only_the_one_conditional_write_that_failed(
    api: ApiDriver, counter: CallCounter
) -> None:
    # Given a checkpoint at revision 1
    assert plain_save(api).status == 201
    counter.reset()
    # When a plain save expects revision 7
    conflict = plain_save(api, state={"step": 2}, expected_revision=7)
    # Then the answer comes from the failed condition itself (no second read, no retry), and nothing changed
    assert conflict.status == 409
    assert conflict.error["details"] == {"current_revision": 1}
    assert dict(counter.calls) == {"UpdateItem": 1}
    current = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    assert current.data["revision"] == 1
    assert current.data["state"] == {"step": 1}


def test_an_idempotent_revision_conflict_reads_once_and_writes_nothing(api: ApiDriver, counter: CallCounter) -> None:
    # Given a checkpoint at revision 1
    assert plain_save(api).status == 201
    counter.reset()
    # When a save with an Idempotency-Key expects revision 7
    conflict = api.invoke("save_checkpoint", body=body(expected_revision=7), headers={"idempotency-key": "c"})
    # Then the read decided it: no transaction was attempted
    assert conflict.status == 409
    assert dict(counter.calls) == {"BatchGetItem": 1}


def test_a_validation_error_makes_no_dynamodb_call_at_all(api: ApiDriver, counter: CallCounter) -> None:
    # Given an authenticated caller
    warm_up(api, counter)
    # When it sends a save whose body breaks the schema
    rejected = api.invoke("save_checkpoint", body={"subject_id": SUBJECT, "kind": KIND}, headers=PLAIN)
    # Then it is refused before DynamoDB is asked anything
    assert rejected.status == 400
    assert counter.total == 0
