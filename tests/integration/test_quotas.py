"""Tenants' quotas through the api handler: a write that would pass `storage_bytes` or `checkpoints` is refused with
403 `QUOTA_EXCEEDED` and writes nothing; reads, deletes and updates that create nothing go on; an idempotent retry
replays its first answer. The usage a container judges by is what the stream consumer counted on the tenant's item
(`store/metering.py`, tested with the reaper); here it is put there directly, and each container learns it from its
next take (`RateLimiter.forget` makes that now)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import layout, metering
from tests import proof_counts
from tests.builders import KIND, save, thread_put_body
from tests.integration.conftest import put_key, table_items
from tests.integration.driver import ApiDriver, Result

SUITE = "quotas"


def tenant_key(services: Services, tenant: str) -> ApiDriver:
    """A `*` key of `tenant` (its agent `worker`)."""
    secret = f"btn_quota_{tenant}_secret_001"
    put_key(services, secret, tenant, "worker", {"*"}, "key_" + hashlib.sha256(tenant.encode()).hexdigest()[:32])
    return ApiDriver(secret)


def set_quota(api: ApiDriver, services: Services, tenant: str, *, used_bytes: int, used: int, **limits: int) -> None:
    """Give `tenant` these quotas, and this usage as the stream consumer would have counted it."""
    answer = api.invoke("put_limits", path=f"/v1/tenants/{tenant}/limits", body=limits)
    assert answer.status == 200, answer.raw_body
    services.dynamodb.update_item(
        TableName=services.settings.table_name,
        Key=layout.tenant_key(tenant),
        UpdateExpression="SET #b = :b, #c = :c, #t = :t",
        ExpressionAttributeNames={"#b": metering.STORED_BYTES, "#c": metering.CHECKPOINTS, "#t": metering.THREADS},
        ExpressionAttributeValues={":b": {"N": str(used_bytes)}, ":c": {"N": str(used)}, ":t": {"N": "0"}},
    )
    services.limiter.forget(tenant)


def refused_for(answer: Result, quota: str, limit: int, used: int) -> None:
    assert answer.status == 403, answer.raw_body
    assert answer.error["code"] == "QUOTA_EXCEEDED"
    assert answer.error["details"] == {"quota": quota, "limit": limit, "used": used}
    assert quota in answer.error["message"]


def data_of(services: Services, tenant: str) -> list[dict[str, Any]]:
    """The tenant's items but its own (`L#`): what its writes leave."""
    return [
        item
        for item in table_items(services.dynamodb)
        if metering.tenant_of(item["pk"]["S"]) == tenant or item["pk"]["S"].startswith(f"D#{tenant}#")
    ]


def test_a_save_past_the_storage_quota_is_refused_and_a_read_and_a_delete_are_not(
    api: ApiDriver, services: Services
) -> None:
    worker = tenant_key(services, "bytes-a")
    kept = save(worker, subject_id="kept", state={"step": 1})
    assert kept.status == 201
    # Given a tenant 100 bytes short of its storage quota
    set_quota(api, services, "bytes-a", used_bytes=999_900, used=1, storage_bytes=1_000_000)
    before = data_of(services, "bytes-a")
    # When it saves a state larger than that, new or over its checkpoint, with or without an Idempotency-Key
    big = {"text": "x" * 200}
    for answer in (
        save(worker, subject_id="new", state=big),
        save(worker, subject_id="kept", state=big),
        save(worker, "key-1", subject_id="new", state=big),
    ):
        # Then each is refused, naming the quota and the usage, and nothing is written
        refused_for(answer, "storage_bytes", 1_000_000, 999_900)
    assert data_of(services, "bytes-a") == before
    # And a small save still fits, a read is served, and a delete is never refused
    assert save(worker, subject_id="kept", state={"step": 2}).status == 200
    assert worker.invoke("get_checkpoint", path=f"/v1/checkpoints/{kept.data['checkpoint_id']}").status == 200
    deleted = worker.invoke(
        "delete_checkpoint", path=f"/v1/checkpoints/{kept.data['checkpoint_id']}", headers={"if-match": None}
    )
    assert deleted.status == 200, deleted.raw_body
    proof_counts.record(SUITE, refusals=3)


