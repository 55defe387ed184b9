"""The reaper function on LangGraph threads, against in-process moto: threads written by the real `ThreadStore`, the
records moto's stream gave for those writes read, filtered and converted as `baton serve` does
(`baton_checkpoints.local.stream`), and handed to `baton_checkpoints.handlers.reaper.handler` until the stream is quiet
(the reaper's own
deletes make records too).

Each case holds bystanders (another thread of the same agent, a thread of the same id of another tenant, with spilled
values of their own) that nothing may touch.
"""

from __future__ import annotations

import base64
import copy
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config

from baton_checkpoints.domain.thread_puts import ThreadRef, plan_put, plan_writes
from baton_checkpoints.domain.threads import PutCheckpointRequest, PutWritesRequest
from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.local import stream as local_stream
from baton_checkpoints.store import layout, reaping, schema
from baton_checkpoints.store.aws import s3_client
from baton_checkpoints.store.objects import ObjectStore
from baton_checkpoints.store.threads import ThreadStore
from tests.integration.conftest import BUCKET, MOTO, TABLE, data_items, engine_endpoint, reaper_environment
from tests.integration.driver import load_event
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

SUITE = "thread reaper (integration)"
TENANT, OTHER_TENANT, AGENT = "acme", "globex", "operator"
NOW_MS = 1_785_400_000_000
MAIN = ThreadRef(TENANT, AGENT, "main")
BIG = 400_000
"""Random bytes of this size do not pack and pass `ITEM_VALUE_BYTES`: the value spills to the bucket."""
PENDING, ATTACHED = schema.PENDING_TAG[1], schema.ATTACHED_TAG[1]


class World:
    """Moto's table, bucket and stream, the thread store writing to them, and the reaper draining the stream."""

    def __init__(self, dynamodb: Any, s3: Any, streams: Any) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3
        self.store = ThreadStore(dynamodb, TABLE, ObjectStore(lambda: s3, BUCKET))
        arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        self._reader = local_stream.ShardReader(streams, arn)
        self.reaped = 0

    def records(self) -> list[dict[str, Any]]:
        """The stream's records since the last read, as the deployed filter lets them through, in Lambda's form."""
        found: list[dict[str, Any]] = []
        while batch := self._reader.read():
            found += [local_stream.lambda_record(r, self._reader.stream_arn) for r in batch]
        return [r for r in found if local_stream.wanted(r)]

    def drain(self, context: Any = None) -> list[dict[str, Any]]:
        """Reap every record until the stream is quiet; the records reaped (none may fail)."""
        reaped: list[dict[str, Any]] = []
        for _ in range(10):
            batch = self.records()
            if not batch:
                return reaped
            assert reap(batch, context) == []
            reaped += batch
        raise AssertionError("the reaper keeps making records")

    def put(
        self,
        thread_id: str,
        checkpoint_id: str,
        values: dict[str, bytes],
        tenant_id: str = TENANT,
        parent: str | None = None,
        run_id: str | None = None,
        now_ms: int = NOW_MS,
        ttl_seconds: int | None = 3600,
        kept: dict[str, str] | None = None,
    ) -> None:
        """A checkpoint whose channels `values` are new in it (version = the checkpoint id), and which keeps the
        versions `kept` of others (their values carried from the parent)."""
        versions = {**(kept or {}), **dict.fromkeys(values, checkpoint_id)}
        document = {"id": checkpoint_id, "channel_versions": versions}
        request = PutCheckpointRequest.model_validate(
            {
                "checkpoint": document,
                "metadata": {"run_id": run_id} if run_id else {},
                "parent_checkpoint_id": parent,
                "values": {c: {"type": "bytes", "data": base64.b64encode(raw).decode()} for c, raw in values.items()},
                "ttl_seconds": ttl_seconds,
            }
        )
        self.store.put(plan_put(request, ThreadRef(tenant_id, AGENT, thread_id), now_ms))

    def put_writes(
        self, thread_id: str, checkpoint_id: str, writes: list[tuple[str, bytes]], tenant_id: str = TENANT
    ) -> None:
        task = "task-1"
        request = PutWritesRequest.model_validate(
            {
                "checkpoint_id": checkpoint_id,
                "task_id": task,
                "writes": [{"channel": c, "type": "bytes", "data": base64.b64encode(r).decode()} for c, r in writes],
            }
        )
        self.store.put_writes(plan_writes(request, ThreadRef(tenant_id, AGENT, thread_id), NOW_MS))

    def partition(self, thread_id: str, tenant_id: str = TENANT) -> list[dict[str, Any]]:
        answer = self.dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": layout.thread_pk(tenant_id, AGENT, thread_id)}},
            ConsistentRead=True,
        )
        return list(answer["Items"])

    def sort_keys(self, thread_id: str, tenant_id: str = TENANT) -> list[str]:
        """The sort keys of the thread's items, tombstones left out."""
        return sorted(str(item["sk"]["S"]) for item in self.partition(thread_id, tenant_id) if "dead" not in item)

    def tombstones(self, thread_id: str, tenant_id: str = TENANT) -> list[str]:
        """The sort keys of the checkpoints a deleted or ended life of the thread left as tombstones (their key, when,
        and a TTL: nothing else)."""
        found = [item for item in self.partition(thread_id, tenant_id) if "dead" in item]
        assert all(set(item) == {"pk", "sk", "dead", "ttl"} for item in found)
        return sorted(str(item["sk"]["S"]) for item in found)

    def objects_of(self, thread_id: str, tenant_id: str = TENANT) -> set[str]:
        """The objects the thread's items name."""
        return {str(item["so"]["S"]) for item in self.partition(thread_id, tenant_id) if "so" in item}

    def bucket(self) -> set[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return {str(o["Key"]) for o in listed}

    def tag(self, key: str) -> str | None:
        tags = self.s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
        return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), None)

    def table(self) -> list[dict[str, Any]]:
        return sorted(
            data_items(self.dynamodb.scan(TableName=TABLE)["Items"]), key=lambda i: (i["pk"]["S"], i["sk"]["S"])
        )

    def snapshot(self, *threads_of: tuple[str, str]) -> tuple[Any, ...]:
        """Items, objects and tags of these (tenant, thread)s: what must stay as it is."""
        items = [self.partition(thread_id, tenant_id) for tenant_id, thread_id in threads_of]
        names = sorted(set().union(*(self.objects_of(t, tenant) for tenant, t in threads_of)))
        return items, [(key, key in self.bucket() and self.tag(key)) for key in names]


