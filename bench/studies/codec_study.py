"""Which codec Baton stores checkpoint states with: every candidate on the benchmark's seeded states.

For each candidate and each state (`conversation_state` and `task_state` of `bench/harness/states.py`, seed 7, at 1, 4,
32 and 256 KB of canonical JSON) it prints the ratio (compressed bytes / canonical bytes; the ratio counts no
codec byte) and the median encode and decode times in µs. Candidates: zlib 6 for reference, Brotli in text mode
at qualities 4 to 9 (and 10, what Baton used before), zstd levels 1 to 9 without a dictionary and with
dictionaries of 16, 32, 64, 110 and 256 KB trained by `bench/tools/train_dictionary.py` (the 256 KB one is the shipped
`state.zdict`, checked byte for byte).

A last column gives each codec's ratio at 32 KB on a conversation built the same way from text neither the
dictionaries nor the benchmark have seen (Python's `LICENSE.txt` and IDLE's `*.txt` notes: release notes and
legal prose rather than reference-manual prose). Dictionaries are trained on standard-library docstrings, closer
to the benchmark's text than most agents' text is, so that column says how much of the gain is only theirs.

`--threads` compares the ways threads can share zstd contexts (a lock, a thread-local, a free list); `--cold`
measures the cold costs (`import zstandard`, the first encode and decode) in fresh interpreters.
`chosen_figures()` returns the figures of the codec Baton ships (`baton_checkpoints.store.codec`), for the benchmark
report.

Usage: `python -m bench.studies.codec_study [--quick] [--threads] [--cold]` (about 40 s on a 2-core machine;
`--quick` 15 s). Timings come from a shared machine: compare them within one run, not across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from baton_checkpoints.domain.canonical import canonical_json
from bench.harness import states
from bench.paths import with_repo_path

SIZES = (1_000, 4_000, 32_000, 256_000)
SHAPES: dict[str, Callable[[int, int], dict[str, Any]]] = {
    "conversation": states.conversation_state,
    "task": states.task_state,
}
SEED = 7
DICTIONARY_SIZES = (16_384, 32_768, 65_536, 112_640, 262_144)
ZSTD_LEVELS = range(1, 10)
REPEATS = {1_000: 200, 4_000: 100, 32_000: 30, 256_000: 6}
"""Timed calls per state: enough for a stable median, few enough for the slow candidates at 256 KB."""
OTHER_TEXT = ("LICENSE.txt", "idlelib/NEWS.txt", "idlelib/NEWS2x.txt", "idlelib/HISTORY.txt", "idlelib/README.txt")


@dataclass(frozen=True)
class Candidate:
    """A codec under study: how it packs and unpacks."""

    name: str
    encode: Callable[[bytes], bytes]
    decode: Callable[[bytes], bytes]


@dataclass(frozen=True)
class Measured:
    """One candidate on one state."""

    canonical_bytes: int
    packed_bytes: int
    encode_us: float
    decode_us: float

    @property
    def ratio(self) -> float:
        return self.packed_bytes / self.canonical_bytes


@cache
def state_text(shape: str, target: int) -> bytes:
    """Canonical JSON of the benchmark's seeded state."""
    return canonical_json(SHAPES[shape](target, SEED))


@contextmanager
def other_text() -> Iterator[None]:
    """While inside, `bench/harness/states.py` draws its passages from `OTHER_TEXT` instead of the Python reference."""
    root = Path(sysconfig.get_paths()["stdlib"])
    paragraphs = tuple(
        block.strip("\n")
        for name in OTHER_TEXT
        for block in (root / name).read_text(encoding="utf-8").split("\n\n")
        if len(block.strip()) >= states.MIN_FILL_CHARS
    )
    original = states._paragraphs
    states._paragraphs = lambda: paragraphs  # type: ignore[assignment]
    try:
        yield
    finally:
        states._paragraphs = original


@cache
def other_conversation() -> bytes:
    """A 32 KB conversation shaped like the benchmark's, with text neither the dictionary nor the bench uses."""
    with other_text():
        return canonical_json(states.conversation_state(32_000, SEED))


