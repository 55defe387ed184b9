"""The audit trail's pure parts: how an event is numbered, timed and hashed after its head (`domain/audit.py`), and
how a chain is checked (`client/audit.py`, what `baton audit verify` runs): whole, or which event is missing,
altered or out of place."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from baton_checkpoints.client import audit as client_audit
from baton_checkpoints.domain import audit
from baton_checkpoints.domain.audit import GENESIS, Actor, Happened, Head, chained
from tests import proof_counts

SUITE = "audit (unit)"
NOW_MS = 1_796_300_000_000
ACTOR = Actor("key_" + "1" * 32, "admin")


def chain(length: int, start_ms: int = NOW_MS) -> list[dict[str, Any]]:
    """`length` events of one tenant, oldest first."""
    events: list[dict[str, Any]] = []
    head = Head()
    for n in range(length):
        happened = Happened("key.issued", ACTOR, f"req-{n}", {"type": "key", "id": f"key_{n:032d}"})
        event = chained(happened, head, start_ms + n * 1000)
        events.append(event)
        head = Head(event["seq"], event["hash"], start_ms + n * 1000)
    return events


def head_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"seq": events[-1]["seq"], "hash": events[-1]["hash"]} if events else {"seq": 0, "hash": GENESIS}


NOW = datetime.fromtimestamp(NOW_MS / 1000, UTC)


def test_an_event_follows_its_head_in_number_hash_and_time() -> None:
    first, second = chain(2)
    assert (first["seq"], first["prev_hash"], second["seq"], second["prev_hash"]) == (1, GENESIS, 2, first["hash"])
    assert first["hash"] == audit.event_hash(first) == client_audit.event_hash(first)
    # A container whose clock is behind the head's never writes an earlier time
    late = chained(Happened("limits.changed", ACTOR, "r", {"type": "tenant", "id": "t"}), Head(2, "a" * 64, NOW_MS), 5)
    assert late["at"] == "2026-12-03T12:13:20.000Z"
    assert len(audit.ACTIONS) == 8


def test_a_whole_chain_has_no_problem_and_an_empty_one_neither() -> None:
    events = chain(5)
    assert client_audit.problems_of(events, head_of(events), NOW) == []
    assert client_audit.problems_of(list(reversed(events)), head_of(events), NOW) == []
    assert client_audit.problems_of([], {"seq": 0, "hash": GENESIS}, NOW) == []


def test_each_way_of_breaking_a_chain_is_named() -> None:
    events = chain(5)
    head = head_of(events)
    cases = {
        "removed from the middle": ([e for e in events if e["seq"] != 3], "events 3 to 3 are missing"),
        "altered": ([dict(e, request_id="forged") if e["seq"] == 2 else e for e in events], "event 2 was altered"),
        "the newest cut": (events[:-1], "events 5 to 5 are missing: the head names event 5"),
        "the oldest cut": (events[1:], "events 1 to 1 are missing"),
        "everything removed": ([], "and no event is kept"),
        "an event written twice": ([*events, events[2]], "event 3 appears twice"),
    }
    for name, (broken, words) in cases.items():
        problems = client_audit.problems_of(broken, head, NOW)
        assert any(words in p for p in problems), (name, problems)
    # A forged event rehashed still breaks the link to the next one
    forged = dict(events[1], request_id="forged")
    forged["hash"] = client_audit.event_hash(forged)
    problems = client_audit.problems_of([forged if e["seq"] == 2 else e for e in events], head, NOW)
    assert any("event 3 does not follow event 2" in p for p in problems), problems
    proof_counts.record(SUITE, breakings=len(cases) + 1)


def test_events_older_than_the_retention_may_be_gone() -> None:
    events = chain(3, start_ms=NOW_MS - 401 * 86_400_000)
    later = [e for e in events if e["seq"] > 1]
    assert client_audit.problems_of(later, head_of(events), NOW) == []
    recent = chain(3, start_ms=NOW_MS - 10 * 86_400_000)
    assert client_audit.problems_of(recent[1:], head_of(recent), NOW)
    assert NOW - timedelta(days=client_audit.RETENTION_DAYS) < NOW


@given(
    details=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.text(max_size=12), st.integers(-(2**53), 2**53), st.booleans(), st.none()),
        max_size=4,
    )
)
def test_the_client_hashes_every_event_as_the_server_does(details: dict[str, Any]) -> None:
    event = chained(
        Happened("subject.purged", ACTOR, "r", {"type": "subject", "id": "ü ✓"}, details=details), Head(), 0
    )
    assert client_audit.event_hash(event) == audit.event_hash(event) == event["hash"]
    proof_counts.record(SUITE, hashes=1)


def test_a_trail_whose_events_all_expired_is_whole_and_a_lagging_head_is_no_alarm() -> None:
    old = chain(2, start_ms=NOW_MS - 500 * 86_400_000)
    assert client_audit.problems_of([], {**head_of(old), "at": old[-1]["at"]}, NOW) == []
    events = chain(3)
    assert client_audit.problems_of(events, head_of(events[:2]), NOW) == []  # the head moves just after an append
