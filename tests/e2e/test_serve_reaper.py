"""`baton serve` runs the reaper on its table's stream, as the deployed stack does: over real HTTP, a history save's
revision below the window, a spilled state a save replaced and a deleted checkpoint's revisions disappear within a
few seconds; `--no-reaper` leaves all of them; a table without a stream is served without the reaper.

Each case runs on two servers of this module's own, on the session's moto server, each with its own table and
bucket: one reaping, one started with `--no-reaper`. The same requests go to both, the reaping one is waited for,
and then the other is looked at: what the reaper removed is still there without it, so the removal was the
reaper's and not the save's.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from baton_checkpoints.store import layout, schema
from tests.e2e.server_process import serve_table
from tests.proof_counts import record

SUITE = "serve reaper (e2e)"
TENANT = "dev"
KIND = "task_state"
WAIT_SECONDS = 60.0
"""How long the test waits for the reaper to act on a write: it polls the stream every half second, so it acts within
a second or two on an idle machine (each case records how long it took); the bound is a loaded runner's."""
LEFT_ALONE_SECONDS = 1.0
"""How much longer the server without a reaper is watched after the reaping one has acted."""


class Served:
    """One `baton serve` of this module: its process, table and bucket, and an authenticated HTTP client."""

    def __init__(self, moto_endpoint: str, name: str, *options: str) -> None:
        self.table_name = self.bucket = name
        self.server = serve_table(moto_endpoint, name, *options)
        self.http = httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {self.server.key}"}, timeout=30
        )

    def save(self, subject_id: str, state: dict[str, Any], **fields: Any) -> dict[str, Any]:
        answer = self.http.post(
            "/v1/checkpoints", json={"subject_id": subject_id, "kind": KIND, "state": state, **fields}
        )
        assert answer.status_code in (200, 201), answer.text
        data: dict[str, Any] = answer.json()["data"]
        return data

    def close(self) -> int:
        """Stop the server (Ctrl-C); its exit status, once all it printed has been read."""
        self.http.close()
        return self.server.stop()


@pytest.fixture(scope="module")
def servers(moto_endpoint: str) -> Iterator[tuple[Served, Served]]:
    """(the reaping server, the one started with `--no-reaper`)."""
    run = uuid.uuid4().hex[:8]
    reaping = Served(moto_endpoint, f"baton-e2e-reaper-{run}")
    idle = Served(moto_endpoint, f"baton-e2e-no-reaper-{run}", "--no-reaper")
    yield reaping, idle
    idle.close()
    reaping.close()


@pytest.fixture(scope="module")
def s3(moto_endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")


def new_subject() -> str:
    return f"e2e-reaper-{uuid.uuid4().hex}"


def partition(table: Any, served: Served, subject_id: str) -> list[str]:
    """The sort keys of the subject's partition (its checkpoint and kept revisions), read from moto directly."""
    found = table.query(
        TableName=served.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": layout.checkpoint_pk(TENANT, subject_id)}},
        ConsistentRead=True,
    )
    return sorted(str(item["sk"]["S"]) for item in found["Items"])


def kept_numbers(table: Any, served: Served, subject_id: str) -> list[int]:
    """The numbers of the subject's stored revisions (readable through the API or not)."""
    keys = partition(table, served, subject_id)
    return [int(sk.rpartition("#")[2]) for sk in keys if sk.startswith(layout.REVISION)]


def object_exists(s3: Any, served: Served, key: str) -> bool:
    try:
        s3.head_object(Bucket=served.bucket, Key=key)
    except Exception as exc:
        if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def eventually(condition: Callable[[], bool], what: str) -> float:
    """Wait (bounded) until `condition` holds; the seconds it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < WAIT_SECONDS, f"not within {WAIT_SECONDS} s: {what}"
        time.sleep(0.1)
    return time.monotonic() - started


def stays(condition: Callable[[], bool], what: str) -> None:
    """`condition` holds now and for `LEFT_ALONE_SECONDS` more."""
    deadline = time.monotonic() + LEFT_ALONE_SECONDS
    while time.monotonic() < deadline:
        assert condition(), what
        time.sleep(0.1)
    assert condition(), what


def test_the_banners_say_whether_the_reaper_runs(servers: tuple[Served, Served]) -> None:
    reaping, idle = servers
    assert any(line.startswith("Reaper: on") for line in reaping.server.lines), reaping.server.lines[:10]
    assert any(line.startswith("Reaper: off (--no-reaper)") for line in idle.server.lines), idle.server.lines[:10]


def test_a_history_saves_revision_below_the_window_disappears_from_the_table(
    servers: tuple[Served, Served], table: Any
) -> None:
    # Given four saves keeping two revisions, on each server: revision 1 fell below the window
    subjects = {}
    for served in servers:
        subject = subjects[served.table_name] = new_subject()
        for step in range(1, 5):
            served.save(subject, {"step": step}, **({"keep_revisions": 2} if step == 1 else {}))
    reaping, idle = servers
    # Then the reaper deletes revision 1; revisions 2 and 3 stay
    took = eventually(lambda: kept_numbers(table, reaping, subjects[reaping.table_name]) == [2, 3], "V#1 pruned")
    # And without the reaper, revision 1 stays stored (though no read shows it any more)
    stays(lambda: kept_numbers(table, idle, subjects[idle.table_name]) == [1, 2, 3], "V#1 kept without a reaper")
    # And through the API both show the same window
    for served in servers:
        found = served.http.get("/v1/checkpoints", params={"subject_id": subjects[served.table_name], "kind": KIND})
        answer = served.http.get(f"/v1/checkpoints/{found.json()['data']['checkpoint_id']}/revisions")
        assert [summary["revision"] for summary in answer.json()["data"]] == [3, 2], answer.text
    record(SUITE, cases=1, requests=12, reaped_after_ms=int(took * 1000))


def stored_state_object(table: Any, served: Served, subject_id: str) -> str:
    """The key of the checkpoint's spilled state (`so`), read from the table."""
    item = table.get_item(
        TableName=served.table_name,
        Key=layout.key(layout.checkpoint_pk(TENANT, subject_id), layout.checkpoint_sk("operator", KIND)),
        ConsistentRead=True,
    )["Item"]
    return str(item["so"]["S"])


def tag_of(s3: Any, served: Served, key: str) -> str | None:
    tags = s3.get_object_tagging(Bucket=served.bucket, Key=key)["TagSet"]
    return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), None)


