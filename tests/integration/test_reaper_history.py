"""The reaper and kept revisions, against in-process moto: real saves through the api handler, and the records moto's
own stream gave for them (and for the reaper's own writes) fed to `baton_checkpoints.handlers.reaper.handler`.

What is shown: a save that keeps a revision moves its spilled state and its blobs to the revision, and the reaper keeps
them; a revision pruned, or deleted with its checkpoint, lets them go unless the checkpoint or another revision still
holds them; a checkpoint removed takes its revisions (only its own) with it. Every batch is delivered twice: the second
delivery must write nothing (no stream record, so no item written or deleted; no object or tag changed).
"""

from __future__ import annotations

import hashlib
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import time_machine

from baton_checkpoints.api.services import Services
from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.store import items, layout, schema
from tests.builders import save
from tests.integration.conftest import BUCKET, TABLE, aws_world, put_key, reaper_environment, table_items
from tests.integration.driver import ApiDriver, CallCounter, Result
from tests.integration.test_reaper import Stream
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

SUITE = "reaper history (integration)"
TENANT, AGENT, KIND = "acme", "operator", "task_state"
SUBJECT = "ticket-7310"
START = datetime(2027, 5, 3, 9, 0, tzinfo=UTC)
PLANNER_SECRET = "btn_test_reaper_history_planner_01"
"""Agent `planner` of tenant `acme`: saves its own checkpoints (a bystander in the operator's subject)."""
STATES = layout.state_object(TENANT, "")
ATTACHED = schema.ATTACHED_TAG[1]
MAX_ROUNDS = 6
"""Rounds of reaping after which the stream must be quiet (each round reaps what the last one wrote)."""


def big_state(label: str) -> dict[str, Any]:
    """A state the store spills: random hex barely packs (about 20 KB stored, past the 16 KB threshold)."""
    return {"label": label, "blob": secrets.token_hex(20_000)}


@dataclass
class Tally:
    """What one test reaped (for the case counts)."""

    records: Counter[str] = field(default_factory=Counter)
    redelivered: int = 0
    rounds: int = 0

    def recorded(self, **more: int) -> None:
        record(
            SUITE,
            records=sum(self.records.values()),
            inserts=self.records["INSERT"],
            modifies=self.records["MODIFY"],
            removes=self.records["REMOVE"],
            redelivered_records=self.redelivered,
            rounds=self.rounds,
            **more,
        )


