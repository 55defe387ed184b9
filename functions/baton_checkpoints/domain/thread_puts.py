"""A LangGraph thread's writes, planned without AWS (as `checkpoints.plan_save` plans a checkpoint's save).

`plan_put` turns a validated put into what it stores: the checkpoint (compact, its metadata beside it), its parent, the
version of every channel as a key, the values new in it, and the channels it carries from its parent. `place` decides
where each new value goes once the store knows what is carried and what the named blobs hold: in the checkpoint's
item (small values, `INLINE_VALUE_BYTES`; larger ones while they stay `HELD_VALUE_BYTES` stored), in an item of its
own, or in the bucket (past `ITEM_VALUE_BYTES`), and refuses a checkpoint over its budgets before anything is
written. `plan_writes` does the same for a `put_writes`: each write's index, and which ones overwrite.

The store carries the plan out (`store/threads`), and takes one `ThreadRef` for the thread it works on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from msgspec import Struct

from baton_checkpoints.domain.errors import PayloadTooLarge, QuotaExceeded
from baton_checkpoints.domain.threads import (
    MAX_CHECKPOINT_VALUE_BYTES,
    BlobRef,
    PutCheckpointRequest,
    PutWritesRequest,
    overwrites,
    version_key,
    write_index,
)

INLINE_VALUE_BYTES: Final = 512
"""Values (and pending writes) of at most this many bytes ride in the checkpoint item; larger ones get an item."""

MAX_INLINE_VALUE_BYTES: Final = 32_768
"""Most bytes of small values one checkpoint item holds (with their names and versions); the rest get items of their
own (the item stays small)."""

MAX_CHANNEL_INDEX_BYTES: Final = 65_536
"""Most bytes a checkpoint item keeps of its channels (names, versions, small values): with the checkpoint (at most
196 KB of JSON with its metadata) and its pending writes (128 KB), the item stays under DynamoDB's 400 KB."""

ITEM_VALUE_BYTES: Final = 350_000
"""Most bytes of a value kept in the table; a larger one lives in the bucket, as it is (answered by URL)."""

HELD_VALUE_BYTES: Final = 8_192
"""Most bytes (stored: packed when that pays) of large values new in a checkpoint that ride in its own item, so that
a graph step's put is one write; the rest get items of their own. Not more: a `put_writes` after the put rewrites
the item, which DynamoDB bills whole (at a 34 KB state, holding up to 32 KB made a step cost 29 write units where an
item of its own costs 17: bench/harness/langgraph_steps.py). Never more than the item has room for besides its
pending writes (`ITEM_ROOM_BYTES`)."""

MAX_INLINE_WRITE_BYTES: Final = 128_000
"""Most bytes of pending writes a checkpoint's item holds itself; more go to items of their own."""

ITEM_ROOM_BYTES: Final = 400_000 - MAX_INLINE_WRITE_BYTES - 16_000
"""What a checkpoint item may hold besides its pending writes (`MAX_INLINE_WRITE_BYTES`): DynamoDB's 400 KB, with
16 KB for names, metadata of the writes and keys."""

HELD_ENTRY_BYTES: Final = 32
"""What a held value's entry adds to the item besides its bytes, channel and version (names of its fields, type)."""


class ThreadRef(Struct, frozen=True):
    """The thread a request works on: its owner (tenant, agent) and its id."""

    tenant_id: str
    agent_id: str
    thread_id: str


class InBucket(Protocol):
    """A value whose bytes are in the bucket already (an uploaded blob, checked): only its size is known here."""

    @property
    def size(self) -> int: ...


Given = bytes | InBucket
"""A new value as the store resolved it: its bytes, or an uploaded blob."""


class NewValue(Struct, frozen=True):
    """A channel's value new in a checkpoint: its channel, its version (as a key), its type and what was sent."""

    channel: str
    version: str
    type_tag: str
    sent: bytes | BlobRef


