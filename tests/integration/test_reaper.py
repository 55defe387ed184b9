"""The reaper function, `baton_checkpoints.handlers.reaper.handler`, fed the stream records of `events/` (and records
moto's own
stream gave for real saves) against in-process moto: it deletes exactly the objects the table let go of, retags
exactly the ones it took up, reports exactly the records that failed, and does nothing more when a record comes twice.

The bucket is seeded with real objects (written pending, as the store writes them), blob records as the store maps
them, and bystanders (another tenant's, another checkpoint's) that no record may touch.
"""

from __future__ import annotations

import base64
import copy
import datetime
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import CheckpointKey
from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.store import items, layout, schema
from baton_checkpoints.store.reaping import STREAM_ITEM_PREFIXES
from tests.integration.conftest import BUCKET, MOTO, TABLE, data_items, reaper_environment, streams_client
from tests.integration.driver import ApiDriver, load_event
from tests.integration.faults import UNAVAILABLE_503, Duration, Fault, Phase, injected
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

TENANT, SUBJECT, AGENT, KIND = "acme", "ticket-4411", "operator", "task_state"
PK, SK = layout.checkpoint_pk(TENANT, SUBJECT), layout.checkpoint_sk(AGENT, KIND)
NOTES = "blob_0c1d2e3f405162738495a6b7c8d9eaf0"
SCREENSHOT = "blob_5f4e3d2c1b0a99887766554433221100"
NEVER_ATTACHED = "blob_d00dfeedd00dfeedd00dfeedd00dfeed"
STATE_1 = "blobs/acme/states/9f0c4b6e2a7d4e1b8c3f5a6d7e8f9012"
STATE_2 = "blobs/acme/states/a1b2c3d4e5f60718293a4b5c6d7e8f90"
NOTES_OBJECT = layout.blob_object(TENANT, NOTES)
SCREENSHOT_OBJECT = layout.blob_object(TENANT, SCREENSHOT)
NEVER_ATTACHED_OBJECT = layout.blob_object(TENANT, NEVER_ATTACHED)
FIRST_CLAIM = b"\x11" * 8
"""The request tag of the save that attached both blobs (`r0` of the sample INSERT's image)."""
BYSTANDERS = (
    layout.blob_object("other", NOTES),  # another tenant's blob of the same id
    layout.state_object("other", "9f0c4b6e2a7d4e1b8c3f5a6d7e8f9012"),  # another tenant's state of the same name
    layout.blob_object(TENANT, "blob_" + "b" * 32),  # another checkpoint's blob
    layout.state_object(TENANT, "c" * 32),  # another checkpoint's state
)
SEEDED = (STATE_1, STATE_2, NOTES_OBJECT, SCREENSHOT_OBJECT, NEVER_ATTACHED_OBJECT, *BYSTANDERS)
PENDING, ATTACHED = schema.PENDING_TAG[1], schema.ATTACHED_TAG[1]


# -- the samples and the world they act on ----------------------------------------------------------------------


def records_of(name: str) -> list[dict[str, Any]]:
    """The records of the sample event `events/<name>.json` (a fresh copy)."""
    found = load_event(name)["Records"]
    assert isinstance(found, list)
    return copy.deepcopy(found)


INSERT, MODIFY, EXPIRED, BLOB_EXPIRED = (
    records_of(name)[0]
    for name in (
        "stream_checkpoint_insert",
        "stream_checkpoint_modify",
        "stream_checkpoint_expired",
        "stream_blob_expired",
    )
)
BATCH = records_of("stream_batch")


def sequence(stream_record: dict[str, Any]) -> str:
    number = stream_record["dynamodb"]["SequenceNumber"]
    assert isinstance(number, str)
    return number


def typed(image: dict[str, Any]) -> dict[str, Any]:
    """An image of Lambda's event form (binary as base64 text) as botocore sends an item (binary as bytes)."""

    def value(attr: dict[str, Any]) -> dict[str, Any]:
        ((kind, raw),) = attr.items()
        if kind == "B":
            return {"B": base64.b64decode(raw)}
        if kind == "L":
            return {"L": [value(v) for v in raw]}
        if kind == "M":
            return {"M": {k: value(v) for k, v in raw.items()}}
        return {kind: raw}

    return {name: value(attr) for name, attr in image.items()}


