"""Checking a tenant's audit trail as `GET /v1/audit` answers it (`baton audit verify`): every event's hash is
recomputed from its content, each must name the one before it, the numbers must follow one another, and the newest
must be the tenant's head. Standard library only.

The hash is the SHA-256 (hex) of the event without its `hash`, as JSON with its keys sorted, no spaces, UTF-8
(docs/api.md, Audit trail): anyone may recompute it with any JSON library that writes that form.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

GENESIS: Final = "0" * 64
"""The `prev_hash` of a tenant's first event."""
RETENTION_DAYS: Final = 400
"""How long Baton keeps an event: an older one may be gone, a younger one may not."""


def event_hash(event: Mapping[str, Any]) -> str:
    """The hash an event must carry: of its content, `hash` left out."""
    body = {name: value for name, value in event.items() if name != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def problems_of(events: Iterable[Mapping[str, Any]], head: Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """What is wrong with a tenant's chain: its `events` (every page, in any order) and its `head` (`meta.head`);
    empty when it is whole."""
    ordered = sorted(events, key=lambda e: int(e.get("seq", 0)))
    found: list[str] = []
    head_seq, head_hash = int(head.get("seq", 0)), str(head.get("hash", ""))
    if not ordered:
        head_at = _time(head.get("at"))
        kept_since = (now or datetime.now(UTC)) - timedelta(days=RETENTION_DAYS - 1)
        if head_seq and (head_at is None or head_at > kept_since):
            return [f"the head names event {head_seq}, from {head.get('at')}, and no event is kept"]
        return []
    for event in ordered:
        if event_hash(event) != event.get("hash"):
            found.append(f"event {event.get('seq')} was altered: its hash is not that of its content")
    for before, after in itertools.pairwise(ordered):
        gap = int(after["seq"]) - int(before["seq"])
        if gap != 1:
            found.append(
                f"events {int(before['seq']) + 1} to {int(after['seq']) - 1} are missing"
                if gap > 1
                else f"event {after['seq']} appears twice"
            )
        elif after.get("prev_hash") != before.get("hash"):
            found.append(f"event {after['seq']} does not follow event {before['seq']}: its prev_hash is not that hash")
    newest = ordered[-1]
    if int(newest["seq"]) < head_seq:
        found.append(f"events {int(newest['seq']) + 1} to {head_seq} are missing: the head names event {head_seq}")
    elif int(newest["seq"]) == head_seq and newest.get("hash") != head_hash:
        found.append(f"the newest event ({newest['seq']}) is not the head's")
    # (a newer event than the head: the head lags an append, which moves it just after)
    first = ordered[0]
    if int(first["seq"]) == 1 and first.get("prev_hash") != GENESIS:
        found.append("event 1 does not start the chain: its prev_hash is not 64 zeros")
    kept_since = (now or datetime.now(UTC)) - timedelta(days=RETENTION_DAYS - 1)
    previous_at = _time(first.get("prev_at"))
    if int(first["seq"]) > 1 and (previous_at is None or previous_at > kept_since):
        found.append(
            f"events 1 to {int(first['seq']) - 1} are missing: event {int(first['seq']) - 1} is from "
            f"{first.get('prev_at')}, within the {RETENTION_DAYS} days every event is kept"
        )
    return found