class World:
    """The api handler's moto account as the tests see it (they may scan; Baton never does), the table's stream and
    the reaper function fed from it."""

    def __init__(self, dynamodb: Any, s3: Any, stream: Stream) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3
        self.stream = stream
        self.backlog: list[dict[str, Any]] = []
        self.tally = Tally()

    def emptied(self) -> World:
        """The table without checkpoints, revisions, blob records and idempotency records (the keys stay), the bucket
        empty, and the stream read past it all: what an earlier test left (finished or not) is not this one's."""
        for item in self.table():
            if item[schema.PK]["S"].startswith(("C#", "B#", "D#")):
                self.dynamodb.delete_item(TableName=TABLE, Key=layout.key(*layout.identity(item)))
        for key in self.objects():
            self.s3.delete_object(Bucket=BUCKET, Key=key)
        while self.stream.read():
            pass
        return self

    # -- what the bucket and the table hold

    def objects(self) -> set[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return {str(o["Key"]) for o in listed}

    def state_objects(self) -> set[str]:
        return {key for key in self.objects() if key.startswith(STATES)}

    def tag(self, key: str) -> str | None:
        tags = self.s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
        return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), None)

    def table(self) -> list[dict[str, Any]]:
        return table_items(self.dynamodb)

    def bucket(self) -> dict[str, str | None]:
        """Every object with its tag."""
        return {key: self.tag(key) for key in sorted(self.objects())}

    def checkpoint_item(self, subject: str = SUBJECT, agent: str = AGENT, kind: str = KIND) -> dict[str, Any] | None:
        found = self.dynamodb.get_item(
            TableName=TABLE, Key=layout.checkpoint_key(TENANT, subject, agent, kind), ConsistentRead=True
        )
        item = found.get("Item")
        return None if item is None else dict(item)

    def revision_items(self, subject: str = SUBJECT, agent: str = AGENT, kind: str = KIND) -> list[dict[str, Any]]:
        """The slot's kept revisions (every checkpoint id that held it), counted with one Query as the reaper reads
        them."""
        response = self.dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": layout.checkpoint_pk(TENANT, subject)},
                ":prefix": {"S": layout.revisions_prefix(agent, kind)},
            },
            ConsistentRead=True,
        )
        assert "LastEvaluatedKey" not in response
        return list(response["Items"])

    def referenced_states(self) -> set[str]:
        """The spilled states every checkpoint and kept revision in the table names."""
        return {item[items.STATE_OBJECT]["S"] for item in self.table() if items.STATE_OBJECT in item}

    def blob_record(self, blob_id: str) -> dict[str, Any] | None:
        found = self.dynamodb.get_item(TableName=TABLE, Key=layout.blob_key(TENANT, blob_id), ConsistentRead=True)
        item = found.get("Item")
        return None if item is None else dict(item)

    # -- reaping

    def pending(self) -> list[dict[str, Any]]:
        """The stream records not reaped yet: those the last reaping wrote, then those written since."""
        backlog, self.backlog = self.backlog, []
        return [*backlog, *self.stream.read()]

    def reap(self, stream_records: list[dict[str, Any]], twice: bool = True) -> None:
        """Deliver a batch to the reaper function and (`twice`) deliver it again: the second delivery must write
        nothing (no stream record, so no item written or deleted; no object or tag changed). What the first delivery
        wrote to the table is `pending()` next."""
        assert _reaped(stream_records) == []
        self.backlog.extend(self.stream.read())
        self.tally.records.update(str(r["eventName"]) for r in stream_records)
        self.tally.rounds += 1
        if twice:
            after = self.bucket()
            assert _reaped(stream_records) == []
            again = [(r["eventName"], layout.identity(r["dynamodb"]["Keys"])) for r in self.stream.read()]
            assert again == [], f"a batch delivered again wrote to the table: {again}"
            assert self.bucket() == after, "a batch delivered again changed the bucket"
            self.tally.redelivered += len(stream_records)

    def reap_until_quiet(self) -> None:
        """Reap what the stream carries, then what that reaping wrote, until nothing more comes."""
        for _ in range(MAX_ROUNDS):
            batch = self.pending()
            if not batch:
                return
            self.reap(batch)
        raise AssertionError(f"the stream was not quiet after {MAX_ROUNDS} rounds of reaping")

    def assert_bucket_in_step(self) -> None:
        """The bucket's spilled states are exactly those the table names, each tagged attached."""
        referenced = self.referenced_states()
        assert self.state_objects() == referenced
        assert {key: self.tag(key) for key in referenced} == dict.fromkeys(referenced, ATTACHED)


def _reaped(stream_records: list[dict[str, Any]]) -> list[str]:
    """Invoke the reaper function with a batch; the sequence numbers it reported failed."""
    answer = reaper_function.handler({"Records": stream_records}, None)
    return [str(f["itemIdentifier"]) for f in answer["batchItemFailures"]]


@pytest.fixture(scope="module", autouse=True)
def _warm_reaper(engine: str) -> Iterator[None]:
    """The reaper's container is kept across this module's tests on one engine (as a warm Lambda container is), made
    afresh for it (another module or engine may have left one with other settings) and dropped after it."""
    reaper_function.reaper.cache_clear()
    yield
    reaper_function.reaper.cache_clear()