REVISION_1 = typed(INSERT["dynamodb"]["NewImage"])
REVISION_2 = typed(MODIFY["dynamodb"]["NewImage"])


class World:
    """The bucket and table the reaper works on, and what a test reads back of them."""

    def __init__(self, dynamodb: Any, s3: Any) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3

    def put_object(self, key: str, body: bytes = b"bytes") -> None:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=body, Tagging=f"{schema.PENDING_TAG[0]}={PENDING}")

    def objects(self) -> set[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return {str(o["Key"]) for o in listed}

    def tag(self, key: str) -> str | None:
        tags = self.s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
        return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), None)

    def tags(self) -> dict[str, str | None]:
        return {key: self.tag(key) for key in sorted(self.objects())}

    def put_blob_record(
        self, blob_id: str, claim: bytes | None = FIRST_CLAIM, owner: tuple[str, str] = (PK, SK)
    ) -> None:
        """A blob's record as the store writes it: declared, then claimed by the checkpoint `owner`."""
        tenant_id, subject_id, agent_id, kind, _ = layout.read_checkpoint_keys(*owner, "")
        blob = Blob(
            tenant_id=TENANT,
            blob_id=blob_id,
            agent_id=AGENT,
            sha256=hashlib.sha256(blob_id.encode()).hexdigest(),
            size=5,
            media_type="text/plain",
            created_ms=1_785_412_000_000,
            expires_ms=None,
            owner=CheckpointKey(tenant_id, subject_id, agent_id, kind),
        )
        item = items.blob_item(blob)
        if claim is not None:
            item[items.CLAIM] = {"B": claim}
        self.dynamodb.put_item(TableName=TABLE, Item=item)

    def blob_record(self, blob_id: str) -> dict[str, Any] | None:
        found = self.dynamodb.get_item(TableName=TABLE, Key=layout.blob_key(TENANT, blob_id), ConsistentRead=True)
        item = found.get("Item")
        return None if item is None else dict(item)

    def put_checkpoint(self, item: dict[str, Any]) -> None:
        self.dynamodb.put_item(TableName=TABLE, Item=item)

    def table(self) -> list[dict[str, Any]]:
        return sorted(
            data_items(self.dynamodb.scan(TableName=TABLE)["Items"]), key=lambda i: (i["pk"]["S"], i["sk"]["S"])
        )


@pytest.fixture(scope="module")
def clients(engine: str) -> Iterator[tuple[Any, Any]]:
    """A DynamoDB client on the engine and an S3 client for the tests' own reads and writes, made once per engine
    (moto answers them in each test's own account; DynamoDB Local's table is made afresh per test); and the reaper's
    container kept across the tests of this module on one engine, as a warm Lambda container is (a test that needs a
    cold one clears it): making clients is most of what these tests would otherwise spend."""
    import boto3

    from tests.engines import engine_for_test

    reaper_function.reaper.cache_clear()
    dynamodb = boto3.client("dynamodb", region_name="us-east-1") if engine == MOTO else engine_for_test().client()
    yield dynamodb, boto3.client("s3", region_name="us-east-1")
    reaper_function.reaper.cache_clear()


