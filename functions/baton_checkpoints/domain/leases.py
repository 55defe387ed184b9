"""Leases: a time-limited claim on a checkpoint by one holder, and the fencing token writes must present.

A lease lives on its checkpoint (the store keeps it in the checkpoint's own item), so that every write checks it in
the same conditional request that checks the revision. Its token is `<counter>.<random>`: the counter grows with
every new lease of the checkpoint, so a holder whose lease lapsed cannot write once another was granted (its token
names an older lease), and the random part makes a token unguessable from the counter.
"""

from __future__ import annotations

import secrets
from typing import Final

from msgspec import Struct

from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.errors import LeaseHeld, LeaseLost

TOKEN_RANDOM_BYTES: Final = 16


class Lease(Struct, frozen=True):
    """A checkpoint's lease as stored: live until `expires_ms`."""

    holder: str
    counter: int
    secret: str
    """The random part of the token (hex); empty once the lease was released, so that its token is spent."""
    expires_ms: int
    key_id: str = ""
    """The API key that acquired it: only the same holder through the same key renews it (a holder's name is shown
    in every record, so the name alone must not hand out the token)."""

    @property
    def token(self) -> str:
        """The fencing token the holder presents: `<counter>.<random>`."""
        return f"{self.counter}.{self.secret}"

    def is_live(self, now_ms: int) -> bool:
        """True until the lease expires."""
        return now_ms < self.expires_ms

    def renewable_by(self, holder: str, key_id: str) -> bool:
        """True when an acquire by `holder` through the key `key_id` renews this lease."""
        return holder == self.holder and key_id == self.key_id

    def admits(self, token: str | None) -> bool:
        """True when `token` is this lease's token (never once released: a released lease keeps no random part)."""
        parsed = parse_token(token)
        return bool(self.secret) and parsed is not None and parsed == (self.counter, self.secret)


def new_secret() -> str:
    """The random part of a new lease's token."""
    return secrets.token_hex(TOKEN_RANDOM_BYTES)


def parse_token(token: str | None) -> tuple[int, str] | None:
    """(counter, random part) of a token of ours; None for anything else (which then matches no lease)."""
    if token is None:
        return None
    counter, dot, secret = token.partition(".")
    if not dot or not (counter.isascii() and counter.isdigit()) or len(counter) > 16:
        return None
    if len(secret) != 2 * TOKEN_RANDOM_BYTES or not all(c in "0123456789abcdef" for c in secret):
        return None
    return int(counter), secret


def check_lease(lease: Lease | None, token: str | None, now_ms: int) -> None:
    """Decide whether a write that presents `token` (None: none) may act on a live checkpoint whose stored lease is
    `lease` (live or lapsed; None when it never had one).

    Without a token, a write passes unless a lease is live (`LeaseHeld`). With one, it passes only when `token` is
    the stored lease's own token, live or lapsed while nobody took it over: a fencing token acts only on the lease it
    names. Any other token of ours is `LeaseLost`: a lease taken over, released (its random part is gone), or of an
    earlier life of the checkpoint (deleted or purged, then created again: its counters start over, so only the
    random part tells). A text that is no token of ours names no lease: `LeaseHeld` while a lease is live (the write
    lacks its token), `LeaseLost` otherwise.
    """
    live = lease is not None and lease.is_live(now_ms)
    expiry = format_ms(lease.expires_ms) if live and lease is not None else None
    if token is None:
        if expiry is not None:
            raise LeaseHeld(expiry)
        return
    if lease is not None and lease.admits(token):
        return
    if expiry is not None and parse_token(token) is None:
        raise LeaseHeld(expiry)
    raise LeaseLost(expiry)


class LeaseGrant(Struct, frozen=True):
    """What acquiring did: the lease now held, and whether it is new (201) or a renewal by its holder (200)."""

    lease: Lease
    created: bool
    taken_over_from: str | None = None
    """The holder of a lapsed lease, never released, that this one replaced (another holder's): a take-over, in
    the audit trail."""


def decide_acquire(
    current: Lease | None, last_counter: int, holder: str, key_id: str, ttl_seconds: int, now_ms: int
) -> LeaseGrant:
    """The lease an acquire by `holder` leads to over `current` (the checkpoint's stored lease, live or lapsed;
    `last_counter` the counter of its last lease, released ones included).

    No live lease: a new one, its counter one past the last. A live lease of the same holder, acquired through the
    same key: renewed (same token, expiry from now). Any other live lease: `LeaseHeld`.
    """
    expires_ms = now_ms + ttl_seconds * 1000
    if current is not None and current.is_live(now_ms):
        if not current.renewable_by(holder, key_id):
            raise LeaseHeld(format_ms(current.expires_ms), by_other_holder=True)
        later = max(expires_ms, current.expires_ms)  # a renewal never shortens the lease
        return LeaseGrant(Lease(holder, current.counter, current.secret, later, key_id), created=False)
    counter = max(last_counter, current.counter if current is not None else 0) + 1
    # A lapsed lease still holding its token was never released: its holder's is taken over.
    previous = current.holder if current is not None and current.secret and current.holder != holder else None
    return LeaseGrant(Lease(holder, counter, new_secret(), expires_ms, key_id), created=True, taken_over_from=previous)
