"""A LangGraph graph step's `put` as `BatonSaver` sends it, for the stubbed measurements (`warm.py`, `replay.py`).

The step is taken from a real graph run, not written by hand: `langgraph_steps.py`'s agent loop runs on LangGraph's
in-memory saver from its seeded conversation of 6 or 34 KB (`SIZES`) up to its interrupt, and the put of the
checkpoint `tools` ends (`STEP`) is kept: its `messages` value new (the conversation, msgpack by LangGraph's
serializer), `status`, `tool_calls` and a branch channel new, `turn` and the others carried from the parent. Its body
is what `BatonSaver` sends (`baton_checkpoints.langgraph.threads.put_body`).

A `Chain` turns that step into puts of one thread: a root (no parent, every channel's value: it touches the
thread's head and stores what children carry), then children, each a new checkpoint id whose parent is the one put
before it. A child put right after its parent, within a minute of the head's touch, is a graph step's steady state in
a warm container: no read, no touch, only the checkpoint's write (and, for a value over what the item holds, the
value's own item first).

`one_item` is the baseline's item: everything a put wrote, in one item, as a saver that stores a checkpoint in one
PutItem would write it.

`captured_put` keeps LangGraph's own arguments to that put (config, checkpoint, metadata, new versions) and
`put_args` re-aims them at a thread and a parent: what `peer_puts.py` hands `BatonSaver.put` and each peer's `put`
(it imports nothing of Baton, so the peers' environments use it too).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import random
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from bench.paths import REPO

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

SIZES = (6_000, 34_000)
"""Bytes of the conversation (`messages`, canonical JSON) at the measured step: the LangGraph budgets' 6 and 34 KB."""
STEP = 2
"""`metadata.step` of the measured put: the checkpoint `tools` ends (agent, then tools, of the first invocation)."""

_SET = re.compile(r"(#\w+) = (:\w+)")


@dataclass(frozen=True)
class GraphStep:
    """One graph step's put: the body of the step (its new values, a parent) and of a root (every value, none)."""

    size: int
    root: dict[str, Any]
    step: dict[str, Any]

    @property
    def messages_bytes(self) -> int:
        """Bytes of the serialized conversation the step sends (msgpack, before base64)."""
        return len(base64.b64decode(self.step["values"]["messages"]["data"]))


@cache
def captured_put(size: int) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
    """The arguments LangGraph gave `put` at step `STEP` of `langgraph_steps.py`'s graph run on its in-memory saver
    from its seeded `size`-byte conversation: config, checkpoint, metadata, new versions (kept by a copy; shared
    by every caller, never to be changed). The channel versions' random part (LangGraph's `get_next_version`) is
    drawn from a generator seeded here, so every process, in any environment, captures the same values; only the
    checkpoint's id and time differ. Imports nothing of Baton: the peers' environments capture it too."""
    from langgraph.checkpoint.memory import InMemorySaver

    from bench.harness import langgraph_steps

    puts: list[tuple[Any, ...]] = []

    class Capturing(InMemorySaver):
        """LangGraph's in-memory saver, keeping the arguments of every put."""

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            puts.append(copy.deepcopy((config, checkpoint, metadata, new_versions)))
            return super().put(config, checkpoint, metadata, new_versions)

    saver = Capturing()
    graph = langgraph_steps.build_graph(langgraph_steps.QUICK_TURNS, saver)
    kept = random.getstate()
    random.seed(f"{langgraph_steps.SEED}/capture/{size}")
    try:
        graph.invoke(langgraph_steps.first_input(size), {"configurable": {"thread_id": f"capture-{size}"}})
    finally:
        random.setstate(kept)
    config, checkpoint, metadata, new_versions = next(p for p in puts if p[2].get("step") == STEP)
    if "messages" not in new_versions:
        raise RuntimeError(f"the graph's step {STEP} no longer writes messages: choose another step")
    return config, checkpoint, metadata, new_versions


