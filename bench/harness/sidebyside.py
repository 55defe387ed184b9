"""Baton and the two LangGraph DynamoDB savers, side by side: the same states, the same moto, one run.

Every client runs in its own process (`python -m bench.harness.clients`), from its own environment: Baton from the
repository's .venv, `langgraph-checkpoint-amazon-dynamodb` 0.1.3 from `bench/.venv-peer-amazon` (its `aioboto3` pins
a botocore that `langgraph-checkpoint-aws` cannot use), `langgraph-checkpoint-aws` 1.2.6 from `bench/.venv-peer-aws`
(twice: without and with its gzip option, both with its S3 offload, which stores a checkpoint over 350 KB in a
bucket). All talk to one moto server in this process (`meter.py`), which meters every DynamoDB and S3 request.
Baton and each aws saver have a bucket of their own on that server; the amazon saver has no offload (it fails past
DynamoDB's 400 KB item).

For each state size, each repetition and each client (in an order that rotates every repetition), on a fresh
thread or subject: a first save (the create), a second save over it (the steady state an agent pays: for a
LangGraph saver the next step's checkpoint, whose parent is the first), and a read of the latest. Only one client
works at a time; the first repetition of each size is a discarded warm-up. States of a megabyte or more get
fewer repetitions (`BIG_REPS`): their counts do not vary, and each repetition moves megabytes through moto.

* Own CPU: `time.process_time()` of the client process around the call, median over the repetitions.
* Requests, item bytes, write and read units (`capacity.py`): counts; the value most repetitions gave, with the
  repetitions that gave another listed (they should not exist; Baton re-reads its API key once a minute).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.harness.meter import Meter
from bench.paths import BENCH, REPO, RESULTS, with_repo_path

SIZES = (1_000, 4_000, 32_000, 256_000, 2_000_000)
REPS = 30
BIG_STATE = 1_000_000
BIG_REPS = 10
"""Repetitions at most for states of `BIG_STATE` bytes or more."""
WARMUP_REPS = 1
OPERATIONS = ("create", "update", "read")
"""A first save, a second save over it, a read of the latest."""
COUNTS = (
    "requests",
    "shape",
    "write_units",
    "index_write_units",
    "index_actions",
    "read_units",
    "errors",
    "s3_requests",
    "s3_errors",
)
"""Metered figures that must not vary between repetitions (the most common is reported, the others listed)."""
BYTES = ("item_bytes", "request_bytes", "response_bytes", "s3_request_bytes", "s3_response_bytes", "s3_stored_bytes")
"""Metered sizes, reported as medians: they move by a byte or two with the compressed content."""


@dataclass(frozen=True)
class ClientSpec:
    """A measured client: its name in `clients.py`, its label, its interpreter, its table."""

    name: str
    label: str
    python: Path
    table: str
    environment: str
    """How to get its interpreter, for the message when it is missing."""
    bucket: str | None = None
    """Its bucket for states too big for an item (None: it has no S3 offload)."""


CLIENTS = (
    ClientSpec(
        "baton",
        "Baton",
        REPO / ".venv" / "bin" / "python",
        "baton-bench",
        "the repository's .venv",
        "baton-bench-blobs",
    ),
    ClientSpec(
        "amazon",
        "amazon-dynamodb",
        BENCH / ".venv-peer-amazon" / "bin" / "python",
        "lg-amazon-bench",
        "bench/.venv-peer-amazon (make bench creates it)",
    ),
    ClientSpec(
        "aws",
        "aws + S3",
        BENCH / ".venv-peer-aws" / "bin" / "python",
        "lg-aws-bench",
        "bench/.venv-peer-aws (make bench)",
        "lg-aws-bench-offload",
    ),
    ClientSpec(
        "aws-gzip",
        "aws + gzip + S3",
        BENCH / ".venv-peer-aws" / "bin" / "python",
        "lg-aws-gzip-bench",
        "bench/.venv-peer-aws (make bench)",
        "lg-aws-gzip-bench-offload",
    ),
)


class LineChild:
    """A measuring child process that answers one JSON line per JSON line it is sent (`clients.py`,
    `peer_puts.py serve`), in the clients' environment (`client_env`)."""

    def __init__(self, name: str, command: list[str], log: IO[str], logged_in: str) -> None:
        """`logged_in`: where its stderr goes (`log`'s file), named when it stops answering."""
        self.name = name
        self.logged_in = logged_in
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=client_env()
        )

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command, wait for its answer."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} stopped answering (see {self.logged_in})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Ask it to quit and wait."""
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.process.stdin.flush()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Worker(LineChild):
    """A running `clients.py` process."""

    def __init__(self, spec: ClientSpec, endpoint: str, secret: str, sizes: tuple[int, ...], log: IO[str]) -> None:
        command = [
            str(spec.python),
            "-m",
            "bench.harness.clients",
            spec.name,
            "--endpoint",
            endpoint,
            "--table",
            spec.table,
        ]
        command += ["--sizes", ",".join(str(s) for s in sizes)]
        if spec.name == "baton":
            command += ["--secret", secret]
        if spec.bucket:
            command += ["--bucket", spec.bucket]
        self.spec = spec
        super().__init__(spec.name, command, log, "bench/results/clients.log")


