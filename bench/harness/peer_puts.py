"""The LangGraph put against both peers' `put`: the CPU one graph step's checkpoint costs Baton (its api handler and
`BatonSaver.put` in the agent's process) and each LangGraph DynamoDB saver, AWS stubbed alike, in one run.

The put is the one Baton's thread-put figure times (`thread_put.py`): the checkpoint `tools` ends in
`langgraph_steps.py`'s graph, at the 6 and 34 KB conversations, as LangGraph hands it to `put`
(`thread_put.captured_put`: config, checkpoint, metadata, new versions; each timed put re-aimed by
`thread_put.put_args`, a new checkpoint id whose parent is the put before it). Every side captures it in its own
process and says so by a digest (`thread_put.fingerprint`): the run fails unless all put the same checkpoint.

Each side runs in a process of its own (`python -m bench.harness.peer_puts serve <client> --recording FILE`), from
the environment `langgraph_steps.py` runs it from:

* Baton (the repository's .venv), both halves of one put, each timed alone:
  - its client side, `BatonSaver.put` (its public constructor; the serializer, the body, the SDK's retry core,
    httpx's request and the answer's parse): the HTTP exchange is stubbed at httpx's transport (`canned_transport`),
    which keeps the request's body and answers with what the handler answered to an earlier put of the same step
    (201, its headers and body; only ids differ), so the connection, TLS and HTTP/1.1 framing are left out, as
    botocore's are on the peers' side;
  - its handler, `baton_checkpoints.handlers.api.handler`, on the event of the very body the client sent (the
    API Gateway event of `thread_put.put_event`), in the steady state the thread-put figure times (`warm.ThreadPuts`:
    a child of the put before it on a thread whose head this container touched moments ago), DynamoDB answered by
    the replay of what moto answered to Baton (`replay.py`), its requests asserted (`warm.THREAD_PUT_REQUESTS`).
* each peer's `put` (`langgraph-checkpoint-amazon-dynamodb` from bench/.venv-peer-amazon, `langgraph-checkpoint-aws`
  without and with its gzip option from bench/.venv-peer-aws): the saver built with the options the graph steps
  give it (the aws saver with its S3 offload), but with botocore's own endpoint (as Baton's stubbed client) and
  every DynamoDB and S3 request answered at botocore's `before-send` by a `replay.Replay` of what moto answered to
  the same saver's put of the same step (`record`: run while `run.py`'s moto is up, in the peer's environment, the
  saver built exactly as `langgraph_steps.py` builds it); its requests asserted equal to the recorded put's.

No moto work is in any timed region: moto has stopped when the timing starts. CPU is `time.process_time_ns` around
the one call; everything else (ids, configs, events) is made before the clock starts. The sides are interleaved in
rounds: in each, every process makes a batch of `BATCH` puts (Baton: the client's puts, then the handler's of the
same bodies), in an order that rotates every round, after one discarded batch each. Figures are medians over every
round; Baton's is the sum of the medians of its two halves. Budget: Baton's put at most `BUDGET_RATIO` times each
peer's (`JUDGED`; the aws saver's gzip option is shown beside them).

`python -m bench.harness.peer_puts [--puts N] [--json OUT]` runs it alone: a metered moto of its own, Baton's table
and key, the recordings, then the timing; it prints the figures (`bench/run.py` renders them into bench/report.md).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from bench.harness import langgraph_steps, replay, thread_put
from bench.harness.sidebyside import LineChild
from bench.paths import REPO, RESULTS

SIZES = thread_put.SIZES
PEERS = ("amazon", "aws", "aws-gzip")
"""The peers' savers timed, by their names in `langgraph_steps.CLIENTS`."""
JUDGED = ("amazon", "aws")
"""The peers the budget is judged against: each package with its defaults (gzip is an option of the aws saver that
only adds CPU to its put; it is shown beside them)."""
BUDGET_RATIO = 1.0
"""Baton's whole put (handler + client) at most this times each peer's `put`: Baton beats the peers on every figure."""
PUTS = 400
"""Timed puts per side and size (rounded up to whole batches)."""
BATCH = 25
PROFILED = 60
"""Puts profiled (cProfile) per size on Baton's side, apart from the timed ones."""
SERVICES = ("dynamodb", "s3")
"""What a peer's put may call: both recorded, replayed and counted (neither saver calls S3 at these sizes)."""
TABLES = {
    "amazon": ("lg-put-amazon", None),
    "aws": ("lg-put-aws", "lg-put-aws-offload"),
    "aws-gzip": ("lg-put-aws-gzip", "lg-put-aws-gzip-offload"),
}
"""Each peer's table and offload bucket on the moto its put is recorded from (its own: no other run's items)."""
REGION = "us-east-1"
VERSIONS = {
    "baton": ("baton-checkpoints", "langgraph", "langgraph-checkpoint", "botocore", "httpx"),
    "amazon": ("langgraph-checkpoint-amazon-dynamodb", "langgraph", "langgraph-checkpoint", "boto3", "botocore"),
    "aws": ("langgraph-checkpoint-aws", "langgraph", "langgraph-checkpoint", "boto3", "botocore"),
    "aws-gzip": ("langgraph-checkpoint-aws", "langgraph", "langgraph-checkpoint", "boto3", "botocore"),
}

