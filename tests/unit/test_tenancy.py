"""The rate limit's arithmetic (`domain/tenancy.py`): a token bucket as GCRA, shares, skew, and the limits' rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from baton_checkpoints.domain.tenancy import (
    MAX_SHARE,
    SKEW_US,
    Limits,
    LimitsRequest,
    Settings,
    Usage,
    quota_refusal,
    remaining,
    take,
)
from tests import proof_counts
from tests.unit.hypothesis_profiles import examples

SECOND = 1_000_000


def limits(rpm: int = 60, burst: int = 5) -> Limits:
    return Limits(requests_per_minute=rpm, burst=burst, storage_bytes=0, checkpoints=0)


def test_a_full_bucket_gives_its_burst_at_once_then_one_token_per_interval() -> None:
    tat = None
    granted = []
    for _ in range(7):
        taken = take(tat, 0, 1, limits())
        granted.append(taken.granted)
        tat = taken.tat_us if taken.granted else tat
    assert granted == [1, 1, 1, 1, 1, 0, 0]
    refused = take(tat, 0, 1, limits())
    assert refused.retry_after_us == SECOND  # 60 a minute: the next token in a second
    assert take(tat, SECOND, 1, limits()).granted == 1


def test_a_share_takes_what_is_there_up_to_what_is_asked() -> None:
    assert take(None, 0, 20, limits(burst=5)).granted == 5
    assert take(None, 0, 3, limits(burst=5)).granted == 3
    half = take(None, 0, 5, limits(burst=5)).tat_us
    assert take(half, 2 * SECOND, 5, limits(burst=5)).granted == 2


def test_the_share_is_at_most_twenty_and_a_tenth_of_the_burst() -> None:
    assert limits(burst=10_000).share == MAX_SHARE
    assert limits(burst=50).share == 5
    assert limits(burst=5).share == 1


def test_remaining_counts_the_tokens_a_bucket_holds() -> None:
    assert remaining(None, 0, limits()) == 5
    assert remaining(3 * SECOND, 0, limits()) == 2
    assert remaining(3 * SECOND, 10 * SECOND, limits()) == 5


def test_a_bucket_far_ahead_of_the_clock_is_skew_and_starts_again() -> None:
    # Given a bucket one window and more than the allowed skew ahead (a clock set back)
    ahead = 5 * SECOND + SKEW_US + 1
    # Then it is taken from as a full bucket, from the container's now
    assert take(ahead, 0, 1, limits()).granted == 1
    # And one just within the window's reach is not
    assert take(5 * SECOND, 0, 1, limits()).granted == 0


@settings(max_examples=examples(300), deadline=None)
@given(
    rpm=st.integers(1, 6_000),
    burst=st.integers(1, 200),
    steps=st.lists(st.tuples(st.integers(0, 3 * SECOND), st.integers(1, 30)), min_size=1, max_size=60),
)
def test_tokens_granted_over_any_span_stay_within_burst_plus_rate(
    rpm: int, burst: int, steps: list[tuple[int, int]]
) -> None:
    # Given any sequence of takes (time moving on, shares of any size)
    bound = limits(rpm, burst)
    now, tat = 0, None
    log: list[tuple[int, int]] = []
    for gap, want in steps:
        now += gap
        taken = take(tat, now, want, bound)
        if taken.granted:
            tat = taken.tat_us
            log.append((now, taken.granted))
    # Then the tokens granted in any window [a, b] are at most burst + rate * (b - a) (and the bucket's rounding of
    # the interval up never lets more through)
    for i, (start, _) in enumerate(log):
        total = 0
        for at, granted in log[i:]:
            total += granted
            assert total <= burst + (at - start) * rpm / (60 * SECOND) + 1e-9
    proof_counts.record("tenancy (unit)", sequences=1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("requests_per_minute", 0), ("burst", 0), ("storage_bytes", -1), ("checkpoints", -1), ("burst", 1_000_001),
     ("requests_per_minute", "60"), ("burst", 2.5), ("extra", 1)],
)  # fmt: skip
def test_limits_outside_their_ranges_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        LimitsRequest.model_validate({field: value})


def test_null_or_absent_settings_take_the_stage_default() -> None:
    request = LimitsRequest.model_validate({"requests_per_minute": 120, "burst": None})
    assert request.settings() == Settings(requests_per_minute=120)
    assert request.settings().over(limits(60, 5)) == Limits(120, 5, 0, 0)


# -- quotas ---------------------------------------------------------------------------------------------------


def quotas(storage_bytes: int = 1_000, checkpoints: int = 10) -> Limits:
    return Limits(requests_per_minute=60, burst=5, storage_bytes=storage_bytes, checkpoints=checkpoints)


def test_a_write_that_fits_goes_ahead_up_to_the_quota_exactly() -> None:
    usage = Usage(stored_bytes=900, checkpoints=6, threads=3)
    assert quota_refusal(quotas(), usage, adds_bytes=100, creates=1) is None  # 1,000 bytes and 10: at, not past
    bytes_refused = quota_refusal(quotas(), usage, adds_bytes=101)
    assert bytes_refused is not None
    assert bytes_refused.details() == {"quota": "storage_bytes", "limit": 1_000, "used": 900}
    count_refused = quota_refusal(quotas(checkpoints=9), usage, adds_bytes=0, creates=1)
    assert count_refused is not None
    assert count_refused.details() == {"quota": "checkpoints", "limit": 9, "used": 9}  # threads count too


def test_a_write_that_adds_nothing_is_never_refused_even_past_a_quota() -> None:
    past = Usage(stored_bytes=5_000, checkpoints=50)
    assert quota_refusal(quotas(), past, adds_bytes=0, creates=0) is None


@given(
    stored=st.integers(0, 10**6),
    counted=st.integers(0, 100),
    adds=st.integers(0, 10**6),
    creates=st.integers(0, 2),
    storage=st.integers(0, 10**6),
    count=st.integers(0, 100),
)
@settings(max_examples=examples(300))
def test_a_refusal_is_exactly_a_write_that_would_pass_a_quota(
    stored: int, counted: int, adds: int, creates: int, storage: int, count: int
) -> None:
    refusal = quota_refusal(quotas(storage, count), Usage(stored, counted), adds, creates)
    past_count = creates > 0 and counted + creates > count
    past_bytes = adds > 0 and stored + adds > storage
    assert (refusal is not None) == (past_count or past_bytes)
    if refusal is not None:
        # The count is judged first: a write that creates is told about the count even when its bytes pass too
        assert refusal.quota == ("checkpoints" if past_count else "storage_bytes")
    proof_counts.record("tenancy (unit)", quota_cases=1)
