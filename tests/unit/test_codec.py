"""The state codec (`baton_checkpoints.store.codec`): what it stores, what it reads back, and what it refuses.

Counts only, no timings: the ratio on the benchmark's fixed 32 KB conversation is a byte count.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import threading
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import brotli
import pytest
import zstandard
from bench.harness.states import conversation_state, task_state
from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.domain.canonical import canonical_json
from baton_checkpoints.store import codec
from tests import proof_counts
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
TRIED: Counter[str] = Counter()
LIMIT = 64_000
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

LEGACY_ITEM = bytes.fromhex(
    "011b680200c42f6dfbaadd791512f02acc55bf14ef7e38b75df04c5c8ee0c16cac416bd09cf6f7161558177551e75117a553772c2"
    "61ebe22b4949d04a73e40ea0efaff81016f8ac6548feb829373f0ff0a8aba6833928485a9681f72b59e7b415f2cfbdb110bbff763d"
    "7779c504069715d42215916349a1c6e60558c95811b30170d1d9f050ad275b51705750d096b5f08a11fa09483c6c320212f1b68328"
    "0d337b050688326024898f21a36fab00a450c8d4bf43601c55b6f8505ba608f30ad3849b932dedc047a22f26caa4d4b44a4894d0eb"
    "d24973a841383d54fa13a068ab6ade53c0c1c186f7635b0531f8d803919c5556fc912c8893d69de91e3d076bd316da2c0e46c7274f"
    "0e8ec4007fef2a447c9b54f22617712bdd048630a4f222abc77e491aa16b47bb0a6cfd7c3604df033b09268a24f7ab44e97b2fd618"
    "f0a4d17273534b25e16fb0e299997297cf7241fbdf50616"
)
"""A state as the Brotli codec stored it before issue 7 (`compress_state`, quality 6, text mode), frozen here so
that the test does not depend on today's Brotli encoder."""
LEGACY_STATE: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": "Summarise the failing tests in tests/test_api.py and propose a fix."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "open_file", "arguments": json.dumps({"path": "tests/test_api.py"})},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": 'def test_create(client):\n    response = client.post("/items", json={"name": "x"})\n'
            "    assert response.status_code == 201\n",
        },
        {
            "role": "assistant",
            "content": "The test expects 201 Created but the handler answers 200 OK; return 201 from create_item.",
        },
    ],
    "model": "gpt-4o",
    "thread_id": "thr_01",
}


@pytest.fixture(autouse=True, scope="module")
def _record_counts() -> Iterator[None]:
    yield
    proof_counts.record("codec", **TRIED)


@cache
def seeded(shape: str, target: int) -> bytes:
    """Canonical JSON of the benchmark's seeded state."""
    make = conversation_state if shape == "conversation" else task_state
    return canonical_json(make(target, 7))


# -- what is stored ---------------------------------------------------------------------------------------------


def test_the_32_kb_conversation_is_stored_in_at_most_0_30_of_its_canonical_bytes() -> None:
    text = seeded("conversation", 32_000)
    packed = codec.encode(text)
    assert packed is not None
    # The item also carries a few hundred bytes of attributes and must stay under a third of the canonical size.
    assert len(packed) <= 0.30 * len(text), (len(packed), len(text))


@pytest.mark.parametrize("shape", ["conversation", "task"])
@pytest.mark.parametrize("target", [1_000, 4_000, 32_000, 64_000])
def test_seeded_states_round_trip_within_their_own_size(shape: str, target: int) -> None:
    text = seeded(shape, target)
    packed = codec.encode(text)
    assert packed is not None
    assert packed[:1] == codec.ZSTD_DICTIONARY_1
    assert len(packed) < len(text) / 2
    assert codec.decode(packed, limit=len(text)) == text
    with pytest.raises(ValueError, match="over the limit"):
        codec.decode(packed, limit=len(text) - 1)
    TRIED["seeded_round_trips"] += 1


def test_a_packed_state_is_a_standard_zstd_frame_that_stock_tools_decode_with_the_dictionary() -> None:
    # Given a packed state, its codec byte stripped (what `zstd -d -D state.zdict` would be handed)
    text = seeded("task", 4_000)
    packed = codec.encode(text)
    assert packed is not None
    frame = packed[1:]
    # Then it is a plain zstd frame: magic, declared size and checksum, no dictionary id (the codec byte names it)
    assert frame[:4] == ZSTD_MAGIC
    parameters = zstandard.get_frame_parameters(frame)
    assert (parameters.content_size, parameters.has_checksum, parameters.dict_id) == (len(text), True, 0)
    dictionary = zstandard.ZstdCompressionDict(codec.DICTIONARY.read_bytes())
    assert zstandard.ZstdDecompressor(dict_data=dictionary).decompress(frame) == text


def test_small_states_are_stored_as_text() -> None:
    text = canonical_json({"messages": [{"role": "user", "content": "hello " * 80}]})
    assert len(text) >= codec.MIN_BYTES  # compressible, and big enough to be packed
    assert codec.encode(text) is not None
    shortest = text[: codec.MIN_BYTES - 1]
    assert codec.encode(shortest) is None
    assert codec.encode(b"{}") is None
    assert codec.encode(b"") is None