@pytest.fixture(scope="module")
def aws(engine: str) -> Iterator[Any]:
    """One world for the module per engine, the api handler serving it as one warm container (a fresh world per test
    would cost more than the tests); each test starts from an emptied table and bucket (`World.emptied`)."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture(scope="module")
def stream(aws: Any) -> Stream:
    """The table's stream, read on across the module's tests."""
    return Stream(aws)


@pytest.fixture
def world(aws: Any, services: Services, stream: Stream, monkeypatch: pytest.MonkeyPatch, engine: str) -> World:
    """The reaper function's environment as the stack sets it, on the api handler's world, emptied."""
    reaper_environment(monkeypatch, engine)
    assert services.objects is not None
    return World(aws, services.objects.client, stream).emptied()


COUNT = {"TransactWriteItems": 1}
"""What counting a batch's records for their tenants adds to a batch's requests (`store/metering.py`)."""


@pytest.fixture
def reaper_calls(world: World) -> Iterator[CallCounter]:
    """Counts the DynamoDB requests the reaper function's own client sends."""
    calls = CallCounter()
    client: Any = reaper_function.reaper().dynamodb
    client.meta.events.register("before-call.dynamodb", calls)
    yield calls
    client.meta.events.unregister("before-call.dynamodb", calls)


# -- requests -----------------------------------------------------------------------------------------------------


def saved(api: ApiDriver, state: Any, *, created: bool = False, **fields: Any) -> Result:
    """A plain save of the test subject's checkpoint (or what `fields` name), which must be accepted."""
    answer = save(api, subject_id=fields.pop("subject_id", SUBJECT), state=state, **fields)
    assert answer.status == (201 if created else 200), answer.raw_body
    return answer


def revision(api: ApiDriver, checkpoint_id: str, number: int) -> Result:
    return api.invoke("get_revision", path=f"/v1/checkpoints/{checkpoint_id}/revisions/{number}")


def restore(api: ApiDriver, checkpoint_id: str, number: int) -> Result:
    return api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}/restore",
        body={"revision": number},
        headers={"idempotency-key": None},
    )


def delete(api: ApiDriver, checkpoint_id: str) -> None:
    answer = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None})
    assert answer.status == 200, answer.raw_body


def uploaded_blob(api: ApiDriver, data: bytes, media_type: str = "text/plain") -> dict[str, Any]:
    """Declare a blob through the api and PUT its bytes to the presigned URL with the headers the answer gives (moto
    answers `requests` in process); its resource reference."""
    sha256 = hashlib.sha256(data).hexdigest()
    declared = api.invoke(
        "create_blob",
        body={"sha256": sha256, "size": len(data), "media_type": media_type},
        headers={"idempotency-key": None},
    )
    assert declared.status == 201, declared.raw_body
    upload = declared.data["upload"]
    put = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=10)
    assert put.status_code == 200, put.text
    blob_id = str(declared.data["blob_id"])
    return {
        "name": f"{blob_id[-6:]}.txt",
        "blob_id": blob_id,
        "sha256": sha256,
        "size": len(data),
        "media_type": media_type,
    }


def blob_object(resource: dict[str, Any]) -> str:
    return layout.blob_object(TENANT, str(resource["blob_id"]))


def state_key(item: dict[str, Any] | None) -> str:
    """The key of the object holding an item's spilled state (the item must have one)."""
    assert item is not None
    assert items.STATE_OBJECT in item, "the state was expected to be spilled"
    return str(item[items.STATE_OBJECT]["S"])


def revision_states(world: World, **slot: str) -> dict[int, str | None]:
    """The kept revisions of a slot by number, each with the key of its spilled state (None: inline)."""
    return {
        layout.read_revision_sk(item[schema.SK]["S"])[3]: (
            item[items.STATE_OBJECT]["S"] if items.STATE_OBJECT in item else None
        )
        for item in world.revision_items(**slot)
    }


# -- 1. a history save keeps the spilled state it supersedes -------------------------------------------------------


