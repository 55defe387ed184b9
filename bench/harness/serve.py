"""Baton through `baton serve`: a 32 KB save against a 1 KB save, and one client's throughput, over real HTTP.

performance.md has two figures no handler-level measurement gives: "a 32 KB save against a 1 KB save through
`baton serve`" (budget `BUDGET_RATIO`, same run, alternating) and "local `baton serve` throughput, one client on
loopback" (reported, no budget). Both are measured here, the way a developer or an agent on the same machine meets
Baton: `baton serve` started as its own process, as `make serve` starts it (embedded moto, its default containers),
with the reaper off (`--no-reaper`: it would read the table's stream beside the requests) and a development key of
the bench's, on a free loopback port; one `httpx` client with keep-alive talking to it.

Timed is the whole round trip of each request (`time.perf_counter` around the client's call): the client, loopback,
the local gateway, the container's handler, and embedded moto's work behind it, all on this machine.

* A 32 KB save against a 1 KB save: after `WARM_UP` saves of each (every container's first requests fill its
  caches), `rounds` rounds each save the seeded conversation state of 1,000 bytes and that of 32,000 bytes
  (`clients.states_for`) to a subject of their own size, the order flipped every round; each subject's saves
  alternate between its two states (same length), so that every save changes the state. Compared are the medians.
  Beside each, from what the server printed, matched to the answer by its request id (`apigw-requestid`): the
  gateway's own time (its request line: request read to answer written) and the handler's (`duration_ms` of its
  access line). So a round trip splits into the client and loopback (the round trip less the gateway's), handing
  the event to a container and back (the gateway's less the handler's), and the handler, whose own CPU with AWS
  stubbed `warm.py` measures: the rest of the handler's time is spent waiting on its DynamoDB requests to embedded
  moto.
* Throughput, one client on loopback: sequential saves of a 4,000-byte state (its two states alternating), then
  sequential lookups of it (`GET /v1/checkpoints?subject_id=...&kind=conversation`), each for `seconds`, after a few
  unmeasured ones: requests per second, and the handler's median time of each.

Rate limiting: the development key's tenant has the stage's default limits, which `baton serve` reads from
`BATON_TENANT_REQUESTS_PER_MINUTE` and `BATON_TENANT_BURST` (`settings.py`: 60,000 a minute and a burst of 10,000
when unset, as `baton serve` leaves them; a deployed stage sets its own, docs/operations.md). One sequential client
makes at most a few hundred requests a second here, so those would not refuse it; the server is nevertheless
started with both at their maximum (`LIMITS`), so that no smaller value in the environment can: a container's share
of the tenant's tokens is 20 either way (`tenancy.MAX_SHARE`), so rate limiting makes the same requests. Every
answer's status is checked: a 429, or anything but 200 or 201, fails the run rather than being timed. Usage counts
stay as `baton serve` writes them, at the end of every request (`BATON_USAGE_FLUSH_REQUESTS` unset: 1). Nothing else
of the environment's `AWS_*` or `BATON_*` reaches the server.

Usage: `python -m bench.harness.serve [--json OUT] [--rounds N] [--seconds S]` (run by `bench/run.py`, which passes
`QUICK_ROUNDS` and `QUICK_SECONDS` with `--quick`); with `--json`, the server's output goes beside it (`.log`).
"""

from __future__ import annotations

import argparse
import itertools
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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.harness.clients import save_body, states_for
from bench.paths import REPO

if TYPE_CHECKING:
    import httpx

BUDGET_RATIO = 1.5
"""performance.md: a 32 KB save through `baton serve` takes at most 1.5 times a 1 KB save."""
ROUNDS = 150
"""Alternating rounds (a 1 KB and a 32 KB save each): about 10 s on a loaded 2-core machine."""
SECONDS = 3.0
"""How long each throughput figure runs."""
QUICK_ROUNDS, QUICK_SECONDS = 30, 0.5
WARM_UP = 30
"""Unmeasured saves of each size first (and a third as many before each throughput figure)."""
SMALL, LARGE, STEADY = 1_000, 32_000, 4_000
DEV_KEY = "btn_bench_serve_key_000000000000001"
"""16 to 200 printable characters, as `--dev-key` takes; shaped like Baton's keys."""
LIMITS = {"BATON_TENANT_REQUESTS_PER_MINUTE": "6000000", "BATON_TENANT_BURST": "1000000"}
"""The stage's default limits of a tenant, at the most `settings.py` accepts."""
REQUEST_ID = "apigw-requestid"
"""The answer's header naming the request, as the gateway's and the handler's lines do."""
START_SECONDS = 60.0
STOP_SECONDS = 30.0
_SERVING = re.compile(r"Baton is serving on (http://\S+)")
_GATEWAY_LINE = re.compile(r" (\d+(?:\.\d+)?)ms request_id=(\S+)$")
_JSON = {"Content-Type": "application/json"}


class Sent(NamedTuple):
    """One timed request: its round trip and the id the server gave it."""

    ms: float
    request_id: str


