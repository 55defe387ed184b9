"""Baton's own CPU on a warm container, AWS stubbed: a save of 4 KB and of 32 KB, and refusing an oversized state.

Runs in its own process (the repository's .venv), started by `run.py`. Baton is driven only through its public
entry point, `baton.handlers.api.handler`, with API Gateway events; DynamoDB is stubbed by replaying the answers moto
gave to the same requests (`replay.py`), so botocore still serializes, signs and parses every call and nothing
leaves the process. Each save is the steady state: a second save over an existing checkpoint (the API key is cached
after the first request, as in a warm container).

* Warm overhead of a 4 KB save: median CPU time (`time.process_time`) of the whole handler, and its ratio to the
  least any JSON API does with the same body, a bare `json.loads` + `hashlib.sha256`, timed alternately.
* Own CPU of a 32 KB save: the same, and a cProfile of it grouped by package: where the time goes.
* Refusing a 3 MB state (413) against refusing a body of the same size with an invalid `kind` (400): the state's
  size must be known without compressing it.

Usage: `python bench/warm.py --recording FILE [--saves N] [--json OUT]`.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import hashlib
import json
import os
import pstats
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import replay  # noqa: E402
from clients import save_event, states_for  # noqa: E402

SAVES = 600
MIN_SAVES = 60
SECONDS_PER_SIZE = 3.0
"""Fewer saves when each costs much (a slow save is its own finding): the run stays within minutes."""
PROFILED_SAVES = 100
WARM_SIZE = 4_000
CPU_SIZE = 32_000
BUDGET_WARM_MS = 1.0
BUDGET_CPU_32_MS = 2.0
REFUSAL_RUNS = 11
BUDGET_REFUSAL_RATIO = 1.5


def _cpu_us(fn: Callable[[], Any]) -> float:
    started = time.process_time_ns()
    fn()
    return (time.process_time_ns() - started) / 1000


def bare_save(body: bytes) -> str:
    """The least a JSON API does with a body it stores by hash: parse it and hash it."""
    json.loads(body)
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class SaveFigures:
    """The handler's CPU time on a steady-state save of one state size, AWS stubbed."""

    state_bytes: int
    body_bytes: int
    saves: int
    median_ms: float
    p90_ms: float
    bare_median_ms: float
    calls_per_save: dict[str, float]
    call_median_ms: float
    """The save's own DynamoDB request made alone on Baton's client (botocore serializes, signs and parses it;
    replayed as everywhere here): the part of the save that is botocore's, whatever Baton does."""
    profile: list[tuple[str, float]]
    """(package or module, CPU ms per save) from cProfile, largest first (cProfile's own overhead inflates all)."""

    @property
    def ratio(self) -> float:
        """The save over a bare parse + hash of the same body."""
        return self.median_ms / self.bare_median_ms

    @property
    def beside_call_ms(self) -> float:
        """What the save costs beyond its DynamoDB request: powertools, pydantic, Baton's parse, plan and codec."""
        return self.median_ms - self.call_median_ms


@dataclass(frozen=True)
class RefusalFigures:
    """Refusing an oversized state (413) against refusing an invalid body of the same size (400)."""

    body_bytes: int
    runs: int
    oversized_ms: float
    invalid_ms: float

    @property
    def ratio(self) -> float:
        """Refusing the oversized state over refusing the invalid body."""
        return self.oversized_ms / self.invalid_ms


