"""The threads routes as `BatonSaver` calls them: one function per route giving the SDK `Call` it makes, and the
pure pieces around them (the body of a put, the decoding of a tuple). No I/O here: `BatonSaver` only runs these
calls on its HTTP clients.

Every call is marked `repeatable`: each thread write is idempotent by its own keys (a put names its
`checkpoint_id`, a write its `(task_id, idx)`, copy, prune and delete-for-runs converge), so the SDK's retry core
repeats them after a lost answer as it repeats a `GET`, and no `Idempotency-Key` is sent (the routes ignore it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from baton_checkpoints.client._core import Answer, Call, data_of, next_cursor_of
from baton_checkpoints.client._routes import segment
from baton_checkpoints.client.errors import UnexpectedResponseError

MAX_IDS_PER_CALL = 100
"""`prune` takes at most this many thread ids, `delete-for-runs` this many run ids (api: threads)."""
MAX_PAGE = 200
"""The largest `limit` of a list page."""

TypedValue = dict[str, str]
"""`{"type": <serializer tag>, "data": <standard base64>}`: a value as the threads routes carry it."""


def encode_typed(typed: tuple[str, bytes | bytearray]) -> TypedValue:
    """A serializer's `(type, bytes)` as the wire's typed value."""
    tag, raw = typed
    return {"type": tag, "data": base64.b64encode(bytes(raw)).decode("ascii")}


def decode_typed(
    serde: SerializerProtocol, value: Mapping[str, Any], where: str, downloads: Mapping[str, bytes] | None = None
) -> Any:
    """A typed value of an answer, deserialized by `serde`: its `data` (base64), or the bytes downloaded from its
    `url` (a value whose bytes live in the bucket), found in `downloads`. `where` names it in the error of a
    malformed one."""
    tag = value.get("type") if isinstance(value, Mapping) else None
    if not isinstance(tag, str):
        raise _malformed(f"{where} is not a typed value ({{type, data}})")
    data = value.get("data")
    url = value.get("url")
    if isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise _malformed(f"{where}.data is not base64") from None
    elif isinstance(url, str) and downloads is not None and url in downloads:
        raw = downloads[url]
    else:
        raise _malformed(f"{where} has neither data nor a downloaded url")
    return serde.loads_typed((tag, raw))


def stored_urls(data: Any) -> list[str]:
    """The presigned downloads of a tuple's values and writes whose bytes live in the bucket (sent as `url`
    instead of `data`): what the saver fetches before decoding it."""
    if not isinstance(data, Mapping):
        return []
    found: list[str] = []
    values = data.get("channel_values")
    writes = data.get("pending_writes")
    typed = [*(values.values() if isinstance(values, Mapping) else ()), *(writes if isinstance(writes, list) else ())]
    for value in typed:
        if isinstance(value, Mapping) and not isinstance(value.get("data"), str) and isinstance(value.get("url"), str):
            found.append(value["url"])
    return found


def _malformed(reason: str) -> UnexpectedResponseError:
    return UnexpectedResponseError(f"The threads answer is malformed: {reason}.", status=200)


def thread_id_of(config: RunnableConfig) -> str:
    """The thread a config addresses (LangGraph accepts any value there and stringifies it, as the SQL savers do)."""
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable or configurable["thread_id"] is None:
        raise ValueError('BatonSaver needs config["configurable"]["thread_id"].')
    return str(configurable["thread_id"])


def namespace_of(config: RunnableConfig) -> str:
    """The config's `checkpoint_ns` (`""`, the root graph's, when absent)."""
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def checkpoint_id_of(config: RunnableConfig | None) -> str | None:
    """The config's `checkpoint_id`, if any."""
    if not config:
        return None
    value = (config.get("configurable") or {}).get("checkpoint_id")
    return str(value) if value else None


def tuple_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config LangGraph expects to address one checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}}


def _with_agent(params: dict[str, Any], agent_id: str | None) -> dict[str, Any]:
    if agent_id is not None:
        params["agent_id"] = agent_id
    return params