def client_env() -> dict[str, str]:
    """Dummy credentials and a region (moto accepts any; nothing real must ever be signed), no Baton settings, and the
    repository's root on `PYTHONPATH` (a child runs `python -m bench...`, in the repository's .venv or a peer's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BATON_"))}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
    )
    return with_repo_path(env)


@dataclass
class OperationSamples:
    """One client's repetitions of one operation on one state size."""

    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    ok: list[bool] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    metered: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Medians of the timings and of the byte counts, the most common counts, and the repetitions whose counts
        differed from those."""
        counted = Counter(json.dumps({k: m[k] for k in COUNTS}, sort_keys=True) for m in self.metered)
        common, times = counted.most_common(1)[0] if counted else ("{}", 0)
        metered = json.loads(common)
        for name in BYTES:
            values = [m[name] for m in self.metered]
            metered[name] = round(statistics.median(values)) if values else None
        failures = Counter(d for d, ok in zip(self.details, self.ok, strict=True) if not ok)
        return {
            "reps": len(self.cpu_ms),
            "ok": sum(self.ok),
            "cpu_ms": statistics.median(self.cpu_ms) if self.cpu_ms else None,
            "cpu_p90_ms": statistics.quantiles(self.cpu_ms, n=10)[-1] if len(self.cpu_ms) > 1 else None,
            "wall_ms": statistics.median(self.wall_ms) if self.wall_ms else None,
            "metered": metered,
            "metered_reps": times,
            "other_metered": [[json.loads(text), n] for text, n in counted.items() if text != common],
            "failures": [[detail, n] for detail, n in failures.most_common()],
        }


@dataclass
class SideBySide:
    """Every client's samples: `samples[client][size][operation]`."""

    reps: int
    """Repetitions per figure (`reps_for` gives fewer for the biggest states)."""
    sizes: tuple[int, ...]
    clients: list[str]
    labels: dict[str, str]
    missing: dict[str, str]
    """Clients not measured, with the reason."""
    info: dict[str, dict[str, Any]]
    """What each client reported about itself (versions, the states' sizes and digests)."""
    samples: dict[str, dict[int, dict[str, OperationSamples]]]
    reps_by_size: dict[int, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Everything as plain JSON values (what `report.md` and the plot are made from)."""
        return {
            "reps": self.reps,
            "reps_by_size": {str(size): self.reps_by_size.get(size, self.reps) for size in self.sizes},
            "buckets": {spec.name: spec.bucket for spec in CLIENTS if spec.name in self.clients},
            "sizes": list(self.sizes),
            "clients": self.clients,
            "labels": self.labels,
            "missing": self.missing,
            "info": self.info,
            "results": {
                client: {
                    str(size): {operation: samples.summary() for operation, samples in operations.items()}
                    for size, operations in sizes.items()
                }
                for client, sizes in self.samples.items()
            },
        }


def reps_for(size: int, reps: int, big_reps: int = BIG_REPS) -> int:
    """Repetitions for a state size: fewer for the biggest states."""
    return min(reps, big_reps) if size >= BIG_STATE else reps


def measure(
    meter: Meter,
    endpoint: str,
    secret: str,
    reps: int = REPS,
    sizes: tuple[int, ...] = SIZES,
    progress: Any = print,
    log_path: Path = RESULTS / "clients.log",
    big_reps: int = BIG_REPS,
) -> SideBySide:
    """Start every client whose environment exists, run the repetitions (`big_reps` at most for states of
    `BIG_STATE` bytes or more), stop them."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    missing = {
        spec.name: f"no interpreter at {spec.python}: {spec.environment}"
        for spec in CLIENTS
        if not spec.python.exists()
    }
    specs = [spec for spec in CLIENTS if spec.name not in missing]
    with log_path.open("w", encoding="utf-8") as log:
        workers = [Worker(spec, endpoint, secret, sizes, log) for spec in specs]
        try:
            info = {w.spec.name: w.ask({"cmd": "info"}) for w in workers}
            digests = {name: facts["states"] for name, facts in info.items()}
            if len({json.dumps(d, sort_keys=True) for d in digests.values()}) > 1:
                raise RuntimeError(f"the clients built different states (another Python?): {digests}")
            samples = {
                w.spec.name: {size: {op: OperationSamples() for op in OPERATIONS} for size in sizes} for w in workers
            }
            for size in sizes:
                size_reps = reps_for(size, reps, big_reps)
                for rep in range(-WARMUP_REPS, size_reps):
                    turn = rep % len(workers)
                    for worker in workers[turn:] + workers[:turn]:
                        _one_thread(meter, worker, size, rep, samples[worker.spec.name][size])
                    if rep >= 0 and ((rep + 1) % 5 == 0 or rep + 1 == size_reps):
                        progress(f"  side by side: {size_label(size)} states, repetition {rep + 1}/{size_reps}")
        finally:
            for worker in workers:
                worker.close()
    labels = {spec.name: spec.label for spec in CLIENTS}
    by_size = {size: reps_for(size, reps, big_reps) for size in sizes}
    return SideBySide(reps, tuple(sizes), [s.name for s in specs], labels, missing, info, samples, by_size)


def size_label(size: int) -> str:
    """`4 KB`, `256 KB`, `2 MB`."""
    return f"{size // 1_000_000} MB" if size >= 1_000_000 and size % 1_000_000 == 0 else f"{size // 1000} KB"


def _one_thread(meter: Meter, worker: Worker, size: int, rep: int, into: dict[str, OperationSamples]) -> None:
    # Keys of one length, so that every repetition stores the same number of bytes.
    key = f"{'wup' if rep < 0 else 'rep'}-{size:07d}-{abs(rep):03d}"
    commands = {
        "create": {"cmd": "save", "key": key, "size": size, "step": 1},
        "update": {"cmd": "save", "key": key, "size": size, "step": 2},
        "read": {"cmd": "read", "key": key, "size": size},
    }
    for operation, command in commands.items():
        meter.start()
        answer = worker.ask(command)
        metered = meter.stop()
        if rep < 0:
            continue
        samples = into[operation]
        samples.cpu_ms.append(answer["cpu_ms"])
        samples.wall_ms.append(answer["wall_ms"])
        samples.ok.append(bool(answer["ok"]))
        samples.details.append(str(answer["detail"]))
        samples.metered.append(metered.figures())