class Harness:
    """Baton's api handler in this process, every DynamoDB call answered by a replay of recorded answers."""

    def __init__(self, recording: replay.Recording) -> None:
        import botocore.handlers

        self.recording = recording
        self.secret: str = recording["secret"]
        requests = recording["requests"]
        # The first recorded request read the API key (GetItem): later ones find it cached.
        self.key_read = [c for c in requests[f"{replay.COLD_SIZE}/1"] if c["operation"] == "GetItem"][:1]
        self.stub = replay.Replay(answers=self.key_read)
        botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", self.stub))
        os.environ["BATON_TABLE_NAME"] = recording["table"]
        os.environ.pop("BATON_AWS_ENDPOINT_URL", None)
        from baton.handlers.api import handler

        self.handler = handler
        self.count = 0

    def answer_as_recorded(self, name: str) -> None:
        """Answer DynamoDB as it answered the recorded request `name` (the API key's read, as always)."""
        self.stub.answer(self.recording["requests"][name])

    def event(self, state: dict[str, Any], body: str | None = None) -> dict[str, Any]:
        """A fresh save event (Lambda hands each invocation its own)."""
        self.count += 1
        event = save_event(self.secret, replay.subject(CPU_SIZE), state, f"warm-{self.count}")
        if body is not None:
            event["body"] = body
        return event

    def last_request(self, event: dict[str, Any], copies: int) -> list[Callable[[], Any]]:
        """Handle `event` once more, and return `copies` calls that each make its last DynamoDB request again,
        alone, on the same client (botocore's `_make_api_call` is where every operation of a client passes)."""
        import botocore.client

        seen: list[tuple[Any, str, dict[str, Any]]] = []
        original = botocore.client.BaseClient._make_api_call

        def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
            seen.append((client, operation, params))
            return original(client, operation, params)

        botocore.client.BaseClient._make_api_call = spy  # type: ignore[method-assign]
        try:
            self.handle(event, (200, 201))
        finally:
            botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
        client, operation, params = seen[-1]
        return [functools.partial(original, client, operation, copy.deepcopy(params)) for _ in range(copies)]

    def handle(self, event: dict[str, Any], expected: tuple[int, ...]) -> None:
        """Handle `event`; fail unless the status is expected."""
        answer = self.handler(event, None)
        if answer["statusCode"] not in expected:
            raise RuntimeError(f"warm request answered {answer['statusCode']}: {str(answer.get('body'))[:500]}")


def measure_save(harness: Harness, size: int, saves: int, profile: bool) -> SaveFigures:
    """Median CPU of `saves` steady-state saves of a `size` state, alternating with a bare parse + hash."""
    harness.answer_as_recorded(f"{size}/2")
    state = states_for(size)[1]
    template = harness.event(state)
    body = template["body"].encode("utf-8")
    warm_up = [copy.deepcopy(template) for _ in range(30)]
    started = time.process_time()
    for event in warm_up:  # warm caches (pydantic validators, the allocator, the key cache) before timing
        harness.handle(event, (200, 201))
        bare_save(body)
    each = (time.process_time() - started) / len(warm_up)
    saves = max(MIN_SAVES, min(saves, int(SECONDS_PER_SIZE / each)))
    requests_alone = harness.last_request(copy.deepcopy(template), saves)
    harness.stub.calls.clear()
    ours: list[float] = []
    bare: list[float] = []
    events = [copy.deepcopy(template) for _ in range(saves)]
    for i, event in enumerate(events):
        # Alternate which goes first, so that neither always runs on caches the other just warmed.
        if i % 2:
            ours.append(_cpu_us(lambda e=event: harness.handle(e, (200, 201))))
            bare.append(_cpu_us(lambda: bare_save(body)))
        else:
            bare.append(_cpu_us(lambda: bare_save(body)))
            ours.append(_cpu_us(lambda e=event: harness.handle(e, (200, 201))))
    calls: dict[str, float] = defaultdict(float)
    for operation in harness.stub.calls:
        calls[operation] += 1 / saves
    alone = [_cpu_us(request) for request in requests_alone]
    return SaveFigures(
        state_bytes=len(json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()),
        body_bytes=len(body),
        saves=saves,
        median_ms=statistics.median(ours) / 1000,
        p90_ms=statistics.quantiles(ours, n=10)[-1] / 1000,
        bare_median_ms=statistics.median(bare) / 1000,
        calls_per_save=dict(calls),
        call_median_ms=statistics.median(alone) / 1000,
        profile=profile_save(harness, template, max(20, min(PROFILED_SAVES, int(1.0 / each)))) if profile else [],
    )


_BUILTIN = re.compile(r"<(?:built-in method |method '[^']+' of ')([A-Za-z0-9_.]+)")


def _where(filename: str, function: str) -> str:
    """The package (or Baton layer) a profiled function belongs to."""
    if filename == "~":
        found = _BUILTIN.search(function)
        name = found.group(1) if found else "builtins"
        return "C: " + name.split(".")[0].lstrip("_")
    path = filename.replace("\\", "/")
    if "/functions/baton/" in path:
        part = path.split("/functions/baton/", 1)[1]
        return "baton." + part.split("/", 1)[0].removesuffix(".py")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/bench/" in path:
        return "bench harness"
    return "stdlib: " + Path(path).stem


