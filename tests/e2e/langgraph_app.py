"""The LangGraph graph of tests/e2e/test_langgraph_graph.py, and the program that resumes it from another process.

    BATON_URL=... BATON_API_KEY=... python -m tests.e2e.langgraph_app <thread_id> <answer> [--async]

resumes the thread's interrupted run with `Command(resume=<answer>)` on a new `BatonSaver` and prints the final
state as JSON.
"""

from __future__ import annotations

import asyncio
import base64
import json
import operator
import random
import sys
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

QUESTION = {"question": "Publish the draft?"}
NOTES_BYTES = 600_000
"""Notes of random base64: packed, they still take about 450,000 bytes, past the 350,000 that send a value to the
bucket, so tuples carry them as a presigned URL."""


class Draft(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    notes: str
    approved: bool


def notes() -> str:
    """The same incompressible text in every process (a fixed seed)."""
    return base64.b64encode(random.Random(7).randbytes(NOTES_BYTES * 3 // 4)).decode("ascii")


def write(state: Draft) -> Draft:
    return {"steps": ["write"], "notes": notes()}


def review(state: Draft) -> Draft:
    answer = interrupt(QUESTION)
    return {"steps": [f"review:{answer}"], "approved": answer == "yes"}


def publish(state: Draft) -> Draft:
    return {"steps": ["publish" if state.get("approved") else "shelve"]}


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """write -> review (interrupts for an answer) -> publish."""
    builder = StateGraph(Draft)
    builder.add_node("write", write)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer)


def summary(state: Any) -> dict[str, Any]:
    """What the test compares of a state: the long notes as their length (anything else that came back as is)."""
    found = dict(state)
    if isinstance(found.get("notes"), str):
        found["notes"] = f"<{len(found['notes'])} chars>"
    return found


def main(argv: list[str]) -> int:
    from baton_checkpoints.langgraph import BatonSaver

    thread_id, answer = argv[0], argv[1]
    config = {"configurable": {"thread_id": thread_id}}
    if "--async" in argv:

        async def resume() -> Any:
            async with BatonSaver() as saver:
                graph = build_graph(saver)
                return await graph.ainvoke(Command(resume=answer), config)

        final = asyncio.run(resume())
    else:
        with BatonSaver() as saver:
            final = build_graph(saver).invoke(Command(resume=answer), config)
    print(json.dumps(summary(final)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