def reap(batch: list[dict[str, Any]], context: Any = None) -> list[str]:
    """Invoke the reaper function with a batch; the sequence numbers it reported failed."""
    answer = reaper_function.handler({"Records": batch}, context)
    failures = [str(f["itemIdentifier"]) for f in answer["batchItemFailures"]]
    record(SUITE, invocations=1, records=len(batch), failed_records=len(failures))
    return failures


@pytest.fixture(scope="module")
def clients(engine: str) -> Iterator[tuple[Any, Any, Any]]:
    """The tests' own clients, made once per engine (moto answers them in each test's account; DynamoDB Local's table
    is made afresh per test); the reaper's container is kept across the module's tests on one engine, as a warm
    Lambda container is."""
    import boto3

    reaper_function.reaper.cache_clear()
    endpoint = engine_endpoint(engine)
    # In-process, moto's streams need the account id left out of the endpoint; DynamoDB Local serves them beside
    # its tables.
    streams_config = Config(account_id_endpoint_mode="disabled") if engine == MOTO else None
    yield (
        boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint),
        boto3.client("s3", region_name="us-east-1"),
        boto3.client("dynamodbstreams", region_name="us-east-1", endpoint_url=endpoint, config=streams_config),
    )
    reaper_function.reaper.cache_clear()


