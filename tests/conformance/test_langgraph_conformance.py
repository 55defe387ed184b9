"""LangGraph's own checkpointer suite (`langgraph-checkpoint-conformance`) against `BatonSaver` talking to a real
`baton serve`: all 81 tests, the 58 of the base capabilities and the 23 of `prune`, `copy_thread` and
`delete_for_runs`.

The suite's report says "FULL" for a saver that ran nothing (a group runs only when the saver overrides its async
method), so this asserts `passed_all()` and the count of tests passed per group, never the level string.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from baton_checkpoints.client import Baton
from baton_checkpoints.langgraph import BatonSaver
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

SCOPES = ["checkpoints:read", "checkpoints:write", "checkpoints:delete"]
BASE = {"put": 17, "put_writes": 10, "get_tuple": 10, "list": 16, "delete_thread": 5}
EXTENDED = {"delete_for_runs": 7, "copy_thread": 8, "prune": 8}


def test_baton_saver_passes_every_test_of_langgraphs_conformance_suite(baton: BatonServe) -> None:
    agents: list[str] = []

    @checkpointer_test(name="BatonSaver")
    async def fresh_saver() -> AsyncIterator[BatonSaver]:
        # The suite makes one saver per capability group and reuses thread ids ("thread-0") across groups: each
        # saver gets a key of an agent of its own, so no group sees another's threads.
        agent = f"conformance-{uuid.uuid4().hex[:12]}"
        agents.append(agent)
        with Baton(baton.url, baton.key) as operator:
            key = operator.create_key(agent, SCOPES).secret
        async with BatonSaver(baton.url, key) as saver:
            yield saver

    report = asyncio.run(validate(fresh_saver))

    results = report.to_dict()["results"]
    failures = {name: result["failures"] for name, result in results.items() if result["failures"]}
    assert report.passed_all(), failures
    assert {name: result["tests_passed"] for name, result in results.items()} == {**BASE, **EXTENDED}
    assert all(result["detected"] and result["tests_failed"] == 0 for result in results.values()), results
    assert len(agents) == len(BASE) + len(EXTENDED)
    record(
        "langgraph_conformance",
        tests=sum(BASE.values()) + sum(EXTENDED.values()),
        base=sum(BASE.values()),
        extended=sum(EXTENDED.values()),
    )
