"""How a canonical state is stored: packed with zstd and a dictionary shipped in the package, or as its text.

A stored packed state is bytes whose first byte names the codec, so a codec or a dictionary can change without
a migration: items keep the byte they were written with, and every byte ever written stays decodable.

| byte    | codec                                                                                           |
|---------|-------------------------------------------------------------------------------------------------|
| `\\x01` | Brotli, text mode (written until issue 7; decoded only)                                         |
| `\\x02` | zstd, dictionary #1 (`state.zdict`, SHA-256 pinned below), content size and checksum; any level |

Why zstd with a dictionary: `bench/studies/codec_study.py` prints every candidate (zlib; Brotli text mode, qualities 4
to 10; zstd levels 1-9 with no dictionary and with dictionaries of 16, 32, 64, 110 and 256 KB) on the
benchmark's seeded states. Ratio is packed / canonical bytes; times are medians on a shared 2-core machine:

| codec                          | 1 KB conv. | 32 KB conv. | 32 KB task | encode 32 KB | decode 32 KB |
|--------------------------------|-----------|-------------|------------|--------------|--------------|
| Brotli q10 text (before)       | 0.447     | 0.293       | 0.286      | ~16 ms       | 0.10 ms      |
| Brotli q5 / q6 text            | 0.487     | 0.326 / 0.324 | 0.321 / 0.320 | 0.8-1.4 ms | 0.12 ms    |
| zstd 3, no dictionary          | 0.588     | 0.357       | 0.353      | 0.14 ms      | 0.04 ms      |
| zstd 6, no dictionary          | 0.578     | 0.340       | 0.336      | 0.45 ms      | 0.04 ms      |
| zstd 3, 110 KB dictionary      | 0.417     | 0.324       | 0.319      | 0.19 ms      | 0.04 ms      |
| zstd 6, 110 KB dictionary      | 0.386     | 0.304       | 0.301      | 0.61 ms      | 0.05 ms      |
| zstd 5, 256 KB dictionary      | 0.371     | 0.304       | 0.299      | 0.40 ms      | 0.05 ms      |
| **zstd 6, 256 KB dictionary**  | 0.364     | **0.296**   | **0.291**  | 0.61 ms      | 0.06 ms      |

The save budget (performance.md) is 2 ms of own CPU for a 32 KB state with the whole item at most a third of the
canonical bytes; the item carries a few hundred bytes besides the state, so the state must pack to about 0.30.
Nothing without a dictionary gets there under 15 ms (Brotli q7-q9: 0.323-0.324). With one, level 6 and the
256 KB dictionary is the fastest that does (the 110 KB one needs level 7, 0.79 ms). Level 5 would save 0.2 ms but
store 0.8% of the canonical bytes more, and bytes cost more than CPU: 0.8% of 32 KB is a quarter of a write unit
per save on average, as much as ~6 ms of arm64 Lambda time at 1,769 MB (on-demand prices). A larger dictionary buys
nothing more (384 KB and 512 KB measured: 0.294 and 0.293). The level is not part of the format: `LEVEL` can
change without a new codec byte, and a LangGraph thread's values over 16 KB are packed at `BIG_LEVEL` (3; see
`BIG_VALUE_BYTES` why). Small states gain most: a 1 KB state packs to 0.36, against 0.59 for zstd alone and 0.49
for Brotli q6. The dictionary is trained offline by `bench/tools/train_dictionary.py` on agent-state JSON whose text is
disjoint from the benchmark's, but like it English about programming: on a conversation of other text (release notes,
licence prose) it packs 32 KB to 0.320 (zstd 6 alone: 0.360, Brotli q6: 0.344).

When the text is stored as is (`encode` returns None): states under `MIN_BYTES`, whose item fits one 1 KB write
unit whatever the codec does (packing would only add CPU to their saves and reads, and load zstandard on a cold
path), and states that do not shrink by at least `MIN_SAVING` (random bytes, already-compressed payloads).

Cold costs, all on the first save that packs a state (none at import): `import zstandard` 0.8 ms once the handler
and boto3 are loaded (17 ms in a bare interpreter, mostly `typing` and `platform`), reading and hashing the
dictionary 0.8 ms, building its level-6 tables 2-5 ms; a fresh process packs its first 32 KB state in about 8 ms
and unpacks its first in about 4 ms.

Threads: `baton serve` runs handlers on threads, and a zstd (de)compressor must not be used by two at once. Each
call takes an idle one from a free list, or makes one when none is idle (cheap: the dictionary's tables are shared
and read-only once built), and gives it back: a single-threaded Lambda reuses one forever, concurrent threads never
share one, and the list holds at most as many as ever ran at once. A lock costs the same per call (17 µs for a
1 KB state either way, `codec_study.py --threads`) but serializes the compressions, which python-zstandard runs
with the GIL released; a thread-local would also do, but would allocate a context (up to 3 MB after a 64 KB
state) for each of `baton serve`'s short-lived connection threads where the free list reuses them.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import zstandard

BROTLI: Final = b"\x01"
"""Brotli in text mode: what states were packed with before the dictionary (decoded, never written)."""
ZSTD_DICTIONARY_1: Final = b"\x02"
"""zstd with dictionary #1 (`state.zdict`), at `LEVEL`."""

