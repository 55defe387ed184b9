"""Fault injection at Baton's own DynamoDB client: each step of each write path, each way DynamoDB fails.

Every case arms one fault on one DynamoDB operation of one request (see `faults.py`), sends the request through
the handler, and reads the table from moto with a client no fault touches. What must hold (api-v1.md, "Error
codes" and "Idempotency"):

- the answer is the route's success or `503 UNAVAILABLE` with a `Retry-After` of whole seconds: never a 500, a 404
  or a 409 because DynamoDB stumbled;
- a fault that struck before the write reached DynamoDB and ended in a 503 wrote nothing: the table is unchanged;
- a write that landed and whose answer was lost (botocore retried it) is recognised: success, applied once. When
  every attempt loses its answer the 503 is ambiguous: the write landed at most once;
- no idempotency record without its checkpoint write; a revision is never skipped;
- the client's retry of the same request after a 503 succeeds and applies once; with its Idempotency-Key, later
  replays carry `Idempotent-Replayed: true`.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.endpoint
import pytest
import time_machine
from boto3.dynamodb.types import TypeDeserializer
from botocore.retries.quota import RetryQuota

from baton.domain.access import hash_secret
from baton.store import items as store_items
from baton.store import layout
from baton.store.blobs import BLOB_ANSWER
from tests import proof_counts
from tests.builders import save, save_body
from tests.integration.conftest import OPERATOR_SECRET, TABLE, put_key, services_on, serving
from tests.integration.driver import ApiDriver, Result
from tests.integration.faults import (
    CANCELLED_THROTTLING,
    CANCELLED_THROUGHPUT,
    CONNECTION_DROPPED,
    INTERNAL_500,
    READ_TIMEOUT,
    THROTTLING,
    UNPROCESSED_KEYS,
    Duration,
    Fault,
    FaultKind,
    Phase,
    fault_plan,
    injected,
)

SUITE = "fault injection"
TENANT = "acme"
AGENT = "operator"
SUBJECT = "faults"
KIND = "task_state"
START = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
CHECKPOINT_KEY = layout.identity(layout.checkpoint_key(TENANT, SUBJECT, AGENT, KIND))
IDEMPOTENCY_KEY = "fault-injection-1"
RECORD_KEY = layout.identity(layout.idempotency_key(TENANT, AGENT, IDEMPOTENCY_KEY))
SUCCESS = frozenset({200, 201})

Item = dict[str, Any]
Snapshot = dict[tuple[str, str], Item]


@pytest.fixture(autouse=True)
def retry_delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore sleeps between retries (`botocore.endpoint` calls `time.sleep`); record the delays instead."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=delays.append))
    return delays


@dataclass
class MotoAccount:
    """One moto account for the whole module (a new one per case would cost more than the cases themselves)."""

    aws: Any
    """A client of moto that no fault touches: the test's own view of the table."""
    services: Any
    """The handler's services, built once, as in one warm Lambda container."""
    retry_quotas: list[RetryQuota]