def _median_us(call: Callable[..., object], repeats: int) -> float:
    """Median µs of `call()` (`...`: a lambda binding a loop's variable as a default argument, called with none)."""
    call()  # warm: a first call builds contexts and tables
    times = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


def measure(candidate: Candidate, text: bytes, repeats: int) -> Measured:
    """Ratio and median times of `candidate` on `text`; checks the round trip."""
    packed = candidate.encode(text)
    if candidate.decode(packed) != text:
        raise AssertionError(f"{candidate.name} does not round-trip")
    return Measured(
        canonical_bytes=len(text),
        packed_bytes=len(packed),
        encode_us=_median_us(lambda: candidate.encode(text), repeats),
        decode_us=_median_us(lambda: candidate.decode(packed), repeats),
    )


def dictionaries() -> dict[int, bytes]:
    """The dictionaries under study, trained on one corpus; the shipped one must be among them, byte for byte."""
    from baton_checkpoints.store import codec
    from bench.tools import train_dictionary

    samples = train_dictionary.training_samples()
    built = {size: train_dictionary.build(size, samples) for size in DICTIONARY_SIZES}
    if codec.DICTIONARY.read_bytes() not in built.values():
        raise AssertionError(f"{codec.DICTIONARY} is none of the dictionaries this corpus trains")
    return built


def candidates(trained: dict[int, bytes], quick: bool = False) -> list[Candidate]:
    """Every codec under study."""
    import brotli
    import zstandard

    found = [Candidate("zlib 6", lambda t: zlib.compress(t, 6), zlib.decompress)]
    for quality in (4, 5, 6, 7, 8, 9, 10):

        def brotli_encode(text: bytes, quality: int = quality) -> bytes:
            return bytes(brotli.compress(text, quality=quality, mode=brotli.MODE_TEXT))

        found.append(Candidate(f"Brotli q{quality} text", brotli_encode, brotli.decompress))
    levels = (1, 3, 5, 6, 9) if quick else ZSTD_LEVELS
    for size, data in [(0, b""), *trained.items()]:
        for level in levels:
            dictionary = zstandard.ZstdCompressionDict(data) if data else None
            if dictionary is not None:
                dictionary.precompute_compress(level=level)
            compressor = zstandard.ZstdCompressor(
                level=level, dict_data=dictionary, write_checksum=True, write_dict_id=False
            )
            decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
            label = f"zstd {level}, " + (f"{round(size / 1024)} KB dict" if size else "no dict")
            found.append(Candidate(label, compressor.compress, decompressor.decompress))
    return found


