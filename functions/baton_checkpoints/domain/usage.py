"""A tenant's usage by day (UTC): what it asked, what DynamoDB and S3 did for it, and what it stored at the day's end.
Pure: no clock and no AWS.

Two sources fill a day (`store/usage.py` keeps them):
- the containers count each admitted request, the units DynamoDB reports for the requests made serving it, and the
  S3 requests, bytes and presigned URLs; each container adds what it holds for a tenant to the day's item now and
  then (`Counts`), never once per request;
- the stream consumer adds the day's change of what the tenant stores (`store/metering.py`), in the same transaction
  as the tenant's running totals: so the level at a day's end is the totals less every later day's change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Final

from msgspec import Struct, field

from baton_checkpoints.domain.errors import ValidationFailed

RETENTION_DAYS: Final = 400
"""How long a day's figures are kept (the day item's TTL): a year and a month to bill by."""
MAX_RANGE_DAYS: Final = 100
"""The most days one read covers (its answer and its work stay bounded)."""
DEFAULT_RANGE_DAYS: Final = 30
DAY_PATTERN: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DAY: Final = re.compile(DAY_PATTERN.removeprefix("^").removesuffix("$"))
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class Usage(Struct, frozen=True):
    """What a tenant stores, as the stream consumer last counted it (`store/metering.py`): bytes (items by DynamoDB's
    sizing rules, plus the S3 objects they stand for), live checkpoints, and threads."""

    stored_bytes: int = 0
    checkpoints: int = 0
    threads: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.stored_bytes + other.stored_bytes, self.checkpoints + other.checkpoints, self.threads + other.threads
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.stored_bytes - other.stored_bytes, self.checkpoints - other.checkpoints, self.threads - other.threads
        )

    def __bool__(self) -> bool:
        return bool(self.stored_bytes or self.checkpoints or self.threads)


def day_of(epoch_ms: int) -> str:
    """The UTC day (`YYYY-MM-DD`) of a millisecond timestamp."""
    return (_EPOCH + timedelta(milliseconds=epoch_ms)).date().isoformat()


class Counts(Struct):
    """What a container counted of one tenant on one day, not yet added to the day's item."""

    requests: dict[str, int] = field(default_factory=dict)
    """Admitted requests by route family (the route's tag: `checkpoints`, `threads`, `mcp`, ...)."""
    read_units: float = 0.0
    write_units: float = 0.0
    s3_requests: int = 0
    s3_bytes_written: int = 0
    s3_bytes_read: int = 0
    presigned_urls: int = 0
    presigned_upload_bytes: int = 0

    def add(self, other: Counts) -> None:
        """Add `other`'s figures to these."""
        for family, n in other.requests.items():
            self.requests[family] = self.requests.get(family, 0) + n
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.s3_requests += other.s3_requests
        self.s3_bytes_written += other.s3_bytes_written
        self.s3_bytes_read += other.s3_bytes_read
        self.presigned_urls += other.presigned_urls
        self.presigned_upload_bytes += other.presigned_upload_bytes

    def __bool__(self) -> bool:
        return any(
            (
                self.requests,
                self.read_units,
                self.write_units,
                self.s3_requests,
                self.s3_bytes_written,
                self.s3_bytes_read,
                self.presigned_urls,
                self.presigned_upload_bytes,
            )
        )


class Day(Struct, frozen=True):
    """One day's figures, as read back: what the containers counted, the stream's change of what the tenant stores
    over the day (`stored`), and the level at the day's end (`level`, filled by `levels`)."""

    day: str
    counts: Counts = field(default_factory=Counts)
    stored: Usage = field(default_factory=Usage)
    level: Usage = field(default_factory=Usage)


class Range(Struct, frozen=True):
    """The days a read covers, first to last."""

    first: date
    last: date

    def days(self) -> list[str]:
        """Every day of the range, in order."""
        return [(self.first + timedelta(days=n)).isoformat() for n in range((self.last - self.first).days + 1)]


def _parse_day(text: str, name: str) -> date:
    if not _DAY.fullmatch(text):
        raise ValidationFailed.single(f"/{name}", f"The query parameter {name} must be a date, YYYY-MM-DD.", "query")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValidationFailed.single(
            f"/{name}", f"The query parameter {name} must be a date of the calendar ({text} is not).", "query"
        ) from None


def day_range(first: str | None, last: str | None, today: str) -> Range:
    """The range a read asks for (`from`, `to`: `YYYY-MM-DD`, UTC): `to` defaults to today, `from` to the 30 days
    ending at `to`; at most `MAX_RANGE_DAYS` days, none after today, and `from` no earlier than the figures are kept."""
    now = date.fromisoformat(today)
    oldest = now - timedelta(days=RETENTION_DAYS - 1)
    kept = f"usage is kept {RETENTION_DAYS} days"
    end = now if last is None else _parse_day(last, "to")
    if end > now:
        raise ValidationFailed.single("/to", f"The query parameter to must not be after today ({today}, UTC).", "query")
    if end < oldest:  # (first: a default start before it could fall out of the calendar)
        raise ValidationFailed.single(
            "/to", f"The query parameter to must not be before {oldest.isoformat()}: {kept}.", "query"
        )
    start = end - timedelta(days=DEFAULT_RANGE_DAYS - 1) if first is None else _parse_day(first, "from")
    if start > end:
        raise ValidationFailed.single("/from", "The query parameter from must not be after to.", "query")
    if (end - start).days + 1 > MAX_RANGE_DAYS:
        raise ValidationFailed.single(
            "/from", f"The query parameters from and to may span at most {MAX_RANGE_DAYS} days.", "query"
        )
    if start < oldest and first is not None:
        raise ValidationFailed.single(
            "/from", f"The query parameter from must not be before {oldest.isoformat()}: {kept}.", "query"
        )
    return Range(max(start, oldest), end)


def levels(totals: Usage, days: Mapping[str, Day], wanted: Iterable[str]) -> list[Day]:
    """Each wanted day, in order, with its end-of-day level: the running totals less the change of every later day
    (`days`: what the tenant's partition holds, by day; a day without an item changed nothing). A level is never
    below 0: what was stored before metering began is counted only by the changes since."""
    changes = sorted(days.items(), reverse=True)
    later = Usage()
    seen = 0
    answer = []
    for day in sorted(wanted, reverse=True):
        while seen < len(changes) and changes[seen][0] > day:
            later += changes[seen][1].stored
            seen += 1
        kept = days.get(day) or Day(day)
        answer.append(Day(day, kept.counts, kept.stored, _clamped(totals - later)))
    return answer[::-1]


def _clamped(level: Usage) -> Usage:
    return Usage(max(0, level.stored_bytes), max(0, level.checkpoints), max(0, level.threads))