_clock = 0


def _tick() -> int:
    """A new `clock_seq` for a checkpoint id, so that ids made in one process never repeat."""
    global _clock
    _clock += 1
    return _clock


def _cpu_us(fn: Callable[[], Any]) -> float:
    """CPU µs of `fn()`."""
    started = time.process_time_ns()
    fn()
    return (time.process_time_ns() - started) / 1000


def _versions(name: str) -> dict[str, str]:
    return {package: metadata.version(package) for package in VERSIONS[name]}


def _label(name: str) -> str:
    return langgraph_steps.CLIENTS_BY_NAME[name].label


# -- the peers (each in its own environment) --------------------------------------------------------------------------


def peer_saver(name: str, table: str, bucket: str | None, endpoint: str | None) -> Any:
    """The peer's saver with the options `langgraph_steps.py` gives it, on `endpoint` (None: botocore's own, whose
    every request a replay answers), making no request while it is built but the amazon saver's DescribeTable."""
    if name == "amazon":
        from langgraph_checkpoint_dynamodb import DynamoDBConfig, DynamoDBSaver, DynamoDBTableConfig

        config = DynamoDBConfig(
            table_config=DynamoDBTableConfig(table_name=table), region_name=REGION, endpoint_url=endpoint
        )
        return DynamoDBSaver(config, deploy=False)
    if name not in ("aws", "aws-gzip"):
        raise ValueError(f"no peer {name}")
    from langgraph_checkpoint_aws import DynamoDBSaver as AwsDynamoDBSaver

    offload = {"bucket_name": bucket, **({"endpoint_url": endpoint} if endpoint else {})} if bucket else None
    return AwsDynamoDBSaver(
        table_name=table,
        region_name=REGION,
        endpoint_url=endpoint,
        enable_checkpoint_compression=name == "aws-gzip",
        s3_offload_config=offload,
    )


def record(name: str, endpoint: str) -> dict[str, Any]:
    """The peer's put of the graph step at each size against moto at `endpoint`, the saver built as
    `langgraph_steps.py` builds it (its table, and bucket, made there): a thread's first put (`<size>/root`), then
    the step's (`<size>/step`, a child of it), every DynamoDB and S3 answer kept (`replay.Recorder`); and, for the
    amazon saver, its table's description (what its constructor reads)."""
    import botocore.handlers

    recorder = replay.Recorder()
    recorder.install(botocore.handlers.BUILTIN_HANDLERS, SERVICES)
    table, bucket = TABLES[name]
    if name == "amazon":
        saver = langgraph_steps.amazon_saver(endpoint, table)
        recorder.take()
        saver.client.describe_table(TableName=table)
    else:
        saver = langgraph_steps.aws_saver(endpoint, table, gzip=name == "aws-gzip", bucket=bucket)
    setup = [call for call in recorder.take() if name == "amazon" and call["operation"] == "DescribeTable"]
    calls: dict[str, list[dict[str, Any]]] = {}
    for size in SIZES:
        thread = f"record-{name}-{size}"
        root = thread_put.put_args(size, thread, None, _tick())
        saver.put(*root)
        calls[f"{size}/root"] = recorder.take()
        saver.put(*thread_put.put_args(size, thread, root[1]["id"], _tick()))
        calls[f"{size}/step"] = recorder.take()
    return {"client": name, "table": table, "bucket": bucket, "setup": setup, "calls": calls}