def study(quick: bool = False) -> str:
    """The comparison table, as Markdown."""
    started = time.perf_counter()
    trained = dictionaries()
    lines = [
        "Ratio = compressed / canonical bytes; enc / dec = median µs per call. "
        f"Seed {SEED}; dictionaries trained in {time.perf_counter() - started:.1f} s.",
    ]
    other = other_conversation()
    sizes = SIZES[:3] if quick else SIZES
    for shape in SHAPES:
        head = " | ".join(f"{round(len(state_text(shape, s)) / 1000)} KB: ratio · enc · dec" for s in sizes)
        lines += ["", f"### {shape}", "", f"| codec | {head} | 32 KB other text |", "|---" * (len(sizes) + 2) + "|"]
        for candidate in candidates(trained, quick):
            cells = []
            for size in sizes:
                repeats = REPEATS[size] // (3 if quick else 1) or 1
                found = measure(candidate, state_text(shape, size), repeats)
                cells.append(f"{found.ratio:.3f} · {found.encode_us:,.0f} · {found.decode_us:,.0f}")
            held_out = len(candidate.encode(other)) / len(other)
            lines.append(f"| {candidate.name} | {' | '.join(cells)} | {held_out:.3f} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


# -- threads ----------------------------------------------------------------------------------------------------


def thread_study(calls: int = 100, rounds: int = 7) -> str:
    """Per-call time and two-thread speed-up of three ways to share zstd compressors between threads."""
    import zstandard

    from baton_checkpoints.store import codec

    dictionary = zstandard.ZstdCompressionDict(codec.DICTIONARY.read_bytes())
    dictionary.precompute_compress(level=codec.LEVEL)

    def new() -> zstandard.ZstdCompressor:
        return zstandard.ZstdCompressor(level=codec.LEVEL, dict_data=dictionary, write_checksum=True)

    shared = new()
    lock = threading.Lock()

    def with_lock(text: bytes) -> bytes:
        with lock:
            return shared.compress(text)

    local = threading.local()

    def thread_local(text: bytes) -> bytes:
        compressor = getattr(local, "compressor", None)
        if compressor is None:
            compressor = local.compressor = new()
        return compressor.compress(text)

    idle: list[zstandard.ZstdCompressor] = []

    def free_list(text: bytes) -> bytes:
        try:
            compressor = idle.pop()
        except IndexError:
            compressor = new()
        try:
            return compressor.compress(text)
        finally:
            idle.append(compressor)

    text = state_text("conversation", 32_000)
    small = state_text("conversation", 1_000)
    sharings = {"lock": with_lock, "thread-local": thread_local, "free list": free_list}

    def elapsed(call: Callable[[bytes], bytes], threads: int) -> float:
        """Seconds for `threads` threads to make `calls` calls each (one thread: the same calls in a row)."""

        def run() -> None:
            for _ in range(calls):
                call(text)

        started = time.perf_counter()
        if threads == 1:
            for _ in range(2):
                run()
        else:
            workers = [threading.Thread(target=run) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        return time.perf_counter() - started

    speedups: dict[str, list[float]] = {name: [] for name in sharings}
    for _ in range(rounds):  # interleaved, so that the machine's noise falls on every sharing alike
        for name, call in sharings.items():
            speedups[name].append(elapsed(call, 1) / elapsed(call, 2))
    lines = [
        f"| sharing | 1 KB call µs | 32 KB call µs | 2 threads × {calls} 32 KB calls: speed-up over 1 thread |",
        "|---|---|---|---|",
    ]
    for name, call in sharings.items():
        small_us = _median_us(lambda call=call: call(small), 500)
        large_us = _median_us(lambda call=call: call(text), 50)
        speedup = statistics.median(speedups[name])
        lines.append(f"| {name} | {small_us:.1f} | {large_us:.0f} | {speedup:.2f}× (median of {rounds}) |")
    fresh = _median_us(lambda: new().compress(text), 30)
    lines.append(f"\nA new compressor's first 32 KB call (a thread-local's cost per new thread): {fresh:.0f} µs.")
    return "\n".join(lines)


# -- cold costs -------------------------------------------------------------------------------------------------

_COLD = """
import time, sys
{prelude}
started = time.perf_counter()
{action}
print((time.perf_counter() - started) * 1000)
"""


def _fresh_ms(action: str, prelude: str = "", runs: int = 5) -> float:
    """Median milliseconds `action` takes in fresh interpreters, after `prelude`."""
    script = _COLD.format(prelude=prelude, action=action)
    found = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=with_repo_path(os.environ), check=True
        )
        found.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(found)


_PACK_32K = "from baton_checkpoints.store import codec; from bench.harness.states import conversation_state; "
_PACK_32K += "from baton_checkpoints.domain.canonical "
_PACK_32K += "import canonical_json; text = canonical_json(conversation_state(32_000, 7))"


@dataclass(frozen=True)
class ColdFigures:
    """What the codec adds to a cold process, in milliseconds (medians over fresh interpreters)."""

    import_zstandard: float
    """`import zstandard` in a bare interpreter."""
    import_zstandard_after_handler: float
    """The same once the api handler and boto3 are loaded (what a cold Lambda pays on its first packed state)."""
    first_encode: float
    """The first `codec.encode` of a 32 KB state: import, dictionary read and hash, tables, one compression."""
    first_decode: float
    """The first `codec.decode` of one: import, dictionary read and hash, one decompression."""


def cold_figures(runs: int = 5) -> ColdFigures:
    """Cold costs of the shipped codec."""
    # While the store is being restructured the handler may not import; its heaviest imports stand in for it.
    handler = "import boto3\ntry:\n    import baton_checkpoints.handlers.api\nexcept Exception:\n"
    handler += "    import aws_lambda_powertools.event_handler, pydantic"
    return ColdFigures(
        import_zstandard=_fresh_ms("import zstandard", runs=runs),
        import_zstandard_after_handler=_fresh_ms("import zstandard", prelude=handler, runs=runs),
        first_encode=_fresh_ms("codec.encode(text)", prelude=_PACK_32K, runs=runs),
        first_decode=_fresh_ms("codec.decode(packed, 64_000)", prelude=_decode_prelude(), runs=runs),
    )


def _decode_prelude() -> str:
    """A fresh interpreter holding a packed 32 KB state, zstandard not yet imported (the packed bytes are literal)."""
    from baton_checkpoints.store import codec

    packed = codec.encode(state_text("conversation", 32_000))
    return f"from baton_checkpoints.store import codec\npacked = {packed!r}"


# -- the shipped codec, for the benchmark report --------------------------------------------------------------------


@dataclass(frozen=True)
class StateFigures:
    """The shipped codec on one of the benchmark's states."""

    shape: str
    target_bytes: int
    canonical_bytes: int
    stored_bytes: int
    """What the item holds for the state: the packed bytes with their codec byte, or the text."""
    packed: bool
    encode_us: float
    decode_us: float
    """0 when the state is stored as text."""

    @property
    def ratio(self) -> float:
        return self.stored_bytes / self.canonical_bytes


def chosen_figures(repeats: int = 30) -> list[StateFigures]:
    """`baton_checkpoints.store.codec` on every seeded state: stored bytes, ratio, median encode and decode µs."""
    from baton_checkpoints.store import codec

    found = []
    for shape in SHAPES:
        for target in SIZES:
            text = state_text(shape, target)
            packed = codec.encode(text)
            runs = max(3, repeats * 32_000 // max(target, 32_000))
            encode_us = _median_us(lambda text=text: codec.encode(text), runs)
            decode_us = 0.0
            if packed is not None:
                if codec.decode(packed, len(text)) != text:
                    raise AssertionError("the shipped codec does not round-trip")
                size = len(text)
                decode_us = _median_us(lambda packed=packed, size=size: codec.decode(packed, size), runs)
            found.append(
                StateFigures(
                    shape=shape,
                    target_bytes=target,
                    canonical_bytes=len(text),
                    stored_bytes=len(packed) if packed is not None else len(text),
                    packed=packed is not None,
                    encode_us=encode_us,
                    decode_us=decode_us,
                )
            )
    return found


def chosen_table(figures: list[StateFigures]) -> str:
    """`chosen_figures()` as Markdown."""
    from baton_checkpoints.store import codec

    lines = [
        f"Shipped: zstd level {codec.LEVEL}, dictionary #1 ({codec.DICTIONARY.stat().st_size:,} bytes); "
        f"text as is under {codec.MIN_BYTES} bytes or when packing saves under {codec.MIN_SAVING:.0%}.",
        "",
        "| state | canonical bytes | stored bytes | ratio | encode µs | decode µs |",
        "|---|---|---|---|---|---|",
    ]
    for f in figures:
        stored = f"{f.stored_bytes:,}" + ("" if f.packed else " (text)")
        lines.append(
            f"| {f.shape} {f.target_bytes // 1000} KB | {f.canonical_bytes:,} | {stored} | {f.ratio:.3f} "
            f"| {f.encode_us:,.0f} | {f.decode_us:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Print the study."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="levels 1, 3, 5, 6, 9 only; no 256 KB states")
    parser.add_argument("--threads", action="store_true", help="also compare ways of sharing compressors")
    parser.add_argument("--cold", action="store_true", help="also measure cold costs in fresh interpreters")
    args = parser.parse_args()
    print(study(quick=args.quick))
    print()
    print(chosen_table(chosen_figures()))
    if args.threads:
        print()
        print(thread_study())
    if args.cold:
        cold = cold_figures()
        print()
        print(
            f"Cold (median of fresh interpreters): import zstandard {cold.import_zstandard:.1f} ms bare, "
            f"{cold.import_zstandard_after_handler:.1f} ms after the api handler and boto3; first encode of "
            f"32 KB {cold.first_encode:.1f} ms; first decode {cold.first_decode:.1f} ms."
        )


if __name__ == "__main__":
    main()
