"""LangGraph threads: the requests of the threads resource and the pure rules behind them.

A thread holds LangGraph's checkpoints, addressed by (thread_id, checkpoint_ns, checkpoint_id). Baton never decodes
what LangGraph serialized: channel values and pending writes are opaque typed bytes (`TypedValue`), stored once per
(thread, namespace, channel, version). What is decided here, without AWS: what a request may carry, where each
write of a `put_writes` is kept (its index), the order pending writes are returned in, and what a metadata filter
matches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Final, Literal

import pybase64
from msgspec import Struct
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.canonical import parse_strict
from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.ids import BLOB_ID_PATTERN
from baton_checkpoints.domain.models import RequestModel

MAX_THREAD_ID_CHARS: Final = 200
MAX_NAMESPACE_CHARS: Final = 1_000
MAX_NAME_CHARS: Final = 200
"""Longest channel name, task id or run id."""
MAX_CHECKPOINT_ID_CHARS: Final = 128
"""Longest checkpoint id: it is written as itself in sort keys (ids sort by time), which DynamoDB caps at 1 KB."""
MAX_VERSION_CHARS: Final = 200
MAX_TASK_PATH_CHARS: Final = 1_000
MAX_METADATA_BYTES: Final = 32_768
"""Largest metadata object (compact JSON): metadata is filtered on, so it stays small."""
MAX_CHECKPOINT_BYTES: Final = 163_840
"""Largest checkpoint (compact JSON, without its channel values): it lives in the checkpoint's item."""
MAX_WRITES: Final = 1_000
"""Most writes one `put_writes` carries."""
MAX_THREAD_IDS: Final = 100
"""Most threads one prune names, and most run ids one delete-for-runs names."""
MAX_TYPE_CHARS: Final = 40
MAX_CHECKPOINT_VALUE_BYTES: Final = 2_500_000
"""Most bytes of channel values one checkpoint holds in the table, all channels together (a value over 350,000 bytes
lives in the bucket and is answered by URL: it does not count). With `MAX_PENDING_WRITE_BYTES`, the largest tuple
answers in 4.1 MB of JSON, within Lambda's 6 MB even base64-encoded towards API Gateway."""
MAX_PENDING_WRITE_BYTES: Final = 500_000
"""Most bytes of pending-write values one checkpoint holds in the table, all tasks together (the same rule)."""
MAX_REQUEST_BLOBS: Final = 10
"""Most distinct blobs one put or put_writes names (each is checked once, however many values name it)."""
MAX_BLOB_COPY_BYTES: Final = 12_000_000
"""Most bytes of blobs over 350,000 bytes one request copies into a thread's storage, counted each time a value names
one: four values of the state limit."""
LIST_READ_BYTES: Final = 4_000_000
"""Most bytes of checkpoint items (DynamoDB's sizes) one list page, or one read of a namespace's latest checkpoint,
reads before it answers: a page whose filter (or whose `before`) skips many checkpoints comes back short, or empty
with a cursor, instead of reading the thread to its end."""
MAX_COPY_READ_BYTES: Final = 16_000_000
"""Most bytes of a thread's items (DynamoDB's sizes) one copy reads: a larger thread is refused (413) before anything
is written or copied, instead of a request whose work and memory grow with the thread."""
MAX_PRUNE_READ_BYTES: Final = 16_000_000
"""Most bytes of checkpoint items (DynamoDB's sizes) one `keep_latest` prune reads over all its threads: past it,
what was read is pruned and the answer says it is not complete (`BatonSaver.prune` asks again until it is)."""
MAX_RUNS_READ_BYTES: Final = 16_000_000
"""Most bytes of checkpoint items (and their keys in gsi1) one delete for runs reads: past it, what was read is
deleted and the answer says it is not complete (`BatonSaver.delete_for_runs` asks again until it is)."""
DELETE_SECONDS: Final = 15
"""How long a delete, prune or copy works before it leaves the rest to the reaper: well inside API Gateway's 30 s."""

_NO_CONTROL: Final = r"^[^\x00-\x1f\x7f-\x9f]*$"
_NO_CONTROL_NONEMPTY: Final = r"^[^\x00-\x1f\x7f-\x9f]+$"

