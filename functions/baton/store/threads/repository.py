"""The thread repository: LangGraph checkpoints, their channel values and pending writes in one partition per thread
(the package's docstring says what its items are).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from baton.domain import limits
from baton.domain.canonical import pointer
from baton.domain.errors import NotFound, PayloadTooLarge, Unavailable
from baton.domain.thread_puts import (
    ITEM_VALUE_BYTES,
    MAX_INLINE_WRITE_BYTES,
    Carried,
    Place,
    PutPlan,
    ThreadRef,
    WritesPlan,
    place,
)
from baton.domain.threads import (
    EMPTY_TYPE,
    LIST_READ_BYTES,
    MAX_PENDING_WRITE_BYTES,
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
)
from baton.store import codec, dynamo, layout, schema, sizes
from baton.store.attributes import Item, names_in, to_attr
from baton.store.batch import batch_get
from baton.store.cursors import decode_after, encode_after, invalid_cursor, query_binding
from baton.store.dynamo import Reads
from baton.store.errors import UNAVAILABLE_MESSAGE, translated_errors
from baton.store.thread_names import (
    ARRIVED,
    BYTES,
    CHANNEL,
    CREATED,
    DEAD,
    DOCUMENT,
    EXPIRES_MS,
    FLOOR,
    GENERATION,
    HELD,
    INDEX,
    INLINE,
    LIST,
    NAMESPACE,
    OBJECT,
    PACKED,
    PARENT,
    REFERENCE,
    SIZE,
    SIZES,
    TASK,
    TASK_PATH,
    TTL_MS,
    TTL_S,
    TYPE,
    UPDATED,
    VERSION,
    WRITE_BYTES,
    WRITE_CALL,
    WRITE_INLINE,
    tombstone,
    write_references,
)
from baton.store.threads.blobs import RequestBlobs
from baton.store.threads.items import (
    CALL_INLINE_VALUE_BYTES,
    KEPT,
    PAGE_ANSWER_BYTES,
    UNPACKED,
    Head,
    Loaded,
    Uploaded,
    Write,
    call_name,
    calls,
    carry,
    head_of,
    held_in,
    held_value,
    held_write,
    lay_in,
    live_head,
    packed_document,
    refresh_slack_ms,
    relocated,
    rename_write_values,
    special_name,
    tuple_estimate,
    write_value_sk,
)
from baton.store.threads.reads import (
    KEYS_ONLY,
    LATEST_PROBE_ITEMS,
    MAX_KEY_BYTES,
    Walk,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton.store.blobs import BlobStore
    from baton.store.objects import ObjectStore

MAX_DELETED_PROBES: Final = 4
"""Queries (of up to 1 MB of keys each) that look for a checkpoint put since a thread's delete."""


KNOWN_HEADS: Final = 1_024
"""Heads a container remembers (the threads it put to last), and checkpoints (what a child carries from them)."""


MAX_REMEMBERED_INDEX_BYTES: Final = 8_192
"""A checkpoint is remembered for its child only when what it carries is this small (1,024 of them: 8 MB at most)."""


_TOUCH_LIVE: Final = f"attribute_not_exists(#{schema.PK}) OR #{EXPIRES_MS} > :now"


_TOUCH: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = :tms, #{TTL_S} = :tts, #{EXPIRES_MS} = :exp, "
    f"#{schema.TTL_ATTRIBUTE} = :ttl"
)


_TOUCH_KEEP_TTL: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = if_not_exists(#{TTL_MS}, :tms), #{TTL_S} = if_not_exists(#{TTL_S}, :tts), "
    f"#{EXPIRES_MS} = if_not_exists(#{TTL_MS}, :tms) + :later, "
    f"#{schema.TTL_ATTRIBUTE} = if_not_exists(#{TTL_S}, :tts) + :later_s"
)


_SAME_HEAD: Final = f"#{GENERATION} = :old_g AND #{EXPIRES_MS} = :old_exp"


_PUT_CHECKPOINT_SET: Final = (
    f"#{GENERATION} = :g, #{DOCUMENT} = :cp, #{INLINE} = :iv, #{SIZES} = :vz, #{HELD} = :hv, #{UPDATED} = :now, "
    f"#{schema.TTL_ATTRIBUTE} = :kept"
)


_SAME_LIFE: Final = f"attribute_not_exists(#{GENERATION}) OR #{GENERATION} = :g"


def pk_of(ref: ThreadRef) -> str:
    """The partition of a thread."""
    return layout.thread_pk(ref.tenant_id, ref.agent_id, ref.thread_id)