def test_a_history_save_over_a_spilled_state_keeps_its_object_for_the_revision(api: ApiDriver, world: World) -> None:
    first_state = big_state("first")
    checkpoint_id = str(saved(api, first_state, created=True, keep_revisions=2).data["checkpoint_id"])
    world.reap_until_quiet()
    first_object = state_key(world.checkpoint_item())
    assert world.tag(first_object) == ATTACHED

    # When a save with history on supersedes it with an inline state, and the MODIFY is reaped
    saved(api, {"step": 2})
    written = world.pending()
    # (one transaction: the checkpoint's MODIFY and the kept revision's INSERT)
    assert sorted((r["eventName"], r["dynamodb"]["Keys"][schema.SK]["S"][:2]) for r in written) == [
        ("INSERT", layout.REVISION),
        ("MODIFY", layout.CHECKPOINT),
    ]
    (modify,) = [r for r in written if r["eventName"] == "MODIFY"]
    assert state_key(modify["dynamodb"]["OldImage"]) == first_object
    assert items.STATE_OBJECT not in modify["dynamodb"]["NewImage"]
    world.reap(written)
    assert world.pending() == []  # the reaper kept everything: it wrote nothing

    # Then the object stays, attached, named by revision 1, and that revision reads back whole
    assert first_object in world.objects()
    assert world.tag(first_object) == ATTACHED
    assert revision_states(world) == {1: first_object}
    kept = revision(api, checkpoint_id, 1)
    assert kept.status == 200, kept.raw_body
    assert kept.data["state"] == first_state

    # And a spilled state superseded by a spilled one is kept as well, the new one attached
    third_state = big_state("third")
    saved(api, third_state)
    world.reap_until_quiet()
    third_object = state_key(world.checkpoint_item())
    saved(api, big_state("fourth"))
    world.reap_until_quiet()
    assert revision_states(world) == {2: None, 3: third_object}
    assert revision(api, checkpoint_id, 3).data["state"] == third_state
    world.assert_bucket_in_step()
    assert first_object not in world.objects()  # revision 1 fell out of the window of 2, pruned and reaped

    # And a restore of the spilled revision spills its state anew: revision 3 keeps its object
    restored = restore(api, checkpoint_id, 3)
    assert restored.status == 200, restored.raw_body
    world.reap_until_quiet()
    restored_object = state_key(world.checkpoint_item())
    assert restored_object != third_object
    assert third_object in world.objects()
    assert revision(api, checkpoint_id, 3).data["state"] == third_state
    world.assert_bucket_in_step()
    world.tally.recorded(scenarios=1)


def test_a_plain_save_over_a_spilled_state_still_deletes_the_old_object(api: ApiDriver, world: World) -> None:
    saved(api, big_state("first"), created=True)
    world.reap_until_quiet()
    first_object = state_key(world.checkpoint_item())
    second_state = big_state("second")
    saved(api, second_state, keep_revisions=0)
    world.reap_until_quiet()
    second_object = state_key(world.checkpoint_item())
    assert world.state_objects() == {second_object}
    assert first_object != second_object
    assert world.tag(second_object) == ATTACHED
    assert world.revision_items() == []
    got = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    assert got.data["state"] == second_state
    world.tally.recorded(scenarios=1)


# -- 2. pruning lets go of what the pruned revision held -----------------------------------------------------------


@pytest.mark.parametrize("keep", [1, 3])
def test_a_pruned_revision_lets_its_object_go_and_kept_ones_stay(api: ApiDriver, world: World, keep: int) -> None:
    checks = 0
    states: dict[int, dict[str, Any]] = {}
    objects: dict[int, str] = {}
    checkpoint_id = ""
    for number in range(1, keep + 4):
        states[number] = big_state(f"step {number}")
        answer = saved(api, states[number], created=number == 1, keep_revisions=keep)
        checkpoint_id = str(answer.data["checkpoint_id"])
        written = world.pending()
        assert [r for r in written if r["eventName"] == "REMOVE"] == []  # a save deletes nothing
        world.reap(written)
        pruned = world.pending()
        if number > keep + 1:
            # Reaping the save deleted revision number - keep - 1, which fell below the window: the object that
            # revision held goes when its REMOVE is reaped, not before
            (removed,) = pruned
            assert removed["eventName"] == "REMOVE"
            assert layout.read_revision_sk(removed["dynamodb"]["Keys"][schema.SK]["S"])[3] == number - keep - 1
            assert objects[number - keep - 1] in world.objects()
            world.reap(pruned)
            assert objects[number - keep - 1] not in world.objects()
        else:
            assert pruned == []
        world.reap_until_quiet()
        objects[number] = state_key(world.checkpoint_item())
        # Then exactly the checkpoint's object and those of the revisions in the window are in the bucket
        window = range(max(1, number - keep), number)
        assert revision_states(world) == {n: objects[n] for n in window}
        assert world.state_objects() == {objects[n] for n in (*window, number)}
        world.assert_bucket_in_step()
        for n in window:
            assert revision(api, checkpoint_id, n).data["state"] == states[n]
        checks += 1

    # When history is turned off, reaping that save deletes the revisions left, and their objects go with them
    last = keep + 4
    saved(api, {"step": last}, keep_revisions=0)
    world.reap_until_quiet()
    assert world.revision_items() == []
    assert world.state_objects() == set()
    world.tally.recorded(scenarios=1, windows_checked=checks)


