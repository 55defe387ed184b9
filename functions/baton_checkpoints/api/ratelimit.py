"""The tenant's rate limit as a container enforces it: a share of the tenant's tokens taken in one conditional write
(`store/tenants.py`), spent here one request at a time; a refusal remembered until its token is due, so that a
throttled tenant costs no request at all.

The overshoot is bounded: a container holds at most one share (`Limits.share`, at most 20 tokens) it has not spent,
so over any interval the requests served stay within the tenant's limit plus `containers * share`; a share not spent
within `SHARE_SECONDS` is dropped, so a lowered limit takes effect within that long. Tokens a container took and
did not spend are lost to the tenant (an idle container's share): the price of not writing per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from msgspec import Struct

from baton_checkpoints.domain.errors import QuotaExceeded, RateLimited
from baton_checkpoints.domain.tenancy import (
    SHARE_SECONDS,
    Bucket,
    Limits,
    Settings,
    Taken,
    full_in_seconds,
    next_in_seconds,
    quota_refusal,
    remaining,
)

POLICY: Final = "tenant"
"""The policy's name in `RateLimit-Policy` and `RateLimit`."""
WINDOW_SECONDS: Final = 60


class _Held(Struct):
    """What this container holds of one tenant's bucket."""

    bucket: Bucket
    tokens: int = 0
    expires_us: int = 0
    refused_until_us: int = 0


class Admission(Struct, frozen=True):
    """A request admitted: what the `RateLimit` header says of the tenant's bucket."""

    remaining: int
    reset_seconds: int

    def header(self) -> str:
        """The `RateLimit` field (draft-ietf-httpapi-ratelimit-headers): the requests left, and the seconds until the
        bucket is full again (when none is left: until the next request is allowed)."""
        return f'"{POLICY}";r={self.remaining};t={self.reset_seconds}'


def policy_header(limits: Limits) -> str:
    """The `RateLimit-Policy` field: the quota per window (the requests per minute; the burst on top)."""
    return f'"{POLICY}";q={limits.requests_per_minute};w={WINDOW_SECONDS}'


class Buckets(Protocol):
    """Where tenants' buckets are kept (`store/tenants.py: TenantStore`)."""

    def take(self, tenant_id: str, now_us: int, known: Bucket, defaults: Limits) -> Taken: ...


_anchor_ns = time.time_ns() - time.monotonic_ns()
"""The wall clock when the container started, less its monotonic clock then."""


def container_clock_us() -> int:
    """Microseconds since the epoch, as the container's wall clock read at its start and its monotonic clock since:
    every container of a stage keeps the same time (NTP at their start), and no step of the wall clock afterwards
    (nor a test's frozen or travelling clock) moves a bucket."""
    return (time.monotonic_ns() + _anchor_ns) // 1000


def reanchor() -> None:
    """Read the wall clock again as the container's start: after a SnapStart restore, the process resumes with the
    monotonic clock and the anchor of the moment it was snapshotted, minutes or days before."""
    global _anchor_ns
    _anchor_ns = time.time_ns() - time.monotonic_ns()


class RateLimiter:
    """One container's view of its tenants' buckets."""

    def __init__(self, tenants: Buckets, defaults: Limits, clock: Callable[[], int] = container_clock_us) -> None:
        self._tenants = tenants
        self._defaults = defaults
        self._clock = clock
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._empty = Bucket(Settings())

    def admit(self, tenant_id: str) -> Admission:
        """Spend one of the tenant's tokens (taking a share first when this container holds none); `RateLimited`
        when the tenant has none to give."""
        now_us = self._clock()
        with self._lock:
            held = self._held.get(tenant_id)
            if held is None:
                held = self._held[tenant_id] = _Held(self._empty)
            waiting = held.refused_until_us - now_us
            # A refusal is remembered until its token is due, and at most `SHARE_SECONDS`: then the container asks
            # the table again, and learns a limit changed meanwhile.
            if 0 < waiting <= SHARE_SECONDS * 1_000_000:
                raise self._refusal(held, waiting)
            if held.tokens <= 0 or not 0 < held.expires_us - now_us <= SHARE_SECONDS * 1_000_000:
                taken = self._tenants.take(tenant_id, now_us, held.bucket, self._defaults)
                held.bucket = taken.bucket
                if taken.granted == 0:
                    held.tokens = 0
                    held.refused_until_us = now_us + min(max(taken.retry_after_us, 1), SHARE_SECONDS * 1_000_000)
                    raise self._refusal(held, taken.retry_after_us)
                held.tokens = taken.granted
                held.expires_us = now_us + SHARE_SECONDS * 1_000_000
            held.tokens -= 1
            limits = held.bucket.settings.over(self._defaults)
            left = min(held.tokens + remaining(held.bucket.tat_us, now_us, limits), limits.burst)
            if left == 0:
                # Nothing left: `t` says when the next request will be allowed, so a client can wait that long.
                return Admission(0, max(1, next_in_seconds(held.bucket.tat_us, now_us, limits)))
            return Admission(left, full_in_seconds(held.bucket.tat_us, now_us))

    def _refusal(self, held: _Held, wait_us: int) -> RateLimited:
        limits = held.bucket.settings.over(self._defaults)
        retry_after = max(1, -(-wait_us // 1_000_000))
        return RateLimited(
            retry_after=retry_after,
            policy=policy_header(limits),
            rate_limit=f'"{POLICY}";r=0;t={retry_after}',
            requests_per_minute=limits.requests_per_minute,
            burst=limits.burst,
        )

    def quota_refusal(self, tenant_id: str, adds_bytes: int, creates: int = 0) -> QuotaExceeded | None:
        """The refusal of a write that stores `adds_bytes` and creates `creates` checkpoints or threads, judged on
        what this container last learnt of the tenant's usage (every take's answer carries it, so it is at most
        `SHARE_SECONDS` old, behind the stream's lag); None when the write may go ahead, or when the tenant was not
        admitted here (no request reaches a write without being admitted)."""
        with self._lock:
            held = self._held.get(tenant_id)
        if held is None:
            return None
        bucket = held.bucket
        return quota_refusal(bucket.settings.over(self._defaults), bucket.usage, adds_bytes, creates)

    def forget(self, tenant_id: str) -> None:
        """Drop what this container holds of a tenant (its limits were just changed here)."""
        with self._lock:
            self._held.pop(tenant_id, None)