class PutPlan(Struct, frozen=True):
    """A validated put, ready for the store: everything that does not depend on what the table holds."""

    ref: ThreadRef
    namespace: str
    checkpoint_id: str
    document: dict[str, Any]
    document_json: bytes
    """`document` as compact JSON (`threads.compact`)."""
    metadata: dict[str, Any]
    parent_id: str | None
    versions: Mapping[str, str]
    """Every channel's version, as a key (`version_key`)."""
    new: tuple[NewValue, ...]
    ttl_seconds: int | None
    now_ms: int
    create_refused: QuotaExceeded | None = None
    """Set when the tenant is at its `checkpoints` quota: the put may write to a thread, never start one."""

    @property
    def stored_bytes(self) -> int:
        """What the put stores, as sent: its document and its new values (a blob's bytes are counted already)."""
        return len(self.document_json) + sum(_sent_bytes(value.sent) for value in self.new)

    @property
    def carried(self) -> list[str]:
        """The channels whose value is the one stored for their version: carried from the parent."""
        fresh = {value.channel for value in self.new}
        return [channel for channel in self.versions if channel not in fresh]

    @property
    def run_id(self) -> str | None:
        """The run the checkpoint belongs to (its metadata's `run_id`), which deletes for runs find it by."""
        run_id = self.metadata.get("run_id")
        return run_id if isinstance(run_id, str) and run_id else None


def plan_put(request: PutCheckpointRequest, ref: ThreadRef, now_ms: int) -> PutPlan:
    """What a put of `request` to the thread `ref` stores."""
    document = request.checkpoint.document()
    versions = {channel: version_key(version) for channel, version in document.get("channel_versions", {}).items()}
    new = tuple(
        NewValue(channel, versions[channel], value.type, value.raw()) for channel, value in request.values.items()
    )
    return PutPlan(
        ref=ref,
        namespace=request.checkpoint_ns,
        checkpoint_id=str(document["id"]),
        document=document,
        document_json=request.checkpoint.compact_document(),
        metadata=request.metadata,
        parent_id=request.parent_checkpoint_id,
        versions=versions,
        new=new,
        ttl_seconds=request.ttl_seconds,
        now_ms=now_ms,
    )


def index_bytes(channel: str, version: str, type_tag: str = "", size: int = 0) -> int:
    """What one channel adds to its checkpoint's item (`iv` or `vz`): its name, version, type and small value."""
    return len(channel.encode()) + len(version.encode()) + len(type_tag) + size + 24


class Place(enum.Enum):
    """Where a new value goes."""

    INLINE = "inline"
    """In the checkpoint's item, carried into every child that keeps its version."""
    HELD = "held"
    """In the checkpoint's item, for this checkpoint only (a child finds it there by the checkpoint's id)."""
    ITEM = "item"
    """In an item of its own, written before the checkpoint's."""
    BUCKET = "bucket"
    """In the bucket, as it is (answered by a presigned URL)."""


class Placed(Struct, frozen=True):
    """A new value and where it goes: `stored` is what the table keeps of it (packed when `packed`), None in the
    bucket."""

    value: NewValue
    place: Place
    size: int
    stored: bytes | None
    packed: bool


class Carried(Struct, frozen=True):
    """What a checkpoint's item keeps of the channels it carries: bytes of its channel index, and of the values a read
    answers with (those in the table)."""

    index_bytes: int = 0
    answered_bytes: int = 0


class Placement(Struct, frozen=True):
    """Where each new value goes, and what the checkpoint's item keeps of its channels, in bytes."""

    placed: tuple[Placed, ...]
    index_bytes: int


Pack = Callable[[bytes], "bytes | None"]
"""Packs a value: its packed bytes, or None when packing does not pay."""