class PeerSide:
    """A peer's saver in this process, every DynamoDB and S3 request answered by the replay of its recording."""

    def __init__(self, name: str, recording: Path) -> None:
        import botocore.handlers

        self.name = name
        self.recorded: dict[str, Any] = json.loads(recording.read_text(encoding="utf-8"))
        if self.recorded["client"] != name:
            raise RuntimeError(f"{recording} is {self.recorded['client']}'s recording, not {name}'s")
        self.stub = replay.Replay(answers=self.recorded["setup"])
        self.requests: list[str] = []
        """Every request the saver's clients were asked to make (`before-call`), in order."""
        for service in SERVICES:
            botocore.handlers.BUILTIN_HANDLERS.append((f"before-call.{service}", self._count))
            botocore.handlers.BUILTIN_HANDLERS.append((f"before-send.{service}", self.stub))
        self.saver = peer_saver(name, self.recorded["table"], self.recorded["bucket"], endpoint=None)
        self.threads = 0

    def _count(self, model: Any, **_: Any) -> None:
        self.requests.append(model.name)

    def batch(self, size: int, count: int) -> dict[str, Any]:
        """`count` puts of the step on a new thread, each a child of the one before: their CPU µs; fails unless each
        made exactly the recorded step's requests."""
        from langgraph.checkpoint.base.id import uuid6

        step = self.recorded["calls"][f"{size}/step"]
        expected = [call["operation"] for call in step]
        self.stub.answer(step)
        self.threads += 1
        thread = f"peer-{size}-{self.threads:06d}"
        parent = str(uuid6(clock_seq=_tick()))  # (a parent this saver never reads: its put only names it)
        puts = []
        for _ in range(count):
            args = thread_put.put_args(size, thread, parent, _tick())
            parent = args[1]["id"]
            puts.append(args)
        spent = []
        for args in puts:
            before = len(self.requests)
            spent.append(_cpu_us(functools.partial(self.saver.put, *args)))
            made = self.requests[before:]
            if made != expected:
                raise RuntimeError(f"{self.name}'s put of the {size // 1000} KB step made {made}, not {expected}")
        return {"samples": {"put": spent}, "requests": expected}

    def profile(self, size: int, count: int) -> dict[str, Any]:
        """Nothing: only Baton's side is profiled."""
        return {}


# -- Baton (the repository's .venv) -----------------------------------------------------------------------------------

Canned = tuple[int, list[tuple[str, str]], bytes]
"""An HTTP answer: status, headers, body."""


def canned_transport(live: Callable[[Any], Canned]) -> Any:
    """An `httpx` transport standing for the network: it keeps each request's body (`sent`) and answers with
    `answer`; while `live` is on, it hands the request to `live` first and keeps what that answered as `answer`."""
    import httpx

    class CannedTransport(httpx.BaseTransport):
        """The HTTP exchange stubbed below httpx's client: what is above it (the body's JSON, httpx's request and
        response, the SDK's retry core, the answer's parse) runs as it would over the network."""

        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.answer: Canned | None = None
            self.live = False

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            self.sent.append(request.read())
            if self.live:
                self.answer = live(request)
            if self.answer is None:
                raise RuntimeError("no answer to give: make a live put first")
            status, headers, body = self.answer
            return httpx.Response(status, headers=headers, content=body, request=request)

    return CannedTransport()


