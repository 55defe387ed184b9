"""A tenant's limits, and the rate limit's arithmetic: pure, no clock and no AWS.

The rate limit is a token bucket kept as GCRA (the generic cell rate algorithm): one number, the bucket's
theoretical arrival time `tat` (in microseconds). A tenant may make `requests_per_minute` requests a minute, and up
to `burst` at once: a request is one token, a token is worth `interval = 60 s / requests_per_minute`, and taking `k`
tokens at `now` moves `tat` to `max(tat, now) + k * interval`, allowed while that stays within
`now + burst * interval`.

A container does not ask the table for every request: it takes a *share* of tokens in one conditional write and
spends it locally. Whatever the number of containers, the tokens taken in any interval `t` stay within
`burst + requests_per_minute * t / 60 s` (the table's bucket is exact), and a container holds at most one share it has
not spent; so the requests served in any interval `t` stay within that bound plus `containers * share` (the
overshoot bound documented in docs/api.md, and measured by the tests across `baton serve`'s containers).
"""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Struct, field
from pydantic import Field

from baton_checkpoints.domain.errors import QuotaExceeded
from baton_checkpoints.domain.models import RequestModel
from baton_checkpoints.domain.usage import Usage

MINUTE_US: Final = 60_000_000
MAX_SHARE: Final = 20
"""Most tokens a container takes in one write: at a steady rate a share costs one write per 20 requests (0.05 added
requests per request), and the overshoot bound is `containers * share`."""
SHARE_OF_BURST: Final = 10
"""A share is at most a tenth of the burst, so that a few containers cannot hold the whole burst between them."""
SHARE_SECONDS: Final = 10
"""A share a container has not spent within this long is dropped (a limit lowered meanwhile takes effect)."""
SKEW_US: Final = 3_600_000_000
"""A bucket further ahead of a container's clock than its whole burst and an hour cannot be one the rule made (a
clock set back by hours, a corrupted item): it starts again from the container's now. A bucket ahead by less is
taken as it is: a container whose clock is behind the others' refuses early (by its lag), never lets more through."""

MAX_REQUESTS_PER_MINUTE: Final = 6_000_000
MAX_BURST: Final = 1_000_000
MAX_STORAGE_BYTES: Final = 2**53 - 1
MAX_CHECKPOINTS: Final = 2**53 - 1