@pytest.fixture(autouse=True)
def _deployed(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    reaper_environment(monkeypatch, engine)


@pytest.fixture
def world(clients: tuple[Any, Any, Any], engine: str) -> Iterator[World]:
    from moto import mock_aws

    from baton_checkpoints.store.schema import ensure_bucket, ensure_table
    from tests.engines import fresh_table

    dynamodb, s3, streams = clients
    with mock_aws():
        s3 = s3_client()  # the store's own (SigV4: its presigned URLs say when they expire)
        if engine == MOTO:
            ensure_table(dynamodb, TABLE)
        else:
            fresh_table(dynamodb, TABLE)
        ensure_bucket(s3, BUCKET)
        yield World(dynamodb, s3, streams)


BYSTANDERS = ((TENANT, "bystander"), (OTHER_TENANT, "main"))


def with_bystanders(world: World) -> tuple[Any, ...]:
    """Another thread of the agent and a thread named as the tests' own of another tenant, each with a spilled value
    and a spilled pending write, reaped (attached); their snapshot."""
    for tenant_id, thread_id in BYSTANDERS:
        world.put(thread_id, "c1", {"big": os.urandom(BIG), "small": b"s"}, tenant_id=tenant_id)
        world.put_writes(thread_id, "c1", [("big", os.urandom(BIG))], tenant_id=tenant_id)
    world.drain()
    snapshot = world.snapshot(*BYSTANDERS)
    assert all(tag == ATTACHED for _, tag in snapshot[1])
    assert len(snapshot[1]) == 4
    return snapshot


def new_life_of(world: World, thread_id: str) -> None:
    """A thread of three checkpoints: spilled values, an item value, inline ones, spilled and item pending writes."""
    world.put(thread_id, "c1", {"big": os.urandom(BIG), "mid": os.urandom(2_000), "small": b"1"})
    world.put_writes(thread_id, "c1", [("big", os.urandom(BIG)), ("mid", os.urandom(2_000)), ("small", b"w")])
    world.put(thread_id, "c2", {"big": os.urandom(BIG)}, parent="c1", kept={"mid": "c1"})
    world.put_writes(thread_id, "c2", [("big", os.urandom(BIG))])
    world.put(thread_id, "c3", {"small": b"3"}, parent="c2", kept={"big": "c2", "mid": "c1"})


# -- the filter -------------------------------------------------------------------------------------------------


def test_the_reaper_lets_thread_records_through() -> None:
    assert layout.THREAD_PK_PREFIX in reaping.STREAM_ITEM_PREFIXES
    assert local_stream.ITEM_PREFIXES == reaping.STREAM_ITEM_PREFIXES
    (sample,) = load_event("stream_thread_head_expired")["Records"]
    assert local_stream.wanted(sample)
    record(SUITE, cases=1)


# -- rule 2: objects of values and write values -----------------------------------------------------------------


def test_spilled_values_and_writes_are_retagged_attached_and_deleted_with_their_items(world: World) -> None:
    bystanders = with_bystanders(world)
    # Given a thread with spilled values and pending writes, its records reaped
    new_life_of(world, "main")
    world.drain()
    spilled = world.objects_of("main")
    assert len(spilled) == 4  # two values, two pending writes
    # Then every object its items name is attached (no lifecycle rule will expire it)
    assert {world.tag(key) for key in spilled} == {ATTACHED}
    # When the thread is deleted and the stream reaped
    assert world.store.delete(MAIN, NOW_MS, time.monotonic() + 15)
    world.drain()
    # Then its items and objects are gone (the head stays, saying when it was deleted), and nothing of the
    # bystanders changed
    assert world.sort_keys("main") == ["H"]
    assert all(sk.startswith(layout.THREAD_CHECKPOINT) for sk in world.tombstones("main"))
    assert not spilled & world.bucket()
    assert world.snapshot(*BYSTANDERS) == bystanders
    record(SUITE, cases=1)


def test_a_value_naming_another_tenants_object_never_gets_it_deleted(world: World) -> None:
    bystanders = with_bystanders(world)
    new_life_of(world, "main")
    world.drain()
    value = next(i for i in world.partition("main") if i["sk"]["S"].startswith("V#") and "so" in i)
    foreign = next(iter(world.objects_of("main", OTHER_TENANT)))
    # Given records of a value item that names another tenant's object (and a key outside any states folder)
    world.dynamodb.put_item(TableName=TABLE, Item={**value, "so": {"S": foreign}})
    world.dynamodb.put_item(TableName=TABLE, Item={**value, "so": {"S": f"blobs/{TENANT}/states/x/../../../etc"}})
    world.dynamodb.delete_item(TableName=TABLE, Key=layout.key(value["pk"]["S"], value["sk"]["S"]))
    # When they are reaped
    world.drain()
    # Then the other tenant's object is still there, attached
    assert world.snapshot(*BYSTANDERS) == bystanders
    assert world.tag(foreign) == ATTACHED
    record(SUITE, cases=1)


# -- rule 1: a generation that ended ----------------------------------------------------------------------------


def test_a_head_expired_by_ttl_takes_every_item_and_object_of_its_thread_with_it(world: World) -> None:
    bystanders = with_bystanders(world)
    new_life_of(world, "main")
    # And writes whose checkpoint never came (LangGraph stores a checkpoint in the background, so writes may come
    # first; this one's put never did): a writes-only item and its write value
    world.put_writes("main", "c-missing", [("big", os.urandom(BIG))])
    world.drain()
    spilled = world.objects_of("main")
    assert len(spilled) == 5
    # When DynamoDB's TTL removes the head (nothing else of the thread)
    world.dynamodb.delete_item(TableName=TABLE, Key=layout.key(layout.thread_pk(TENANT, AGENT, "main"), "H"))
    reaped = world.drain()
    # Then the whole partition and every object it named are gone; the bystanders are untouched
    assert world.sort_keys("main") == []
    assert all(sk.startswith(layout.THREAD_CHECKPOINT) for sk in world.tombstones("main"))
    assert not spilled & world.bucket()
    assert world.snapshot(*BYSTANDERS) == bystanders
    # And the same records reaped again change nothing and fail nowhere
    table, bucket = world.table(), world.bucket()
    assert reap(copy.deepcopy(reaped)) == []
    assert (world.table(), world.bucket()) == (table, bucket)
    record(SUITE, cases=1, records_twice=len(reaped))


def test_a_new_generation_over_an_expired_head_reaps_the_old_one_and_keeps_itself(world: World) -> None:
    bystanders = with_bystanders(world)
    new_life_of(world, "main")
    world.drain()
    old_objects = world.objects_of("main")
    (old_head,) = [i for i in world.partition("main") if i["sk"]["S"] == "H"]
    # When the thread is written after its head expired (but before DynamoDB removed it): a new generation
    later = int(old_head["exp"]["N"]) + 1
    big = os.urandom(BIG)
    world.put("main", "n1", {"big": big, "small": b"n"}, now_ms=later)
    world.put_writes("main", "n1", [("big", os.urandom(BIG))])
    (new_head,) = [i for i in world.partition("main") if i["sk"]["S"] == "H"]
    assert new_head["g"]["S"] != old_head["g"]["S"]
    world.drain()
    # Then only the new generation's items are left: its checkpoint, value, write value (and the head)
    generation = new_head["g"]["S"]
    left = world.sort_keys("main")
    assert [sk for sk in left if sk.startswith("K#")] == [layout.thread_checkpoint_sk("", "n1")]
    assert all(sk.startswith(layout.thread_values(generation)) for sk in left if sk.startswith("V#"))
    assert len([sk for sk in left if sk.startswith("W#")]) == 1
    # And the old generation's objects are deleted, the new one's attached and readable
    assert not old_objects & world.bucket()
    assert {world.tag(key) for key in world.objects_of("main")} == {ATTACHED}
    tuple_now = world.store.get(MAIN, "", None, later)
    assert tuple_now.checkpoint_id == "n1"
    assert tuple_now.values["big"].url
    assert len(tuple_now.writes) == 1
    assert world.snapshot(*BYSTANDERS) == bystanders
    record(SUITE, cases=1)


def test_a_delete_cut_short_is_finished_by_the_reaper_and_a_put_after_it_stays(world: World) -> None:
    """A delete removes what it has time for and records when it happened on the head (`fl`); the reaper reads that
    change and removes the rest of what was put before it. A container that put to the thread a moment before the
    delete still knows its head and touches nothing: its put after the delete shows, as the thread's new start."""
    bystanders = with_bystanders(world)
    for n in range(30):
        world.put("main", f"c{n:02d}", {"mid": os.urandom(2_000)}, parent=f"c{n - 1:02d}" if n else None)
    world.put_writes("main", "c29", [("big", os.urandom(BIG))])
    world.drain()
    stale = ThreadStore(world.dynamodb, TABLE, ObjectStore(lambda: world.s3, BUCKET))
    world.store, writer = stale, world.store
    world.put("main", "c29", {"mid": b"known"})  # the other container: it touched the head, and knows it
    world.store = writer
    # When the thread is deleted with no time to finish (the first batch of 25 only)
    assert world.store.delete(MAIN, NOW_MS + 1, time.monotonic())
    left = [sk for sk in world.sort_keys("main") if sk != "H"]
    assert left, "the delete had time for everything"
    # And the other container puts after it, touching nothing (it knows the head)
    world.store = stale
    world.put("main", "n1", {"mid": b"after"}, now_ms=NOW_MS + 2)
    world.drain()
    # Then the reaper removed what was put before the delete, and the put after it is the thread
    assert world.sort_keys("main") == ["H", layout.thread_checkpoint_sk("", "n1"), *value_keys(world, "main")]
    assert len(world.tombstones("main")) == 30
    assert [c.checkpoint_id for c in world.store.page(MAIN, None, None, None, 10, None, NOW_MS + 3)
            .checkpoints] == ["n1"]  # fmt: skip
    assert world.objects_of("main") == set()
    assert world.snapshot(*BYSTANDERS) == bystanders
    record(SUITE, cases=1)


def value_keys(world: World, thread_id: str) -> list[str]:
    """The sort keys of the thread's value items."""
    return [sk for sk in world.sort_keys(thread_id) if sk.startswith(layout.THREAD_VALUE)]


def test_a_thread_written_again_before_its_removal_is_reaped_keeps_its_new_life(world: World) -> None:
    # Given a thread whose head TTL removed, written again (same checkpoint ids) before the reaper ran
    new_life_of(world, "main")
    world.drain()
    world.dynamodb.delete_item(TableName=TABLE, Key=layout.key(layout.thread_pk(TENANT, AGENT, "main"), "H"))
    # (written by another container: one that put to the thread a moment ago knows its head, which TTL removes
    # only after it expired, when that container touches it again)
    world.store = ThreadStore(world.dynamodb, TABLE, ObjectStore(lambda: world.s3, BUCKET))
    world.put("main", "c1", {"big": os.urandom(BIG), "small": b"again"})
    world.put("main", "c2", {"small": b"two"}, parent="c1")
    world.drain()
    # Then the new life's checkpoints and values are all there, the old life's other items gone
    for checkpoint_id in ("c1", "c2"):
        found = world.store.get(MAIN, "", checkpoint_id, NOW_MS)
        assert found.checkpoint_id == checkpoint_id
    assert world.store.get(MAIN, "", "c1", NOW_MS).values["big"].url
    assert layout.thread_checkpoint_sk("", "c3") not in world.sort_keys("main")
    assert {world.tag(key) for key in world.objects_of("main")} == {ATTACHED}
    record(SUITE, cases=1)


def test_the_sample_head_expiry_deletes_its_generation_and_no_other(world: World) -> None:
    (sample,) = load_event("stream_thread_head_expired")["Records"]
    pk = sample["dynamodb"]["Keys"]["pk"]["S"]
    old = sample["dynamodb"]["OldImage"]["g"]["S"]
    tenant_id, _, thread_id = layout.read_thread_pk(pk)
    state = layout.state_object(tenant_id, "0f" * 16)
    world.s3.put_object(Bucket=BUCKET, Key=state, Body=b"v", Tagging=f"{schema.PENDING_TAG[0]}={PENDING}")
    seeded = {
        layout.thread_checkpoint_sk("", "a"): {"g": {"S": old}},
        layout.thread_checkpoint_sk("", "b"): {"g": {"S": "somethingelse"}},
        layout.thread_value_sk(old, "", "big", '"a"'): {"g": {"S": old}, "so": {"S": state}},
        layout.thread_value_sk("somethingelse", "", "big", '"b"'): {"g": {"S": "somethingelse"}},
        layout.thread_write_value_sk("", "a", "f" * 32): {"g": {"S": ""}},
    }
    for sk, attributes in seeded.items():
        world.dynamodb.put_item(TableName=TABLE, Item={**layout.key(pk, sk), **attributes})
    world.records()  # the seeding's own records are not this case's
    # When the sample record (a head of that generation removed by TTL) is reaped, then what it caused
    assert reap([sample]) == []
    world.drain()
    # Then its generation's checkpoint and value (with its object) and the write values are gone
    assert world.sort_keys(thread_id, tenant_id) == sorted(
        [layout.thread_checkpoint_sk("", "b"), layout.thread_value_sk("somethingelse", "", "big", '"b"')]
    )
    assert state not in world.bucket()
    record(SUITE, cases=1)


# -- rule 3: a checkpoint's write values ------------------------------------------------------------------------


def test_checkpoints_deleted_for_runs_take_their_write_values_and_objects(world: World) -> None:
    bystanders = with_bystanders(world)
    world.put("main", "c1", {"small": b"1"}, run_id="run-a")
    world.put_writes("main", "c1", [("big", os.urandom(BIG)), ("mid", os.urandom(2_000))])
    world.put("main", "c2", {"small": b"2"}, parent="c1", run_id="run-b")
    world.put_writes("main", "c2", [("big", os.urandom(BIG))])
    world.drain()
    kept_objects = {str(i["so"]["S"]) for i in world.partition("main") if "so" in i and "#2:c2#" in i["sk"]["S"]}
    dropped_objects = world.objects_of("main") - kept_objects
    assert len(kept_objects) == len(dropped_objects) == 1
    # When run-a's checkpoints are deleted
    assert world.store.delete_for_runs(TENANT, AGENT, ["run-a"]) == (1, True)
    world.drain()
    # Then c1's write values and object are gone; c2 keeps its own
    left = world.sort_keys("main")
    assert not [sk for sk in left if sk.startswith(layout.THREAD_WRITE_VALUE) and "#2:c1#" in sk]
    assert len([sk for sk in left if sk.startswith(layout.THREAD_WRITE_VALUE) and "#2:c2#" in sk]) == 1
    assert not dropped_objects & world.bucket()
    assert kept_objects <= world.bucket()
    assert world.store.get(MAIN, "", "c2", NOW_MS).writes[0][1].url
    assert world.snapshot(*BYSTANDERS) == bystanders
    record(SUITE, cases=1)


def test_a_special_channel_written_again_lets_go_of_its_former_write_value(world: World) -> None:
    world.put("main", "c1", {"small": b"1"})
    world.put_writes("main", "c1", [("__error__", os.urandom(BIG))])
    world.drain()
    first = world.objects_of("main")
    # When the special channel is written again (it overwrites its entry)
    world.put_writes("main", "c1", [("__error__", os.urandom(BIG))])
    world.drain()
    # Then the former write value and its object are gone, the new one is kept and attached
    second = world.objects_of("main")
    assert len(first) == len(second) == 1
    assert first != second
    assert not first & world.bucket()
    assert {world.tag(key) for key in second} == {ATTACHED}
    assert len([sk for sk in world.sort_keys("main") if sk.startswith(layout.THREAD_WRITE_VALUE)]) == 1
    record(SUITE, cases=1)


def test_keep_latest_prunes_and_the_reaper_deletes_what_the_pruned_named(world: World) -> None:
    new_life_of(world, "main")
    world.drain()
    before = world.objects_of("main")
    assert world.store.prune([MAIN], "keep_latest", NOW_MS, time.monotonic() + 15) == (1, 2, True)
    world.drain()
    # c3 (latest) keeps the big value of c2 it carries (and c1's mid); c1's big value and both pending writes' objects
    # went
    after = world.objects_of("main")
    assert len(after) == 1
    assert after <= before
    assert not (before - after) & world.bucket()
    latest = world.store.get(MAIN, "", None, NOW_MS)
    assert latest.values["big"].url
    assert latest.values["mid"].data is not None
    assert len(latest.values["mid"].data) == 2_000
    record(SUITE, cases=1)


# -- copies -----------------------------------------------------------------------------------------------------


def test_a_copys_objects_survive_the_sources_deletion(world: World) -> None:
    new_life_of(world, "main")
    assert world.store.copy(MAIN, "copy", NOW_MS, time.monotonic() + 15) == 3
    world.drain()
    copied = world.objects_of("copy")
    assert len(copied) == 4
    assert not copied & world.objects_of("main")
    # When the source is deleted, and again its head expires (a second generation's removal)
    world.store.delete(MAIN, NOW_MS, time.monotonic() + 15)
    world.drain()
    # Then the copy keeps every item and object, attached
    assert copied <= world.bucket()
    assert {world.tag(key) for key in copied} == {ATTACHED}
    found = world.store.get(ThreadRef(TENANT, AGENT, "copy"), "", "c1", NOW_MS)
    assert found.values["big"].url
    assert len(found.writes) == 3
    record(SUITE, cases=1)


# -- the deadline -----------------------------------------------------------------------------------------------


class _LambdaContext:
    """What the reaper reads of Lambda's context object: the invocation's remaining time."""

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_a_record_whose_work_outlasts_the_invocation_fails_and_its_retry_finishes(world: World) -> None:
    new_life_of(world, "main")
    world.drain()
    world.dynamodb.delete_item(TableName=TABLE, Key=layout.key(layout.thread_pk(TENANT, AGENT, "main"), "H"))
    (removal,) = world.records()
    # Given an invocation with less time left than the reaper keeps for its answer: the record is reported failed
    assert reap([removal], _LambdaContext(remaining_ms=5_000)) == [removal["dynamodb"]["SequenceNumber"]]
    assert layout.thread_checkpoint_sk("", "c1") in world.sort_keys("main")
    # When it is retried with time enough
    assert reap([removal], _LambdaContext(remaining_ms=120_000)) == []
    world.drain()
    assert world.sort_keys("main") == []
    assert all(sk.startswith(layout.THREAD_CHECKPOINT) for sk in world.tombstones("main"))
    record(SUITE, cases=1)