class BatonSide:
    """`BatonSaver` on a canned transport and Baton's api handler on the replay of its recording, in this process."""

    def __init__(self, recording: Path) -> None:
        from baton_checkpoints.langgraph import BatonSaver
        from bench.harness import warm

        self.harness = warm.Harness(replay.load(recording))
        self.runs = {size: warm.ThreadPuts(self.harness, size) for size in SIZES}
        self.transport = canned_transport(self._live)
        self.saver = BatonSaver(langgraph_steps.BATON_URL, self.harness.secret, transport=self.transport)
        self.answers: dict[int, Canned] = {}
        for size in SIZES:
            # One put through both halves (the transport hands it to the handler): the answer the client's timed
            # puts of this size get.
            chain = self.runs[size].chain()
            self.transport.live = True
            try:
                self.saver.put(*thread_put.put_args(size, chain.thread, chain.last, _tick()))
            finally:
                self.transport.live = False
            assert self.transport.answer is not None
            self.answers[size] = self.transport.answer

    def _live(self, request: Any) -> Canned:
        from baton_checkpoints.local.gateway import to_answer

        thread = request.url.path.split("/")[3]
        event = thread_put.put_event(self.harness.secret, thread, {}, f"live-{_tick()}")
        event["body"] = request.read().decode("utf-8")
        answer = to_answer(self.harness.handler(event, None))
        if answer.status != 201:
            raise RuntimeError(f"Baton answered the live put {answer.status}: {answer.body[:500]!r}")
        return answer.status, answer.headers, answer.body

    def _puts(self, size: int, count: int) -> tuple[Any, list[tuple[Any, ...]]]:
        """A new chain (its root put by the handler, its head touched now) and `count` puts of the step, each a
        child of the one before, the first a child of the root."""
        chain = self.runs[size].chain()
        puts = []
        parent = chain.last
        for _ in range(count):
            args = thread_put.put_args(size, chain.thread, parent, _tick())
            parent = args[1]["id"]
            puts.append(args)
        chain.last = parent
        return chain, puts

    def _client(self, size: int, puts: list[tuple[Any, ...]], timed: bool) -> tuple[list[float], list[bytes]]:
        """`BatonSaver.put` of each (its CPU µs when `timed`), and the bodies it sent."""
        self.transport.answer = self.answers[size]
        self.transport.sent.clear()
        spent = []
        for args in puts:
            call = functools.partial(self.saver.put, *args)
            if timed:
                spent.append(_cpu_us(call))
            else:
                call()
        return spent, list(self.transport.sent)

    def _events(self, thread: str, bodies: list[bytes]) -> list[dict[str, Any]]:
        events = []
        for body in bodies:
            event = thread_put.put_event(self.harness.secret, thread, {}, f"{thread}-{_tick()}")
            event["body"] = body.decode("utf-8")
            events.append(event)
        return events

    def batch(self, size: int, count: int) -> dict[str, Any]:
        """`count` puts of the step: each through `BatonSaver.put`, then each of the bodies it sent through the
        handler, in order; the CPU µs of both halves of every put."""
        runs = self.runs[size]
        chain, puts = self._puts(size, count)
        client, bodies = self._client(size, puts, timed=True)
        handler = [runs.put(event) for event in self._events(chain.thread, bodies)]
        return {
            "samples": {"handler": handler, "client": client},
            "requests": list(runs.expected),
            "body_bytes": len(bodies[0]),
            "messages_bytes": thread_put.graph_step(size).messages_bytes,
            "key_reads": runs.key_reads,
        }

    def profile(self, size: int, count: int) -> dict[str, Any]:
        """Where each half's CPU goes: cProfile's own time by package (`warm.by_package`), ms per put."""
        from bench.harness import warm

        chain, puts = self._puts(size, count)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        _, bodies = self._client(size, puts, timed=False)
        profiler.disable()
        client = warm.by_package(profiler, count)
        handler = warm.profile_requests(self.harness, self._events(chain.thread, bodies), (201,))
        return {"handler": handler, "client": client}


# -- a side's process -------------------------------------------------------------------------------------------------


