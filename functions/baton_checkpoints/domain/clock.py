"""Time as the contract writes it: RFC 3339 UTC with milliseconds and `Z`."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now_ms() -> int:
    """Milliseconds since the Unix epoch, from the wall clock."""
    return time.time_ns() // 1_000_000


MIN_MS = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
"""0001-01-01T00:00:00.000Z: the earliest time the API accepts or writes."""
MAX_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
"""9999-12-31T23:59:59.999Z: the latest."""


def format_ms(epoch_ms: int) -> str:
    """`2026-07-30T11:48:04.652Z` for a millisecond timestamp within years 0001-9999 (ValueError outside).

    Years are always four digits (`strftime("%Y")` writes year 999 as `999`, which no RFC 3339 parser reads back),
    and the arithmetic is on integers, so times before 1970 format the same way on every platform.
    """
    if not MIN_MS <= epoch_ms <= MAX_MS:
        raise ValueError(f"{epoch_ms} ms is outside years 0001-9999")
    moment = _EPOCH + timedelta(milliseconds=epoch_ms)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{epoch_ms % 1000:03d}Z"
    )


# RFC 3339's grammar (ASCII digits only; an offset's hours 00-23 and minutes 00-59); the calendar is datetime's.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])\Z"
)


def parse_time(text: str) -> int:
    """Milliseconds since the epoch for an RFC 3339 time with a zone (`Z` or an offset) that lies within years
    0001-9999 once converted to UTC; ValueError otherwise.

    Python's ISO parser also takes forms RFC 3339 does not (week dates, basic format); those are refused first.
    """
    if not _RFC3339.match(text):
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    fraction = re.search(r"\.([0-9]+)", text)
    if fraction and len(fraction.group(1)) > 6:
        text = text.replace(fraction.group(0), fraction.group(0)[:7])  # datetime keeps microseconds at most
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("time has no zone")
    # Integer arithmetic: `timestamp() * 1000` can land a millisecond early through float rounding.
    epoch_ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if not MIN_MS <= epoch_ms <= MAX_MS:
        # An offset can carry a time of year 9999 into year 10000 (or 0001 into year 0) once converted to UTC.
        raise ValueError(f"{text!r} is outside years 0001-9999 in UTC")
    return epoch_ms


def ms_to_seconds(epoch_ms: int) -> Decimal:
    """Exact seconds (three decimals) for a millisecond timestamp, as DynamoDB stores numbers."""
    return Decimal(epoch_ms) / Decimal(1000)
