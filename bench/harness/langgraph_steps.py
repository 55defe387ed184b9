"""One LangGraph graph, run step by step on `BatonSaver` and on the two LangGraph DynamoDB savers
(`langgraph-checkpoint-amazon-dynamodb`'s and `langgraph-checkpoint-aws`'s `DynamoDBSaver`): what each graph step
costs in DynamoDB and S3 requests and in dollars, metered server side by the same moto, at three state sizes.

The graph is a small agent loop (`build_graph`): a `messages` channel (a list with `operator.add`) to which each
of its three nodes (`agent`, `tools`, `human`) appends one message of 1-2 KB of real text (`states.py`'s
generator, seeded per node and turn, so every saver stores the same messages), and three small channels (`turn`,
`status`, `tool_calls`). The first time `human` runs it calls `interrupt()`: the first invocation stops there, the
second resumes it (`Command(resume=...)`) and loops until `turns` turns are done. Durability is LangGraph's
default (`async`: a step's checkpoint is put in the background while the next step runs).

The budgets are stated at a conversation of about 6, 34 and 309 KB (`SIZES`), so the same graph runs once per size
on a fresh thread: the first invocation's input is a conversation of `states.py`'s seeded generator (real text,
tool calls), sized so that `messages` holds `size` bytes of canonical JSON when the first invocation stops, which
is where the measured steps (the second invocation's) start; they append to it as before.

Each saver runs in a process of its own (`python -m bench.harness.langgraph_steps client <client> ...`), in its own
environment: `DynamoDBSaver` (aws) from `bench/.venv-peer-aws` (with its S3 offload, as `sidebyside.py` runs it),
`DynamoDBSaver` (amazon-dynamodb) from `bench/.venv-peer-amazon` (which has no offload), `BatonSaver` from the
repository's .venv with its HTTP requests served in that process by Baton's api handler
(`baton_checkpoints.handlers.api.handler`, given the API Gateway HTTP API event `baton serve`'s gateway builds:
`InProcessBaton`), configured against the same metered moto. All reach DynamoDB and S3 only through that moto
(`meter.py`), which meters every request, and each has a table (and bucket) of its own on it.

The saver is wrapped (`MeteredSaver`) so that each saver call is metered alone: before the call the client asks
the orchestrator (this module's `measure`, in the bench process) to start the meter and waits for its go; after it,
it says how many HTTPS requests the call made, and the orchestrator stops the meter. Calls are serialized (LangGraph
makes them from its background threads).

Each node stands for a model call, a tool or a person, all far slower than a checkpoint put, so each first waits
until the checkpoint it runs on has been put (`pace`): LangGraph's async durability still puts every checkpoint in
the background while the next node works, and the put of a step is done before the next step's writes are sent, as
in production. This also makes every run send the same calls in the same order. With `--instant-nodes` the nodes
return at once instead and race LangGraph's background put: a step's writes may then come before the put of the
checkpoint they name (sent as they come, counted and reported as `early`; each saver pays what they cost it), and
what a step costs varies from run to run with that race.

A graph step is a superstep: the `put_writes` of its tasks (made against the previous checkpoint) and the `put` of
the checkpoint it ends with (`metadata.step`). The `get_tuple` at the start of each invocation is reported apart.
Figures per step are the second invocation's totals (the resume and the loop after it) over its steps. Requests
refused by design are the conditional writes DynamoDB refused (`ConditionalCheckFailed`, as the meter saw the
answers); dollars are on-demand prices (`bench/billing/prices.py`) of the write and read units and the S3 requests.

`python -m bench.harness.langgraph_steps --quick` runs the comparison alone on a metered moto of its own and prints
the table (`bench/run.py` renders the same table into `bench/report.md`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import operator
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, TypedDict

from bench.paths import BENCH, REPO, RESULTS

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from bench.harness.meter import Meter, Operation

SEED = 7
TURNS = 4
"""Turns of the loop: the second invocation then runs 3 × (TURNS - 1) + 1 = 10 graph steps, which append about
15 KB to `messages`. More would carry the smallest state far from its size (9 turns take the 6 KB thread to 43 KB,
25 KB on average over its steps), and what one step costs does not change with how many there are."""
QUICK_TURNS = 3
SIZES = (6_000, 34_000, 309_000)
"""Bytes of `messages` (canonical JSON) where the measured steps start: the sizes the budgets are stated at."""
BATON_URL = "https://baton.bench.invalid"
"""The saver's base URL: never resolved, `InProcessBaton` serves its host."""
REGION = "us-east-1"


# -- the graph (runs in each client's process) ------------------------------------------------------------------------