ThreadId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_THREAD_ID_CHARS, pattern=_NO_CONTROL_NONEMPTY)]
Namespace = Annotated[str, StringConstraints(max_length=MAX_NAMESPACE_CHARS, pattern=_NO_CONTROL)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS, pattern=_NO_CONTROL_NONEMPTY)]
CheckpointId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CHECKPOINT_ID_CHARS, pattern=_NO_CONTROL_NONEMPTY)
]
TaskPath = Annotated[str, StringConstraints(max_length=MAX_TASK_PATH_CHARS, pattern=_NO_CONTROL)]
TypeTag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TYPE_CHARS, pattern=r"^[a-z0-9_]+(\+[a-z0-9_]+)*$"),
    Field(
        description=(
            "The serializer's tag: msgpack, json, bytes, bytearray, null, empty, pickle, or an encrypted one such as "
            "msgpack+aes."
        )
    ),
]
Base64Data = Annotated[
    str,
    Field(
        description="The serialized bytes, standard base64 with padding ('' for none).",
        json_schema_extra={
            "contentEncoding": "base64",
            # Canonical base64: whole groups, then a last one whose unused bits are zero.
            "pattern": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$",
        },
    ),
]
Version = Annotated[
    Annotated[str, StringConstraints(max_length=MAX_VERSION_CHARS)] | int | float,
    Field(description="A channel version as LangGraph made it: a string, an integer or a number."),
]
ThreadTtlSeconds = Annotated[int, Field(ge=limits.MIN_TTL_SECONDS, le=limits.MAX_TTL_SECONDS)]

EMPTY_TYPE: Final = "empty"
"""The tag LangGraph gives a channel that has a new version but no value: such a channel is absent on read."""

SPECIAL_WRITE_INDEX: Final[Mapping[str, int]] = {
    "__error__": -1,
    "__scheduled__": -2,
    "__interrupt__": -3,
    "__resume__": -4,
}
"""Channels whose write has a fixed index (LangGraph's `WRITES_IDX_MAP`): a later write to one replaces the first."""


_NOT_BASE64: Final = "must be standard base64 (A-Z, a-z, 0-9, +, / and = padding), as its bytes encode"
_BASE64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_ONE_BYTE_LAST: Final = b"AQgw"
"""The characters that may end a last group holding one byte (`xy==`): their unused four low bits are zero."""
_TWO_BYTES_LAST: Final = b"AEIMQUYcgkosw048"
"""The characters that may end a last group holding two bytes (`xyz=`): their unused two low bits are zero."""


def is_canonical_base64(data: str) -> bool:
    """True when `data` is standard base64 with padding whose unused bits are zero: the one text that encodes its
    bytes. Checked without decoding them (a put decodes each value once, for the store: `TypedValue.raw`)."""
    if len(data) % 4 or not data.isascii():
        return False
    text = data.encode("ascii")
    padding = text.translate(None, _BASE64_ALPHABET)  # every character outside the alphabet, in order
    if not padding:
        return True
    if padding == b"=" and text.endswith(b"="):
        return text[-2:-1] in _TWO_BYTES_LAST
    if padding == b"==" and text.endswith(b"=="):
        return text[-3:-2] in _ONE_BYTE_LAST
    return False


def decode_data(data: str) -> bytes:
    """The bytes of a base64 `data` field, strictly: the alphabet, the padding and the unused bits are checked (one
    text per value: the canonical encoding of its bytes); ValueError when it is not."""
    if not is_canonical_base64(data):
        raise ValueError(_NOT_BASE64)
    return pybase64.b64decode(data, validate=True)


class BlobRef(Struct, frozen=True):
    """A value whose bytes were uploaded as a blob (`POST /v1/blobs`): too large for a request body."""

    blob_id: str


class TypedValue(RequestModel):
    """One serialized value: the serializer's type tag, and its bytes (`data`) or the blob they were uploaded as
    (`blob_id`, for a value too large for a request body)."""

    type: TypeTag
    data: Base64Data | None = None
    blob_id: Annotated[
        str | None,
        Field(
            description=(
                "A blob the caller declared and uploaded (POST /v1/blobs) holding the value's bytes, instead of "
                f"data: for values up to {limits.MAX_STATE_BYTES:,} bytes that a body cannot carry."
            ),
            json_schema_extra={"pattern": r"^blob_[0-9a-f]{32}$"},
        ),
    ] = None

    @field_validator("data")
    @classmethod
    def _base64(cls, data: str | None) -> str | None:
        if data is not None and not is_canonical_base64(data):
            raise ValueError(_NOT_BASE64)
        return data

    @field_validator("blob_id")
    @classmethod
    def _blob_id(cls, blob_id: str | None) -> str | None:
        if blob_id is not None and not BLOB_ID_PATTERN.match(blob_id):
            raise ValueError("must be blob_ followed by 32 lowercase hex digits")
        return blob_id

    @model_validator(mode="after")
    def _one_source(self) -> TypedValue:
        if (self.data is None) == (self.blob_id is None):
            raise ValueError("must carry exactly one of data (the bytes, base64) and blob_id (an uploaded blob)")
        return self

    def raw(self) -> bytes | BlobRef:
        """The value's bytes, or the blob that holds them."""
        if self.blob_id is not None:
            return BlobRef(self.blob_id)
        # Canonical base64 (validated), decoded with SIMD: 2 µs for 32 KB of bytes, where binascii took 88 µs.
        return pybase64.b64decode(self.data or "", validate=True)