class ThreadStore:
    """LangGraph threads in one DynamoDB table (and the bucket, for values too large for an item)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None, blobs: BlobStore | None = None
    ) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._blobs = blobs
        self._heads: OrderedDict[str, Head] = OrderedDict()
        """The heads this container touched last (`_head_for_put`): a put within a slack of a touch touches none."""
        self._stored: OrderedDict[tuple[str, str, str], Item] = OrderedDict()
        """What the checkpoints this container stored last carry into a child (`_remember`), by (pk, namespace,
        id): the put of a child reads nothing of its parent."""

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

    def put(self, plan: PutPlan) -> PutResult:
        """Carry out a planned put (`thread_puts.plan_put`): refresh the head, write the large new values that get
        items of their own, then the checkpoint's item (UpdateItem, so that the pending writes of a checkpoint put
        again are kept). The channels it carries keep the value stored for their version (carried from the parent
        when small). Everything is decided, and checked against the limits, before anything is written: a refused
        put changes nothing (not even the thread's expiry)."""
        ref = plan.ref
        pk = pk_of(ref)
        with translated_errors():
            carried = plan.carried
            source = self._carry_source(pk, plan.namespace, plan.parent_id) if carried else None
            inline, sizes, kept = carry(source, plan.versions, carried) if source is not None else ({}, {}, Carried())
            blobs = RequestBlobs(self._blobs, self._bucket, ref.tenant_id, ref.agent_id, plan.now_ms)
            given: dict[str, bytes | Uploaded] = {
                value.channel: (
                    blobs.value(value.sent, pointer("values", value.channel, "blob_id"))
                    if isinstance(value.sent, BlobRef)
                    else value.sent
                )
                for value in plan.new
            }
            stored_document = packed_document(plan.document, plan.metadata)
            placement = place(plan, given, kept, len(stored_document), codec.encode)
            head = self._head_for_put(pk, plan.ttl_seconds, plan.now_ms)
            if source is not None and not head.shows(source):
                # What was carried belongs to a former life of the thread: none of it is this one's.
                inline, sizes = {}, {}
            held = lay_in(placement, plan.checkpoint_id, inline, sizes)
            self._batch_put(
                [
                    self._value_item(
                        pk,
                        layout.thread_value_sk(
                            head.generation, plan.namespace, placed.value.channel, placed.value.version
                        ),
                        ref.tenant_id,
                        placed.value.type_tag,
                        given[placed.value.channel],
                        head.generation,
                        plan.now_ms,
                        placed.stored if placed.packed else None,
                    )
                    for placed in placement.placed
                    if placed.place in (Place.ITEM, Place.BUCKET)
                ]
            )
            self._put_checkpoint(plan, stored_document, (inline, sizes, held), head)
            self._remember(pk, plan, head, inline, sizes, placement.index_bytes)
        return PutResult(plan.namespace, plan.checkpoint_id, head.expires_ms)

    def _head_for_put(self, pk: str, ttl_seconds: int | None, now_ms: int) -> Head:
        """The head a put writes under: the one this container last touched while its expiry is still at least a
        time to live away (no request: the expiry a touch sets carries `refresh_slack_ms` more), else a touch."""
        known = self._heads.get(pk)
        if (
            known is not None
            and (ttl_seconds is None or ttl_seconds * 1000 == known.ttl_ms)
            and known.expires_ms - now_ms >= known.ttl_ms
        ):
            self._heads.move_to_end(pk)
            return known
        head = self._touch(pk, ttl_seconds, now_ms)
        self._heads[pk] = head
        while len(self._heads) > KNOWN_HEADS:
            self._heads.popitem(last=False)
        return head

    def _touch(self, pk: str, ttl_seconds: int | None, now_ms: int) -> Head:
        """Refresh a thread's head (creating it, or starting a new generation over an expired one): its generation
        and expiry, `refresh_slack_ms` beyond the time to live. One UpdateItem; over an expired head, one more write
        that replaces it."""
        known = self._heads.get(pk)
        guess = (ttl_seconds * 1000) if ttl_seconds else known.ttl_ms if known else limits.DEFAULT_TTL_SECONDS * 1000
        later = now_ms + refresh_slack_ms(guess)
        ttl = ttl_seconds or limits.DEFAULT_TTL_SECONDS
        values: dict[str, Any] = {
            ":g": {"S": uuid.uuid4().hex[:12]},
            ":now": {"N": str(now_ms)},
            ":later": {"N": str(later)},
            ":later_s": {"N": str(later // 1000 + 1)},
            ":tms": {"N": str(ttl * 1000)},
            ":tts": {"N": str(ttl)},
        }
        update = _TOUCH_KEEP_TTL
        if ttl_seconds is not None:
            # DynamoDB adds an attribute and a value (`if_not_exists(...) + :later`), not two values: computed here.
            update = _TOUCH
            values[":exp"] = {"N": str(later + ttl * 1000)}
            values[":ttl"] = {"N": str(later // 1000 + 1 + ttl)}
            del values[":later"], values[":later_s"]
        answer = dynamo.attempt(
            self._client.update_item,
            TableName=self._table,
            Key=layout.key(pk, layout.THREAD_HEAD_SK),
            UpdateExpression=update,
            ConditionExpression=_TOUCH_LIVE,
            ExpressionAttributeNames=names_in(update, _TOUCH_LIVE),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(answer, dynamo.Refused):
            return self._restart(pk, answer.item, ttl_seconds, now_ms)
        return head_of(answer["Attributes"])

    def _restart(self, pk: str, old: Item, ttl_seconds: int | None, now_ms: int) -> Head:
        """A new generation over an expired head (its items are left to the reaper, which reads the change)."""
        ttl_ms = (ttl_seconds or limits.DEFAULT_TTL_SECONDS) * 1000
        head = Head(uuid.uuid4().hex[:12], ttl_ms, now_ms + refresh_slack_ms(ttl_ms) + ttl_ms)
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
        answer = dynamo.attempt(
            self._client.put_item,
            TableName=self._table,
            Item=item,
            ConditionExpression=_SAME_HEAD,
            ExpressionAttributeNames=names_in(_SAME_HEAD),
            ExpressionAttributeValues={":old_g": old[GENERATION], ":old_exp": old[EXPIRES_MS]},
        )
        if isinstance(answer, dynamo.Refused):
            raise Unavailable(UNAVAILABLE_MESSAGE)  # another writer restarted it at the same moment
        return head

    def _remember(
        self, pk: str, plan: PutPlan, head: Head, inline: dict[str, Any], sizes: dict[str, Any], index: int
    ) -> None:
        """Keep what a child of this checkpoint carries from it (`_carry_source`), when it is small: its channel maps as
        the item holds them (never changed: a child's maps are new dicts of the same entries)."""
        if index > MAX_REMEMBERED_INDEX_BYTES:
            return
        key = (pk, plan.namespace, plan.checkpoint_id)
        self._stored[key] = {
            GENERATION: {"S": head.generation},
            UPDATED: {"N": str(plan.now_ms)},
            INLINE: {"M": inline},
            SIZES: {"M": sizes},
        }
        self._stored.move_to_end(key)
        while len(self._stored) > KNOWN_HEADS:
            self._stored.popitem(last=False)

    def _carry_source(self, pk: str, namespace: str, parent_id: str | None) -> Item | None:
        """The item a put carries small values (and the sizes of large ones) from: its parent as this container
        stored it a moment ago (no request: a graph's steps put each checkpoint's child next), else as the table
        holds it (one consistent GetItem of four attributes), or, without one or when it is gone, the namespace's
        latest checkpoint (one Query)."""
        if parent_id is not None and (known := self._stored.get((pk, namespace, parent_id))) is not None:
            return known
        projection = f"#{GENERATION}, #{UPDATED}, #{INLINE}, #{SIZES}"
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
        self,
        pk: str,
        sk: str,
        tenant_id: str,
        type_tag: str,
        raw: bytes | Uploaded,
        generation: str,
        now_ms: int,
        packed: bytes | object | None = UNPACKED,
    ) -> Item:
        """The item of one large value: packed when that pays (`packed`: its packing when made already, None when
        packing did not pay); over `ITEM_VALUE_BYTES`, its bytes in the bucket as they are (a read hands out a
        presigned URL to them, so no answer carries them and none outgrows Lambda's)."""
        item: Item = {
            **layout.key(pk, sk),
            GENERATION: {"S": generation},
            UPDATED: {"N": str(now_ms)},
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
        if packed is UNPACKED:
            packed = codec.encode(raw)
        if isinstance(packed, bytes):
            item[PACKED] = {"BOOL": True}
            stored = packed
        item[BYTES] = {"B": stored}
        return item

    def _put_checkpoint(
        self,
        plan: PutPlan,
        stored_document: bytes,
        channels: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
        head: Head,
    ) -> None:
        """Write the checkpoint's item (an UpdateItem: a checkpoint put again keeps its pending writes) with its
        channels: small values inline, large values' versions and sizes (and holder), large values it holds."""
        inline, sizes, held = channels
        ref, namespace, checkpoint_id = plan.ref, plan.namespace, plan.checkpoint_id
        update = f"SET {_PUT_CHECKPOINT_SET}"
        values: dict[str, Any] = {
            ":g": {"S": head.generation},
            ":cp": {"B": stored_document},
            ":iv": {"M": inline},
            ":vz": {"M": sizes},
            ":hv": {"M": held},
            ":now": {"N": str(plan.now_ms)},
            ":kept": KEPT,
        }
        removals = [f"#{DEAD}"]  # a checkpoint put again after its thread was deleted: a tombstone no more
        if layout.part(namespace).startswith(layout.HASHED):
            update += f", #{NAMESPACE} = :ns"
            values[":ns"] = {"S": namespace}
        if plan.parent_id is not None:
            update += f", #{PARENT} = :par"
            values[":par"] = {"S": plan.parent_id}
        else:
            removals.append(f"#{PARENT}")
        if plan.run_id is not None:
            update += f", #{schema.GSI1_PK} = :gpk, #{schema.GSI1_SK} = :gsk"
            values[":gpk"] = {"S": layout.run_index_pk(ref.tenant_id, ref.agent_id, plan.run_id)}
            values[":gsk"] = {"S": layout.thread_checkpoint_sk(namespace, checkpoint_id)}
        else:
            removals += [f"#{schema.GSI1_PK}", f"#{schema.GSI1_SK}"]
        pk = pk_of(ref)
        key = layout.key(pk, layout.thread_checkpoint_sk(namespace, checkpoint_id))
        # Pending writes are kept when the item is this life's (a put again) or writes that came first.
        answer = dynamo.attempt(
            self._client.update_item,
            TableName=self._table,
            Key=key,
            UpdateExpression=f"{update} REMOVE {', '.join(removals)}",
            ConditionExpression=_SAME_LIFE,
            ExpressionAttributeNames=names_in(update, _SAME_LIFE, *removals),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if not isinstance(answer, dynamo.Refused):
            return
        # An item of the thread's former life (not reaped yet): nothing of it is kept, its writes least of all.
        stale = {f"#x{n}": name for n, name in enumerate(n for n in answer.item if n.startswith(WRITE_CALL))}
        stale |= {f"#{WRITE_BYTES}": WRITE_BYTES, f"#{WRITE_INLINE}": WRITE_INLINE}
        self._client.update_item(
            TableName=self._table,
            Key=key,
            UpdateExpression=f"{update} REMOVE {', '.join([*removals, *stale])}",
            ExpressionAttributeNames=names_in(update, *removals) | stale,
            ExpressionAttributeValues=values,
        )

    # -- put_writes ---------------------------------------------------------------------------------------------

    def put_writes(self, plan: WritesPlan) -> int:
        """Keep a task's pending writes on its checkpoint: one UpdateItem sets the whole call as one attribute of the
        checkpoint's item (`WRITE_CALL`), so the call shows whole or not at all, creating the item when the writes come
        before their checkpoint (LangGraph stores checkpoints in the background), after one BatchWriteItem for values
        too large to ride in the item. A retry of a call that landed names the same attribute and changes nothing; a
        write whose (task_id, idx) an earlier call stored is shown as that call stored it, except the special
        channels', where the latest call's shows. A tombstone (the checkpoint of a deleted thread) refuses the call:
        NotFound. The count of writes in the call."""
        ref = plan.ref
        pk = pk_of(ref)
        key = layout.key(pk, layout.thread_checkpoint_sk(plan.namespace, plan.checkpoint_id))
        with translated_errors():
            blobs = RequestBlobs(self._blobs, self._bucket, ref.tenant_id, ref.agent_id, plan.now_ms)
            prepared = [
                Write(
                    write.index,
                    write.channel,
                    write.type_tag,
                    (
                        blobs.value(write.sent, pointer("writes", n, "blob_id"))
                        if isinstance(write.sent, BlobRef)
                        else write.sent
                    ),
                )
                for n, write in enumerate(plan.writes)
            ]
            answered = sum(w.answered for w in prepared)
            if answered > MAX_PENDING_WRITE_BYTES:
                raise PayloadTooLarge(
                    field="writes",
                    limit_bytes=MAX_PENDING_WRITE_BYTES,
                    actual_bytes=answered,
                    what="The pending writes",
                )
            name = call_name(plan.task_id, plan.task_path, prepared)
            # The special channels' writes overwrite: each gets an attribute of its own per (task_id, idx), set again
            # by a later call (the last of a call's writes to one of them is the one kept); the others ride in the
            # call's attribute, which an earlier call's writes under the same (task_id, idx) precede on read.
            special = {w.index: w for w in prepared if overwrites(w.index)}
            groups = {name: [w for w in prepared if not overwrites(w.index)]}
            groups |= {special_name(plan.task_id, index): [write] for index, write in special.items()}
            inline = 0
            for out_of_line in (False, True):
                attributes: dict[str, dict[str, Any]] = {}
                items: list[Item] = []
                for attribute, group in groups.items():
                    entries, needed = self._call_entries(pk, plan, group, out_of_line)
                    attributes[attribute] = to_attr(
                        {TASK: plan.task_id, TASK_PATH: plan.task_path, ARRIVED: plan.now_ms, LIST: entries}
                    )
                    items += needed
                inline = sum(len(a.encode()) + sizes.value_bytes(value) for a, value in attributes.items())
                if inline > MAX_INLINE_WRITE_BYTES:
                    continue
                self._batch_put(list({item[schema.SK]["S"]: item for item in items}.values()))
                if self._add_call(key, name, attributes, inline, answered, plan.now_ms):
                    return len(prepared)
            raise PayloadTooLarge(
                field="writes",
                limit_bytes=MAX_INLINE_WRITE_BYTES,
                actual_bytes=inline,
                what="The pending writes this checkpoint's item would keep",
            )

    def _call_entries(
        self, pk: str, plan: WritesPlan, prepared: list[Write], out_of_line: bool
    ) -> tuple[list[dict[str, Any]], list[Item]]:
        """Each write's entry in its call's attribute, and the items of the values that do not ride in it: one per
        distinct value. Values of at most `INLINE_VALUE_BYTES` ride in it, and larger ones while the call's values come
        to at most `CALL_INLINE_VALUE_BYTES` (a task's message: one request, and the item every later write to the
        checkpoint rewrites stays small); none when the item has no room left (`out_of_line`)."""
        entries: list[dict[str, Any]] = []
        items: dict[str, Item] = {}
        riding = 0
        for write in prepared:
            entry: dict[str, Any] = {CHANNEL: write.channel, TYPE: write.type, INDEX: write.index, SIZE: write.size}
            raw = write.raw
            stored = codec.encode(raw) if isinstance(raw, bytes) and not write.small else None
            held = len(stored) if stored is not None else write.size
            if isinstance(raw, bytes) and (write.small or riding + held <= CALL_INLINE_VALUE_BYTES) and not out_of_line:
                riding += held
                entry[BYTES] = stored if stored is not None else raw
                if stored is not None:
                    entry[PACKED] = True
            else:
                sk = write_value_sk(plan.namespace, plan.checkpoint_id, write)
                if sk not in items:
                    items[sk] = self._value_item(pk, sk, plan.ref.tenant_id, write.type, write.raw, "", plan.now_ms)
                entry[REFERENCE] = sk
            entries.append(entry)
        return entries, list(items.values())

    def _add_call(
        self, key: Item, name: str, attributes: dict[str, dict[str, Any]], inline: int, answered: int, now_ms: int
    ) -> bool:
        """Set one call's attributes (`name`, and one per special channel written) on the item at `key` (created when
        there is none, with a day's TTL until its checkpoint is put), adding to the item's two budgets, unless `name`
        is there already: True when kept (or kept already: a retry), False when the item has no room for it inline.
        NotFound on a tombstone; 413 past the pending writes' budget."""
        placeholders = {f"#c{n}": attribute for n, attribute in enumerate(attributes)}
        sets = ", ".join(f"#c{n} = :c{n}" for n in range(len(attributes)))
        update = (
            f"SET {sets}, #{schema.TTL_ATTRIBUTE} = if_not_exists(#{schema.TTL_ATTRIBUTE}, :day) "
            f"ADD #{WRITE_BYTES} :answered, #{WRITE_INLINE} :inline"
        )
        condition = (
            f"attribute_not_exists(#c0) AND attribute_not_exists(#{DEAD}) "
            f"AND (attribute_not_exists(#{WRITE_BYTES}) OR #{WRITE_BYTES} <= :room) "
            f"AND (attribute_not_exists(#{WRITE_INLINE}) OR #{WRITE_INLINE} <= :inline_room)"
        )
        answer = dynamo.attempt(
            self._client.update_item,
            TableName=self._table,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={
                **names_in(update.replace(sets, ""), condition.replace("#c0", "")),
                **placeholders,
            },
            ExpressionAttributeValues={
                **{f":c{n}": value for n, value in enumerate(attributes.values())},
                ":day": {"N": str(now_ms // 1000 + 1 + limits.DEFAULT_TTL_SECONDS)},
                ":answered": {"N": str(answered)},
                ":inline": {"N": str(inline)},
                ":room": {"N": str(MAX_PENDING_WRITE_BYTES - answered)},
                ":inline_room": {"N": str(MAX_INLINE_WRITE_BYTES - inline)},
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if not isinstance(answer, dynamo.Refused):
            return True
        found = answer.item
        if DEAD in found:
            raise NotFound()  # the checkpoint of a deleted thread: late writes never show in a next life
        if name in found:
            return True  # a retry of a call that landed
        if int(found.get(WRITE_INLINE, {}).get("N", "0")) + inline > MAX_INLINE_WRITE_BYTES:
            return False
        raise PayloadTooLarge(
            field="writes",
            limit_bytes=MAX_PENDING_WRITE_BYTES,
            actual_bytes=int(found.get(WRITE_BYTES, {}).get("N", "0")) + answered,
            what="The pending writes of this checkpoint, with those stored,",
        )

    # -- reads --------------------------------------------------------------------------------------------------

    def head(self, ref: ThreadRef, now_ms: int) -> Head | None:
        """The thread's head when the thread is live (one consistent GetItem), else None."""
        answer = self._client.get_item(
            TableName=self._table,
            Key=layout.key(pk_of(ref), layout.THREAD_HEAD_SK),
            ConsistentRead=True,
        )
        return live_head(answer.get("Item"), now_ms)

    def _deleted(self, pk: str, head: Head) -> bool:
        """True when the thread was deleted and no checkpoint was put since (Queries that count, reading no item back,
        at most `MAX_DELETED_PROBES`: a deleted thread's partition holds tombstones; past them, False)."""
        if head.floor_ms == 0:
            return False
        found, whole = dynamo.count(self._client, 1, MAX_DELETED_PROBES, **self._life_request(pk, head))
        return whole and found == 0

    def _life_request(self, pk: str, head: Head) -> dict[str, Any]:
        """A Query of the thread's checkpoints of the head's life (its generation, put since its last delete)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        mine = f"#{GENERATION} = :g AND #{UPDATED} > :floor"
        return {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "FilterExpression": mine,
            "ExpressionAttributeNames": names_in(condition, mine),
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":prefix": {"S": layout.THREAD_CHECKPOINT},
                ":g": {"S": head.generation},
                ":floor": {"N": str(head.floor_ms)},
            },
            "ConsistentRead": True,
        }

    def get(self, ref: ThreadRef, namespace: str, checkpoint_id: str | None, now_ms: int) -> ThreadCheckpoint:
        """One checkpoint with its values and pending writes (the latest of the namespace without an id); NotFound
        when the thread or the checkpoint is not there. A checkpoint by id: one BatchGetItem of head and item; the
        latest: a GetItem of the head and one Query; then one BatchGetItem for values not in the item."""
        pk = pk_of(ref)
        thread_id = ref.thread_id
        with translated_errors():
            if checkpoint_id is not None:
                head_key = layout.key(pk, layout.THREAD_HEAD_SK)
                item_key = layout.key(pk, layout.thread_checkpoint_sk(namespace, checkpoint_id))
                found = batch_get(self._client, self._table, [head_key, item_key])
                head = live_head(found.get(layout.identity(head_key)), now_ms)
                item = found.get(layout.identity(item_key))
                if head is None or item is None or not head.shows(item):
                    raise NotFound()
            else:
                quick = self._latest_at_once(thread_id, pk, namespace, now_ms)
                if quick is not None:
                    return quick
                head = self.head(ref, now_ms)
                if head is None:
                    raise NotFound()
                latest = Walk(
                    self._client, self._table, pk, head, namespace, None, None, Reads(max_bytes=LIST_READ_BYTES)
                )
                latest.page_size = 1
                item = next(iter(latest), None)
                if item is None:
                    if latest.stopped:
                        raise Unavailable(UNAVAILABLE_MESSAGE)  # a former life not reaped yet fills the read budget
                    raise NotFound()
            (loaded,) = self._resolve(thread_id, pk, [self._load(item)])
        return loaded

    def _latest_at_once(self, thread_id: str, pk: str, namespace: str, now_ms: int) -> ThreadCheckpoint | None:
        """The namespace's latest checkpoint in two requests: a Query of its newest items (a few: writes that came
        before their checkpoint's put, and tombstones, are passed over), then one BatchGetItem of the head with the
        values the checkpoint does not hold itself. NotFound when the thread is not live; None when the newest
        checkpoint is not of the head's life (a former life not reaped yet): the caller reads the head first."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        answer = self._client.query(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names_in(condition),
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": layout.thread_checkpoints(namespace)}},
            ConsistentRead=True,
            ScanIndexForward=False,
            Limit=LATEST_PROBE_ITEMS,
        )
        item = next((found for found in answer.get("Items", []) if DOCUMENT in found), None)
        head_key = layout.key(pk, layout.THREAD_HEAD_SK)
        if item is None:
            if len(answer.get("Items", [])) == LATEST_PROBE_ITEMS:
                return None  # more to read: the caller walks on
            head_item = batch_get(self._client, self._table, [head_key]).get(layout.identity(head_key))
            if live_head(head_item, now_ms) is None:
                raise NotFound()
            return None
        found: dict[tuple[str, str], Item] = {}
        (loaded,) = self._resolve(thread_id, pk, [self._load(item)], also=[head_key], found=found)
        head = live_head(found.get(layout.identity(head_key)), now_ms)
        if head is None:
            raise NotFound()
        return loaded if head.shows(item) else None

    def page(
        self,
        ref: ThreadRef,
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
            ref.tenant_id,
            ref.agent_id,
            ref.thread_id,
            namespace,
            before,
            None if wanted is None else json.dumps(wanted, sort_keys=True),
        )
        after = decode_after(cursor, binding)
        pk = pk_of(ref)
        with translated_errors():
            head = self.head(ref, now_ms)
            if head is None:
                raise NotFound()
            below = after
            if before is not None and namespace is not None:
                bound = layout.thread_checkpoint_sk(namespace, before)
                below = bound if below is None else min(below, bound)
            prefix = layout.thread_checkpoints(namespace)
            if below is not None and (not below.startswith(prefix) or len(below.encode()) > MAX_KEY_BYTES):
                raise invalid_cursor()
            walk = Walk(self._client, self._table, pk, head, namespace, below, before, Reads(max_bytes=LIST_READ_BYTES))
            walk.page_size = min(limit + 1, 100)
            chosen: list[Loaded] = []
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
            if not chosen and stop is None and after is None and self._deleted(pk, head):
                raise NotFound()  # deleted, and nothing put since
            page = self._resolve(ref.thread_id, pk, chosen)

        def cursor_after(checkpoint: ThreadCheckpoint) -> str | None:
            sk = layout.thread_checkpoint_sk(checkpoint.namespace, checkpoint.checkpoint_id)
            return encode_after(sk, binding)

        return Page(page, encode_after(stop, binding), cursor_after)

    def _load(self, item: Item) -> Loaded:
        """A checkpoint item decoded: its document, its inline values and writes, and the keys of the rest."""
        keyed, checkpoint_id = layout.read_thread_checkpoint_sk(item[schema.SK]["S"])
        namespace = keyed if keyed is not None else item[NAMESPACE]["S"]
        stored = bytes(item[DOCUMENT]["B"])
        text = codec.decode(stored, 8 * limits.MAX_STATE_BYTES) if codec.is_packed(stored) else stored
        document = json.loads(text)
        loaded = Loaded(item, namespace, checkpoint_id, document, len(text))
        versions: dict[str, Any] = document["c"].get("channel_versions", {})
        inline = item.get(INLINE, {}).get("M", {})
        large_ones = item.get(SIZES, {}).get("M", {})
        held_here = item.get(HELD, {}).get("M", {})
        generation = item[GENERATION]["S"]
        for channel, version in versions.items():
            key = version_key(version)
            small = inline.get(channel, {}).get("M")
            if small is not None and small[VERSION]["S"] == key:
                if small[TYPE]["S"] != EMPTY_TYPE:
                    loaded.values[channel] = StoredValue(small[TYPE]["S"], bytes(small[BYTES]["B"]))
                continue
            large = large_ones.get(channel, {}).get("L") or []
            holder = large[3]["S"] if len(large) > 3 and large[0]["S"] == key else None
            if holder == checkpoint_id:
                mine = held_here.get(channel, {}).get("M")
                if mine is not None and mine[VERSION]["S"] == key:
                    if mine[TYPE]["S"] != EMPTY_TYPE:
                        loaded.values[channel] = held_value(mine[TYPE]["S"], mine)
                    continue
            elif holder is not None:
                loaded.held[channel] = layout.thread_checkpoint_sk(namespace, holder)
            loaded.missing[channel] = layout.thread_value_sk(generation, namespace, channel, key)
        shown: dict[tuple[str, int], tuple[PendingWrite, StoredValue | str]] = {}
        for call in calls(item):
            task_id, task_path = call[TASK]["S"], call[TASK_PATH]["S"]
            for attr in call[LIST]["L"]:
                entry = attr["M"]
                index = int(entry[INDEX]["N"])
                if (task_id, index) in shown and not overwrites(index):
                    continue  # an earlier call's write under this (task_id, idx) is the one kept
                write = PendingWrite(task_id, index, entry[CHANNEL]["S"], entry[TYPE]["S"], None, task_path)
                held = held_write(write.type, entry)
                shown[(task_id, index)] = (write, held)
        loaded.writes = list(shown.values())
        loaded.estimate = tuple_estimate(loaded)
        return loaded

    def _resolve(
        self,
        thread_id: str,
        pk: str,
        loaded: list[Loaded],
        also: Sequence[Item] = (),
        found: dict[tuple[str, str], Item] | None = None,
    ) -> list[ThreadCheckpoint]:
        """The checkpoints with every value in place: one BatchGetItem (per 100 keys) for values outside the items.
        The items at `also` ride in the same BatchGetItem, into `found`."""
        keys: dict[str, Item] = {key[schema.SK]["S"]: key for key in also}
        for one in loaded:
            for channel, sk in one.missing.items():
                where = one.held.get(channel, sk)
                keys[where] = layout.key(pk, where)
            for _, value in one.writes:
                if isinstance(value, str):
                    keys[value] = layout.key(pk, value)
        got = batch_get(self._client, self._table, list(keys.values())) if keys else {}
        if found is not None:
            found.update(got)
        by_sk = {sk: got.get(layout.identity(key)) for sk, key in keys.items()}
        # A value whose holder no longer holds it (pruned, deleted for its run: its values were written to their
        # value items first) is read from its value item: a second BatchGetItem, only then.
        moved = {
            sk: layout.key(pk, sk)
            for one in loaded
            for channel, sk in one.missing.items()
            if channel in one.held and held_in(by_sk.get(one.held[channel]), channel, sk) is None
        }
        if moved:
            again = batch_get(self._client, self._table, list(moved.values()))
            by_sk |= {sk: again.get(layout.identity(key)) for sk, key in moved.items()}
        result = []
        for one in loaded:
            values = dict(one.values)
            for channel, sk in one.missing.items():
                entry = held_in(by_sk.get(one.held[channel]), channel, sk) if channel in one.held else None
                if entry is not None:
                    if entry[TYPE]["S"] != EMPTY_TYPE:
                        values[channel] = held_value(entry[TYPE]["S"], entry)
                    continue
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

    def delete(self, ref: ThreadRef, now_ms: int, deadline: float) -> bool:
        """Hide the thread at once and remove its items until `deadline`; the reaper removes the rest. False when
        there was no live thread (its items are removed all the same).

        A live thread keeps its head, which records when it was deleted (`FLOOR`): nothing put before then shows,
        and a put after it (from a container that still knows the head, so it touches nothing) starts the thread
        again without losing a checkpoint. An expired head is deleted (the reaper ends its generation)."""
        pk = pk_of(ref)
        key = layout.key(pk, layout.THREAD_HEAD_SK)
        with translated_errors():
            live = f"#{EXPIRES_MS} > :now"
            answer = dynamo.attempt(
                self._client.update_item,
                TableName=self._table,
                Key=key,
                UpdateExpression=f"SET #{FLOOR} = :now",
                ConditionExpression=live,
                ExpressionAttributeNames=names_in(f"#{FLOOR}", live),
                ExpressionAttributeValues={":now": {"N": str(now_ms)}},
                ReturnValues="ALL_OLD",
            )
            if isinstance(answer, dynamo.Refused):
                if answer.found:
                    self._client.delete_item(TableName=self._table, Key=key)
                self._delete_partition(pk, deadline, now_ms)
                return False
            # A retry of a delete that landed (botocore sent it again) finds the floor it set: still a success.
            was = head_of(answer["Attributes"])
            retried = int(answer.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0
            existed = retried or not self._deleted(pk, was)
            self._delete_partition(pk, deadline, now_ms)
        return existed

    def _delete_partition(self, pk: str, deadline: float, floor_ms: int) -> bool:
        """Remove a deleted thread's items put before `floor_ms`, page by page, until `deadline`; True when it got
        through them all. Each checkpoint becomes a tombstone (`DEAD`, removed by TTL after `TOMBSTONE_SECONDS`), so a
        task's writes that arrive late are refused instead of waiting for a put of the same id in the thread's next
        life; values and write values are deleted; the head stays."""
        condition = f"#{schema.PK} = :pk"
        projection = f"#{schema.PK}, #{schema.SK}, #{DEAD}, #{UPDATED}"
        pages = dynamo.query(
            self._client,
            TableName=self._table,
            KeyConditionExpression=condition,
            ProjectionExpression=projection,
            ExpressionAttributeNames=names_in(condition, projection),
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
            Limit=100,
        )
        requests: list[dict[str, Any]] = []
        for item in pages:
            if time.monotonic() >= deadline:
                dynamo.write_all(self._client, self._table, requests)
                return False  # pages of tombstones cost reads too: the reaper finishes
            key = layout.key(*layout.identity(item))
            sk = key[schema.SK]["S"]
            if DEAD in item or sk == layout.THREAD_HEAD_SK or int(item.get(UPDATED, {}).get("N", "0")) > floor_ms:
                continue  # a tombstone already, the head, or put after the delete (by a writer that knew the head)
            if sk.startswith(layout.THREAD_CHECKPOINT):
                requests.append({"PutRequest": {"Item": tombstone(key, floor_ms)}})
            else:
                requests.append({"DeleteRequest": {"Key": key}})
            if len(requests) == dynamo.BATCH_WRITE_ITEMS:
                dynamo.write_all(self._client, self._table, requests)
                requests = []
        dynamo.write_all(self._client, self._table, requests)
        return True

    def prune(self, refs: Iterable[ThreadRef], strategy: str, now_ms: int, deadline: float) -> tuple[int, int]:
        """Prune each live thread: `delete` removes it, `keep_latest` keeps the latest checkpoint of each namespace
        (its pending writes and the values it needs); (threads pruned, checkpoints deleted)."""
        threads = 0
        deleted = 0
        with translated_errors():
            for ref in dict.fromkeys(refs):
                pk = pk_of(ref)
                head = self.head(ref, now_ms)
                if head is None or self._deleted(pk, head):
                    continue
                threads += 1
                if strategy == "delete":
                    deleted += self._count_checkpoints(pk, head)
                    self.delete(ref, now_ms, deadline)
                    continue
                deleted += self._keep_latest(pk, head)
        return threads, deleted

    def _count_checkpoints(self, pk: str, head: Head) -> int:
        """How many checkpoints the thread's current life holds (Queries that count, reading no item back)."""
        return dynamo.count(self._client, **self._life_request(pk, head))[0]

    def _keep_latest(self, pk: str, head: Head) -> int:
        """Delete every checkpoint but the latest of each namespace, and the values and write values only they held;
        the checkpoints deleted. Only the kept checkpoints are decoded."""
        latest: dict[str, Loaded] = {}
        doomed: list[Item] = []
        holders: dict[str, Item] = {}
        for item in Walk(self._client, self._table, pk, head, None, None, None, None):
            keyed, _ = layout.read_thread_checkpoint_sk(item[schema.SK]["S"])
            namespace = keyed if keyed is not None else item[NAMESPACE]["S"]
            if namespace in latest:
                doomed.append(layout.key(*layout.identity(item)))
                if item.get(HELD, {}).get("M"):
                    holders[item[schema.SK]["S"]] = item
            else:
                latest[namespace] = self._load(item)
        # A kept checkpoint may keep a version that a pruned one holds in its item: its value item first.
        needed_held = {holder for one in latest.values() for holder in one.held.values()}
        self._batch_put(relocated([holders[sk] for sk in needed_held if sk in holders], self._now_ms()))
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
        items = dynamo.query(
            self._client,
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names_in(condition),
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": layout.THREAD_CHECKPOINT}},
            ConsistentRead=True,
        )
        return {sk for item in items if GENERATION not in item for sk in write_references(item)}

    def _partition_items(self, pk: str, prefixes: Sequence[str]) -> Iterator[Item]:
        """Keys of the partition's items under each prefix (consistent Queries of keys only)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        for prefix in prefixes:
            yield from dynamo.query(
                self._client,
                TableName=self._table,
                KeyConditionExpression=condition,
                ProjectionExpression=KEYS_ONLY,
                ExpressionAttributeNames=names_in(condition, KEYS_ONLY),
                ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
                ConsistentRead=True,
            )

    def copy(self, source: ThreadRef, target_id: str, now_ms: int, deadline: float) -> int:
        """Copy every checkpoint (with its pending writes) and value of a thread into its owner's thread `target_id`
        (merged into it when it exists), with the source's time to live; the checkpoints copied."""
        source_pk = pk_of(source)
        target_pk = pk_of(ThreadRef(source.tenant_id, source.agent_id, target_id))
        with translated_errors():
            head = self.head(source, now_ms)
            if head is None or self._deleted(source_pk, head):
                raise NotFound()
            if source.thread_id == target_id:
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
                    copy[UPDATED] = {"N": str(now_ms)}  # put now, in the target's life (after any delete of it)
                if OBJECT in copy and self._objects is not None:
                    copy[OBJECT] = {"S": self._objects.copy_state(source.tenant_id, item[OBJECT]["S"])}
                (checkpoints if sk.startswith(layout.THREAD_CHECKPOINT) else copies).append(copy)
            for checkpoint in checkpoints:
                rename_write_values(checkpoint, renamed)
            # Values first, checkpoints last: a copy cut short never shows a checkpoint without its values.
            self._batch_put(copies)
            self._batch_put(checkpoints)
        return len(checkpoints)

    def _all_of_generation(self, pk: str, head: Head) -> Iterator[Item]:
        """Every item of the thread's current generation except its head."""
        condition = f"#{schema.PK} = :pk"
        items = dynamo.query(
            self._client,
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names_in(condition),
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )
        for item in items:
            sk = item[schema.SK]["S"]
            if sk == layout.THREAD_HEAD_SK:
                continue
            if sk.startswith(layout.THREAD_VALUE):
                if sk.startswith(layout.thread_values(head.generation)):
                    yield item
            elif head.shows(item) or item.get(GENERATION, {}).get("S") == "":
                yield item

    def delete_for_runs(self, tenant_id: str, agent_id: str, run_ids: Iterable[str]) -> int:
        """Delete the agent's thread checkpoints whose metadata names one of `run_ids` (found through gsi1, one
        Query per run); their large pending writes are removed by the reaper. The checkpoints deleted."""
        doomed: list[Item] = []
        condition = f"#{schema.GSI1_PK} = :gpk"
        with translated_errors():
            for run_id in dict.fromkeys(run_ids):
                found_keys = dynamo.query(
                    self._client,
                    TableName=self._table,
                    IndexName=schema.GSI1,
                    KeyConditionExpression=condition,
                    ProjectionExpression=KEYS_ONLY,
                    ExpressionAttributeNames=names_in(condition, KEYS_ONLY),
                    ExpressionAttributeValues={":gpk": {"S": layout.run_index_pk(tenant_id, agent_id, run_id)}},
                )
                doomed += [layout.key(*layout.identity(item)) for item in found_keys]
            if doomed:
                # Their children may keep versions they hold in their items: those go to value items first.
                found = batch_get(self._client, self._table, doomed)
                self._batch_put(relocated(list(found.values()), self._now_ms()))
            self._batch_delete(doomed)
        return len(doomed)

    @staticmethod
    def _now_ms() -> int:
        return int(time.time() * 1000)

    # -- batches ------------------------------------------------------------------------------------------------

    def _batch_put(self, items: list[Item]) -> None:
        dynamo.put_all(self._client, self._table, items)

    def _batch_delete(self, keys: list[Item]) -> None:
        dynamo.delete_all(self._client, self._table, keys)