def test_at_the_checkpoints_quota_a_save_may_update_but_never_create(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "count-b")
    first = save(worker, subject_id="first", state={"step": 1})
    assert first.status == 201
    # Given a tenant at its quota of live checkpoints
    set_quota(api, services, "count-b", used_bytes=0, used=1, checkpoints=1)
    before = data_of(services, "count-b")
    # When it saves a checkpoint it does not have (plain, conditional on none, with an Idempotency-Key)
    for answer in (
        save(worker, subject_id="second", state={"step": 1}),
        save(worker, subject_id="second", state={"step": 1}, expected_revision=0),
        save(worker, "key-2", subject_id="second", state={"step": 1}),
    ):
        # Then it is refused, and nothing is written
        refused_for(answer, "checkpoints", 1, 1)
    assert data_of(services, "count-b") == before
    # And the checkpoint it has is updated as before, and asking to create it again is still a conflict, not a quota
    assert save(worker, subject_id="first", state={"step": 2}).status == 200
    assert save(worker, "key-3", subject_id="first", state={"step": 3}).status == 200
    conflict = save(worker, subject_id="first", state={"step": 4}, expected_revision=0)
    assert conflict.status == 409, conflict.raw_body
    # And once the tenant deletes one, it may create one again (as soon as its usage says so)
    path = f"/v1/checkpoints/{first.data['checkpoint_id']}"
    assert worker.invoke("delete_checkpoint", path=path, headers={"if-match": None}).status == 200
    set_quota(api, services, "count-b", used_bytes=0, used=0, checkpoints=1)
    assert save(worker, subject_id="second", state={"step": 1}).status == 201
    proof_counts.record(SUITE, refusals=3)


def test_an_idempotent_retry_replays_its_first_answer_past_the_quota(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "replay-c")
    first = save(worker, "key-4", subject_id="replayed", state={"text": "y" * 300})
    assert first.status == 201
    declared = worker.invoke(
        "create_blob",
        body={"sha256": hashlib.sha256(b"z" * 500).hexdigest(), "size": 500, "media_type": "text/plain"},
        headers={"idempotency-key": "blob-key-1"},
    )
    assert declared.status == 201, declared.raw_body
    # Given the tenant has since reached both quotas
    set_quota(api, services, "replay-c", used_bytes=10_000, used=5, storage_bytes=10_000, checkpoints=5)
    # When the save and the declaration are retried with their keys, then each replays its first answer
    again = save(worker, "key-4", subject_id="replayed", state={"text": "y" * 300})
    assert (again.status, again.header("Idempotent-Replayed")) == (201, "true")
    assert again.data == first.data
    blob_again = worker.invoke(
        "create_blob",
        body={"sha256": hashlib.sha256(b"z" * 500).hexdigest(), "size": 500, "media_type": "text/plain"},
        headers={"idempotency-key": "blob-key-1"},
    )
    assert (blob_again.status, blob_again.header("Idempotent-Replayed")) == (201, "true")
    assert blob_again.data["blob_id"] == declared.data["blob_id"]
    # And a new declaration is refused, with or without a key, writing nothing
    before = data_of(services, "replay-c")
    for key in (None, "blob-key-2"):
        refused = worker.invoke(
            "create_blob",
            body={"sha256": hashlib.sha256(b"w" * 50).hexdigest(), "size": 50, "media_type": "text/plain"},
            headers={"idempotency-key": key},
        )
        refused_for(refused, "storage_bytes", 10_000, 10_000)
    assert data_of(services, "replay-c") == before
    proof_counts.record(SUITE, replays=2, refusals=2)


def test_a_restore_past_the_storage_quota_is_refused(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "restore-d")
    first = save(worker, subject_id="restored", state={"text": "r" * 400}, keep_revisions=2)
    assert first.status == 201
    assert save(worker, subject_id="restored", state={"step": 2}).status == 200
    set_quota(api, services, "restore-d", used_bytes=5_000, used=1, storage_bytes=5_100)
    before = data_of(services, "restore-d")
    restored = worker.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{first.data['checkpoint_id']}/restore",
        body={"revision": 1},
    )
    refused_for(restored, "storage_bytes", 5_100, 5_000)
    assert data_of(services, "restore-d") == before


def thread_put(worker: ApiDriver, thread: str, checkpoint_id: str, value: bytes) -> Result:
    return worker.invoke(
        "save_checkpoint",
        path=f"/v1/threads/{thread}/checkpoints",
        body=thread_put_body(checkpoint_id, value),
        headers={"idempotency-key": None},
    )


def copy(worker: ApiDriver, thread: str, target: str) -> Result:
    return worker.invoke(
        "save_checkpoint",
        path=f"/v1/threads/{thread}/copy",
        body={"target_thread_id": target},
        headers={"idempotency-key": None},
    )


