"""What a thread's items hold, read and written without AWS: the budgets of a checkpoint's item, a thread's head,
the values a checkpoint carries from its parent or holds itself, pending-write calls, and how much of an answer a
checkpoint's tuple takes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from msgspec import Struct, field

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.thread_puts import (
    INLINE_VALUE_BYTES,
    ITEM_VALUE_BYTES,
    Carried,
    Place,
    Placement,
    index_bytes,
)
from baton_checkpoints.domain.threads import (
    PendingWrite,
    StoredValue,
)
from baton_checkpoints.store import codec, layout, schema
from baton_checkpoints.store.attributes import Item
from baton_checkpoints.store.thread_names import (
    ARRIVED,
    BYTES,
    CHANNEL,
    EXPIRES_MS,
    FLOOR,
    GENERATION,
    HELD,
    INLINE,
    LIST,
    NAMESPACE,
    PACKED,
    PARENT,
    REFERENCE,
    SIZE,
    SIZES,
    TASK,
    TASK_PATH,
    TTL_MS,
    TYPE,
    UPDATED,
    VERSION,
    WRITE_CALL,
)

PAGE_ANSWER_BYTES: Final = limits.MAX_ANSWER_DATA_BYTES
"""A list page chooses its tuples while an upper bound of their JSON stays under this many bytes (the api then cuts
the page by the exact bytes it encodes, `api/responses.fitted_page`): the values of tuples a page would not show
are never read. One tuple always fits."""


PRESIGNED_URL_BYTES: Final = 2_048
"""At most what a presigned download adds to an answer (its URL, about 1,400 characters with a session token)."""


TUPLE_SYNTAX_BYTES: Final = 256
"""A tuple's field names and punctuation."""


VALUE_SYNTAX_BYTES: Final = 64


WRITE_SYNTAX_BYTES: Final = 128
"""A pending write's field names, its index and punctuation."""


UNPACKED: Final = object()
"""A value not packed yet (`_value_item` packs it)."""


MAX_REFRESH_SLACK_MS: Final = 60_000


KEPT: Final = {"S": "kept"}
"""The TTL attribute of a stored checkpoint. DynamoDB's TTL ignores an item whose TTL attribute is not a number: a
checkpoint goes with its thread, never by TTL, while writes that came before their checkpoint (their item made by
`put_writes` with a day's TTL) go within a day unless the put comes. `put_writes` keeps what is there."""


CALL_INLINE_VALUE_BYTES: Final = 4_096
"""Most bytes of values over `INLINE_VALUE_BYTES` one `put_writes` call keeps in its checkpoint's item."""


class Head(Struct, frozen=True):
    """What a thread's head says: its generation, when it expires, and when it was last deleted (nothing put before
    then shows)."""

    generation: str
    ttl_ms: int
    expires_ms: int
    floor_ms: int = 0

    def shows(self, item: Item) -> bool:
        """Whether a checkpoint item is of this life: its generation, and put after the last delete."""
        return (
            item.get(GENERATION, {}).get("S") == self.generation
            and int(item.get(UPDATED, {}).get("N", "0")) > self.floor_ms
        )


class Write(Struct, frozen=True):
    """One write of a put_writes: its index and its value."""

    index: int
    channel: str
    type: str
    raw: bytes | Uploaded

    @property
    def size(self) -> int:
        return self.raw.size if isinstance(self.raw, Uploaded) else len(self.raw)

    @property
    def small(self) -> bool:
        """It may ride in the checkpoint's item."""
        return isinstance(self.raw, bytes) and len(self.raw) <= INLINE_VALUE_BYTES

    @property
    def answered(self) -> int:
        """What it adds to a read's answer as bytes (a value in the bucket is answered by URL)."""
        return 0 if isinstance(self.raw, Uploaded) or len(self.raw) > ITEM_VALUE_BYTES else len(self.raw)