def put_body(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    serde: SerializerProtocol,
    *,
    ttl_seconds: int | None = None,
) -> dict[str, Any]:
    """The body of `POST /v1/threads/{thread_id}/checkpoints`.

    Only the channels of `new_versions` travel (the server resolves the others through `channel_versions`, where
    an earlier put stored them); a new version whose channel has no value (an emptied channel) is stored as
    `empty`, as LangGraph's own savers do, so that reading that version yields no value. A channel absent from
    `channel_versions` is never read back, so it is not sent (the server refuses it).
    """
    fields = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    channel_values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    values: dict[str, TypedValue] = {}
    for channel in new_versions:
        if channel not in versions:
            continue
        if channel in channel_values:
            values[channel] = encode_typed(serde.dumps_typed(channel_values[channel]))
        else:
            values[channel] = {"type": "empty", "data": ""}
    body: dict[str, Any] = {
        "checkpoint": fields,
        "metadata": json_safe(dict(get_serializable_checkpoint_metadata(config, metadata))),
        "checkpoint_ns": namespace_of(config),
        "values": values,
    }
    parent = checkpoint_id_of(config)
    if parent is not None:
        body["parent_checkpoint_id"] = parent
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    return body


def writes_body(
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    serde: SerializerProtocol,
) -> dict[str, Any]:
    """The body of `POST /v1/threads/{thread_id}/writes`: the writes in LangGraph's order (the server keys each by
    its position, or by the fixed index of a special channel)."""
    checkpoint_id = checkpoint_id_of(config)
    if checkpoint_id is None:
        raise ValueError('put_writes needs config["configurable"]["checkpoint_id"] (the checkpoint they belong to).')
    return {
        "checkpoint_ns": namespace_of(config),
        "checkpoint_id": checkpoint_id,
        "task_id": task_id,
        "task_path": task_path,
        "writes": [{"channel": channel, **encode_typed(serde.dumps_typed(value))} for channel, value in writes],
    }


def tuple_from(data: Any, serde: SerializerProtocol, downloads: Mapping[str, bytes] | None = None) -> CheckpointTuple:
    """A tuple of the API (`{thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
    channel_values, pending_writes}`) as LangGraph's `CheckpointTuple`, values deserialized by `serde` (those sent
    as a `url` taken from `downloads`, see `stored_urls`)."""
    if not isinstance(data, Mapping):
        raise _malformed("a tuple is not an object")
    try:
        thread_id = str(data["thread_id"])
        checkpoint_ns = str(data.get("checkpoint_ns") or "")
        checkpoint_id = str(data["checkpoint_id"])
        stored = data["checkpoint"]
        metadata = data.get("metadata") or {}
        channel_values = data.get("channel_values") or {}
        pending = data.get("pending_writes") or []
    except (KeyError, TypeError):
        raise _malformed("a tuple lacks thread_id, checkpoint_id or checkpoint") from None
    if not isinstance(stored, Mapping) or not isinstance(channel_values, Mapping) or not isinstance(pending, list):
        raise _malformed("a tuple's checkpoint, channel_values or pending_writes has the wrong type")
    values: dict[str, Any] = {}
    for channel, typed in channel_values.items():
        if isinstance(typed, Mapping) and typed.get("type") == "empty":
            continue  # the server leaves these out; an older one might not
        values[channel] = decode_typed(serde, typed, f"channel_values.{channel}", downloads)
    writes: list[PendingWrite] = []
    for index, write in enumerate(pending):
        if not isinstance(write, Mapping):
            raise _malformed(f"pending_writes[{index}] is not an object")
        value = decode_typed(serde, write, f"pending_writes[{index}]", downloads)
        writes.append((str(write.get("task_id")), str(write.get("channel")), value))
    checkpoint = cast(Checkpoint, {**stored, "channel_values": values})
    parent_id = data.get("parent_checkpoint_id")
    return CheckpointTuple(
        config=tuple_config(thread_id, checkpoint_ns, checkpoint_id),
        checkpoint=checkpoint,
        metadata=cast(CheckpointMetadata, dict(metadata)),
        parent_config=tuple_config(thread_id, checkpoint_ns, str(parent_id)) if parent_id else None,
        pending_writes=writes,
    )


MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer Baton's JSON carries exactly (RFC 8785, I-JSON): its bodies refuse larger ones."""