def test_a_state_that_does_not_shrink_enough_is_stored_as_text() -> None:
    noise = random.Random(11).randbytes(4_000)  # incompressible: what a state of random bytes would be
    assert codec.encode(noise) is None
    # Random hex (4 bits of information per byte) still saves far more than the minimum
    hex_text = json.dumps({"ids": random.Random(12).randbytes(2_000).hex()}).encode()
    packed = codec.encode(hex_text)
    assert packed is not None
    assert len(packed) <= len(hex_text) * (1 - codec.MIN_SAVING)


# -- the dictionary ---------------------------------------------------------------------------------------------


def test_the_shipped_dictionary_is_the_pinned_one() -> None:
    data = codec.DICTIONARY.read_bytes()
    assert hashlib.sha256(data).hexdigest() == codec.DICTIONARY_SHA256
    # The id written by bench/tools/train_dictionary.py ("BAT" and dictionary number 1)
    assert zstandard.ZstdCompressionDict(data).dict_id() == 0x4241_5401


def test_a_changed_dictionary_file_is_refused_at_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    changed = bytearray(codec.DICTIONARY.read_bytes())
    changed[-1] ^= 0xFF
    path = tmp_path / "state.zdict"
    path.write_bytes(bytes(changed))
    monkeypatch.setattr(codec, "DICTIONARY", path)
    monkeypatch.setattr(codec, "_zstd", None)  # as in a fresh process
    with pytest.raises(RuntimeError, match="pinned"):
        codec.encode(seeded("conversation", 4_000))


# -- legacy items -----------------------------------------------------------------------------------------------


def test_an_item_stored_by_the_brotli_codec_still_decodes() -> None:
    assert codec.decode(LEGACY_ITEM, limit=LIMIT) == canonical_json(LEGACY_STATE)


@pytest.mark.parametrize(("target", "quality"), [(4_000, 6), (32_000, 10)])
def test_brotli_items_of_either_former_quality_decode(target: int, quality: int) -> None:
    # The former codec used quality 6 below 16 KB and 10 from there, in text mode
    text = seeded("conversation", target)
    stored = codec.BROTLI + brotli.compress(text, quality=quality, mode=brotli.MODE_TEXT)
    assert codec.decode(stored, limit=len(text)) == text
    with pytest.raises(ValueError, match="limit"):
        codec.decode(stored, limit=len(text) - 1)


def test_a_truncated_brotli_item_is_refused() -> None:
    with pytest.raises(ValueError, match=r"truncated|corrupt"):
        codec.decode(LEGACY_ITEM[:-8], limit=LIMIT)


# -- what is refused --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stored", [b"", b"\x00abc", b"\x03" + ZSTD_MAGIC, b"\xff", b'{"role":"user"}'])
def test_an_unknown_codec_byte_is_refused(stored: bytes) -> None:
    with pytest.raises(ValueError, match="unknown state codec"):
        codec.decode(stored, limit=LIMIT)


def test_bytes_after_the_frame_are_refused() -> None:
    packed = codec.encode(seeded("task", 4_000))
    assert packed is not None
    with pytest.raises(ValueError, match="unused data"):
        codec.decode(packed + b"\x00", limit=LIMIT)


def _peak_bytes_while(stored: bytes, reason: str) -> int:
    """Peak memory Python's allocators saw while decoding `stored` (which must be refused for `reason`)."""
    codec.encode(seeded("task", 1_000))  # the dictionary is loaded before measuring
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=reason):
            codec.decode(stored, limit=LIMIT)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_zstd_bomb_declaring_its_size_is_refused_before_inflating() -> None:
    bomb = codec.ZSTD_DICTIONARY_1 + zstandard.ZstdCompressor().compress(b"\0" * 50_000_000)
    assert len(bomb) < 2_000
    assert _peak_bytes_while(bomb, "inflates to 50000000 bytes, over the limit") < LIMIT


def test_a_zstd_stream_that_does_not_declare_its_size_is_refused() -> None:
    bomb = codec.ZSTD_DICTIONARY_1 + zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 10_000_000)
    assert _peak_bytes_while(bomb, "without its content size") < LIMIT


def test_a_zstd_frame_holding_more_than_it_declares_stops_at_the_declared_size() -> None:
    # Given a frame of 10 MB of zeros whose header is rewritten to declare 1,000 bytes (a 2-byte content size field)
    frame = zstandard.ZstdCompressor(write_content_size=False, write_checksum=False).compress(b"\0" * 10_000_000)
    assert frame[:5] == ZSTD_MAGIC + b"\x00"  # no content size, window descriptor follows
    lying = ZSTD_MAGIC + bytes([0x40, frame[5]]) + (1_000 - 256).to_bytes(2, "little") + frame[6:]
    assert zstandard.get_frame_parameters(lying).content_size == 1_000
    # Then decoding fails without ever holding more than the declared size
    assert _peak_bytes_while(codec.ZSTD_DICTIONARY_1 + lying, "corrupt zstd state") < LIMIT


