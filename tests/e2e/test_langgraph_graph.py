"""A real LangGraph graph on `BatonSaver` against `baton serve`: it runs, stops at its `interrupt()`, and a new
process with a new saver resumes it with `Command(resume=...)`; `get_state_history` then lists every step, the same
snapshots (values, next nodes, metadata) as the same graph on LangGraph's `InMemorySaver`. Both the sync API
(`invoke`) and the async one (`ainvoke`). The graph's notes (600 KB of random base64) live in the bucket, so reads
go through the presigned download too. A fork from an older checkpoint reads its own values, not its sibling's."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateSnapshot

from baton_checkpoints.client import Baton
from baton_checkpoints.langgraph import BatonSaver
from tests.e2e.langgraph_app import NOTES_BYTES, QUESTION, build_graph, summary
from tests.e2e.server_process import REPO, BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

SUITE = "langgraph graph (e2e)"
DONE = {"steps": ["write", "review:yes", "publish"], "approved": True, "notes": f"<{NOTES_BYTES} chars>"}


@pytest.fixture(scope="module")
def agent_key(baton: BatonServe) -> str:
    """A key of an agent of its own, with the scopes a checkpointer needs."""
    with Baton(baton.url, baton.key) as operator:
        created = operator.create_key(
            f"graph-{uuid.uuid4().hex[:12]}",
            ["checkpoints:read", "checkpoints:write", "checkpoints:delete", "blobs:write"],
        )
    return created.secret


@pytest.fixture
def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"graph-{uuid.uuid4().hex}"}}


def resume_in_new_process(baton: BatonServe, key: str, thread_id: str, answer: str, *flags: str) -> Any:
    """Resume the thread from another Python process, configured only by BATON_URL and BATON_API_KEY."""
    env = {**os.environ, "BATON_URL": baton.url, "BATON_API_KEY": key}
    done = subprocess.run(
        [sys.executable, "-m", "tests.e2e.langgraph_app", thread_id, answer, *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def step(snapshot: StateSnapshot) -> tuple[Any, ...]:
    """What must be equal between two savers' histories (ids and times differ by nature)."""
    interrupts = [interrupt.value for task in snapshot.tasks for interrupt in task.interrupts]
    return (
        summary(snapshot.values),
        snapshot.next,
        snapshot.metadata.get("source") if snapshot.metadata else None,
        snapshot.metadata.get("step") if snapshot.metadata else None,
        interrupts,
    )


def in_memory_history() -> list[tuple[Any, ...]]:
    """The same graph, run and resumed on InMemorySaver in this process."""
    graph = build_graph(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "reference"}}
    graph.invoke({"steps": []}, config)
    graph.invoke(Command(resume="yes"), config)
    return [step(snapshot) for snapshot in graph.get_state_history(config)]


def assert_chained(history: list[StateSnapshot]) -> None:
    """Every snapshot's parent is the next older one: the history has no gap."""
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert newer.parent_config["configurable"]["checkpoint_id"] == older.config["configurable"]["checkpoint_id"]
    assert history[-1].parent_config is None


def test_a_graph_interrupted_on_baton_is_resumed_by_a_new_process_and_its_history_matches_in_memory(
    baton: BatonServe, agent_key: str, thread: dict[str, Any]
) -> None:
    with BatonSaver(baton.url, agent_key) as saver:
        graph = build_graph(saver)
        stopped = graph.invoke({"steps": []}, thread)
        assert [interrupt.value for interrupt in stopped["__interrupt__"]] == [QUESTION]
        assert graph.get_state(thread).next == ("review",)

    finished = resume_in_new_process(baton, agent_key, thread["configurable"]["thread_id"], "yes")
    assert finished == DONE

    with BatonSaver(baton.url, agent_key) as saver:
        graph = build_graph(saver)
        assert summary(graph.get_state(thread).values) == DONE
        history = list(graph.get_state_history(thread))
    assert [step(snapshot) for snapshot in history] == in_memory_history()
    assert_chained(history)
    record(SUITE, snapshots=len(history))


