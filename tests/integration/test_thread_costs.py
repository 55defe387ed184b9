"""What the threads routes cost: DynamoDB (and S3) requests per operation, counted exactly with botocore's
`before-call` events, and the write units of a typical graph step by DynamoDB's billing rules on the items the
engine holds (`baton_checkpoints.store.sizes`), beside performance.md's figures for `langgraph-checkpoint-aws`'s
`DynamoDBSaver`;
on DynamoDB Local, the write units are also what DynamoDB itself says each request consumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import ormsgpack
import pytest
from bench.harness.states import conversation_state

from baton_checkpoints.store import sizes
from tests.integration.conftest import measured
from tests.integration.driver import ApiDriver, CallCounter, CapacityMeter, Result
from tests.integration.test_threads import (  # noqa: F401 (world, aws and api are fixtures used by name)
    api,
    aws,
    delete_thread,
    get_tuple,
    list_page,
    post,
    put,
    put_writes,
    thread_items,
    thread_path,
    typed,
    values_of,
    world,
    writes_of,
)
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

DYNAMODB_SAVER_PUT_REQUESTS = 2
"""performance.md: `DynamoDBSaver` (langgraph-checkpoint-aws 1.2.6) writes 2 unconditional PutItems per put."""
DYNAMODB_SAVER_READ_LATEST_REQUESTS = 3
"""performance.md: 2 Query + 1 GetItem (+1 GetItem per pending write) to read the latest, eventually consistent."""
DYNAMODB_SAVER_PUT_UNITS_4KB = 6
"""performance.md: write units of a `DynamoDBSaver` put of a 4 KB state."""


class Meter:
    """Counts the DynamoDB and S3 requests the handler's clients make during one call."""

    def __init__(self, dynamodb: CallCounter, s3: CallCounter) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3

    def __call__(self, call: Callable[[], Result], status: int = 200) -> tuple[dict[str, int], dict[str, int]]:
        """Run `call` (which must answer `status`) and give back its (DynamoDB, S3) requests by operation."""
        self.dynamodb.reset()
        self.s3.reset()
        answer = call()
        assert answer.status == status, answer.body
        return dict(self.dynamodb.calls), dict(self.s3.calls)


@pytest.fixture
def meter(world: tuple[Any, ApiDriver]) -> Iterator[Meter]:  # noqa: F811
    """A meter on the module world's clients (warm: the operator's key is cached by earlier calls)."""
    from baton_checkpoints.api.app import app

    services = app.services()
    assert services.objects is not None
    dynamodb, s3 = CallCounter(), CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", dynamodb)
    services.objects.client.meta.events.register("before-call.s3", s3)
    assert world[1].invoke("list_keys").status == 200  # authenticate once: the key record is cached from here on
    yield Meter(dynamodb, s3)
    services.dynamodb.meta.events.unregister("before-call.dynamodb", dynamodb)
    services.objects.client.meta.events.unregister("before-call.s3", s3)


def _small(n: int) -> dict[str, str]:
    return typed(b"v%d" % n)


# -- requests per operation -----------------------------------------------------------------------------------


