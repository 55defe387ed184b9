"""The thread repository: LangGraph checkpoints, their channel values and pending writes in one partition per thread.

Items of a thread (keys in `layout`):

- the head (`H`): the thread's generation `g`, time to live and expiry. Every put refreshes it (one UpdateItem that
  also hands back the generation); a read finds nothing unless the head is there and not expired. Deleting the head
  hides the whole thread at once; a thread written again after a delete or an expiry gets a new generation, so no
  item of its former life is ever read again (the reaper and the delete remove those).
- a checkpoint (`K#<ns>#<id>`): the checkpoint and its metadata (compact JSON, packed when that pays), its parent,
  the channel values of at most `INLINE_VALUE_BYTES` (`iv`: carried from the parent into every child that keeps their
  version, so a step costs no item per small channel), the sizes and versions of the larger ones (`vz`), and the
  pending writes (`w`: a map keyed by (task_id, idx), set by one conditional UpdateItem per `put_writes`).
- a value (`V#<g>#<ns>#<channel>#<version>`): one version of a channel too large to ride in a checkpoint item,
  written once, packed when that pays, its bytes in the bucket (`so`) when they would not fit an item.
- a write value (`W#<ns>#<checkpoint>#<id>`): a pending write too large to ride in its checkpoint's item.

Values and write values are written before the checkpoint item that references them, so a failure half way leaves
unreferenced items, never a checkpoint without its values.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from baton.domain import limits
from baton.domain.canonical import pointer
from baton.domain.errors import NotFound, PayloadTooLarge, Unavailable, ValidationFailed
from baton.domain.threads import (
    EMPTY_TYPE,
    LIST_READ_BYTES,
    MAX_BLOB_COPY_BYTES,
    MAX_CHECKPOINT_VALUE_BYTES,
    MAX_PENDING_WRITE_BYTES,
    MAX_REQUEST_BLOBS,
    BlobRef,
    Page,
    PendingWrite,
    PutResult,
    StoredValue,
    ThreadCheckpoint,
    matches,
    overwrites,
    sorted_writes,
    version_key,
    write_index,
)
from baton.store import codec, dynamo, layout, schema
from baton.store.attributes import Item, names_in, to_attr
from baton.store.batch import batch_get
from baton.store.cursors import decode_after, encode_after, invalid_cursor, query_binding
from baton.store.dynamo import Reads
from baton.store.errors import UNAVAILABLE_MESSAGE, Failure, classify, translated_errors
from baton.store.thread_names import (
    BYTES,
    CHANNEL,
    CREATED,
    DOCUMENT,
    EXPIRES_MS,
    GENERATION,
    INLINE,
    NAMESPACE,
    OBJECT,
    PACKED,
    PARENT,
    REFERENCE,
    SIZE,
    SIZES,
    TASK_PATH,
    TTL_MS,
    TTL_S,
    TYPE,
    UPDATED,
    VERSION,
    WRITE_BYTES,
    WRITE_INLINE,
    WRITES,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton.store.blobs import BlobStore
    from baton.store.objects import ObjectStore

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
WRITE_ROUNDS: Final = 4
"""BatchWriteItem rounds for what DynamoDB leaves unprocessed (then 503)."""
WRITE_BACKOFF_SECONDS: Final = 0.05

MAX_KEY_BYTES: Final = 1_024
"""DynamoDB's longest sort key (a cursor's position beyond it is not one this store made)."""
NO_ITEM: Final[Item] = {}
"""What a refused conditional write found when there was no item."""

_TOUCH_LIVE: Final = f"attribute_not_exists(#{schema.PK}) OR #{EXPIRES_MS} > :now"
_TOUCH: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = :tms, #{TTL_S} = :tts, #{EXPIRES_MS} = :exp, "
    f"#{schema.TTL_ATTRIBUTE} = :ttl"
)
_TOUCH_KEEP_TTL: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = if_not_exists(#{TTL_MS}, :tms), #{TTL_S} = if_not_exists(#{TTL_S}, :tts), "
    f"#{EXPIRES_MS} = if_not_exists(#{TTL_MS}, :tms) + :now, "
    f"#{schema.TTL_ATTRIBUTE} = if_not_exists(#{TTL_S}, :tts) + :now_s"
)
_SAME_HEAD: Final = f"#{GENERATION} = :old_g AND #{EXPIRES_MS} = :old_exp"
_PUT_CHECKPOINT_SET: Final = (
    f"#{GENERATION} = :g, #{DOCUMENT} = :cp, #{INLINE} = :iv, #{SIZES} = :vz, #{UPDATED} = :now, "
    f"#{WRITES} = if_not_exists(#{WRITES}, :empty), #{WRITE_BYTES} = if_not_exists(#{WRITE_BYTES}, :zero), "
    f"#{WRITE_INLINE} = if_not_exists(#{WRITE_INLINE}, :zero)"
)
_SAME_LIFE: Final = f"attribute_not_exists(#{GENERATION}) OR #{GENERATION} = :g"
_ROOM_FOR_WRITES: Final = (
    f"attribute_exists(#{schema.PK}) AND #{WRITE_BYTES} <= :room "
    f"AND (attribute_not_exists(#{WRITE_INLINE}) OR #{WRITE_INLINE} <= :inline_room)"
)
WRITES_PER_UPDATE: Final = 40
"""Writes set by one UpdateItem: DynamoDB takes update expressions of at most 4 KB."""
ENTRY_BYTES: Final = 32
"""What a pending write's entry adds to its checkpoint's item besides its strings (attribute names, the size)."""
MAX_INLINE_WRITE_BYTES: Final = 128_000
"""Most bytes of pending writes a checkpoint's item holds itself; more go to items of their own."""
_KEYS_ONLY: Final = f"#{schema.PK}, #{schema.SK}"


@dataclass(frozen=True)
class Head:
    """What a thread's head says: its generation and when it expires."""

    generation: str
    ttl_ms: int
    expires_ms: int


@dataclass(frozen=True)
class _Write:
    """One write of a put_writes: its key in the item's map, its index, and its value."""

    name: str
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


@dataclass(frozen=True)
class Uploaded:
    """A value uploaded as a blob, checked: its size, SHA-256 (hex) and the object that holds its bytes."""

    size: int
    sha256: str
    source: str


@dataclass
class _Loaded:
    """A checkpoint item decoded, with the keys of what it references outside itself."""

    item: Item
    namespace: str
    checkpoint_id: str
    document: dict[str, Any]
    document_bytes: int
    values: dict[str, StoredValue] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    """Channel -> sort key of its value item, for values not inline."""
    writes: list[tuple[PendingWrite, StoredValue | str]] = field(default_factory=list)
    """Pending writes with their value, or the sort key of the item that holds it."""
    estimate: int = 0
    """At least the bytes of JSON its tuple takes in an answer, counted from the item alone (`_tuple_estimate`)."""