LEVEL: Final = 6
BIG_LEVEL: Final = 3
BIG_STATE_BYTES: Final = 128 * 1024
"""States over this many canonical bytes are packed at `BIG_LEVEL`: they go to the bucket (a realistic 128 KB state
packs to about 31 KB at level 6, past the item's 16 KB), where a byte more costs nothing per write, and level 3 is
four times faster on them (2 MB: 4.9 ms and 0.103 of the bytes, against 19 ms and 0.086 at level 6)."""
BIG_VALUE_BYTES: Final = 16 * 1024
"""A LangGraph thread's values over this many bytes are packed at `BIG_LEVEL` (`encode_value`); smaller ones, and
checkpoints, at `LEVEL`. A big value gets an item of its own, written once, and level 3 packs it 2.5 times faster
for 8% more bytes: the benchmark graph's 32,140 B `messages` value packs to 10,265 B in 434 µs at level 6 and to
11,056 B in 171 µs at level 3 (a thread put's CPU is held to at most twice a bare PutItem of its item,
performance.md). A small value rides in its checkpoint's item, which every pending write of the checkpoint
rewrites, so its bytes cost more than once: level 3 saved 43 µs on the graph's 5,711 B value (61 -> 18 µs) but
stored 239 B more, and a graph step at 6 KB took 0.8 write units more (13.5 -> 14.3, `bench/report.md`)."""
MIN_BYTES: Final = 512
"""Below this a state is stored as its text: with the item's other attributes (a few hundred bytes) it fits one
1 KB write unit either way."""
MIN_SAVING: Final = 0.1
"""Packed only when that saves at least this share of the bytes: every read pays to inflate."""

DICTIONARY: Final = Path(__file__).with_name("state.zdict")
DICTIONARY_SHA256: Final = "92828acfe5f3044c90fe447ee466e5e119572991430b1d0551e96167871c34eb"
"""The dictionary every `\\x02` item was packed with: a different file would make them undecodable, so a
changed file is refused at first use (a new dictionary gets a new codec byte instead)."""