def test_requests_per_put(api: ApiDriver, meter: Meter, engine: str) -> None:  # noqa: F811
    # First put of a thread: one UpdateItem refreshes (creates) the head and hands back its generation, one
    # UpdateItem writes the checkpoint item with its small values inline. No read: as DynamoDBSaver's 2 PutItems.
    # The container then knows the head: its next puts, within a tenth of the ttl (at most a minute), touch none.
    first = meter(lambda: put(api, "n-put", "c1", {"a": 1, "b": 1}, {"a": _small(1), "b": _small(1)}), 201)
    assert first == ({"UpdateItem": 2}, {})
    # A put with a parent and only small new values: the checkpoint's UpdateItem alone. What the child carries from
    # its parent (inline values, large values' sizes) the container kept from the parent's put
    child = meter(lambda: put(api, "n-put", "c2", {"a": 2, "b": 1}, {"a": _small(2)}, parent="c1"), 201)
    assert child == ({"UpdateItem": 1}, {})
    # A put with a large value (> 512 bytes, up to 32 KB stored): it rides in the checkpoint's own item, which its
    # children name as the value's holder: still one UpdateItem
    large = {"a": 3, "b": 1, "msgs": 1}
    with_large = meter(lambda: put(api, "n-put", "c3", large, {"msgs": typed(os.urandom(4_000))}, parent="c2"), 201)
    assert with_large == ({"UpdateItem": 1}, {})
    # Past what the item holds of them: its version item goes first in one BatchWriteItem, the checkpoint last
    larger = {"a": 3, "b": 1, "msgs": 3}
    with_larger = meter(lambda: put(api, "n-put", "c3b", larger, {"msgs": typed(os.urandom(40_000))}, parent="c3"), 201)
    assert with_larger == ({"UpdateItem": 1, "BatchWriteItem": 1}, {})
    # A value past 350,000 stored bytes: the same, plus one PutObject of its bytes before the version item
    spilled = {"a": 3, "b": 1, "msgs": 2}
    huge = typed(os.urandom(1_000_000))
    with_spill = meter(lambda: put(api, "n-put", "c4", spilled, {"msgs": huge}, parent="c3"), 201)
    assert with_spill == ({"UpdateItem": 1, "BatchWriteItem": 1}, {"PutObject": 1})
    # A child that keeps the large version writes nothing for it (its size is carried from the parent)
    kept = meter(lambda: put(api, "n-put", "c5", {**spilled, "a": 4}, {"a": _small(4)}, parent="c4"), 201)
    assert kept == ({"UpdateItem": 1}, {})
    # A parent this container did not store (another container's, or one it no longer remembers): one consistent
    # GetItem of what the child carries from it
    from baton_checkpoints.api.app import app

    app.services().threads.forget()
    again = meter(lambda: put(api, "n-put", "c6", {**spilled, "a": 5}, {"a": _small(5)}, parent="c5"), 201)
    assert again == ({"GetItem": 1, "UpdateItem": 1}, {})
    # Against DynamoDBSaver: the same 2 writes for a first put, one consistent read more once there is a parent
    assert sum(first[0].values()) == DYNAMODB_SAVER_PUT_REQUESTS
    # (figures, not case counts: one line per engine, never summed across them)
    record(f"thread request counts ({engine})", put_first=2, put_child_small=1, put_child_large=2)


def test_requests_per_put_writes(api: ApiDriver, meter: Meter) -> None:  # noqa: F811
    assert put(api, "n-writes", "c1", {"a": 1}, {"a": _small(1)}).status == 201
    # Small writes: one conditional UpdateItem sets the whole call as one attribute of the checkpoint item (the
    # condition is the room left, and that the item is no tombstone), whatever their number
    small = [("a", b"1"), ("b", b"2"), ("c", b"3")]
    assert meter(lambda: put_writes(api, "n-writes", "c1", "t1", small)) == ({"UpdateItem": 1}, {})
    many = [(f"ch{n}", b"%d" % n) for n in range(120)]
    assert meter(lambda: put_writes(api, "n-writes", "c1", "t-many", many)) == ({"UpdateItem": 1}, {})
    # A task's message (over 512 bytes, the call's values under 4 KB) rides in the call too
    message = [("a", os.urandom(2_000)), ("b", b"2")]
    assert meter(lambda: put_writes(api, "n-writes", "c1", "t-message", message)) == ({"UpdateItem": 1}, {})
    # A larger write: its item first (one BatchWriteItem per 25), then the same UpdateItem
    large = [("a", os.urandom(5_000)), ("b", b"2")]
    assert meter(lambda: put_writes(api, "n-writes", "c1", "t2", large)) == ({"BatchWriteItem": 1, "UpdateItem": 1}, {})
    # Writes before their checkpoint's put (LangGraph's async durability): the same UpdateItem makes the item; no
    # request is refused, none reads
    early = meter(lambda: put_writes(api, "n-writes", "c2", "t3", small))
    assert early == ({"UpdateItem": 1}, {})
    # A retry of a call that landed: the same UpdateItem, refused, changes nothing
    assert meter(lambda: put_writes(api, "n-writes", "c2", "t3", small)) == ({"UpdateItem": 1}, {})
    # And the put that follows costs what any put does: the checkpoint's UpdateItem, keeping the writes (no read of
    # the parent here: every channel of the checkpoint has a new value, so nothing is carried; no touch of the head,
    # which this container touched a moment ago)
    then = meter(lambda: put(api, "n-writes", "c2", {"a": 2}, {"a": _small(2)}, parent="c1"), 201)
    assert then == ({"UpdateItem": 1}, {})
    assert [w[3] for w in writes_of(get_tuple(api, "n-writes").data)] == [b"1", b"2", b"3"]