class _Walk:
    """The checkpoint items of a thread's current life, newest first (of one namespace, or of all: one after
    another), under `reads`. `below` is an exclusive upper bound on the sort key (a cursor's position, or `before`
    in a namespace). `before` without a namespace is a key bound in each: the first item of a namespace at or after
    it moves the walk to just below it in that namespace (one Query), so no newer checkpoint is read twice.
    `stopped` is True when the reads ran out before the thread's end; `position` is then where to go on from."""

    def __init__(
        self,
        store: ThreadStore,
        pk: str,
        head: Head,
        namespace: str | None,
        below: str | None,
        before: str | None,
        reads: Reads | None,
    ) -> None:
        self._store = store
        self._pk = pk
        self._head = head
        self._namespace = namespace
        self._below = below
        self._before = before if namespace is None else None
        self._reads = reads
        self.page_size: int | None = None
        self.stopped = False
        self.position: str | None = None
        """The sort key of the last item read (of any life), or the bound the walk last moved to."""

    def __iter__(self) -> Iterator[Item]:
        if self._before is not None:
            yield from self._before_in_each_namespace(self._before)
            return
        yield from self._range(layout.thread_checkpoints(self._namespace), self._below, self.page_size)

    def _range(self, prefix: str, below: str | None, page_size: int | None) -> Iterator[Item]:
        """The items under `prefix` below `below` (exclusive), newest first, of the head's life."""
        pages = dynamo.query(self._store._client, self._reads, **self._request(prefix, below, page_size))
        for item in pages:
            sk = item[schema.SK]["S"]
            if sk == below:
                continue
            self.position = sk
            if item.get(GENERATION, {}).get("S") == self._head.generation:
                yield item
        self.stopped = self.stopped or pages.stopped

    def _before_in_each_namespace(self, before: str) -> Iterator[Item]:
        """Every namespace's checkpoints older than `before`, one namespace after another: a probe (one Query of at
        most two items) finds the next namespace below where the walk stands, and the walk goes on in that namespace
        from just below `before` (or from the probe's item when it is older). A namespace costs at most three items
        more than the checkpoints it shows: the probe's two, and the `before` checkpoint (a key bound is inclusive)."""
        below = self._below
        while not (self._reads is not None and self._reads.spent):
            probe = dynamo.query(self._store._client, self._reads, **self._request(layout.THREAD_CHECKPOINT, below, 2))
            found = next((item for item in probe if item[schema.SK]["S"] != below), None)
            if found is None:
                return
            sk = found[schema.SK]["S"]
            keyed, checkpoint_id = layout.read_thread_checkpoint_sk(sk)
            namespace = keyed if keyed is not None else found[NAMESPACE]["S"]
            prefix = layout.thread_checkpoints(namespace)
            if checkpoint_id >= before:
                start = self.position = layout.thread_checkpoint_sk(namespace, before)
            else:
                start = self.position = sk
                if found.get(GENERATION, {}).get("S") == self._head.generation:
                    yield found
            yield from self._range(prefix, start, self.page_size)
            if self.stopped:
                return
            below = prefix  # no key is the prefix itself: the next probe starts below this namespace
            self.position = below
        self.stopped = True

    def _request(self, prefix: str, below: str | None, page_size: int | None) -> dict[str, Any]:
        if below is not None:
            condition = f"#{schema.PK} = :pk AND #{schema.SK} BETWEEN :lo AND :hi"
            values = {":pk": {"S": self._pk}, ":lo": {"S": prefix}, ":hi": {"S": below}}
        else:
            condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :lo)"
            values = {":pk": {"S": self._pk}, ":lo": {"S": prefix}}
        request: dict[str, Any] = {
            "TableName": self._store._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names_in(condition),
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "ScanIndexForward": False,
        }
        if page_size is not None:
            request["Limit"] = page_size
        return request


class _Blobs:
    """The blobs one request names, each checked once however many values name it: declared by the caller's agent,
    attached to no checkpoint, uploaded with its declared bytes, at most the state limit (else 400 naming the value's
    `blob_id`, or 413). A blob of at most `ITEM_VALUE_BYTES` is read once (one GetObject, its SHA-256 checked) and
    each value naming it holds its bytes like any other, counted in the request's budgets; a larger one is copied
    into the thread's storage once per value, at most `MAX_BLOB_COPY_BYTES` per request. At most
    `MAX_REQUEST_BLOBS` distinct blobs per request."""

    def __init__(self, store: ThreadStore, tenant_id: str, agent_id: str, now_ms: int) -> None:
        self._store = store
        self._tenant_id = tenant_id
        self._agent_id = agent_id
        self._now_ms = now_ms
        self._checked: dict[str, bytes | Uploaded | None] = {}
        self.copied = 0

    def value(self, ref: BlobRef, where: str) -> bytes | Uploaded:
        """The value a reference stands for: the blob's bytes (a small one) or the blob to copy (a large one)."""
        if ref.blob_id not in self._checked:
            if len(self._checked) == MAX_REQUEST_BLOBS:
                raise ValidationFailed.single(
                    where, f"A request may name at most {MAX_REQUEST_BLOBS} distinct blobs; {where} names one more."
                )
            self._checked[ref.blob_id] = self._check(ref, where)
        found = self._checked[ref.blob_id]
        if found is None:
            raise _refused(where)
        if isinstance(found, Uploaded):
            self.copied += found.size
            if self.copied > MAX_BLOB_COPY_BYTES:
                raise PayloadTooLarge(
                    field=where.lstrip("/"),
                    limit_bytes=MAX_BLOB_COPY_BYTES,
                    actual_bytes=self.copied,
                    what=f"The blobs over {ITEM_VALUE_BYTES} bytes this request names, each time it names one,",
                )
        return found

    def _check(self, ref: BlobRef, where: str) -> bytes | Uploaded | None:
        """One GetItem of the blob's record, then one GetObject (a small blob) or one HeadObject; None when the
        blob is not one a value may name."""
        blobs = self._store._blobs
        if blobs is None:
            return None
        try:
            blob = blobs.get(self._tenant_id, ref.blob_id, self._now_ms)
        except NotFound:
            return None
        if blob.agent_id != self._agent_id or blob.owner is not None:
            return None
        if blob.size > limits.MAX_STATE_BYTES:
            raise PayloadTooLarge(
                field=where.lstrip("/"), limit_bytes=limits.MAX_STATE_BYTES, actual_bytes=blob.size, what="A value"
            )
        source = layout.blob_object(self._tenant_id, ref.blob_id)
        bucket = self._store._bucket(blob.size)
        if blob.size <= ITEM_VALUE_BYTES:
            raw = bucket.get(source)
            if raw is None or len(raw) != blob.size or hashlib.sha256(raw).hexdigest() != blob.sha256:
                return None
            return raw
        found = bucket.head(source)
        if found is None or found.size != blob.size or (found.sha256 is not None and found.sha256 != blob.sha256):
            return None
        return Uploaded(blob.size, blob.sha256, source)


def _refused(where: str) -> ValidationFailed:
    return ValidationFailed.single(
        where,
        f"{where} must name a blob this agent declared (POST /v1/blobs), uploaded with its declared size and "
        "SHA-256, and attached to no checkpoint.",
    )