def json_safe(value: Any) -> Any:
    """`value` with every integer beyond ±(2^53-1) written as its decimal string. LangGraph copies a config's
    integers into metadata (a user id of 19 digits, say), which Baton's JSON cannot carry exactly; as a string it
    round-trips digit for digit, and a filter naming it is converted the same way, so it still matches."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        return str(value)
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def _same(left: Any, right: Any) -> bool:
    """JSON equality as the server compares: numbers by value, booleans only with booleans, containers deeply."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and bool(left == right)


BLOB_VALUE_BYTES = 1_000_000
"""A value whose base64 is longer than this travels as a blob (declared, uploaded, then named by `blob_id`)."""
BODY_VALUE_BYTES = 2_000_000
"""Most base64 of values one body carries (Baton takes bodies of 3,100,000 bytes); the largest values beyond it go
as blobs too."""


def oversized(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The typed values of a put or put_writes body that must travel as blobs: each over `BLOB_VALUE_BYTES` of
    base64, then the largest others until the body's values fit `BODY_VALUE_BYTES`. The dicts themselves, so that
    the caller replaces their `data` with the `blob_id` it uploaded them as."""
    typed: list[dict[str, Any]] = [*body.get("values", {}).values(), *body.get("writes", [])]
    typed.sort(key=lambda value: len(value.get("data") or ""), reverse=True)
    chosen: list[dict[str, Any]] = []
    total = sum(len(value.get("data") or "") for value in typed)
    for value in typed:
        size = len(value.get("data") or "")
        if size > BLOB_VALUE_BYTES or total > BODY_VALUE_BYTES:
            chosen.append(value)
            total -= size
    return chosen


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether every key of `filter` is in `metadata` with an equal JSON value (the server's rule, for the one case
    the saver checks itself: a list addressed to one checkpoint id)."""
    wanted = json_safe(dict(filter or {}))
    return all(key in metadata and _same(metadata[key], value) for key, value in wanted.items())


# -- the calls ------------------------------------------------------------------------------------------------------


def _thread_path(thread_id: str, tail: str = "") -> str:
    return f"/v1/threads/{segment(thread_id)}{tail}"


def put(thread_id: str, body: Mapping[str, Any], agent_id: str | None) -> Call[Any]:
    """`POST /v1/threads/{thread_id}/checkpoints`: the answer's data (`{thread_id, checkpoint_ns, checkpoint_id,
    expires_at}`)."""
    return Call(
        method="POST",
        path=_thread_path(thread_id, "/checkpoints"),
        params=_with_agent({}, agent_id) or None,
        body=body,
        has_body=True,
        repeatable=True,
        parse=data_of,
    )


def put_writes(thread_id: str, body: Mapping[str, Any], agent_id: str | None) -> Call[Any]:
    """`POST /v1/threads/{thread_id}/writes`."""
    return Call(
        method="POST",
        path=_thread_path(thread_id, "/writes"),
        params=_with_agent({}, agent_id) or None,
        body=body,
        has_body=True,
        repeatable=True,
        parse=data_of,
    )


def get_tuple(thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, agent_id: str | None) -> Call[Any]:
    """`GET /v1/threads/{thread_id}/checkpoint`: one tuple as the API sends it (the namespace's latest without
    `checkpoint_id`); `tuple_from` decodes it."""
    params: dict[str, Any] = {"checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        params["checkpoint_id"] = checkpoint_id
    return Call(
        method="GET",
        path=_thread_path(thread_id, "/checkpoint"),
        params=_with_agent(params, agent_id),
        repeatable=True,
        parse=data_of,
    )


Page = tuple[list[Any], str | None]
"""One list page: its tuples as the API sends them, newest first, and the cursor of the next page (None on the
last)."""


def list_page(
    thread_id: str,
    agent_id: str | None,
    *,
    checkpoint_ns: str | None,
    before: str | None,
    filter: Mapping[str, Any] | None,
    limit: int | None,
    cursor: str | None,
) -> Call[Page]:
    """`GET /v1/threads/{thread_id}/checkpoints`: one page (every namespace when `checkpoint_ns` is None)."""
    params: dict[str, Any] = {}
    if checkpoint_ns is not None:
        params["checkpoint_ns"] = checkpoint_ns
    if before is not None:
        params["before"] = before
    if filter:
        params["filter"] = json.dumps(
            json_safe(dict(filter)), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    if limit is not None:
        params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor

    def parse(answer: Answer) -> Page:
        items = data_of(answer)
        if not isinstance(items, list):
            raise _malformed("a list page's data is not a list")
        return items, next_cursor_of(answer)

    return Call(
        method="GET",
        path=_thread_path(thread_id, "/checkpoints"),
        params=_with_agent(params, agent_id),
        repeatable=True,
        parse=parse,
    )


def delete_thread(thread_id: str, agent_id: str | None) -> Call[Any]:
    """`DELETE /v1/threads/{thread_id}`."""
    return Call(
        method="DELETE",
        path=_thread_path(thread_id),
        params=_with_agent({}, agent_id) or None,
        repeatable=True,
        parse=data_of,
    )


def copy_thread(source_thread_id: str, target_thread_id: str, agent_id: str | None) -> Call[Any]:
    """`POST /v1/threads/{thread_id}/copy`."""
    return Call(
        method="POST",
        path=_thread_path(source_thread_id, "/copy"),
        params=_with_agent({}, agent_id) or None,
        body={"target_thread_id": target_thread_id},
        has_body=True,
        repeatable=True,
        parse=data_of,
    )


def prune(thread_ids: Sequence[str], strategy: str, agent_id: str | None) -> Call[Any]:
    """`POST /v1/threads:prune` for at most `MAX_IDS_PER_CALL` threads."""
    return Call(
        method="POST",
        path="/v1/threads:prune",
        params=_with_agent({}, agent_id) or None,
        body={"thread_ids": list(thread_ids), "strategy": strategy},
        has_body=True,
        repeatable=True,
        parse=data_of,
    )


def finished(answer: Any) -> bool:
    """Whether a prune's or a delete for runs' answer says it is complete, or it can go no further: one that stopped
    at what one request reads has done what it read, so the next one goes on from there; one that stopped without
    deleting anything would only stop there again (an answer without `complete`, from an older server, is
    complete)."""
    if not isinstance(answer, dict) or answer.get("complete", True):
        return True
    return not answer.get("deleted_checkpoints")


def delete_for_runs(run_ids: Sequence[str], agent_id: str | None) -> Call[Any]:
    """`POST /v1/threads:delete-for-runs` for at most `MAX_IDS_PER_CALL` runs."""
    return Call(
        method="POST",
        path="/v1/threads:delete-for-runs",
        params=_with_agent({}, agent_id) or None,
        body={"run_ids": list(run_ids)},
        has_body=True,
        repeatable=True,
        parse=data_of,
    )


def chunks(ids: Sequence[str], size: int = MAX_IDS_PER_CALL) -> list[list[str]]:
    """`ids` (stringified, order kept) in lists of at most `size`."""
    values = [str(value) for value in ids]
    return [values[start : start + size] for start in range(0, len(values), size)]


class Listing:
    """The state of one `list` call across its pages: which page to ask for next, and how many tuples the caller's
    `limit` still lets through. Shared by the synchronous and the asynchronous `list`."""

    def __init__(
        self,
        thread_id: str,
        *,
        checkpoint_ns: str | None,
        before: str | None,
        filter: Mapping[str, Any] | None,
        limit: int | None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.before = before
        self.filter = dict(filter) if filter else None
        self.remaining = limit
        self.cursor: str | None = None
        self.finished = limit is not None and limit <= 0

    def next_call(self, agent_id: str | None) -> Call[Page] | None:
        """The request of the next page, or None when the listing is complete."""
        if self.finished:
            return None
        return list_page(
            self.thread_id,
            agent_id,
            checkpoint_ns=self.checkpoint_ns,
            before=self.before,
            filter=self.filter,
            limit=None if self.remaining is None else min(self.remaining, MAX_PAGE),
            cursor=self.cursor,
        )

    def take(self, page: Page) -> list[Any]:
        """The tuples of `page` to hand to the caller; moves on to the next page."""
        items, cursor = page
        if self.remaining is not None:
            items = items[: self.remaining]
            self.remaining -= len(items)
        self.cursor = cursor
        self.finished = cursor is None or (self.remaining is not None and self.remaining <= 0)
        return items
