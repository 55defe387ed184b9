"""A tenant's usage by day, the pure parts: the range a read covers, the level at each day's end, how counts add,
and how a day item is written and read back (`domain/usage.py`, `store/usage.py`)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.usage import (
    MAX_RANGE_DAYS,
    RETENTION_DAYS,
    Counts,
    Day,
    Usage,
    day_of,
    day_range,
    levels,
)
from baton_checkpoints.store import layout, usage
from tests import proof_counts

SUITE = "usage (unit)"
TODAY = "2026-12-03"


def test_the_range_defaults_to_the_thirty_days_ending_today() -> None:
    chosen = day_range(None, None, TODAY)
    assert (chosen.first.isoformat(), chosen.last.isoformat()) == ("2026-11-04", TODAY)
    assert len(chosen.days()) == 30
    assert day_range(None, "2026-01-10", TODAY).days()[0] == "2025-12-12"


@pytest.mark.parametrize(
    ("first", "last", "pointer", "words"),
    [
        ("2026-02-30", None, "/from", "calendar"),
        ("2026-1-01", None, "/from", "YYYY-MM-DD"),
        ("2026-01-01\n", None, "/from", "YYYY-MM-DD"),
        ("٢٠٢٦-01-01", None, "/from", "YYYY-MM-DD"),
        (None, "2026-12-04", "/to", "after today"),
        ("2026-12-03", "2026-12-02", "/from", "after to"),
        ("2026-08-25", None, "/from", f"at most {MAX_RANGE_DAYS} days"),
        ("2025-10-01", "2025-11-15", "/from", f"kept {RETENTION_DAYS} days"),
        (None, "2025-10-01", "/to", f"kept {RETENTION_DAYS} days"),
        (None, "0001-01-01", "/to", f"kept {RETENTION_DAYS} days"),  # (the default start would leave the calendar)
        (None, "9999-12-31", "/to", "after today"),
    ],
)
def test_a_range_out_of_bounds_is_refused_naming_the_parameter(
    first: str | None, last: str | None, pointer: str, words: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        day_range(first, last, TODAY)
    (error,) = refused.value.errors
    assert (error.pointer, error.location) == (pointer, "query")
    assert words in error.message
    proof_counts.record(SUITE, refusals=1)


def test_a_default_start_older_than_the_figures_is_the_oldest_kept_day() -> None:
    oldest = (date.fromisoformat(TODAY) - timedelta(days=RETENTION_DAYS - 1)).isoformat()
    assert day_range(None, oldest, TODAY).days() == [oldest]
    assert len(day_range(oldest, (date.fromisoformat(oldest) + timedelta(days=99)).isoformat(), TODAY).days()) == 100


def test_the_day_of_a_time_is_its_utc_date() -> None:
    assert day_of(0) == "1970-01-01"
    assert day_of(1_796_342_399_999) == "2026-12-03"
    assert day_of(1_796_342_400_000) == "2026-12-04"


def test_each_days_level_is_the_totals_less_every_later_days_change() -> None:
    days = {
        "2026-11-30": Day("2026-11-30", stored=Usage(100, 1, 0)),
        "2026-12-02": Day("2026-12-02", stored=Usage(50, 2, 1)),
        "2026-12-03": Day("2026-12-03", Counts({"checkpoints": 4}), Usage(-30, -1, 0)),
    }
    wanted = ["2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03"]
    found = levels(Usage(120, 2, 1), days, wanted)
    assert [d.day for d in found] == wanted
    assert [d.level for d in found] == [
        Usage(0, 0, 0),  # before metering began: clamped, never below 0
        Usage(100, 1, 0),
        Usage(100, 1, 0),  # a day without an item changed nothing
        Usage(150, 3, 1),
        Usage(120, 2, 1),
    ]
    assert found[-1].counts.requests == {"checkpoints": 4}


@given(
    changes=st.lists(
        st.tuples(st.integers(-5_000, 5_000), st.integers(-5, 5), st.integers(-5, 5)), min_size=1, max_size=12
    ),
    gaps=st.lists(st.integers(1, 3), min_size=12, max_size=12),
)
def test_the_levels_replay_the_changes_day_by_day(changes: list[tuple[int, int, int]], gaps: list[int]) -> None:
    # Given a tenant whose stored figures changed by these amounts on these days, starting from nothing
    start = date(2026, 6, 1)
    dates, running, level_on = [], Usage(), {}
    moment = start
    for (stored, checkpoints, threads), gap in zip(changes, gaps, strict=False):
        moment += timedelta(days=gap)
        change = Usage(stored, checkpoints, threads)
        running += change
        dates.append((moment.isoformat(), change))
        level_on[moment.isoformat()] = running
    days = {d: Day(d, stored=change) for d, change in dates}
    wanted = [(start + timedelta(days=n)).isoformat() for n in range((moment - start).days + 1)]
    # Then each day's level is the running sum up to it (clamped at 0)
    expected, current = [], Usage()
    for day in wanted:
        current = level_on.get(day, current)
        expected.append(Usage(max(0, current.stored_bytes), max(0, current.checkpoints), max(0, current.threads)))
    assert [d.level for d in levels(running, days, wanted)] == expected
    proof_counts.record(SUITE, histories=1)


def test_counts_add_family_by_family() -> None:
    held = Counts({"checkpoints": 2}, read_units=0.5, s3_requests=1)
    held.add(Counts({"checkpoints": 1, "threads": 3}, read_units=1.5, write_units=2, presigned_upload_bytes=9))
    assert held == Counts(
        {"checkpoints": 3, "threads": 3}, read_units=2.0, write_units=2, s3_requests=1, presigned_upload_bytes=9
    )
    assert not Counts()
    assert held


def test_a_day_item_reads_back_what_was_added() -> None:
    # Given what a container and the stream consumer add to a day
    counts = Counts({"checkpoints": 7, "mcp": 2}, 3.5, 12.0, 2, 40_000, 39_000, 1, 10)
    update = usage.day_update("t", "acme", "2026-12-03", counts)
    stored = usage.day_update("t", "acme", "2026-12-03", stored=Usage(1_234, -1, 1))
    assert update["Key"] == stored["Key"] == layout.usage_day_key("acme", "2026-12-03")
    # and the item those updates leave
    item = {**update["Key"]}
    for request in (update, stored):
        names, values = request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
        for placeholder, attribute in names.items():
            item[attribute] = values[":" + placeholder[1:]]
    # Then it reads back the same figures, and expires RETENTION_DAYS after the day
    day = usage.day_of_item(item)
    assert day is not None
    assert (day.day, day.counts, day.stored) == ("2026-12-03", counts, Usage(1_234, -1, 1))
    assert int(item["ttl"]["N"]) == 1_796_256_000 + RETENTION_DAYS * 86_400
    assert usage.day_of_item({"pk": {"S": "L#acme"}, "sk": {"S": "L"}}) is None