def test_requests_per_read(api: ApiDriver, meter: Meter) -> None:  # noqa: F811
    assert put(api, "n-read", "c1", {"a": 1, "b": 1}, {"a": _small(1), "b": _small(1)}).status == 201
    assert put_writes(api, "n-read", "c1", "t", [("a", b"w")]).status == 200
    assert put(api, "n-read", "c2", {"a": 1, "b": 2}, {"b": typed(os.urandom(3_000))}, parent="c1").status == 201
    assert put_writes(api, "n-read", "c2", "t", [("a", os.urandom(1_000))]).status == 200
    # By id, every value and write inline: one consistent BatchGetItem of the head and the checkpoint item
    assert meter(lambda: get_tuple(api, "n-read", "c1")) == ({"BatchGetItem": 1}, {})
    # By id with a large value and a task's message as its write: both ride in the item, still one BatchGetItem
    assert meter(lambda: get_tuple(api, "n-read", "c2")) == ({"BatchGetItem": 1}, {})
    # A child that keeps that large value, with a write too large to ride: one more BatchGetItem, of the checkpoint
    # that holds the value and of the write's item
    assert put(api, "n-read", "c3", {"a": 1, "b": 2, "c": 1}, {"c": _small(1)}, parent="c2").status == 201
    assert put_writes(api, "n-read", "c3", "t", [("a", os.urandom(5_000))]).status == 200
    assert meter(lambda: get_tuple(api, "n-read", "c3")) == ({"BatchGetItem": 2}, {})
    # The latest: a Query (a few items, newest first) for the item, then one BatchGetItem of the head with the values
    # it does not hold; DynamoDBSaver makes 2 Query + 1 GetItem + 1 GetItem per pending write, eventually consistent
    latest = meter(lambda: get_tuple(api, "n-read"))
    assert latest == ({"Query": 1, "BatchGetItem": 1}, {})
    assert sum(latest[0].values()) <= DYNAMODB_SAVER_READ_LATEST_REQUESTS
    # A list page: the head, one Query for the page's items, one BatchGetItem for every value outside them
    assert meter(lambda: list_page(api, "n-read")) == ({"GetItem": 1, "Query": 1, "BatchGetItem": 1}, {})
    # With every value inline, no BatchGetItem
    # `before` without a namespace is a key bound in each: a probe finds the namespace, a Query reads it below
    # `before`, and a last probe finds no other namespace
    assert meter(lambda: list_page(api, "n-read", before="c2")) == ({"GetItem": 1, "Query": 3}, {})
    assert meter(lambda: list_page(api, "n-read", before="c2", checkpoint_ns="")) == ({"GetItem": 1, "Query": 1}, {})
    # A value in the bucket costs no S3 request: its URL is presigned locally
    assert put(api, "n-read", "c3", {"a": 1, "b": 3}, {"b": typed(os.urandom(400_000))}, parent="c2").status == 201
    assert meter(lambda: get_tuple(api, "n-read", "c3")) == ({"BatchGetItem": 2}, {})


