"""History's rules without AWS (`domain/history.py`): which revision a save keeps, where the window starts, and
that a revision once out of the window never shows again, whatever the sequence of `keep_revisions` values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.domain.history import NO_HISTORY, history_step, window
from tests.builders import stored_checkpoint
from tests.proof_counts import record
from tests.unit.hypothesis_profiles import examples


def test_a_create_keeps_nothing() -> None:
    assert history_step(None, 5) == NO_HISTORY


def test_turning_history_off_keeps_nothing_and_shows_nothing() -> None:
    assert history_step(stored_checkpoint(revision=9, keep_revisions=3, revisions_from=6), 0) == NO_HISTORY


def test_the_first_kept_revision_starts_the_window() -> None:
    step = history_step(stored_checkpoint(revision=4, keep_revisions=0), 3)
    assert (step.keep_superseded, step.revisions_from) == (True, 4)


def test_the_window_moves_up_by_one_in_the_steady_state() -> None:
    step = history_step(stored_checkpoint(revision=9, keep_revisions=3, revisions_from=6), 3)
    # After the save (revision 10) the window is 7, 8, 9: 6 falls below it
    assert (step.keep_superseded, step.revisions_from) == (True, 7)


def test_raising_keep_revisions_does_not_lower_the_window() -> None:
    step = history_step(stored_checkpoint(revision=9, keep_revisions=1, revisions_from=8), 50)
    assert step.revisions_from == 8


@settings(max_examples=examples(200))
@given(st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=40))
def test_the_window_holds_only_kept_revisions_and_never_takes_one_back(keeps: list[int]) -> None:
    # Given a checkpoint saved once per value, each save sending that `keep_revisions`
    current = None
    copied: set[int] = set()
    left: set[int] = set()
    shown: set[int] = set()
    for keep in keeps:
        step = history_step(current, keep)
        if step.keep_superseded:
            assert current is not None
            copied.add(current.revision)
        revision = 1 if current is None else current.revision + 1
        before = current.revisions_from if current is not None else None
        current = stored_checkpoint(revision=revision, keep_revisions=keep, revisions_from=step.revisions_from)
        readable = set(window(current))
        # Then the window shows only revisions a save copied, at most `keep` of them, the newest superseded first
        assert readable <= copied
        assert len(readable) <= keep
        if keep and revision > 1 and step.keep_superseded:
            assert revision - 1 in readable
        # And `revisions_from` never falls while history stays on, so the reaper may delete what is below it
        if before is not None and step.revisions_from is not None:
            assert step.revisions_from >= before
        # And a revision that left the window never comes back
        assert not readable & left
        left |= shown - readable
        shown = readable
    record("history rules (unit)", sequences=1)
