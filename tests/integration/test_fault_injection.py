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

The routes of issue 9 are here too: a save that keeps revisions (it puts a copy of the revision it supersedes, then
the checkpoint on the condition that it is still that revision: a copy whose checkpoint write failed is of the
checkpoint's own revision, outside the window and never seen, so a 503 may leave one and no other item), restore,
lease acquire (plain and idempotent) and release, the revision reads, resume and purge. A lease write leaves either no
new lease or exactly the one its answer gives, and its retry answers the same token; a purge may stop with
`complete: false` and its repeat finishes.

The MCP tools (issue 10) stand for those routes: the same scenarios as tool calls over `POST /mcp` (`mcp=True`, their
results read as the route's answers by `ToolResult`). Whatever DynamoDB does, `POST /mcp` answers 200 with a JSON-RPC
result: the tool's success, checked as the route's, or `isError: true` with `UNAVAILABLE`, which wrote nothing; the
client's retry of the same call succeeds and applies once (with its `idempotency_key`, replays).

OAuth's endpoints (issue 13) meet the same faults at each of their steps (registration, approval, a code's exchange,
a refresh, a revocation, and /mcp with an access token): success or 503, and never a grant half there (see the
section's notes at the end of this module).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import types
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.endpoint
import pytest
import time_machine
from boto3.dynamodb.types import TypeDeserializer
from botocore.retries.quota import RetryQuota
from msgspec.structs import asdict

from baton_checkpoints.domain.access import hash_secret
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.clock import now_ms as clock_now_ms
from baton_checkpoints.store import items as store_items
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.blobs import BLOB_ANSWER
from tests import proof_counts
from tests.builders import save, save_body, stored_checkpoint
from tests.integration.conftest import NOT_DATA, OPERATOR_SECRET, TABLE, data_items, put_key, services_on, serving
from tests.integration.driver import ApiDriver, Result
from tests.integration.faults import (
    CANCELLED_THROTTLING,
    CANCELLED_THROUGHPUT,
    CONNECTION_DROPPED,
    INTERNAL_500,
    KIND_BY_KIND,
    ONE_ATTEMPT_REPRESENTATIVES,
    READ_TIMEOUT,
    TAKE,
    THROTTLING,
    TRANSACTION,
    UNPROCESSED_KEYS,
    WRITES,
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
START_MS = int(START.timestamp() * 1000)

HISTORY_SUBJECT = "faults-history"
"""The subject of the history scenarios: a key of its own, so that no hint the container keeps about a checkpoint
with history sends another scenario's plain save down the transaction."""
HISTORY_KEY = layout.identity(layout.checkpoint_key(TENANT, HISTORY_SUBJECT, AGENT, KIND))
KEEP = 3
HISTORY_AT = 5
"""The history checkpoint's revision once prepared: 2, 3 and 4 kept, 1 below the window (no reaper runs here)."""
RESTORED = 3
"""The kept revision the restore scenarios restore."""
HOLDER = "worker-7"
LEASE_TTL_SECONDS = 300
PURGE_SUBJECT = "faults-purge"
PURGE_COPIES = 22
"""Checkpoints copied into the purged subject beside its history checkpoint (4 items): 26 items, two pages."""
PURGE_KEYED = ("workflow", "cursor")
"""Kinds of the purged subject saved with an Idempotency-Key: their records are purged (first), then their items."""

Item = dict[str, Any]
Snapshot = dict[tuple[str, str], Item]


@pytest.fixture(autouse=True)
def retry_delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore sleeps between retries (`botocore.endpoint` calls `time.sleep`); record the delays instead."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=delays.append))
    return delays


@pytest.fixture(autouse=True)
def store_backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The store's own backoffs (a contended save, a batch's unprocessed keys, a batch write's unprocessed items:
    a purge's and the reaper's deletes among them, a thread write), recorded instead of slept: nothing here depends
    on time passing, and they came to 7 s a run."""
    import time

    backoffs: list[float] = []
    clock = types.SimpleNamespace(sleep=backoffs.append, time=lambda: time.time(), monotonic=lambda: time.monotonic())
    for module in ("checkpoints", "batch", "dynamo", "thread_reaping"):
        monkeypatch.setattr(f"baton_checkpoints.store.{module}.time", clock)
    # `threads` may come to leave its backoffs to `dynamo`, and import no `time` of its own.
    monkeypatch.setattr("baton_checkpoints.store.threads.upkeep.time", clock)
    return backoffs


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

    from baton_checkpoints.store.schema import ensure_table

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
    from baton_checkpoints.store.schema import ensure_table
    from baton_checkpoints.store.threads import ThreadStore

    moto_account.aws.delete_table(TableName=TABLE)
    ensure_table(moto_account.aws, TABLE)
    # The thread store remembers the heads it touched (a new container knows none): the table they were in is gone
    services = moto_account.services
    object.__setattr__(services, "threads", ThreadStore(services.dynamodb, TABLE, services.objects, services.blobs))
    put_key(moto_account.services, OPERATOR_SECRET, TENANT, AGENT, {"*", "tenants:manage"}, "key_" + "a" * 32)
    for quota in moto_account.retry_quotas:
        full: Any = quota
        full._available_capacity = full._max_capacity
    return moto_account


# -- the table, read from moto directly ----------------------------------------------------------------------------


def snapshot(aws: Any) -> Snapshot:
    """Every item of the table, by key, as what it means."""
    deserializer = TypeDeserializer()
    return {
        key: _logical(raw, {name: deserializer.deserialize(value) for name, value in raw.items()})
        for key, raw in raw_table(aws).items()
    }


def raw_table(aws: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item of the table as stored, by key, read from moto's own store: exactly what a Scan answers
    (`test_the_table_read_from_moto_directly_is_what_a_scan_reads` holds it to that), without the ~0.1 s that moto
    spends serialising each Scan of a few dozen items, two or three times a case. No fault touches this read."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][aws.meta.region_name].get_table(TABLE)
    stored = [item.to_json()["Attributes"] for item in table.all_items()]
    # A tenant's own items (its rate limit's bucket, its usage) count requests, refused or not, and its audit trail
    # follows each management action (test_audit.py and the audit cases below): no data a request wrote.
    return {(raw["pk"]["S"], raw["sk"]["S"]): raw for raw in stored if not raw["pk"]["S"].startswith(NOT_DATA)}


def scanned_table(aws: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item of the table as a consistent Scan through `aws` answers it (the test may scan; the product never
    does)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    request: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
    while True:
        response = aws.scan(**request)
        found.update({(raw["pk"]["S"], raw["sk"]["S"]): raw for raw in data_items(response["Items"])})
        if "LastEvaluatedKey" not in response:
            return found
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _logical(raw: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """An item as what it means, read through the store's own mapping (attribute names are the store's business):
    a checkpoint's fields, an idempotency record's answer, a key record as stored."""
    if raw["pk"]["S"].startswith("C#") and raw["sk"]["S"].startswith(layout.REVISION):
        return _kept_revision(raw)
    if raw["pk"]["S"].startswith("C#"):
        # The lease counter outlives its lease (a release keeps it), and a new lease must count on from it.
        return {**asdict(store_items.checkpoint_from_item(raw)), "lease_counter": item.get(store_items.LEASE_COUNTER)}
    if raw["pk"]["S"].startswith("D#") and BLOB_ANSWER in raw:
        return {"declared": item[BLOB_ANSWER], "request_id": item[store_items.REQUEST]}
    if raw["pk"]["S"].startswith(layout.BLOB_PK_PREFIX):
        return asdict(store_items.blob_from_item(raw))
    if raw["pk"]["S"].startswith("D#"):
        record = store_items.record_from_item(raw)
        if record.grant is not None:
            return {"grant": record.grant, "request_id": record.request_id, "expires_ms": record.expires_ms}
        return {"result": asdict(record.saved), "request_id": record.request_id, "expires_ms": record.expires_ms}
    return item


def _kept_revision(raw: dict[str, Any]) -> dict[str, Any]:
    """A kept revision's item as the revision it keeps (its checkpoint named by its keys: `C#<tenant>#<subject>`,
    `V#<agent>#<kind>#<checkpoint_id>#<revision>`)."""
    tenant_id, _, subject_id = raw["pk"]["S"].removeprefix("C#").partition("#")
    agent_id, kind, checkpoint_id, _ = layout.read_revision_sk(raw["sk"]["S"])
    owner = stored_checkpoint(
        tenant_id=tenant_id, subject_id=subject_id, agent_id=agent_id, kind=kind, checkpoint_id=checkpoint_id
    )
    return {**asdict(store_items.revision_from_item(raw, owner)), "kept": True}


def is_checkpoint(key: tuple[str, str]) -> bool:
    """True for a checkpoint's item (not a kept revision of it)."""
    return key[0].startswith("C#") and key[1].startswith(layout.CHECKPOINT)


def is_revision(key: tuple[str, str]) -> bool:
    """True for a kept revision's item."""
    return key[0].startswith("C#") and key[1].startswith(layout.REVISION)


def without_lease(item: Item) -> Item:
    """A checkpoint's fields but its lease: what a lease operation must leave as it was."""
    return {name: value for name, value in item.items() if name not in ("lease", "lease_counter")}


def unseen_copy(key: tuple[str, str], item: Item, items: Snapshot) -> bool:
    """True for a kept revision that is a copy of its checkpoint's current revision: a history save puts it before
    the checkpoint, and when the checkpoint's write fails it stays, outside the window (it becomes the kept revision
    when a later save supersedes that revision)."""
    if not is_revision(key):
        return False
    checkpoint = next(
        (cp for k, cp in items.items() if is_checkpoint(k) and cp["checkpoint_id"] == item["checkpoint_id"]), None
    )
    return checkpoint is not None and item["revision"] == checkpoint["revision"]


def seen(items: Snapshot) -> Snapshot:
    """The table but for unseen copies (`unseen_copy`): what a request that answered 503 must leave as it was."""
    return {key: item for key, item in items.items() if not unseen_copy(key, item, items)}


def changed_keys(before: Snapshot, after: Snapshot) -> set[tuple[str, str]]:
    """Keys of the items a request created, changed or removed."""
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def assert_table_consistent(items: Snapshot) -> None:
    """No idempotency record without its checkpoint write: each record's answer names a checkpoint that exists and
    has reached at least that revision, or a lease that was granted. No half-kept history: a checkpoint's kept
    revisions hold the whole run from its `revisions_from` to the revision before its own; besides them only
    revisions below the window (the reaper deletes them) and a faithful copy of its own revision (`unseen_copy`)."""
    checkpoints = {item["checkpoint_id"]: item for key, item in items.items() if is_checkpoint(key)}
    blobs = {item["blob_id"] for key, item in items.items() if key[0].startswith(layout.BLOB_PK_PREFIX)}
    kept: dict[str, set[int]] = defaultdict(set)
    for key, item in items.items():
        if is_revision(key):
            kept[item["checkpoint_id"]].add(item["revision"])
    for checkpoint_id, checkpoint in checkpoints.items():
        first, own = checkpoint["revisions_from"], checkpoint["revision"]
        expected = set() if first is None else set(range(first, own))
        stored = kept.get(checkpoint_id, set())
        holds = f"{checkpoint_id} at revision {own} keeps revisions from {first}, yet the table holds {sorted(stored)}"
        assert expected <= stored, holds
        assert all(n < (first or own) or n == own for n in stored - expected), holds
    for key, item in items.items():
        if unseen_copy(key, item, items):
            checkpoint = next(cp for cp in checkpoints.values() if cp["checkpoint_id"] == item["checkpoint_id"])
            assert item["state_hash"] == checkpoint["state_hash"], f"{key} is not a copy of its checkpoint"
    # A revision whose checkpoint is gone (deleted, purged) is the reaper's to remove: nothing to check here.
    for key, item in items.items():
        if not key[0].startswith("D#"):
            continue
        if "declared" in item:
            assert item["declared"]["id"] in blobs, f"idempotency record {key} answers a blob never declared"
            continue
        if "grant" in item:
            lease = item["grant"].lease
            assert any((cp["lease_counter"] or 0) >= lease.counter for cp in checkpoints.values()), (
                f"idempotency record {key} answers lease {lease.counter}, which no checkpoint ever granted"
            )
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
    lease_token: str | None = None
    settled: Snapshot | None = None
    """The table once the request under test answered (what a retry starts from)."""


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


def prepare_whoami_caller(ctx: Context) -> None:
    """A caller with only `checkpoints:read` whose key this container has never read: whoami's one DynamoDB call
    is the GetItem that authenticates it."""
    secret = f"btn_fault_whoami_{uuid.uuid4().hex}"
    ctx.key_id = f"key_{uuid.uuid4().hex}"
    put_key(ctx.account.services, secret, TENANT, "reader", {"checkpoints:read"}, ctx.key_id)
    ctx.api = ApiDriver(secret)


def send_whoami(ctx: Context) -> Result:
    return ctx.api.invoke("health", path="/v1/whoami")


def named_the_caller(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """GET /v1/whoami wrote nothing, and named the caller's own key."""
    assert after == before, "whoami wrote"
    if answer is not None:
        assert answer.data == {
            "key_id": ctx.key_id,
            "tenant_id": TENANT,
            "agent_id": "reader",
            "scopes": ["checkpoints:read"],
            "effective_scopes": ["checkpoints:read"],
            "expires_at": None,
        }, answer.raw_body


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


def prepare_without_share(ctx: Context) -> None:
    """Nothing saved yet, and the container holds no share of its tenant's requests (a container that has not
    served the tenant): the request's first write is its take of a share (`faults.TAKE`), right after
    authentication, before the route's own."""
    ctx.account.services.limiter.forget(TENANT)


def prepare_checkpoint_without_share(ctx: Context) -> None:
    """A checkpoint at revision 1, and the container holding no share of its tenant's requests."""
    prepare_checkpoint(ctx)
    ctx.account.services.limiter.forget(TENANT)


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


# -- the routes of issue 9: history, restore, leases, the revision reads, resume, purge ---------------------------


def history_save(ctx: Context, step: int, idempotency_key: str | None = None) -> Result:
    """A save of `{"step": step}` on the history subject, keeping 3 revisions."""
    return save(
        ctx.api,
        idempotency_key,
        subject_id=HISTORY_SUBJECT,
        state={"step": step},
        ttl_seconds=3600,
        keep_revisions=KEEP,
    )


def revision_key(ctx: Context, subject: str, revision: int) -> tuple[str, str]:
    """The table key of kept revision `revision` of the context's checkpoint on `subject`."""
    assert ctx.checkpoint_id is not None
    return (layout.checkpoint_pk(TENANT, subject), layout.revision_sk(AGENT, KIND, ctx.checkpoint_id, revision))


def prepare_history(ctx: Context) -> None:
    """A checkpoint keeping 3 revisions, at revision 5: 2, 3 and 4 are kept (1 is below the window), so that its
    next write keeps 5 and puts the checkpoint."""
    for step in range(1, HISTORY_AT + 1):
        answer = history_save(ctx, step)
        assert answer.status in SUCCESS, answer.raw_body
        ctx.checkpoint_id = answer.data["checkpoint_id"]


def send_history_save(ctx: Context) -> Result:
    return history_save(ctx, HISTORY_AT + 1)


def send_idempotent_history_save(ctx: Context) -> Result:
    return history_save(ctx, HISTORY_AT + 1, IDEMPOTENCY_KEY)


def send_restore(ctx: Context) -> Result:
    """Restore revision 3 of the history checkpoint, expecting it at revision 5."""
    return restore_request(ctx, None)


def send_idempotent_restore(ctx: Context) -> Result:
    return restore_request(ctx, IDEMPOTENCY_KEY)


def restore_request(ctx: Context, idempotency_key: str | None, expected_revision: int = HISTORY_AT) -> Result:
    return ctx.api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{ctx.checkpoint_id}/restore",
        body={"revision": RESTORED, "expected_revision": expected_revision},
        headers={"idempotency-key": idempotency_key},
    )