# -- 3. blobs held by kept revisions -------------------------------------------------------------------------------


def test_a_blob_dropped_by_a_history_save_stays_until_its_revision_is_pruned(api: ApiDriver, world: World) -> None:
    resource = uploaded_blob(api, b"rollback plan\n")
    blob_id, object_key = str(resource["blob_id"]), blob_object(resource)
    saved(api, {"step": 1}, created=True, resources=[resource], keep_revisions=2)
    world.reap_until_quiet()
    assert world.tag(object_key) == ATTACHED

    # When a save without the resource supersedes it (revision 1, which names it, is kept), and 2 more saves follow
    saved(api, {"step": 2})
    world.reap_until_quiet()
    # Then the blob stays whole: record and object
    assert world.blob_record(blob_id) is not None
    assert object_key in world.objects()
    saved(api, {"step": 3})  # revision 1 is still in the window (1, 2)
    world.reap_until_quiet()
    assert world.blob_record(blob_id) is not None
    assert object_key in world.objects()

    # When revision 1 is pruned and its REMOVE reaped
    saved(api, {"step": 4})
    world.reap_until_quiet()
    # Then the blob is released: record and object gone
    assert sorted(revision_states(world)) == [2, 3]
    assert world.blob_record(blob_id) is None
    assert object_key not in world.objects()
    world.tally.recorded(scenarios=1)


def test_a_restored_revision_attaches_its_blob_again_and_it_survives_everything(api: ApiDriver, world: World) -> None:
    resource = uploaded_blob(api, b"the report\n")
    blob_id, object_key = str(resource["blob_id"]), blob_object(resource)
    checkpoint_id = str(
        saved(api, {"step": 1}, created=True, resources=[resource], keep_revisions=2).data["checkpoint_id"]
    )
    saved(api, {"step": 2})
    world.reap_until_quiet()
    claim_before = (world.blob_record(blob_id) or {}).get(items.CLAIM)

    # When revision 1 (which names the blob) is restored before it is pruned
    restored = restore(api, checkpoint_id, 1)
    assert restored.status == 200, restored.raw_body
    world.reap_until_quiet()
    # Then the checkpoint holds the blob again, under a new claim
    current = world.checkpoint_item()
    assert current is not None
    assert current[items.RESOURCE_BLOBS]["SS"] == [blob_id]
    blob = world.blob_record(blob_id)
    assert blob is not None
    assert blob.get(items.CLAIM) != claim_before

    # When the saves that follow name it and revision 1 is pruned, and everything is reaped
    for step in (4, 5):
        saved(api, {"step": step}, resources=[resource])
        world.reap_until_quiet()
    assert sorted(revision_states(world)) == [3, 4]
    # Then the blob is whole and attached, and the checkpoint reads back with it
    assert world.blob_record(blob_id) is not None
    assert world.tag(object_key) == ATTACHED
    looked_up = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    assert [r["blob_id"] for r in looked_up.data["resources"]] == [blob_id]
    download = requests.get(looked_up.data["resources"][0]["download_url"], timeout=10)
    assert download.content == b"the report\n"

    # And once the checkpoint is deleted and everything reaped, it is released (its REMOVE delivered once: a second
    # delivery does more, see `test_a_checkpoint_remove_delivered_again_does_nothing_more`)
    delete(api, checkpoint_id)
    world.reap(world.pending(), twice=False)
    world.reap_until_quiet()
    assert world.blob_record(blob_id) is None
    assert object_key not in world.objects()
    assert world.revision_items() == []
    world.tally.recorded(scenarios=1)


# -- 4. a checkpoint deleted takes its revisions, and only its own -------------------------------------------------