def test_a_spilled_state_replaced_by_a_save_disappears_from_the_bucket(
    servers: tuple[Served, Served], table: Any, s3: Any
) -> None:
    reaping, idle = servers
    # Given on each server a state of ~40 KB of random hex (over 16 KB stored: spilled to the bucket)
    subjects, spilled = {}, {}
    for served in servers:
        subject = subjects[served.table_name] = new_subject()
        served.save(subject, {"log": secrets.token_hex(20_000)})
        spilled[served.table_name] = stored_state_object(table, served, subject)
        assert object_exists(s3, served, spilled[served.table_name])
    # Then the reaper retags it attached (it was written pending)
    eventually(lambda: tag_of(s3, reaping, spilled[reaping.table_name]) == schema.ATTACHED_TAG[1], "retagged")
    # When a save replaces it with a small state
    for served in servers:
        served.save(subjects[served.table_name], {"step": 2})
    # Then the reaper deletes the replaced object
    took = eventually(lambda: not object_exists(s3, reaping, spilled[reaping.table_name]), "state object deleted")
    # And without the reaper it stays, still tagged pending
    stays(lambda: object_exists(s3, idle, spilled[idle.table_name]), "state object kept without a reaper")
    assert tag_of(s3, idle, spilled[idle.table_name]) == schema.PENDING_TAG[1]
    record(SUITE, cases=1, requests=4, reaped_after_ms=int(took * 1000))


def test_a_deleted_checkpoints_revisions_disappear(servers: tuple[Served, Served], table: Any) -> None:
    reaping, idle = servers
    # Given on each server a checkpoint with two kept revisions, deleted
    subjects = {}
    for served in servers:
        subject = subjects[served.table_name] = new_subject()
        checkpoint_id = ""
        for step in range(1, 4):
            checkpoint_id = served.save(subject, {"step": step}, **({"keep_revisions": 5} if step == 1 else {}))[
                "checkpoint_id"
            ]
        assert kept_numbers(table, served, subject) == [1, 2]
        deleted = served.http.delete(f"/v1/checkpoints/{checkpoint_id}")
        assert deleted.status_code == 200, deleted.text
    # Then the reaper deletes its revisions: nothing of the checkpoint is left
    took = eventually(lambda: partition(table, reaping, subjects[reaping.table_name]) == [], "revisions deleted")
    # And without the reaper the revisions stay
    stays(lambda: kept_numbers(table, idle, subjects[idle.table_name]) == [1, 2], "revisions kept without a reaper")
    record(SUITE, cases=1, requests=8, reaped_after_ms=int(took * 1000))


def test_a_table_without_a_stream_is_served_without_the_reaper(moto_endpoint: str, table: Any) -> None:
    # Given a table created without a stream (as DynamoDB Local may have it)
    name = f"baton-e2e-no-stream-{uuid.uuid4().hex[:8]}"
    request = schema.create_table_request(name)
    request.pop("StreamSpecification")
    table.create_table(**request)
    # When `baton serve` starts on it
    served = Served(moto_endpoint, name)
    try:
        # Then it says once that it runs without the reaper, and serves
        assert sum("no reaper" in line for line in served.server.lines) == 1, served.server.lines[:10]
        assert "Reaper: off (no stream)" in served.server.lines
        served.save(new_subject(), {"step": 1})
    finally:
        status = served.close()
    # And it stops cleanly
    assert status == 0
    assert served.server.lines[-1] == "Baton stopped."
    record(SUITE, cases=1, requests=1)


def test_the_server_stops_cleanly_with_its_reaper(servers: tuple[Served, Served]) -> None:
    reaping, _ = servers
    assert reaping.server.process.poll() is None
    # Given a write the reaper has handled (this test does not lean on the others having run)
    answer = reaping.http.post(
        "/v1/checkpoints", json={"subject_id": new_subject(), "kind": "task_state", "state": {"step": 1}}
    )
    assert answer.status_code == 201, answer.text
    eventually(lambda: any('"message":"stream batch"' in line for line in reaping.server.lines), "a reaped batch")
    # When the server stops, it stops whole
    assert reaping.close() == 0
    assert reaping.server.lines[-1] == "Baton stopped.", reaping.server.lines[-30:]
    assert not any("did not stop" in line for line in reaping.server.lines)
    # What the reaper logged is one JSON line per batch, naming its function
    batches = [line for line in reaping.server.lines if '"message":"stream batch"' in line]
    assert batches
    assert all('"function_name":"baton-reaper-local"' in line for line in batches)
    record(SUITE, cases=1)