def test_requests_per_delete_prune_copy_and_runs(api: ApiDriver, meter: Meter) -> None:  # noqa: F811
    def thread(name: str) -> None:
        assert put(api, name, "c1", {"a": 1}, {"a": typed(os.urandom(1_000))}, metadata={"run_id": "run-9"}).status
        assert put(api, name, "c2", {"a": 2}, {"a": typed(os.urandom(400_000))}, parent="c1").status == 201
        assert put_writes(api, name, "c2", "t", [("a", b"w"), ("b", os.urandom(1_000))]).status == 200

    for name in ("n-del", "n-copy", "n-prune", "n-prune-all", "n-runs"):
        thread(name)
    # Delete: one UpdateItem of the head (the thread is hidden at once: it says when it was deleted), one keys-only
    # Query of the partition (100 keys a page), one BatchWriteItem per 25 keys (here 4 items: 2 checkpoints become
    # tombstones, 1 value item and 1 write value are deleted)
    assert meter(lambda: delete_thread(api, "n-del")) == ({"UpdateItem": 1, "Query": 1, "BatchWriteItem": 1}, {})
    # Copy: the source's head (GetItem), the target's head (UpdateItem), one Query of the source's items, then
    # values first and checkpoints last (two BatchWriteItems), and one CopyObject per value in the bucket
    copy = meter(lambda: post(api, thread_path("n-copy", "/copy"), {"target_thread_id": "n-copy-2"}))
    assert copy == ({"GetItem": 1, "UpdateItem": 1, "Query": 1, "BatchWriteItem": 2}, {"CopyObject": 1})
    # Prune keep_latest: the head, a Query of the checkpoints, one of the writes-only items' references (writes
    # that came before their checkpoint keep their values), keys-only Queries of the two value prefixes, one
    # BatchWriteItem of what goes
    prune = meter(lambda: post(api, "/v1/threads:prune", {"thread_ids": ["n-prune"], "strategy": "keep_latest"}))
    assert prune == ({"GetItem": 1, "Query": 4, "BatchWriteItem": 1}, {})
    # Prune delete: the head, then a delete as above, which counts what it ends (no Query of the whole life first)
    everything = meter(lambda: post(api, "/v1/threads:prune", {"thread_ids": ["n-prune-all"], "strategy": "delete"}))
    assert everything == ({"GetItem": 1, "Query": 1, "UpdateItem": 1, "BatchWriteItem": 1}, {})
    # Delete for runs: one gsi1 Query per run id (never a Scan), one BatchGetItem of the checkpoints found, whose
    # large values their children may keep (those they hold go to value items first: one BatchWriteItem), one
    # BatchWriteItem that deletes them; gsi1 is eventually consistent, which moto is not. run-9 names c1 of each of
    # the 3 threads left that had it
    runs = meter(lambda: post(api, "/v1/threads:delete-for-runs", {"run_ids": ["run-9"]}))
    assert runs == ({"Query": 1, "BatchGetItem": 1, "BatchWriteItem": 2}, {})


# -- write units of a graph step ------------------------------------------------------------------------------


@pytest.fixture
def consumed(world: tuple[Any, ApiDriver]) -> Iterator[CapacityMeter]:  # noqa: F811
    """What DynamoDB says the handler's client consumed, request by request (DynamoDB Local's figures are
    DynamoDB's)."""
    from baton_checkpoints.api.app import app

    meter = CapacityMeter()
    client = app.services().dynamodb
    meter.attach(client)
    yield meter
    meter.detach(client)


def _units_of(
    aws: Any,  # noqa: F811
    thread: str,
    call: Callable[[], Result],
    status: int,
    consumed: CapacityMeter,
) -> tuple[int, float]:
    """Write units one request costs: for each item it changed, DynamoDB's bill for that write (the larger of the
    item before and after, in 1 KB units, plus index maintenance); and what the engine's answers said it consumed."""
    before = {(i["pk"]["S"], i["sk"]["S"]): i for i in thread_items(aws, thread)}
    consumed.reset()
    answer = call()
    assert answer.status == status, answer.body
    after = {(i["pk"]["S"], i["sk"]["S"]): i for i in thread_items(aws, thread)}
    computed = sum(
        sizes.write_units(before.get(key), after.get(key))
        for key in before.keys() | after.keys()
        if before.get(key) != after.get(key)
    )
    return computed, consumed.write_units


