"""Review of the Python SDK (issue 10) against a real `baton serve`: what a caller of `baton_checkpoints.client` can be
handed
that the server never said. The test marked FAILS proves a defect (see the report of review 10)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from baton_checkpoints.client import Baton, CheckpointRecord, NotFoundError, RetryPolicy
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "sdk review (e2e)"
FAST = RetryPolicy(backoff_base=0.01, backoff_max=0.05, not_found_pause=0.05)


@pytest.fixture
def client(baton: BatonServe) -> Iterator[Baton]:
    with Baton(baton.url, baton.key, retry=FAST) as sdk:
        yield sdk


def test_a_record_the_caller_changed_is_not_what_a_304_hands_back(client: Baton) -> None:
    """FAILS today: `get` and `lookup` keep the record they returned in the ETag cache, and a `304` hands back that
    same object (`dataclasses.replace` copies the frozen dataclass, not its `state`). An agent that edits the state
    it read (the usual way to build the next save) and reads again before saving gets its own unsaved edit back as
    the server's state, with the server's request id on it."""
    subject = f"e2e-sdk-review-{uuid.uuid4().hex}"
    saved = client.save(subject, "task_state", {"step": 1, "done": []})
    reads: list[Callable[[], CheckpointRecord]] = [
        lambda: client.get(saved.checkpoint_id),
        lambda: client.lookup(subject, "task_state"),
    ]
    for read in reads:
        first = read()
        first.state["done"].append("an edit never saved")
        first.state["step"] = 99
        again = read()
        record(SUITE, cache_reads=1)
        assert again.meta.status == 304  # served from the cache: the server said "unchanged"
        assert again.state == {"step": 1, "done": []}, again.state


def test_the_cache_follows_revisions_and_deletes(client: Baton, baton: BatonServe) -> None:
    """Checked and sound: a save by another client (a new revision) and a delete are never hidden by a `304`."""
    subject = f"e2e-sdk-review-{uuid.uuid4().hex}"
    saved = client.save(subject, "task_state", {"step": 1})
    assert client.lookup(subject, "task_state").state == {"step": 1}
    with Baton(baton.url, baton.key, retry=FAST) as other:
        other.save(subject, "task_state", {"step": 2})
        seen = client.lookup(subject, "task_state")
        assert (seen.meta.status, seen.state, seen.revision) == (200, {"step": 2}, 2)
        other.delete(saved.checkpoint_id)
    with pytest.raises(NotFoundError):
        client.lookup(subject, "task_state")
    record(SUITE, cache_follow_cases=1)