class _Zstd:
    """The dictionary, its compression tables, and idle (de)compressors for any thread to borrow."""

    def __init__(self) -> None:
        import zstandard  # only a state being packed or unpacked pays for the import

        data = DICTIONARY.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != DICTIONARY_SHA256:
            raise RuntimeError(f"{DICTIONARY} has SHA-256 {digest}, not the pinned {DICTIONARY_SHA256}")
        self.zstandard = zstandard
        self._data = data
        self.dictionary = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
        # One dictionary object per compression level: precomputing a level's tables replaces the object's tables,
        # which compressors of another level still point at (python-zstandard frees them: a crash, not an error).
        self._compression_dictionaries: dict[int, zstandard.ZstdCompressionDict] = {}
        self._decoding_tables_built = False
        self._lock = threading.Lock()
        # list.pop() and list.append() are atomic: a borrowed object is never in two threads' hands.
        self._compressors: dict[int, list[zstandard.ZstdCompressor]] = {LEVEL: [], BIG_LEVEL: []}
        self._decompressors: list[zstandard.ZstdDecompressor] = []

    def _new_compressor(self, level: int) -> zstandard.ZstdCompressor:
        with self._lock:
            dictionary = self._compression_dictionaries.get(level)
            if dictionary is None:
                # Built once per level and shared: each compressor then references them instead of rebuilding them.
                dictionary = self.zstandard.ZstdCompressionDict(self._data, dict_type=self.zstandard.DICT_TYPE_FULLDICT)
                dictionary.precompute_compress(level=level)
                self._compression_dictionaries[level] = dictionary
        return self.zstandard.ZstdCompressor(
            level=level,
            dict_data=dictionary,
            write_checksum=True,  # 4 bytes: a decode returns the exact text or fails
            write_content_size=True,  # decode refuses a frame that does not say its size
            write_dict_id=False,  # the codec byte names the dictionary
        )

    def _new_decompressor(self) -> zstandard.ZstdDecompressor:
        decompressor = self.zstandard.ZstdDecompressor(dict_data=self.dictionary)
        with self._lock:
            if not self._decoding_tables_built:
                # The dictionary's decoding tables are built by the first decompression of any decompressor using
                # it, with the GIL released and no lock (python-zstandard's `ensure_ddict`): two threads there would
                # both build them. Build them here, once.
                decompressor.decompress(_TWO_BYTES_FRAME)
                self._decoding_tables_built = True
        return decompressor

    def prepare(self) -> None:
        """An idle compressor at each level and an idle decompressor, if there is none yet."""
        for level, idle in self._compressors.items():
            if not idle:
                idle.append(self._new_compressor(level))
        if not self._decompressors:
            self._decompressors.append(self._new_decompressor())

    def compress(self, text: bytes, level: int) -> bytes:
        idle = self._compressors[level]
        try:
            compressor = idle.pop()
        except IndexError:
            compressor = self._new_compressor(level)
        try:
            return compressor.compress(text)
        finally:
            idle.append(compressor)

    def decompress(self, frame: memoryview, limit: int) -> bytes:
        zstandard = self.zstandard
        try:
            size = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as exc:
            raise ValueError(f"corrupt zstd state: {exc}") from None
        if size < 0:
            raise ValueError("zstd state without its content size")
        if size > limit:
            raise ValueError(f"zstd state inflates to {size} bytes, over the limit of {limit}")
        try:
            decompressor = self._decompressors.pop()
        except IndexError:
            decompressor = self._new_decompressor()
        try:
            # The output buffer is the size the frame declares (checked above); a frame holding more data than it
            # declares fails instead of growing it.
            return decompressor.decompress(frame, max_output_size=limit, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise ValueError(f"corrupt zstd state: {exc}") from None
        finally:
            self._decompressors.append(decompressor)


_TWO_BYTES_FRAME: Final = bytes.fromhex("28b52ffd20021100007b7d")
"""A zstd frame of `{}`: decoding it makes a decompressor build the dictionary's tables."""

_zstd: _Zstd | None = None
_zstd_lock = threading.Lock()


def _codec() -> _Zstd:
    global _zstd
    if _zstd is None:
        with _zstd_lock:
            if _zstd is None:
                _zstd = _Zstd()
    return _zstd


def prepare() -> None:
    """Load the dictionary and build what the first packed state and the first unpacked one would (a compressor
    at each level, its tables precomputed, ~2 ms at level 6; the decoding tables): SnapStart's snapshot holds them
    (`handlers/snapstart.py`)."""
    _codec().prepare()


def encode(text: bytes) -> bytes | None:
    """The stored form of a canonical state (codec byte, then the packed bytes), or None when storing `text` as
    is pays better: under `MIN_BYTES`, or saving less than `MIN_SAVING` of it."""
    return _encode(text, BIG_LEVEL if len(text) > BIG_STATE_BYTES else LEVEL)


def encode_value(text: bytes) -> bytes | None:
    """`encode` for a LangGraph thread's value: at `BIG_LEVEL` over `BIG_VALUE_BYTES` (see there why)."""
    return _encode(text, BIG_LEVEL if len(text) > BIG_VALUE_BYTES else LEVEL)


def _encode(text: bytes, level: int) -> bytes | None:
    if len(text) < MIN_BYTES:
        return None
    packed = ZSTD_DICTIONARY_1 + _codec().compress(text, level)
    if len(packed) > len(text) * (1 - MIN_SAVING):
        return None
    return packed


def is_packed(stored: bytes) -> bool:
    """True when `stored` is packed (it starts with a codec byte; canonical JSON text starts with none of them)."""
    return stored[:1] in (ZSTD_DICTIONARY_1, BROTLI)


def decode(stored: bytes, limit: int) -> bytes:
    """The canonical state back from its stored form, inflating at most `limit` bytes.

    Raises ValueError for an unknown codec byte, a corrupt stream, or one that would inflate past `limit` (a
    corrupt or hostile item is refused before its output is allocated, or as soon as it overflows).
    """
    codec = stored[:1]
    body = memoryview(stored)[1:]
    if codec == ZSTD_DICTIONARY_1:
        return _codec().decompress(body, limit)
    if codec == BROTLI:
        return _brotli_decode(body, limit)
    raise ValueError(f"unknown state codec {codec!r}")


def _brotli_decode(body: memoryview, limit: int) -> bytes:
    import brotli

    decompressor = brotli.Decompressor()
    try:
        # The output stops growing at the limit (plus at most one step of its growth); a stream longer than that
        # is refused rather than inflated.
        text: bytes = decompressor.process(body, output_buffer_limit=limit + 1)
    except brotli.error as exc:
        raise ValueError(f"corrupt Brotli state: {exc}") from None
    if len(text) > limit:
        raise ValueError(f"Brotli state inflates past the limit of {limit} bytes")
    if not decompressor.is_finished():
        raise ValueError("corrupt Brotli state: truncated")
    return text