def test_a_brotli_bomb_is_refused_at_the_limit() -> None:
    bomb = codec.BROTLI + brotli.compress(b"\0" * 50_000_000, quality=3)
    assert len(bomb) < 200
    # The output stops growing at the limit (one growth step past it at most)
    assert _peak_bytes_while(bomb, "past the limit") < 3 * LIMIT


# -- properties -------------------------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
_keys = st.one_of(st.sampled_from(["role", "content", "tool_calls", "id", "status", "steps", "name"]), _text)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _text,
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(_keys, inner, max_size=8),
    max_leaves=60,
)
_words = st.sampled_from(["the", "agent", "tool", "call", "returns", "a", "list", "of", "steps", "status", "done"])
_conversation = st.fixed_dictionaries(
    {
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant", "tool"]),
                    "content": st.lists(st.one_of(_words, _words, _words, _text), max_size=80).map(" ".join),
                },
                optional={"tool_call_id": _text, "name": _text},
            ),
            min_size=1,
            max_size=40,
        ),
    },
    optional={"model": _text, "thread_id": _text},
)


@settings(PROFILE, max_examples=examples(200))
@given(_json | _conversation)
def test_any_json_state_round_trips_or_is_stored_as_text(value: Any) -> None:
    text = canonical_json(value)
    packed = codec.encode(text)
    if packed is None:
        TRIED["json_kept_as_text"] += 1
        return
    TRIED["json_round_trips"] += 1
    assert len(packed) <= len(text) * (1 - codec.MIN_SAVING)
    assert codec.decode(packed, limit=len(text)) == text


@settings(PROFILE, max_examples=examples(100))
@given(st.binary(min_size=codec.MIN_BYTES, max_size=8_000))
def test_any_bytes_round_trip_or_are_stored_as_they_are(data: bytes) -> None:
    packed = codec.encode(data)
    TRIED["bytes_tried"] += 1
    if packed is not None:
        TRIED["bytes_round_trips"] += 1
        assert codec.decode(packed, limit=len(data)) == data


_VALID = codec.encode(seeded("conversation", 4_000))
assert _VALID is not None


@settings(PROFILE, max_examples=examples(300))
@given(
    st.one_of(
        st.binary(max_size=400).map(lambda tail: codec.ZSTD_DICTIONARY_1 + tail),
        st.binary(max_size=400).map(lambda tail: codec.BROTLI + tail),
        st.tuples(st.integers(1, len(_VALID) - 1), st.integers(1, 255)).map(
            lambda flip: _VALID[: flip[0]] + bytes([_VALID[flip[0]] ^ flip[1]]) + _VALID[flip[0] + 1 :]
        ),
        st.integers(1, len(_VALID) - 1).map(lambda cut: _VALID[:cut]),
    )
)
def test_a_corrupt_item_is_refused_with_value_error_or_decodes_within_the_limit(stored: bytes) -> None:
    TRIED["corrupt_items"] += 1
    try:
        text = codec.decode(stored, limit=LIMIT)
    except ValueError:
        pass
    else:
        assert len(text) <= LIMIT
    # A failed decode leaves nothing behind: the (pooled) decompressor that saw it still decodes a good item
    assert codec.decode(_VALID, limit=LIMIT) == seeded("conversation", 4_000)


# -- threads and imports ----------------------------------------------------------------------------------------


def test_threads_packing_and_unpacking_at_once_each_get_their_own_bytes_back() -> None:
    texts = [seeded(shape, target) for shape in ("conversation", "task") for target in (1_000, 4_000, 16_000, 32_000)]
    barrier = threading.Barrier(4)
    failures: list[str] = []

    def work(offset: int) -> None:
        barrier.wait()
        for round_ in range(12):
            text = texts[(offset + round_) % len(texts)]
            packed = codec.encode(text)
            if packed is None or codec.decode(packed, limit=len(text)) != text:
                failures.append(f"thread {offset} round {round_}")

    workers = [threading.Thread(target=work, args=(offset,)) for offset in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    TRIED["threaded_round_trips"] += 4 * 12


def test_importing_the_codec_or_keeping_a_small_state_as_text_loads_no_compression_library() -> None:
    script = (
        "import sys\n"
        "from baton_checkpoints.store import codec\n"
        'assert codec.encode(b\'{"role":"user","content":"hi"}\') is None\n'
        "print(sorted(m for m in ('zstandard', 'brotli') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_big_and_small_states_packed_in_turn_round_trip() -> None:
    # Given states on both sides of the big-state level (each level has its own compression tables)
    small = json.dumps({"text": "agent state " * 300}).encode()
    big = json.dumps({"text": [f"step {i} of the plan, done" for i in range(12_000)]}).encode()
    assert len(small) < codec.BIG_STATE_BYTES < len(big)
    # When they are packed in turn, several times (a level's tables must never replace the other's)
    for _ in range(3):
        for text in (big, small, big, small):
            packed = codec.encode(text)
            # Then each unpacks to its text
            assert packed is not None
            assert codec.decode(packed, limit=len(text)) == text