JSON_VALUES: Final[dict[str, Any]] = {"$ref": "#/components/schemas/JsonValue"}
"""How the API description states a field's free JSON: numbers within ±(2^53-1), as every body is read."""


class CheckpointBody(BaseModel):
    """A LangGraph checkpoint without its channel values: `id` and `channel_versions` are read, every other field is
    kept as sent."""

    model_config = ConfigDict(strict=True, extra="allow", json_schema_extra={"additionalProperties": dict(JSON_VALUES)})

    id: CheckpointId
    channel_versions: dict[Name, Version] = Field(default_factory=dict)

    _document: dict[str, Any] = PrivateAttr()
    _compact: bytes = PrivateAttr()

    @model_validator(mode="after")
    def _without_values(self) -> CheckpointBody:
        if self.model_extra and "channel_values" in self.model_extra:
            raise ValueError(
                "must not carry channel_values: send the values of the channels whose version is new in /values"
            )
        # Dumped and written once, here: the put stores this very text (`compact_document`).
        self._document = self.model_dump(mode="json")
        self._compact = compact(self._document)
        if len(self._compact) > MAX_CHECKPOINT_BYTES:
            raise ValueError(f"must be at most {MAX_CHECKPOINT_BYTES} bytes of compact JSON (without its values)")
        return self

    def document(self) -> dict[str, Any]:
        """The checkpoint as stored and returned (not to be changed: it is the validated body's)."""
        return self._document

    def compact_document(self) -> bytes:
        """`document()` as compact JSON (`compact`)."""
        return self._compact


class PutCheckpointRequest(RequestModel):
    """Body of `POST /v1/threads/{thread_id}/checkpoints` (LangGraph's `put`)."""

    checkpoint: CheckpointBody
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="The checkpoint's metadata (LangGraph's); list filters match it exactly.",
        json_schema_extra={"additionalProperties": dict(JSON_VALUES)},
    )
    checkpoint_ns: Namespace = ""
    parent_checkpoint_id: CheckpointId | None = None
    values: dict[Name, TypedValue] = Field(
        default_factory=dict,
        description=(
            "The value of each channel whose version is new in this checkpoint (LangGraph's new_versions); a "
            "channel of channel_versions left out keeps the value stored for its version."
        ),
    )
    ttl_seconds: ThreadTtlSeconds | None = Field(
        default=None,
        description=f"The thread's time to live from this put (default {limits.DEFAULT_TTL_SECONDS}, or as before).",
    )

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        if len(compact(metadata)) > MAX_METADATA_BYTES:
            raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes of compact JSON")
        return metadata

    @field_validator("values")
    @classmethod
    def _values_have_versions(cls, values: dict[str, TypedValue], info: ValidationInfo) -> dict[str, TypedValue]:
        checkpoint = info.data.get("checkpoint")
        if checkpoint is None:  # refused already, with its own error
            return values
        unknown = [c for c in values if c not in checkpoint.channel_versions]
        if unknown:
            raise ValueError(
                f"names channels without a version in /checkpoint/channel_versions: {', '.join(unknown[:5])}"
            )
        return values


class WriteIn(TypedValue):
    """One pending write: the channel it writes and its serialized value."""

    channel: Name


class PutWritesRequest(RequestModel):
    """Body of `POST /v1/threads/{thread_id}/writes` (LangGraph's `put_writes`)."""

    checkpoint_id: CheckpointId
    task_id: Name
    writes: Annotated[list[WriteIn], Field(min_length=1, max_length=MAX_WRITES)]
    checkpoint_ns: Namespace = ""
    task_path: TaskPath = ""