def test_deleting_a_checkpoint_deletes_its_revisions_and_then_their_objects(
    api: ApiDriver, world: World, services: Services
) -> None:
    put_key(services, PLANNER_SECRET, TENANT, "planner", {"checkpoints:read", "checkpoints:write"}, "key_" + "7" * 32)
    resource = uploaded_blob(api, b"notes held by revision 1 only\n")
    # Given the checkpoint at revision 4 (revisions 1..3 kept, each spilled, revision 1 naming a blob), and
    # bystanders with kept revisions: another kind and another agent in its subject, and the same slot in another
    # subject
    checkpoint_id = ""
    for number in range(1, 5):
        fields: dict[str, Any] = {"keep_revisions": 3, "resources": [resource]} if number == 1 else {}
        checkpoint_id = str(
            saved(api, big_state(f"doomed {number}"), created=number == 1, **fields).data["checkpoint_id"]
        )
    bystanders: list[dict[str, str]] = [
        {"subject": SUBJECT, "agent": AGENT, "kind": "workflow"},
        {"subject": SUBJECT, "agent": "planner", "kind": KIND},
        {"subject": "ticket-7311", "agent": AGENT, "kind": KIND},
    ]
    for slot in bystanders:
        for number in range(1, 3):
            answer = save(
                api,
                subject_id=slot["subject"],
                kind=slot["kind"],
                state=big_state(f"bystander {number}"),
                keep_revisions=1,
                secret=PLANNER_SECRET if slot["agent"] == "planner" else None,
            )
            assert answer.status in (200, 201), answer.raw_body
    world.reap_until_quiet()
    world.assert_bucket_in_step()
    doomed = revision_states(world)
    assert sorted(doomed) == [1, 2, 3]
    doomed_objects = {*doomed.values(), state_key(world.checkpoint_item())}
    assert None not in doomed_objects
    kept_before = {
        i: (world.revision_items(**slot), world.checkpoint_item(**slot)) for i, slot in enumerate(bystanders)
    }
    assert all(len(revisions) == 1 for revisions, _ in kept_before.values())
    bystander_objects = world.state_objects() - doomed_objects
    assert len(bystander_objects) == len(bystanders) * 2

    # When the checkpoint is deleted and its REMOVE reaped
    delete(api, checkpoint_id)
    (removed,) = world.pending()
    assert (removed["eventName"], removed["dynamodb"]["Keys"][schema.SK]["S"]) == (
        "REMOVE",
        layout.checkpoint_sk(AGENT, KIND),
    )
    world.reap([removed])
    produced = world.pending()
    # Then all its revision items are gone, and only its own current state object (the revisions' are theirs)
    assert world.revision_items() == []
    assert world.state_objects() == (doomed_objects - {state_key(removed["dynamodb"]["OldImage"])}) | bystander_objects
    assert world.blob_record(str(resource["blob_id"])) is not None  # revision 1's REMOVE is still to be reaped
    # And the reaper's own deletes are on the stream: one REMOVE per revision
    assert sorted((r["eventName"], r["dynamodb"]["Keys"][schema.SK]["S"]) for r in produced) == sorted(
        ("REMOVE", layout.revision_sk(AGENT, KIND, checkpoint_id, n)) for n in (1, 2, 3)
    )

    # When those REMOVEs are reaped (and what they write in turn)
    world.reap(produced)
    world.reap_until_quiet()
    # Then their objects and the blob revision 1 named are gone, and the bystanders are untouched
    assert world.state_objects() == bystander_objects
    assert world.blob_record(str(resource["blob_id"])) is None
    assert blob_object(resource) not in world.objects()
    assert {
        i: (world.revision_items(**slot), world.checkpoint_item(**slot)) for i, slot in enumerate(bystanders)
    } == kept_before
    assert {key: world.tag(key) for key in bystander_objects} == dict.fromkeys(bystander_objects, ATTACHED)
    world.assert_bucket_in_step()
    world.tally.recorded(scenarios=1, bystanders=len(bystanders))