@pytest.fixture(scope="module")
def moto_account() -> Iterator[MotoAccount]:
    """Baton's table in moto, the handler's services built once, and the operator key of tenant `acme`."""
    import boto3
    from moto import mock_aws

    from baton.store.schema import ensure_table

    quotas: list[RetryQuota] = []
    original_init = RetryQuota.__init__

    def recorded_init(self: RetryQuota, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        quotas.append(self)

    with mock_aws():
        aws = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(aws, TABLE)
        with pytest.MonkeyPatch.context() as recording:
            recording.setattr(RetryQuota, "__init__", recorded_init)
            services = services_on(TABLE)
        assert len(quotas) == 1, "the handler's client should have one retry quota"
        with serving(lambda: services):
            yield MotoAccount(aws=aws, services=services, retry_quotas=quotas)


@pytest.fixture
def env(moto_account: MotoAccount) -> MotoAccount:
    """The module's moto account with a new, empty table holding only the operator key, and the handler's client
    as a new container's.

    A new table per case: moto keeps every stream record of a table and copies the whole table on each
    transaction, so one table for all cases would make each transaction slower than the last. botocore's retry
    quota belongs to the client and drains as cases fail on purpose; each case starts with a full one.
    """
    from baton.store.schema import ensure_table

    moto_account.aws.delete_table(TableName=TABLE)
    ensure_table(moto_account.aws, TABLE)
    put_key(moto_account.services, OPERATOR_SECRET, TENANT, AGENT, {"*", "tenants:manage"}, "key_" + "a" * 32)
    for quota in moto_account.retry_quotas:
        full: Any = quota
        full._available_capacity = full._max_capacity
    return moto_account


# -- the table, read from moto directly ----------------------------------------------------------------------------


def snapshot(aws: Any) -> Snapshot:
    """Every item of the table, by key (the test may scan; the product never does)."""
    deserializer = TypeDeserializer()
    items: Snapshot = {}
    request: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
    while True:
        response = aws.scan(**request)
        for raw in response["Items"]:
            key = (raw["pk"]["S"], raw["sk"]["S"])
            items[key] = _logical(raw, {name: deserializer.deserialize(value) for name, value in raw.items()})
        if "LastEvaluatedKey" not in response:
            return items
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _logical(raw: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """An item as what it means, read through the store's own mapping (attribute names are the store's business):
    a checkpoint's fields, an idempotency record's answer, a key record as stored."""
    if raw["pk"]["S"].startswith("C#"):
        return dict(vars(store_items.checkpoint_from_item(raw)))
    if raw["pk"]["S"].startswith("D#") and BLOB_ANSWER in raw:
        return {"declared": item[BLOB_ANSWER], "request_id": item[store_items.REQUEST]}
    if raw["pk"]["S"].startswith(layout.BLOB_PK_PREFIX):
        return dict(vars(store_items.blob_from_item(raw)))
    if raw["pk"]["S"].startswith("D#"):
        record = store_items.record_from_item(raw)
        return {"result": dict(vars(record.saved)), "request_id": record.request_id, "expires_ms": record.expires_ms}
    return item


def changed_keys(before: Snapshot, after: Snapshot) -> set[tuple[str, str]]:
    """Keys of the items a request created, changed or removed."""
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def assert_table_consistent(items: Snapshot) -> None:
    """No idempotency record without its checkpoint write: each record's answer names a checkpoint that exists and
    has reached at least that revision."""
    checkpoints = {item["checkpoint_id"]: item for key, item in items.items() if key[0].startswith("C#")}
    blobs = {item["blob_id"] for key, item in items.items() if key[0].startswith(layout.BLOB_PK_PREFIX)}
    for key, item in items.items():
        if not key[0].startswith("D#"):
            continue
        if "declared" in item:
            assert item["declared"]["id"] in blobs, f"idempotency record {key} answers a blob never declared"
            continue
        result = item["result"]
        written = checkpoints.get(result["checkpoint_id"])
        assert written is not None, f"idempotency record {key} answers a checkpoint that was never written: {result}"
        assert written["revision"] >= result["revision"], f"record {key} is ahead of its checkpoint"


def state_hash(step: int) -> str:
    """The state hash of the state `{"step": step}` (RFC 8785 canonical JSON)."""
    return hashlib.sha256(json.dumps({"step": step}, separators=(",", ":")).encode()).hexdigest()


# -- the write paths --------------------------------------------------------------------------------------------


@dataclass
class Context:
    """What a scenario works with: the caller's driver, the module's moto account, and the clock."""

    account: MotoAccount
    clock: Any = None
    api: ApiDriver = field(default_factory=lambda: ApiDriver(OPERATOR_SECRET))
    checkpoint_id: str | None = None
    key_id: str | None = None
    blob_id: str | None = None


def save_step(ctx: Context, step: int, idempotency_key: str | None = None, ttl_seconds: int = 3600) -> Result:
    """A save of the test subject's checkpoint with the state `{"step": step}`."""
    return save(ctx.api, idempotency_key, subject_id=SUBJECT, state={"step": step}, ttl_seconds=ttl_seconds)


def prepare_nothing(ctx: Context) -> None:
    """Nothing saved yet."""


def prepare_new_caller(ctx: Context) -> None:
    """A caller whose key this container has never read: its first request authenticates with a GetItem."""
    secret = f"btn_fault_caller_{uuid.uuid4().hex}"
    put_key(ctx.account.services, secret, TENANT, AGENT, {"*"}, f"key_{uuid.uuid4().hex}")
    ctx.api = ApiDriver(secret)


def prepare_checkpoint(ctx: Context) -> None:
    """A checkpoint at revision 1 (this also caches the caller's key)."""
    created = save_step(ctx, 1)
    assert created.status == 201, created.raw_body
    ctx.checkpoint_id = created.data["checkpoint_id"]


def prepare_expired_checkpoint(ctx: Context) -> None:
    """A checkpoint that expired a minute ago, which TTL has not removed yet."""
    created = save_step(ctx, 1, ttl_seconds=60)
    assert created.status == 201, created.raw_body
    ctx.checkpoint_id = created.data["checkpoint_id"]
    ctx.clock.shift(timedelta(seconds=120))


def prepare_warm_key(ctx: Context) -> None:
    """The caller's key read once, so a key route's own read of it is the one under test."""
    assert ctx.api.invoke("list_keys", query={}).status == 200


def prepare_key_to_revoke(ctx: Context) -> None:
    """A key of agent `planner`, issued through the API."""
    created = ctx.api.invoke("create_key")
    assert created.status == 201, created.raw_body
    ctx.key_id = created.data["key_id"]


def send_plain_save(ctx: Context) -> Result:
    return save_step(ctx, 2)


def send_idempotent_save(ctx: Context) -> Result:
    return save_step(ctx, 2, IDEMPOTENCY_KEY)


def send_delete(ctx: Context) -> Result:
    return ctx.api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{ctx.checkpoint_id}", headers={"if-match": None})


def send_create_key(ctx: Context) -> Result:
    return ctx.api.invoke("create_key")


def send_revoke_key(ctx: Context) -> Result:
    return ctx.api.invoke("revoke_key", path=f"/v1/keys/{ctx.key_id}")


BLOB_BODY = {"sha256": hashlib.sha256(b"fault").hexdigest(), "size": 5, "media_type": "application/octet-stream"}


def send_declare_blob(ctx: Context) -> Result:
    return ctx.api.invoke("create_blob", body=BLOB_BODY, headers={"idempotency-key": None})


def send_idempotent_declare_blob(ctx: Context) -> Result:
    return ctx.api.invoke("create_blob", body=BLOB_BODY, headers={"idempotency-key": IDEMPOTENCY_KEY})


def prepare_blob(ctx: Context) -> None:
    """A declared blob (this also caches the caller's key)."""
    declared = send_declare_blob(ctx)
    assert declared.status == 201, declared.raw_body
    ctx.blob_id = declared.data["blob_id"]


def send_read_blob(ctx: Context) -> Result:
    return ctx.api.invoke("get_blob", path=f"/v1/blobs/{ctx.blob_id}")


def blob_declared_once(idempotent: bool) -> Callable[..., None]:
    """The check of a declaration applied exactly once: one new blob record (and its key's idempotency record)."""

    def check(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
        changed = changed_keys(before, after)
        blob_keys = {key for key in changed if key[0].startswith(layout.BLOB_PK_PREFIX)}
        assert len(blob_keys) == 1, f"{len(blob_keys)} blob records written, expected one"
        assert changed - blob_keys == ({RECORD_KEY} if idempotent else set())
        (key,) = blob_keys
        assert key not in before
        blob = after[key]
        assert (blob["sha256"], blob["size"], blob["agent_id"]) == (BLOB_BODY["sha256"], 5, AGENT)
        if idempotent:
            assert after[RECORD_KEY]["declared"]["id"] == blob["blob_id"]
        if answer is not None:
            assert answer.data["blob_id"] == blob["blob_id"]

    return check


def read_nothing(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert after == before
    if answer is not None:
        assert answer.data["blob_id"] == ctx.blob_id


def saved_once(revision: int, new_checkpoint: bool, idempotent: bool) -> Callable[..., None]:
    """The check of a save of `{"step": 2}` applied exactly once: the checkpoint at `revision`, nothing else
    changed but its idempotency record."""

    def check(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
        expected = {CHECKPOINT_KEY, RECORD_KEY} if idempotent else {CHECKPOINT_KEY}
        assert changed_keys(before, after) == expected
        item = after[CHECKPOINT_KEY]
        assert item["revision"] == revision, f"revision {item['revision']}, expected {revision} (applied once)"
        assert item["state_hash"] == state_hash(2)
        if new_checkpoint and CHECKPOINT_KEY in before:
            assert item["checkpoint_id"] != before[CHECKPOINT_KEY]["checkpoint_id"]
        elif CHECKPOINT_KEY in before:
            assert item["checkpoint_id"] == before[CHECKPOINT_KEY]["checkpoint_id"]
        if idempotent:
            result = after[RECORD_KEY]["result"]
            assert (result["checkpoint_id"], result["revision"]) == (item["checkpoint_id"], revision)
        if answer is not None:
            assert answer.data["revision"] == revision
            assert answer.data["checkpoint_id"] == item["checkpoint_id"]
            assert answer.data["updated"] is (revision > 1)

    return check


def deleted_once(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert changed_keys(before, after) == {CHECKPOINT_KEY}
    assert CHECKPOINT_KEY not in after
    if answer is not None:
        assert answer.data == {"checkpoint_id": ctx.checkpoint_id, "deleted": True}


def key_created_once(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    created = changed_keys(before, after)
    assert len(created) == 1, f"{len(created)} items changed, expected one new key"
    (key,) = created
    assert key not in before
    assert key[0].startswith("K#")
    item = after[key]
    assert (item["tenant_id"], item["agent_id"]) == (TENANT, "planner")
    assert "revoked_at" not in item
    if answer is not None:
        assert key == (f"K#{hash_secret(answer.data['secret'])}", "K")
        assert answer.data["key_id"] == item["key_id"]


def key_revoked_once(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    changed = changed_keys(before, after)
    assert len(changed) == 1
    (key,) = changed
    old, new = before[key], after[key]
    assert new["key_id"] == ctx.key_id
    assert "revoked_at" not in old
    assert "revoked_at" in new
    assert {k: v for k, v in new.items() if k != "revoked_at"} == old
    if answer is not None:
        assert answer.data == {"key_id": ctx.key_id, "deleted": True}


@dataclass(frozen=True)
class Scenario:
    """A request on one write path, the DynamoDB operations it makes, and what applying it once looks like."""

    name: str
    steps: tuple[str, ...]
    prepare: Callable[[Context], None]
    send: Callable[[Context], Result]
    success: int
    applied_once: Callable[[Context, Snapshot, Snapshot, Result | None], None]
    idempotent: bool = False
    phases: frozenset[Phase] = frozenset(Phase)
    """Where faults strike. A fault before the request lands meets the same call and the same error handling
    whether the item exists or not, so the scenarios over an existing item only lose answers."""


LOST_ANSWERS_ONLY = frozenset({Phase.AFTER})


SCENARIOS = (
    Scenario("auth_cold", ("GetItem",), prepare_new_caller, send_plain_save, 201, saved_once(1, True, False)),
    Scenario("save_create", ("UpdateItem",), prepare_nothing, send_plain_save, 201, saved_once(1, True, False)),
    Scenario(
        "save_update",
        ("UpdateItem",),
        prepare_checkpoint,
        send_plain_save,
        200,
        saved_once(2, False, False),
        phases=LOST_ANSWERS_ONLY,
    ),
    Scenario(
        "save_over_expired",
        ("PutItem",),  # its UpdateItem is save_update's, answered with the expired item
        prepare_expired_checkpoint,
        send_plain_save,
        201,
        saved_once(1, True, False),
    ),
    Scenario(
        "idempotent_create",
        ("BatchGetItem", "TransactWriteItems"),
        prepare_nothing,
        send_idempotent_save,
        201,
        saved_once(1, True, True),
        idempotent=True,
    ),
    Scenario(
        "idempotent_update",
        ("TransactWriteItems",),
        prepare_checkpoint,
        send_idempotent_save,
        200,
        saved_once(2, False, True),
        idempotent=True,
        phases=LOST_ANSWERS_ONLY,
    ),
    Scenario("delete", ("Query", "DeleteItem"), prepare_checkpoint, send_delete, 200, deleted_once),
    Scenario("key_create", ("GetItem", "PutItem"), prepare_warm_key, send_create_key, 201, key_created_once),
    Scenario(
        "key_revoke", ("GetItem", "Query", "UpdateItem"), prepare_key_to_revoke, send_revoke_key, 200, key_revoked_once
    ),
    Scenario("blob_declare", ("PutItem",), prepare_warm_key, send_declare_blob, 201, blob_declared_once(False)),
    Scenario(
        "blob_declare_idempotent",
        ("TransactWriteItems",),
        prepare_warm_key,
        send_idempotent_declare_blob,
        201,
        blob_declared_once(True),
        idempotent=True,
    ),
    Scenario("blob_read", ("GetItem",), prepare_blob, send_read_blob, 200, read_nothing),
)


def fault_table() -> Iterator[Any]:
    """Each scenario × each of its steps × the faults worth injecting there (`faults.fault_plan`)."""
    for scenario in SCENARIOS:
        for operation in scenario.steps:
            for kind, phase, duration in fault_plan(operation):
                if phase not in scenario.phases:
                    continue
                yield pytest.param(
                    scenario,
                    operation,
                    kind,
                    phase,
                    duration,
                    id=f"{scenario.name}-{operation}-{kind.name}-{phase.value}-{duration.value}",
                )


# -- what an answer must look like ------------------------------------------------------------------------------


def assert_unavailable(answer: Result) -> None:
    """A 503 as the contract has it: UNAVAILABLE in the error envelope, Retry-After in whole seconds."""
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    assert answer.body["meta"]["request_id"]
    message = answer.error["message"]
    assert message
    assert not re.search(r"botocore|Exception|Traceback|dynamodb", message, re.IGNORECASE), message
    assert_retry_after(answer.header("Retry-After"))


def assert_retry_after(value: str | None) -> None:
    """`Retry-After` as delay-seconds (RFC 9110 §10.2.3: 1*DIGIT), positive, as a client's retry logic reads it."""
    from urllib3.util.retry import Retry

    assert value is not None, "a 503 without Retry-After"
    assert re.fullmatch(r"[0-9]+", value), f"Retry-After {value!r} is not delay-seconds"
    seconds = Retry(total=1).parse_retry_after(value)
    assert 1 <= seconds <= 300, f"Retry-After {value!r} is not a sensible positive delay"


def expectation(kind: FaultKind, phase: Phase, duration: Duration) -> str:
    """What the answer must be: 'success', '503', or 'either'."""
    if duration is Duration.ONCE and kind.retried_by_botocore:
        return "success"  # one failed attempt out of four: botocore's standard retry absorbs it
    if duration is Duration.EVERY and phase is Phase.BEFORE:
        return "503"  # nothing can get through
    return "either"


@pytest.mark.parametrize(("scenario", "operation", "kind", "phase", "duration"), list(fault_table()))
def test_a_fault_at_any_step_answers_success_or_503_and_never_half_writes(
    env: MotoAccount, scenario: Scenario, operation: str, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        ctx = Context(account=env, clock=clock)
        scenario.prepare(ctx)
        before = snapshot(env.aws)
        # When the request meets the fault at this step
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault(operation, kind, phase, duration))
            answer = scenario.send(ctx)
        after = snapshot(env.aws)
        landed_then_503 = answer.status == 503 and after != before
        proof_counts.record(
            SUITE,
            cases=1,
            faults_injected=fault.struck,
            answered_503=int(answer.status == 503),
            succeeded=int(answer.status in SUCCESS),
            landed_then_503=int(landed_then_503),
        )
        # Then the fault did strike this step, and a persistent one lasted as long as the request kept trying
        assert fault.struck >= 1, f"{operation} is not a step of {scenario.name}: the fault never struck"
        assert not fault.exhausted, f"the request tried {operation} {fault.struck} times and never gave up"
        # And the answer is the route's success, or a 503 where the fault leaves no other choice
        must = expectation(kind, phase, duration)
        assert answer.status in SUCCESS | {503}, f"{answer.status} (expected {must}): {answer.raw_body}"
        if answer.status == 503:
            assert must != "success", f"a fault botocore retries, on one attempt only, answered 503: {answer.raw_body}"
            assert_unavailable(answer)
            # A 503 means nothing was written: when every attempt lost its answer, the store reads once to find
            # out whether the write landed, and then answers the success instead.
            assert after == before, f"a 503 that wrote {sorted(changed_keys(before, after))}"
        else:
            assert must != "503", f"every attempt failed, yet the answer is {answer.status}: {answer.raw_body}"
            assert answer.status == scenario.success, answer.raw_body
            assert answer.header("Idempotent-Replayed") is None
            scenario.applied_once(ctx, before, after, answer)
        assert_table_consistent(after)
        if scenario.idempotent:
            assert_idempotent_retries(ctx, scenario, before, answer)


def assert_idempotent_retries(ctx: Context, scenario: Scenario, before: Snapshot, answer: Result) -> None:
    """The client's retry with the same Idempotency-Key, once DynamoDB is back, applies the save once at most;
    every retry after a success is a replay of it that writes nothing."""
    if answer.status == 503:
        retried = scenario.send(ctx)
        assert retried.status == scenario.success, retried.raw_body
        scenario.applied_once(ctx, before, snapshot(ctx.account.aws), retried)
        answer = retried
    settled = snapshot(ctx.account.aws)
    replay = scenario.send(ctx)
    assert replay.status == scenario.success, replay.raw_body
    assert replay.header("Idempotent-Replayed") == "true"
    assert replay.data == answer.data
    assert snapshot(ctx.account.aws) == settled


# -- a write that landed, whose answer was lost, and another writer got in before botocore's retry -------------


@pytest.fixture(scope="module")
def other_container(moto_account: MotoAccount) -> Any:
    """The services of a second Lambda container sharing the table (its own client, which no fault touches)."""
    return services_on(TABLE)


def other_container_saves(services: Any, step: int, request_id: str) -> None:
    """A plain save of `{"step": step}` by the other container."""
    from baton.domain.checkpoints import plan_save
    from baton.domain.clock import now_ms
    from baton.domain.models import SaveCheckpointRequest

    request = SaveCheckpointRequest.model_validate(save_body(subject_id=SUBJECT, state={"step": step}))
    services.checkpoints.save(plan_save(request, TENANT, AGENT, request_id, now_ms()))


@pytest.mark.parametrize(
    ("lost", "writes_between"),
    [(READ_TIMEOUT, 1), (CONNECTION_DROPPED, 1), (INTERNAL_500, 1), (READ_TIMEOUT, 7)],
    ids=["read_timeout-1", "connection_dropped-1", "internal_500-1", "read_timeout-7"],
)
@pytest.mark.parametrize("idempotency_key", [None, IDEMPOTENCY_KEY], ids=["plain", "idempotent"])
def test_a_save_whose_answer_was_lost_is_not_applied_again_after_other_writers(
    env: MotoAccount, other_container: Any, lost: FaultKind, writes_between: int, idempotency_key: str | None
) -> None:
    ctx = Context(account=env)
    # Given a checkpoint at revision 1
    prepare_checkpoint(ctx)
    operation = "UpdateItem" if idempotency_key is None else "TransactWriteItems"

    def others_write() -> None:
        for n in range(writes_between):
            other_container_saves(other_container, 100 + n, f"other-writer-{uuid.uuid4()}")

    # When our save lands as revision 2, its answer is lost, and other writers save before botocore's retry
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault(operation, lost, Phase.AFTER, Duration.ONCE, between=others_write))
        answer = save_step(ctx, 2, idempotency_key)
    proof_counts.record(
        SUITE,
        cases=1,
        faults_injected=fault.struck,
        answered_503=int(answer.status == 503),
        succeeded=int(answer.status in SUCCESS),
    )
    assert fault.struck == 1
    # Then the retry is recognised as ours: nothing applied twice, no later save overwritten, revision 2 answered
    final = snapshot(env.aws)
    assert final[CHECKPOINT_KEY]["revision"] == 2 + writes_between, (
        f"after {2 + writes_between} acknowledged saves the revision is {final[CHECKPOINT_KEY]['revision']}: "
        "ours was applied twice"
    )
    assert final[CHECKPOINT_KEY]["state_hash"] == state_hash(100 + writes_between - 1), (
        "our retry overwrote a later save"
    )
    assert answer.status == 200, answer.raw_body
    assert (answer.data["revision"], answer.data["state_hash"]) == (2, state_hash(2))
    assert_table_consistent(final)
    if idempotency_key is not None:
        # And a retry with its key replays that answer, even after the later revisions
        replay = save_step(ctx, 2, idempotency_key)
        assert replay.header("Idempotent-Replayed") == "true"
        assert replay.data == answer.data
        assert snapshot(env.aws) == final


# -- read paths, Retry-After, and the named defects -------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "operation"),
    [("lookup_checkpoint", "GetItem"), ("get_checkpoint", "Query"), ("list_subject_checkpoints", "Query")],
)
def test_a_read_that_dynamodb_keeps_throttling_is_a_503_with_retry_after(
    env: MotoAccount, event: str, operation: str
) -> None:
    ctx = Context(account=env)
    prepare_checkpoint(ctx)
    path = {
        "lookup_checkpoint": None,
        "get_checkpoint": f"/v1/checkpoints/{ctx.checkpoint_id}",
        "list_subject_checkpoints": f"/v1/subjects/{SUBJECT}/checkpoints",
    }[event]
    query = {"subject_id": SUBJECT, "kind": KIND} if event == "lookup_checkpoint" else {}
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault(operation, THROTTLING, Phase.BEFORE, Duration.EVERY))
        answer = ctx.api.invoke(event, path=path, query=query)
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, answered_503=int(answer.status == 503))
    assert fault.struck >= 1
    assert_unavailable(answer)


def test_retry_after_is_a_positive_number_of_seconds_a_client_can_wait(
    env: MotoAccount, retry_delays: list[float]
) -> None:
    ctx = Context(account=env)
    # Given DynamoDB throttling every attempt of a save
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault("UpdateItem", THROTTLING, Phase.BEFORE, Duration.EVERY))
        answer = save_step(ctx, 1)
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, answered_503=int(answer.status == 503))
    # Then botocore retried with backoff before giving up
    assert fault.struck == injector.attempts["UpdateItem"] >= 2
    assert len(retry_delays) == fault.struck - 1
    assert all(delay > 0 for delay in retry_delays)
    # And the 503 says, in whole seconds a client's retry logic can read, how long to wait
    assert_unavailable(answer)
    # And every header value is a string, as API Gateway's payload format 2.0 wants it
    assert all(isinstance(value, str) for value in answer.headers.values())


@pytest.mark.parametrize("reason", [CANCELLED_THROTTLING, CANCELLED_THROUGHPUT], ids=lambda k: k.name)
@pytest.mark.parametrize("duration", list(Duration), ids=lambda d: d.value)
def test_an_idempotent_save_cancelled_for_throttling_is_a_503_not_a_500(
    env: MotoAccount, reason: FaultKind, duration: Duration
) -> None:
    ctx = Context(account=env)
    before = snapshot(env.aws)
    # Given a transaction that DynamoDB cancels because one of its items is throttled
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault("TransactWriteItems", reason, Phase.BEFORE, duration))
        answer = save_step(ctx, 2, IDEMPOTENCY_KEY)
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, answered_503=int(answer.status == 503))
    if duration is Duration.EVERY or answer.status == 503:
        # Then the caller is told to come back later, and no idempotency key was consumed
        assert_unavailable(answer)
        assert snapshot(env.aws) == before
    else:
        # Or, on one attempt, the store tried again and saved once
        assert answer.status == 201, answer.raw_body
        saved_once(1, True, True)(ctx, before, snapshot(env.aws), answer)


def test_a_batch_get_left_unprocessed_every_time_gives_up_with_a_503(env: MotoAccount) -> None:
    ctx = Context(account=env)
    # Given DynamoDB leaving every key of the idempotent save's BatchGetItem unprocessed (as it does when throttled)
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault("BatchGetItem", UNPROCESSED_KEYS, Phase.BEFORE, Duration.EVERY))
        answer = save_step(ctx, 2, IDEMPOTENCY_KEY)
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, answered_503=int(answer.status == 503))
    # Then it stops asking after a bounded number of rounds and answers 503
    assert not fault.exhausted, f"BatchGetItem was asked {fault.struck} times for keys left unprocessed"
    assert_unavailable(answer)