def profile_save(harness: Harness, template: dict[str, Any], saves: int) -> list[tuple[str, float]]:
    """Where a save's CPU goes: cProfile's own time per function, summed by package, per save."""
    events = [copy.deepcopy(template) for _ in range(saves)]
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for event in events:
        harness.handle(event, (200, 201))
    profiler.disable()
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, function), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        totals[_where(filename, function)] += row[2]  # own time
    ranked = sorted(totals.items(), key=lambda item: item[1], reverse=True)
    return [(name, seconds * 1000 / saves) for name, seconds in ranked[:14]]


def measure_refusal(harness: Harness, runs: int = REFUSAL_RUNS) -> RefusalFigures:
    """Median handler CPU time of the two refusals, alternating."""
    texts = replay.refusal_bodies()
    harness.answer_as_recorded("oversized")
    oversized = texts["oversized"]
    bodies = {"oversized": (oversized, (413,)), "invalid": (texts["invalid"], (400,))}
    for body, expected in bodies.values():
        harness.handle(harness.event({}, body), expected)
    times: dict[str, list[float]] = {"oversized": [], "invalid": []}
    for i in range(runs):
        for name in ("oversized", "invalid") if i % 2 else ("invalid", "oversized"):
            body, expected = bodies[name]
            event = harness.event({}, body)
            times[name].append(_cpu_us(lambda e=event, x=expected: harness.handle(e, x)))
    return RefusalFigures(
        body_bytes=len(oversized),
        runs=runs,
        oversized_ms=statistics.median(times["oversized"]) / 1000,
        invalid_ms=statistics.median(times["invalid"]) / 1000,
    )


@dataclass(frozen=True)
class WarmFigures:
    """Everything this module measures."""

    warm: SaveFigures
    cpu: SaveFigures
    refusal: RefusalFigures


def measure(recording: replay.Recording, saves: int = SAVES) -> WarmFigures:
    """Measure the three figures in this process."""
    sys.stdout = sys.stderr  # Baton's access log is written (its cost counts) but not into our answer
    harness = Harness(recording)
    return WarmFigures(
        warm=measure_save(harness, WARM_SIZE, saves, profile=False),
        cpu=measure_save(harness, CPU_SIZE, saves, profile=True),
        refusal=measure_refusal(harness),
    )


def from_json(document: dict[str, Any]) -> WarmFigures:
    """Figures written by `main --json`."""

    def save(values: dict[str, Any]) -> SaveFigures:
        return SaveFigures(**{**values, "profile": [tuple(p) for p in values["profile"]]})

    return WarmFigures(save(document["warm"]), save(document["cpu"]), RefusalFigures(**document["refusal"]))


def summary(figures: WarmFigures) -> str:
    """The figures as plain text, for the terminal."""
    lines = []
    for what, save, budget in (("warm save", figures.warm, BUDGET_WARM_MS), ("own CPU", figures.cpu, BUDGET_CPU_32_MS)):
        calls = ", ".join(f"{n:g} {op}" for op, n in save.calls_per_save.items())
        verdict = "ok" if save.median_ms <= budget else "OVER BUDGET"
        lines.append(
            f"{what}: {save.state_bytes} B state, whole handler, AWS stubbed: median {save.median_ms:.3f} ms CPU "
            f"(p90 {save.p90_ms:.3f}), budget {budget:g} ms: {verdict}; {save.ratio:.1f}x a bare json.loads + "
            f"sha256 ({save.bare_median_ms * 1000:.0f} us); calls per save: {calls}; the DynamoDB request alone "
            f"{save.call_median_ms:.3f} ms, everything else {save.beside_call_ms:.3f} ms"
        )
        lines.extend(f"    {ms:7.3f} ms  {name}" for name, ms in save.profile[:8])
    refusal = figures.refusal
    verdict = "ok" if refusal.ratio <= BUDGET_REFUSAL_RATIO else "OVER BUDGET"
    lines.append(
        f"refusing an oversized state: {refusal.oversized_ms:.1f} ms vs {refusal.invalid_ms:.1f} ms for an invalid "
        f"body of the same size, {refusal.ratio:.2f}x, budget <= {BUDGET_REFUSAL_RATIO:g}x: {verdict}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and write the figures as JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--recording", type=Path, required=True, help="answers recorded by run.py (replay.py)")
    parser.add_argument("--saves", type=int, default=SAVES, help=f"timed saves per size (default {SAVES})")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    out = sys.stdout
    figures = measure(replay.load(args.recording), args.saves)
    print(summary(figures), file=out)
    if args.json:
        args.json.write_text(json.dumps(asdict(figures)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