@dataclass(frozen=True)
class Timings:
    """Medians of a set of requests: each whole round trip, and the server's share of it."""

    count: int
    median_ms: float
    """Round trip, as the client saw it."""
    p90_ms: float
    gateway_ms: float
    """The gateway's own time (its request line): request read to answer written."""
    handler_ms: float
    """The handler's own time (`duration_ms` of its access line)."""


@dataclass(frozen=True)
class ServeFigures:
    """What one run through `baton serve` measured."""

    rounds: int
    small: Timings
    """The 1 KB saves of the alternating rounds."""
    large: Timings
    """The 32 KB saves of the alternating rounds."""
    seconds: float
    """How long each throughput figure ran."""
    saves_per_second: float
    lookups_per_second: float
    saves: Timings
    """The 4 KB saves of the throughput figure."""
    lookups: Timings
    small_body_bytes: int = 0
    large_body_bytes: int = 0

    @property
    def ratio(self) -> float:
        """The 32 KB save over the 1 KB save, medians of whole round trips."""
        return self.large.median_ms / self.small.median_ms

    @property
    def handler_ratio(self) -> float:
        """The same, of the handler's own time."""
        return self.large.handler_ms / self.small.handler_ms


def from_json(document: dict[str, Any]) -> ServeFigures:
    """Figures written by `main --json`."""
    timings = {name: Timings(**document[name]) for name in ("small", "large", "saves", "lookups")}
    return ServeFigures(**{**document, **timings})


# -- the server ------------------------------------------------------------------------------------------------------


class _Server:
    """`baton serve` in a process of its own, and every line it prints (its containers' included)."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "baton_checkpoints.cli.main", "serve", "--port", "0"]
        command += ["--dev-key", DEV_KEY, "--no-reaper"]
        self.lines: list[str] = []
        self._arrived: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=server_env(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._pump = threading.Thread(target=self._read, name="baton-serve-output", daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._arrived.put(line)

    def url(self, timeout: float = START_SECONDS) -> str:
        """Wait for the line saying where it serves; its URL."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._arrived.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise RuntimeError("baton serve exited:\n" + "\n".join(self.lines[-50:])) from None
                continue
            found = _SERVING.search(line)
            if found:
                return found.group(1)
        raise RuntimeError(f"baton serve did not start within {timeout:g} s:\n" + "\n".join(self.lines[-50:]))

    def stop(self) -> None:
        """Ctrl-C, as a developer stops it (killed if it has not ended within `STOP_SECONDS`); then every line it
        printed is in `lines`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._pump.join(STOP_SECONDS)  # its output ends when its containers have ended too


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: `environ` without `AWS_*` and `BATON_*` (embedded moto sets its own credentials),
    and the tenant's limits raised (`LIMITS`)."""
    kept = {name: value for name, value in environ.items() if not name.startswith(("AWS_", "BATON_"))}
    return {**kept, **LIMITS}


@contextmanager
def serving(log: Path | None = None) -> Iterator[tuple[_Server, str]]:
    """A `baton serve` process and its URL, stopped at the end whatever happens (its start failing included); then
    every line it printed is in its `lines`, and in `log` when given."""
    server = _Server()
    try:
        yield server, server.url()
    finally:
        server.stop()
        if log is not None:
            log.write_text("\n".join(server.lines) + "\n", encoding="utf-8")