class Uploaded(Struct, frozen=True):
    """A value uploaded as a blob, checked: its size, SHA-256 (hex) and the object that holds its bytes."""

    size: int
    sha256: str
    source: str


class Loaded(Struct):
    """A checkpoint item decoded, with the keys of what it references outside itself."""

    item: Item
    namespace: str
    checkpoint_id: str
    document: dict[str, Any]
    document_bytes: int
    values: dict[str, StoredValue] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    """Channel -> sort key of its value item, for values not inline."""
    held: dict[str, str] = field(default_factory=dict)
    """Channel -> sort key of the checkpoint that holds its value in its item (another than this one); when that
    checkpoint is gone (pruned, deleted for its run), the value is in its value item (`missing`), written first."""
    writes: list[tuple[PendingWrite, StoredValue | str]] = field(default_factory=list)
    """Pending writes with their value, or the sort key of the item that holds it."""
    estimate: int = 0
    """At least the bytes of JSON its tuple takes in an answer, counted from the item alone (`tuple_estimate`)."""


def answered(size: int, in_bucket: bool) -> int:
    """At most what a value of `size` bytes adds to an answer: base64, or a presigned URL."""
    return PRESIGNED_URL_BYTES if in_bucket else 4 * -(-size // 3)


def tuple_estimate(loaded: Loaded) -> int:
    """At least the bytes of JSON a checkpoint's tuple takes in an answer, from its item alone (before any value is
    read): the document, each value as base64 (or a URL), and every name twice (JSON may escape each byte of a
    name, `"` and `\\`, into two), with each field's own syntax."""
    total = TUPLE_SYNTAX_BYTES + 2 * (len(loaded.namespace.encode()) + len(loaded.checkpoint_id.encode()) + 128)
    total += loaded.document_bytes + 2 * len(loaded.item.get(PARENT, {}).get("S", "").encode())
    sizes = loaded.item.get(SIZES, {}).get("M", {})
    for channel in loaded.values.keys() | loaded.missing.keys():
        total += VALUE_SYNTAX_BYTES + 2 * len(channel.encode())
        value = loaded.values.get(channel)
        if value is not None:
            total += answered(len(value.data or b""), in_bucket=False)
            continue
        large = sizes.get(channel, {}).get("L")
        if large is None:
            total += PRESIGNED_URL_BYTES  # not this item's to say: counted as the largest a read could answer
            continue
        size, in_bucket = int(large[1]["N"]), len(large) > 2 and large[2]["N"] == "1"
        total += answered(size, in_bucket or size > ITEM_VALUE_BYTES)
    for call in calls(loaded.item):
        task = len(call[TASK]["S"].encode()) + len(call[TASK_PATH]["S"].encode())
        for attr in call[LIST]["L"]:
            entry = attr["M"]
            size = int(entry[SIZE]["N"])
            names = task + len(entry[CHANNEL]["S"].encode())
            total += WRITE_SYNTAX_BYTES + 2 * names + len(entry[TYPE]["S"]) + answered(size, size > ITEM_VALUE_BYTES)
    return total


def carry(
    source: Item, versions: Mapping[str, str], carried: list[str]
) -> tuple[dict[str, Any], dict[str, Any], Carried]:
    """What a child keeps of `source` (its parent), as the item holds it (typed attribute values, taken as they are):
    small values (`iv`) and the sizes of large ones (`vz`) whose version it shares, and what they take of its item."""
    source_inline = source.get(INLINE, {}).get("M", {})
    source_sizes = source.get(SIZES, {}).get("M", {})
    inline: dict[str, Any] = {}
    sizes: dict[str, Any] = {}
    index = answered = 0
    for channel in carried:
        key = versions[channel]
        small = source_inline.get(channel)
        if small is not None and small["M"][VERSION]["S"] == key:
            inline[channel] = small
            size = len(small["M"][BYTES]["B"])
            index += index_bytes(channel, key, small["M"][TYPE]["S"], size)
            answered += size
            continue
        large = source_sizes.get(channel)
        if large is not None and large["L"][0]["S"] == key:
            sizes[channel] = large  # [version, size, in the bucket (0/1), the checkpoint that holds it (optional)]
            index += index_bytes(channel, key)
            entry = large["L"]
            answered += 0 if len(entry) > 2 and entry[2]["N"] == "1" else int(entry[1]["N"])
    return inline, sizes, Carried(index, answered)


def lay_in(placement: Placement, checkpoint_id: str, inline: dict[str, Any], sizes: dict[str, Any]) -> dict[str, Any]:
    """Enter the new values of `placement` in a checkpoint's channel maps (typed attribute values): small ones in
    `inline`, the version and size of the others in `sizes` (with the checkpoint's id for those it holds); the map of
    those it holds (`hv`)."""
    held: dict[str, Any] = {}
    for placed in placement.placed:
        value = placed.value
        version = {"S": value.version}
        if placed.place is Place.INLINE:
            inline[value.channel] = {"M": {VERSION: version, TYPE: {"S": value.type_tag}, BYTES: {"B": placed.stored}}}
            continue
        size = {"N": str(placed.size)}
        if placed.place is Place.HELD:
            entry = {VERSION: version, TYPE: {"S": value.type_tag}, BYTES: {"B": placed.stored}}
            if placed.packed:
                entry[PACKED] = {"BOOL": True}
            held[value.channel] = {"M": entry}
            sizes[value.channel] = {"L": [version, size, {"N": "0"}, {"S": checkpoint_id}]}
        else:
            sizes[value.channel] = {"L": [version, size, {"N": str(int(placed.place is Place.BUCKET))}]}
    return held


def packed_document(document_json: bytes, metadata: dict[str, Any]) -> bytes:
    """A checkpoint (as compact JSON) and its metadata as the item holds them: `{"c": checkpoint, "m": metadata}` as
    compact JSON, packed when that pays."""
    metadata_json = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text = b'{"c":' + document_json + b',"m":' + metadata_json + b"}"
    packed = codec.encode(text)
    return packed if packed is not None else text


def relocated(holders: list[Item], now_ms: int) -> list[Item]:
    """The value items of the large values `holders` (checkpoint items) hold (`HELD`), for checkpoints about to go:
    a child that keeps such a version then reads it from its value item."""
    items: list[Item] = []
    for holder in holders:
        generation = holder.get(GENERATION, {}).get("S")
        if not generation:
            continue
        keyed, _ = layout.read_thread_checkpoint_sk(holder[schema.SK]["S"])
        namespace = keyed if keyed is not None else holder[NAMESPACE]["S"]
        for channel, attr in holder.get(HELD, {}).get("M", {}).items():
            entry = attr["M"]
            value = held_value(entry[TYPE]["S"], entry)
            item: Item = {
                schema.PK: holder[schema.PK],
                schema.SK: {"S": layout.thread_value_sk(generation, namespace, channel, entry[VERSION]["S"])},
                GENERATION: {"S": generation},
                UPDATED: {"N": str(now_ms)},
                TYPE: entry[TYPE],
                SIZE: {"N": str(len(value.data or b""))},
                BYTES: entry[BYTES],
            }
            if PACKED in entry:
                item[PACKED] = {"BOOL": True}
            items.append(item)
    return items


def held_in(holder: Item | None, channel: str, value_sk: str) -> Item | None:
    """The entry of `channel` that a checkpoint item holds (`HELD`), when it holds the version whose value item is
    `value_sk` (the version ends that key); None when it does not."""
    entry = (holder or {}).get(HELD, {}).get("M", {}).get(channel, {}).get("M")
    if entry is None or not value_sk.endswith("#" + layout.part(entry[VERSION]["S"])):
        return None
    return dict(entry)


def held_value(type_tag: str, entry: Item) -> StoredValue:
    """A large value as a checkpoint item holds it (`HELD`), unpacked."""
    raw = bytes(entry[BYTES]["B"])
    return StoredValue(type_tag, codec.decode(raw, limits.MAX_STATE_BYTES) if PACKED in entry else raw)


def held_write(type_tag: str, entry: Item) -> StoredValue | str:
    """A pending write's value as its call holds it (unpacked), or the sort key of the item that does."""
    if BYTES not in entry:
        return str(entry[REFERENCE]["S"])
    raw = bytes(entry[BYTES]["B"])
    return StoredValue(type_tag, codec.decode(raw, limits.MAX_STATE_BYTES) if PACKED in entry else raw)


def calls(item: Item) -> list[dict[str, Any]]:
    """The `put_writes` calls an item holds, in the order they arrived (then by name)."""
    found = [(int(a["M"][ARRIVED]["N"]), name, a["M"]) for name, a in item.items() if name.startswith(WRITE_CALL)]
    return [call for _, _, call in sorted(found, key=lambda one: (one[0], one[1]))]


def call_name(task_id: str, task_path: str, writes: Sequence[Write]) -> str:
    """The attribute of one `put_writes` call: a digest of everything it carries, so a retry names the same one."""
    digest = hashlib.sha256()
    for part in (task_id, task_path):
        digest.update(part.encode() + b"\x1f")
    for write in writes:
        content = write.raw.sha256.encode() if isinstance(write.raw, Uploaded) else hashlib.sha256(write.raw).digest()
        digest.update(f"{write.index}\x1f{write.channel}\x1f{write.type}\x1f".encode() + content + b"\x1e")
    return WRITE_CALL + digest.hexdigest()[:24]


def special_name(task_id: str, index: int) -> str:
    """The attribute of a task's write to a special channel (its fixed index): a later call sets it again."""
    return f"{WRITE_CALL}{hashlib.sha256(task_id.encode()).hexdigest()[:24]}:{index}"


def write_value_sk(namespace: str, checkpoint_id: str, write: Write) -> str:
    """The sort key of a write value that does not ride in its call, named by its type and content: a retry names the
    same item, and writes of the same value share one."""
    content = write.raw.sha256.encode() if isinstance(write.raw, Uploaded) else write.raw
    digest = hashlib.sha256(f"{write.type}\x1f".encode() + content).hexdigest()[:32]
    return layout.thread_write_value_sk(namespace, checkpoint_id, digest)


def rename_write_values(item: Item, renamed: dict[str, str]) -> None:
    """Point a copied checkpoint's pending writes at the copies of their write values."""
    for name in [n for n in item if n.startswith(WRITE_CALL)]:
        call = dict(item[name]["M"])
        entries = []
        for attr in call[LIST]["L"]:
            entry = dict(attr["M"])
            if REFERENCE in entry:
                entry[REFERENCE] = {"S": renamed.get(entry[REFERENCE]["S"], entry[REFERENCE]["S"])}
            entries.append({"M": entry})
        call[LIST] = {"L": entries}
        item[name] = {"M": call}


def head_of(item: Item) -> Head:
    floor = int(item.get(FLOOR, {}).get("N", "0"))
    return Head(item[GENERATION]["S"], int(item[TTL_MS]["N"]), int(item[EXPIRES_MS]["N"]), floor)


def refresh_slack_ms(ttl_ms: int) -> int:
    """How much longer than its time to live a touch keeps a thread: a tenth of it, at most a minute. For that long
    after a touch, a container's puts to the thread touch nothing (the expiry is still a time to live away): a thread
    expires between its time to live and this much more after its last put."""
    return min(MAX_REFRESH_SLACK_MS, ttl_ms // 10)


def live_head(item: Item | None, now_ms: int) -> Head | None:
    """The head of a live thread, or None when it is missing or expired."""
    if not item or GENERATION not in item:
        return None
    head = head_of(item)
    return head if head.expires_ms > now_ms else None