def test_threads_count_and_store_against_the_quotas(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "threads-e")
    assert thread_put(worker, "thread-1", "1ef0000000000001", b"a").status == 201
    # Given the tenant at its count quota: a put to its thread goes on, a put that starts a thread is refused
    set_quota(api, services, "threads-e", used_bytes=0, used=1, checkpoints=1)
    before = data_of(services, "threads-e")
    refused_for(thread_put(worker, "thread-2", "1ef0000000000002", b"b"), "checkpoints", 1, 1)
    refused_for(copy(worker, "thread-1", "thread-3"), "checkpoints", 1, 1)
    assert data_of(services, "threads-e") == before
    assert copy(worker, "thread-1", "thread-1").status == 200  # onto itself: nothing created, nothing stored
    assert thread_put(worker, "thread-1", "1ef0000000000003", b"c").status == 201
    # Given the tenant near its storage quota: a put or a task's writes larger than what is left are refused
    set_quota(api, services, "threads-e", used_bytes=900, used=1, storage_bytes=1_000)
    before = data_of(services, "threads-e")
    refused_for(thread_put(worker, "thread-1", "1ef0000000000004", b"d" * 200), "storage_bytes", 1_000, 900)
    writes = worker.invoke(
        "save_checkpoint",
        path="/v1/threads/thread-1/writes",
        body={
            "checkpoint_id": "1ef0000000000003",
            "checkpoint_ns": "",
            "task_id": "task-1",
            "task_path": "",
            "writes": [{"channel": "messages", "type": "msgpack", "data": base64.b64encode(b"e" * 200).decode()}],
        },
        headers={"idempotency-key": None},
    )
    refused_for(writes, "storage_bytes", 1_000, 900)
    refused_for(copy(worker, "thread-1", "thread-4"), "storage_bytes", 1_000, 900)
    assert data_of(services, "threads-e") == before
    # And deleting the thread is never refused
    deleted = worker.invoke("purge_subject", path="/v1/threads/thread-1", query={})
    assert (deleted.status, deleted.data["deleted"]) == (200, True), deleted.raw_body
    proof_counts.record(SUITE, refusals=5)


def test_a_deleted_thread_started_again_counts_again_and_is_refused_at_the_quota(
    api: ApiDriver, services: Services
) -> None:
    worker = tenant_key(services, "reuse-g")
    assert thread_put(worker, "thread-r", "1ef0000000000001", b"a").status == 201
    assert worker.invoke("purge_subject", path="/v1/threads/thread-r", query={}).status == 200
    head = services.dynamodb.get_item(
        TableName=services.settings.table_name, Key=layout.key(layout.thread_pk("reuse-g", "worker", "thread-r"), "H")
    )["Item"]
    assert metering.footprint(head["pk"]["S"], "H", head).threads == 0  # deleted: it no longer counts
    # Given the tenant at its count quota, a put that would start the deleted thread again is refused
    set_quota(api, services, "reuse-g", used_bytes=0, used=1, checkpoints=1)
    refused_for(thread_put(worker, "thread-r", "1ef0000000000002", b"b"), "checkpoints", 1, 1)
    # And with room, the put starts it again, and its head counts again
    set_quota(api, services, "reuse-g", used_bytes=0, used=0, checkpoints=1)
    assert thread_put(worker, "thread-r", "1ef0000000000003", b"c").status == 201
    head = services.dynamodb.get_item(
        TableName=services.settings.table_name, Key=layout.key(layout.thread_pk("reuse-g", "worker", "thread-r"), "H")
    )["Item"]
    assert metering.footprint(head["pk"]["S"], "H", head).threads == 1


def test_a_copy_is_judged_with_the_objects_it_copies(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "copy-h")
    # Given a thread whose value is stored in S3 (past 350,000 bytes), and a tenant with 100 KB left
    assert thread_put(worker, "thread-c", "1ef0000000000001", b"v" * 400_000).status == 201
    set_quota(api, services, "copy-h", used_bytes=0, used=1, storage_bytes=100_000)
    before = data_of(services, "copy-h")
    # When it copies the thread, then the copy is refused: its items are small, the object it copies is not
    refused_for(copy(worker, "thread-c", "thread-d"), "storage_bytes", 100_000, 0)
    assert data_of(services, "copy-h") == before


def test_the_mcp_save_tool_is_refused_as_the_route_is(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "tool-f")
    set_quota(api, services, "tool-f", used_bytes=0, used=0, checkpoints=0)
    answer = worker.invoke(
        "mcp_tools_call",
        body={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "baton_checkpoint_save",
                "arguments": {"subject_id": "by-tool", "kind": KIND, "state": {"step": 1}},
            },
        },
    )
    assert answer.status == 200, answer.raw_body
    result = answer.body["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "QUOTA_EXCEEDED"
    assert result["structuredContent"]["details"] == {"quota": "checkpoints", "limit": 0, "used": 0}


@pytest.mark.parametrize("quota", ["storage_bytes", "checkpoints"])
def test_a_zero_quota_refuses_every_write_that_stores_and_nothing_else(
    api: ApiDriver, services: Services, quota: str
) -> None:
    tenant = f"zero-{quota.replace('_', '-')}"
    worker = tenant_key(services, tenant)
    set_quota(api, services, tenant, used_bytes=0, used=0, **{quota: 0})
    assert save(worker, subject_id="any", state={"step": 1}).status == 403
    assert worker.invoke("whoami").status == 200
    listed = worker.invoke("list_subject_checkpoints", path="/v1/subjects/any/checkpoints", query={})
    assert listed.status == 200, listed.raw_body