class PruneRequest(RequestModel):
    """Body of `POST /v1/threads:prune`."""

    thread_ids: Annotated[list[ThreadId], Field(min_length=1, max_length=MAX_THREAD_IDS)]
    strategy: Literal["keep_latest", "delete"] = "keep_latest"


class CopyThreadRequest(RequestModel):
    """Body of `POST /v1/threads/{thread_id}/copy`."""

    target_thread_id: ThreadId


class DeleteRunsRequest(RequestModel):
    """Body of `POST /v1/threads:delete-for-runs`."""

    run_ids: Annotated[list[Name], Field(min_length=1, max_length=MAX_THREAD_IDS)]


# -- pure rules -------------------------------------------------------------------------------------------------


def compact(value: Any) -> bytes:
    """Compact JSON of a value that came from a strict JSON body (so it always encodes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


_PLAIN_TEXT: Final = re.compile(r"[ !#-\[\]-~]*")
"""Printable ASCII but `"` and `\\`: text JSON writes as it is, between quotes (LangGraph's versions are such)."""


def version_key(version: str | int | float) -> str:
    """The version as part of a key: its JSON form, so `1`, `"1"` and `1.5` never name the same value."""
    if type(version) is str and _PLAIN_TEXT.fullmatch(version):
        return f'"{version}"'  # what json.dumps writes, without its machinery (a put keys every channel)
    if isinstance(version, float) and version.is_integer():
        return json.dumps(int(version))
    return json.dumps(version, ensure_ascii=False)


def write_index(channel: str, position: int) -> int:
    """The index a write is kept under: its position in the call, or the fixed index of a special channel."""
    return SPECIAL_WRITE_INDEX.get(channel, position)


def overwrites(index: int) -> bool:
    """True for a special channel's write, which replaces the one stored; others are kept as first written."""
    return index < 0


class PendingWrite(Struct, frozen=True):
    """A stored pending write, as a tuple shows it."""

    task_id: str
    index: int
    channel: str
    type: str
    data: bytes | None
    task_path: str
    url: str | None = None
    """A presigned download of the value when its bytes live in the bucket (then `data` is None)."""


class StoredValue(Struct, frozen=True):
    """A channel value or pending write as a tuple returns it: its bytes, or a presigned download of them."""

    type: str
    data: bytes | None
    url: str | None = None

    @property
    def size(self) -> int:
        """Bytes it adds to an answer (a download URL: only the URL)."""
        return len(self.data) if self.data is not None else len(self.url or "")


class ThreadCheckpoint(Struct, frozen=True):
    """One checkpoint of a thread with everything LangGraph's tuple needs."""

    thread_id: str
    namespace: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    values: dict[str, StoredValue]
    writes: list[tuple[PendingWrite, StoredValue]]
    document_bytes: int = 0
    """Bytes of the checkpoint and its metadata as stored JSON (what a page counts of them)."""


class PutResult(Struct, frozen=True):
    """What a put answers."""

    namespace: str
    checkpoint_id: str
    expires_ms: int


class Page(Struct, frozen=True):
    """A list page and the cursor to the next (None on the last); `cursor_after` is the cursor to the page after one
    of its checkpoints (where the answer is cut shorter by its bytes)."""

    checkpoints: list[ThreadCheckpoint]
    next_cursor: str | None
    cursor_after: Callable[[ThreadCheckpoint], str | None]


def sorted_writes(writes: Iterable[PendingWrite]) -> list[PendingWrite]:
    """Pending writes in the order LangGraph applies them: by (task_path, task_id, idx)."""
    return sorted(writes, key=lambda w: (w.task_path, w.task_id, w.index))


def _same(left: Any, right: Any) -> bool:
    """JSON equality: numbers by value, booleans only with booleans, containers element by element."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and left == right


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """True when every key of `wanted` is in `metadata` with an equal JSON value (LangGraph's exact filter)."""
    return all(key in metadata and _same(metadata[key], value) for key, value in wanted.items())


def parse_filter(raw: str | None) -> dict[str, Any] | None:
    """The `filter` query parameter: a JSON object, or None when absent; ValueError naming the rule otherwise."""
    if raw is None:
        return None
    try:
        # Read as every body is read: no NaN or Infinity, no duplicate keys, numbers within ±(2^53-1).
        value = parse_strict(raw)
    except (ValidationFailed, RecursionError):
        raise ValueError("must be a JSON object, URL-encoded, read as bodies are (no NaN, no duplicate keys)") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object, URL-encoded")
    return value
