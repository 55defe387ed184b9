"""Time as the contract writes it, and the identifiers Baton mints."""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from baton_checkpoints.domain.clock import format_ms, ms_to_seconds, now_ms, parse_time
from baton_checkpoints.domain.ids import CHECKPOINT_ID_PATTERN, KEY_ID_PATTERN, new_checkpoint_id, new_key_id

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CONTRACT_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def reference_format(epoch_ms: int) -> str:
    """The contract's time format computed with exact integer arithmetic."""
    moment = EPOCH + timedelta(milliseconds=epoch_ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def sample_ms(count: int, seed: int) -> list[int]:
    """Millisecond timestamps spread from 1970 to 2100, the same on every run."""
    rng = random.Random(seed)
    return [rng.randrange(0, 4_102_444_800_000) for _ in range(count)]


# --- format_ms ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch_ms", "text"),
    [
        (1_785_412_084_652, "2026-07-30T11:48:04.652Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (999, "1970-01-01T00:00:00.999Z"),
        (1_785_412_084_000, "2026-07-30T11:48:04.000Z"),
        (1_785_412_084_999, "2026-07-30T11:48:04.999Z"),
        (1_798_761_599_999, "2026-12-31T23:59:59.999Z"),
        (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
    ],
)
def test_format_ms_writes_rfc3339_utc_with_milliseconds_and_z(epoch_ms: int, text: str) -> None:
    # Given a millisecond timestamp
    # When it is formatted
    # Then it is the contract's form, exactly
    assert format_ms(epoch_ms) == text


def test_format_ms_agrees_with_integer_arithmetic_everywhere() -> None:
    # Given thousands of timestamps across 130 years
    # When each is formatted
    # Then every one matches the exact computation, in the contract's shape (no float rounding into the next second)
    for epoch_ms in sample_ms(5000, seed=1):
        text = format_ms(epoch_ms)
        assert text == reference_format(epoch_ms), epoch_ms
        assert CONTRACT_TIME.match(text)


# --- parse_time -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "epoch_ms"),
    [
        ("2026-07-30T11:48:04.652Z", 1_785_412_084_652),
        ("2026-07-30T11:48:04.652z", 1_785_412_084_652),
        ("2026-07-30T11:48:04Z", 1_785_412_084_000),
        ("2026-07-30T11:48:04.652+00:00", 1_785_412_084_652),
        ("2026-07-30T13:48:04.652+02:00", 1_785_412_084_652),
        ("2026-07-30T06:18:04.652-05:30", 1_785_412_084_652),
        ("1970-01-01T00:00:00.000Z", 0),
    ],
)
def test_parse_time_accepts_z_and_offsets(text: str, epoch_ms: int) -> None:
    # Given an RFC 3339 time with Z or an offset
    # When it is parsed
    # Then it is the same instant in epoch milliseconds
    assert parse_time(text) == epoch_ms


@pytest.mark.parametrize(
    "text",
    ["2026-07-30T11:48:04.652", "2026-07-30T11:48:04", "2026-07-30", "garbage", "", "2026-13-01T00:00:00Z"],
)
def test_parse_time_rejects_times_without_a_zone_or_not_times_at_all(text: str) -> None:
    # Given a naive time, a date alone, or not a time
    # When it is parsed
    # Then it raises ValueError
    with pytest.raises(ValueError):  # noqa: PT011 (the function documents only ValueError)
        parse_time(text)


@pytest.mark.parametrize(
    "epoch_ms",
    [
        1_785_412_084_652,
        1_079_337_347_472,  # 2004-03-15T07:55:47.472Z
        541_169_507_341,  # 1987-02-24T12:51:47.341Z
        2_183_226_373_411,  # 2039-03-08T19:46:13.411Z
    ],
)
def test_parse_time_reads_back_exactly_what_format_ms_wrote(epoch_ms: int) -> None:
    # Given a timestamp formatted the contract's way
    text = format_ms(epoch_ms)
    # When it is parsed back
    # Then the very same millisecond comes back (stored created_at/updated_at are read with parse_time)
    assert parse_time(text) == epoch_ms


def test_parse_time_round_trips_every_millisecond_it_is_given() -> None:
    # Given thousands of timestamps across 130 years
    # When each is formatted and parsed back
    drifted = [ms for ms in sample_ms(5000, seed=2) if parse_time(format_ms(ms)) != ms]
    # Then none drifts
    assert drifted == []


# --- now_ms / ms_to_seconds -----------------------------------------------------------------------------------


def test_now_ms_reads_the_wall_clock_in_milliseconds() -> None:
    # Given the clock stopped at a known instant
    with time_machine.travel(datetime(2026, 7, 30, 11, 48, 4, 652_000, tzinfo=UTC), tick=False):
        # When the time is read
        # Then it is that instant in epoch milliseconds
        assert now_ms() == 1_785_412_084_652
        assert format_ms(now_ms()) == "2026-07-30T11:48:04.652Z"


def test_now_ms_is_close_to_the_system_clock() -> None:
    # Given the real clock
    # When read through now_ms
    # Then it is within a second of time.time()
    assert abs(now_ms() - time.time() * 1000) < 1000


@pytest.mark.parametrize(
    ("epoch_ms", "seconds"),
    [(1_785_412_084_652, Decimal("1785412084.652")), (0, Decimal(0)), (1, Decimal("0.001")), (1000, Decimal(1))],
)
def test_ms_to_seconds_is_exact(epoch_ms: int, seconds: Decimal) -> None:
    # Given a millisecond timestamp
    # When it is converted to seconds for DynamoDB
    # Then the decimal is exact
    assert ms_to_seconds(epoch_ms) == seconds


# --- ids ------------------------------------------------------------------------------------------------------


def test_new_checkpoint_ids_match_the_contract_and_do_not_repeat() -> None:
    # Given many new checkpoint ids
    made = [new_checkpoint_id() for _ in range(500)]
    # Then each is ckpt_ and 32 lowercase hex digits, and none repeats
    assert all(CHECKPOINT_ID_PATTERN.match(i) for i in made)
    assert len(set(made)) == len(made)


def test_new_key_ids_match_the_pattern_and_embed_the_creation_time() -> None:
    # Given a key id made at a known millisecond
    made = new_key_id(1_785_412_084_652)
    # Then it is key_ and 32 lowercase hex digits, the first twelve being the time
    assert KEY_ID_PATTERN.match(made)
    assert int(made[4:16], 16) == 1_785_412_084_652


def test_key_ids_sort_by_age() -> None:
    # Given key ids made at increasing times (including across a hex-digit carry)
    times = [0, 1, 15, 16, 255, 256, 1_785_412_084_652, 1_785_412_084_653, 16**11]
    made = [new_key_id(t) for t in times]
    # When sorted as strings
    # Then they come out in time order
    assert sorted(made) == made


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "0" * 32, True),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "f" * 32, True),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "F" * 32, False),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "0" * 31, False),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "0" * 33, False),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "g" * 32, False),
        (CHECKPOINT_ID_PATTERN, "ckpt-" + "0" * 32, False),
        (CHECKPOINT_ID_PATTERN, "ckpt_" + "0" * 32 + "\n", False),
        (CHECKPOINT_ID_PATTERN, "key_" + "0" * 32, False),
        (KEY_ID_PATTERN, "key_" + "0" * 32, True),
        (KEY_ID_PATTERN, "key_" + "A" * 32, False),
        (KEY_ID_PATTERN, "key_" + "0" * 31, False),
        (KEY_ID_PATTERN, "ckpt_" + "0" * 32, False),
        (KEY_ID_PATTERN, "key_" + "0" * 32 + "\n", False),
    ],
)
def test_id_patterns_accept_exactly_the_minted_shapes(pattern: re.Pattern[str], value: str, matches: bool) -> None:
    # Given an id pattern and a candidate
    # When it is matched (as routes validate path parameters)
    # Then only the exact shape passes
    assert (pattern.match(value) is not None) is matches
