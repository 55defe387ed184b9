"""DynamoDB requests per operation, counted exactly: the budgets of performance.md's "Counts" table.

Every test authenticates once first (a warm-up call), so the key record is cached in the container and the
counts below are the operation's own, unless the test is about authentication itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.store import items, layout, schema, sizes
from tests.builders import KIND, PLAIN, SUBJECT, lookup, save, save_body
from tests.integration.conftest import TABLE, measured, put_key
from tests.integration.driver import ApiDriver, CallCounter, CapacityMeter

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
READER_SECRET = "btn_test_reader_secret_0001"


def warm_up(api: ApiDriver, counter: CallCounter) -> None:
    """Authenticate once so the key record is cached, then start counting from zero."""
    assert api.invoke("list_keys").status == 200
    counter.reset()


def test_plain_save_that_creates_costs_exactly_one_update_item(api: ApiDriver, counter: CallCounter) -> None:
    warm_up(api, counter)
    created = save(api)
    assert created.status == 201
    assert dict(counter.calls) == {"UpdateItem": 1}


def test_plain_save_that_updates_costs_exactly_one_update_item(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api, state={"step": 1}).status == 201
    counter.reset()
    updated = save(api, state={"step": 2})
    # No read first
    assert updated.status == 200
    assert updated.data["revision"] == 2
    assert dict(counter.calls) == {"UpdateItem": 1}


def test_save_with_idempotency_key_costs_one_batch_get_and_one_transaction(
    api: ApiDriver, counter: CallCounter
) -> None:
    warm_up(api, counter)
    saved = save(api, "count-me")
    assert saved.status == 201
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_save_with_idempotency_key_over_an_existing_checkpoint_costs_the_same(
    api: ApiDriver, counter: CallCounter
) -> None:
    assert save(api).status == 201
    counter.reset()
    saved = save(api, "update-1", state={"step": 2})
    assert saved.status == 200
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_a_keyed_save_costs_its_record_and_the_records_index_entry_twice_in_its_transaction(
    api: ApiDriver, aws: Any, counter: CallCounter, capacity: CapacityMeter, engine: str
) -> None:
    # Given a checkpoint of a small state
    assert save(api).status == 201
    key = layout.checkpoint_key("acme", SUBJECT, "operator", KIND)
    before = aws.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    counter.reset()
    capacity.reset()
    # When it is saved again with an Idempotency-Key
    assert save(api, "keyed", state={"step": 2}).status == 200
    after = aws.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    record = aws.get_item(TableName=TABLE, Key=layout.idempotency_key("acme", "operator", "keyed"), ConsistentRead=True)
    # Then one transaction (docs/api.md, "Purge"): the checkpoint, one write unit, and the record, one write unit
    # (under 1 KB), plus the record's gsi1 entry (about 150 bytes), each billed twice in the transaction
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}
    assert sizes.write_units(before, after) == 1
    assert sizes.item_bytes(record["Item"]) <= sizes.WRITE_UNIT_BYTES
    entry = sizes.index_entry(record["Item"], schema.TABLE.global_indexes[0])
    assert entry is not None
    assert sizes.item_bytes(entry) + sizes.INDEX_ENTRY_OVERHEAD_BYTES <= sizes.WRITE_UNIT_BYTES
    assert sizes.write_units(None, record["Item"]) == 2  # the record and its index entry
    claimed = 2 * (sizes.write_units(before, after) + sizes.write_units(None, record["Item"]))
    assert claimed == 6
    if measured(engine):
        # What DynamoDB bills: 4 units in the table, 2 in gsi1
        assert capacity.write_units == claimed
        assert capacity.index_units(schema.GSI1) == 2


def test_idempotent_replay_costs_one_batch_get_and_writes_nothing(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api, "replay-me").status == 201
    counter.reset()
    replay = save(api, "replay-me")
    assert replay.header("Idempotent-Replayed") == "true"
    assert dict(counter.calls) == {"BatchGetItem": 1}


def test_lookup_costs_one_get_item(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api).status == 201
    counter.reset()
    found = lookup(api)
    assert found.status == 200
    assert dict(counter.calls) == {"GetItem": 1}


def test_get_by_id_costs_one_index_query_and_one_get_item(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = save(api).data["checkpoint_id"]
    counter.reset()
    found = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")
    assert found.status == 200
    assert dict(counter.calls) == {"Query": 1, "GetItem": 1}


def test_list_page_costs_one_query(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api).status == 201
    assert save(api, kind="cursor").status == 201
    counter.reset()
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints", query={})
    assert listed.status == 200
    assert len(listed.data) == 2
    assert dict(counter.calls) == {"Query": 1}


def test_delete_costs_one_index_query_and_one_delete_item(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = save(api).data["checkpoint_id"]
    counter.reset()
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None})
    assert deleted.status == 200
    assert dict(counter.calls) == {"Query": 1, "DeleteItem": 1}


def test_authentication_costs_one_get_item_until_the_key_is_cached_then_none(
    api: ApiDriver, counter: CallCounter
) -> None:
    # Given a container that has not seen the operator key yet
    # The same authenticated request (one Query of its own) twice
    first = api.invoke("list_keys")
    first_calls = dict(counter.calls)
    counter.reset()
    second = api.invoke("list_keys")
    second_calls = dict(counter.calls)
    assert first.status == second.status == 200
    assert first_calls == {"GetItem": 1, "Query": 1}
    assert second_calls == {"Query": 1}


def test_whoami_costs_only_the_authentication(api: ApiDriver, counter: CallCounter) -> None:
    # A container that has not seen the key reads its record (one GetItem); then the cached key answers alone
    first = api.invoke("whoami")
    first_calls = dict(counter.calls)
    counter.reset()
    second = api.invoke("whoami")
    assert first.status == second.status == 200
    assert first_calls == {"GetItem": 1}
    assert counter.total == 0


def test_the_console_touches_no_aws(api: ApiDriver, counter: CallCounter) -> None:
    page = api.invoke("console_page", headers={"authorization": None})
    assert page.status == 200
    assert counter.total == 0


def test_health_touches_no_aws(api: ApiDriver, counter: CallCounter) -> None:
    health = api.invoke("health", headers={"authorization": None})
    assert health.status == 200
    assert counter.total == 0


def test_plain_save_over_an_expired_item_costs_at_most_one_more_conditional_write(
    api: ApiDriver, counter: CallCounter
) -> None:
    start = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        # Given a checkpoint that expired a minute ago and that TTL has not removed yet
        first = save(api, ttl_seconds=60)
        assert first.status == 201
        traveller.shift(timedelta(seconds=120))
        warm_up(api, counter)
        again = save(api, state={"step": 2})
        # The failed UpdateItem is followed by one conditional PutItem
        assert again.status == 201
        assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
        assert dict(counter.calls) == {"UpdateItem": 1, "PutItem": 1}


def test_plain_save_over_an_item_whose_expiry_was_written_into_the_past_costs_one_more_write(
    api: ApiDriver, services: Any, counter: CallCounter
) -> None:
    # Given a checkpoint whose expires_at lies in the past, as DynamoDB's TTL has not removed it yet
    first = save(api)
    assert first.status == 201
    services.dynamodb.update_item(
        TableName=services.settings.table_name,
        Key=layout.checkpoint_key("acme", SUBJECT, "operator", KIND),
        UpdateExpression="SET #expires = :past",
        ExpressionAttributeNames={"#expires": items.EXPIRES},
        ExpressionAttributeValues={":past": {"N": "1700000000.000"}},
    )
    counter.reset()
    again = save(api, state={"step": 2})
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
        assert save(api, ttl_seconds=60).status == 201
        traveller.shift(timedelta(seconds=120))
        warm_up(api, counter)
        again = save(api, "late", state={"step": 2})
        # The read already saw the expiry: no extra write
        assert again.status == 201
        assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}


def test_requests_rejected_before_the_store_make_no_write_call(
    api: ApiDriver, services: Any, counter: CallCounter
) -> None:
    # Given an existing checkpoint written with an Idempotency-Key, and a read-only key
    assert save(api, "used").status == 201
    put_key(services, READER_SECRET, "acme", "operator", {"checkpoints:read"}, "key_" + "b" * 32)
    assert api.invoke("lookup_checkpoint", secret=READER_SECRET).status == 200
    warm_up(api, counter)
    # Invalid body, no key, read-only key, wrong media type, too-large state, reused idempotency key
    rejected = [
        save(api, kind="nope", state={}),
        api.invoke("save_checkpoint", body=save_body(), headers={"authorization": None, **PLAIN}),
        save(api, secret=READER_SECRET),
        api.invoke("save_checkpoint", body=save_body(), headers={"content-type": "text/plain", **PLAIN}),
        save(api, state={"blob": "x" * 3_000_000}),
        save(api, "used", state={"other": True}),
    ]
    assert [r.status for r in rejected] == [400, 401, 403, 415, 413, 422]
    assert not WRITE_OPERATIONS & set(counter.calls), dict(counter.calls)


def test_a_revision_conflict_costs_only_the_one_conditional_write_that_failed(
    api: ApiDriver, counter: CallCounter
) -> None:
    assert save(api).status == 201
    counter.reset()
    conflict = save(api, state={"step": 2}, expected_revision=7)
    # The answer comes from the failed condition itself: no second read, no retry
    assert conflict.status == 409
    assert conflict.error["details"] == {"current_revision": 1}
    assert dict(counter.calls) == {"UpdateItem": 1}
    current = lookup(api)
    assert current.data["revision"] == 1
    assert current.data["state"] == {"step": 1}


def test_an_idempotent_revision_conflict_reads_once_and_writes_nothing(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api).status == 201
    counter.reset()
    conflict = save(api, "c", expected_revision=7)
    # The read decided it: no transaction was attempted
    assert conflict.status == 409
    assert dict(counter.calls) == {"BatchGetItem": 1}


def test_a_validation_error_makes_no_dynamodb_call_at_all(api: ApiDriver, counter: CallCounter) -> None:
    warm_up(api, counter)
    rejected = api.invoke("save_checkpoint", body={"subject_id": SUBJECT, "kind": KIND}, headers=PLAIN)
    assert rejected.status == 400
    assert counter.total == 0
