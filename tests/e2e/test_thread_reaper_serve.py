"""`baton serve` with its reaper keeps LangGraph threads tidy, over real HTTP: a thread's spilled value and pending
write are retagged attached, and once the thread is deleted every item of its partition and both objects disappear.

A server of this module's own (its own table and bucket on the session's moto server): the session's `baton` runs
without a reaper.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from baton_checkpoints.store import layout, schema
from tests.e2e.server_process import BatonServe, serve_table
from tests.proof_counts import record

SUITE = "thread reaper serve (e2e)"
TENANT, AGENT = "dev", "operator"
WAIT_SECONDS = 60.0
"""How long the test waits for the reaper: it polls the stream every half second and a delete makes a few rounds of
records, a few seconds on an idle machine (the case records how long it took); the bound is a loaded runner's."""
BIG = 400_000
"""Random bytes do not pack: a value of this size passes 350,000 stored bytes and spills to the bucket."""


@pytest.fixture(scope="module")
def served(moto_endpoint: str) -> Iterator[tuple[BatonServe, httpx.Client, str]]:
    """(the reaping server, an authenticated client, its table and bucket name)."""
    name = f"baton-e2e-thread-reaper-{uuid.uuid4().hex[:8]}"
    server = serve_table(moto_endpoint, name)
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
    yield server, client, name
    client.close()
    server.stop()


@pytest.fixture(scope="module")
def s3(moto_endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")


def typed(raw: bytes) -> dict[str, str]:
    return {"type": "bytes", "data": base64.b64encode(raw).decode("ascii")}


def partition(table: Any, name: str, thread_id: str) -> list[dict[str, Any]]:
    found = table.query(
        TableName=name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": layout.thread_pk(TENANT, AGENT, thread_id)}},
        ConsistentRead=True,
    )
    return list(found["Items"])


def tag_of(s3: Any, bucket: str, key: str) -> str | None:
    """The object's state tag, or None when the object is gone."""
    try:
        tags = s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    except Exception as exc:
        if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), "untagged")


def eventually(condition: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < WAIT_SECONDS, f"not within {WAIT_SECONDS} s: {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def test_a_deleted_threads_items_and_spilled_objects_disappear(
    served: tuple[BatonServe, httpx.Client, str], table: Any, s3: Any
) -> None:
    _, http, name = served
    thread_id = f"e2e-thread-{uuid.uuid4().hex}"
    # Given a thread whose checkpoint has a value too large for an item and a pending write too large as well
    put = http.post(
        f"/v1/threads/{thread_id}/checkpoints",
        json={
            "checkpoint": {"id": "c1", "channel_versions": {"big": 1, "small": 1}},
            "metadata": {"step": 1},
            "values": {"big": typed(os.urandom(BIG)), "small": typed(b"s")},
        },
    )
    assert put.status_code == 201, put.text
    writes = http.post(
        f"/v1/threads/{thread_id}/writes",
        json={"checkpoint_id": "c1", "task_id": "task-1", "writes": [{"channel": "big", **typed(os.urandom(BIG))}]},
    )
    assert writes.status_code == 200, writes.text
    spilled = {str(item["so"]["S"]) for item in partition(table, name, thread_id) if "so" in item}
    assert len(spilled) == 2
    # Then the reaper retags both objects attached (they were written pending)
    eventually(lambda: {tag_of(s3, name, key) for key in spilled} == {schema.ATTACHED_TAG[1]}, "objects attached")
    # When the thread is deleted
    deleted = http.delete(f"/v1/threads/{thread_id}")
    assert deleted.status_code == 200, deleted.text
    assert http.get(f"/v1/threads/{thread_id}/checkpoint").status_code == 404
    # Then nothing of its partition is left but its head (saying when it was deleted) and its checkpoint's tombstone
    # (its key, when, a TTL: it refuses late writes), and both objects are gone from the bucket
    took = eventually(
        lambda: (
            [set(item) for item in partition(table, name, thread_id) if item["sk"]["S"] != "H"]
            == [{"pk", "sk", "dead", "ttl"}]
            and {tag_of(s3, name, key) for key in spilled} == {None}
        ),
        "the thread's items and objects deleted",
    )
    late = http.post(
        f"/v1/threads/{thread_id}/writes",
        json={"checkpoint_id": "c1", "task_id": "task-2", "writes": [{"channel": "big", **typed(b"late")}]},
    )
    assert late.status_code == 404, late.text
    record(SUITE, cases=1, requests=4, reaped_after_ms=int(took * 1000))