def serve(name: str, recording: Path) -> int:
    """Answer the driver's commands, one JSON line each, until `quit`: `info`, `batch` (size, n), `profile`."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # Baton's access log and anything else printed goes to stderr
    sys.stdout = sys.stderr
    side = BatonSide(recording) if name == "baton" else PeerSide(name, recording)
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "quit":
            break
        try:
            if command["cmd"] == "info":
                answer: dict[str, Any] = {
                    "versions": _versions(name),
                    "fingerprints": {str(size): thread_put.fingerprint(size) for size in SIZES},
                }
            elif command["cmd"] == "batch":
                answer = side.batch(int(command["size"]), int(command["n"]))
            elif command["cmd"] == "profile":
                answer = side.profile(int(command["size"]), int(command["n"]))
            else:
                answer = {"error": f"unknown command {command['cmd']}"}
        except Exception as exc:  # told to the driver, which fails the measurement with it
            answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        answers.write(json.dumps(answer) + "\n")
    return 0


# -- the driver (the bench's process) ---------------------------------------------------------------------------------


class _Worker(LineChild):
    """A running `serve` process, whose answers fail the run when they report an error."""

    def __init__(self, name: str, command: list[str], log: IO[str]) -> None:
        super().__init__(name, command, log, "bench/results/peer_puts.log")

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command, wait for its answer; fail on an error."""
        answer = super().ask(command)
        if "error" in answer:
            raise RuntimeError(f"{self.name}'s put: {answer['error']}")
        return answer


def _python(name: str) -> Path:
    return Path(sys.executable) if name == "baton" else langgraph_steps.CLIENTS_BY_NAME[name].python


def recording_path(name: str) -> Path:
    """Where the peer's recorded put is written."""
    return RESULTS / f"peer-put-{name}.json"