class ThreadStore:
    """LangGraph threads in one DynamoDB table (and the bucket, for values too large for an item)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None, blobs: BlobStore | None = None
    ) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._blobs = blobs

    def _bucket(self, size: int) -> ObjectStore:
        """The bucket a value of `size` bytes goes to; 413 where the deployment has none (only the table's limit)."""
        if self._objects is None:
            raise PayloadTooLarge(
                field="values",
                limit_bytes=ITEM_VALUE_BYTES,
                actual_bytes=size,
                what="A value (this deployment has no bucket for larger ones)",
            )
        return self._objects

    # -- put ----------------------------------------------------------------------------------------------------

    def put(
        self,
        tenant_id: str,
        agent_id: str,
        thread_id: str,
        namespace: str,
        document: dict[str, Any],
        metadata: dict[str, Any],
        parent_id: str | None,
        values: dict[str, tuple[str, bytes | BlobRef]],
        ttl_seconds: int | None,
        now_ms: int,
    ) -> PutResult:
        """Store one checkpoint: refresh the head, write its large new values, then its item (UpdateItem, so that
        the pending writes of a checkpoint put again are kept). `values` holds (type, bytes) of the channels whose
        version is new; the others keep the value stored for their version (carried from the parent when small)."""
        pk = layout.thread_pk(tenant_id, agent_id, thread_id)
        versions: dict[str, Any] = document.get("channel_versions", {})
        with translated_errors():
            # Everything is decided, and checked against the limits, before anything is written: a refused put
            # changes nothing (not even the thread's expiry).
            carried = [c for c in versions if c not in values]
            source = self._carry_source(pk, namespace, parent_id) if carried else None
            inline: dict[str, Any] = {}
            sizes: dict[str, Any] = {}
            if source is not None:
                _carry(source, versions, carried, inline, sizes)
            blobs = _Blobs(self, tenant_id, agent_id, now_ms)
            resolved: dict[str, tuple[str, bytes | Uploaded]] = {}
            for channel, (type_tag, given) in values.items():
                if isinstance(given, BlobRef):
                    resolved[channel] = (type_tag, blobs.value(given, pointer("values", channel, "blob_id")))
                else:
                    resolved[channel] = (type_tag, given)
            out_of_line: list[tuple[str, str, str, bytes | Uploaded]] = []
            index = sum(_index_bytes(c, e[VERSION], e[TYPE], len(e[BYTES])) for c, e in inline.items())
            index += sum(_index_bytes(c, e[0]) for c, e in sizes.items())
            # What a read of this checkpoint answers with: values held in the table (those in the bucket are URLs).
            answered = sum(len(e[BYTES]) for e in inline.values()) + sum(int(e[1]) for e in sizes.values() if not e[2])
            for channel, (type_tag, raw) in resolved.items():
                key = version_key(versions[channel])
                size = raw.size if isinstance(raw, Uploaded) else len(raw)
                in_bucket = isinstance(raw, Uploaded) or size > ITEM_VALUE_BYTES
                answered += 0 if in_bucket else size
                entry_bytes = _index_bytes(channel, key, type_tag, size)
                small = isinstance(raw, bytes) and size <= INLINE_VALUE_BYTES
                if small and index + entry_bytes <= MAX_INLINE_VALUE_BYTES:
                    inline[channel] = {VERSION: key, TYPE: type_tag, BYTES: raw}
                    index += entry_bytes
                    continue
                sizes[channel] = [key, size, int(in_bucket)]
                index += _index_bytes(channel, key)
                out_of_line.append((channel, key, type_tag, raw))
            if answered > MAX_CHECKPOINT_VALUE_BYTES:
                raise PayloadTooLarge(
                    field="values",
                    limit_bytes=MAX_CHECKPOINT_VALUE_BYTES,
                    actual_bytes=answered,
                    what=f"The channel values of this checkpoint held in the table (values over {ITEM_VALUE_BYTES} "
                    "bytes each go to the bucket and do not count)",
                )
            if index > MAX_CHANNEL_INDEX_BYTES:
                raise PayloadTooLarge(
                    field="checkpoint",
                    limit_bytes=MAX_CHANNEL_INDEX_BYTES,
                    actual_bytes=index,
                    what="What this checkpoint's item keeps of its channels (names, versions and small values)",
                )
            head = self._touch(pk, ttl_seconds, now_ms)
            if source is not None and source.get(GENERATION, {}).get("S") != head.generation:
                # What was carried belongs to a former life of the thread: none of it is this one's.
                for channel in carried:
                    inline.pop(channel, None)
                    sizes.pop(channel, None)
            value_items = [
                self._value_item(
                    pk,
                    layout.thread_value_sk(head.generation, namespace, channel, key),
                    tenant_id,
                    tag,
                    raw,
                    head.generation,
                )
                for channel, key, tag, raw in out_of_line
            ]
            self._batch_put(value_items)
            self._put_checkpoint(
                pk, namespace, document, metadata, parent_id, inline, sizes, head, (tenant_id, agent_id), now_ms
            )
        return PutResult(namespace, str(document["id"]), head.expires_ms)

    def _touch(self, pk: str, ttl_seconds: int | None, now_ms: int) -> Head:
        """Refresh a thread's head (creating it, or starting a new generation over an expired one): its generation
        and expiry. One UpdateItem; over an expired head, one more write that replaces it."""
        ttl = ttl_seconds or limits.DEFAULT_TTL_SECONDS
        values: dict[str, Any] = {
            ":g": {"S": uuid.uuid4().hex[:12]},
            ":now": {"N": str(now_ms)},
            ":now_s": {"N": str(now_ms // 1000 + 1)},
            ":tms": {"N": str(ttl * 1000)},
            ":tts": {"N": str(ttl)},
        }
        update = _TOUCH_KEEP_TTL
        if ttl_seconds is not None:
            # DynamoDB adds an attribute and a value (`if_not_exists(...) + :now`), not two values: computed here.
            update = _TOUCH
            values[":exp"] = {"N": str(now_ms + ttl * 1000)}
            values[":ttl"] = {"N": str(now_ms // 1000 + 1 + ttl)}
            del values[":now_s"]
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=layout.key(pk, layout.THREAD_HEAD_SK),
                UpdateExpression=update,
                ConditionExpression=_TOUCH_LIVE,
                ExpressionAttributeNames=names_in(update, _TOUCH_LIVE),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if classify(exc) is not Failure.CONDITION_FAILED:
                raise
            old: Item = getattr(exc, "response", {}).get("Item") or {}
            return self._restart(pk, old, ttl_seconds, now_ms)
        return _head(answer["Attributes"])

    def _restart(self, pk: str, old: Item, ttl_seconds: int | None, now_ms: int) -> Head:
        """A new generation over an expired head (its items are left to the reaper, which reads the change)."""
        ttl_ms = (ttl_seconds or limits.DEFAULT_TTL_SECONDS) * 1000
        head = Head(uuid.uuid4().hex[:12], ttl_ms, now_ms + ttl_ms)
        item = {
            **layout.key(pk, layout.THREAD_HEAD_SK),
            GENERATION: {"S": head.generation},
            CREATED: {"N": str(now_ms)},
            UPDATED: {"N": str(now_ms)},
            TTL_MS: {"N": str(ttl_ms)},
            TTL_S: {"N": str(ttl_ms // 1000)},
            EXPIRES_MS: {"N": str(head.expires_ms)},
            schema.TTL_ATTRIBUTE: {"N": str(head.expires_ms // 1000 + 1)},
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=_SAME_HEAD,
                ExpressionAttributeNames=names_in(_SAME_HEAD),
                ExpressionAttributeValues={":old_g": old[GENERATION], ":old_exp": old[EXPIRES_MS]},
            )
        except Exception as exc:
            if classify(exc) is Failure.CONDITION_FAILED:
                raise Unavailable(UNAVAILABLE_MESSAGE) from exc  # another writer restarted it at the same moment
            raise
        return head

    def _carry_source(self, pk: str, namespace: str, parent_id: str | None) -> Item | None:
        """The item a put carries small values (and the sizes of large ones) from: its parent (one consistent GetItem
        of three attributes), or, without one or when it is gone, the namespace's latest checkpoint (one Query)."""
        projection = f"#{GENERATION}, #{INLINE}, #{SIZES}"
        if parent_id is not None:
            answer = self._client.get_item(
                TableName=self._table,
                Key=layout.key(pk, layout.thread_checkpoint_sk(namespace, parent_id)),
                ProjectionExpression=projection,
                ExpressionAttributeNames=names_in(projection),
                ConsistentRead=True,
            )
            if answer.get("Item"):
                return answer["Item"]
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        latest = self._client.query(
            TableName=self._table,
            KeyConditionExpression=condition,
            ProjectionExpression=projection,
            ExpressionAttributeNames=names_in(condition, projection),
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": layout.thread_checkpoints(namespace)}},
            ConsistentRead=True,
            ScanIndexForward=False,
            Limit=1,
        )
        found: list[Item] = latest.get("Items", [])
        return found[0] if found else None

    def _value_item(
        self, pk: str, sk: str, tenant_id: str, type_tag: str, raw: bytes | Uploaded, generation: str
    ) -> Item:
        """The item of one large value: packed when that pays; over `ITEM_VALUE_BYTES`, its bytes in the bucket as
        they are (a read hands out a presigned URL to them, so no answer carries them and none outgrows Lambda's)."""
        item: Item = {
            **layout.key(pk, sk),
            GENERATION: {"S": generation},
            TYPE: {"S": type_tag},
            SIZE: {"N": str(raw.size if isinstance(raw, Uploaded) else len(raw))},
        }
        if isinstance(raw, Uploaded):
            # The uploaded blob's bytes, copied to an object of this value's own (the blob itself is never attached:
            # its record expires and the lifecycle rule removes its object).
            item[OBJECT] = {"S": self._bucket(raw.size).copy_state(tenant_id, raw.source)}
            return item
        stored = raw
        if len(raw) > ITEM_VALUE_BYTES:
            item[OBJECT] = {"S": self._bucket(len(raw)).put_state(tenant_id, raw)}
            return item
        packed = codec.encode(raw)
        if packed is not None:
            item[PACKED] = {"BOOL": True}
            stored = packed
        item[BYTES] = {"B": stored}
        return item

    def _put_checkpoint(
        self,
        pk: str,
        namespace: str,
        document: dict[str, Any],
        metadata: dict[str, Any],
        parent_id: str | None,
        inline: dict[str, Any],
        sizes: dict[str, Any],
        head: Head,
        owner: tuple[str, str],
        now_ms: int,
    ) -> None:
        """Write the checkpoint's item (an UpdateItem: a checkpoint put again keeps its pending writes)."""
        text = json.dumps({"c": document, "m": metadata}, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        packed = codec.encode(text)
        update = f"SET {_PUT_CHECKPOINT_SET}"
        values: dict[str, Any] = {
            ":g": {"S": head.generation},
            ":cp": {"B": packed if packed is not None else text},
            ":iv": to_attr(inline),
            ":vz": to_attr(sizes),
            ":now": {"N": str(now_ms)},
            ":empty": {"M": {}},
            ":zero": {"N": "0"},
        }
        removals = []
        if layout.part(namespace).startswith(layout.HASHED):
            update += f", #{NAMESPACE} = :ns"
            values[":ns"] = {"S": namespace}
        if parent_id is not None:
            update += f", #{PARENT} = :par"
            values[":par"] = {"S": parent_id}
        else:
            removals.append(f"#{PARENT}")
        removals.append(f"#{schema.TTL_ATTRIBUTE}")  # a writes-only item that came first expired like a thread
        run_id = metadata.get("run_id")
        if isinstance(run_id, str) and run_id:
            update += f", #{schema.GSI1_PK} = :gpk, #{schema.GSI1_SK} = :gsk"
            values[":gpk"] = {"S": layout.run_index_pk(*owner, run_id)}
            values[":gsk"] = {"S": layout.thread_checkpoint_sk(namespace, str(document["id"]))}
        else:
            removals += [f"#{schema.GSI1_PK}", f"#{schema.GSI1_SK}"]
        if removals:
            update += " REMOVE " + ", ".join(removals)
        key = layout.key(pk, layout.thread_checkpoint_sk(namespace, str(document["id"])))
        try:
            # Pending writes are kept when the item is this life's (a put again) or writes that came first.
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=_SAME_LIFE,
                ExpressionAttributeNames=names_in(update, _SAME_LIFE),
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if classify(exc) is not Failure.CONDITION_FAILED:
                raise
            # An item of the thread's former life (not reaped yet): nothing of it is kept, its writes least of all.
            fresh = (
                update.replace(f"#{WRITES} = if_not_exists(#{WRITES}, :empty)", f"#{WRITES} = :empty")
                .replace(f"#{WRITE_BYTES} = if_not_exists(#{WRITE_BYTES}, :zero)", f"#{WRITE_BYTES} = :zero")
                .replace(f"#{WRITE_INLINE} = if_not_exists(#{WRITE_INLINE}, :zero)", f"#{WRITE_INLINE} = :zero")
            )
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=fresh,
                ExpressionAttributeNames=names_in(fresh),
                ExpressionAttributeValues=values,
            )

    # -- put_writes ---------------------------------------------------------------------------------------------

    def put_writes(
        self,
        tenant_id: str,
        agent_id: str,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[str, str, bytes | BlobRef]],
        now_ms: int = 0,
    ) -> int:
        """Keep a task's pending writes on its checkpoint (after one BatchWriteItem for values too large to ride in
        the item). A write whose (task_id, idx) is stored already is kept as it was, except the special channels'.

        The first UpdateItem reserves the whole call's room (so a call that does not fit writes nothing) and is
        conditioned on the call's first write being new: when it is stored already (a retry), only what is missing is
        written, and a retry of a call that landed writes nothing and counts nothing. The other writes follow,
        `WRITES_PER_UPDATE` per UpdateItem. Writes that come before their checkpoint get a writes-only item (one
        PutItem, all of them at once). The count in the call."""
        pk = layout.thread_pk(tenant_id, agent_id, thread_id)
        key = layout.key(pk, layout.thread_checkpoint_sk(namespace, checkpoint_id))
        with translated_errors():
            blobs = _Blobs(self, tenant_id, agent_id, now_ms)
            prepared = [
                _Write(
                    json.dumps([task_id, write_index(channel, n)], ensure_ascii=False),
                    write_index(channel, n),
                    channel,
                    type_tag,
                    blobs.value(raw, pointer("writes", n, "blob_id")) if isinstance(raw, BlobRef) else raw,
                )
                for n, (channel, type_tag, raw) in enumerate(writes)
            ]
            for out_of_line in (False, True):
                entries = self._entries(pk, tenant_id, namespace, checkpoint_id, task_path, prepared, out_of_line)
                outcome = self._keep(key, entries, prepared)
                if outcome != "full":
                    return len(prepared)
            raise PayloadTooLarge(
                field="writes",
                limit_bytes=MAX_INLINE_WRITE_BYTES,
                actual_bytes=sum(_entry_bytes(name, entry) for name, (_, entry) in entries.items()),
                what="The pending writes this checkpoint's item would keep",
            )

    def _entries(
        self,
        pk: str,
        tenant_id: str,
        namespace: str,
        checkpoint_id: str,
        task_path: str,
        prepared: list[_Write],
        out_of_line: bool,
    ) -> dict[str, tuple[int, dict[str, Any]]]:
        """Each write's entry in its checkpoint's map (by name), writing first the items of values that do not ride
        in it: those over `INLINE_VALUE_BYTES`, or every one when the item has no room left."""
        entries: dict[str, tuple[int, dict[str, Any]]] = {}
        items: dict[str, Item] = {}
        for write in prepared:
            entry: dict[str, Any] = {
                CHANNEL: write.channel,
                TYPE: write.type,
                TASK_PATH: task_path,
                SIZE: write.size,
            }
            if write.small and not out_of_line:
                entry[BYTES] = write.raw
            else:
                item = self._write_value_item(pk, tenant_id, namespace, checkpoint_id, write)
                items[item[schema.SK]["S"]] = item
                entry[REFERENCE] = item[schema.SK]["S"]
            entries[write.name] = (write.index, entry)
        self._batch_put(list(items.values()))
        return entries

    def _write_value_item(self, pk: str, tenant_id: str, namespace: str, checkpoint_id: str, write: _Write) -> Item:
        """The item of a write value that does not ride in the checkpoint's item, keyed by its type and content: a
        retry names the same item, writes of the same value share one, and another value under the same (task_id,
        idx) another (the first one stays referenced)."""
        content = write.raw.sha256.encode() if isinstance(write.raw, Uploaded) else write.raw
        digest = hashlib.sha256(f"{write.type}\x1f".encode() + content).hexdigest()[:32]
        sk = layout.thread_write_value_sk(namespace, checkpoint_id, digest)
        return self._value_item(pk, sk, tenant_id, write.type, write.raw, "")

    def _keep(self, key: Item, entries: dict[str, tuple[int, dict[str, Any]]], prepared: list[_Write]) -> str:
        """Write `entries` on the item at `key`: "kept", or "full" when the item has no room for them inline."""
        answered = sum(w.answered for w in prepared)
        inline = sum(_entry_bytes(name, entry) for name, (_, entry) in entries.items())
        if answered > MAX_PENDING_WRITE_BYTES:
            raise PayloadTooLarge(
                field="writes", limit_bytes=MAX_PENDING_WRITE_BYTES, actual_bytes=answered, what="The pending writes"
            )
        if inline > MAX_INLINE_WRITE_BYTES:
            return "full"
        names = list(entries)
        first_new = next((name for name in names if not overwrites(entries[name][0])), None)
        for _ in range(3):
            refused = self._update_writes(
                key, {n: entries[n] for n in names[:WRITES_PER_UPDATE]}, inline, answered, first_new
            )
            if refused is None:
                for start in range(WRITES_PER_UPDATE, len(names), WRITES_PER_UPDATE):
                    chunk = {n: entries[n] for n in names[start : start + WRITES_PER_UPDATE]}
                    if self._update_writes(key, chunk, 0, 0, None) is not None:
                        return "kept"  # the item went meanwhile (its thread deleted): nothing of it is shown
                return "kept"
            if refused is NO_ITEM:
                # No item yet: LangGraph stores a checkpoint in the background while the next step runs, so its
                # writes may come first. They are kept for it in a writes-only item, which DynamoDB's TTL removes
                # within a day unless the put comes (the put drops its `ttl`). Reads never show one, so a late write
                # to a deleted thread shows nothing either: the thread stays deleted.
                if self._early_writes(key, entries, inline, answered):
                    return "kept"
                continue
            stored = refused.get(WRITES, {}).get("M", {})
            if first_new is not None and first_new in stored:
                # A retry (or the same task's writes again): what is stored stays; only what is missing is written.
                missing = [
                    n
                    for n in names
                    if n not in stored or (overwrites(entries[n][0]) and stored[n] != to_attr(entries[n][1]))
                ]
                if not missing:
                    return "kept"
                kept = {n: entries[n] for n in missing}
                left = [w for w in prepared if w.name in kept]
                return self._keep(key, kept, left)
            if int(refused.get(WRITE_INLINE, {}).get("N", "0")) + inline > MAX_INLINE_WRITE_BYTES:
                return "full"
            raise PayloadTooLarge(
                field="writes",
                limit_bytes=MAX_PENDING_WRITE_BYTES,
                actual_bytes=int(refused.get(WRITE_BYTES, {}).get("N", "0")) + answered,
                what="The pending writes of this checkpoint, with those stored,",
            )
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def _update_writes(
        self,
        key: Item,
        entries: dict[str, tuple[int, dict[str, Any]]],
        inline: int,
        answered: int,
        first_new: str | None,
    ) -> Item | None:
        """One UpdateItem setting `entries` and adding (`inline`, `answered`) to the item's two budgets, on the
        condition that the item exists, that the budgets have room, and (with `first_new`) that that write is not
        stored yet. None when it landed; else the item as it was (`NO_ITEM` when there was none)."""
        sets = []
        names: dict[str, str] = {f"#{WRITES}": WRITES, f"#{schema.PK}": schema.PK}
        values: dict[str, Any] = {}
        for number, (name, (index, entry)) in enumerate(entries.items()):
            names[f"#k{number}"] = name
            values[f":v{number}"] = to_attr(entry)
            target = f"#{WRITES}.#k{number}"
            sets.append(
                f"{target} = :v{number}" if overwrites(index) else f"{target} = if_not_exists({target}, :v{number})"
            )
        update = "SET " + ", ".join(sets)
        condition = f"attribute_exists(#{schema.PK})"
        if inline or answered:
            update += f" ADD #{WRITE_BYTES} :answered, #{WRITE_INLINE} :inline"
            condition = _ROOM_FOR_WRITES
            names |= {f"#{WRITE_BYTES}": WRITE_BYTES, f"#{WRITE_INLINE}": WRITE_INLINE}
            values |= {
                ":answered": {"N": str(answered)},
                ":inline": {"N": str(inline)},
                ":room": {"N": str(MAX_PENDING_WRITE_BYTES - answered)},
                ":inline_room": {"N": str(MAX_INLINE_WRITE_BYTES - inline)},
            }
        if first_new is not None:
            names["#first"] = first_new
            condition += f" AND attribute_not_exists(#{WRITES}.#first)"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if classify(exc) is not Failure.CONDITION_FAILED:
                raise
            found: Item | None = getattr(exc, "response", {}).get("Item") or None
            return found if found is not None else NO_ITEM
        return None

    def _early_writes(
        self, key: Item, entries: dict[str, tuple[int, dict[str, Any]]], inline: int, answered: int
    ) -> bool:
        """Create the writes-only item of a checkpoint not stored yet; False when an item appeared meanwhile (the
        caller then updates it)."""
        expires_s = int(time.time()) + limits.DEFAULT_TTL_SECONDS
        item = {
            **key,
            WRITES: {"M": {name: to_attr(entry) for name, (_, entry) in entries.items()}},
            WRITE_BYTES: {"N": str(answered)},
            WRITE_INLINE: {"N": str(inline)},
            schema.TTL_ATTRIBUTE: {"N": str(expires_s)},
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=f"attribute_not_exists(#{schema.PK})",
                ExpressionAttributeNames={f"#{schema.PK}": schema.PK},
            )
        except Exception as exc:
            if classify(exc) is Failure.CONDITION_FAILED:
                return False
            raise
        return True

    # -- reads --------------------------------------------------------------------------------------------------

    def head(self, tenant_id: str, agent_id: str, thread_id: str, now_ms: int) -> Head | None:
        """The thread's head when the thread is live (one consistent GetItem), else None."""
        answer = self._client.get_item(
            TableName=self._table,
            Key=layout.key(layout.thread_pk(tenant_id, agent_id, thread_id), layout.THREAD_HEAD_SK),
            ConsistentRead=True,
        )
        return _live_head(answer.get("Item"), now_ms)

    def get(
        self, tenant_id: str, agent_id: str, thread_id: str, namespace: str, checkpoint_id: str | None, now_ms: int
    ) -> ThreadCheckpoint:
        """One checkpoint with its values and pending writes (the latest of the namespace without an id); NotFound
        when the thread or the checkpoint is not there. A checkpoint by id: one BatchGetItem of head and item; the
        latest: a GetItem of the head and one Query; then one BatchGetItem for values not in the item."""
        pk = layout.thread_pk(tenant_id, agent_id, thread_id)
        with translated_errors():
            if checkpoint_id is not None:
                head_key = layout.key(pk, layout.THREAD_HEAD_SK)
                item_key = layout.key(pk, layout.thread_checkpoint_sk(namespace, checkpoint_id))
                found = batch_get(self._client, self._table, [head_key, item_key])
                head = _live_head(found.get(layout.identity(head_key)), now_ms)
                item = found.get(layout.identity(item_key))
                if head is None or item is None or item.get(GENERATION, {}).get("S") != head.generation:
                    raise NotFound()
            else:
                head = self.head(tenant_id, agent_id, thread_id, now_ms)
                if head is None:
                    raise NotFound()
                latest = _Walk(self, pk, head, namespace, None, None, Reads(max_bytes=LIST_READ_BYTES))
                latest.page_size = 1
                item = next(iter(latest), None)
                if item is None:
                    if latest.stopped:
                        raise Unavailable(UNAVAILABLE_MESSAGE)  # a former life not reaped yet fills the read budget
                    raise NotFound()
            (loaded,) = self._resolve(thread_id, pk, [self._load(item)])
        return loaded

    def page(
        self,
        tenant_id: str,
        agent_id: str,
        thread_id: str,
        namespace: str | None,
        before: str | None,
        wanted: dict[str, Any] | None,
        limit: int,
        cursor: str | None,
        now_ms: int,
    ) -> Page:
        """A page of the thread's checkpoints, newest first, filtered on the server, its work bounded: it stops at
        `limit`, before the answer it makes would pass `PAGE_ANSWER_BYTES` (by an upper bound counted from the items,
        so the values of tuples it would not show are never read), or when its reads reach `LIST_READ_BYTES` (then
        short, or empty, with a cursor from where it stopped). `before` is a key bound in each namespace."""
        binding = query_binding(
            "threads",
            tenant_id,
            agent_id,
            thread_id,
            namespace,
            before,
            None if wanted is None else json.dumps(wanted, sort_keys=True),
        )
        after = decode_after(cursor, binding)
        pk = layout.thread_pk(tenant_id, agent_id, thread_id)
        with translated_errors():
            head = self.head(tenant_id, agent_id, thread_id, now_ms)
            if head is None:
                raise NotFound()
            below = after
            if before is not None and namespace is not None:
                bound = layout.thread_checkpoint_sk(namespace, before)
                below = bound if below is None else min(below, bound)
            prefix = layout.thread_checkpoints(namespace)
            if below is not None and (not below.startswith(prefix) or len(below.encode()) > MAX_KEY_BYTES):
                raise invalid_cursor()
            walk = _Walk(self, pk, head, namespace, below, before, Reads(max_bytes=LIST_READ_BYTES))
            walk.page_size = min(limit + 1, 100)
            chosen: list[_Loaded] = []
            estimate = 0
            stop: str | None
            for item in walk:
                loaded = self._load(item)
                if wanted and not matches(loaded.document.get("m", {}), wanted):
                    continue
                if len(chosen) == limit or (chosen and estimate + loaded.estimate > PAGE_ANSWER_BYTES):
                    stop = chosen[-1].item[schema.SK]["S"]
                    break
                chosen.append(loaded)
                estimate += loaded.estimate
            else:
                # The thread's end (the last page), or where the reads ran out (the next page starts there).
                stop = walk.position if walk.stopped else None
            page = self._resolve(thread_id, pk, chosen)

        def cursor_after(checkpoint: ThreadCheckpoint) -> str | None:
            sk = layout.thread_checkpoint_sk(checkpoint.namespace, checkpoint.checkpoint_id)
            return encode_after(sk, binding)

        return Page(page, encode_after(stop, binding), cursor_after)

    def _load(self, item: Item) -> _Loaded:
        """A checkpoint item decoded: its document, its inline values and writes, and the keys of the rest."""
        keyed, checkpoint_id = layout.read_thread_checkpoint_sk(item[schema.SK]["S"])
        namespace = keyed if keyed is not None else item[NAMESPACE]["S"]
        stored = bytes(item[DOCUMENT]["B"])
        text = codec.decode(stored, 8 * limits.MAX_STATE_BYTES) if codec.is_packed(stored) else stored
        document = json.loads(text)
        loaded = _Loaded(item, namespace, checkpoint_id, document, len(text))
        versions: dict[str, Any] = document["c"].get("channel_versions", {})
        inline = item.get(INLINE, {}).get("M", {})
        generation = item[GENERATION]["S"]
        for channel, version in versions.items():
            key = version_key(version)
            small = inline.get(channel, {}).get("M")
            if small is not None and small[VERSION]["S"] == key:
                if small[TYPE]["S"] != EMPTY_TYPE:
                    loaded.values[channel] = StoredValue(small[TYPE]["S"], bytes(small[BYTES]["B"]))
                continue
            loaded.missing[channel] = layout.thread_value_sk(generation, namespace, channel, key)
        for name, attr in item.get(WRITES, {}).get("M", {}).items():
            task_id, index = json.loads(name)
            entry = attr["M"]
            write = PendingWrite(
                task_id=task_id,
                index=int(index),
                channel=entry[CHANNEL]["S"],
                type=entry[TYPE]["S"],
                data=None,
                task_path=entry[TASK_PATH]["S"],
            )
            if BYTES in entry:
                loaded.writes.append((write, StoredValue(write.type, bytes(entry[BYTES]["B"]))))
            else:
                loaded.writes.append((write, entry[REFERENCE]["S"]))
        loaded.estimate = _tuple_estimate(loaded)
        return loaded

    def _resolve(self, thread_id: str, pk: str, loaded: list[_Loaded]) -> list[ThreadCheckpoint]:
        """The checkpoints with every value in place: one BatchGetItem (per 100 keys) for values outside the items."""
        keys: dict[str, Item] = {}
        for one in loaded:
            for sk in one.missing.values():
                keys[sk] = layout.key(pk, sk)
            for _, value in one.writes:
                if isinstance(value, str):
                    keys[value] = layout.key(pk, value)
        found = batch_get(self._client, self._table, list(keys.values())) if keys else {}
        by_sk = {sk: found.get(layout.identity(key)) for sk, key in keys.items()}
        result = []
        for one in loaded:
            values = dict(one.values)
            for channel, sk in one.missing.items():
                item = by_sk.get(sk)
                if item is not None and item[TYPE]["S"] != EMPTY_TYPE:
                    values[channel] = self._value_of(item)
            writes: list[tuple[PendingWrite, StoredValue]] = []
            for write, value in one.writes:
                if isinstance(value, str):
                    item = by_sk.get(value)
                    if item is None:
                        continue  # its item is gone with a thread being deleted: the checkpoint is going too
                    writes.append((write, self._value_of(item)))
                else:
                    writes.append((write, value))
            order = {id(w): n for n, w in enumerate(sorted_writes(w for w, _ in writes))}
            writes.sort(key=lambda pair: order[id(pair[0])])
            result.append(
                ThreadCheckpoint(
                    thread_id=thread_id,
                    namespace=one.namespace,
                    checkpoint_id=one.checkpoint_id,
                    parent_checkpoint_id=one.item.get(PARENT, {}).get("S"),
                    checkpoint=one.document["c"],
                    metadata=one.document.get("m", {}),
                    values=values,
                    writes=writes,
                    document_bytes=one.document_bytes,
                )
            )
        return result

    def _value_of(self, item: Item) -> StoredValue:
        """A value item's value: its bytes, or a presigned download of the object that holds them."""
        type_tag = item[TYPE]["S"]
        if OBJECT in item:
            if self._objects is None:
                raise Unavailable(UNAVAILABLE_MESSAGE)
            return StoredValue(type_tag, None, self._objects.presign_get(item[OBJECT]["S"]).url)
        stored = bytes(item[BYTES]["B"])
        if PACKED in item:
            stored = codec.decode(stored, limits.MAX_STATE_BYTES)
        return StoredValue(type_tag, stored)

    # -- deletes, prune, copy, runs -----------------------------------------------------------------------------

    def delete(self, tenant_id: str, agent_id: str, thread_id: str, now_ms: int, deadline: float) -> bool:
        """Hide the thread at once (its head deleted) and remove its items until `deadline`; the reaper removes the
        rest. False when there was no live thread (its items are removed all the same)."""
        pk = layout.thread_pk(tenant_id, agent_id, thread_id)
        with translated_errors():
            answer = self._client.delete_item(
                TableName=self._table, Key=layout.key(pk, layout.THREAD_HEAD_SK), ReturnValues="ALL_OLD"
            )
            head = _live_head(answer.get("Attributes"), now_ms)
            # botocore sent the delete again (the first answer was lost): the first may have deleted the head, so
            # the old image is gone. Whether the thread existed is then unknown; it is gone now, which is what the
            # caller asked, and a retry of a landed delete must not answer 404.
            retried = int(answer.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0
            self._delete_partition(pk, deadline)
        return head is not None or retried

    def _delete_partition(self, pk: str, deadline: float) -> bool:
        """Delete every item of a partition, page by page, until `deadline`; True when nothing is left."""
        condition = f"#{schema.PK} = :pk"
        while time.monotonic() < deadline:
            answer = self._client.query(
                TableName=self._table,
                KeyConditionExpression=condition,
                ProjectionExpression=_KEYS_ONLY,
                ExpressionAttributeNames=names_in(condition, _KEYS_ONLY),
                ExpressionAttributeValues={":pk": {"S": pk}},
                ConsistentRead=True,
                Limit=100,
            )
            keys = [layout.key(*layout.identity(item)) for item in answer.get("Items", [])]
            if not keys:
                return True
            self._batch_delete(keys)
        return False

    def prune(
        self, tenant_id: str, agent_id: str, thread_ids: Iterable[str], strategy: str, now_ms: int, deadline: float
    ) -> tuple[int, int]:
        """Prune each live thread: `delete` removes it, `keep_latest` keeps the latest checkpoint of each namespace
        (its pending writes and the values it needs); (threads pruned, checkpoints deleted)."""
        threads = 0
        deleted = 0
        with translated_errors():
            for thread_id in dict.fromkeys(thread_ids):
                pk = layout.thread_pk(tenant_id, agent_id, thread_id)
                head = self.head(tenant_id, agent_id, thread_id, now_ms)
                if head is None:
                    continue
                threads += 1
                if strategy == "delete":
                    deleted += self._count_checkpoints(pk, head)
                    self.delete(tenant_id, agent_id, thread_id, now_ms, deadline)
                    continue
                deleted += self._keep_latest(pk, head)
        return threads, deleted

    def _count_checkpoints(self, pk: str, head: Head) -> int:
        """How many checkpoints the thread's current life holds (Queries that count, reading no item back)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        mine = f"#{GENERATION} = :g"
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "FilterExpression": mine,
            "ExpressionAttributeNames": names_in(condition, mine),
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":prefix": {"S": layout.THREAD_CHECKPOINT},
                ":g": {"S": head.generation},
            },
            "Select": "COUNT",
            "ConsistentRead": True,
        }
        counted = 0
        while True:
            answer = self._client.query(**request)
            counted += int(answer.get("Count", 0))
            if not answer.get("LastEvaluatedKey"):
                return counted
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def _keep_latest(self, pk: str, head: Head) -> int:
        """Delete every checkpoint but the latest of each namespace, and the values and write values only they held;
        the checkpoints deleted. Only the kept checkpoints are decoded."""
        latest: dict[str, _Loaded] = {}
        doomed: list[Item] = []
        for item in _Walk(self, pk, head, None, None, None, None):
            keyed, _ = layout.read_thread_checkpoint_sk(item[schema.SK]["S"])
            namespace = keyed if keyed is not None else item[NAMESPACE]["S"]
            if namespace in latest:
                doomed.append(layout.key(*layout.identity(item)))
            else:
                latest[namespace] = self._load(item)
        needed = {sk for one in latest.values() for sk in one.missing.values()}
        needed |= {value for one in latest.values() for _, value in one.writes if isinstance(value, str)}
        needed |= self._early_references(pk)
        for item in self._partition_items(pk, (layout.thread_values(head.generation), layout.THREAD_WRITE_VALUE)):
            if layout.identity(item)[1] not in needed:
                doomed.append(layout.key(*layout.identity(item)))
        self._batch_delete(doomed)
        return sum(1 for key in doomed if layout.identity(key)[1].startswith(layout.THREAD_CHECKPOINT))

    def _early_references(self, pk: str) -> set[str]:
        """The write values that writes-only items reference: writes that came before their checkpoint, which is on
        its way (a prune must not take them from it)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        projection = f"#{GENERATION}, #{WRITES}"
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": names_in(condition, projection),
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":prefix": {"S": layout.THREAD_CHECKPOINT}},
            "ConsistentRead": True,
        }
        found: set[str] = set()
        while True:
            answer = self._client.query(**request)
            for item in answer.get("Items", []):
                if GENERATION in item:
                    continue
                for entry in item.get(WRITES, {}).get("M", {}).values():
                    if REFERENCE in entry["M"]:
                        found.add(entry["M"][REFERENCE]["S"])
            if not answer.get("LastEvaluatedKey"):
                return found
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def _partition_items(self, pk: str, prefixes: Sequence[str]) -> Iterator[Item]:
        """Keys of the partition's items under each prefix (consistent Queries of keys only)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        for prefix in prefixes:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": condition,
                "ProjectionExpression": _KEYS_ONLY,
                "ExpressionAttributeNames": names_in(condition, _KEYS_ONLY),
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":prefix": {"S": prefix}},
                "ConsistentRead": True,
            }
            while True:
                answer = self._client.query(**request)
                yield from answer.get("Items", [])
                if not answer.get("LastEvaluatedKey"):
                    break
                request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def copy(self, tenant_id: str, agent_id: str, source_id: str, target_id: str, now_ms: int, deadline: float) -> int:
        """Copy every checkpoint (with its pending writes) and value of a thread into another (merged into it when it
        exists), with the source's time to live; the checkpoints copied."""
        source_pk = layout.thread_pk(tenant_id, agent_id, source_id)
        target_pk = layout.thread_pk(tenant_id, agent_id, target_id)
        with translated_errors():
            head = self.head(tenant_id, agent_id, source_id, now_ms)
            if head is None:
                raise NotFound()
            if source_id == target_id:
                return self._count_checkpoints(source_pk, head)
            target = self._touch(target_pk, head.ttl_ms // 1000, now_ms)
            copies: list[Item] = []
            checkpoints: list[Item] = []
            renamed: dict[str, str] = {}
            for item in self._all_of_generation(source_pk, head):
                sk = item[schema.SK]["S"]
                copy = dict(item)
                copy[schema.PK] = {"S": target_pk}
                if sk.startswith(layout.THREAD_VALUE):
                    rest = sk.removeprefix(layout.thread_values(head.generation))
                    copy[schema.SK] = {"S": layout.thread_values(target.generation) + rest}
                elif sk.startswith(layout.THREAD_WRITE_VALUE):
                    # A write value of its own in the target: the reaper deletes one by its key with its checkpoint.
                    renamed[sk] = sk.rsplit("#", 1)[0] + "#" + uuid.uuid4().hex
                    copy[schema.SK] = {"S": renamed[sk]}
                if GENERATION in copy and copy[GENERATION]["S"]:
                    copy[GENERATION] = {"S": target.generation}
                if OBJECT in copy and self._objects is not None:
                    copy[OBJECT] = {"S": self._objects.copy_state(tenant_id, item[OBJECT]["S"])}
                (checkpoints if sk.startswith(layout.THREAD_CHECKPOINT) else copies).append(copy)
            for checkpoint in checkpoints:
                _rename_write_values(checkpoint, renamed)
            # Values first, checkpoints last: a copy cut short never shows a checkpoint without its values.
            self._batch_put(copies)
            self._batch_put(checkpoints)
        return len(checkpoints)

    def _all_of_generation(self, pk: str, head: Head) -> Iterator[Item]:
        """Every item of the thread's current generation except its head."""
        condition = f"#{schema.PK} = :pk"
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names_in(condition),
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
        }
        while True:
            answer = self._client.query(**request)
            for item in answer.get("Items", []):
                sk = item[schema.SK]["S"]
                if sk == layout.THREAD_HEAD_SK:
                    continue
                if sk.startswith(layout.THREAD_VALUE):
                    if sk.startswith(layout.thread_values(head.generation)):
                        yield item
                elif item.get(GENERATION, {}).get("S") in (head.generation, ""):
                    yield item
            if not answer.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def delete_for_runs(self, tenant_id: str, agent_id: str, run_ids: Iterable[str]) -> int:
        """Delete the agent's thread checkpoints whose metadata names one of `run_ids` (found through gsi1, one
        Query per run); their large pending writes are removed by the reaper. The checkpoints deleted."""
        doomed: list[Item] = []
        condition = f"#{schema.GSI1_PK} = :gpk"
        with translated_errors():
            for run_id in dict.fromkeys(run_ids):
                request: dict[str, Any] = {
                    "TableName": self._table,
                    "IndexName": schema.GSI1,
                    "KeyConditionExpression": condition,
                    "ProjectionExpression": _KEYS_ONLY,
                    "ExpressionAttributeNames": names_in(condition, _KEYS_ONLY),
                    "ExpressionAttributeValues": {":gpk": {"S": layout.run_index_pk(tenant_id, agent_id, run_id)}},
                }
                while True:
                    answer = self._client.query(**request)
                    doomed += [layout.key(*layout.identity(item)) for item in answer.get("Items", [])]
                    if not answer.get("LastEvaluatedKey"):
                        break
                    request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
            self._batch_delete(doomed)
        return len(doomed)

    # -- batches ------------------------------------------------------------------------------------------------

    def _batch_put(self, items: list[Item]) -> None:
        self._batch_write([{"PutRequest": {"Item": item}} for item in items])

    def _batch_delete(self, keys: list[Item]) -> None:
        self._batch_write([{"DeleteRequest": {"Key": key}} for key in keys])

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        """Every request, 25 per BatchWriteItem, sending again what DynamoDB leaves unprocessed (then 503)."""
        for start in range(0, len(requests), 25):
            pending: Any = requests[start : start + 25]
            for attempt in range(WRITE_ROUNDS):
                if attempt:
                    time.sleep(WRITE_BACKOFF_SECONDS * 2 ** (attempt - 1))
                answer = self._client.batch_write_item(RequestItems={self._table: pending})
                pending = (answer.get("UnprocessedItems") or {}).get(self._table, [])
                if not pending:
                    break
            else:
                raise Unavailable(UNAVAILABLE_MESSAGE)


def _answered(size: int, in_bucket: bool) -> int:
    """At most what a value of `size` bytes adds to an answer: base64, or a presigned URL."""
    return PRESIGNED_URL_BYTES if in_bucket else 4 * -(-size // 3)


def _tuple_estimate(loaded: _Loaded) -> int:
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
            total += _answered(len(value.data or b""), in_bucket=False)
            continue
        large = sizes.get(channel, {}).get("L")
        if large is None:
            total += PRESIGNED_URL_BYTES  # not this item's to say: counted as the largest a read could answer
            continue
        size, in_bucket = int(large[1]["N"]), len(large) > 2 and large[2]["N"] == "1"
        total += _answered(size, in_bucket or size > ITEM_VALUE_BYTES)
    entries = loaded.item.get(WRITES, {}).get("M", {})
    for name, attr in entries.items():
        entry = attr["M"]
        size = int(entry[SIZE]["N"])
        names = len(name.encode()) + len(entry[CHANNEL]["S"].encode()) + len(entry[TASK_PATH]["S"].encode())
        total += WRITE_SYNTAX_BYTES + 2 * names + len(entry[TYPE]["S"]) + _answered(size, size > ITEM_VALUE_BYTES)
    return total


def _carry(
    source: Item, versions: dict[str, Any], carried: list[str], inline: dict[str, Any], sizes: dict[str, Any]
) -> None:
    """Copy from `source` what a child keeps: small values and the sizes of large ones whose version it shares."""
    source_inline = source.get(INLINE, {}).get("M", {})
    source_sizes = source.get(SIZES, {}).get("M", {})
    for channel in carried:
        key = version_key(versions[channel])
        small = source_inline.get(channel, {}).get("M")
        if small is not None and small[VERSION]["S"] == key:
            inline[channel] = {VERSION: key, TYPE: small[TYPE]["S"], BYTES: bytes(small[BYTES]["B"])}
            continue
        large = source_sizes.get(channel, {}).get("L")
        if large is not None and large[0]["S"] == key:
            sizes[channel] = [key, int(large[1]["N"]), int(large[2]["N"]) if len(large) > 2 else 0]


def _index_bytes(channel: str, version: str, type_tag: str = "", size: int = 0) -> int:
    """What one channel adds to its checkpoint's item (`iv` or `vz`): its name, version, type and small value."""
    return len(channel.encode()) + len(version.encode()) + len(type_tag) + size + 24


def _entry_bytes(name: str, entry: dict[str, Any]) -> int:
    """What one pending write's entry adds to its checkpoint's item, as DynamoDB sizes it (near enough)."""
    held = entry.get(BYTES, b"") or entry.get(REFERENCE, "")
    strings = (name, entry[CHANNEL], entry[TYPE], entry[TASK_PATH])
    return ENTRY_BYTES + sum(len(text.encode()) for text in strings) + len(held)


def _rename_write_values(item: Item, renamed: dict[str, str]) -> None:
    """Point a copied checkpoint's pending writes at the copies of their write values."""
    writes = item.get(WRITES, {}).get("M")
    if not writes:
        return
    fixed = {}
    for name, attr in writes.items():
        entry = dict(attr["M"])
        if REFERENCE in entry:
            entry[REFERENCE] = {"S": renamed.get(entry[REFERENCE]["S"], entry[REFERENCE]["S"])}
        fixed[name] = {"M": entry}
    item[WRITES] = {"M": fixed}


def _head(item: Item) -> Head:
    return Head(item[GENERATION]["S"], int(item[TTL_MS]["N"]), int(item[EXPIRES_MS]["N"]))


def _live_head(item: Item | None, now_ms: int) -> Head | None:
    """The head of a live thread, or None when it is missing or expired."""
    if not item or GENERATION not in item:
        return None
    head = _head(item)
    return head if head.expires_ms > now_ms else None
