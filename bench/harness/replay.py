"""AWS stubbed the honest way: DynamoDB's answers recorded from moto, replayed at botocore's `before-send`.

Baton's store is being rewritten (attribute names, indexes), so the benchmark never hand-writes a DynamoDB answer
for it. Instead `record` drives Baton's api handler against a moto server, exactly as the measured clients do, and
keeps the raw HTTP answer of every DynamoDB request. A measured process then installs `Replay`: a `before-send`
handler that answers each request with the recorded bytes, so botocore still serializes, signs and parses as it
would, and nothing leaves the process.

`Replay` registers through `botocore.handlers.BUILTIN_HANDLERS`, which every botocore session copies when it is
created: Baton's own client (created at its first request) gets it without Baton being touched. A cold-start child
must not import botocore before its clock starts, so `install_after_import` appends the handler the moment
something else imports `botocore.handlers`, through a small import hook that also timestamps module executions.

This module imports only the standard library at the top: cold-start children import it before their clock.

`Recorder` is how `record` keeps the answers; `peer_puts.py` records the LangGraph savers' puts with it too and
answers them with a `Replay`, the same way.

`python -m bench.harness.replay record --endpoint URL --table NAME --secret S --out FILE` is what `run.py` starts.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import importlib.abc
import importlib.machinery
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

SIZES = (4_000, 32_000, 1_000)
"""The state sizes whose saves and lookup are recorded. The cold size first: the first request of all reads the API
key, and the cold request replays exactly that one (`{COLD_SIZE}/1`)."""
COLD_SIZE = 4_000
"""The state size of the cold request (the warm overhead's size too): big enough to be compressed."""
REFUSAL_STATE_BYTES = 3_010_000
REFUSAL_SUBJECT = "big"

Recording = dict[str, Any]
"""{"secret": ..., "table": ..., "requests": {"<size>/<step>": [call, ...]}}, a call being
{"operation", "request" (its body), "status", "headers", "body" (base64)}."""


def subject(size: int) -> str:
    """The subject the recorded (and replayed) saves of a size write to."""
    return f"replay-{size}"


# -- recording (a child of run.py, in the repository's .venv) ---------------------------------------------------------


def refusal_bodies() -> dict[str, str]:
    """Two save bodies of about 3 MB: an oversized state (413), and the same with an invalid `kind` (400)."""
    from bench.harness.clients import save_body
    from bench.harness.states import conversation_state

    oversized = save_body(REFUSAL_SUBJECT, conversation_state(target_bytes=REFUSAL_STATE_BYTES, seed=7))
    return {"oversized": oversized, "invalid": oversized.replace('"kind": "conversation"', '"kind": "conversatio"', 1)}


def record(endpoint: str, table: str, secret: str) -> Recording:
    """Drive Baton's handler against `endpoint` and keep every DynamoDB request and answer, per handled request.

    Requests, in order: for each size, a first save (a create; the first of all also reads the API key, as a cold
    container does), a second save (an update: the steady state), a lookup, and a bare UpdateItem, on Baton's own
    client, setting every attribute of the item the lookup read back (`bare_update`: what the second save wrote,
    as a plain write asking nothing back); then the two refusals; then, for
    each of `thread_put.SIZES`, a LangGraph graph step's put on a thread: its root, a child (the steady state) and a
    bare PutItem of what the child wrote, in one item (`thread_put.py`).
    """
    import botocore.handlers

    from bench.harness import thread_put
    from bench.harness.clients import lookup_event, save_event, states_for

    recorder = Recorder()
    recorder.install(botocore.handlers.BUILTIN_HANDLERS)
    os.environ["BATON_TABLE_NAME"] = table
    os.environ["BATON_AWS_ENDPOINT_URL"] = endpoint
    from baton_checkpoints.handlers.api import handler

    requests: dict[str, list[dict[str, Any]]] = {}

    def handle(name: str, event: dict[str, Any], expected: tuple[int, ...]) -> None:
        answer = handler(event, None)
        if answer["statusCode"] not in expected:
            raise RuntimeError(f"recording {name}: {answer['statusCode']} {str(answer.get('body'))[:500]}")
        requests[name] = recorder.take()

    for size in SIZES:
        first, second = states_for(size)
        for step, state in ((1, first), (2, second)):
            handle(f"{size}/{step}", save_event(secret, subject(size), state, f"record-{size}-{step}"), (200, 201))
        with made_calls() as made:
            handle(f"{size}/read", lookup_event(secret, subject(size), f"record-{size}-read"), (200,))
        client, _, read = next(call for call in reversed(made) if call[1] == "GetItem")
        item = client.get_item(TableName=table, Key=read["Key"], ConsistentRead=True)["Item"]
        recorder.take()
        client.update_item(**bare_update(table, read["Key"], item))
        requests[f"{size}/update-item"] = recorder.take()
    for name, body in refusal_bodies().items():
        event = save_event(secret, REFUSAL_SUBJECT, {}, f"record-{name}")
        event["body"] = body
        handle(name, event, (413,) if name == "oversized" else (400,))
    for size in thread_put.SIZES:
        # A graph step's put on a thread: its root (which touches the head), then a child of it (the steady state),
        # then a bare PutItem, on Baton's own client, of one item holding everything the child wrote.
        chain = thread_put.Chain(secret, thread_put.graph_step(size), thread_subject(size))
        handle(thread_name(size, "root"), chain.root(), (201,))
        with made_calls() as made:
            handle(thread_name(size, "step"), chain.child(), (201,))
        client = made[-1][0]
        item = thread_put.one_item([(operation, params) for _, operation, params in made])
        client.put_item(TableName=table, Item=item)
        requests[thread_name(size, "put-item")] = recorder.take()
    return {"secret": secret, "table": table, "requests": requests}


class Recorder:
    """Keeps every request's body and the raw HTTP answer of each call a botocore client made (`install`): the
    calls a `Replay` answers with later. Installed through `botocore.handlers.BUILTIN_HANDLERS`, so every session
    created afterwards records (Baton's client, a LangGraph saver's, `peer_puts.py`)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._sent: list[bytes] = []

    def install(self, handlers: list[tuple[str, Any]], services: tuple[str, ...] = ("dynamodb",)) -> None:
        """Record the calls of `services` of every botocore session created from now on."""
        for service in services:
            handlers.append((f"before-send.{service}", self._request))
            handlers.append((f"after-call.{service}", self._answer))

    def take(self) -> list[dict[str, Any]]:
        """The calls recorded since the last take."""
        calls, self.calls = self.calls, []
        return calls

    def _request(self, request: Any, **_: Any) -> None:
        body = request.body
        self._sent.append(body if isinstance(body, bytes) else str(body or "").encode("utf-8"))

    def _answer(self, http_response: Any, model: Any, **_: Any) -> None:
        sent = self._sent.pop() if self._sent else b""
        self.calls.append(
            {
                "operation": named(model.name, sent),
                "request": sent.decode("utf-8"),
                "status": http_response.status_code,
                "headers": {k.lower(): v for k, v in http_response.headers.items()},
                "body": base64.b64encode(http_response.content).decode("ascii"),
            }
        )


def bare_update(table: str, key: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a bare UpdateItem of `item` (botocore's form, as a GetItem answers it): its key, and one
    plain `SET` of every other attribute, in name order; no condition, nothing asked back. The baseline a plain
    save is judged against (`warm.py`): the same item written by the least an UpdateItem can be."""
    names = sorted(name for name in item if name not in key)
    return {
        "TableName": table,
        "Key": copy.deepcopy(key),
        "UpdateExpression": "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(names))),
        "ExpressionAttributeNames": {f"#a{i}": name for i, name in enumerate(names)},
        "ExpressionAttributeValues": {f":v{i}": copy.deepcopy(item[name]) for i, name in enumerate(names)},
    }


def thread_subject(size: int) -> str:
    """The thread the recorded graph step's puts of a size write to."""
    return f"replay-thread-{size}"


def thread_name(size: int, what: str) -> str:
    """The name of a recorded thread request: the chain's "root", its "step" (a child), a bare "put-item"."""
    return f"thread-{size}/{what}"


@contextlib.contextmanager
def made_calls() -> Iterator[list[tuple[Any, str, dict[str, Any]]]]:
    """Every DynamoDB or S3 call made inside the block, as (client, operation, parameters) given to botocore
    (`BaseClient._make_api_call` is where every operation of a client passes): a call can then be made again,
    alone, on the same client."""
    import botocore.client

    seen: list[tuple[Any, str, dict[str, Any]]] = []
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
        seen.append((client, operation, copy.deepcopy(params)))
        return original(client, operation, params)

    botocore.client.BaseClient._make_api_call = spy  # type: ignore[attr-defined]
    try:
        yield seen
    finally:
        botocore.client.BaseClient._make_api_call = original  # type: ignore[attr-defined]


# -- replaying (in measured children) ---------------------------------------------------------------------------------


class _Raw:
    """What botocore reads a response body from (`AWSResponse.raw.stream()`)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


TAKE = "TakeShare"
"""A container's take of its tenant's rate-limit share (an UpdateItem of `L#<tenant>`, once per 20 requests at most):
recorded, replayed and counted under its own name, so the figures show what rate limiting adds per request."""
USAGE = "CountUsage"
"""A container's write of what it counted of a tenant's usage (an UpdateItem of `L#<tenant>` / `U#<day>`, once per
100 requests or 30 s at most): counted under its own name, as the takes are."""
_TENANT_KEY = re.compile(r'"pk":\s*\{"S":\s*"L#')
_USAGE_DAY = re.compile(r'"sk":\s*\{"S":\s*"U#')


def named(operation: str, body: Any) -> str:
    """The name a request is recorded and counted under: its operation's, `TAKE` or `USAGE`."""
    text = _text(body)
    if operation != "UpdateItem" or _TENANT_KEY.search(text) is None or "ConditionExpression" not in text:
        return operation
    return USAGE if _USAGE_DAY.search(text) else TAKE


class Replay:
    """A `before-send` handler answering DynamoDB requests with recorded answers.

    In order (`script`): each request must be the next recorded operation, else the run fails loudly (Baton changed
    what it sends: record again). Otherwise (`answers`, for a warm loop): the answer recorded for the very same
    request body if there is one (a GetItem of the API key, say), else the last recorded answer of the operation
    (an UpdateItem's body carries the time, so it never repeats exactly).
    """

    def __init__(self, script: list[dict[str, Any]] | None = None, answers: list[dict[str, Any]] | None = None):
        self.script = list(script or [])
        self.by_operation: dict[str, dict[str, Any]] = {}
        self.by_request: dict[tuple[str, str], dict[str, Any]] = {}
        self.answer(answers or [])
        self.calls: list[str] = []
        self.marks: list[tuple[str, float]] = []
        """(event, perf_counter) of every request sent and answered: where a cold request spends its time."""

    def __call__(self, request: Any, event_name: str, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse, HeadersDict

        operation = named(event_name.rsplit(".", 1)[-1], request.body)
        self.calls.append(operation)
        if self.script:
            call = self.script.pop(0)
            if call["operation"] != operation:
                raise RuntimeError(f"replay expected {call['operation']}, Baton sent {operation}: record again")
        elif (operation, _text(request.body)) in self.by_request:
            call = self.by_request[(operation, _text(request.body))]
        elif operation in self.by_operation:
            call = self.by_operation[operation]
        elif operation in (TAKE, USAGE) and "UpdateItem" in self.by_operation:
            # A take the recording of this step did not need: any UpdateItem's answer reads as a full bucket; a
            # write of usage counts (every 100 requests) reads nothing of its answer but its success.
            call = self.by_operation["UpdateItem"]
        else:
            raise RuntimeError(f"no recorded answer for {operation}")
        body = base64.b64decode(call["body"])
        # botocore reads the headers as any mapping (its stubs ask for `HTTPHeaders`, what urllib3 answers with).
        return AWSResponse(request.url, call["status"], HeadersDict(call["headers"]), _Raw(body))  # type: ignore[arg-type]

    def answer(self, calls: list[dict[str, Any]]) -> None:
        """Add recorded calls to the answers (a later one replaces an earlier one of the same operation)."""
        for call in calls:
            self.by_operation[call["operation"]] = call
            self.by_request[(call["operation"], call.get("request", ""))] = call

    def mark(self, label: str) -> Callable[..., None]:
        """A handler that timestamps `label` each time its event fires."""

        def handler(**_: Any) -> None:
            self.marks.append((label, time.perf_counter()))

        return handler

    def register(self, handlers: list[tuple[str, Any]]) -> None:
        """Add this replay (and its timestamps) to botocore's built-in handlers: every session created from now on
        answers DynamoDB from it."""
        handlers.append(("before-call.dynamodb", self.mark("before-call")))
        handlers.append(("before-send.dynamodb", self.mark("before-send")))
        handlers.append(("before-send.dynamodb", self))
        handlers.append(("after-call.dynamodb", self.mark("after-call")))


def _text(body: Any) -> str:
    return body.decode("utf-8") if isinstance(body, bytes) else str(body or "")


class _Watch(importlib.abc.MetaPathFinder):
    """Timestamps the execution of chosen modules, and runs a callback once one has been executed."""

    def __init__(self, watched: tuple[str, ...], after: dict[str, Callable[[ModuleType], None]]) -> None:
        self.watched = watched
        self.after = after
        self.times: dict[str, tuple[float, float]] = {}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.watched or name in self.times:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            started = time.perf_counter()
            original(module)
            self.times[name] = (started, time.perf_counter())
            if name in self.after:
                self.after[name](module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install_after_import(replay: Replay, watched: tuple[str, ...] = ("boto3", "botocore.session")) -> _Watch:
    """Register `replay` as soon as `botocore.handlers` is imported (by whoever imports it first), and timestamp
    the execution of `watched` modules. Imports nothing itself."""
    watch = _Watch(
        (*watched, "botocore.handlers"), {"botocore.handlers": lambda m: replay.register(m.BUILTIN_HANDLERS)}
    )
    sys.meta_path.insert(0, watch)
    return watch


def load(path: Path) -> Recording:
    """A recording written by `record`."""
    recording: Recording = json.loads(path.read_text(encoding="utf-8"))
    return recording


def main() -> int:
    """`record`: drive Baton against a moto server and write what DynamoDB answered."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", choices=("record",))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    sys.stdout = sys.stderr  # Baton's access log
    recording = record(args.endpoint, args.table, args.secret)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(recording, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
