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


def format_ms(epoch_ms: int) -> str:
    """`2026-07-30T11:48:04.652Z` for a millisecond timestamp."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})\Z")


def parse_time(text: str) -> int:
    """Milliseconds since the epoch for an RFC 3339 time with a zone (`Z` or an offset); ValueError otherwise.

    Python's ISO parser also takes forms RFC 3339 does not (week dates, basic format); those are refused first.
    """
    if not _RFC3339.match(text):
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    fraction = re.search(r"\.(\d+)", text)
    if fraction and len(fraction.group(1)) > 6:
        text = text.replace(fraction.group(0), fraction.group(0)[:7])  # datetime keeps microseconds at most
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("time has no zone")
    # Integer arithmetic: `timestamp() * 1000` can land a millisecond early through float rounding.
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def ms_to_seconds(epoch_ms: int) -> Decimal:
    """Exact seconds (three decimals) for a millisecond timestamp, as DynamoDB stores numbers."""
    return Decimal(epoch_ms) / Decimal(1000)