class AgentState(TypedDict):
    """The graph's channels: the conversation and three small ones."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    turn: int
    status: str
    tool_calls: int


def message(node: str, turn: int, seed: int = SEED) -> dict[str, Any]:
    """The message `node` appends on `turn`: 1-2 KB of the documentation's text (`states.py`), the same for a given
    (seed, node, turn) in every process and on every rerun."""
    from bench.harness.states import FILE_PATHS, _Text

    text = _Text(random.Random(f"{seed}/{node}/{turn}"))
    if node == "agent":
        call_id = text.hex_id("call_")
        arguments = {"path": text.rng.choice(FILE_PATHS), "query": text.phrase(3, 8)}
        return {
            "role": "assistant",
            "content": text.passage(700, 1300),
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "search", "arguments": json.dumps(arguments)}}
            ],
        }
    if node == "tools":
        return {
            "role": "tool",
            "name": "search",
            "tool_call_id": text.hex_id("call_"),
            "content": text.passage(1000, 1900),
        }
    return {"role": "user", "content": text.passage(1000, 1900)}


def build_graph(turns: int, checkpointer: Any, pace: Callable[[RunnableConfig], None] | None = None) -> Any:
    """The agent loop, compiled with `checkpointer`: agent → tools → human → agent … until `turns` turns; `human`
    interrupts the first time it runs and appends what it is resumed with. Each node first calls `pace` with its
    config, if given (the time the node's own work takes)."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if pace:
            pace(config)
        turn = state["turn"] + 1
        return {"messages": [message("agent", turn)], "turn": turn, "status": "thinking"}

    def tools(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if pace:
            pace(config)
        return {
            "messages": [message("tools", state["turn"])],
            "tool_calls": state["tool_calls"] + 1,
            "status": "tool_done",
        }

    def human(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if pace:
            pace(config)
        if state["turn"] == 1:
            answer = interrupt({"question": "Approve the tool's result?", "turn": state["turn"]})
            return {"messages": [answer], "status": "approved"}
        return {"messages": [message("human", state["turn"])], "status": "waiting"}

    def route(state: AgentState) -> str:
        return END if state["turn"] >= turns else "agent"

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("human", human)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", "human")
    builder.add_conditional_edges("human", route, ["agent", END])
    return builder.compile(checkpointer=checkpointer)


def _canonical_size(value: Any) -> int:
    """Bytes of `value` as canonical JSON (`states.py`'s measure of a state)."""
    from bench.harness.states import canonical_size

    return canonical_size(value)


def seeded_messages(size: int, seed: int = SEED) -> list[dict[str, Any]]:
    """The conversation the first invocation starts from: `states.py`'s seeded chat thread (user and assistant
    turns, tool calls and their answers, ending with the user's request), cut so that `messages` holds about `size`
    bytes of canonical JSON once the first invocation has appended its two messages (the agent's, the tool's)."""
    from bench.harness.states import conversation_state

    appended = _canonical_size([message("agent", 1, seed), message("tools", 1, seed)]) - 1
    want = size - appended
    if want < 1_000:
        raise ValueError(f"a {size}-byte state leaves no room for a conversation before the graph's own messages")
    # The generator sizes the whole state (thread id, model, system prompt, messages): its other fields are drawn
    # first from the seeded generator, so their bytes do not depend on the target.
    header = _canonical_size(conversation_state(target_bytes=0, seed=seed)) - len("[]")
    messages: list[dict[str, Any]] = conversation_state(target_bytes=want + header, seed=seed)["messages"]
    return messages


def first_input(size: int) -> dict[str, Any]:
    """The first invocation's input: the seeded conversation (its last message the user's request) and the small
    channels' starting values."""
    return {"messages": seeded_messages(size), "turn": 0, "status": "start", "tool_calls": 0}


def resume_value() -> dict[str, Any]:
    """What the human answers to the interrupt (a message of its own)."""
    return message("review", 1)


# -- metering each saver call (client side) ---------------------------------------------------------------------------


class Orchestrator:
    """The client's end of the metering handshake: a line out before and after each call, a line in to go."""

    def __init__(self, out: IO[str], into: IO[str]) -> None:
        self._out = out
        self._in = into

    def send(self, event: dict[str, Any]) -> None:
        """One JSON line to the orchestrator."""
        self._out.write(json.dumps(event) + "\n")
        self._out.flush()

    def before(self, event: dict[str, Any]) -> None:
        """Announce a call and wait until the meter runs."""
        self.send(event)
        line = self._in.readline()
        if line.strip() != "go":
            raise RuntimeError(f"the orchestrator answered {line!r}, not go")


def _make_metered_saver(base: type) -> type:
    """`MeteredSaver` on LangGraph's `BaseCheckpointSaver` (imported in the client's environment)."""

    class MeteredSaver(base):  # type: ignore[misc]
        """Delegates to `inner`, one call at a time, each announced to the orchestrator and metered alone."""

        def __init__(self, inner: Any, orchestrator: Orchestrator, https: Callable[[], int]) -> None:
            super().__init__(serde=inner.serde)
            self.inner = inner
            self.orchestrator = orchestrator
            self.https = https
            self.invocation = 0
            self.early: Counter[int] = Counter()
            """`put_writes` called before the put of their checkpoint, by invocation."""
            self._lock = threading.Lock()
            self._put_done = threading.Condition()
            self._steps: dict[str, int] = {}
            """checkpoint id -> its `metadata.step`, for every checkpoint put or read."""

        def wait_for_put(self, step: int) -> None:
            """Wait until the checkpoint of `step` (or a later one) has been put or read: a node that runs on it
            calls this first, as a node slower than a put would find it stored when it ends."""
            with self._put_done:
                if not self._put_done.wait_for(lambda: max(self._steps.values(), default=-2) >= step, timeout=60):
                    raise RuntimeError(f"the checkpoint of step {step} was not put within 60 s")

        def get_next_version(self, current: Any, channel: Any) -> Any:
            return self.inner.get_next_version(current, channel)

        def _call(self, kind: str, step: int | None, run: Callable[[], Any]) -> Any:
            with self._lock:
                before = self.https()
                self.orchestrator.before({"event": "call", "kind": kind, "invocation": self.invocation, "step": step})
                error = None
                try:
                    result = run()
                except Exception as exc:  # reported, then raised: the graph fails as it would
                    error = f"{type(exc).__name__}: {exc}"[:500]
                    raise
                finally:
                    self.orchestrator.send({"event": "done", "https": self.https() - before, "error": error})
            return result

        def _remember(self, found: Any) -> Any:
            if found is not None:
                with self._put_done:
                    self._steps[found.checkpoint["id"]] = int(found.metadata.get("step", -1))
            return found

        def get_tuple(self, config: Any) -> Any:
            return self._remember(self._call("get_tuple", None, lambda: self.inner.get_tuple(config)))

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            found = self._call("list", None, lambda: [*self.inner.list(config, **kwargs)])
            for item in found:
                self._remember(item)
            return iter(found)

        def put(self, config: Any, checkpoint: Any, metadata_: Any, new_versions: Any) -> Any:
            step = int(metadata_.get("step", -1))
            stored = self._call("put", step, lambda: self.inner.put(config, checkpoint, metadata_, new_versions))
            with self._put_done:
                self._steps[checkpoint["id"]] = step
                self._put_done.notify_all()
            return stored

        def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
            checkpoint_id = config["configurable"]["checkpoint_id"]
            with self._put_done:
                if checkpoint_id not in self._steps:
                    # LangGraph's async durability: this step's writes may come before the put of the checkpoint
                    # they belong to, still in flight on another thread (its step is the next one), when a node
                    # returns before that put is done (`--instant-nodes`). They are sent as they come: what a saver
                    # pays for them is part of its figures.
                    self.early[self.invocation] += 1
                    step = max(self._steps.values(), default=-2) + 2
                else:
                    step = self._steps[checkpoint_id] + 1
            self._call("put_writes", step, lambda: self.inner.put_writes(config, writes, task_id, task_path))

    return MeteredSaver


# -- Baton in this process ----------------------------------------------------------------------------------------


def in_process_transport(host: str) -> Any:
    """An `httpx` transport that hands requests for `host` to Baton's api handler in this process (the event
    `baton serve`'s gateway builds, the answer as API Gateway returns it) and sends any other (a presigned URL of
    the bucket) over the network; it counts both. Like one Lambda container, it handles one request at a time."""
    import httpx

    from baton_checkpoints.handlers.api import handler
    from baton_checkpoints.local.gateway import LambdaContext, build_event, to_answer

    class InProcessBaton(httpx.BaseTransport):
        """Baton's handler as an `httpx` transport."""

        def __init__(self) -> None:
            self.requests = 0
            self.downloads = 0
            self._network = httpx.HTTPTransport()
            # One request at a time, as a Lambda container handles them (the resolver keeps the current event on
            # its class): LangGraph calls the saver from several threads.
            self._container = threading.Lock()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.host != host:
                self.downloads += 1
                return self._network.handle_request(request)
            self.requests += 1
            body = request.read()
            target = request.url.raw_path.decode("ascii")
            event = build_event(request.method, target, list(request.headers.multi_items()), body, "127.0.0.1")
            context = LambdaContext(deadline_ms=int(time.time() * 1000) + 30_000)
            with self._container:
                answer = to_answer(handler(event, context))
            return httpx.Response(answer.status, headers=answer.headers, content=answer.body, request=request)

        def close(self) -> None:
            self._network.close()

    return InProcessBaton()


def baton_saver(endpoint: str, table: str, secret: str, bucket: str | None) -> tuple[Any, Callable[[], int]]:
    """`BatonSaver` (its public constructor, given the in-process transport) and its HTTPS request count."""
    os.environ["BATON_TABLE_NAME"] = table
    os.environ["BATON_AWS_ENDPOINT_URL"] = endpoint
    if bucket:
        os.environ["BATON_BUCKET_NAME"] = bucket
    from urllib.parse import urlsplit

    from baton_checkpoints.langgraph import BatonSaver

    transport = in_process_transport(urlsplit(BATON_URL).hostname or "")
    saver = BatonSaver(BATON_URL, secret, transport=transport)
    return saver, lambda: int(transport.requests + transport.downloads)


def aws_saver(endpoint: str, table: str, gzip: bool, bucket: str | None) -> Any:
    """`langgraph-checkpoint-aws`'s `DynamoDBSaver` on a table of its CloudFormation sample's schema, with its S3
    offload to `bucket` (a checkpoint over 350 KB goes to an object), as `clients.py`'s `AwsSaver` builds it for the
    side-by-side tables."""
    from bench.harness.clients import AwsSaver

    return AwsSaver(endpoint, table, gzip=gzip, bucket=bucket).saver


def amazon_saver(endpoint: str, table: str) -> Any:
    """`langgraph-checkpoint-amazon-dynamodb`'s `DynamoDBSaver`, creating its own table (`deploy=True`), as
    `clients.py`'s `AmazonSaver` builds it for the side-by-side tables (it has no S3 offload)."""
    from bench.harness.clients import AmazonSaver

    return AmazonSaver(endpoint, table).saver


# -- the client's run -----------------------------------------------------------------------------------------------


def run_client(
    name: str,
    endpoint: str,
    table: str,
    secret: str | None,
    bucket: str | None,
    turns: int,
    thread: str,
    size: int,
    instant_nodes: bool = False,
) -> int:
    """Run the graph on `thread` from the seeded conversation of `size` bytes: the first invocation up to the
    interrupt, the second from the resume to the end, each saver call metered through the handshake on
    stdin/stdout. Each node waits for the put of the checkpoint it runs on, unless `instant_nodes`."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # Baton's access log and anything else printed goes to stderr
    sys.stdout = sys.stderr
    orchestrator = Orchestrator(answers, sys.stdin)

    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.types import Command

    if name == "baton":
        if not secret:
            raise SystemExit("baton needs --secret")
        inner, https = baton_saver(endpoint, table, secret, bucket)
        versions = {
            n: metadata.version(n) for n in ("baton-checkpoints", "langgraph", "langgraph-checkpoint", "botocore")
        }
    elif name in ("aws", "aws-gzip"):
        inner, https = aws_saver(endpoint, table, gzip=name == "aws-gzip", bucket=bucket), (lambda: 0)
        names = ("langgraph-checkpoint-aws", "langgraph", "langgraph-checkpoint", "boto3", "botocore")
        versions = {n: metadata.version(n) for n in names}
    elif name == "amazon":
        inner, https = amazon_saver(endpoint, table), (lambda: 0)
        names = ("langgraph-checkpoint-amazon-dynamodb", "langgraph", "langgraph-checkpoint", "boto3", "botocore")
        versions = {n: metadata.version(n) for n in names}
    else:
        raise SystemExit(f"unknown client {name}")
    # Unmetered warm-up: the first request of a process reads Baton's API key and builds botocore's clients.
    inner.get_tuple({"configurable": {"thread_id": f"warm-up-{thread}", "checkpoint_ns": ""}})
    saver = _make_metered_saver(BaseCheckpointSaver)(inner, orchestrator, https)

    def pace(config: RunnableConfig) -> None:
        # A task of step N runs on the checkpoint of step N - 1 (`langgraph_step` is N).
        saver.wait_for_put(int(config["metadata"]["langgraph_step"]) - 1)

    graph = build_graph(turns, saver, None if instant_nodes else pace)
    config = {"configurable": {"thread_id": thread}}

    start = first_input(size)  # built before the first call: the generator's time is no saver's
    saver.invocation = 1
    first = graph.invoke(start, config)
    interrupted = "__interrupt__" in first
    saver.invocation = 2
    final = graph.invoke(Command(resume=resume_value()), config)
    messages = final.get("messages", [])
    packed = json.dumps(messages, sort_keys=True).encode("utf-8")
    orchestrator.send(
        {
            "event": "finished",
            "versions": versions,
            "interrupted": interrupted,
            "turn": final.get("turn"),
            "messages": len(messages),
            "messages_bytes": _canonical_size(messages),
            "messages_bytes_at_start": _canonical_size(first.get("messages", [])),
            "messages_sha256": hashlib.sha256(packed).hexdigest(),
            "early": sum(saver.early.values()),
            "early_measured": saver.early[2],
        }
    )
    return 0


# -- the orchestrator (bench process) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSpec:
    """A measured saver: its name, label, interpreter, table and bucket."""

    name: str
    label: str
    python: Path
    table: str
    bucket: str | None = None
    """Its bucket for what it keeps in S3 (Baton's spill, the aws saver's offload); None: it has no S3 offload."""


CLIENTS = (
    ClientSpec("baton", "Baton (`BatonSaver`)", REPO / ".venv" / "bin" / "python", "baton-bench", "baton-bench-blobs"),
    ClientSpec(
        "amazon", "`DynamoDBSaver` (amazon-dynamodb)", BENCH / ".venv-peer-amazon" / "bin" / "python", "lg-steps-amazon"
    ),
    ClientSpec(
        "aws",
        "`DynamoDBSaver` (aws)",
        BENCH / ".venv-peer-aws" / "bin" / "python",
        "lg-steps-aws",
        "lg-steps-aws-offload",
    ),
    ClientSpec(
        "aws-gzip",
        "`DynamoDBSaver` (aws + gzip)",
        BENCH / ".venv-peer-aws" / "bin" / "python",
        "lg-steps-aws-gzip",
        "lg-steps-aws-gzip-offload",
    ),
)


@dataclass
class CallFigures:
    """One metered saver call."""

    kind: str
    invocation: int
    step: int | None
    https: int
    error: str | None
    requests: dict[str, int]
    shape: list[str]
    write_units: int
    read_units: float
    growth_bytes: int
    """Stored item bytes the call added to the table (new image minus old, over every item it wrote)."""
    s3_requests: dict[str, int]
    s3_stored_bytes: int
    refused: dict[str, int] = field(default_factory=dict)
    """Conditional writes DynamoDB refused (`ConditionalCheckFailed`), by operation."""
    dynamodb_errors: list[str] = field(default_factory=list)
    """Any other request DynamoDB refused, as `Operation: message`."""


@dataclass
class ClientRun:
    """Every metered call of one saver's run, and what the client said at the end."""

    name: str
    calls: list[CallFigures] = field(default_factory=list)
    finished: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None

    def steps(self, invocation: int) -> dict[int, list[CallFigures]]:
        """The calls of the invocation's graph steps (`put_writes` and `put`), by step."""
        found: dict[int, list[CallFigures]] = {}
        for call in self.calls:
            if call.invocation == invocation and call.kind in ("put", "put_writes") and call.step is not None:
                found.setdefault(call.step, []).append(call)
        return dict(sorted(found.items()))


def refused_by_design(error: str | None, conditional: bool) -> bool:
    """Whether a request DynamoDB answered with `error` is a conditional write it refused: a
    `ConditionalCheckFailedException`, or a transaction cancelled for a `ConditionalCheckFailed` reason."""
    return bool(conditional and error and "ConditionalCheckFailed" in error)


def _call_figures(announced: dict[str, Any], done: dict[str, Any], metered: Operation) -> CallFigures:
    figures = metered.figures()
    growth = sum(w.new_bytes - w.old_bytes for c in metered.calls for w in c.writes)
    refused = Counter(c.operation for c in metered.calls if refused_by_design(c.error, c.conditional))
    others = [
        f"{c.operation}: {c.error}" for c in metered.calls if c.error and not refused_by_design(c.error, c.conditional)
    ]
    return CallFigures(
        kind=str(announced["kind"]),
        invocation=int(announced["invocation"]),
        step=announced.get("step"),
        https=int(done.get("https") or 0),
        error=done.get("error"),
        requests=figures["requests"],
        shape=figures["shape"],
        write_units=figures["write_units"],
        read_units=figures["read_units"],
        growth_bytes=growth,
        s3_requests=figures["s3_requests"],
        s3_stored_bytes=figures["s3_stored_bytes"],
        refused=dict(refused),
        dynamodb_errors=others + figures["s3_errors"],
    )


def run_one(
    meter: Meter,
    spec: ClientSpec,
    endpoint: str,
    secret: str,
    turns: int,
    log: IO[str],
    env: dict[str, str],
    size: int = SIZES[0],
    instant_nodes: bool = False,
) -> ClientRun:
    """Run one client's graph to the end on a fresh thread from the conversation of `size` bytes, metering each
    saver call it announces."""
    thread = f"lg-steps-{spec.name}-{size}-{os.getpid()}"
    command = [str(spec.python), "-m", "bench.harness.langgraph_steps", "client", spec.name, "--endpoint", endpoint]
    command += ["--table", spec.table, "--turns", str(turns), "--thread", thread, "--size", str(size)]
    if instant_nodes:
        command.append("--instant-nodes")
    if spec.name == "baton":
        command += ["--secret", secret]
    if spec.bucket:
        command += ["--bucket", spec.bucket]
    run = ClientRun(spec.name)
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        while line := process.stdout.readline():
            event = json.loads(line)
            if event["event"] == "finished":
                run.finished = event
                break
            if event["event"] != "call":
                raise RuntimeError(f"{spec.name}: unexpected {event}")
            meter.start()
            process.stdin.write("go\n")
            process.stdin.flush()
            done = json.loads(process.stdout.readline() or "{}")
            metered = meter.stop()
            run.calls.append(_call_figures(event, done, metered))
        if not run.finished:
            run.failure = f"{spec.name} stopped before the end of the graph (see bench/results/langgraph_steps.log)"
    finally:
        with contextlib.suppress(BrokenPipeError, OSError):
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    if process.returncode and not run.failure:
        run.failure = f"{spec.name} exited with {process.returncode}"
    return run


def _why_not(run: ClientRun) -> str:
    """Why a run did not reach the end of the graph: the first saver call that failed, else the failure."""
    failed = next((c for c in run.calls if c.error), None)
    if failed is None:
        return run.failure or "it did not finish"
    reason = f"its `{failed.kind}` (invocation {failed.invocation}, step {failed.step}) failed: {failed.error}"
    if failed.dynamodb_errors:
        reason += f" (DynamoDB answered {failed.dynamodb_errors[0]})"
    return reason[:400]


def measure(
    meter: Meter,
    endpoint: str,
    secret: str,
    turns: int = TURNS,
    env: dict[str, str] | None = None,
    log_path: Path = RESULTS / "langgraph_steps.log",
    progress: Callable[[str], None] = print,
    sizes: Sequence[int] = SIZES,
    instant_nodes: bool = False,
) -> dict[str, Any]:
    """Run the graph at every state size on every saver whose environment exists; the summary `table` renders. A
    saver that cannot run the graph at a size is reported missing there, with the reason, not measured in part.
    `instant_nodes`: nodes return at once instead of waiting for the put of the checkpoint they run on."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if env is None:
        from bench.harness.sidebyside import client_env

        env = client_env()
    missing = {spec.name: f"no interpreter at {spec.python}" for spec in CLIENTS if not spec.python.exists()}
    by_size: dict[str, Any] = {}
    with log_path.open("w", encoding="utf-8") as log:
        for size in sizes:
            runs: dict[str, ClientRun] = {}
            failed: dict[str, str] = {}
            for spec in CLIENTS:
                if spec.name in missing:
                    continue
                try:
                    run = run_one(meter, spec, endpoint, secret, turns, log, env, size, instant_nodes)
                except (RuntimeError, ValueError) as exc:
                    failed[spec.name] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                if run.finished and not run.failure:
                    runs[spec.name] = run
                else:
                    failed[spec.name] = _why_not(run)
                progress(f"  LangGraph graph steps: {_size_label(size)}, {spec.name} done")
            by_size[str(size)] = summarize(runs, failed, turns) | {"size": size}
    labels = {spec.name: spec.label for spec in CLIENTS}
    return {
        "seed": SEED,
        "turns": turns,
        "instant_nodes": instant_nodes,
        "sizes": list(sizes),
        "labels": labels,
        "missing": missing,
        "by_size": by_size,
    }


def _step_totals(calls: list[CallFigures]) -> dict[str, Any]:
    requests: Counter[str] = Counter()
    s3: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    for call in calls:
        requests.update(call.requests)
        s3.update(call.s3_requests)
        refused.update(call.refused)
    return {
        "requests": dict(requests),
        "request_count": sum(requests.values()),
        "refused": dict(refused),
        "refused_count": sum(refused.values()),
        "write_units": sum(c.write_units for c in calls),
        "read_units": sum(c.read_units for c in calls),
        "growth_bytes": sum(c.growth_bytes for c in calls),
        "s3_requests": dict(s3),
        "s3_count": sum(s3.values()),
        "s3_stored_bytes": sum(c.s3_stored_bytes for c in calls),
        "https": sum(c.https for c in calls),
        "calls": dict(Counter(c.kind for c in calls)),
        "shapes": [s for c in calls for s in c.shape],
    }


def summarize(runs: dict[str, ClientRun], missing: dict[str, str], turns: int) -> dict[str, Any]:
    """Per client: each step's totals, the means over the second invocation's steps and what a million such steps
    cost, the reads at each invocation's start, the whole run's totals."""
    from bench.billing.prices import per_million

    clients: dict[str, Any] = {}
    for name, run in runs.items():
        steps = {step: _step_totals(calls) for step, calls in run.steps(2).items()}
        per_step = list(steps.values())
        scalar = (
            "request_count",
            "refused_count",
            "write_units",
            "read_units",
            "growth_bytes",
            "s3_count",
            "s3_stored_bytes",
            "https",
        )
        # Per step: the second invocation's totals over its steps (one put each). LangGraph's async durability sends
        # a step's writes before or after the previous put as its threads go, so a step's own calls vary: the mean
        # over the invocation is what a step costs.
        second = [c for c in run.calls if c.invocation == 2 and c.kind in ("put", "put_writes")]
        count = sum(1 for c in second if c.kind == "put")
        totals = _step_totals(second)
        means: dict[str, Any] = {k: totals[k] / count if count else None for k in scalar}
        for counted in ("requests", "refused", "s3_requests", "calls"):
            means[counted] = {name: n / count for name, n in totals[counted].items()} if count else {}
        means["dollars_per_million"] = (
            per_million(means["write_units"], means["read_units"], means["s3_requests"]) if count else None
        )
        # The steady state: the same, without the step that resumes the invocation (LangGraph sends the resume value
        # in a put_writes call of its own there, for every saver).
        first = min((c.step for c in second if c.step is not None), default=None)
        steady = [c for c in second if c.step != first]
        steady_count = sum(1 for c in steady if c.kind == "put")
        steady_totals = _step_totals(steady)
        for key in ("request_count", "https"):
            means[f"steady_{key}"] = steady_totals[key] / steady_count if steady_count else None
        starts = [_step_totals([c]) for c in run.calls if c.kind == "get_tuple"]
        clients[name] = {
            "name": name,
            "label": next(s.label for s in CLIENTS if s.name == name),
            "failure": run.failure,
            "errors": [f"{c.kind} step {c.step}: {c.error}" for c in run.calls if c.error],
            "dynamodb_errors": [f"{c.kind} step {c.step}: {e}" for c in run.calls for e in c.dynamodb_errors],
            "finished": run.finished,
            "steps": {str(k): v for k, v in steps.items()},
            "first_invocation_steps": len(run.steps(1)),
            "median_step": means,
            "last_step": per_step[-1] if per_step else None,
            "invocation_start": starts,
            "whole_run": _step_totals(run.calls),
            "units_by_kind": {
                kind: [
                    statistics.median(c.write_units for c in second) if second else None,
                    statistics.median(c.growth_bytes for c in second) if second else None,
                ]
                for kind in ("put", "put_writes")
                for second in [[c for c in run.calls if c.invocation == 2 and c.kind == kind]]
            },
            "shapes_by_kind": {
                kind: [c.shape for c in run.calls if c.invocation == 2 and c.kind == kind]
                for kind in ("put", "put_writes")
            },
        }
    return {"turns": turns, "seed": SEED, "clients": clients, "missing": missing}


def _num(value: float | None) -> str:
    """A count or a median: an integer as one, else one decimal."""
    if value is None:
        return "—"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def _dollars(value: float | None) -> str:
    """`$4.23`."""
    return "—" if value is None else f"${value:,.2f}"


def _kb(size: float | None) -> str:
    """Bytes as `33.9 KB`."""
    return "—" if size is None else f"{size / 1000:,.1f} KB"


def _size_label(size: int) -> str:
    """`6 KB`, `309 KB`."""
    return f"{size / 1000:g} KB"


def _ops(counts: dict[str, float]) -> str:
    """`3 UpdateItem + 2 BatchWriteItem`, most first."""
    shown = [f"{_num(n)} {op}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n]
    return " + ".join(shown) or "none"


def _counted(total: float | None, counts: dict[str, float]) -> str:
    """`3.1: 2.1 UpdateItem + 1 BatchWriteItem`, or `0`."""
    return f"{_num(total)}: {_ops(counts)}" if total else _num(total)


def _ratio(baton: float | None, peer: float | None) -> str:
    """Baton / peer, marked ✅ when Baton spends at most the peer's."""
    if baton is None or peer is None:
        return "—"
    if peer == 0:
        return "✅ 0 = 0" if baton == 0 else f"❌ {_num(baton)} vs 0"
    return f"{'✅' if baton <= peer else '❌'} {baton / peer:.2f}×"


def _common_shape(run: dict[str, Any], kind: str) -> str:
    """The requests most of the second invocation's calls of `kind` made, as `UpdateItem? + GetItem!`."""
    shapes = Counter(" + ".join(shape) for shape in run.get("shapes_by_kind", {}).get(kind, []))
    if not shapes:
        return "—"
    shape, times = shapes.most_common(1)[0]
    return f"{shape or 'none'} ({times} of {sum(shapes.values())})"


def _messages_range(client: dict[str, Any]) -> str:
    """`messages` where the measured steps start and where they end: `33.9 → 48.6 KB`."""
    finished = client["finished"]
    start, end = finished.get("messages_bytes_at_start"), finished.get("messages_bytes")
    return f"{_kb(start).removesuffix(' KB')} → {_kb(end)}"


def _rows(client: dict[str, Any]) -> list[str]:
    """One client's column of the step table, in the order of `STEP_ROWS`."""
    step = client["median_step"]
    last = client["last_step"]
    whole = client["whole_run"]
    finished = client["finished"]
    baton = client["name"] == "baton"
    starts = "; ".join(
        f"{_ops(s['requests'])}, {_num(s['read_units'])} RU" + (f", {s['https']} HTTPS" if baton else "")
        for s in client["invocation_start"]
    )
    return [
        f"{len(client['steps'])} ({client['first_invocation_steps']})",
        _ops(step["calls"]),
        f"{_num(step['request_count'])}: {_ops(step['requests'])}",
        _counted(step["refused_count"], step["refused"]),
        _common_shape(client, "put"),
        _common_shape(client, "put_writes"),
        _num(step["write_units"]),
        " / ".join(f"{_num(units)} WU, {_num(grown)} B" for units, grown in client["units_by_kind"].values()),
        _num(step["read_units"]),
        _num(step["growth_bytes"]),
        _ops(step["s3_requests"]),
        _num(step["https"]) if baton else "none (DynamoDB directly)",
        _dollars(step["dollars_per_million"]),
        f"{last['request_count']} / {last['write_units']} / {last['growth_bytes']:,}" if last else "—",
        starts or "—",
        f"{whole['request_count']} / {whole['write_units']} / {_num(whole['read_units'])} / {whole['growth_bytes']:,}",
        f"{finished.get('messages', '—')} messages, {_messages_range(client)}",
    ]


STEP_ROWS = (
    "graph steps measured (the first invocation's)",
    "saver calls",
    "DynamoDB requests",
    "requests refused by design (conditional writes DynamoDB refused)",
    "requests of a `put` (`?` conditional, `!` consistent)",
    "requests of a `put_writes`",
    "write units",
    "write units and stored bytes of a `put` / of a `put_writes` (medians)",
    "read units",
    "stored item bytes (table growth)",
    "S3 requests",
    "HTTPS round trips",
    "$ per million supersteps (write and read units, S3 requests)",
    "last step: requests / write units / stored bytes",
    "start of each invocation (`get_tuple`)",
    "whole run, both invocations: requests / write units / read units / stored bytes",
    "`messages` at the end: count, canonical JSON from the first measured step to the end",
)


def _notes(clients: dict[str, Any], names: list[str]) -> list[str]:
    """What went differently from plan in the run."""
    notes = []
    for name in names:
        client = clients[name]
        label, finished = client["label"], client["finished"]
        if client["failure"]:
            notes.append(f"{label}: {client['failure']}")
        notes += [f"{label}: {error}" for error in client["errors"]]
        notes += [f"{label}: DynamoDB or S3 refused {error}" for error in client.get("dynamodb_errors", [])]
        # The first invocation's input is always written against a checkpoint not yet put: only the measured
        # steps' early writes say something about the run.
        if finished.get("early_measured"):
            notes.append(
                f"{label}: {finished['early_measured']} `put_writes` of the measured steps were called before the "
                "`put` of their checkpoint had been made (LangGraph's async durability); each was sent as it came"
            )
        if finished and not finished.get("interrupted"):
            notes.append(f"{label}: the first invocation did not stop at the interrupt")
    digests = {clients[n]["finished"].get("messages_sha256") for n in names if clients[n]["finished"]}
    if len(digests) > 1:
        notes.append("the savers ended with different messages: the graph did not run the same on each")
    return notes


OVERVIEW = (
    ("DynamoDB requests", "request_count"),
    ("steady state: DynamoDB requests", "steady_request_count"),
    ("refused by design", "refused_count"),
    ("HTTPS calls", "https"),
    ("steady state: HTTPS calls", "steady_https"),
    ("write units", "write_units"),
    ("read units", "read_units"),
    ("S3 requests", "s3_count"),
    ("$ per million supersteps", "dollars_per_million"),
)
"""The overview's columns: (title, figure of a step)."""
COMPARED = ("request_count", "refused_count", "write_units", "read_units", "s3_count", "dollars_per_million")
"""Figures of a step the Baton / peer table compares."""


def _overview(summary: dict[str, Any]) -> list[str]:
    """One row per state size and saver: what a graph step costs."""
    lines = [
        "| state at the measured steps (`messages`) | saver | " + " | ".join(title for title, _ in OVERVIEW) + " |",
        "|---|---|" + "---|" * len(OVERVIEW),
    ]
    for size in summary["sizes"]:
        result = summary["by_size"][str(size)]
        clients = result["clients"]
        for spec in CLIENTS:
            if spec.name in clients:
                client = clients[spec.name]
                step = client["median_step"]
                cells = [
                    _dollars(step[key])
                    if key == "dollars_per_million"
                    else (_num(step[key]) if spec.name == "baton" or "https" not in key else "none")
                    for _, key in OVERVIEW
                ]
                state = f"{_size_label(size)} ({_messages_range(client)})"
                lines.append(f"| {state} | {spec.label} | " + " | ".join(cells) + " |")
            elif spec.name in result["missing"] or spec.name in summary["missing"]:
                reason = result["missing"].get(spec.name) or summary["missing"][spec.name]
                lines.append(
                    f"| {_size_label(size)} | {spec.label} | not measured: {reason} |" + " |" * (len(OVERVIEW) - 1)
                )
    return lines


def _comparison(summary: dict[str, Any]) -> list[str]:
    """Baton over each peer at each size, and whether Baton's superstep is the cheapest of all savers."""
    lines = [
        "Baton / peer, per graph step (✅: Baton spends at most the peer's):",
        "",
        "| state | peer | DynamoDB requests | refused by design | write units | read units | S3 requests | "
        "$ per million supersteps | whole run: requests | write units | stored bytes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for size in summary["sizes"]:
        result = summary["by_size"][str(size)]
        clients = result["clients"]
        if "baton" not in clients:
            verdicts.append(f"- {_size_label(size)}: Baton was not measured")
            continue
        baton = clients["baton"]
        peers = [spec.name for spec in CLIENTS if spec.name != "baton" and spec.name in clients]
        for peer in peers:
            cells = [_ratio(baton["median_step"][k], clients[peer]["median_step"][k]) for k in COMPARED]
            cells += [
                _ratio(baton["whole_run"][k], clients[peer]["whole_run"][k])
                for k in ("request_count", "write_units", "growth_bytes")
            ]
            lines.append(f"| {_size_label(size)} | {clients[peer]['label']} | " + " | ".join(cells) + " |")
        if not peers:
            verdicts.append(f"- {_size_label(size)}: no peer was measured")
            continue
        own = baton["median_step"]["dollars_per_million"]
        cheapest = min(peers, key=lambda name: clients[name]["median_step"]["dollars_per_million"])
        theirs = clients[cheapest]["median_step"]["dollars_per_million"]
        mark = "✅ the lowest of all savers" if own <= theirs else "❌ not the lowest"
        unmeasured = [CLIENTS_BY_NAME[n].label for n in result["missing"] if n != "baton"]
        verdicts.append(
            f"- {_size_label(size)}: Baton {_dollars(own)} per million supersteps, the cheapest peer "
            f"{clients[cheapest]['label']} {_dollars(theirs)}: {mark}"
            + (f" of those measured ({', '.join(unmeasured)} could not run)" if unmeasured else "")
        )
    return [*lines, "", *verdicts]


def _details(summary: dict[str, Any], size: int) -> list[str]:
    """Every figure of one state size, a column per saver, and what went differently from plan."""
    result = summary["by_size"][str(size)]
    clients = result["clients"]
    names = [s.name for s in CLIENTS if s.name in clients]
    lines = [f"### {_size_label(size)}: every figure ({result['turns']} turns)", ""]
    if result["missing"]:
        lines += [f"- {CLIENTS_BY_NAME[name].label} not measured: {why}" for name, why in result["missing"].items()]
        lines.append("")
    if not names:
        return lines
    labels = " | ".join(clients[n]["label"] for n in names)
    lines += [f"| per graph step (mean over the second invocation) | {labels} |", "|---" * (len(names) + 1) + "|"]
    columns = [_rows(clients[n]) for n in names]
    for number, title in enumerate(STEP_ROWS):
        lines.append(f"| {title} | " + " | ".join(column[number] for column in columns) + " |")
    lines.append("")
    notes = _notes(clients, names)
    lines += [f"- {note}" for note in notes] or ["Every saver ran the graph to the end with the same messages."]
    return [*lines, ""]


CLIENTS_BY_NAME = {spec.name: spec for spec in CLIENTS}


def table(summary: dict[str, Any]) -> str:
    """The report's "LangGraph graph steps" section (Markdown, with its heading)."""
    seed, turns, sizes = summary["seed"], summary["turns"], summary["sizes"]
    lines = [
        "## LangGraph graph steps",
        "",
        "One LangGraph graph (`bench/harness/langgraph_steps.py`) run on each saver against the same metered moto: "
        "an agent",
        "loop of three nodes (agent → tools → human), each appending a 1-2 KB message of real text to a `messages`",
        f"channel (`operator.add`; seed {seed}, the same messages on every saver), and three small channels. It runs",
        "once per state size, on a fresh thread whose first input is a seeded conversation of real text (`states.py`:",
        "user and assistant turns, tool calls and their answers) sized so that `messages` holds "
        + ", ".join(_size_label(s) for s in sizes),
        "of canonical JSON where the measured steps start; each step appends about 1.5 KB to it (the state column",
        "gives `messages` at the first measured step → at the end). `human` calls `interrupt()` on the first turn; a",
        f"second invocation resumes it and loops to turn {turns}. LangGraph's default durability (`async`: a step's",
        "checkpoint is put in the background while the next node works).",
        *(
            (
                "Nodes return at once (`--instant-nodes`), racing that put: a step's writes may come before the put",
                "of their checkpoint, and the figures vary from run to run with the race.",
            )
            if summary.get("instant_nodes")
            else (
                "Each node stands for a model call, a tool or a person, far slower than a put: it first waits until",
                "the checkpoint it runs on has been put, so a step's writes come after that put, as in production,",
                "and every run sends the same calls in the same order.",
            )
        ),
        "Baton: `BatonSaver`, its HTTP requests served in its process by the api handler (API Gateway events, one at",
        "a time), its DynamoDB and S3 requests metered server side like the peers'. `langgraph-checkpoint-aws` with",
        "its S3 offload (a checkpoint over 350 KB goes to an object), without and with its gzip option;",
        "`langgraph-checkpoint-amazon-dynamodb` has no offload. A graph step (a superstep) is its tasks' `put_writes`",
        "and the `put` of the checkpoint it ends with; figures are means over the second invocation's steps (steady",
        "state: without the step that resumes it, where LangGraph sends the resume value in a `put_writes` of its own",
        "on every saver). Refused",
        "by design: conditional writes DynamoDB refused (`ConditionalCheckFailed`, counted by the meter). $ per",
        "million supersteps: write and read request units and S3 requests at on-demand prices "
        "(`bench/billing/prices.py`;",
        "storage is not per step). Stored bytes: the table's growth (each written item's new size minus its old, as",
        "DynamoDB sizes items). Each saver call is metered alone (calls are serialized).",
        "",
    ]
    lines += [
        f"- {summary['labels'].get(name, name)} not measured: {reason}" for name, reason in summary["missing"].items()
    ]
    lines += ["Per graph step (mean over the second invocation's steps):", "", *_overview(summary), ""]
    lines += [*_comparison(summary), ""]
    for size in sizes:
        lines += _details(summary, size)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    """`client ...` (in a client's environment) or the standalone comparison on a metered moto of its own."""
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        parser = argparse.ArgumentParser(description="one saver's run of the graph (driven by the orchestrator)")
        parser.add_argument("client", choices=[spec.name for spec in CLIENTS])
        parser.add_argument("--endpoint", required=True)
        parser.add_argument("--table", required=True)
        parser.add_argument("--secret")
        parser.add_argument("--bucket")
        parser.add_argument("--turns", type=int, default=TURNS)
        parser.add_argument("--thread", required=True)
        parser.add_argument("--size", type=int, default=SIZES[0])
        parser.add_argument("--instant-nodes", action="store_true")
        args = parser.parse_args(sys.argv[2:])
        return run_client(
            args.client,
            args.endpoint,
            args.table,
            args.secret,
            args.bucket,
            args.turns,
            args.thread,
            args.size,
            args.instant_nodes,
        )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns")
    parser.add_argument(
        "--sizes", default=",".join(str(s) for s in SIZES), help="bytes of `messages` where the measured steps start"
    )
    parser.add_argument(
        "--instant-nodes",
        action="store_true",
        help="nodes return at once and race LangGraph's background put (figures vary from run to run)",
    )
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args()
    turns = QUICK_TURNS if args.quick else args.turns
    sizes = [int(size) for size in args.sizes.split(",")]

    from bench.harness import baton_setup
    from bench.harness.meter import MeteredMotoServer
    from bench.harness.sidebyside import client_env

    os.environ.update({k: v for k, v in client_env().items() if k.startswith("AWS_")})
    server = MeteredMotoServer()
    endpoint = server.start()
    try:
        baton = CLIENTS_BY_NAME["baton"]
        assert baton.bucket is not None
        secret = baton_setup.prepare(endpoint, baton.table, baton.bucket)
        summary = measure(server.meter, endpoint, secret, turns, sizes=sizes, instant_nodes=args.instant_nodes)
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