def test_a_purged_subject_leaves_no_revision_object_or_blob(api: ApiDriver, world: World) -> None:
    # Given two checkpoints of the subject with kept revisions (spilled, each naming a blob that only they hold),
    # and a bystander subject
    blobs = {KIND: uploaded_blob(api, b"the task's notes\n"), "workflow": uploaded_blob(api, b"the workflow's\n")}
    for kind, resource in blobs.items():
        saved(api, big_state(f"{kind} 1"), created=True, kind=kind, keep_revisions=2, resources=[resource])
        saved(api, big_state(f"{kind} 2"), kind=kind, resources=[resource])
        saved(api, big_state(f"{kind} 3"), kind=kind)
    saved(api, big_state("bystander 1"), created=True, subject_id="ticket-7312", keep_revisions=1)
    saved(api, big_state("bystander 2"), subject_id="ticket-7312")
    world.reap_until_quiet()
    bystander = {key for key in world.state_objects() if key in _states_of(world, "ticket-7312")}
    assert len(bystander) == 2
    assert len(world.revision_items(kind="workflow")) == 2

    # When the subject is purged and everything is reaped
    purged = api.invoke("purge_subject", path=f"/v1/subjects/{SUBJECT}")
    assert purged.status == 200, purged.raw_body
    assert purged.data["complete"] is True
    world.reap_until_quiet()
    # Then nothing of the subject is left in the bucket or among the blob records; the bystander is whole
    assert world.state_objects() == bystander
    assert {key for key in world.objects() if not key.startswith(STATES)} == set()
    assert [i for i in world.table() if i[schema.PK]["S"].startswith("B#")] == []
    world.assert_bucket_in_step()
    world.tally.recorded(scenarios=1)


def _states_of(world: World, subject: str) -> set[str]:
    """The spilled states a subject's items name."""
    pk = layout.checkpoint_pk(TENANT, subject)
    return {i[items.STATE_OBJECT]["S"] for i in world.table() if i[schema.PK]["S"] == pk and items.STATE_OBJECT in i}


# -- 4b. a checkpoint replaced after expiry -------------------------------------------------------------------------


def test_a_checkpoint_replaced_after_expiry_takes_its_old_revisions_with_it(api: ApiDriver, world: World) -> None:
    with time_machine.travel(START, tick=False) as clock:
        # Given a checkpoint with revisions 1 and 2 kept (spilled, revision 1 naming a blob), which then expires
        resource = uploaded_blob(api, b"attached before the expiry\n")
        blob_id = str(resource["blob_id"])
        first = saved(api, big_state("old 1"), created=True, ttl_seconds=60, keep_revisions=2, resources=[resource])
        saved(api, big_state("old 2"))
        saved(api, big_state("old 3"))
        world.reap_until_quiet()
        old_objects = world.state_objects()
        assert len(old_objects) == 3
        assert sorted(revision_states(world)) == [1, 2]
        clock.shift(timedelta(seconds=61))

        # When a save re-creates the slot (a new id) and the stream is reaped
        second = saved(api, big_state("new 1"), created=True, keep_revisions=2)
        assert second.data["checkpoint_id"] != first.data["checkpoint_id"]
        (replaced,) = world.pending()
        assert replaced["eventName"] == "MODIFY"
        world.reap([replaced])
        produced = world.pending()
        # Then the old id's revisions are deleted, and their REMOVEs let go of their objects and the blob
        assert world.revision_items() == []
        assert sorted(layout.identity(r["dynamodb"]["Keys"])[1] for r in produced) == [
            layout.revision_sk(AGENT, KIND, str(first.data["checkpoint_id"]), n) for n in (1, 2)
        ]
        world.reap(produced)
        world.reap_until_quiet()
        assert world.state_objects() == {state_key(world.checkpoint_item())}
        assert not old_objects & world.state_objects()
        assert world.blob_record(blob_id) is None
        assert blob_object(resource) not in world.objects()
        world.assert_bucket_in_step()
    world.tally.recorded(scenarios=1)


# -- 5. every record delivered twice; what the reaper reads --------------------------------------------------------