def record_peers(endpoint: str) -> tuple[dict[str, Path], dict[str, str]]:
    """Record each peer's put against moto at `endpoint`, each in a child in the peer's environment: the recordings
    written, and the peers that could not be recorded with the reason."""
    from bench.harness.sidebyside import client_env

    recorded: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for name in PEERS:
        python = _python(name)
        if not python.exists():
            missing[name] = f"no interpreter at {python.relative_to(REPO)} (make bench creates it)"
            continue
        out = recording_path(name)
        command = [str(python), "-m", "bench.harness.peer_puts", "record", name, "--endpoint", endpoint]
        done = subprocess.run(
            [*command, "--out", str(out)], capture_output=True, text=True, env=client_env(), check=False
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            missing[name] = f"its put could not be recorded: {lines[-1][:300] if lines else done.returncode}"
            continue
        recorded[name] = out
    return recorded, missing


@dataclass(frozen=True)
class Timing:
    """One side's CPU per put of one size."""

    puts: int
    median_ms: float
    p90_ms: float

    @staticmethod
    def of(samples_us: list[float]) -> Timing:
        """The median and p90 of samples in µs."""
        return Timing(
            len(samples_us), statistics.median(samples_us) / 1000, statistics.quantiles(samples_us, n=10)[-1] / 1000
        )


@dataclass(frozen=True)
class SizeFigures:
    """The graph step's put at one conversation size: Baton's two halves and each peer's `put`."""

    size: int
    messages_bytes: int
    """Bytes of its `messages` value as `BatonSaver` sends it (msgpack, before base64)."""
    body_bytes: int
    """The body `BatonSaver` sent."""
    handler: Timing
    client: Timing
    baton_requests: list[str]
    """The DynamoDB requests of each of the handler's puts (asserted)."""
    key_reads: int
    """Timed handler puts that also read the API key (its 60-s cache lapsed)."""
    peers: dict[str, Timing]
    peer_requests: dict[str, list[str]]
    """Each peer's requests per put (asserted equal to its recorded put's)."""
    handler_profile: list[tuple[str, float]] = field(default_factory=list)
    """(package, CPU ms per put) of the handler's puts (cProfile's own time; it inflates many small Python calls)."""
    client_profile: list[tuple[str, float]] = field(default_factory=list)
    """The same of `BatonSaver.put`."""

    @property
    def baton_ms(self) -> float:
        """Baton's whole put: the handler's median plus the client's."""
        return self.handler.median_ms + self.client.median_ms

    def ratio(self, peer: str) -> float:
        """Baton's whole put over the peer's `put`."""
        return self.baton_ms / self.peers[peer].median_ms


@dataclass(frozen=True)
class PeerPutFigures:
    """Everything this module measures."""

    rounds: int
    batch: int
    labels: dict[str, str]
    versions: dict[str, dict[str, str]]
    missing: dict[str, str]
    """Peers not measured, with the reason."""
    sizes: list[SizeFigures]

    @property
    def judged(self) -> list[str]:
        """The peers measured that the budget is judged against."""
        return [peer for peer in JUDGED if peer not in self.missing]


def measure(
    baton_recording: Path,
    peer_recordings: dict[str, Path],
    puts: int = PUTS,
    missing: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
    log_path: Path = RESULTS / "peer_puts.log",
) -> PeerPutFigures:
    """Start Baton's process and each recorded peer's, time the rounds at each size, profile Baton's side, stop."""
    missing = dict(missing or {})
    rounds = max(2, math.ceil(puts / BATCH))
    names = ["baton", *(name for name in PEERS if name in peer_recordings)]
    recordings = {"baton": baton_recording, **peer_recordings}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sizes: list[SizeFigures] = []
    with log_path.open("w", encoding="utf-8") as log:
        workers = [
            _Worker(
                name,
                [
                    str(_python(name)),
                    "-m",
                    "bench.harness.peer_puts",
                    "serve",
                    name,
                    "--recording",
                    str(recordings[name]),
                ],
                log,
            )
            for name in names
        ]
        try:
            info = {worker.name: worker.ask({"cmd": "info"}) for worker in workers}
            prints = {name: facts["fingerprints"] for name, facts in info.items()}
            if len({json.dumps(p, sort_keys=True) for p in prints.values()}) > 1:
                raise RuntimeError(f"the sides captured different checkpoints (another LangGraph?): {prints}")
            for size in SIZES:
                for worker in workers:  # a discarded batch each: caches, the allocator, lazily built validators
                    worker.ask({"cmd": "batch", "size": size, "n": BATCH})
                samples: dict[str, dict[str, list[float]]] = {name: {} for name in names}
                last: dict[str, dict[str, Any]] = {}
                for turn in range(rounds):
                    start = turn % len(workers)
                    for worker in workers[start:] + workers[:start]:
                        answer = worker.ask({"cmd": "batch", "size": size, "n": BATCH})
                        for key, values in answer["samples"].items():
                            samples[worker.name].setdefault(key, []).extend(values)
                        last[worker.name] = answer
                profile = workers[0].ask({"cmd": "profile", "size": size, "n": PROFILED})
                baton = last["baton"]
                peers = [name for name in names if name != "baton"]
                sizes.append(
                    SizeFigures(
                        size=size,
                        messages_bytes=int(baton["messages_bytes"]),
                        body_bytes=int(baton["body_bytes"]),
                        handler=Timing.of(samples["baton"]["handler"]),
                        client=Timing.of(samples["baton"]["client"]),
                        baton_requests=list(baton["requests"]),
                        key_reads=int(baton["key_reads"]),
                        peers={name: Timing.of(samples[name]["put"]) for name in peers},
                        peer_requests={name: list(last[name]["requests"]) for name in peers},
                        handler_profile=[(str(n), float(ms)) for n, ms in profile["handler"]],
                        client_profile=[(str(n), float(ms)) for n, ms in profile["client"]],
                    )
                )
                progress(f"  the LangGraph put against the peers' put: {size // 1000} KB, {rounds} rounds of {BATCH}")
        finally:
            for worker in workers:
                worker.close()
    labels = {name: "Baton" if name == "baton" else _label(name) for name in ("baton", *PEERS)}
    versions = {name: facts["versions"] for name, facts in info.items()}
    return PeerPutFigures(rounds, BATCH, labels, versions, missing, sizes)


def from_json(document: dict[str, Any]) -> PeerPutFigures:
    """Figures written as JSON (`dataclasses.asdict`)."""

    def size(values: dict[str, Any]) -> SizeFigures:
        return SizeFigures(
            **{
                **values,
                "handler": Timing(**values["handler"]),
                "client": Timing(**values["client"]),
                "peers": {name: Timing(**timing) for name, timing in values["peers"].items()},
                "handler_profile": [tuple(p) for p in values.get("handler_profile", [])],
                "client_profile": [tuple(p) for p in values.get("client_profile", [])],
            }
        )

    return PeerPutFigures(
        document["rounds"],
        document["batch"],
        document["labels"],
        document["versions"],
        document["missing"],
        [size(values) for values in document["sizes"]],
    )


def summary(figures: PeerPutFigures) -> str:
    """The figures as plain text, for the terminal."""
    lines = []
    for found in figures.sizes:
        lines.append(
            f"LangGraph put, {found.size // 1000} KB conversation ({found.messages_bytes} B msgpack, a "
            f"{found.body_bytes} B body): Baton {found.baton_ms:.3f} ms CPU = handler {found.handler.median_ms:.3f} "
            f"+ client {found.client.median_ms:.3f} (medians of {found.handler.puts})"
        )
        for name, timing in found.peers.items():
            judged = name in JUDGED
            verdict = ("ok" if found.ratio(name) <= BUDGET_RATIO else "OVER BUDGET") if judged else "not judged"
            requests = " + ".join(found.peer_requests[name])
            lines.append(
                f"    {figures.labels.get(name, name)} put {timing.median_ms:.3f} ms ({requests}): Baton / peer "
                f"{found.ratio(name):.2f}x, budget <= {BUDGET_RATIO:g}x: {verdict}"
            )
        lines.append("    handler, by package: " + ", ".join(f"{n} {ms:.3f}" for n, ms in found.handler_profile[:6]))
        lines.append("    client, by package: " + ", ".join(f"{n} {ms:.3f}" for n, ms in found.client_profile[:6]))
    lines += [f"{figures.labels.get(name, name)} not measured: {why}" for name, why in figures.missing.items()]
    return "\n".join(lines)


def run_alone(puts: int, progress: Callable[[str], None] = print) -> PeerPutFigures:
    """Everything on a metered moto of its own: Baton's table, bucket and key, its recording, the peers'
    recordings; then, moto stopped, the timing."""
    from bench.harness import baton_setup
    from bench.harness.meter import MeteredMotoServer
    from bench.harness.sidebyside import CLIENTS, client_env

    os.environ.update({k: v for k, v in client_env().items() if k.startswith("AWS_")})
    bucket = next(spec.bucket for spec in CLIENTS if spec.name == "baton" and spec.bucket)
    baton_recording = RESULTS / "peer-put-baton.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    server = MeteredMotoServer()
    endpoint = server.start()
    try:
        secret = baton_setup.prepare(endpoint, baton_setup.TABLE, bucket)
        command = [sys.executable, "-m", "bench.harness.replay", "record", "--endpoint", endpoint]
        command += ["--table", baton_setup.TABLE, "--secret", secret, "--out", str(baton_recording)]
        done = subprocess.run(command, capture_output=True, text=True, env=client_env(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"recording Baton's answers failed:\n{done.stderr[-4000:]}")
        progress("recorded Baton's answers; the peers' puts next")
        peer_recordings, missing = record_peers(endpoint)
    finally:
        server.stop()
    progress(f"recorded {', '.join(peer_recordings) or 'no peer'}; timing")
    return measure(baton_recording, peer_recordings, puts, missing, progress)


def main() -> int:
    """`record` (in a peer's environment), `serve` (a side's process), or the whole measurement alone."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", nargs="?", choices=("run", "record", "serve"), default="run")
    parser.add_argument("client", nargs="?", choices=("baton", *PEERS))
    parser.add_argument("--endpoint", help="record: moto's URL")
    parser.add_argument("--out", type=Path, help="record: where to write the recording")
    parser.add_argument("--recording", type=Path, help="serve: the side's recording")
    parser.add_argument("--puts", type=int, default=PUTS, help=f"run: timed puts per side and size (default {PUTS})")
    parser.add_argument("--json", type=Path, help="run: write the figures here")
    args = parser.parse_args()
    if args.action == "record":
        if args.client not in PEERS or not args.endpoint or not args.out:
            parser.error("record needs a peer, --endpoint and --out")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record(args.client, args.endpoint), indent=1), encoding="utf-8")
        return 0
    if args.action == "serve":
        if args.client is None or args.recording is None:
            parser.error("serve needs a client and --recording")
        return serve(args.client, args.recording)
    figures = run_alone(args.puts)
    print(summary(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
