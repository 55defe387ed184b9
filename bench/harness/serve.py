"""Baton through `baton serve`: a 32 KB save against a 1 KB save, and one client's throughput, over real HTTP.

`baton serve` runs as its own process (embedded moto, no reaper, a development key of the bench's), on a free
loopback port; one `httpx` client with keep-alive talks to it, as an agent on the same machine does. Timed is the
whole round trip of each request (`time.perf_counter` around the client's call): the client, the local gateway, the
handler and moto's work behind it.

* A 32 KB save against a 1 KB save: each round saves the second of the seeded conversation states of 1,000 and
  32,000 bytes (`clients.states_for`) to a subject of its own size, the order flipped every round; the medians are
  compared. Budget: at most `BUDGET_RATIO` times. Beside them, the handler's own time of the same requests, as its
  access log line states it (`duration_ms`), says how much of a round trip is the handler's.
* Throughput, one client on loopback: sequential saves of a 4,000-byte state, then sequential lookups of it, each
  for `SECONDS`: requests per second. Reported, no budget.

The server's tenant limits are raised for the run (`BATON_TENANT_REQUESTS_PER_MINUTE`, `BATON_TENANT_BURST`): a
refused request (429) fails the run rather than being timed.

Usage: `python -m bench.harness.serve --json OUT [--rounds N] [--seconds S]` (run by `bench/run.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness.clients import save_body, states_for
from bench.paths import REPO

BUDGET_RATIO = 1.5
ROUNDS = 150
SECONDS = 3.0
WARM_UP = 20
SMALL, LARGE, STEADY = 1_000, 32_000, 4_000
DEV_KEY = "btn_bench_serve_key_000000000000001"
_LIMITS = {"BATON_TENANT_REQUESTS_PER_MINUTE": "6000000", "BATON_TENANT_BURST": "1000000"}


@dataclass(frozen=True)
class ServeFigures:
    """What one run through `baton serve` measured."""

    rounds: int
    small_ms: float
    """Median round trip of a 1 KB save."""
    large_ms: float
    """Median round trip of a 32 KB save."""
    small_handler_ms: float
    """Median of the handler's own `duration_ms` for the 1 KB saves (its access log)."""
    large_handler_ms: float
    saves_per_second: float
    lookups_per_second: float
    seconds: float

    @property
    def ratio(self) -> float:
        """The 32 KB save over the 1 KB save."""
        return self.large_ms / self.small_ms


def from_json(document: dict[str, Any]) -> ServeFigures:
    """Figures written by `main --json`."""
    return ServeFigures(**document)


class _Server:
    """`baton serve` in a process of its own; its URL, and the lines it printed."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "baton_checkpoints.cli.main", "serve", "--port", "0", "--no-reaper"]
        command += ["--containers", "1", "--dev-key", DEV_KEY]
        self.lines: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env={**os.environ, **_LIMITS},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = self._wait_for(r"Baton is serving on (http://\S+)")

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._lines.put(line)

    def _wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise RuntimeError("baton serve exited:\n" + "\n".join(self.lines[-50:])) from None
                continue
            found = re.search(pattern, line)
            if found:
                return found.group(1)
        raise TimeoutError(f"baton serve did not print {pattern!r}")

    def durations(self, request_ids: set[str]) -> list[float]:
        """The handler's `duration_ms` of each request named, from its access lines."""
        found = []
        for line in list(self.lines):
            if not line.startswith("{") or '"duration_ms"' not in line:
                continue
            record = json.loads(line)
            if record.get("request_id") in request_ids:
                found.append(float(record["duration_ms"]))
        return found

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure(rounds: int = ROUNDS, seconds: float = SECONDS) -> ServeFigures:
    """Start `baton serve`, measure, stop it."""
    import httpx

    server = _Server()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {DEV_KEY}"}, timeout=30) as http:

            def save(size: int) -> tuple[float, str]:
                headers = {"Content-Type": "application/json"}
                body = bodies[size]
                started = time.perf_counter()
                answer = http.post("/v1/checkpoints", content=body, headers=headers)
                spent = (time.perf_counter() - started) * 1000
                if answer.status_code not in (200, 201):
                    raise RuntimeError(f"a {size}-byte save answered {answer.status_code}: {answer.text[:500]}")
                return spent, str(answer.json()["meta"]["request_id"])

            bodies = {size: save_body(f"serve-{size}", states_for(size)[1]).encode() for size in (SMALL, LARGE, STEADY)}
            for _ in range(WARM_UP):
                save(SMALL)
                save(LARGE)
            times: dict[int, list[float]] = {SMALL: [], LARGE: []}
            ids: dict[int, set[str]] = {SMALL: set(), LARGE: set()}
            for i in range(rounds):
                for size in (SMALL, LARGE) if i % 2 else (LARGE, SMALL):
                    spent, request_id = save(size)
                    times[size].append(spent)
                    ids[size].add(request_id)
            saves_per_second = _rate(lambda: save(STEADY), seconds)

            def lookup() -> None:
                answer = http.get("/v1/checkpoints", params={"subject_id": f"serve-{STEADY}", "kind": "conversation"})
                if answer.status_code != 200:
                    raise RuntimeError(f"a lookup answered {answer.status_code}: {answer.text[:500]}")

            lookups_per_second = _rate(lookup, seconds)
        time.sleep(0.5)  # (the last access lines reach the pipe)
        handler = {size: server.durations(ids[size]) for size in ids}
        if any(len(handler[size]) < rounds // 2 for size in handler):
            raise RuntimeError("the access log did not show most of the timed saves (by the answers' request ids)")
    finally:
        server.stop()
    return ServeFigures(
        rounds=rounds,
        small_ms=statistics.median(times[SMALL]),
        large_ms=statistics.median(times[LARGE]),
        small_handler_ms=statistics.median(handler[SMALL]),
        large_handler_ms=statistics.median(handler[LARGE]),
        saves_per_second=saves_per_second,
        lookups_per_second=lookups_per_second,
        seconds=seconds,
    )


def _rate(call: Any, seconds: float) -> float:
    """Requests per second of `call` made one after another for `seconds`."""
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        call()
        done += 1
    return done / (time.perf_counter() - started)


def summary(figures: ServeFigures) -> str:
    """The figures as plain text, for the terminal."""
    verdict = "ok" if figures.ratio <= BUDGET_RATIO else "OVER BUDGET"
    return (
        f"through baton serve: a 32 KB save {figures.large_ms:.2f} ms against a 1 KB save {figures.small_ms:.2f} ms "
        f"(medians of {figures.rounds} alternating rounds), {figures.ratio:.2f}x, budget <= {BUDGET_RATIO:g}x: "
        f"{verdict}; the handler's own {figures.large_handler_ms:.2f} / {figures.small_handler_ms:.2f} ms\n"
        f"one client on loopback: {figures.saves_per_second:.0f} saves/s (4 KB), {figures.lookups_per_second:.0f} "
        "lookups/s"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"alternating save rounds (default {ROUNDS})")
    parser.add_argument("--seconds", type=float, default=SECONDS, help=f"per throughput figure (default {SECONDS})")
    args = parser.parse_args(argv)
    figures = measure(args.rounds, args.seconds)
    print(summary(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