class Limits(Struct, frozen=True):
    """A tenant's effective limits: its own settings, the stage's defaults where it has none."""

    requests_per_minute: int
    burst: int
    storage_bytes: int
    checkpoints: int

    @property
    def interval_us(self) -> int:
        """What one request costs of the bucket, in whole microseconds (rounded up: never a faster rate)."""
        return -(-MINUTE_US // self.requests_per_minute)

    @property
    def share(self) -> int:
        """How many tokens a container takes at once (at least 1)."""
        return max(1, min(MAX_SHARE, self.burst // SHARE_OF_BURST))


class Settings(Struct, frozen=True):
    """A tenant's own settings: None where the stage's default applies."""

    requests_per_minute: int | None = None
    burst: int | None = None
    storage_bytes: int | None = None
    checkpoints: int | None = None

    def over(self, defaults: Limits) -> Limits:
        """The effective limits: these settings over `defaults`."""
        return Limits(
            requests_per_minute=_either(self.requests_per_minute, defaults.requests_per_minute),
            burst=_either(self.burst, defaults.burst),
            storage_bytes=_either(self.storage_bytes, defaults.storage_bytes),
            checkpoints=_either(self.checkpoints, defaults.checkpoints),
        )


def _either(value: int | None, default: int) -> int:
    return default if value is None else value


class LimitsRequest(RequestModel):
    """`PUT /v1/tenants/{tenant_id}/limits`: every setting, an integer or null (or left out) for the stage default."""

    requests_per_minute: Annotated[int | None, Field(ge=1, le=MAX_REQUESTS_PER_MINUTE)] = None
    burst: Annotated[int | None, Field(ge=1, le=MAX_BURST)] = None
    storage_bytes: Annotated[int | None, Field(ge=0, le=MAX_STORAGE_BYTES)] = None
    checkpoints: Annotated[int | None, Field(ge=0, le=MAX_CHECKPOINTS)] = None

    def settings(self) -> Settings:
        """The settings this request stores."""
        return Settings(self.requests_per_minute, self.burst, self.storage_bytes, self.checkpoints)


class Take(Struct, frozen=True):
    """What taking tokens from the tenant's bucket gives: `granted` tokens (0: refused) and the bucket's new `tat`,
    or, when refused, how long until one token is there."""

    granted: int
    tat_us: int
    retry_after_us: int = 0


def take(tat_us: int | None, now_us: int, want: int, limits: Limits) -> Take:
    """Take up to `want` tokens at `now_us` from a bucket at `tat_us` (None: full)."""
    interval = limits.interval_us
    start = now_us if tat_us is None or skewed(tat_us, now_us, limits) else max(tat_us, now_us)
    room = (now_us + limits.burst * interval - start) // interval
    granted = max(0, min(want, room))
    if granted == 0:
        # The first token comes back when the bucket's time is within `burst - 1` tokens of now.
        return Take(0, start, max(0, start - (limits.burst - 1) * interval - now_us))
    return Take(granted, start + granted * interval)


def skewed(tat_us: int, now_us: int, limits: Limits) -> bool:
    """True when a bucket at `tat_us` is further ahead of `now_us` than the rule allows (`SKEW_US`)."""
    return tat_us - now_us > limits.burst * limits.interval_us + SKEW_US


def remaining(tat_us: int | None, now_us: int, limits: Limits) -> int:
    """Tokens the bucket holds at `now_us` (at most `burst`)."""
    if tat_us is None:
        return limits.burst
    return max(0, min(limits.burst, (now_us + limits.burst * limits.interval_us - tat_us) // limits.interval_us))


def next_in_seconds(tat_us: int | None, now_us: int, limits: Limits) -> int:
    """Whole seconds until the bucket holds a token again (0: it holds one now)."""
    if tat_us is None:
        return 0
    wait = max(tat_us, now_us) - (limits.burst - 1) * limits.interval_us - now_us
    return max(0, -(-wait // 1_000_000))


def full_in_seconds(tat_us: int | None, now_us: int) -> int:
    """Whole seconds until the bucket is full again (0: it is)."""
    if tat_us is None or tat_us <= now_us:
        return 0
    return -(-(tat_us - now_us) // 1_000_000)


class Bucket(Struct, frozen=True):
    """What a container knows of a tenant's item: its settings, their version, the bucket's `tat`, and its usage."""

    settings: Settings
    version: int = 0
    tat_us: int | None = None
    usage: Usage = field(default_factory=Usage)


def quota_refusal(limits: Limits, usage: Usage, adds_bytes: int, creates: int = 0) -> QuotaExceeded | None:
    """The refusal of a write that stores `adds_bytes` and creates `creates` checkpoints or threads, when it would
    take the tenant past a quota; None when it may go ahead. A write that creates nothing is never refused for the
    count, and one that stores nothing never for the bytes (a delete, a lease, a status change of a small state)."""
    if creates and usage.checkpoints + usage.threads + creates > limits.checkpoints:
        return QuotaExceeded("checkpoints", limits.checkpoints, usage.checkpoints + usage.threads, creates)
    if adds_bytes and usage.stored_bytes + adds_bytes > limits.storage_bytes:
        return QuotaExceeded("storage_bytes", limits.storage_bytes, usage.stored_bytes, adds_bytes)
    return None


class Taken(Struct, frozen=True):
    """A take's outcome: the tokens granted (0: refused, with how long until one is there) and the item as the
    write left it (or as it stood, when refused)."""

    granted: int
    bucket: Bucket
    retry_after_us: int = 0
