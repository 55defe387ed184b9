"""A tenant's audit trail: its management actions, one event each, in a hash chain. Pure: no clock and no AWS.

Each event carries the hash of the tenant's event before it (`prev_hash`; the first carries `GENESIS`), and its own
`hash` is the SHA-256 of its document without `hash`: the canonical JSON of the document (keys sorted, no spaces,
UTF-8; the values are strings, whole numbers, booleans, lists and objects of them). Whoever reads the events can
recompute every hash and follow the links (`baton audit verify`, `client/audit.py`, which repeats `event_hash`: a
unit test holds the two equal): an event removed, altered or inserted breaks the chain, and the newest event must
be the tenant's head (`GET /v1/audit` answers it), so removing the latest shows too.

The events of a tenant are appended one at a time (`store/audit.py`): the head names the last event's number and
hash, and the next event's write is conditioned on it, so the chain never forks. An event's time never goes back
(`at` is at least the head's), so the chain's order is its time order too.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, Literal, get_args

from msgspec import Struct, field

from baton_checkpoints.domain.clock import format_ms

Action = Literal[
    "key.issued",
    "key.revoked",
    "subject.purged",
    "thread.deleted",
    "limits.changed",
    "lease.taken_over",
    "grant.approved",
    "grant.revoked",
]
ACTIONS: Final[tuple[str, ...]] = get_args(Action)
GENESIS: Final = "0" * 64
"""The `prev_hash` of a tenant's first event."""
RETENTION_DAYS: Final = 400
"""How long an event is kept (its item's TTL): past it, DynamoDB removes the oldest events, and a verification
starts at the oldest kept."""
MAX_PAGE: Final = 100
DEFAULT_PAGE: Final = 50


def event_hash(document: dict[str, Any]) -> str:
    """The SHA-256 (hex) of an event's document without its `hash`, as canonical JSON."""
    body = {name: value for name, value in document.items() if name != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Actor(Struct, frozen=True):
    """Who acted: the key's id and agent (an OAuth approval: the key that signed the consent form; a grant ended
    by its own token: the key that approved it; Baton itself, ending a grant whose token was used twice: none)."""

    key_id: str | None
    agent_id: str | None


class Happened(Struct, frozen=True):
    """An action that took place, before it is numbered and chained."""

    action: str
    actor: Actor
    request_id: str
    target: dict[str, str]
    """What the action was on: `{"type": "key", "id": "key_..."}` and such."""
    outcome: Literal["succeeded", "partial"] = "succeeded"
    details: dict[str, Any] = field(default_factory=dict)


class Head(Struct, frozen=True):
    """The tenant's last event: its number, hash and time (none yet: 0, `GENESIS`, 0)."""

    seq: int = 0
    hash: str = GENESIS
    at_ms: int = 0


def chained(happened: Happened, head: Head, now_ms: int) -> dict[str, Any]:
    """The event's document (with its `hash`) after `head`: number one past it, never earlier than it."""
    document: dict[str, Any] = {
        "seq": head.seq + 1,
        "action": happened.action,
        "at": format_ms(max(now_ms, head.at_ms)),
        "request_id": happened.request_id,
        "actor": {"key_id": happened.actor.key_id, "agent_id": happened.actor.agent_id},
        "target": dict(happened.target),
        "outcome": happened.outcome,
        "details": dict(happened.details),
        "prev_hash": head.hash,
        "prev_at": format_ms(head.at_ms) if head.seq else None,
    }
    document["hash"] = event_hash(document)
    return document