@pytest.fixture(autouse=True)
def _deployed(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """The reaper function's environment, as the stack sets it (on DynamoDB Local, its endpoint too)."""
    reaper_environment(monkeypatch, engine)


def _seeded(world: World) -> World:
    """Every sample's object written pending, bystanders among them, and the blob records of the checkpoint's two
    blobs (claimed by its first save)."""
    for key in SEEDED:
        world.put_object(key)
    world.put_blob_record(NOTES)
    world.put_blob_record(SCREENSHOT)
    return world


@pytest.fixture
def world(clients: tuple[Any, Any], engine: str) -> Iterator[World]:
    """A fresh moto account with Baton's bucket, and Baton's table (from `schema`, as deployed) on the engine,
    seeded."""
    from moto import mock_aws

    from baton_checkpoints.store.schema import ensure_bucket, ensure_table
    from tests.engines import fresh_table

    dynamodb, s3 = clients
    with mock_aws():
        if engine == MOTO:
            ensure_table(dynamodb, TABLE)
        else:
            fresh_table(dynamodb, TABLE)
        ensure_bucket(s3, BUCKET)
        yield _seeded(World(dynamodb, s3))


@pytest.fixture
def served_world(aws: Any, clients: tuple[Any, Any]) -> World:
    """The api handler's moto account (the `aws` fixture: its table and bucket), seeded."""
    return _seeded(World(aws, clients[1]))


def reap(*stream_records: dict[str, Any]) -> list[str]:
    """Invoke the reaper function with a batch of records; the sequence numbers it reported failed."""
    answer = reaper_function.handler({"Records": list(stream_records)}, None)
    assert set(answer) == {"batchItemFailures"}
    failures = [str(f["itemIdentifier"]) for f in answer["batchItemFailures"]]
    record("reaper (integration)", invocations=1, records=len(stream_records), failed_records=len(failures))
    return failures


# -- S3 faults at the reaper's client ---------------------------------------------------------------------------


class S3Faults:
    """Takes moto's place on the reaper's S3 client (`before-send`): the struck requests get S3's 503, every other
    request goes on to moto. botocore retries the 503s by its own rules, as it would against S3."""

    def __init__(self, moto: Callable[..., AWSResponse | None], keys: set[str] | None, operation: str | None) -> None:
        self.moto = moto
        self.keys = keys
        """The object keys to fail (None: every key)."""
        self.operation = operation
        """The operation to fail (None: every operation)."""
        self.struck: Counter[str] = Counter()

    def __call__(self, request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        path = request.url.split("?", 1)[0]
        key_struck = self.keys is None or any(path.endswith("/" + k) for k in self.keys)
        if not key_struck or self.operation not in (None, operation):
            return self.moto(request=request, event_name=event_name, **kwargs)
        self.struck[operation] += 1
        body = b"<Error><Code>ServiceUnavailable</Code><Message>Injected fault</Message></Error>"
        return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, _Body(body))  # type: ignore[arg-type]


class _Body:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


@pytest.fixture
def s3_faults() -> Iterator[Callable[..., S3Faults]]:
    """Arms `S3Faults` on the reaper's own S3 client (the one its handler uses) for the rest of the test."""
    from moto.core.models import botocore_stubber

    armed: list[tuple[Any, S3Faults]] = []

    def arm(keys: set[str] | None, operation: str | None = None) -> S3Faults:
        client: Any = reaper_function.reaper().s3
        faults = S3Faults(botocore_stubber, keys, operation)
        client.meta.events.unregister("before-send", botocore_stubber)
        client.meta.events.register("before-send.s3", faults)
        armed.append((client, faults))
        return faults

    yield arm
    for client, faults in armed:
        client.meta.events.unregister("before-send.s3", faults)
        client.meta.events.register("before-send", botocore_stubber)


# -- single records ---------------------------------------------------------------------------------------------


def test_an_insert_retags_its_spilled_state_and_both_blobs_attached(world: World) -> None:
    world.put_checkpoint(REVISION_1)
    assert reap(INSERT) == []
    assert world.objects() == set(SEEDED)  # nothing deleted
    tags = world.tags()
    assert {k for k, v in tags.items() if v == ATTACHED} == {STATE_1, NOTES_OBJECT, SCREENSHOT_OBJECT}
    assert {k for k, v in tags.items() if v == PENDING} == set(SEEDED) - {STATE_1, NOTES_OBJECT, SCREENSHOT_OBJECT}


def test_a_modify_deletes_the_replaced_state_and_the_dropped_blob_and_retags_the_new_state(world: World) -> None:
    world.put_checkpoint(REVISION_2)
    assert reap(MODIFY) == []
    assert world.objects() == set(SEEDED) - {STATE_1, SCREENSHOT_OBJECT}
    assert world.blob_record(SCREENSHOT) is None
    assert world.blob_record(NOTES) is not None  # still held: untouched
    assert world.tag(STATE_2) == ATTACHED
    assert world.tag(NOTES_OBJECT) == PENDING  # held by both images: nothing to retag


def test_a_ttl_removal_deletes_the_state_and_releases_the_remaining_blob(world: World) -> None:
    assert reap(EXPIRED) == []
    assert world.objects() == set(SEEDED) - {STATE_2, NOTES_OBJECT}
    assert world.blob_record(NOTES) is None
    assert world.blob_record(SCREENSHOT) is not None  # not this record's business


def test_an_unattached_blob_records_expiry_deletes_its_object(world: World) -> None:
    tables_before = world.table()
    assert reap(BLOB_EXPIRED) == []
    assert world.objects() == set(SEEDED) - {NEVER_ATTACHED_OBJECT}
    assert world.table() == tables_before


def test_a_blob_records_removal_by_the_reaper_itself_deletes_nothing(world: World) -> None:
    # Given the REMOVE the reaper's own delete of an attached blob's record produces
    removed = copy.deepcopy(BLOB_EXPIRED)
    removed["dynamodb"]["OldImage"][items.OWNER_PK] = {"S": PK}
    removed["dynamodb"]["OldImage"][items.OWNER_SK] = {"S": SK}
    assert reap(removed) == []
    assert world.objects() == set(SEEDED)


# -- batches, duplicates, failures ------------------------------------------------------------------------------


def test_the_sample_batch_deletes_exactly_what_the_table_let_go_of(world: World) -> None:
    # Given the item is gone by the time the batch is reaped (the batch ends with its TTL removal)
    assert reap(*BATCH) == []
    assert world.objects() == set(BYSTANDERS)
    assert world.blob_record(NOTES) is None
    assert world.blob_record(SCREENSHOT) is None
    assert all(world.tag(key) == PENDING for key in BYSTANDERS)


@pytest.mark.parametrize(
    "batch",
    [[INSERT], [MODIFY], [EXPIRED], [BLOB_EXPIRED], BATCH, [*BATCH, *BATCH]],
    ids=["insert", "modify", "expired", "blob_expired", "batch", "batch_twice_in_one"],
)
def test_a_record_delivered_twice_does_the_same_and_nothing_more(world: World, batch: list[dict[str, Any]]) -> None:
    # Given the table as it is after the last record's write (after a batch: the item expired, gone)
    current = {id(INSERT): REVISION_1, id(MODIFY): REVISION_2}.get(id(batch[0])) if len(batch) == 1 else None
    if current is not None:
        world.put_checkpoint(current)
    # When the records are reaped, and then delivered again
    assert reap(*batch) == []
    after_first = (world.tags(), world.table())
    assert after_first != (dict.fromkeys(sorted(SEEDED), PENDING), after_first[1])  # the first delivery did work
    assert reap(*batch) == []
    # Then the second delivery changed nothing
    assert (world.tags(), world.table()) == after_first


def test_an_s3_failure_on_one_record_fails_that_record_only(world: World, s3_faults: Callable[..., S3Faults]) -> None:
    # Given S3 answers 503 to every delete of the state the MODIFY drops
    faults = s3_faults({STATE_1}, "DeleteObject")
    # When the batch is reaped
    failed = reap(*BATCH)
    # Then exactly the MODIFY is reported, by its sequence number, after botocore's own retries
    assert failed == [sequence(MODIFY)]
    assert faults.struck["DeleteObject"] == 4  # `max_attempts: 3` in store/aws.py: retries after the first try
    # And every other record did its work: the INSERT's retags, the TTL removal's and the blob expiry's deletes
    assert world.objects() == {STATE_1, SCREENSHOT_OBJECT, *BYSTANDERS}
    assert world.tag(STATE_1) == ATTACHED
    assert world.tag(SCREENSHOT_OBJECT) == ATTACHED
    assert world.blob_record(NOTES) is None
    # And the MODIFY stopped before its blob: the screenshot is still whole, record and object
    assert world.blob_record(SCREENSHOT) is not None
    # When Lambda retries from the failed record on, S3 back
    faults.keys = set()
    assert reap(*BATCH[BATCH.index(MODIFY) :]) == []
    # Then the retry finishes the work and nothing else changes
    assert world.objects() == set(BYSTANDERS)
    assert world.blob_record(SCREENSHOT) is None


def test_a_dynamodb_failure_fails_the_records_that_read_a_blob_and_no_other(world: World) -> None:
    # Given DynamoDB answers 503 to every GetItem of the reaper's client (each blob it may release is read first)
    with injected(reaper_function.reaper().dynamodb) as injector:
        injector.arm(Fault("GetItem", UNAVAILABLE_503, Phase.BEFORE, Duration.EVERY))
        failed = reap(*BATCH)
    # Then the two records that drop a blob (and a state: the current checkpoint is read before either is deleted)
    # fail and delete nothing; the INSERT, the claim and the blob expiry are done
    assert failed == [sequence(MODIFY), sequence(EXPIRED)]
    assert world.objects() == set(SEEDED) - {NEVER_ATTACHED_OBJECT}
    assert world.blob_record(NOTES) is not None
    assert world.blob_record(SCREENSHOT) is not None


def test_the_handler_reports_a_batch_whose_every_record_failed_and_does_not_raise(
    world: World, s3_faults: Callable[..., S3Faults]
) -> None:
    s3_faults(None)
    assert reap(INSERT, BLOB_EXPIRED) == [sequence(INSERT), sequence(BLOB_EXPIRED)]
    assert world.objects() == set(SEEDED)


def test_objects_already_gone_are_neither_errors_nor_recreated(world: World) -> None:
    # Given every object the records name is gone already (later writes dropped them)
    for key in (STATE_1, STATE_2, NOTES_OBJECT, SCREENSHOT_OBJECT, NEVER_ATTACHED_OBJECT):
        world.s3.delete_object(Bucket=BUCKET, Key=key)
    assert reap(*BATCH) == []
    assert world.objects() == set(BYSTANDERS)


# -- blobs that come back ---------------------------------------------------------------------------------------


STATE_3 = "blobs/acme/states/" + "3" * 32


def test_a_blob_attached_again_before_its_drop_is_reaped_is_kept(world: World) -> None:
    # Given a third save attached the screenshot again (a new claim) before the MODIFY that dropped it is reaped
    # (its state spilled anew: every write has its own state object)
    revision_3 = {**copy.deepcopy(REVISION_1), "rev": {"N": "3"}, items.STATE_OBJECT: {"S": STATE_3}}
    world.put_checkpoint(revision_3)
    world.put_blob_record(SCREENSHOT, claim=b"\x33" * 8)
    assert reap(MODIFY) == []
    # Then the screenshot stays, object and record; only the replaced state goes
    assert world.objects() == set(SEEDED) - {STATE_1}
    record_now = world.blob_record(SCREENSHOT)
    assert record_now is not None
    assert record_now[items.CLAIM] == {"B": b"\x33" * 8}


def test_a_save_that_attaches_the_blob_again_while_it_is_reaped_wins(world: World) -> None:
    # Given the checkpoint does not hold the screenshot when the reaper reads it, and a save attaches it again (a new
    # claim, then the checkpoint naming it) just before the reaper deletes its record
    world.put_checkpoint(REVISION_2)
    client: Any = reaper_function.reaper().dynamodb
    raced: list[str] = []

    def save_attaching_again(**_: Any) -> None:
        if not raced:
            raced.append("saved")
            world.put_blob_record(SCREENSHOT, claim=b"\x33" * 8)
            world.put_checkpoint({**copy.deepcopy(REVISION_1), "rev": {"N": "3"}})

    client.meta.events.register("before-call.dynamodb.DeleteItem", save_attaching_again)
    try:
        assert reap(MODIFY) == []
    finally:
        client.meta.events.unregister("before-call.dynamodb.DeleteItem", save_attaching_again)
    # Then the reaper's conditional delete lost to the new claim: the blob is whole
    assert raced == ["saved"]
    assert SCREENSHOT_OBJECT in world.objects()
    assert world.blob_record(SCREENSHOT) is not None
    assert STATE_1 not in world.objects()


def test_a_blob_whose_record_is_already_gone_has_its_object_deleted(world: World) -> None:
    # Given an earlier try deleted the screenshot's record and then failed on its object
    world.dynamodb.delete_item(TableName=TABLE, Key=layout.blob_key(TENANT, SCREENSHOT))
    world.put_checkpoint(REVISION_2)
    assert reap(MODIFY) == []
    assert SCREENSHOT_OBJECT not in world.objects()


def test_a_blob_owned_by_another_checkpoint_is_left_alone(world: World) -> None:
    other = (layout.checkpoint_pk(TENANT, "ticket-9"), SK)
    world.put_blob_record(SCREENSHOT, owner=other)
    world.put_checkpoint(REVISION_2)
    assert reap(MODIFY) == []
    assert SCREENSHOT_OBJECT in world.objects()
    assert world.blob_record(SCREENSHOT) is not None


# -- the function's wiring --------------------------------------------------------------------------------------


def test_records_that_reference_nothing_make_no_aws_client(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a new container, and a batch of writes of inline states without resources (most checkpoint writes) and
    # of blob declarations
    reaper_function.reaper.cache_clear()
    made: list[str] = []

    def counted(name: str) -> Callable[..., Any]:
        original = getattr(reaper_function, name)

        def make(*args: Any) -> Any:
            made.append(name)
            return original(*args)

        return make

    for name in ("s3_client", "dynamodb_client"):
        monkeypatch.setattr(reaper_function, name, counted(name))
    inline = copy.deepcopy(MODIFY)
    for side in ("OldImage", "NewImage"):
        image = inline["dynamodb"][side]
        for name in (items.STATE_OBJECT, items.RESOURCES, items.RESOURCE_BLOBS):
            image.pop(name, None)
        image[items.TEXT] = {"S": '{"step":3}'}
    declared = copy.deepcopy(BATCH[1])
    declared["eventName"] = "INSERT"
    del declared["dynamodb"]["OldImage"]
    unchanged = copy.deepcopy(inline)
    unchanged["dynamodb"]["NewImage"] = copy.deepcopy(unchanged["dynamodb"]["OldImage"])
    # When a record that stores nothing new is reaped by a new container, then no client was made: a cold start
    # pays for none
    assert reap(unchanged) == []
    assert made == []
    # When they are reaped, then only the DynamoDB client was made, for their count (one request)
    assert reap(inline, declared) == []
    assert made == ["dynamodb_client"]
    # And the first record that needs S3 makes the S3 client
    assert reap(BLOB_EXPIRED) == []
    assert made == ["dynamodb_client", "s3_client"]


def test_the_function_refuses_to_run_without_its_bucket(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_BUCKET_NAME")
    reaper_function.reaper.cache_clear()
    with pytest.raises(Exception, match="BATON_BUCKET_NAME"):
        reaper_function.handler({"Records": [INSERT]}, None)


# -- records of real saves, from moto's stream ------------------------------------------------------------------


class Stream:
    """The table's stream as the engine records it (the world in use: moto's or DynamoDB Local's), read on from
    where the last read stopped, in Lambda's event form."""

    def __init__(self, dynamodb: Any) -> None:
        self._client = streams_client()
        self._arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        shard = self._client.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self._iterator = self._client.get_shard_iterator(
            StreamArn=self._arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def read(self) -> list[dict[str, Any]]:
        """The records written since the last read that reach the reaper (the event source's filter lets only the
        items it acts on through: never a tenant's rate-limit bucket, say)."""
        answer = self._client.get_records(ShardIterator=self._iterator)
        self._iterator = answer["NextShardIterator"]
        reaching = [r for r in answer["Records"] if r["dynamodb"]["Keys"]["pk"]["S"].startswith(STREAM_ITEM_PREFIXES)]
        return [{**_event_form(r), "eventSourceARN": self._arn} for r in reaching]


def _event_form(value: Any) -> Any:
    """A record as the streams API gives it to boto3 (bytes, datetimes) in the form Lambda hands a function."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    if isinstance(value, dict):
        return {k: _event_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_event_form(v) for v in value]
    return value


def _upload(world: World, api: ApiDriver, data: bytes, media_type: str) -> str:
    """Declare a blob and PUT its bytes as its presigned upload would (checksum and pending tag): its id."""
    sha256 = hashlib.sha256(data)
    declared = api.invoke(
        "create_blob",
        body={"sha256": sha256.hexdigest(), "size": len(data), "media_type": media_type},
        headers={"idempotency-key": None},
    )
    assert declared.status == 201, declared.raw_body
    blob_id = str(declared.data["blob_id"])
    world.s3.put_object(
        Bucket=BUCKET,
        Key=layout.blob_object(TENANT, blob_id),
        Body=data,
        ContentType=media_type,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=base64.b64encode(sha256.digest()).decode("ascii"),
        Tagging=f"{schema.PENDING_TAG[0]}={PENDING}",
    )
    return blob_id


def _big_state(seed: int) -> dict[str, Any]:
    """A state that the store spills (hex digests barely compress: about 64 KB packed)."""
    return {"log": [hashlib.sha256(f"{seed}:{n}".encode()).hexdigest() for n in range(1000)]}


def _resource(name: str, blob_id: str, data: bytes, media_type: str) -> dict[str, Any]:
    return {
        "name": name,
        "blob_id": blob_id,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": media_type,
    }


def test_the_stream_of_real_saves_and_a_delete_is_reaped_to_an_empty_bucket(
    api: ApiDriver, served_world: World
) -> None:
    world = served_world
    # Given the seeded world without its samples' objects, a stream read from now on, and two uploaded blobs
    for key in set(SEEDED) - set(BYSTANDERS):
        world.s3.delete_object(Bucket=BUCKET, Key=key)
    stream = Stream(world.dynamodb)
    stream.read()
    notes, shot = b"rollback plan\n", b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    notes_id, shot_id = _upload(world, api, notes, "text/plain"), _upload(world, api, shot, "image/png")
    resources = [
        _resource("notes.txt", notes_id, notes, "text/plain"),
        _resource("shot.png", shot_id, shot, "image/png"),
    ]
    plain: dict[str, str | None] = {"idempotency-key": None}
    body = {"subject_id": SUBJECT, "kind": KIND}

    # When a save attaches both with a spilled state, and its records are reaped
    first = api.invoke("save_checkpoint", body={**body, "state": _big_state(1), "resources": resources}, headers=plain)
    assert first.status == 201, first.raw_body
    assert reap(*stream.read()) == []
    # Then the state and both blobs are attached
    (state_1,) = world.objects() - set(BYSTANDERS) - {layout.blob_object(TENANT, b) for b in (notes_id, shot_id)}
    assert {k: v for k, v in world.tags().items() if k not in BYSTANDERS} == {
        state_1: ATTACHED,
        layout.blob_object(TENANT, notes_id): ATTACHED,
        layout.blob_object(TENANT, shot_id): ATTACHED,
    }

    # When a second save replaces the state and drops the screenshot
    second = api.invoke(
        "save_checkpoint", body={**body, "state": _big_state(2), "resources": resources[:1]}, headers=plain
    )
    assert second.status == 200, second.raw_body
    assert reap(*stream.read()) == []
    # Then the old state and the screenshot (object and record) are gone, the new state attached, and the checkpoint
    # still reads back whole
    (state_2,) = world.objects() - set(BYSTANDERS) - {layout.blob_object(TENANT, notes_id)}
    assert state_2 != state_1
    assert world.tag(state_2) == ATTACHED
    assert world.blob_record(shot_id) is None
    looked_up = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    assert looked_up.status == 200
    assert looked_up.data["state"] == _big_state(2)

    # When the checkpoint is deleted, and everything the stream carries is reaped (the reaper's own deletes too)
    checkpoint_id = first.data["checkpoint_id"]
    unconditional: dict[str, str | None] = {"if-match": None}
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers=unconditional)
    assert deleted.status == 200, deleted.raw_body
    for _ in range(3):
        assert reap(*stream.read()) == []
    # Then nothing of it is left: no object, no blob record; the bystanders are untouched
    assert world.objects() == set(BYSTANDERS)
    assert world.blob_record(notes_id) is None
    left = {layout.identity(i) for i in world.table() if i["pk"]["S"].startswith(("B#", "C#"))}
    assert left == {layout.identity(layout.blob_key(TENANT, b)) for b in (NOTES, SCREENSHOT)}  # the seeded ones


def test_the_log_names_failed_records_by_sequence_number_and_never_their_contents(
    world: World, s3_faults: Callable[..., S3Faults], caplog: pytest.LogCaptureFixture
) -> None:
    s3_faults({STATE_1}, "DeleteObject")
    with caplog.at_level("INFO", logger="baton"):
        assert reap(*BATCH) == [sequence(MODIFY)]
    fields = ("sequence_number", "event_name", "error", "error_code", "records", "failed", "deleted", "released")
    lines = [
        {"message": r.getMessage(), **{f: getattr(r, f) for f in fields if hasattr(r, f)}}
        for r in caplog.records
        if r.name == "baton"
    ]
    (failed,) = [line for line in lines if line["message"] == "stream record failed"]
    assert failed["sequence_number"] == sequence(MODIFY)
    assert failed["error_code"] == "ServiceUnavailable"
    (batch,) = [line for line in lines if line["message"] == "stream batch"]
    assert (batch["records"], batch["failed"]) == (len(BATCH), 1)
    # No subject, no object key, no image: only sequence numbers, event names, codes and counts
    written = json.dumps(lines) + " ".join(r.getMessage() for r in caplog.records)
    for secret in (SUBJECT, "blobs/", NOTES, "rollback"):
        assert secret not in written, secret