def test_write_units_of_a_graph_step_are_below_dynamodb_savers_put_alone(
    api: ApiDriver,  # noqa: F811
    aws: Any,  # noqa: F811
    consumed: CapacityMeter,
    engine: str,
) -> None:
    # Given a graph whose state has a 4 KB message list (msgpack, as LangGraph serializes it) and three small
    # channels, at step 5 of a thread (so the step has a parent and the message list a new version)
    messages = ormsgpack.packb(conversation_state(4_000, seed=5)["messages"])
    assert 3_000 < len(messages) < 5_000
    versions = {"messages": 4, "counter": 4, "route": 4, "branch:to:agent": 4}
    values = {"messages": typed(messages), "counter": _small(4), "route": _small(4), "branch:to:agent": typed(b"")}
    assert put(api, "n-step", "c4", versions, values).status == 201
    step = {channel: 5 for channel in versions if channel != "route"} | {"route": 4}
    new = {**values, "messages": typed(ormsgpack.packb(conversation_state(4_100, seed=6)["messages"]))}
    del new["route"]
    # When the step puts its checkpoint (3 new values, 1 carried) and a task's 3 small pending writes
    put_units, put_consumed = _units_of(
        aws, "n-step", lambda: put(api, "n-step", "c5", step, new, parent="c4"), 201, consumed
    )
    writes = [("messages", b"\x91\xa3hey"), ("counter", b"\x05"), ("branch:to:tools", b"\xc0")]
    writes_units, writes_consumed = _units_of(
        aws, "n-step", lambda: put_writes(api, "n-step", "c5", "task-1", writes), 200, consumed
    )
    total = put_units + writes_units
    record(f"thread step write units ({engine})", put=put_units, put_writes=writes_units, total=total)
    # Then the step costs 2 for the put: the checkpoint item, small values inline and the message list it holds,
    # packed (the head was touched by the thread's first put, a moment ago); and 2 for the writes (an update of that
    # item, which an update bills whole)
    assert (put_units, writes_units) == (2, 2)
    if measured(engine):
        # And DynamoDB bills exactly that
        assert (put_consumed, writes_consumed) == (2, 2)
    # DynamoDBSaver's put of a 4 KB state alone costs 6 units, before any of its pending writes (a PutItem each)
    assert total < DYNAMODB_SAVER_PUT_UNITS_4KB


DYNAMODB_SAVER_WRITE_UNITS_PER_WRITE = 1
"""bench/report.md ("LangGraph graph steps"): `DynamoDBSaver` keeps each pending write as its own item, one
conditional PutItem per write, so at least one unit each."""


def test_write_units_of_a_step_whose_writes_come_before_its_put(
    api: ApiDriver,  # noqa: F811
    aws: Any,  # noqa: F811
    consumed: CapacityMeter,
    engine: str,
) -> None:
    # Given the same step as above, under LangGraph's async durability: the task's writes reach Baton first
    messages = ormsgpack.packb(conversation_state(4_000, seed=5)["messages"])
    versions = {"messages": 4, "counter": 4, "route": 4, "branch:to:agent": 4}
    values = {"messages": typed(messages), "counter": _small(4), "route": _small(4), "branch:to:agent": typed(b"")}
    assert put(api, "n-step-early", "c4", versions, values).status == 201
    step = {channel: 5 for channel in versions if channel != "route"} | {"route": 4}
    new = {**values, "messages": typed(ormsgpack.packb(conversation_state(4_100, seed=6)["messages"]))}
    del new["route"]
    writes = [("messages", b"\x91\xa3hey"), ("counter", b"\x05"), ("branch:to:tools", b"\xc0")]
    # The writes: one UpdateItem makes the checkpoint's item, holding them (no request refused)
    early, early_consumed = _units_of(
        aws, "n-step-early", lambda: put_writes(api, "n-step-early", "c5", "task-1", writes), 200, consumed
    )
    # The put: the checkpoint item (an update of the item the writes made), holding the message list
    late, late_consumed = _units_of(
        aws, "n-step-early", lambda: put(api, "n-step-early", "c5", step, new, parent="c4"), 201, consumed
    )
    record(f"thread step write units, writes first ({engine})", put_writes=early, put=late, total=early + late)
    assert (early, late) == (1, 2)
    if measured(engine):
        # And DynamoDB bills exactly that
        assert (early_consumed, late_consumed) == (early, late)
    # Against DynamoDBSaver's put of a 4 KB state (6 units) and its 3 writes (a PutItem each)
    assert early + late < DYNAMODB_SAVER_PUT_UNITS_4KB + len(writes) * DYNAMODB_SAVER_WRITE_UNITS_PER_WRITE