def test_the_async_api_stops_resumes_from_a_new_process_and_lists_the_same_history(
    baton: BatonServe, agent_key: str, thread: dict[str, Any]
) -> None:
    async def first_run() -> Any:
        async with BatonSaver(baton.url, agent_key) as saver:
            graph = build_graph(saver)
            stopped = await graph.ainvoke({"steps": []}, thread)
            return stopped, (await graph.aget_state(thread)).next

    stopped, waiting_on = asyncio.run(first_run())
    assert [interrupt.value for interrupt in stopped["__interrupt__"]] == [QUESTION]
    assert waiting_on == ("review",)

    finished = resume_in_new_process(baton, agent_key, thread["configurable"]["thread_id"], "yes", "--async")
    assert finished == DONE

    async def read_history() -> list[StateSnapshot]:
        async with BatonSaver(baton.url, agent_key) as saver:
            return [snapshot async for snapshot in build_graph(saver).aget_state_history(thread)]

    history = asyncio.run(read_history())
    assert [step(snapshot) for snapshot in history] == in_memory_history()
    assert_chained(history)
    record(SUITE, snapshots=len(history))


def test_a_fork_from_an_older_checkpoint_reads_its_own_values_not_its_siblings(
    baton: BatonServe, agent_key: str, thread: dict[str, Any]
) -> None:
    # A fork bumps a channel from the same version as the branch it leaves. Values are stored once per version, so
    # the two branches must get different versions (BatonSaver's versions carry a random part, as LangGraph's
    # in-memory and Postgres savers' do), or one branch reads the other's value.
    def forked_notes(saver: Any, config: Any) -> tuple[str, str]:
        graph = build_graph(saver)
        graph.invoke({"steps": []}, config)
        graph.invoke(Command(resume="yes"), config)
        history = list(graph.get_state_history(config))
        before_write = next(s for s in history if s.next == ("write",))
        after_write = next(s for s in history if s.next == ("review",))
        # The fork writes notes from the checkpoint the original "write" step left: same parent, same step.
        fork = graph.update_state(before_write.config, {"notes": "rewritten " * 100}, as_node="write")
        return graph.get_state(fork).values["notes"][:20], graph.get_state(after_write.config).values["notes"][:20]

    with BatonSaver(baton.url, agent_key) as saver:
        on_baton = forked_notes(saver, thread)
    assert on_baton == forked_notes(InMemorySaver(), {"configurable": {"thread_id": "reference"}})
    assert on_baton[0] != on_baton[1]


def test_values_at_the_state_limit_travel_as_blobs_and_read_back_exact(baton: BatonServe, agent_key: str) -> None:
    # Given a channel value of 3,000,000 serialized bytes (the contract's state limit: a body cannot carry its
    # base64) and a pending write of 2,500,000, through the saver's sync and async methods
    big = os.urandom(3_000_000)
    write = os.urandom(2_500_000)
    thread_id = f"big-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checkpoint: Any = {
        "v": 4,
        "id": "1f0-big",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"blob": big, "n": 1},
        "channel_versions": {"blob": "1", "n": "1"},
        "versions_seen": {},
        "updated_channels": ["blob", "n"],
    }
    with BatonSaver(baton.url, agent_key) as saver:
        stored = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"blob": "1", "n": "1"})
        saver.put_writes(stored, [("blob", write)], "task-1")
        found = saver.get_tuple(stored)
    # Then the tuple gives both back, byte for byte, and a new async saver reads the same
    assert found is not None
    assert found.checkpoint["channel_values"] == {"blob": big, "n": 1}
    assert found.pending_writes == [("task-1", "blob", write)]

    async def read_async() -> Any:
        async with BatonSaver(baton.url, agent_key) as saver:
            return await saver.aget_tuple(stored)

    again = asyncio.run(read_async())
    assert again is not None
    assert again.checkpoint["channel_values"]["blob"] == big
    record("langgraph graph (e2e)", blob_values=2)