def put_args(
    size: int, thread: str, parent: str | None, clock_seq: int
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
    """`captured_put(size)` re-aimed: on `thread`, a child of the checkpoint `parent` (none: the thread's first),
    a new checkpoint id (`uuid6` with `clock_seq`, later than every id made before it). The checkpoint is a new
    dict sharing the captured values (as LangGraph's checkpoints of successive steps share their messages)."""
    from langgraph.checkpoint.base.id import uuid6

    config, checkpoint, metadata, new_versions = captured_put(size)
    configurable = {**config["configurable"], "thread_id": thread}
    if parent is None:
        configurable.pop("checkpoint_id", None)
    else:
        configurable["checkpoint_id"] = parent
    aimed: RunnableConfig = {**config, "configurable": configurable}
    return aimed, {**checkpoint, "id": str(uuid6(clock_seq=clock_seq))}, metadata, new_versions


def fingerprint(size: int) -> str:
    """A digest of what `captured_put(size)` puts but its id and time: equal in every process that captured the
    same step (`peer_puts.py` checks that every side puts the same checkpoint)."""
    _, checkpoint, metadata, new_versions = captured_put(size)
    kept = {k: v for k, v in checkpoint.items() if k not in ("id", "ts")}
    text = json.dumps([kept, metadata, new_versions], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@cache
def graph_step(size: int) -> GraphStep:
    """The put of step `STEP` of `langgraph_steps.py`'s graph run from its seeded `size`-byte conversation."""
    from langgraph.checkpoint.memory import InMemorySaver

    from baton_checkpoints.langgraph.threads import put_body

    config, checkpoint, metadata, new_versions = captured_put(size)
    serde = InMemorySaver().serde
    root_config: RunnableConfig = {
        "configurable": {k: v for k, v in config["configurable"].items() if k != "checkpoint_id"}
    }
    every = dict(checkpoint["channel_versions"])
    return GraphStep(
        size=size,
        root=put_body(root_config, checkpoint, metadata, every, serde),
        step=put_body(config, checkpoint, metadata, new_versions, serde),
    )


def put_event(secret: str, thread: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The API Gateway HTTP API event of `POST /v1/threads/{thread}/checkpoints` (the save's template, re-aimed)."""
    event: dict[str, Any] = json.loads((REPO / "events" / "save_checkpoint.json").read_text(encoding="utf-8"))
    path = f"/v1/threads/{thread}/checkpoints"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["headers"].pop("idempotency-key", None)
    event["headers"]["authorization"] = f"Bearer {secret}"
    event["requestContext"]["requestId"] = request_id
    event["body"] = json.dumps(body)
    return event


class Chain:
    """Puts of one graph step on one thread: `root()` first, then `child()`, each a child of the put before it."""

    def __init__(self, secret: str, step: GraphStep, thread: str) -> None:
        self.secret = secret
        self.graph_step = step
        self.thread = thread
        self.last: str | None = None
        self.count = 0

    def _event(self, template: dict[str, Any]) -> dict[str, Any]:
        from langgraph.checkpoint.base.id import uuid6

        self.count += 1
        body = copy.deepcopy(template)
        body["checkpoint"]["id"] = str(uuid6(clock_seq=self.count))
        if self.last is None:
            body.pop("parent_checkpoint_id", None)
        else:
            body["parent_checkpoint_id"] = self.last
        self.last = body["checkpoint"]["id"]
        return put_event(self.secret, self.thread, body, f"{self.thread}-{self.count}")

    def root(self) -> dict[str, Any]:
        """The thread's first put: every channel's value, no parent."""
        self.last = None
        return self._event(self.graph_step.root)

    def child(self) -> dict[str, Any]:
        """The step's put, a child of the last put of the chain."""
        if self.last is None:
            raise RuntimeError("a chain starts with its root")
        return self._event(self.graph_step.step)


def one_item(requests: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Everything the put's `requests` ((operation, parameters), as botocore was given them) wrote, in one item:
    the checkpoint's UpdateItem (its key and every attribute it SETs) and the items of its BatchWriteItems (their
    attributes but the key, renamed apart). Fails on a request it does not know how to read: the baseline must stay
    the same bytes as the put."""
    item: dict[str, Any] = {}
    key: set[str] = set()
    extra: list[dict[str, Any]] = []
    for operation, params in requests:
        if operation == "UpdateItem":
            names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
            sets = params["UpdateExpression"].split(" REMOVE ", 1)[0].removeprefix("SET ")
            pairs = _SET.findall(sets)
            if len(pairs) != sets.count("="):
                raise RuntimeError(f"the put's UpdateItem sets more than plain values: {sets[:200]}")
            item.update(params["Key"])
            key |= set(params["Key"])
            item.update({names[name]: values[value] for name, value in pairs})
        elif operation == "BatchWriteItem":
            for writes in params["RequestItems"].values():
                extra += [write["PutRequest"]["Item"] for write in writes]
        else:
            raise RuntimeError(f"the put made a {operation}: one_item does not know what it writes")
    if not item:
        raise RuntimeError("the put wrote no checkpoint item (no UpdateItem)")
    for n, other in enumerate(extra):
        item.update({f"{name}.{n}": value for name, value in other.items() if name not in key})
    return item