def test_no_item_passes_400_kb_after_a_3_mb_checkpoint(api: ApiDriver, aws: Any, engine: str) -> None:  # noqa: F811
    # Given the largest values a body carries (about 2.3 MB of raw bytes: a body is at most 3,100,000 bytes of
    # base64), each just over or at what an item keeps (350,000 bytes; the ones over go to the bucket)
    first = {f"v{n}": os.urandom(350_000 if n % 2 else 350_001) for n in range(6)}
    assert put(api, "n-max", "c1", dict.fromkeys(first, 1), {c: typed(v) for c, v in first.items()}).status == 201
    # And a child that keeps them and adds enough to reach the limit of values held in the table exactly
    # (2,500,000 bytes: the three of 350,000 kept in items, and 1,450,000 more)
    added = {f"x{n}": os.urandom(290_000) for n in range(5)}
    versions = dict.fromkeys([*first, *added], 1)
    assert 3 * 350_000 + sum(map(len, added.values())) == 2_500_000
    over = {**added, "x0": os.urandom(290_001)}
    refused = put(api, "n-max", "c2", versions, {c: typed(v) for c, v in over.items()}, parent="c1")
    assert refused.status == 413
    assert refused.error["details"]["field"] == "values"
    assert put(api, "n-max", "c2", versions, {c: typed(v) for c, v in added.items()}, parent="c1").status == 201
    # And the largest pending writes a checkpoint holds in the table (500,000 bytes), and one for the bucket
    writes = [("w0", os.urandom(349_000)), ("w1", os.urandom(151_000)), ("w2", os.urandom(600_000))]
    assert put_writes(api, "n-max", "c2", "task", writes).status == 200
    # Then every item is under DynamoDB's 400 KB, and all of it reads back
    biggest = max(sizes.item_bytes(item) for item in thread_items(aws, "n-max"))
    record(f"thread item sizes ({engine})", largest_item_bytes=biggest)
    assert biggest <= sizes.MAX_ITEM_BYTES
    found = get_tuple(api, "n-max")
    assert values_of(found.data) == {c: ("msgpack", v) for c, v in {**first, **added}.items()}
    assert [(w[2], w[3]) for w in writes_of(found.data)] == writes


LAMBDA_PAYLOAD_BYTES = 6_291_456
"""Lambda's limit on a synchronous invocation's response (6 MB), API Gateway's envelope included."""


@pytest.mark.parametrize("accept_encoding", [None, "gzip"], ids=["identity", "gzip"])
def test_the_largest_tuple_fits_lambdas_response_limit(
    api: ApiDriver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    accept_encoding: str | None,
) -> None:
    import baton_checkpoints.handlers.api

    # Given a checkpoint at the limits: 2,500,000 bytes of values and 500,000 of pending writes held in items (at
    # most 350,000 bytes each, random so not packed): every byte rides in the answer as base64
    first = {f"v{n}": typed(os.urandom(350_000)) for n in range(6)}
    thread = f"n-full-{accept_encoding}"
    assert put(api, thread, "c1", dict.fromkeys(first, 1), first).status == 201
    added = {"x0": typed(os.urandom(350_000)), "x1": typed(os.urandom(50_000))}
    versions = dict.fromkeys([*first, *added], 1)
    assert put(api, thread, "c2", versions, added, parent="c1").status == 201
    writes = [("w0", os.urandom(333_333)), ("w1", os.urandom(166_666))]
    assert put_writes(api, thread, "c2", "task", [*writes, ("w3", b"x")]).status == 200
    # When it is read, the Lambda answer measured as the handler hands it to API Gateway
    sizes_seen: list[int] = []
    handler = baton_checkpoints.handlers.api.handler

    def measured(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer: dict[str, Any] = handler(event, context)
        sizes_seen.append(len(json.dumps(answer)))
        return answer

    monkeypatch.setattr(baton_checkpoints.handlers.api, "handler", measured)
    found = api.invoke(
        "get_checkpoint",
        path=thread_path(thread, "/checkpoint"),
        query={},
        headers={"accept-encoding": accept_encoding},
    )
    # Then it fits Lambda's response limit (docs/api.md: "so no answer exceeds Lambda's 6 MB payload")
    assert found.status == 200
    assert sizes_seen[-1] <= LAMBDA_PAYLOAD_BYTES, sizes_seen
