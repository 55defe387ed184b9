"""The benchmark's capacity figures against what DynamoDB itself bills, on DynamoDB Local.

`bench/studies/item_size.py` saves the bench's seeded 32 KB conversation through the api handler on in-process moto
and counts its write units with `bench/billing/capacity.py`'s rules (moto's ConsumedCapacity is not DynamoDB's).
Here the same save (same state, same route, a key of the same tenant and agent) is made on DynamoDB Local with
`ReturnConsumedCapacity`: DynamoDB's bill must be the figure the bench reports. Then the saved item itself is written
and read again directly, each way the bench's meter prices (a put that creates its index entry, one over itself, a
transactional one, consistent and eventually consistent reads), and each bill must be what `capacity.py` says.
"""

from __future__ import annotations

import contextlib
import io
from types import ModuleType
from typing import Any

import pytest
from bench.billing import capacity
from bench.harness import clients, states
from bench.studies import item_size

from baton_checkpoints.api.services import Services
from tests.integration.conftest import DYNAMODB_LOCAL, TABLE, put_key
from tests.integration.driver import CapacityMeter

SECRET = "btn_test_bench_capacity_secret_01"


@pytest.fixture(scope="module")
def bench() -> dict[str, ModuleType]:
    """The bench's modules these tests use."""
    return {"capacity": capacity, "clients": clients, "item_size": item_size, "states": states}


@pytest.fixture(scope="module")
def figures(bench: dict[str, ModuleType]) -> Any:
    """What `bench/studies/item_size.py` reports for its 32 KB conversation (measured on moto, in a child
    interpreter)."""
    return bench["item_size"].measure_item()


def consumed(answer: dict[str, Any]) -> float:
    """Capacity units an answer says its request consumed (table and indexes)."""
    entries = answer["ConsumedCapacity"]
    return sum(float(e["CapacityUnits"]) for e in (entries if isinstance(entries, list) else [entries]))


def saved_item(aws: Any, capacity: ModuleType) -> dict[str, Any]:
    """The checkpoint's item: the table's largest (the other is the key's record), as `bench/studies/item_size.py`
    picks it."""
    found: dict[str, Any] = max(aws.scan(TableName=TABLE, ConsistentRead=True)["Items"], key=capacity.item_bytes)
    return found


@pytest.mark.parametrize("engine", [DYNAMODB_LOCAL], indirect=True)
def test_the_bench_items_write_units_are_what_dynamodb_bills_for_the_save(
    aws: Any, services: Services, capacity: CapacityMeter, bench: dict[str, ModuleType], figures: Any
) -> None:
    from baton_checkpoints.handlers.api import handler

    item_size, states, clients = bench["item_size"], bench["states"], bench["clients"]
    # Given the bench's key (tenant and agent `bench`, every scope) and its seeded state
    put_key(services, SECRET, "bench", "bench", {"*"}, "key_" + "7" * 32)
    state = states.conversation_state(target_bytes=item_size.STATE_BYTES, seed=item_size.SEED)
    capacity.reset()
    # When the bench's save is made through the handler on DynamoDB Local
    with contextlib.redirect_stdout(io.StringIO()):
        answer = handler(clients.save_event(SECRET, "item-size", state, "item-size-1"), None)
    assert answer["statusCode"] == 201, answer.get("body")
    # Then DynamoDB bills the write units the bench reports for it (the item and its gsi1 entry), in one request
    writes = [name for name, _ in capacity.answers if name != "GetItem"]  # the key's read, once per container
    assert writes == ["UpdateItem"]
    assert capacity.write_units == figures.write_units
    # And the bench's rules give the same for the item DynamoDB Local holds
    table = bench["capacity"].Table.from_description(aws.describe_table(TableName=TABLE)["Table"])
    item = saved_item(aws, bench["capacity"])
    assert bench["capacity"].item_write(None, item, table).units == figures.write_units
    assert abs(bench["capacity"].item_bytes(item) - figures.item_bytes) <= 8  # timestamps and ids differ a little


@pytest.mark.parametrize("engine", [DYNAMODB_LOCAL], indirect=True)
def test_the_bench_capacity_rules_are_what_dynamodb_bills_for_the_saved_item(
    aws: Any, services: Services, bench: dict[str, ModuleType]
) -> None:
    from baton_checkpoints.handlers.api import handler

    capacity, item_size, states, clients = (bench[name] for name in ("capacity", "item_size", "states", "clients"))
    put_key(services, SECRET, "bench", "bench", {"*"}, "key_" + "7" * 32)
    state = states.conversation_state(target_bytes=item_size.STATE_BYTES, seed=item_size.SEED)
    with contextlib.redirect_stdout(io.StringIO()):
        assert handler(clients.save_event(SECRET, "item-size", state, "item-size-1"), None)["statusCode"] == 201
    table = capacity.Table.from_description(aws.describe_table(TableName=TABLE)["Table"])
    item = saved_item(aws, capacity)
    key = {name: item[name] for name in table.keys}
    size = capacity.item_bytes(item)
    assert size > 4 * capacity.WRITE_UNIT_BYTES  # several units: a rounding error would show
    # A put that creates the item and its index entry; a put over itself (its entry unchanged); a delete
    aws.delete_item(TableName=TABLE, Key=key)
    created = aws.put_item(TableName=TABLE, Item=item, ReturnConsumedCapacity="INDEXES")
    assert consumed(created) == capacity.item_write(None, item, table).units
    assert capacity.item_write(None, item, table).index_units == 1
    again = aws.put_item(TableName=TABLE, Item=item, ReturnConsumedCapacity="INDEXES")
    assert consumed(again) == capacity.item_write(item, item, table).units
    # Reads: a consistent GetItem, an eventually consistent one, each rounded per 4 KB
    strong = aws.get_item(TableName=TABLE, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    assert consumed(strong) == capacity.read_units(size, consistent=True)
    eventual = aws.get_item(TableName=TABLE, Key=key, ReturnConsumedCapacity="TOTAL")
    assert consumed(eventual) == capacity.read_units(size, consistent=False)
    # A transactional put costs twice, index maintenance included
    deleted = aws.delete_item(TableName=TABLE, Key=key, ReturnConsumedCapacity="INDEXES")
    assert consumed(deleted) == capacity.item_write(item, None, table).units
    transaction = aws.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": item}}], ReturnConsumedCapacity="INDEXES"
    )
    assert consumed(transaction) == capacity.item_write(None, item, table, transactional=True).units