def written_with_history(step: int, idempotent: bool) -> Callable[..., None]:
    """The check of one write of `{"step": step}` over the prepared history checkpoint (a save, or the restore of
    revision 3), applied exactly once: the checkpoint at revision 6, revision 5 kept as it was, revision 2 below the
    window (left for the reaper), nothing else changed but its idempotency record. The revision advanced once."""

    def check(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
        kept = revision_key(ctx, HISTORY_SUBJECT, HISTORY_AT)
        below = revision_key(ctx, HISTORY_SUBJECT, HISTORY_AT - KEEP)
        expected = {HISTORY_KEY, kept} | ({RECORD_KEY} if idempotent else set())
        assert changed_keys(before, after) == expected, f"changed {sorted(changed_keys(before, after))}"
        old, new = before[HISTORY_KEY], after[HISTORY_KEY]
        assert (new["checkpoint_id"], new["revision"]) == (ctx.checkpoint_id, HISTORY_AT + 1), (
            f"revision {new['revision']}, expected {HISTORY_AT + 1} (applied once)"
        )
        assert new["state_hash"] == state_hash(step)
        assert (new["keep_revisions"], new["revisions_from"]) == (KEEP, HISTORY_AT - KEEP + 1)
        superseded = after[kept]
        assert {k: superseded[k] for k in ("revision", "state_hash", "expires_ms", "updated_ms")} == {
            k: old[k] for k in ("revision", "state_hash", "expires_ms", "updated_ms")
        }, "the kept revision is not the revision the write superseded"
        assert after[below] == before[below], "a save deletes no revision: the reaper does"
        if idempotent:
            result = after[RECORD_KEY]["result"]
            assert (result["checkpoint_id"], result["revision"]) == (ctx.checkpoint_id, HISTORY_AT + 1)
        if answer is not None:
            assert (answer.data["checkpoint_id"], answer.data["revision"]) == (ctx.checkpoint_id, HISTORY_AT + 1)
            assert answer.data["state_hash"] == state_hash(step)

    return check


def send_list_revisions(ctx: Context) -> Result:
    return ctx.api.invoke("list_revisions", path=f"/v1/checkpoints/{ctx.checkpoint_id}/revisions", query={})


def listed_revisions(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert after == before
    if answer is not None:
        shown = [(r["checkpoint_id"], r["revision"], r["state_hash"]) for r in answer.data]
        newest_first = range(HISTORY_AT - 1, HISTORY_AT - KEEP - 1, -1)
        assert shown == [(ctx.checkpoint_id, n, state_hash(n)) for n in newest_first]
        assert answer.body["meta"]["next_cursor"] is None


def send_get_revision(ctx: Context) -> Result:
    return ctx.api.invoke("get_revision", path=f"/v1/checkpoints/{ctx.checkpoint_id}/revisions/{RESTORED}")


def read_revision(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert after == before
    if answer is not None:
        assert (answer.data["revision"], answer.data["state"]) == (RESTORED, {"step": RESTORED})
        assert answer.header("ETag") == f'W/"{ctx.checkpoint_id}:{RESTORED}"'


def send_resume(ctx: Context) -> Result:
    """Resume the test subject without naming a kind: its checkpoints' summaries (one Query), then the only one
    read whole (one GetItem)."""
    return ctx.api.invoke("resume", body={"subject_id": SUBJECT})


def resumed(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert after == before, "a resume wrote"
    if answer is not None:
        assert answer.data["status"] == "ready", answer.raw_body
        checkpoint = answer.data["checkpoint"]
        assert (checkpoint["checkpoint_id"], checkpoint["state"]) == (ctx.checkpoint_id, {"step": 1})


def acquire(ctx: Context, idempotency_key: str | None = None) -> Result:
    """Acquire (or renew) the context checkpoint's lease for `HOLDER`."""
    return ctx.api.invoke(
        "acquire_lease",
        path=f"/v1/checkpoints/{ctx.checkpoint_id}/lease",
        body={"ttl_seconds": LEASE_TTL_SECONDS, "holder": HOLDER},
        headers={"idempotency-key": idempotency_key},
    )


def send_acquire(ctx: Context) -> Result:
    return acquire(ctx)


def send_idempotent_acquire(ctx: Context) -> Result:
    return acquire(ctx, IDEMPOTENCY_KEY)


def leased_once(idempotent: bool) -> Callable[..., None]:
    """The check of one lease granted: the checkpoint's lease is `HOLDER`'s, its counter one past the last, expiring
    `LEASE_TTL_SECONDS` from now; nothing else of the checkpoint changed (not its revision, not its expiry), nothing
    else in the table but the key's idempotency record, which holds exactly that lease; the answer gives its token."""

    def check(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
        expected = {CHECKPOINT_KEY} | ({RECORD_KEY} if idempotent else set())
        assert changed_keys(before, after) == expected, f"changed {sorted(changed_keys(before, after))}"
        old, new = before[CHECKPOINT_KEY], after[CHECKPOINT_KEY]
        lease = new["lease"]
        assert lease is not None, "no lease was granted"
        assert lease.holder == HOLDER
        assert lease.counter == new["lease_counter"] == (old["lease_counter"] or 0) + 1, (
            f"lease counter {lease.counter} after {old['lease_counter']}: granted more than once"
        )
        assert lease.expires_ms == START_MS + LEASE_TTL_SECONDS * 1000
        assert without_lease(new) == without_lease(old), "a lease operation changed the checkpoint"
        if idempotent:
            assert after[RECORD_KEY]["grant"].lease == lease, "the idempotency record remembers another lease"
        if answer is not None:
            assert answer.data == {
                "checkpoint_id": ctx.checkpoint_id,
                "lease_token": lease.token,
                "holder": HOLDER,
                "expires_at": format_ms(lease.expires_ms),
            }

    return check


def acquire_again(ctx: Context, answer: Result) -> None:
    """The client's retry of the same acquire: the same token (a renewal) when the first was granted, else a new
    lease, the first ever (a 503 granted nothing)."""
    retry_acquire(ctx, answer, acquire)


def retry_acquire(ctx: Context, answer: Result, send: Callable[[Context], Result]) -> None:
    """`acquire_again`, by `send` (the route, or the tool). A tool's result does not say whether it renewed (the
    route's 200) or granted (201): there the token says it."""
    retried = send(ctx)
    lease = snapshot(ctx.account.aws)[CHECKPOINT_KEY]["lease"]
    if answer.status == 201:
        assert retried.status == (201 if isinstance(retried, ToolResult) else 200), retried.raw_body
        assert retried.data["lease_token"] == answer.data["lease_token"] == lease.token
    else:
        assert retried.status == 201, retried.raw_body
        assert retried.data["lease_token"] == lease.token
        assert lease.counter == 1, f"a 503 granted a lease: the retry's counter is {lease.counter}"


def prepare_lease(ctx: Context) -> None:
    """A checkpoint at revision 1 with `HOLDER`'s lease."""
    prepare_checkpoint(ctx)
    granted = acquire(ctx)
    assert granted.status == 201, granted.raw_body
    ctx.lease_token = granted.data["lease_token"]


def send_release(ctx: Context) -> Result:
    return ctx.api.invoke(
        "release_lease",
        path=f"/v1/checkpoints/{ctx.checkpoint_id}/lease",
        headers={"lease-token": ctx.lease_token},
    )


def released_once(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert changed_keys(before, after) == {CHECKPOINT_KEY}
    old, new = before[CHECKPOINT_KEY], after[CHECKPOINT_KEY]
    assert old["lease"] is not None
    assert old["lease"].token == ctx.lease_token
    # A release ends the lease now (its expiry set to the release's time) and spends its token (the random part
    # goes), keeping its counter for the fencing
    assert new["lease"] is not None
    assert (new["lease"].counter, new["lease"].secret) == (old["lease"].counter, "")
    assert not new["lease"].admits(ctx.lease_token), "a released lease still admits its token"
    assert not new["lease"].is_live(clock_now_ms()), f"the lease is still live: {new['lease']}"
    assert new["lease_counter"] == old["lease_counter"], "a release changed the lease counter"
    assert without_lease(new) == without_lease(old), "a release changed the checkpoint"
    if answer is not None:
        assert answer.data == {"checkpoint_id": ctx.checkpoint_id, "released": True}


def release_again(ctx: Context, answer: Result) -> None:
    """The client's retry of the release: released (again, or now), and the next lease counts on."""
    retry_release(ctx, send_release, acquire)


def retry_release(ctx: Context, release: Callable[[Context], Result], acquire: Callable[[Context], Result]) -> None:
    """`release_again`, by `release` and `acquire` (the routes, or the tools)."""
    again = release(ctx)
    assert again.status == 200, again.raw_body
    lease = snapshot(ctx.account.aws)[CHECKPOINT_KEY]["lease"]
    assert lease is None or not lease.is_live(clock_now_ms())
    granted = acquire(ctx)
    assert granted.status == 201, granted.raw_body
    assert granted.data["lease_token"].startswith("2."), f"a new lease after lease 1: {granted.data}"


def prepare_purge(ctx: Context) -> None:
    """The purged subject holds 30 items (two pages): a checkpoint with 3 kept revisions, two checkpoints saved with
    an Idempotency-Key (whose records are one page of gsi1), and copies of the first under 22 other agents, each with
    its own id and no history. The test subject's checkpoint stands by."""
    prepare_checkpoint(ctx)
    for step in range(1, HISTORY_AT + 1):
        answer = save(ctx.api, None, subject_id=PURGE_SUBJECT, state={"step": step}, keep_revisions=KEEP)
        assert answer.status in SUCCESS, answer.raw_body
    for kind in PURGE_KEYED:
        answer = save(ctx.api, f"purge-{kind}", subject_id=PURGE_SUBJECT, kind=kind, state={"step": 1})
        assert answer.status == 201, answer.raw_body
    records = {k for k in _of_purged_subject(snapshot(ctx.account.aws)) if k[0].startswith("D#")}
    assert len(records) == len(PURGE_KEYED), records
    pk = layout.checkpoint_pk(TENANT, PURGE_SUBJECT)
    aws = ctx.account.aws
    template = aws.get_item(TableName=TABLE, Key=layout.checkpoint_key(TENANT, PURGE_SUBJECT, AGENT, KIND))["Item"]
    copies = [
        {
            **{name: value for name, value in template.items() if name not in (store_items.REVISIONS_FROM,)},
            **layout.key(pk, layout.checkpoint_sk(f"agent-{n:02d}", KIND)),
            schema.GSI1_PK: {"S": layout.checkpoint_index_pk(TENANT, f"ckpt_{uuid.uuid4().hex}")},
        }
        for n in range(PURGE_COPIES)
    ]
    for start in range(0, len(copies), 25):
        batch = [{"PutRequest": {"Item": item}} for item in copies[start : start + 25]]
        assert not aws.batch_write_item(RequestItems={TABLE: batch}).get("UnprocessedItems")


def send_purge(ctx: Context) -> Result:
    return ctx.api.invoke("purge_subject", path=f"/v1/subjects/{PURGE_SUBJECT}")


def purged_partition(before: Snapshot, after: Snapshot) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(the purged subject's keys before, those left after): its partition's items and the idempotency records of
    its writes."""
    return _of_purged_subject(before), _of_purged_subject(after)


def _of_purged_subject(items: Snapshot) -> set[tuple[str, str]]:
    pk = layout.checkpoint_pk(TENANT, PURGE_SUBJECT)
    return {
        key
        for key, item in items.items()
        if key[0] == pk or (key[0].startswith("D#") and item.get("result", {}).get("subject_id") == PURGE_SUBJECT)
    }


def purged(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """What any purge answer may leave: only items of the purged subject deleted (its records among them), none
    written; all of them when it says complete; as many checkpoints as it counts at least (a page whose answer was
    lost is counted by none); no checkpoint deleted while a record of the subject is left (records go first, so
    that no record ever answers a purged checkpoint)."""
    subject_before, subject_after = purged_partition(before, after)
    assert changed_keys(before, after) <= subject_before, "a purge touched another subject's items"
    assert subject_after <= subject_before
    if any(key[0].startswith("D#") for key in subject_after):
        assert {k for k in subject_before if is_checkpoint(k)} == {k for k in subject_after if is_checkpoint(k)}, (
            "a checkpoint was purged while records of the subject were left"
        )
    if answer is None:
        return
    assert answer.data["subject_id"] == PURGE_SUBJECT
    gone = {k for k in subject_before - subject_after if is_checkpoint(k)}
    assert answer.data["deleted_checkpoints"] <= len(gone), f"{answer.data} but {len(gone)} checkpoints are gone"
    if answer.data["complete"]:
        assert not subject_after, f"complete, yet {len(subject_after)} items are left"


def purge_again(ctx: Context, answer: Result) -> None:
    """The repeat of a purge finishes it, and counts no checkpoint the first answer counted."""
    before = ctx.settled if ctx.settled is not None else snapshot(ctx.account.aws)
    again = send_purge(ctx)
    assert again.status == 200, again.raw_body
    assert again.data["complete"] is True
    purged(ctx, before, snapshot(ctx.account.aws), again)
    left = {k for k in purged_partition(before, before)[0] if is_checkpoint(k)}
    assert again.data["deleted_checkpoints"] == len(left)
    first = answer.data["deleted_checkpoints"] if answer.status == 200 else 0
    assert first + len(left) <= 1 + len(PURGE_KEYED) + PURGE_COPIES


# -- the same paths as MCP tool calls (POST /mcp, tools/call) -----------------------------------------------------

RPC_IDS = itertools.count(1)
OTHER_TOOL_ERROR = 500
"""The status given to a failing tool whose code is not UNAVAILABLE: no answer a DynamoDB fault may give, so the
driver's check of the status fails on it and shows the tool's error."""


@dataclass
class ToolResult(Result):
    """A tool's result in the shape of its route's answer, so that the route scenarios' checks read it as they read
    the route's: `{"data": <structured content>}` with the route's success status, or, for `isError: true`,
    `{"error": {code, message}}` with 503 for UNAVAILABLE. A tool result carries no headers (no `Retry-After`, no
    `Idempotent-Replayed`)."""

    rpc: Result | None = None
    """The HTTP answer of `POST /mcp` that carried it."""


def call_tool(ctx: Context, name: str, arguments: dict[str, Any], success: int) -> ToolResult:
    """`tools/call` of `name` over `POST /mcp` (the sample event `mcp_tools_call`). Whatever DynamoDB does, the HTTP
    answer is 200 with a JSON-RPC result (never a 5xx, never a JSON-RPC error): the tool's success or its error."""
    message = {
        "jsonrpc": "2.0",
        "id": next(RPC_IDS),
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    rpc = ctx.api.invoke("mcp_tools_call", body=message)
    assert rpc.status == 200, f"POST /mcp answered {rpc.status} to a tools/call of {name}: {rpc.raw_body}"
    assert "error" not in rpc.body, f"a JSON-RPC error for a tools/call of {name}: {rpc.raw_body}"
    assert rpc.body["id"] == message["id"], rpc.raw_body
    result = rpc.body["result"]
    structured = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == structured, "the text rendering is not the structured content"
    if result.get("isError"):
        status = 503 if structured.get("code") == "UNAVAILABLE" else OTHER_TOOL_ERROR
        return ToolResult(status, {}, json.dumps({"error": structured}), rpc=rpc)
    assert result.get("isError") in (None, False), rpc.raw_body
    return ToolResult(success, {}, json.dumps({"data": structured}), rpc=rpc)


def assert_tool_unavailable(answer: ToolResult) -> None:
    """A tool's UNAVAILABLE as the contract has it (api-v1.md, `POST /mcp`): `isError: true` with the route's
    `{code, message}`; the message names no internals."""
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    message = answer.error["message"]
    assert message
    assert not re.search(r"botocore|Exception|Traceback|dynamodb", message, re.IGNORECASE), message


def tool_save(ctx: Context, step: int, idempotency_key: str | None = None, ttl_seconds: int = 3600) -> ToolResult:
    """`baton_checkpoint_save` of the test subject's checkpoint with the state `{"step": step}`: the body of
    `save_step`, and its Idempotency-Key as the `idempotency_key` argument."""
    arguments: dict[str, Any] = save_body(subject_id=SUBJECT, state={"step": step}, ttl_seconds=ttl_seconds)
    if idempotency_key is not None:
        arguments["idempotency_key"] = idempotency_key
    answer = call_tool(ctx, "baton_checkpoint_save", arguments, 200)
    if answer.status == 200 and answer.data["updated"] is False:
        answer.status = 201  # the route's status for a create, which the tool states as `updated: false`
    return answer


def mcp_plain_save(ctx: Context) -> Result:
    return tool_save(ctx, 2)


def mcp_idempotent_save(ctx: Context) -> Result:
    return tool_save(ctx, 2, IDEMPOTENCY_KEY)


def mcp_delete(ctx: Context) -> Result:
    assert ctx.checkpoint_id is not None
    return call_tool(ctx, "baton_checkpoint_delete", {"checkpoint_id": ctx.checkpoint_id}, 200)


def mcp_acquire(ctx: Context) -> Result:
    """`baton_lease_acquire` for `HOLDER`: the body of `acquire`. A tool's result does not tell a grant (201) from
    a renewal (200): it is given as 201, a grant; `retry_acquire` tells them apart by the token."""
    assert ctx.checkpoint_id is not None
    arguments = {"checkpoint_id": ctx.checkpoint_id, "ttl_seconds": LEASE_TTL_SECONDS, "holder": HOLDER}
    return call_tool(ctx, "baton_lease_acquire", arguments, 201)


def mcp_idempotent_acquire(ctx: Context) -> Result:
    assert ctx.checkpoint_id is not None
    arguments = {
        "checkpoint_id": ctx.checkpoint_id,
        "ttl_seconds": LEASE_TTL_SECONDS,
        "holder": HOLDER,
        "idempotency_key": IDEMPOTENCY_KEY,
    }
    return call_tool(ctx, "baton_lease_acquire", arguments, 201)


def mcp_acquire_again(ctx: Context, answer: Result) -> None:
    """`acquire_again`, by the tool."""
    retry_acquire(ctx, answer, mcp_acquire)


def mcp_release(ctx: Context) -> Result:
    assert ctx.checkpoint_id is not None
    assert ctx.lease_token is not None
    arguments = {"checkpoint_id": ctx.checkpoint_id, "lease_token": ctx.lease_token}
    return call_tool(ctx, "baton_lease_release", arguments, 200)


def mcp_release_again(ctx: Context, answer: Result) -> None:
    """`release_again`, by the tools."""
    retry_release(ctx, mcp_release, mcp_acquire)


def mcp_get(ctx: Context) -> Result:
    assert ctx.checkpoint_id is not None
    return call_tool(ctx, "baton_checkpoint_get", {"checkpoint_id": ctx.checkpoint_id}, 200)


def mcp_lookup(ctx: Context) -> Result:
    return call_tool(ctx, "baton_checkpoint_get", {"subject_id": SUBJECT, "kind": KIND}, 200)


def read_checkpoint(ctx: Context, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """The check of a read of the prepared checkpoint (revision 1, `{"step": 1}`): nothing written, the whole
    checkpoint answered."""
    assert after == before, "a read wrote"
    if answer is not None:
        assert (answer.data["checkpoint_id"], answer.data["revision"]) == (ctx.checkpoint_id, 1), answer.raw_body
        assert (answer.data["state"], answer.data["state_hash"]) == ({"step": 1}, state_hash(1))


def mcp_resume(ctx: Context) -> Result:
    return call_tool(ctx, "baton_resume", {"subject_id": SUBJECT}, 200)


@dataclass(frozen=True)
class Step:
    """A DynamoDB request of a route that a fault strikes."""

    operation: str
    nth: int = 1
    """Which of the route's requests of `operation` (1: its first; 2: the one after it, say a purge's second page)."""
    every_kind: bool = True
    """False for a step whose handling other scenarios already try kind by kind (the id index's Query before each
    route by id): one kind of each class botocore treats alike, and the kinds it does not retry."""

    @property
    def name(self) -> str:
        return self.operation if self.nth == 1 else f"{self.operation}#{self.nth}"


INDEX = Step("Query")
"""The id index's Query that finds a checkpoint by id, before every route addressed by id."""
READ_BEFORE_WRITE = Step("BatchGetItem")
"""The consistent read of a transactional write (the idempotent saves try it kind by kind)."""


@dataclass(frozen=True)
class Scenario:
    """A request on one write path, the DynamoDB operations it makes, and what applying it once looks like."""

    name: str
    steps: tuple[str | Step, ...]
    prepare: Callable[[Context], None]
    send: Callable[[Context], Result]
    success: int
    applied_once: Callable[[Context, Snapshot, Snapshot, Result | None], None]
    idempotent: bool = False
    phases: frozenset[Phase] = frozenset(Phase)
    """Where faults strike. A fault before the request lands meets the same call and the same error handling
    whether the item exists or not, so the scenarios over an existing item only lose answers."""
    then: Callable[[Context, Result], None] | None = None
    """What the client's retry of the same request must answer, once DynamoDB is well again."""
    partial: bool = False
    """The route may answer 200 having done part of its work (a purge's `complete: false`), and a 503 after a
    write landed and its answer was lost (see `test_a_purge_that_answers_503_wrote_nothing`)."""
    cached: bool = False
    """Prepare once through the handler, then copy the items it wrote into each case's new table (the history
    and purge preparations take a dozen requests)."""
    mcp: bool = False
    """The request is a tool call over `POST /mcp` (its `send` answers a `ToolResult`): the HTTP answer is 200 with
    a JSON-RPC result whatever DynamoDB does, and the tool's result must be what the route's answer must be."""
    retried: bool = False
    """After a 503, the client's retry of the same request (once DynamoDB is well again) succeeds and applies once,
    from the table as it was before the first (which the 503 left unchanged)."""

    def step_list(self) -> list[Step]:
        return [step if isinstance(step, Step) else Step(step) for step in self.steps]


LOST_ANSWERS_ONLY = frozenset({Phase.AFTER})
TAKE_SHARE = Step(TAKE)
"""The container's take of a share of its tenant's requests (`api/ratelimit.py`): a conditional UpdateItem of the
tenant's item, made by the gate after authentication whenever the container holds no share."""


SCENARIOS = (
    Scenario("auth_cold", ("GetItem",), prepare_new_caller, send_plain_save, 201, saved_once(1, True, False)),
    # The rate limit's take, struck at a container holding no share: before landing (nothing taken) and after (the
    # tokens taken, the answer lost: botocore's retry meets the moved bucket and the take decides again from it).
    # Its failure is a 503 that wrote nothing of the request, never a 429 (the tenant's burst is huge here, so none
    # is earned), and the client's retry is served and applies once.
    Scenario(
        "take_share_save",
        (TAKE_SHARE,),
        prepare_without_share,
        send_plain_save,
        201,
        saved_once(1, True, False),
        retried=True,
    ),
    Scenario(
        "take_share_idempotent_update",
        (TAKE_SHARE,),
        prepare_checkpoint_without_share,
        send_idempotent_save,
        200,
        saved_once(2, False, True),
        idempotent=True,
    ),
    # GET /v1/whoami (issue 12): any valid key, no scope; its one read is the key's, and its client retries a 503
    Scenario("whoami", ("GetItem",), prepare_whoami_caller, send_whoami, 200, named_the_caller, retried=True),
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
    Scenario(
        "history_save",
        # The copy of the superseded revision, then the checkpoint's conditional write.
        (READ_BEFORE_WRITE, "PutItem", Step("PutItem", nth=2)),
        prepare_history,
        send_history_save,
        200,
        written_with_history(HISTORY_AT + 1, False),
        cached=True,
    ),
    Scenario(
        "history_save_idempotent",
        # The copy, then the transaction of the checkpoint and its idempotency record.
        ("PutItem", "TransactWriteItems"),
        prepare_history,
        send_idempotent_history_save,
        200,
        written_with_history(HISTORY_AT + 1, True),
        idempotent=True,
        phases=LOST_ANSWERS_ONLY,
        cached=True,
    ),
    Scenario(
        "restore",
        # The writes are the history save's (tried kind by kind above); the read is restore's own.
        (INDEX, "BatchGetItem", Step("PutItem"), Step("PutItem", nth=2)),
        prepare_history,
        send_restore,
        200,
        written_with_history(RESTORED, False),
        cached=True,
    ),
    Scenario(
        "restore_idempotent",
        ("TransactWriteItems",),
        prepare_history,
        send_idempotent_restore,
        200,
        written_with_history(RESTORED, True),
        idempotent=True,
        phases=LOST_ANSWERS_ONLY,  # before landing, restore's writes are the history save's (tried above)
        cached=True,
    ),
    Scenario(
        "lease_acquire",
        (INDEX, "UpdateItem"),
        prepare_checkpoint,
        send_acquire,
        201,
        leased_once(False),
        then=acquire_again,
        cached=True,
    ),
    Scenario(
        "lease_acquire_idempotent",
        (READ_BEFORE_WRITE, "TransactWriteItems"),
        prepare_checkpoint,
        send_idempotent_acquire,
        201,
        leased_once(True),
        idempotent=True,
        cached=True,
    ),
    Scenario(
        "lease_release",
        # The id index's Query and the conditional UpdateItem are acquire's own helpers (tried above).
        (Step("UpdateItem"),),
        prepare_lease,
        send_release,
        200,
        released_once,
        then=release_again,
        cached=True,
    ),
    Scenario(
        "list_revisions",
        (Step("GetItem"), Step("Query", nth=2)),
        prepare_history,
        send_list_revisions,
        200,
        listed_revisions,
        cached=True,
    ),
    Scenario(
        "get_revision",
        (Step("BatchGetItem"),),  # restore's read of the checkpoint and the revision
        prepare_history,
        send_get_revision,
        200,
        read_revision,
        cached=True,
    ),
    Scenario(
        "resume",
        ("Query", Step("GetItem")),
        prepare_checkpoint,
        send_resume,
        200,
        resumed,
        cached=True,
    ),
    Scenario(
        "purge",
        # tests/integration/test_purge.py tries each failure page by page; here, one of each class at each step:
        # the records' page (gsi1's Query, their BatchWriteItem), then the partition's two pages.
        (
            Step("Query"),
            Step("BatchWriteItem"),
            Step("Query", nth=2),
            Step("BatchWriteItem", nth=2),
            Step("BatchWriteItem", nth=3),
        ),
        prepare_purge,
        send_purge,
        200,
        purged,
        then=purge_again,
        partial=True,
        cached=True,
    ),
)


MCP_SCENARIOS = (
    # The tools stand for the routes above: the same DynamoDB steps, the same checks of the table.
    Scenario(
        "mcp_save_create",
        ("UpdateItem",),
        prepare_nothing,
        mcp_plain_save,
        201,
        saved_once(1, True, False),
        mcp=True,
        retried=True,
    ),
    Scenario(
        "mcp_save_update",
        ("UpdateItem",),
        prepare_checkpoint,
        mcp_plain_save,
        200,
        saved_once(2, False, False),
        phases=LOST_ANSWERS_ONLY,
        mcp=True,
        retried=True,
    ),
    Scenario(
        "mcp_idempotent_create",
        ("BatchGetItem", "TransactWriteItems"),
        prepare_nothing,
        mcp_idempotent_save,
        201,
        saved_once(1, True, True),
        idempotent=True,
        mcp=True,
    ),
    Scenario(
        "mcp_delete",
        (INDEX, "DeleteItem"),
        prepare_checkpoint,
        mcp_delete,
        200,
        deleted_once,
        mcp=True,
        retried=True,
        cached=True,
    ),
    Scenario(
        "mcp_lease_acquire",
        (INDEX, "UpdateItem"),
        prepare_checkpoint,
        mcp_acquire,
        201,
        leased_once(False),
        then=mcp_acquire_again,
        mcp=True,
        cached=True,
    ),
    Scenario(
        "mcp_lease_acquire_idempotent",
        (READ_BEFORE_WRITE, "TransactWriteItems"),
        prepare_checkpoint,
        mcp_idempotent_acquire,
        201,
        leased_once(True),
        idempotent=True,
        mcp=True,
        cached=True,
    ),
    Scenario(
        "mcp_lease_release",
        (Step("UpdateItem"),),
        prepare_lease,
        mcp_release,
        200,
        released_once,
        then=mcp_release_again,
        mcp=True,
        cached=True,
    ),
    Scenario(
        "mcp_get",
        ("Query",),
        prepare_checkpoint,
        mcp_get,
        200,
        read_checkpoint,
        mcp=True,
        retried=True,
        cached=True,
    ),
    Scenario(
        "mcp_get_by_subject",
        ("GetItem",),
        prepare_checkpoint,
        mcp_lookup,
        200,
        read_checkpoint,
        mcp=True,
        retried=True,
        cached=True,
    ),
    Scenario(
        "mcp_resume",
        ("Query", Step("GetItem")),
        prepare_checkpoint,
        mcp_resume,
        200,
        resumed,
        mcp=True,
        retried=True,
        cached=True,
    ),
)


def fault_table() -> Iterator[Any]:
    """Each scenario × each of its steps × the faults worth injecting there (`faults.fault_plan`)."""
    for scenario in (*SCENARIOS, *MCP_SCENARIOS):
        for step in scenario.step_list():
            for kind, phase, duration in fault_plan(step.operation):
                if phase not in scenario.phases:
                    continue
                kind_by_kind = step.every_kind and KIND_BY_KIND
                if not kind_by_kind and kind.retried_by_botocore and kind not in ONE_ATTEMPT_REPRESENTATIVES:
                    continue
                yield fault_case(scenario, step, kind, phase, duration)


def fault_case(scenario: Any, step: Step, kind: FaultKind, phase: Phase, duration: Duration) -> Any:
    """One case of a fault table: a scenario's step under one fault, named after all four."""
    return pytest.param(
        scenario,
        step,
        kind,
        phase,
        duration,
        id=f"{scenario.name}-{step.name}-{kind.name}-{phase.value}-{duration.value}",
    )


# -- what an answer must look like ------------------------------------------------------------------------------


def judge(answer: Result, success: int, must: str) -> None:
    """The answer is the scenario's `success`, or a 503 with Retry-After, as the fault allows (`must`: what
    `expectation` says of its kind, phase and duration)."""
    assert answer.status in (success, 503), f"{answer.status} (expected {must}): {answer.raw_body}"
    if answer.status == 503:
        assert must != "success", f"a fault botocore retries, on one attempt only, answered 503: {answer.raw_body}"
        assert_unavailable(answer)
    else:
        assert must != "503", f"every attempt failed, yet the answer is {answer.status}: {answer.raw_body}"


def assert_unavailable(answer: Result) -> None:
    """A 503 as the contract has it: UNAVAILABLE in the error envelope, Retry-After in whole seconds (for a tool,
    `assert_tool_unavailable`)."""
    if isinstance(answer, ToolResult):
        assert_tool_unavailable(answer)
        return
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


@pytest.mark.parametrize(("scenario", "step", "kind", "phase", "duration"), list(fault_table()))
def test_a_fault_at_any_step_answers_success_or_503_and_never_half_writes(
    env: MotoAccount, scenario: Scenario, step: Step, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    operation = step.operation
    with time_machine.travel(START, tick=False) as clock:
        ctx = Context(account=env, clock=clock)
        prepare(scenario, ctx)
        before = snapshot(env.aws)
        # When the request meets the fault at this step
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault(operation, kind, phase, duration, skip=step.nth - 1))
            answer = scenario.send(ctx)
        after = snapshot(env.aws)
        landed_then_503 = answer.status == 503 and seen(after) != seen(before)
        proof_counts.record(
            SUITE,
            cases=1,
            faults_injected=fault.struck,
            answered_503=int(answer.status == 503),
            succeeded=int(answer.status in SUCCESS),
            landed_then_503=int(landed_then_503),
            mcp_cases=int(scenario.mcp),
            take_cases=int(operation == TAKE),
        )
        assert isinstance(answer, ToolResult) is scenario.mcp, f"{scenario.name} sent {type(answer).__name__}"
        # Then the fault did strike this step, and a persistent one lasted as long as the request kept trying
        assert fault.struck >= 1, f"{operation} is not a step of {scenario.name}: the fault never struck"
        assert not fault.exhausted, f"the request tried {operation} {fault.struck} times and never gave up"
        # And the answer is the route's success, or a 503 where the fault leaves no other choice: never a 429 either,
        # as this tenant's burst is more than any case spends (a fault is not the tenant's to pay for)
        must = expectation(kind, phase, duration)
        assert answer.status != 429, f"a 429 the tenant did not earn, for a fault at {operation}: {answer.raw_body}"
        assert answer.status in SUCCESS | {503}, f"{answer.status} (expected {must}): {answer.raw_body}"
        if answer.status == 503:
            assert must != "success", f"a fault botocore retries, on one attempt only, answered 503: {answer.raw_body}"
            assert_unavailable(answer)
            if scenario.partial and phase is Phase.AFTER:
                # A purge page that landed and whose every answer was lost: a known gap, pinned apart.
                scenario.applied_once(ctx, before, after, None)
            else:
                # A 503 means nothing was written: when every attempt lost its answer, the store reads once to find
                # out whether the write landed, and then answers the success instead. (A history save may leave an
                # unseen copy of the checkpoint's own revision: `assert_table_consistent` checks it is faithful.)
                assert seen(after) == seen(before), f"a 503 that wrote {sorted(changed_keys(before, after))}"
        else:
            if not scenario.partial or answer.data.get("complete", True):
                assert must != "503", f"every attempt failed, yet the answer is {answer.status}: {answer.raw_body}"
            else:
                proof_counts.record(SUITE, stopped_incomplete=1)
            assert answer.status == scenario.success, answer.raw_body
            assert answer.header("Idempotent-Replayed") is None
            scenario.applied_once(ctx, before, after, answer)
        assert_table_consistent(after)
        if scenario.idempotent:
            assert_idempotent_retries(ctx, scenario, before, answer)
        if scenario.retried and answer.status == 503:
            retried = scenario.send(ctx)
            assert retried.status == scenario.success, retried.raw_body
            scenario.applied_once(ctx, before, snapshot(env.aws), retried)
        if scenario.then is not None:
            ctx.settled = None if scenario.idempotent else after
            scenario.then(ctx, answer)


PREPARED: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
"""A cached scenario's preparation: the items it wrote, as stored, and the context fields it set."""


def prepare(scenario: Scenario, ctx: Context) -> None:
    """Prepare the case: through the handler, or, for a cached scenario prepared before in this module, by writing
    the items that preparation left into the new table (the same items, at the same frozen time)."""
    if not scenario.cached:
        scenario.prepare(ctx)
        return
    aws = ctx.account.aws
    cached = PREPARED.get(scenario.name)
    if cached is None:
        empty = set(raw_table(aws))
        scenario.prepare(ctx)
        written = [item for key, item in raw_table(aws).items() if key not in empty]
        PREPARED[scenario.name] = (written, {"checkpoint_id": ctx.checkpoint_id, "lease_token": ctx.lease_token})
        return
    written, fields = cached
    for start in range(0, len(written), 25):
        batch = [{"PutRequest": {"Item": item}} for item in written[start : start + 25]]
        assert not aws.batch_write_item(RequestItems={TABLE: batch}).get("UnprocessedItems")
    for name, value in fields.items():
        setattr(ctx, name, value)
    prepare_warm_key(ctx)  # the caller's key read, as the preparation through the handler leaves it


def test_the_table_read_from_moto_directly_is_what_a_scan_reads(env: MotoAccount) -> None:
    # Given a table holding every kind of item the cases compare: a checkpoint with kept revisions and a lease, an
    # idempotency record of a save and one of a lease, a blob record, a key
    ctx = Context(account=env)
    prepare_history(ctx)
    assert history_save(ctx, HISTORY_AT + 1, IDEMPOTENCY_KEY).status == 200
    prepare_checkpoint(ctx)
    assert acquire(ctx, "fault-injection-lease").status == 201
    assert send_declare_blob(ctx).status == 201
    # Then the direct read of moto's store and a Scan see the same items, attribute for attribute
    direct, scanned = raw_table(env.aws), scanned_table(env.aws)
    assert len(direct) == 11  # revisions 1 and 2, below the window, wait for a reaper that does not run here
    assert direct == scanned


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
    if not isinstance(replay, ToolResult):  # a tool's result has no headers: its data and the table say it
        assert replay.header("Idempotent-Replayed") == "true"
    assert replay.data == answer.data
    assert snapshot(ctx.account.aws) == settled


@pytest.mark.parametrize("tool", ["baton_checkpoint_save", "baton_lease_acquire"])
def test_the_retry_of_a_containers_first_idempotent_tool_call_replays_it(
    env: MotoAccount, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    # Found by this suite when tool calls were served by a second resolver: the container's first call's idempotency
    # fingerprint was of no body, and its retry was refused as reused. A tool now keys its arguments as its route
    # keys its body (`operations.inputs.claim`).
    with time_machine.travel(START, tick=False) as clock:
        ctx = Context(account=env, clock=clock)
        prepare_checkpoint(ctx)
        send = mcp_idempotent_acquire if tool == "baton_lease_acquire" else mcp_idempotent_save
        # When its first tool call, idempotent, succeeds, and the client sends the very same call again (its answer
        # was lost on the way back, say)
        first = send(ctx)
        assert first.status in SUCCESS, first.raw_body
        settled = snapshot(env.aws)
        retried = send(ctx)
        proof_counts.record(SUITE, cases=1)
        # Then the retry is the replay of the first (api-v1.md, Idempotency), and writes nothing
        assert retried.status in SUCCESS, retried.raw_body
        assert retried.data == first.data
        assert snapshot(env.aws) == settled


# -- a write that landed, whose answer was lost, and another writer got in before botocore's retry -------------


@pytest.fixture(scope="module")
def other_container(moto_account: MotoAccount) -> Any:
    """The services of a second Lambda container sharing the table (its own client, which no fault touches)."""
    return services_on(TABLE)


def other_container_saves(services: Any, step: int, request_id: str, subject: str = SUBJECT) -> None:
    """A plain save of `{"step": step}` on `subject` by the other container."""
    from baton_checkpoints.domain.checkpoints import plan_save
    from baton_checkpoints.domain.clock import now_ms
    from baton_checkpoints.domain.models import SaveCheckpointRequest

    request = SaveCheckpointRequest.model_validate(save_body(subject_id=subject, state={"step": step}))
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


OTHERS_BETWEEN = 4
"""Saves by another container between a history write and its retry: each keeps one revision and moves the window
up by one, so that the write's own kept revision (6) is out of the window again before the retry goes out."""


@pytest.mark.parametrize("lost", [READ_TIMEOUT, INTERNAL_500], ids=lambda kind: kind.name)
@pytest.mark.parametrize("idempotency_key", [None, IDEMPOTENCY_KEY], ids=["plain", "idempotent"])
@pytest.mark.parametrize("write", ["history_save", "restore"])
def test_a_history_write_whose_answer_was_lost_is_not_applied_again_after_other_writers(
    env: MotoAccount, other_container: Any, write: str, idempotency_key: str | None, lost: FaultKind
) -> None:
    ctx = Context(account=env)
    # Given the history checkpoint at revision 5 (2, 3 and 4 kept)
    prepare_history(ctx)

    def others_write() -> None:
        for n in range(OTHERS_BETWEEN):
            other_container_saves(other_container, 100 + n, f"other-writer-{uuid.uuid4()}", HISTORY_SUBJECT)

    # When our write lands as revision 6 (keeping 5), its answer is lost, and others save before the retry
    checkpoint_write = Step("PutItem", nth=2) if idempotency_key is None else Step("TransactWriteItems")
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(
            Fault(
                checkpoint_write.operation,
                lost,
                Phase.AFTER,
                Duration.ONCE,
                between=others_write,
                skip=checkpoint_write.nth - 1,
            )
        )
        answer = (
            history_save(ctx, 6, idempotency_key) if write == "history_save" else restore_request(ctx, idempotency_key)
        )
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, succeeded=int(answer.status in SUCCESS))
    assert fault.struck == 1
    # Then the retry is recognised as ours: revision 6 answered, nothing applied twice, no later write overwritten
    written = 6 if write == "history_save" else RESTORED
    assert answer.status == 200, answer.raw_body
    assert (answer.data["revision"], answer.data["state_hash"]) == (6, state_hash(written))
    final = snapshot(env.aws)
    last = 6 + OTHERS_BETWEEN
    assert final[HISTORY_KEY]["revision"] == last, f"{last} writes acknowledged, revision {final[HISTORY_KEY]}"
    assert final[HISTORY_KEY]["state_hash"] == state_hash(100 + OTHERS_BETWEEN - 1), "our retry overwrote a later save"
    # And the kept revisions are the others' writes, each with what it wrote
    kept = {item["revision"]: item["state_hash"] for key, item in final.items() if is_revision(key)}
    window = range(last - KEEP, last)
    assert {n: kept[n] for n in window} == {n: state_hash(100 + n - 7) for n in window}
    assert_table_consistent(final)
    if idempotency_key is not None:
        replay = (
            history_save(ctx, 6, idempotency_key) if write == "history_save" else restore_request(ctx, idempotency_key)
        )
        assert replay.header("Idempotent-Replayed") == "true"
        assert replay.data == answer.data
        assert snapshot(env.aws) == final


def test_a_release_whose_answer_was_lost_is_not_reported_as_held_after_another_holder_acquired(
    env: MotoAccount, other_container: Any
) -> None:
    from baton_checkpoints.domain.clock import now_ms

    ctx = Context(account=env)
    # Given HOLDER's lease 1
    prepare_lease(ctx)
    assert ctx.checkpoint_id is not None
    checkpoint_id = ctx.checkpoint_id

    def another_holder_acquires() -> None:
        other_container.leases.acquire(
            tenant_id=TENANT,
            checkpoint_id=checkpoint_id,
            holder="another-holder",
            key_id="key_" + "b" * 32,
            ttl_seconds=60,
            now_ms=now_ms(),
            only_agent=None,
        )

    # When its release lands, the answer is lost, and another holder is granted lease 2 before botocore's retry
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(
            Fault("UpdateItem", READ_TIMEOUT, Phase.AFTER, Duration.ONCE, between=another_holder_acquires)
        )
        answer = send_release(ctx)
    proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, succeeded=int(answer.status in SUCCESS))
    assert fault.struck == 1
    lease = snapshot(env.aws)[CHECKPOINT_KEY]["lease"]
    assert lease is not None
    assert (lease.holder, lease.counter) == ("another-holder", 2), "the retried release ended the next lease"
    # Then the release is answered as what it did (api-v1.md, Idempotency: a write that landed and whose answer was
    # lost is "never reported as a conflict"), not as a LEASE_HELD refusal of a release that happened
    assert answer.status == 200, answer.raw_body
    assert answer.data == {"checkpoint_id": checkpoint_id, "released": True}


def test_a_purge_that_answers_503_wrote_nothing(env: MotoAccount) -> None:
    with time_machine.travel(START, tick=False) as clock:
        ctx = Context(account=env, clock=clock)
        prepare_purge(ctx)
        before = snapshot(env.aws)
        # When the first page's BatchWriteItem lands on every attempt and every answer is lost
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault("BatchWriteItem", INTERNAL_500, Phase.AFTER, Duration.EVERY))
            answer = send_purge(ctx)
        proof_counts.record(SUITE, cases=1, faults_injected=fault.struck, answered_503=int(answer.status == 503))
        # Then either the purge says what it did (200, complete false) or its 503 wrote nothing
        if answer.status == 503:
            assert snapshot(env.aws) == before, (
                f"a 503 that deleted {len(changed_keys(before, snapshot(env.aws)))} items of the subject"
            )
        else:
            assert answer.status == 200, answer.raw_body
            assert answer.data["complete"] is False


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


# -- LangGraph threads (issue 11) ---------------------------------------------------------------------------------
#
# A thread write is several DynamoDB requests with no transaction: a put refreshes the thread's head (UpdateItem),
# reads what its parent carries (GetItem), writes its large values (BatchWriteItem) and then its checkpoint item
# (UpdateItem); a put_writes writes its large values, then one conditional UpdateItem; copy, prune, delete and
# delete-for-runs read and then batch their puts and deletes. What must hold, whatever DynamoDB does at any step
# (docs/api.md, LangGraph threads):
# - the answer is the route's success or a 503 with Retry-After, never a 500 (nor a 404 for a thread that is there);
# - no checkpoint is ever visible without its values: the table holds every value and write item a live
#   checkpoint references, and every tuple a read shows is the one that was put, before or after the request;
# - the client's retry of the same request, once DynamoDB is well, succeeds and leaves exactly the state a single
#   fault-free request leaves (thread writes are idempotent by their own keys, so a 503 may have done part);
# - a deleted thread stays deleted: nothing of it reads again, not even after a late put_writes.

THREAD = "faults-thread"
COPY_TARGET = "faults-thread-copy"
THREAD_RUN = "run-faults"
THREAD_CHANNELS = ("messages", "counter", "config", "docs")


def thread_bytes(name: str, step: int) -> bytes:
    """The value of channel `name` at `step`: `messages` 40,000 bytes that do not pack (over what a checkpoint's item
    holds of large values: an item of its own), `docs` over 512 bytes (held in the item of the checkpoint that brings
    it), the others small enough to ride with their version."""
    text = f"{name}-{step}-".encode()
    if name == "messages":
        return b"".join(hashlib.sha256(text + b"%d" % n).digest() for n in range(1_250))
    return text * (700 // len(text) + 1) if name == "docs" else text


def typed(raw: bytes, type_tag: str = "msgpack") -> dict[str, str]:
    """A typed value as the API takes and gives it."""
    return {"type": type_tag, "data": base64.b64encode(raw).decode("ascii")}


def thread_checkpoint(step: int) -> dict[str, Any]:
    """Checkpoint `step` of the test thread: `messages` and `counter` change every step, `config` and `docs` are set
    once (step 0) and carried."""
    versions = {"messages": step + 1, "counter": f"{step + 1:03d}.5", "config": 1, "docs": 1}
    return {"v": 4, "id": f"1f0-{step:04d}", "ts": f"2027-03-01T12:00:0{step}Z", "channel_versions": versions}


def thread_metadata(step: int) -> dict[str, Any]:
    """Checkpoint 1 (and 2) belong to the run delete-for-runs deletes; checkpoint 0 to another."""
    return {"source": "loop", "step": step, "run_id": THREAD_RUN if step else "run-other"}


THREAD_WRITES = {
    1: [("t1", "messages", thread_bytes("write", 1)), ("t1", "docs", thread_bytes("docs", 9))],
}
"""Pending writes the preparation puts: checkpoint -> (task, channel, bytes) in order."""
NEW_WRITES = [
    ("t2", "counter", b"counter-write"),
    ("t2", "messages", b"".join(hashlib.sha256(b"%d" % n).digest() for n in range(160))),
]
"""The pending writes the put_writes scenario sends to checkpoint 1: 5,120 bytes that do not pack, over what a call
keeps in its checkpoint's item (4 KB), get an item of their own."""
MANY_WRITES = [("t5", f"channel-{n}", f"write {n}".encode()) for n in range(120)]
"""A task's 120 writes: more than one UpdateItem can set (DynamoDB takes update expressions of at most 4 KB), so the
call takes several, and a fault may strike after the first landed."""


def thread_put(ctx: Context, step: int, thread_id: str = THREAD) -> Result:
    """Put checkpoint `step` (its parent the one before): the values of the channels whose version is new."""
    checkpoint = thread_checkpoint(step)
    new = THREAD_CHANNELS if step == 0 else ("messages", "counter")
    body = {
        "checkpoint": checkpoint,
        "metadata": thread_metadata(step),
        "parent_checkpoint_id": thread_checkpoint(step - 1)["id"] if step else None,
        "values": {
            channel: typed(thread_bytes(channel, 0 if channel in ("config", "docs") else step)) for channel in new
        },
    }
    return thread_call(ctx, "save_checkpoint", f"/v1/threads/{thread_id}/checkpoints", body)


def thread_put_writes(ctx: Context, step: int, writes: list[tuple[str, str, bytes]]) -> Result:
    """One task's pending writes on checkpoint `step` (every write of `writes` is of one task)."""
    body = {
        "checkpoint_id": thread_checkpoint(step)["id"],
        "task_id": writes[0][0],
        "writes": [{"channel": channel, **typed(raw)} for _, channel, raw in writes],
    }
    return thread_call(ctx, "save_checkpoint", f"/v1/threads/{THREAD}/writes", body)


def thread_call(ctx: Context, event: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> Result:
    """A thread route through the handler (the sample event gives the method; no Idempotency-Key, which these
    routes neither need nor read)."""
    headers: dict[str, str | None] = {"idempotency-key": None, "if-match": None}
    return ctx.api.invoke(event, path=path, body=body, query=query or {}, headers=headers)


def prepare_thread(ctx: Context) -> None:
    """Checkpoints 0 and 1 of the test thread, and a task's pending writes (one small, one large) on checkpoint 1."""
    for step in (0, 1):
        assert thread_put(ctx, step).status == 201
    assert thread_put_writes(ctx, 1, THREAD_WRITES[1]).status == 200


def expected_tuple(thread_id: str, step: int, writes: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    """The tuple a read must show of checkpoint `step`: every value of its channel versions, its pending writes."""
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": thread_checkpoint(step)["id"],
        "parent_checkpoint_id": thread_checkpoint(step - 1)["id"] if step else None,
        "checkpoint": thread_checkpoint(step),
        "metadata": thread_metadata(step),
        "channel_values": {
            "messages": typed(thread_bytes("messages", step)),
            "counter": typed(thread_bytes("counter", step)),
            "config": typed(thread_bytes("config", 0)),
            "docs": typed(thread_bytes("docs", 0)),
        },
        "pending_writes": [
            {"task_id": task, "idx": idx, "channel": channel, "task_path": "", **typed(raw)}
            for task, idx, channel, raw in indexed(writes)
        ],
    }


def indexed(writes: list[tuple[str, str, bytes]]) -> list[tuple[str, int, str, bytes]]:
    """Each write with its index within its task: its place among the task's writes (one put_writes per task)."""
    seen: Counter[str] = Counter()
    found = []
    for task, channel, raw in writes:
        found.append((task, seen[task], channel, raw))
        seen[task] += 1
    return found


ThreadState = dict[str, list[dict[str, Any]] | None]
"""Thread id -> its tuples newest first, as a list shows them (None: the thread answers 404)."""


def thread_state(
    steps: dict[str, dict[int, list[tuple[str, str, bytes]]]] | None = None, gone: tuple[str, ...] = ()
) -> ThreadState:
    """The state of the test threads: each named with its checkpoints (step -> pending writes), or gone."""
    state: ThreadState = dict.fromkeys(gone)
    for thread_id, checkpoints in (steps or {}).items():
        state[thread_id] = [expected_tuple(thread_id, s, checkpoints[s]) for s in sorted(checkpoints, reverse=True)]
    return state


PREPARED_THREAD = {0: [], 1: THREAD_WRITES[1]}


def read_threads(ctx: Context, thread_ids: tuple[str, ...] = (THREAD,)) -> ThreadState:
    """What the API shows of each thread now (one page holds them all), with no fault armed."""
    state: ThreadState = {}
    for thread_id in thread_ids:
        listed = thread_call(ctx, "get_checkpoint", f"/v1/threads/{thread_id}/checkpoints", query={"limit": "200"})
        assert listed.status in (200, 404), listed.raw_body
        state[thread_id] = listed.data if listed.status == 200 else None
        if listed.status == 200:
            latest = thread_call(ctx, "get_checkpoint", f"/v1/threads/{thread_id}/checkpoint")
            assert latest.status in (200, 404), latest.raw_body
            assert (latest.data if latest.status == 200 else None) == (listed.data[0] if listed.data else None)
    return state


def assert_every_value_is_in_place(aws: Any) -> None:
    """No live checkpoint without its values: each checkpoint item of a thread's current generation finds the item
    of every large value it names (`vz`) and of every pending write it keeps outside itself (`r`)."""
    from baton_checkpoints.store import thread_names as thread_store
    from baton_checkpoints.store.thread_names import write_references

    items = raw_table(aws)
    for (pk, sk), item in items.items():
        if not pk.startswith(layout.THREAD_PK_PREFIX) or not sk.startswith(layout.THREAD_CHECKPOINT):
            continue
        head = items.get((pk, layout.THREAD_HEAD_SK)) or {}
        generation = item.get(thread_store.GENERATION, {}).get("S")
        if generation is None or head.get(thread_store.GENERATION, {}).get("S") != generation:
            continue  # writes that came before their checkpoint, a former life, a deleted thread: never read
        namespace = layout.read_thread_checkpoint_sk(sk)[0]
        for channel, entry in item.get(thread_store.SIZES, {}).get("M", {}).items():
            version = entry["L"][0]["S"]
            value_sk = layout.thread_value_sk(generation, namespace, channel, version)
            if len(entry["L"]) > 3:  # held in the item of the checkpoint that brought it
                holder = items.get((pk, layout.thread_checkpoint_sk(namespace or "", entry["L"][3]["S"]))) or {}
                held = holder.get(thread_store.HELD, {}).get("M", {}).get(channel, {}).get("M", {})
                if held.get(thread_store.VERSION, {}).get("S") == version:
                    continue
            assert (pk, value_sk) in items, f"{sk} names {channel} {version}, whose item {value_sk} is missing"
        for reference in write_references(item):
            assert (pk, reference) in items, f"{sk} keeps a write whose item {reference} is missing"


@dataclass(frozen=True)
class ThreadScenario:
    """A thread write, its DynamoDB steps, and the thread states before it and after it applied once."""

    name: str
    steps: tuple[Step, ...]
    send: Callable[[Context], Result]
    success: int
    answer: dict[str, Any] | None
    """The data a first success answers (None: not checked beyond its status)."""
    after: ThreadState
    repeated: dict[str, Any] | None = None
    """What a repeat answers once it applied (prune and delete-for-runs count what is left to do): None when the
    same as `answer`."""
    deletes_thread: bool = False
    hidden_by: Step | None = None
    """The write that deletes the thread (its head's floor hides it all). A fault in a later step, the removal of
    its items, fails nothing: the delete happened and the reaper removes what is left, so the answer is the
    delete's success (with fewer checkpoints deleted than a whole removal counts)."""


AFTER_PUT = {0: [], 1: THREAD_WRITES[1], 2: []}
THREAD_SCENARIOS = (
    ThreadScenario(
        "thread_put",
        (Step("BatchWriteItem"), Step("UpdateItem")),
        lambda ctx: thread_put(ctx, 2),
        201,
        {"thread_id": THREAD, "checkpoint_ns": "", "checkpoint_id": thread_checkpoint(2)["id"]},
        thread_state({THREAD: AFTER_PUT}),
    ),
    ThreadScenario(
        "thread_put_cold",
        (Step("GetItem"), Step("UpdateItem"), Step("BatchWriteItem"), Step("UpdateItem", nth=2)),
        lambda ctx: thread_put(new_container(ctx), 2),
        201,
        {"thread_id": THREAD, "checkpoint_ns": "", "checkpoint_id": thread_checkpoint(2)["id"]},
        thread_state({THREAD: AFTER_PUT}),
    ),
    ThreadScenario(
        "thread_put_writes",
        (Step("BatchWriteItem"), Step("UpdateItem")),
        lambda ctx: thread_put_writes(ctx, 1, NEW_WRITES),
        200,
        {"thread_id": THREAD, "checkpoint_ns": "", "checkpoint_id": thread_checkpoint(1)["id"], "task_id": "t2",
         "writes": 2},
        thread_state({THREAD: {0: [], 1: [*THREAD_WRITES[1], *NEW_WRITES]}}),
    ),
    ThreadScenario(
        "thread_put_writes_many",
        (Step("UpdateItem"),),
        lambda ctx: thread_put_writes(ctx, 1, MANY_WRITES),
        200,
        {"task_id": "t5", "writes": len(MANY_WRITES)},
        thread_state({THREAD: {0: [], 1: [*THREAD_WRITES[1], *MANY_WRITES]}}),
    ),
    ThreadScenario(
        "thread_copy",
        (Step("GetItem"), Step("UpdateItem"), Step("Query"),
         Step("BatchWriteItem"), Step("BatchWriteItem", nth=2)),
        lambda ctx: thread_call(ctx, "save_checkpoint", f"/v1/threads/{THREAD}/copy",
                                {"target_thread_id": COPY_TARGET}),
        200,
        {"thread_id": THREAD, "target_thread_id": COPY_TARGET, "copied_checkpoints": 2},
        thread_state({THREAD: PREPARED_THREAD, COPY_TARGET: PREPARED_THREAD}, gone=()),
    ),
    ThreadScenario(
        "thread_prune_keep_latest",
        (Step("GetItem"), Step("Query"), Step("Query", nth=2),
         Step("BatchWriteItem")),
        lambda ctx: thread_call(ctx, "save_checkpoint", "/v1/threads:prune",
                                {"thread_ids": [THREAD], "strategy": "keep_latest"}),
        200,
        {"pruned_threads": 1, "deleted_checkpoints": 1, "complete": True},
        thread_state({THREAD: {1: THREAD_WRITES[1]}}),
        repeated={"pruned_threads": 1, "deleted_checkpoints": 0, "complete": True},
    ),
    ThreadScenario(
        "thread_prune_delete",
        (Step("GetItem"), Step("UpdateItem"), Step("Query"), Step("BatchWriteItem")),
        lambda ctx: thread_call(ctx, "save_checkpoint", "/v1/threads:prune",
                                {"thread_ids": [THREAD], "strategy": "delete"}),
        200,
        {"pruned_threads": 1, "deleted_checkpoints": 2, "complete": True},
        thread_state(gone=(THREAD,)),
        repeated={"pruned_threads": 0, "deleted_checkpoints": 0, "complete": True},
        deletes_thread=True,
        hidden_by=Step("UpdateItem"),
    ),
    ThreadScenario(
        "thread_delete",
        (Step("UpdateItem"), Step("Query"), Step("BatchWriteItem")),
        lambda ctx: thread_call(ctx, "delete_checkpoint", f"/v1/threads/{THREAD}"),
        200,
        {"thread_id": THREAD, "deleted": True},
        thread_state(gone=(THREAD,)),
        deletes_thread=True,
        hidden_by=Step("UpdateItem"),
    ),
    ThreadScenario(
        "thread_delete_for_runs",
        (Step("Query"), Step("BatchWriteItem")),
        lambda ctx: thread_call(ctx, "save_checkpoint", "/v1/threads:delete-for-runs", {"run_ids": [THREAD_RUN]}),
        200,
        {"deleted_checkpoints": 1, "complete": True},
        thread_state({THREAD: {0: []}}),
        repeated={"deleted_checkpoints": 0, "complete": True},
    ),
)  # fmt: skip


def new_container(ctx: Context) -> Context:
    """`ctx` as a container that has not served the thread would serve it: it knows no head to skip touching and
    no parent to carry from, so a put reads its parent and touches the head."""
    from baton_checkpoints.store.threads import ThreadStore

    services = ctx.account.services
    object.__setattr__(services, "threads", ThreadStore(services.dynamodb, TABLE, services.objects, services.blobs))
    return ctx


def thread_fault_plan(operation: str) -> list[tuple[FaultKind, Phase, Duration]]:
    """The faults a thread step meets: throttling on every attempt (nothing gets through), each fault botocore does
    not retry (a batch's unprocessed items, which the store sends again; a transaction conflict on a single write),
    and for a write its answer lost once (botocore sends it again) and on every attempt. The kind-by-kind
    classification, and faults botocore's retry absorbs, are proven on the checkpoint routes above, through the same
    error translation."""
    plan = [(THROTTLING, Phase.BEFORE, Duration.EVERY)]
    plan += [
        (kind, Phase.BEFORE, duration)
        for kind, phase, duration in fault_plan(operation)
        if not kind.retried_by_botocore and phase is Phase.BEFORE
    ]
    if operation in WRITES:
        plan += [(READ_TIMEOUT, Phase.AFTER, Duration.ONCE), (INTERNAL_500, Phase.AFTER, Duration.EVERY)]
    return plan


def thread_fault_table() -> Iterator[Any]:
    """Each thread scenario × each of its steps × the faults of `thread_fault_plan`."""
    for scenario in THREAD_SCENARIOS:
        for step in scenario.steps:
            for kind, phase, duration in thread_fault_plan(step.operation):
                yield fault_case(scenario, step, kind, phase, duration)


@pytest.mark.parametrize(("scenario", "step", "kind", "phase", "duration"), list(thread_fault_table()))
def test_a_fault_in_a_thread_write_never_shows_a_checkpoint_without_its_values(
    env: MotoAccount, scenario: ThreadScenario, step: Step, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    with time_machine.travel(START, tick=False):
        ctx = Context(account=env)
        # Given a thread of two checkpoints (values in their items and in items of their own, pending writes)
        prepare_thread(ctx)
        threads = tuple(scenario.after)
        before = read_threads(ctx, threads)
        prepared = thread_state({THREAD: PREPARED_THREAD}, gone=(COPY_TARGET,))
        assert before == {thread_id: prepared[thread_id] for thread_id in threads}
        # When the thread write meets the fault at this step
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault(step.operation, kind, phase, duration, skip=step.nth - 1))
            answer = scenario.send(ctx)
        proof_counts.record(
            SUITE,
            cases=1,
            thread_cases=1,
            faults_injected=fault.struck,
            answered_503=int(answer.status == 503),
            succeeded=int(answer.status in SUCCESS),
        )
        assert fault.struck >= 1, (
            f"{step.operation} is not a step of {scenario.name}: {injector.attempts} {answer.raw_body}"
        )
        assert not fault.exhausted, f"the request tried {step.operation} {fault.struck} times and never gave up"
        # Then the answer is its success or a 503, as a fault botocore retries once leaves no excuse for a 503; a
        # fault after the thread was deleted (in the removal of its items) is no failure of the delete
        hider = scenario.hidden_by
        hidden = hider is not None and scenario.steps.index(step) > scenario.steps.index(hider)
        must = "success" if hidden else expectation(kind, phase, duration)
        judge(answer, scenario.success, must)
        if answer.status != 503 and scenario.answer is not None:
            shown = {k: answer.data.get(k) for k in scenario.answer}
            if hidden and "deleted_checkpoints" in shown:
                assert 0 <= shown["deleted_checkpoints"] <= scenario.answer["deleted_checkpoints"], answer.raw_body
                shown["deleted_checkpoints"] = scenario.answer["deleted_checkpoints"]  # the reaper removes the rest
            assert shown == scenario.answer, answer.raw_body
        # And no checkpoint is without its values: in the table, and in every tuple a read shows (the one put,
        # before or after the write)
        assert_every_value_is_in_place(env.aws)
        now = read_threads(ctx, threads)
        if answer.status != 503:
            assert now == scenario.after
        for thread_id, tuples in now.items():
            for shown in tuples or []:
                known = [t for t in (*(before.get(thread_id) or []), *(scenario.after[thread_id] or [])) if t == shown]
                assert known, f"{thread_id} shows a tuple that was never put: {shown}"
        # And the client's retry converges on the state one fault-free request leaves
        retried = scenario.send(ctx)
        if scenario.deletes_thread and retried.status == 404:
            assert retried.body == {"error": {"code": "NOT_FOUND", "message": "Resource was not found."},
                                    "meta": retried.body["meta"]}  # fmt: skip
        else:
            assert retried.status == scenario.success, retried.raw_body
            if scenario.answer is not None:
                # The first answer again, or (prune, delete-for-runs) the count of what was left to do
                shown = {k: retried.data.get(k) for k in scenario.answer}
                assert shown in (scenario.answer, scenario.repeated or scenario.answer), retried.raw_body
        assert_every_value_is_in_place(env.aws)
        assert read_threads(ctx, threads) == scenario.after
        if scenario.deletes_thread:
            # And the delete is in the trail once when it was answered as done (by the first request or its retry),
            # unless DynamoDB kept failing the trail's own requests too (the event is then an ERROR line)
            deleted = [e for e in audit_events(ctx) if e["action"] == "thread.deleted"]
            answered = int(answer.status in SUCCESS or retried.status in SUCCESS)
            if duration is Duration.ONCE:
                assert len(deleted) == answered, deleted
            else:
                assert len(deleted) <= answered, deleted
            # And a deleted thread stays deleted: a late put_writes (kept, as writes may come before their
            # checkpoint, or refused) shows nothing, and no checkpoint of it reads again
            late = thread_put_writes(ctx, 1, NEW_WRITES)
            assert late.status in (200, 404), late.raw_body
            assert read_threads(ctx, threads) == scenario.after
            by_id = thread_call(
                ctx, "get_checkpoint", f"/v1/threads/{THREAD}/checkpoint", query={"checkpoint_id": "1f0-0001"}
            )
            assert by_id.status == 404, by_id.raw_body


def test_retries_of_a_put_writes_change_nothing_and_answer_the_same(env: MotoAccount) -> None:
    from baton_checkpoints.domain.threads import MAX_PENDING_WRITE_BYTES

    with time_machine.travel(START, tick=False):
        ctx = Context(account=env)
        # Given a checkpoint, and a task's write of 40% of a checkpoint's room for pending writes (an item of its
        # own) that a client sends again and again, as a client whose answers were lost does: a retry must not
        # count its bytes again (four of them would pass the room)
        prepare_thread(ctx)
        write = [("t3", "messages", bytes(range(256)) * (MAX_PENDING_WRITE_BYTES * 4 // 10 // 256))]
        answers = [thread_put_writes(ctx, 1, write) for _ in range(4)]
        other = thread_put_writes(ctx, 1, [("t4", "counter", b"small")])
    proof_counts.record(SUITE, cases=1, thread_cases=1)
    # Then each retry answers as the first did, and the checkpoint still has room for other tasks' writes
    assert [a.status for a in answers] == [200] * 4, [a.raw_body for a in answers]
    assert other.status == 200, other.raw_body


# -- OAuth (issue 13) ---------------------------------------------------------------------------------------------
#
# OAuth's endpoints write the table too: a registration (PutItem), an approval's code (PutItem, after the client's and
# the key's GetItems), a code's exchange (TransactWriteItems: the code marked used, the grant and its first pair), a
# refresh (TransactWriteItems: the old refresh token marked rotated, the grant moved to a new pair, the old access
# token deleted), a revocation (TransactWriteItems: the grant marked revoked, its pair deleted); and /mcp reads an
# access token (GetItem) and its approving key before the tool's own reads. What must hold, whatever DynamoDB does:
# - the answer is the route's success or 503 UNAVAILABLE with Retry-After (at /mcp, the tool's UNAVAILABLE past the
#   token's check), never a 500; a 503 before the write reached DynamoDB wrote nothing, and one whose write landed
#   left exactly what one success leaves;
# - no grant is ever half there: every live grant's access and refresh tokens are stored and name it, every stored
#   token that is not rotated is named by a live grant, every used code names a grant that was written with it;
# - the client's retry converges: a code or refresh token that nothing used still works, one whose exchange landed
#   unanswered is refused (invalid_grant) and its grant revoked, so that no token of it works (cleanly refused).

OAUTH_ORIGIN = "https://api.example.com"
"""The origin the sample events name (their `domainName`), as the Lambda serves it: the issuer, and `<origin>/mcp`
the resource its tokens are bound to."""
OAUTH_RESOURCE = f"{OAUTH_ORIGIN}/mcp"
FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"
OAUTH_GRANT_SCOPES = ("mcp:call", "checkpoints:read", "checkpoints:write")


@dataclass
class OAuthContext(Context):
    """A scenario's OAuth world: the registered client, the approving key (the caller's agent), and what the
    preparation got: a code with its verifier, a grant's tokens."""

    approver: str = ""
    client_id: str = ""
    code: str = ""
    verifier: str = ""
    tokens: dict[str, Any] = field(default_factory=dict)
    grant_id: str = ""


def oauth_call(
    ctx: Context,
    method: str,
    path: str,
    form: dict[str, str] | None = None,
    body: Any = None,
    query: dict[str, str] | None = None,
) -> Result:
    """An OAuth endpoint through the handler, without a key (they are public): a form, a JSON body or a query, on
    the sample event of its method."""
    from urllib.parse import urlencode

    if method == "GET":
        return ctx.api.invoke("health", path=path, query=query or {}, headers={"authorization": None})
    raw = urlencode(form) if form is not None else json.dumps(body)
    media_type = FORM_MEDIA_TYPE if form is not None else "application/json"
    return ctx.api.invoke(
        "create_key", path=path, raw_body=raw, headers={"authorization": None, "content-type": media_type}
    )


def prepare_oauth_client(ctx: OAuthContext) -> None:
    """A registered client, and a key of the caller's agent holding what a grant asks for (a new secret: the
    container has never read it)."""
    from tests.builders import client_registration

    ctx.approver = f"btn_fault_oauth_{uuid.uuid4().hex}"
    put_key(ctx.account.services, ctx.approver, TENANT, AGENT, set(OAUTH_GRANT_SCOPES), f"key_{uuid.uuid4().hex}")
    registered = oauth_call(ctx, "POST", "/oauth/register", body=client_registration())
    assert registered.status == 201, registered.raw_body
    ctx.client_id = registered.body["client_id"]


def authorization(ctx: OAuthContext) -> dict[str, str]:
    """A new authorization request of the context's client (its PKCE verifier kept)."""
    from tests.builders import authorization_form, pkce

    ctx.verifier, challenge = pkce()
    return authorization_form(ctx.client_id, challenge, OAUTH_RESOURCE)


def send_approval(ctx: OAuthContext) -> Result:
    return oauth_call(
        ctx, "POST", "/oauth/authorize", form={**authorization(ctx), "key": ctx.approver, "decision": "approve"}
    )


def redirected_code(answer: Result) -> str:
    """The code a 302 of the consent form carries."""
    from urllib.parse import parse_qsl, urlsplit

    query = dict(parse_qsl(urlsplit(answer.header("Location") or "").query))
    assert query.get("iss") == OAUTH_ORIGIN, answer.header("Location")
    return query["code"]


def prepare_oauth_code(ctx: OAuthContext) -> None:
    """A client, and a code approved with the key."""
    prepare_oauth_client(ctx)
    approved = send_approval(ctx)
    assert approved.status == 302, approved.raw_body
    ctx.code = redirected_code(approved)


def send_exchange(ctx: OAuthContext) -> Result:
    from tests.builders import code_exchange_form

    return oauth_call(ctx, "POST", "/oauth/token", form=code_exchange_form(ctx.code, ctx.client_id, ctx.verifier))


def prepare_oauth_grant(ctx: OAuthContext) -> None:
    """A client, and a grant approved with the key: its first pair of tokens."""
    prepare_oauth_code(ctx)
    exchanged = send_exchange(ctx)
    assert exchanged.status == 200, exchanged.raw_body
    ctx.tokens = exchanged.body


def send_refresh(ctx: OAuthContext) -> Result:
    from tests.builders import refresh_form

    return oauth_call(ctx, "POST", "/oauth/token", form=refresh_form(ctx.tokens["refresh_token"], ctx.client_id))


def send_revocation(ctx: OAuthContext) -> Result:
    """Revoke the grant by its refresh token, without a hint: looked up as an access token first, then a refresh
    token."""
    return oauth_call(ctx, "POST", "/oauth/revoke", form={"token": ctx.tokens["refresh_token"]})


def prepare_oauth_checkpoint(ctx: OAuthContext) -> None:
    """The caller's checkpoint, a grant of its agent, and the key cache's 60 s gone by: the token's first use at
    /mcp reads the token, then its approving key, then what the tool reads."""
    from baton_checkpoints.domain.limits import KEY_CACHE_SECONDS

    prepare_checkpoint(ctx)
    prepare_oauth_grant(ctx)
    ctx.clock.shift(timedelta(seconds=KEY_CACHE_SECONDS + 1))


def send_tool_call_with_token(ctx: OAuthContext) -> Result:
    """`baton_checkpoint_get` of the test subject's checkpoint over `POST /mcp`, with the grant's access token: the
    HTTP 503 of the token's check (its GetItems), or the tool's result (`ToolResult`, as `call_tool` reads it)."""
    message = {
        "jsonrpc": "2.0",
        "id": next(RPC_IDS),
        "method": "tools/call",
        "params": {"name": "baton_checkpoint_get", "arguments": {"subject_id": SUBJECT, "kind": KIND}},
    }
    rpc = ctx.api.invoke("mcp_tools_call", body=message, secret=ctx.tokens["access_token"])
    if rpc.status != 200:
        return rpc
    result = rpc.body["result"]
    structured = result["structuredContent"]
    if result.get("isError"):
        status = 503 if structured.get("code") == "UNAVAILABLE" else OTHER_TOOL_ERROR
        return ToolResult(status, {}, json.dumps({"error": structured}), rpc=rpc)
    return ToolResult(200, {}, json.dumps({"data": structured}), rpc=rpc)


def secret_key(secret: str) -> tuple[str, str]:
    """The table key of a code's or token's item (by the secret's SHA-256)."""
    return (f"S#{hash_secret(secret)}", layout.OAUTH_SECRET_SK)


def grants(items: Snapshot) -> dict[tuple[str, str], Item]:
    return {key: item for key, item in items.items() if key[0].startswith("G#")}


def live_tokens(items: Snapshot) -> dict[tuple[str, str], Item]:
    """Access and refresh tokens a client could still use: stored, and (a refresh token) not rotated."""
    return {
        key: item
        for key, item in items.items()
        if key[0].startswith("S#") and item.get("kind") in ("access", "refresh") and "rotated_at" not in item
    }


def assert_grants_whole(items: Snapshot) -> None:
    """No grant half there: a live grant's two tokens are stored and name it; a revoked one's are gone; every live
    token is named by its live grant; a used code names a grant that exists."""
    by_id = {item["grant_id"]: item for item in grants(items).values()}
    for grant in by_id.values():
        for kind in ("access", "refresh"):
            token = items.get((f"S#{grant[f'{kind}_hash']}", layout.OAUTH_SECRET_SK))
            if "revoked_at" in grant:
                assert token is None or "rotated_at" in token, f"revoked grant {grant['grant_id']} keeps its {kind}"
            else:
                assert token is not None, f"grant {grant['grant_id']} without its {kind} token"
                assert (token["kind"], token["grant_id"]) == (kind, grant["grant_id"]), token
    for key, token in live_tokens(items).items():
        named = by_id.get(token["grant_id"])
        assert named is not None, f"a {token['kind']} token of no grant: {key}"
        assert "revoked_at" not in named, f"a live {token['kind']} token of revoked grant {named['grant_id']}"
        assert named[f"{token['kind']}_hash"] == key[0].removeprefix("S#"), f"a {token['kind']} token its grant left"
    for key, code in items.items():
        if code.get("kind") == "code" and "grant_id" in code:
            assert code["grant_id"] in by_id, f"code {key} names grant {code['grant_id']}, which was never written"


def assert_no_usable_token(items: Snapshot) -> None:
    """Every grant revoked, and no token of any left to use."""
    assert all("revoked_at" in grant for grant in grants(items).values()), grants(items)
    assert not live_tokens(items), sorted(live_tokens(items))


def registered_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    changed = changed_keys(before, after)
    assert len(changed) == 1, f"{sorted(changed)} changed, expected one new client"
    (key,) = changed
    assert key[0].startswith("A#"), key
    assert key not in before, key
    if answer is not None:
        assert key == layout.identity(layout.oauth_client_key(answer.body["client_id"])), key


def register_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    if answer.status != 201:
        assert send_registration(ctx).status == 201


def send_registration(ctx: OAuthContext) -> Result:
    from tests.builders import client_registration

    return oauth_call(ctx, "POST", "/oauth/register", body=client_registration())


def send_consent_page(ctx: OAuthContext) -> Result:
    return oauth_call(ctx, "GET", "/oauth/authorize", query=authorization(ctx))


def showed_the_page(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    assert after == before, "the consent page wrote"
    if answer is not None:
        assert ctx.client_id in answer.raw_body, answer.raw_body[:300]
        assert 'name="key"' in answer.raw_body, answer.raw_body[:300]


def show_the_page_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    if answer.status != 200:
        assert send_consent_page(ctx).status == 200


def approved_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """One new code, of the client, the key's agent and the scopes asked, not used yet: the one the 302 carries."""
    changed = changed_keys(before, after)
    assert len(changed) == 1, f"{sorted(changed)} changed, expected one new code"
    (key,) = changed
    code = after[key]
    assert key not in before, key
    assert code["kind"] == "code", code
    assert "grant_id" not in code, code
    assert (code["client_id"], code["tenant_id"], code["agent_id"]) == (ctx.client_id, TENANT, AGENT), code
    assert tuple(code["scopes"]) == OAUTH_GRANT_SCOPES, code
    if answer is not None:
        assert key == secret_key(redirected_code(answer)), "the 302 carries another code than the one stored"


def approve_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    if answer.status != 302:
        again = send_approval(ctx)
        assert again.status == 302, again.raw_body
        assert secret_key(redirected_code(again)) in snapshot(ctx.account.aws)


def exchanged_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """The code marked used with the one grant it made, that grant's first pair, and its client kept a year from
    now (a registered client lives a day until its first grant): nothing else."""
    code_key = secret_key(ctx.code)
    client_key = (f"A#{ctx.client_id}", "A")
    new = changed_keys(before, after) - {code_key, client_key}
    assert code_key in changed_keys(before, after), "the code is not marked used"
    assert client_key in changed_keys(before, after), "the client was not kept"
    assert int(after[client_key]["ttl"]) > int(before[client_key]["ttl"]) + 300 * 86400
    grant_id = after[code_key]["grant_id"]
    assert sorted(key[0][:2] for key in new) == ["G#", "S#", "S#"], f"{sorted(new)} besides the code"
    (grant,) = grants({key: after[key] for key in new}).values()
    assert (grant["grant_id"], grant["tenant_id"], grant["agent_id"]) == (grant_id, TENANT, AGENT), grant
    assert "revoked_at" not in grant
    if answer is not None:
        tokens = answer.body  # OAuth's answer, not the contract's envelope
        assert grant["access_hash"] == hash_secret(tokens["access_token"])
        assert grant["refresh_hash"] == hash_secret(tokens["refresh_token"])
        assert tokens["scope"] == " ".join(OAUTH_GRANT_SCOPES), tokens


def exchange_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    """The client's retry of the same exchange: the code works when nothing used it, else it is refused and its
    grant revoked (no token of it works)."""
    if answer.status == 200:
        return
    used = "grant_id" in snapshot(ctx.account.aws)[secret_key(ctx.code)]
    retried = send_exchange(ctx)
    if not used:
        assert retried.status == 200, retried.raw_body
        exchanged_once(ctx, before, snapshot(ctx.account.aws), retried)
        return
    assert (retried.status, retried.body["error"]) == (400, "invalid_grant"), retried.raw_body
    assert_no_usable_token(snapshot(ctx.account.aws))


def refreshed_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """The old refresh token marked rotated, the old access token deleted, the grant moved to a new pair."""
    old_access, old_refresh = secret_key(ctx.tokens["access_token"]), secret_key(ctx.tokens["refresh_token"])
    changed = changed_keys(before, after)
    (grant_key,) = grants(after)
    new = changed - {old_access, old_refresh, grant_key}
    assert old_access not in after, "the old access token still works"
    assert "rotated_at" in after[old_refresh], "the old refresh token is not marked rotated"
    assert len(new) == 2, sorted(changed)
    assert all(key[0].startswith("S#") and key not in before for key in new), sorted(changed)
    grant = after[grant_key]
    assert {secret_key_of(grant, "access"), secret_key_of(grant, "refresh")} == new
    assert "revoked_at" not in grant
    if answer is not None:
        tokens = answer.body
        assert grant["access_hash"] == hash_secret(tokens["access_token"])
        assert grant["refresh_hash"] == hash_secret(tokens["refresh_token"])


def secret_key_of(grant: Item, kind: str) -> tuple[str, str]:
    return (f"S#{grant[f'{kind}_hash']}", layout.OAUTH_SECRET_SK)


def refresh_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    """The client's retry of the same refresh: its refresh token works when nothing rotated it, else it is refused
    and the grant revoked."""
    if answer.status == 200:
        return
    rotated = "rotated_at" in snapshot(ctx.account.aws)[secret_key(ctx.tokens["refresh_token"])]
    retried = send_refresh(ctx)
    if not rotated:
        assert retried.status == 200, retried.raw_body
        refreshed_once(ctx, before, snapshot(ctx.account.aws), retried)
        return
    assert (retried.status, retried.body["error"]) == (400, "invalid_grant"), retried.raw_body
    assert_no_usable_token(snapshot(ctx.account.aws))


def revoked_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """The grant marked revoked and its pair deleted: nothing else."""
    (grant_key,) = grants(after)
    pair = {secret_key(ctx.tokens["access_token"]), secret_key(ctx.tokens["refresh_token"])}
    assert changed_keys(before, after) == {grant_key} | pair, sorted(changed_keys(before, after))
    assert "revoked_at" in after[grant_key]
    assert not pair & set(after), "a revoked grant's token is still stored"
    if answer is not None:
        assert answer.raw_body == "", answer.raw_body


def revoke_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    """The client's retry of the revocation: 200 (revoked now, or nothing left to revoke), and no token works."""
    if answer.status != 200:
        retried = send_revocation(ctx)
        assert retried.status == 200, retried.raw_body
    assert_no_usable_token(snapshot(ctx.account.aws))


def read_with_the_token(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    read_checkpoint(ctx, before, after, answer)


def call_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    if answer.status != 200:
        retried = send_tool_call_with_token(ctx)
        assert retried.status == 200, retried.raw_body
        read_checkpoint(ctx, before, snapshot(ctx.account.aws), retried)


# GET /v1/oauth/grants and DELETE /v1/oauth/grants/{grant_id}: a list is the index's Query (the revoked grant
# filtered out) and one BatchGetItem of the page's grants; a revocation reads the caller's key fresh, the grant
# (GetItem), the grant again inside the store's revocation (GetItem), then marks it revoked and deletes its pair in
# one TransactWriteItems. A list writes nothing; a revocation either revoked the grant wholly or left it as it was.

GRANTS_LISTED = 2
"""Live grants the list scenario prepares, beside one revoked grant that the index's filter leaves out."""
GRANT_FIELDS = {
    "grant_id", "client_id", "client_name", "tenant_id", "agent_id", "key_id", "scopes", "resource", "created_at",
    "expires_at",
}  # fmt: skip
"""What a listed grant holds (never a token)."""


def grant_ids(items: Snapshot) -> list[str]:
    """The table's grants' ids, oldest first (a grant id starts with its approval time)."""
    return sorted(item["grant_id"] for item in grants(items).values())


def prepare_grants(ctx: OAuthContext) -> None:
    """Three grants of one client approved with the key, the last one revoked (by its refresh token), and the
    caller's key read once (a list's only reads are then its own)."""
    prepare_oauth_client(ctx)
    for _ in range(GRANTS_LISTED + 1):
        approved = send_approval(ctx)
        assert approved.status == 302, approved.raw_body
        ctx.code = redirected_code(approved)
        exchanged = send_exchange(ctx)
        assert exchanged.status == 200, exchanged.raw_body
        ctx.tokens = exchanged.body
        ctx.clock.shift(timedelta(milliseconds=5))
    assert send_revocation(ctx).status == 200
    prepare_warm_key(ctx)


def send_grant_list(ctx: OAuthContext) -> Result:
    return ctx.api.invoke("list_keys", path="/v1/oauth/grants", query={"limit": "50"})


def listed_grants(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """A list wrote nothing, and showed the live grants, oldest first, as listed grants (never a token)."""
    assert after == before, f"a list of grants wrote {sorted(changed_keys(before, after))}"
    if answer is None:
        return
    live = [grant["grant_id"] for grant in grants(after).values() if "revoked_at" not in grant]
    listed = answer.data
    assert [grant["grant_id"] for grant in listed] == sorted(live), answer.raw_body
    assert len(listed) == GRANTS_LISTED, answer.raw_body
    for grant in listed:
        assert set(grant) == GRANT_FIELDS, grant
        assert (grant["client_id"], grant["tenant_id"], grant["agent_id"]) == (ctx.client_id, TENANT, AGENT), grant
        assert tuple(grant["scopes"]) == OAUTH_GRANT_SCOPES, grant
    assert answer.body["meta"]["next_cursor"] is None, answer.raw_body
    assert "_token" not in answer.raw_body, answer.raw_body
    assert ctx.tokens["refresh_token"] not in answer.raw_body


def list_grants_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    if answer.status != 200:
        retried = send_grant_list(ctx)
        assert retried.status == 200, retried.raw_body
        listed_grants(ctx, before, snapshot(ctx.account.aws), retried)


def prepare_grant_to_revoke(ctx: OAuthContext) -> None:
    """A grant approved with the key (its id read from the table), and a refreshed grant beside it, which the
    revocation must leave as it is."""
    prepare_oauth_grant(ctx)
    other = OAuthContext(account=ctx.account, clock=ctx.clock)
    prepare_oauth_grant(other)
    assert send_refresh(other).status == 200
    (ctx.grant_id,) = (
        grant["grant_id"]
        for grant in grants(snapshot(ctx.account.aws)).values()
        if grant["access_hash"] == hash_secret(ctx.tokens["access_token"])
    )


def send_grant_revocation(ctx: OAuthContext) -> Result:
    return ctx.api.invoke("revoke_key", path=f"/v1/oauth/grants/{ctx.grant_id}")


def grant_revoked_once(ctx: OAuthContext, before: Snapshot, after: Snapshot, answer: Result | None) -> None:
    """The grant marked revoked and its pair deleted: nothing else (the other grant and its tokens untouched)."""
    grant_key = layout.identity(layout.oauth_grant_key(TENANT, ctx.grant_id))
    pair = {secret_key(ctx.tokens["access_token"]), secret_key(ctx.tokens["refresh_token"])}
    assert changed_keys(before, after) == {grant_key} | pair, sorted(changed_keys(before, after))
    assert "revoked_at" in after[grant_key]
    assert {k: v for k, v in after[grant_key].items() if k != "revoked_at"} == before[grant_key]
    assert not pair & set(after), "a revoked grant's token is still stored"
    if answer is not None:
        assert answer.data == {"grant_id": ctx.grant_id, "revoked": True}, answer.raw_body


def revoke_grant_again(ctx: OAuthContext, answer: Result, before: Snapshot) -> None:
    """The client's retry of the revocation ends with the grant revoked wholly: 200 when the first left it live,
    404 (no live grant of that id) when the first had revoked it; its refresh token is refused either way."""
    grant_key = layout.identity(layout.oauth_grant_key(TENANT, ctx.grant_id))
    if answer.status != 200:
        was_revoked = "revoked_at" in snapshot(ctx.account.aws)[grant_key]
        retried = send_grant_revocation(ctx)
        assert retried.status == (404 if was_revoked else 200), retried.raw_body
        grant_revoked_once(ctx, before, snapshot(ctx.account.aws), None)
    refused = send_refresh(ctx)
    assert (refused.status, refused.body["error"]) == (400, "invalid_grant"), refused.raw_body


@dataclass(frozen=True)
class OAuthScenario:
    """An OAuth request, the DynamoDB requests it makes, what applying it once leaves, and the client's retry."""

    name: str
    steps: tuple[Step, ...]
    prepare: Callable[[OAuthContext], None]
    send: Callable[[OAuthContext], Result]
    success: int
    applied_once: Callable[[OAuthContext, Snapshot, Snapshot, Result | None], None]
    retry: Callable[[OAuthContext, Result, Snapshot], None]
    """The client's retry of the same request once DynamoDB is well (after a success: what may be checked)."""


SECRET_LOOKUP = Step("GetItem", every_kind=False)
"""A code's or token's GetItem, tried kind by kind as the exchange's first step."""
KEY_CHECK = Step("GetItem", nth=2, every_kind=False)
"""The approving key, read fresh: the authenticator's GetItem, tried kind by kind by `auth_cold`."""

OAUTH_SCENARIOS = (
    OAuthScenario("oauth_register", (Step("PutItem"),), lambda ctx: None, send_registration, 201, registered_once,
                  register_again),
    OAuthScenario("oauth_consent_page", (Step("GetItem", every_kind=False),), prepare_oauth_client, send_consent_page,
                  200, showed_the_page, show_the_page_again),
    # The client's GetItem, the key's (fresh), the code's PutItem.
    OAuthScenario("oauth_approve", (Step("GetItem"), KEY_CHECK, Step("PutItem")), prepare_oauth_client,
                  send_approval, 302, approved_once, approve_again),
    # The code's GetItem, the key's (fresh), the transaction.
    OAuthScenario("oauth_exchange", (Step("GetItem"), KEY_CHECK, Step("TransactWriteItems")), prepare_oauth_code,
                  send_exchange, 200, exchanged_once, exchange_again),
    # The refresh token's GetItem, the key's (fresh), the grant's, the transaction.
    OAuthScenario("oauth_refresh", (SECRET_LOOKUP, KEY_CHECK, Step("GetItem", nth=3), Step("TransactWriteItems")),
                  prepare_oauth_grant, send_refresh, 200, refreshed_once, refresh_again),
    # The token looked up as an access token, then as a refresh token, the grant, the transaction.
    OAuthScenario("oauth_revoke", (SECRET_LOOKUP, Step("GetItem", nth=2, every_kind=False),
                                   Step("GetItem", nth=3, every_kind=False), Step("TransactWriteItems")),
                  prepare_oauth_grant, send_revocation, 200, revoked_once, revoke_again),
    # The access token's GetItem, its approving key's, the tool's read of the checkpoint.
    OAuthScenario("oauth_mcp_tool_call", (Step("GetItem"), KEY_CHECK, Step("GetItem", nth=3, every_kind=False)),
                  prepare_oauth_checkpoint, send_tool_call_with_token, 200, read_with_the_token, call_again),
    # GET /v1/oauth/grants: the index's Query, the page's BatchGetItem (the caller's key cached).
    OAuthScenario("oauth_grants_list", (Step("Query"), Step("BatchGetItem")), prepare_grants, send_grant_list, 200,
                  listed_grants, list_grants_again),
    # DELETE /v1/oauth/grants/{grant_id}: the caller's key (fresh), the grant's GetItem, the revocation's own read of
    # it (the same code as oauth_revoke's), the transaction.
    OAuthScenario("oauth_grant_revoke", (Step("GetItem", every_kind=False), Step("GetItem", nth=2),
                                         Step("GetItem", nth=3, every_kind=False), Step("TransactWriteItems")),
                  prepare_grant_to_revoke, send_grant_revocation, 200, grant_revoked_once, revoke_grant_again),
)  # fmt: skip


def oauth_fault_table() -> Iterator[Any]:
    """Each OAuth scenario × each of its steps × the faults worth injecting there (`faults.fault_plan`)."""
    for scenario in OAUTH_SCENARIOS:
        for step in scenario.steps:
            for kind, phase, duration in fault_plan(step.operation):
                kind_by_kind = step.every_kind and KIND_BY_KIND
                if not kind_by_kind and kind.retried_by_botocore and kind not in ONE_ATTEMPT_REPRESENTATIVES:
                    continue
                yield fault_case(scenario, step, kind, phase, duration)


@pytest.mark.parametrize(("scenario", "step", "kind", "phase", "duration"), list(oauth_fault_table()))
def test_a_fault_in_an_oauth_request_answers_success_or_503_and_leaves_no_grant_half_there(
    env: MotoAccount, scenario: OAuthScenario, step: Step, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        ctx = OAuthContext(account=env, clock=clock)
        scenario.prepare(ctx)
        before = snapshot(env.aws)
        # When the request meets the fault at this step
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault(step.operation, kind, phase, duration, skip=step.nth - 1))
            answer = scenario.send(ctx)
        after = snapshot(env.aws)
        refused = answer.status == 400
        proof_counts.record(
            SUITE,
            cases=1,
            oauth_cases=1,
            faults_injected=fault.struck,
            answered_503=int(answer.status == 503),
            succeeded=int(answer.status == scenario.success),
            oauth_refused_after_landing=int(refused),
        )
        # Then the fault did strike this step, and a persistent one lasted as long as the request kept trying
        assert fault.struck >= 1, f"{step.name} is not a step of {scenario.name}: {injector.attempts}"
        assert not fault.exhausted, f"the request tried {step.operation} {fault.struck} times and never gave up"
        must = expectation(kind, phase, duration)
        assert answer.status in (scenario.success, 503, 400), f"{answer.status} (expected {must}): {answer.raw_body}"
        if answer.status == 503:
            assert must != "success", f"a fault botocore retries, on one attempt only, answered 503: {answer.raw_body}"
            assert_unavailable(answer)
            # Nothing written, or (its write landed, every answer lost) exactly what one success writes
            if phase is Phase.BEFORE or after == before:
                assert after == before, f"a 503 that wrote {sorted(changed_keys(before, after))}"
            else:
                scenario.applied_once(ctx, before, after, None)
        elif refused:
            # The known gap (LOST_ANSWER_REFUSALS): only once the write landed, and then exactly that write
            assert phase is Phase.AFTER, answer.raw_body
            assert answer.body["error"] == "invalid_grant", answer.raw_body
            scenario.applied_once(ctx, before, after, None)
        else:
            assert must != "503", f"every attempt failed, yet the answer is {answer.status}: {answer.raw_body}"
            scenario.applied_once(ctx, before, after, answer)
        # And no grant is half there, now and once the client's retry is answered
        assert_grants_whole(after)
        scenario.retry(ctx, answer, before)
        assert_grants_whole(snapshot(env.aws))
        # Last: the answer was the route's success or a 503 (a lost answer's refusal is the pinned gap)
        assert not refused, f"answered 400 once its write landed and botocore retried it: {answer.raw_body}"


# -- Tenants' limits -----------------------------------------------------------------------------------------------
#
# `PUT /v1/tenants/{tenant_id}/limits` replaces a tenant's settings in one UpdateItem of the tenant's item
# (`L#<tenant>`: SET the settings given, REMOVE those left null, ADD the version `lv`), after the gate's take of the
# caller's share (struck apart above as `TAKE`); `GET` reads them with one GetItem. The item is left out of the
# table's snapshots (a tenant's bucket moves with every request), so these cases read it themselves. What must hold,
# whatever DynamoDB does: the answer is the route's success or a 503 with Retry-After; no data item is written; and
# the tenant's limits read afterwards are all the old settings or all the new ones, never a mix, with a version that
# moved exactly when the new ones are there. A 503 before the write landed left the old ones; the client's retry
# sets the new ones.

LIMITS_TENANT = "faults-limits"
"""A tenant of no other case: its limits bound no request here."""
SETTING_NAMES = ("requests_per_minute", "burst", "storage_bytes", "checkpoints")
OLD_LIMITS = {"requests_per_minute": 600, "burst": 100, "storage_bytes": 5_000_000, "checkpoints": None}
NEW_LIMITS = {"requests_per_minute": 1200, "burst": None, "storage_bytes": None, "checkpoints": 70}
"""Two settings set anew and two removed (back to the stage's default), so that half a write would show."""
NO_LIMITS = dict.fromkeys(SETTING_NAMES)
OWN_LIMITS = {"requests_per_minute": 6_000_000, "burst": None, "storage_bytes": 4096, "checkpoints": 9}
"""The caller's own tenant's limits, as roomy as the suite's (a case after this one meets no 429)."""


@dataclass
class LimitsContext(Context):
    """A limits case's context: the tenant addressed, and its settings before and after the request applied."""

    tenant: str = LIMITS_TENANT
    old: dict[str, int | None] = field(default_factory=lambda: dict(NO_LIMITS))
    new: dict[str, int | None] = field(default_factory=lambda: dict(NO_LIMITS))


def limits_path(ctx: LimitsContext) -> str:
    return f"/v1/tenants/{ctx.tenant}/limits"


def send_put_limits(ctx: LimitsContext) -> Result:
    return ctx.api.invoke("put_limits", path=limits_path(ctx), body=ctx.new)


def send_get_limits(ctx: LimitsContext) -> Result:
    return ctx.api.invoke("get_limits", path=limits_path(ctx))


def settings_of(ctx: LimitsContext, answer: Result) -> dict[str, int | None]:
    """The settings a limits answer states, once its `effective` limits are checked against them: each setting
    where it is set, the stage's default where it is null."""
    from baton_checkpoints.api.services import default_limits
    from baton_checkpoints.domain.tenancy import Settings

    assert answer.data["tenant_id"] == ctx.tenant, answer.raw_body
    settings = {name: answer.data[name] for name in SETTING_NAMES}
    effective = Settings(**settings).over(default_limits(ctx.account.services.settings))
    assert answer.data["effective"] == asdict(effective), answer.raw_body
    return settings


def stored_limits(ctx: LimitsContext) -> tuple[dict[str, int | None], int]:
    """The tenant's settings and their version as its item holds them (read from moto, no fault)."""
    from baton_checkpoints.store.tenants import bucket_of

    found = ctx.account.aws.get_item(TableName=TABLE, Key=layout.tenant_key(ctx.tenant), ConsistentRead=True)
    bucket = bucket_of(found.get("Item") or {})
    return asdict(bucket.settings), bucket.version


def prepare_old_limits(ctx: LimitsContext) -> None:
    """The tenant's limits set once (`OLD_LIMITS`, which also reads the caller's key); the request sets
    `NEW_LIMITS`."""
    ctx.new = dict(OLD_LIMITS)
    assert send_put_limits(ctx).status == 200
    ctx.old, ctx.new = dict(OLD_LIMITS), dict(NEW_LIMITS)


def prepare_first_limits(ctx: LimitsContext) -> None:
    """A tenant whose limits were never set (it has no item at all), and the caller's key read."""
    prepare_warm_key(ctx)
    ctx.new = dict(NEW_LIMITS)


def prepare_own_limits(ctx: LimitsContext) -> None:
    """The caller's own tenant, whose item the gate's take has just written (its bucket, no settings): the write of
    its limits meets the item every request takes from."""
    ctx.tenant = TENANT
    prepare_warm_key(ctx)
    ctx.new = dict(OWN_LIMITS)


def prepare_limits_to_read(ctx: LimitsContext) -> None:
    """The tenant's limits set once; a read answers them."""
    prepare_old_limits(ctx)
    ctx.new = dict(OLD_LIMITS)


@dataclass(frozen=True)
class LimitsScenario:
    """A limits request, the DynamoDB request a fault strikes, and its route's success."""

    name: str
    step: Step
    prepare: Callable[[LimitsContext], None]
    send: Callable[[LimitsContext], Result]
    success: int = 200
    writes: bool = True
    """False for a read: the tenant's item must be as it was."""


LIMITS_SCENARIOS = (
    LimitsScenario("limits_put_first", Step("UpdateItem"), prepare_first_limits, send_put_limits),
    LimitsScenario("limits_put_replace", Step("UpdateItem"), prepare_old_limits, send_put_limits),
    LimitsScenario("limits_put_own_tenant", Step("UpdateItem"), prepare_own_limits, send_put_limits),
    LimitsScenario("limits_get", Step("GetItem"), prepare_limits_to_read, send_get_limits, writes=False),
)


def limits_fault_table() -> Iterator[Any]:
    """Each limits scenario × the faults worth injecting at its step (`faults.fault_plan`)."""
    for scenario in LIMITS_SCENARIOS:
        for kind, phase, duration in fault_plan(scenario.step.operation):
            if not KIND_BY_KIND and kind.retried_by_botocore and kind not in ONE_ATTEMPT_REPRESENTATIVES:
                continue
            yield pytest.param(
                scenario, kind, phase, duration, id=f"{scenario.name}-{kind.name}-{phase.value}-{duration.value}"
            )


@pytest.mark.parametrize(("scenario", "kind", "phase", "duration"), list(limits_fault_table()))
def test_a_fault_in_a_limits_request_answers_success_or_503_and_never_mixes_old_and_new_limits(
    env: MotoAccount, scenario: LimitsScenario, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        ctx = LimitsContext(account=env, clock=clock)
        # Given the tenant's limits as they stand (never set, set once, or the caller's own tenant's item)
        scenario.prepare(ctx)
        old_stored, old_version = stored_limits(ctx)
        assert old_stored == ctx.old, old_stored
        before = snapshot(env.aws)
        # When the request meets the fault at its step
        with injected(env.services.dynamodb) as injector:
            fault = injector.arm(Fault(scenario.step.operation, kind, phase, duration, skip=scenario.step.nth - 1))
            answer = scenario.send(ctx)
        stored, version = stored_limits(ctx)
        proof_counts.record(
            SUITE,
            cases=1,
            limits_cases=1,
            faults_injected=fault.struck,
            answered_503=int(answer.status == 503),
            succeeded=int(answer.status == scenario.success),
            limits_landed_then_503=int(answer.status == 503 and (stored, version) != (old_stored, old_version)),
        )
        assert fault.struck >= 1, f"{scenario.step.name} is not a step of {scenario.name}: {injector.attempts}"
        assert not fault.exhausted, f"the request tried {scenario.step.operation} {fault.struck} times"
        # Then the answer is the route's success (the limits it set or read), or a 503 with Retry-After
        must = expectation(kind, phase, duration)
        judge(answer, scenario.success, must)
        if answer.status != 503:
            assert settings_of(ctx, answer) == ctx.new, answer.raw_body
        # And no data item was written, and the tenant's item holds all the old settings or all the new ones, its
        # version moved exactly when the new ones are there (a version moved twice is a write applied again: the
        # same settings)
        assert snapshot(env.aws) == before, f"a limits request wrote {sorted(changed_keys(before, snapshot(env.aws)))}"
        assert stored in (ctx.old, ctx.new), f"a mix of {ctx.old} and {ctx.new}: {stored}"
        if scenario.writes and (answer.status == scenario.success or phase is Phase.AFTER):
            # Applied (a fault after landing: at least once, its answer lost)
            assert (stored, version > old_version) == (ctx.new, True), f"{stored} at version {version}"
        else:
            # A read, or a write refused before it reached the table
            assert (stored, version) == (old_stored, old_version), f"{answer.status} yet the limits moved: {stored}"
        # And the route reads them so (a consistent read), and the client's retry after a 503 is served
        read = send_get_limits(ctx)
        assert read.status == 200, read.raw_body
        assert settings_of(ctx, read) == stored
        if answer.status == 503:
            retried = scenario.send(ctx)
            assert retried.status == scenario.success, retried.raw_body
            assert settings_of(ctx, retried) == ctx.new
            assert stored_limits(ctx)[0] == ctx.new
        # And the tenant's next request is served: no limit half applied, no share refused
        assert send_get_limits(ctx).status == 200


# A take's lost answer, at the edge of a tenant's limit. The cases above give the tenant a burst no case spends, so a
# token taken twice costs them nothing; here a container's limiter holds a tenant of 30 requests at once (a share of
# 3) and spends it in one instant: every token the bucket gave must be served, a lost answer or not.

EDGE_LIMITS = (60, 30)
"""Requests a minute and burst of the tenant at its limit: a share of 3, one token a second."""


# Found by this suite: botocore's retry of a take whose answer was lost applied it again (or, on a full bucket, the
# refused retry was taken for another container's take, and the container took once more). A take now carries a
# token of its own (`store/tenants.py: TenantStore.take`).
@pytest.mark.parametrize("bucket", ["full", "partly_spent"])
def test_a_take_whose_answer_was_lost_costs_the_tenant_no_request(env: MotoAccount, bucket: str) -> None:
    from baton_checkpoints.api.ratelimit import RateLimiter
    from baton_checkpoints.domain.errors import RateLimited
    from baton_checkpoints.domain.tenancy import Limits
    from baton_checkpoints.store.tenants import TenantStore

    rpm, burst = EDGE_LIMITS
    limits = Limits(requests_per_minute=rpm, burst=burst, storage_bytes=0, checkpoints=0)
    # Given a container (the handler's client, which the fault strikes) serving a tenant of 30 requests at once
    limiter = RateLimiter(TenantStore(env.services.dynamodb, TABLE), limits, clock=lambda: START_MS * 1000)
    tenant = f"faults-edge-{bucket.replace('_', '-')}"
    served = 0
    if bucket == "partly_spent":
        # (its first share taken and spent: the next take adds to the bucket's time, `tat + :add`)
        for _ in range(limits.share):
            limiter.admit(tenant)
            served += 1
    # When its next take lands and the answer is lost once (botocore sends the same request again)
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault(TAKE, READ_TIMEOUT, Phase.AFTER, Duration.ONCE))
        limiter.admit(tenant)
        served += 1
    assert fault.struck == 1, injector.attempts
    # And the tenant goes on at the same instant until refused
    refused = None
    while refused is None and served <= burst:
        try:
            limiter.admit(tenant)
            served += 1
        except RateLimited as limited:
            refused = limited
    proof_counts.record(SUITE, cases=1, take_cases=1, faults_injected=fault.struck, take_tokens_lost=burst - served)
    # Then it was served its whole burst before its first 429: the take the lost answer hid was not taken again
    assert refused is not None
    assert served == burst, f"served {served} of a burst of {burst}: {burst - served} tokens taken twice"


# -- Usage -----------------------------------------------------------------------------------------------------------
#
# `GET /v1/usage` reads the tenant's partition with one Query; a container adds what it counted of a tenant to the
# day's item (`L#<tenant>` / `U#<day>`) with one UpdateItem at the end of a request that finds the counts due (here:
# every request's). What must hold, whatever DynamoDB does: the read answers its figures or a 503 and writes nothing;
# a fault in the counts' write never changes the answer of the request it ends, and the counts land once, then or
# with the next write. A write that landed while every answer was lost is the one way a count doubles (documented).


def usage_day_requests(env: MotoAccount) -> int:
    """The `keys` requests the day's item of the caller's tenant holds (read from moto, no fault)."""
    from baton_checkpoints.domain.usage import day_of

    key = layout.usage_day_key(TENANT, day_of(clock_now_ms()))
    found = env.aws.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item") or {}
    return int(found.get("r_keys", {}).get("N", "0"))


def usage_fault_table(operation: str) -> Iterator[Any]:
    for kind, phase, duration in fault_plan(operation):
        if not KIND_BY_KIND and kind.retried_by_botocore and kind not in ONE_ATTEMPT_REPRESENTATIVES:
            continue
        yield pytest.param(kind, phase, duration, id=f"{operation}-{kind.name}-{phase.value}-{duration.value}")


@pytest.mark.parametrize(
    ("operation", "kind", "phase", "duration"),
    [
        pytest.param(operation, *fault.values, id=fault.id)
        for operation in ("GetItem", "Query")  # the tenant's own item, then its days in the range
        for fault in usage_fault_table(operation)
    ],
)
def test_a_fault_in_a_usage_read_answers_its_figures_or_503_and_writes_nothing(
    env: MotoAccount, operation: str, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    ctx = Context(account=env, clock=None)  # type: ignore[arg-type]
    prepare_warm_key(ctx)
    before = snapshot(env.aws)
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault(operation, kind, phase, duration))
        answer = ctx.api.invoke("get_usage", query={})
    proof_counts.record(SUITE, cases=1, usage_cases=1, faults_injected=fault.struck)
    assert fault.struck >= 1, injector.attempts
    judge(answer, 200, expectation(kind, phase, duration))
    if answer.status == 200:
        assert answer.data["tenant_id"] == TENANT
        assert len(answer.data["days"]) == 30
    assert snapshot(env.aws) == before
    if answer.status == 503:
        assert ctx.api.invoke("get_usage", query={}).status == 200


@pytest.mark.parametrize(("kind", "phase", "duration"), list(usage_fault_table("UpdateItem")))
def test_a_fault_in_writing_usage_counts_never_changes_an_answer_and_the_counts_land_once(
    env: MotoAccount, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    from baton_checkpoints.store.usage import UsageMeter

    ctx = Context(account=env, clock=None)  # type: ignore[arg-type]
    prepare_warm_key(ctx)  # (the caller's key read and its tenant's share taken: a whoami then writes nothing else)
    services = env.services
    kept = services.usage
    moment = [0.0]
    object.__setattr__(services, "usage", UsageMeter(services.dynamodb, TABLE, 1, 0, clock=lambda: moment[0]))
    try:
        before = usage_day_requests(env)
        # When the write of a request's counts meets the fault
        with injected(services.dynamodb) as injector:
            fault = injector.arm(Fault("UpdateItem", kind, phase, duration))
            answer = ctx.api.invoke("whoami")
        # Then the request is answered as if nothing happened
        assert fault.struck >= 1, injector.attempts
        assert answer.status == 200, answer.raw_body
        # And its counts are there once, now or with the next request's (a failed write waits a second)
        moment[0] += 1.0
        assert ctx.api.invoke("whoami").status == 200
        landed = usage_day_requests(env) - before
    finally:
        object.__setattr__(services, "usage", kept)
    doubled = phase is Phase.AFTER and duration is Duration.EVERY
    proof_counts.record(SUITE, cases=1, usage_cases=1, faults_injected=fault.struck, usage_doubled=int(landed == 3))
    assert landed in ((2, 3) if doubled else (2,)), f"{landed} requests counted for 2"


# -- The audit trail ---------------------------------------------------------------------------------------------------
#
# `GET /v1/audit` reads the tenant's head (GetItem) and a page of its events (Query). An action appends its event after
# it took place: a read of the newest event, the next one put where nothing is, and the head moved up to it. What must
# hold, whatever DynamoDB does: the read answers its events or a 503 and writes nothing; the action's own answer is
# its success whatever befalls its event, and the chain stays whole: the event is there once, or, when every attempt
# failed before landing, not at all (an ERROR line carries it).


def audit_events(ctx: Context) -> list[dict[str, Any]]:
    """Every event of the caller's tenant (no fault is armed while this reads)."""
    answer = ctx.api.invoke("get_audit", query={"limit": "100"})
    assert answer.status == 200, answer.raw_body
    from baton_checkpoints.client.audit import problems_of

    assert problems_of(answer.data, answer.body["meta"]["head"]) == [], answer.raw_body
    events: list[dict[str, Any]] = answer.data
    return events


@pytest.mark.parametrize(
    ("operation", "kind", "phase", "duration"),
    [
        pytest.param(operation, *fault.values, id=fault.id)
        for operation in ("GetItem", "Query")
        for fault in usage_fault_table(operation)
    ],
)
def test_a_fault_in_an_audit_read_answers_its_events_or_503_and_writes_nothing(
    env: MotoAccount, operation: str, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    ctx = Context(account=env, clock=None)  # type: ignore[arg-type]
    assert ctx.api.invoke("create_key").status == 201  # (one event: key.issued; the caller's key is read)
    before = snapshot(env.aws)
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault(operation, kind, phase, duration))
        answer = ctx.api.invoke("get_audit", query={})
    proof_counts.record(SUITE, cases=1, audit_cases=1, faults_injected=fault.struck)
    assert fault.struck >= 1, injector.attempts
    judge(answer, 200, expectation(kind, phase, duration))
    if answer.status == 200:
        assert [e["action"] for e in answer.data] == ["key.issued"]
    assert snapshot(env.aws) == before
    if answer.status == 503:
        assert [e["action"] for e in audit_events(ctx)] == ["key.issued"]


@pytest.mark.parametrize(("kind", "phase", "duration"), list(usage_fault_table("PutItem")))
def test_a_fault_in_appending_an_audit_event_never_changes_the_actions_answer_nor_forks_the_chain(
    env: MotoAccount, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    ctx = Context(account=env, clock=None)  # type: ignore[arg-type]
    # Given a key issued (its event the trail's first)
    created = ctx.api.invoke("create_key")
    assert created.status == 201, created.raw_body
    key_id = created.data["key_id"]
    # When its revocation's event meets the fault (the revoke itself is an UpdateItem: untouched)
    with injected(env.services.dynamodb) as injector:
        fault = injector.arm(Fault("PutItem", kind, phase, duration))
        answer = ctx.api.invoke("revoke_key", path=f"/v1/keys/{key_id}", query={})
    # Then the revocation is answered as done, and is done
    assert fault.struck >= 1, injector.attempts
    assert answer.status == 200, answer.raw_body
    assert ctx.api.invoke("revoke_key", path=f"/v1/keys/{key_id}", query={}).status == 404
    # And the chain is whole, with the event once, or (every attempt refused before landing) not at all
    actions = [e["action"] for e in audit_events(ctx)]
    lost = phase is Phase.BEFORE and duration is Duration.EVERY
    assert actions in ((["key.issued"], ["key.revoked", "key.issued"]) if lost else (["key.revoked", "key.issued"],))
    proof_counts.record(
        SUITE, cases=1, audit_cases=1, faults_injected=fault.struck, audit_events_unrecorded=int(len(actions) == 1)
    )


@pytest.mark.parametrize(
    ("idempotent", "kind", "phase", "duration"),
    [
        pytest.param(idempotent, *fault.values, id=fault.id)
        for idempotent, operation in ((False, "UpdateItem"), (True, TRANSACTION))
        for fault in usage_fault_table(operation)
    ],
)
def test_a_lease_take_over_whose_write_meets_a_fault_is_audited_once_it_is_granted(
    env: MotoAccount, idempotent: bool, kind: FaultKind, phase: Phase, duration: Duration
) -> None:
    ctx = Context(account=env)
    with time_machine.travel(START, tick=False) as clock:
        # Given a checkpoint whose lease another holder let lapse without releasing it
        prepare_checkpoint(ctx)
        lease_path = f"/v1/checkpoints/{ctx.checkpoint_id}/lease"
        first = ctx.api.invoke("acquire_lease", path=lease_path, body={"holder": "first-holder", "ttl_seconds": 10})
        assert first.status == 201, first.raw_body
        clock.shift(timedelta(seconds=11))
        # When HOLDER takes it over, and the take-over's write meets the fault: a plain acquire's second UpdateItem
        # (its first, refused, found the lapsed lease), an idempotent acquire's transaction
        with injected(env.services.dynamodb) as injector:
            if idempotent:
                fault = injector.arm(Fault(TRANSACTION, kind, phase, duration))
                answer = send_idempotent_acquire(ctx)
            else:
                fault = injector.arm(Fault("UpdateItem", kind, phase, duration, skip=1))
                answer = send_acquire(ctx)
    proof_counts.record(SUITE, cases=1, audit_cases=1, faults_injected=fault.struck)
    assert fault.struck >= 1, injector.attempts
    judge(answer, 201, expectation(kind, phase, duration))
    lease = snapshot(env.aws)[CHECKPOINT_KEY]["lease"]
    taken = [e for e in audit_events(ctx) if e["action"] == "lease.taken_over"]
    if answer.status == 201:
        # Then a grant, even one whose answer was lost, is HOLDER's lease 2, and its event names the holder it replaced
        assert (lease.holder, lease.counter) == (HOLDER, 2)
        assert answer.data["lease_token"] == lease.token
        expected = {"holder": HOLDER, "previous_holder": "first-holder", "lease_counter": 2}
        assert [e["details"] for e in taken] == [expected]
    else:
        # Or a 503 that took nothing over, and recorded nothing
        assert (lease.holder, lease.counter) == ("first-holder", 1)
        assert taken == []