def server_times(lines: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """From the server's output: the gateway's time of each request, and the handler's, by request id (ms)."""
    gateway: dict[str, float] = {}
    handler: dict[str, float] = {}
    for line in lines:
        if line.startswith("{") and '"duration_ms"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # not an access line (each is one write of one line)
            if record.get("message") == "request" and "request_id" in record:
                handler[str(record["request_id"])] = float(record["duration_ms"])
        elif found := _GATEWAY_LINE.search(line):
            gateway[found.group(2)] = float(found.group(1))
    return gateway, handler


# -- the client ------------------------------------------------------------------------------------------------------


def _timed(send: Callable[[], httpx.Response], expected: tuple[int, ...], what: str) -> Sent:
    """Make one request, timing its whole round trip; fails unless it answered one of `expected`."""
    started = time.perf_counter()
    answer = send()
    spent = (time.perf_counter() - started) * 1000
    if answer.status_code not in expected:
        refused = " (rate limited: the tenant's limits were not raised?)" if answer.status_code == 429 else ""
        raise RuntimeError(f"{what} answered {answer.status_code}{refused}: {answer.text[:500]}")
    request_id = answer.headers.get(REQUEST_ID)
    if not request_id:
        raise RuntimeError(f"{what} answered without {REQUEST_ID}")
    return Sent(spent, request_id)


class _Subject:
    """One subject's conversation checkpoint: saves alternating its two states of `size` bytes, and lookups."""

    def __init__(self, http: httpx.Client, size: int) -> None:
        self._http = http
        self.size = size
        self.subject = f"bench-serve-{size}"
        bodies = [save_body(self.subject, state).encode() for state in states_for(size)]
        self.body_bytes = len(bodies[-1])
        self._bodies = itertools.cycle(bodies)

    def save(self) -> Sent:
        body = next(self._bodies)
        return _timed(
            lambda: self._http.post("/v1/checkpoints", content=body, headers=_JSON),
            (200, 201),
            f"a save of a {self.size}-byte state",
        )

    def lookup(self) -> Sent:
        query = {"subject_id": self.subject, "kind": "conversation"}
        return _timed(lambda: self._http.get("/v1/checkpoints", params=query), (200,), "a lookup")


def alternate(small: _Subject, large: _Subject, rounds: int) -> tuple[list[Sent], list[Sent]]:
    """`rounds` rounds of a save of each, the order flipped every round."""
    sent: dict[int, list[Sent]] = {small.size: [], large.size: []}
    for i in range(rounds):
        for subject in (small, large) if i % 2 else (large, small):
            sent[subject.size].append(subject.save())
    return sent[small.size], sent[large.size]


def for_seconds(call: Callable[[], Sent], seconds: float) -> tuple[list[Sent], float]:
    """`call` made one after another for `seconds`: what each sent, and the requests per second."""
    sent: list[Sent] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        sent.append(call())
    return sent, len(sent) / (time.perf_counter() - started)


def timings(sent: list[Sent], gateway: dict[str, float], handler: dict[str, float]) -> Timings:
    """Medians of `sent`, the server's times matched by request id (each must be there: the server has stopped)."""
    missing = [s.request_id for s in sent if s.request_id not in gateway or s.request_id not in handler]
    if missing:
        raise RuntimeError(f"{len(missing)} of {len(sent)} requests are missing from the server's output")
    rounds = [s.ms for s in sent]
    return Timings(
        count=len(sent),
        median_ms=statistics.median(rounds),
        p90_ms=statistics.quantiles(rounds, n=10)[-1] if len(rounds) > 1 else rounds[0],
        gateway_ms=statistics.median(gateway[s.request_id] for s in sent),
        handler_ms=statistics.median(handler[s.request_id] for s in sent),
    )


def measure(rounds: int = ROUNDS, seconds: float = SECONDS, log: Path | None = None) -> ServeFigures:
    """Start `baton serve`, measure, stop it (its output written to `log` when given)."""
    import httpx

    with (
        serving(log) as (server, url),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {DEV_KEY}"}, timeout=30) as http,
    ):
        small, large, steady = (_Subject(http, size) for size in (SMALL, LARGE, STEADY))
        for _ in range(WARM_UP):
            small.save()
            large.save()
        smalls, larges = alternate(small, large, rounds)
        for _ in range(WARM_UP // 3):
            steady.save()
        saves, saves_per_second = for_seconds(steady.save, seconds)
        for _ in range(WARM_UP // 3):
            steady.lookup()
        lookups, lookups_per_second = for_seconds(steady.lookup, seconds)
    gateway, handler = server_times(server.lines)
    return ServeFigures(
        rounds=rounds,
        small=timings(smalls, gateway, handler),
        large=timings(larges, gateway, handler),
        seconds=seconds,
        saves_per_second=saves_per_second,
        lookups_per_second=lookups_per_second,
        saves=timings(saves, gateway, handler),
        lookups=timings(lookups, gateway, handler),
        small_body_bytes=small.body_bytes,
        large_body_bytes=large.body_bytes,
    )


def summary(figures: ServeFigures) -> str:
    """The figures as plain text, for the terminal."""
    verdict = "ok" if figures.ratio <= BUDGET_RATIO else "OVER BUDGET"
    small, large = figures.small, figures.large
    return (
        f"through baton serve: a 32 KB save {large.median_ms:.2f} ms against a 1 KB save {small.median_ms:.2f} ms "
        f"(medians of {figures.rounds} alternating rounds, whole round trips), {figures.ratio:.2f}x, budget <= "
        f"{BUDGET_RATIO:g}x: {verdict}; of which the gateway {large.gateway_ms:.2f} / {small.gateway_ms:.2f} ms and "
        f"the handler {large.handler_ms:.2f} / {small.handler_ms:.2f} ms ({figures.handler_ratio:.2f}x)\n"
        f"one client on loopback, {figures.seconds:g} s each: {figures.saves_per_second:.0f} saves/s (4 KB state; "
        f"handler {figures.saves.handler_ms:.2f} ms), {figures.lookups_per_second:.0f} lookups/s (handler "
        f"{figures.lookups.handler_ms:.2f} ms)"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and write the figures (and the server's output beside them) when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the figures here, and the server's output beside (.log)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"alternating save rounds (default {ROUNDS})")
    parser.add_argument("--seconds", type=float, default=SECONDS, help=f"per throughput figure (default {SECONDS})")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.seconds <= 0:
        parser.error("--rounds must be at least 2 and --seconds positive")
    figures = measure(args.rounds, args.seconds, args.json.with_suffix(".log") if args.json else None)
    print(summary(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