def test_a_plain_save_is_reaped_without_reading_revisions(
    api: ApiDriver, world: World, reaper_calls: CallCounter
) -> None:
    # Given a checkpoint without history, its state spilled and a blob attached
    resource = uploaded_blob(api, b"a plain attachment\n")
    saved(api, big_state("first"), created=True, resources=[resource])
    world.reap_until_quiet()

    # When a plain save replaces the spilled state (no `vf` in either image), and its MODIFY is reaped
    saved(api, big_state("second"), resources=[resource])
    (modify,) = world.pending()
    assert not any(items.REVISIONS_FROM in modify["dynamodb"][side] for side in ("OldImage", "NewImage"))
    reaper_calls.reset()
    world.reap([modify], twice=False)
    # Then the reaper read the checkpoint as it is now, and no revision (and counted the record: one transaction)
    assert dict(reaper_calls.calls) == {"GetItem": 1, **COUNT}
    world.reap([modify])  # and again: nothing more

    # When a plain save with an inline state replaces it, then one drops the blob, each MODIFY reaped
    saved(api, {"step": 3}, resources=[resource])
    world.reap_until_quiet()
    saved(api, {"step": 4})
    (modify,) = world.pending()
    reaper_calls.reset()
    world.reap([modify], twice=False)
    # Then: the blob's record, the checkpoint, the conditional delete of the record; no Query
    assert dict(reaper_calls.calls) == {"GetItem": 2, "DeleteItem": 1, **COUNT}
    assert world.blob_record(str(resource["blob_id"])) is None
    world.reap([modify])
    world.reap_until_quiet()
    world.assert_bucket_in_step()
    assert world.objects() == set()

    # And a save with history on, over a spilled state, does read the slot's revisions (one Query), and deletes
    # the revision that fell below the window (one Query of the keys below it, one BatchWriteItem)
    saved(api, big_state("fifth"), keep_revisions=1)
    world.reap_until_quiet()
    saved(api, big_state("sixth"))
    world.reap_until_quiet()
    saved(api, big_state("seventh"))
    written = world.pending()
    (modify,) = [r for r in written if r["eventName"] == "MODIFY"]
    reaper_calls.reset()
    assert _reaped([modify]) == []
    assert dict(reaper_calls.calls) == {"GetItem": 1, "Query": 2, "BatchWriteItem": 1, **COUNT}
    world.reap(written)
    world.reap_until_quiet()
    world.assert_bucket_in_step()
    world.tally.recorded(scenarios=1, request_counts_checked=3)


# -- findings: the two tests below fail on the reaper as it is (see the report); each passes once it is fixed -------


def test_a_checkpoint_remove_delivered_again_does_nothing_more(api: ApiDriver, world: World) -> None:
    # Given a checkpoint holding a blob that its kept revision 1 names too
    resource = uploaded_blob(api, b"held twice\n")
    checkpoint_id = str(
        saved(api, {"step": 1}, created=True, resources=[resource], keep_revisions=2).data["checkpoint_id"]
    )
    saved(api, {"step": 2}, resources=[resource])
    world.reap_until_quiet()
    # When it is deleted and its REMOVE is delivered twice, the second delivery must write nothing. It does: the
    # first kept the blob (revision 1 still named it) and deleted the revisions; the second, finding none, deletes
    # the blob's record and object (which the revisions' own REMOVEs would have done)
    delete(api, checkpoint_id)
    world.reap(world.pending())


@pytest.mark.parametrize("history", [False, True], ids=["plain", "history"])
def test_a_record_dropping_a_state_and_a_blob_reads_the_checkpoint_and_its_revisions_once(
    api: ApiDriver, world: World, reaper_calls: CallCounter, history: bool
) -> None:
    resource = uploaded_blob(api, b"dropped with the state\n")
    saved(api, big_state("first"), created=True, resources=[resource], keep_revisions=2 if history else 0)
    world.reap_until_quiet()
    saved(api, {"step": 2})
    (modify,) = [r for r in world.pending() if r["eventName"] == "MODIFY"]
    reaper_calls.reset()
    assert _reaped([modify]) == []
    # the blob's record, the checkpoint (once), the slot's revisions (once, with history on) ...
    expected = {"GetItem": 2, "Query": 1, **COUNT} if history else {"GetItem": 2, "DeleteItem": 1, **COUNT}
    assert dict(reaper_calls.calls) == expected
