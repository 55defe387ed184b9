"""`baton serve`'s reaper never starves the API and never holds up its shutdown (issue 20, defect 9).

What was seen: after a LangGraph `put_writes` of 1,000 writes, every API request answered 503 for minutes. The call
makes 25 UpdateItems of one thread checkpoint (40 writes each), and each of their stream records carries the item's
old and new images, up to 1,000 write entries each (300 KB): 26 records, 3.9 MB of images. A reaper that came to
them late (behind the 1,000 records of the writes' values when the writes name a blob, or after a restart) asked
moto for all of them in one GetRecords, which moto took 24 s to write out, serialized ahead of every API call; its
read timed out after 5 s and was sent again, and again, each copy served in full.

Reproduced here in its smallest form: the same `put_writes` (small values, which ride in the item: quick) on a server
without its reaper, then a server with its reaper on the same table, which finds the records waiting, as a reaper
that fell behind does. The module runs its own moto (not the session's), so a failing run stalls only itself; every
wait is on the server's output or on moto's lock, bounded generously for a loaded runner.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from baton_checkpoints.local.moto_server import LocalMotoServer
from tests.e2e.server_process import BatonServe, serve_table
from tests.proof_counts import record

SUITE = "serve reaper bounds (e2e)"
WRITES = 1_000
"""A `put_writes` at the API's limit: 25 UpdateItems of the checkpoint, images growing to 1,000 entries."""
SAVES = 20
SAVE_SECONDS = 15.0
"""How long one save may take while the reaper works through the records (the API's own calls give up after 5 s
each, API Gateway after 30 s; a save takes a few hundred ms on a loaded runner)."""
BACKLOG_SECONDS = 180.0
"""How long the reaper may take to hand every waiting record to the function."""
STOP_SECONDS = 10.0
"""How long Ctrl-C may take to stop the server, whatever its reaper is doing (docs/testing.md): from the signal to the
process's exit, the output read after. The reaper gets 2 s of it; the rest takes a fraction of a second even on a
loaded runner."""
QUEUED_SECONDS = 60.0
"""How long the reaper may take to make its next call (it polls every 0.5 s, every 2 s when idle)."""


@pytest.fixture(scope="module")
def moto() -> Iterator[LocalMotoServer]:
    """This module's own serialized moto server."""
    server = LocalMotoServer()
    server.start()
    yield server
    server.stop()


def served(moto: LocalMotoServer, name: str, *options: str) -> tuple[BatonServe, httpx.Client]:
    server = serve_table(moto.endpoint, name, *options)
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=SAVE_SECONDS)
    return server, client


def reaped_records(lines: list[str]) -> int:
    """The records the reaper's batches handed to the function so far (retries included)."""
    return sum(json.loads(line)["records"] for line in lines if '"message":"stream batch"' in line)


def test_a_reaper_behind_huge_stream_records_leaves_the_api_answering_and_stops_on_ctrl_c(
    moto: LocalMotoServer,
) -> None:
    name = f"baton-e2e-bounds-{uuid.uuid4().hex[:8]}"
    thread_id = f"e2e-bounds-{uuid.uuid4().hex}"
    # Given a thread checkpoint that received 1,000 pending writes while no reaper ran
    writer, http = served(moto, name, "--no-reaper")
    try:
        put = http.post(
            f"/v1/threads/{thread_id}/checkpoints",
            json={"checkpoint": {"id": "c1", "channel_versions": {"a": 1}}, "metadata": {}, "values": {}},
            timeout=60,
        )
        assert put.status_code == 201, put.text
        value = base64.b64encode(b"a small value").decode("ascii")
        writes = [{"channel": "a", "type": "bytes", "data": value}] * WRITES
        body = {"checkpoint_id": "c1", "task_id": "t1", "writes": writes}
        answer = http.post(f"/v1/threads/{thread_id}/writes", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
    finally:
        http.close()
        assert writer.stop() == 0
    # When a server with its reaper starts on the table (its reaper finds those records waiting on the stream)
    reaping, http = served(moto, name)
    try:
        # Then ordinary requests keep being answered, each within the bound, while it reads and reaps them
        answered: list[tuple[int | str, float]] = []
        for step in range(SAVES):
            started = time.monotonic()
            try:
                save = http.post(
                    "/v1/checkpoints",
                    json={"subject_id": f"e2e-bounds-{step}", "kind": "task_state", "state": {"step": step}},
                )
                outcome: int | str = save.status_code
            except httpx.TimeoutException as exc:
                outcome = type(exc).__name__
            answered.append((outcome, round(time.monotonic() - started, 2)))
            assert outcome == 201, f"save {step + 1} of {SAVES}: {answered} (reaper: {reaper_lines(reaping)})"
        # And the reaper hands every waiting record to the function: the checkpoint's INSERT and its 25 MODIFYs
        # (the thread's head too), none given up on
        expected = 1 + WRITES // 40
        assert reaping.wait_until(lambda lines: reaped_records(lines) >= expected, BACKLOG_SECONDS), (
            f"{reaped_records(reaping.lines)} records reaped, {expected} expected: {reaper_lines(reaping)}"
        )
        assert not [line for line in reaping.lines if "gave up" in line]
    finally:
        http.close()
        # And Ctrl-C stops it within seconds, cleanly
        status, took = reaping.stop_timed()
    assert status == 0, reaping.lines[-20:]
    assert took < STOP_SECONDS, f"stopped after {took:.1f} s"
    assert reaping.wait_for(r"^(Baton stopped\.)$", 30) == "Baton stopped."
    slowest = int(max(seconds for _, seconds in answered) * 1000)
    record(SUITE, cases=1, requests=2 + SAVES, slowest_save_ms=slowest, stopped_after_ms=int(took * 1000))


def test_the_server_stops_within_seconds_while_its_reaper_waits_on_a_stuck_endpoint(moto: LocalMotoServer) -> None:
    name = f"baton-e2e-stuck-{uuid.uuid4().hex[:8]}"
    reaping, http = served(moto, name)
    http.close()
    try:
        # Given the endpoint stuck (moto's lock held, as by a call that never ends) and the reaper's next call
        # waiting in it
        with moto.paused() as lock:
            assert lock.wait_for_waiting(1, QUEUED_SECONDS), "the reaper made no call"
            # When the server is stopped (Ctrl-C)
            status, took = reaping.stop_timed()
    finally:
        reaping.stop()
    # Then it stops within seconds anyway, leaving the reaper's call behind, and says so
    assert status == 0, reaping.lines[-20:]
    assert took < STOP_SECONDS, f"stopped after {took:.1f} s: {reaping.lines[-5:]}"
    assert reaping.lines[-1] == "Baton stopped.", reaping.lines[-10:]
    assert any("reaper did not stop in time" in line for line in reaping.lines), reaping.lines[-10:]
    record(SUITE, cases=1, stopped_after_ms=int(took * 1000))


def reaper_lines(server: BatonServe) -> list[str]:
    """What the reaper logged, shortened (its batches' counts, warnings and errors)."""
    return [line[:300] for line in server.lines if '"function_name":"baton-reaper-local"' in line][-10:]