def place(plan: PutPlan, given: Mapping[str, Given], carried: Carried, document_bytes: int, pack: Pack) -> Placement:
    """Where each of `plan`'s new values goes (`given`: each one as the store resolved it), with the checkpoint's
    item holding `document_bytes` of checkpoint and `carried` of the channels it carries. 413 when the values held in
    the table pass `MAX_CHECKPOINT_VALUE_BYTES`, or the item's channels `MAX_CHANNEL_INDEX_BYTES`."""
    room = min(HELD_VALUE_BYTES, ITEM_ROOM_BYTES - MAX_CHANNEL_INDEX_BYTES - document_bytes)
    index = carried.index_bytes
    answered = carried.answered_bytes
    placed: list[Placed] = []
    for value in plan.new:
        raw = given[value.channel]
        size = len(raw) if isinstance(raw, bytes) else raw.size
        in_bucket = not isinstance(raw, bytes) or size > ITEM_VALUE_BYTES
        answered += 0 if in_bucket else size
        entry_bytes = index_bytes(value.channel, value.version, value.type_tag, size)
        if isinstance(raw, bytes) and size <= INLINE_VALUE_BYTES and index + entry_bytes <= MAX_INLINE_VALUE_BYTES:
            placed.append(Placed(value, Place.INLINE, size, raw, False))
            index += entry_bytes
            continue
        if in_bucket:
            placed.append(Placed(value, Place.BUCKET, size, None, False))
            index += index_bytes(value.channel, value.version)
            continue
        assert isinstance(raw, bytes)
        packed = pack(raw)
        body = packed if packed is not None else raw
        held_bytes = len(body) + len(value.channel.encode()) + len(value.version.encode()) + HELD_ENTRY_BYTES
        if held_bytes <= room:
            room -= held_bytes
            placed.append(Placed(value, Place.HELD, size, body, packed is not None))
            index += index_bytes(value.channel, value.version) + len(plan.checkpoint_id.encode())
            continue
        placed.append(Placed(value, Place.ITEM, size, body, packed is not None))
        index += index_bytes(value.channel, value.version)
    if answered > MAX_CHECKPOINT_VALUE_BYTES:
        raise PayloadTooLarge(
            field="values",
            limit_bytes=MAX_CHECKPOINT_VALUE_BYTES,
            actual_bytes=answered,
            what=f"The channel values of this checkpoint held in the table (values over {ITEM_VALUE_BYTES} bytes each "
            "go to the bucket and do not count)",
        )
    if index > MAX_CHANNEL_INDEX_BYTES:
        raise PayloadTooLarge(
            field="checkpoint",
            limit_bytes=MAX_CHANNEL_INDEX_BYTES,
            actual_bytes=index,
            what="What this checkpoint's item keeps of its channels (names, versions and small values)",
        )
    return Placement(tuple(placed), index)


class PlannedWrite(Struct, frozen=True):
    """One write of a `put_writes`: where it is kept (its index), its channel, type and what was sent."""

    index: int
    channel: str
    type_tag: str
    sent: bytes | BlobRef

    @property
    def overwrites(self) -> bool:
        """A special channel's write: a later one under the same (task, index) replaces it."""
        return overwrites(self.index)


def _sent_bytes(sent: bytes | BlobRef) -> int:
    return len(sent) if isinstance(sent, bytes) else 0


class WritesPlan(Struct, frozen=True):
    """A validated `put_writes`, ready for the store."""

    ref: ThreadRef
    namespace: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: tuple[PlannedWrite, ...]
    now_ms: int

    @property
    def stored_bytes(self) -> int:
        """What the call stores, as sent (a blob's bytes are counted already)."""
        return sum(_sent_bytes(write.sent) for write in self.writes)


def plan_writes(request: PutWritesRequest, ref: ThreadRef, now_ms: int) -> WritesPlan:
    """What a `put_writes` of `request` to the thread `ref` keeps: each write at its index (`write_index`)."""
    writes = tuple(
        PlannedWrite(write_index(write.channel, position), write.channel, write.type, write.raw())
        for position, write in enumerate(request.writes)
    )
    return WritesPlan(
        ref=ref,
        namespace=request.checkpoint_ns,
        checkpoint_id=request.checkpoint_id,
        task_id=request.task_id,
        task_path=request.task_path,
        writes=writes,
        now_ms=now_ms,
    )
