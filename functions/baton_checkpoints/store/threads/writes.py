"""A thread's writes: a put and a put_writes, each carrying out its plan (`domain/thread_puts.py`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.canonical import pointer
from baton_checkpoints.domain.errors import NotFound, PayloadTooLarge
from baton_checkpoints.domain.thread_puts import (
    ITEM_VALUE_BYTES,
    MAX_INLINE_WRITE_BYTES,
    Carried,
    Place,
    PutPlan,
    WritesPlan,
    place,
)
from baton_checkpoints.domain.threads import (
    MAX_PENDING_WRITE_BYTES,
    BlobRef,
    PutResult,
    overwrites,
)
from baton_checkpoints.store import codec, dynamo, layout, schema, sizes
from baton_checkpoints.store.attributes import Item, names_in, to_attr
from baton_checkpoints.store.errors import translated_errors
from baton_checkpoints.store.thread_names import (
    ARRIVED,
    BYTES,
    CHANNEL,
    DEAD,
    DOCUMENT,
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
    TYPE,
    UPDATED,
    WRITE_BYTES,
    WRITE_CALL,
    WRITE_INLINE,
)
from baton_checkpoints.store.threads.blobs import RequestBlobs
from baton_checkpoints.store.threads.heads import KNOWN_HEADS, Heads, pk_of
from baton_checkpoints.store.threads.items import (
    CALL_INLINE_VALUE_BYTES,
    KEPT,
    UNPACKED,
    Head,
    Uploaded,
    Write,
    call_name,
    carry,
    lay_in,
    packed_document,
    special_name,
    write_value_sk,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.store.blobs import BlobStore
    from baton_checkpoints.store.objects import ObjectStore


MAX_REMEMBERED_INDEX_BYTES: Final = 8_192
"""A checkpoint is remembered for its child only when what it carries is this small (1,024 of them: 8 MB at most)."""


_PUT_CHECKPOINT_SET: Final = (
    f"#{GENERATION} = :g, #{DOCUMENT} = :cp, #{INLINE} = :iv, #{SIZES} = :vz, #{HELD} = :hv, #{UPDATED} = :now, "
    f"#{schema.TTL_ATTRIBUTE} = :kept"
)


_SAME_LIFE: Final = f"attribute_not_exists(#{GENERATION}) OR #{GENERATION} = :g"


class Writer:
    """Puts and put_writes to the threads of one table (and the bucket, for values too large for an item)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        objects: ObjectStore | None,
        blobs: BlobStore | None,
        heads: Heads,
    ) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._blobs = blobs
        self._heads = heads
        self._stored: OrderedDict[tuple[str, str, str], Item] = OrderedDict()
        """What the checkpoints this container stored last carry into a child (`_remember`), by (pk, namespace,
        id): the put of a child reads nothing of its parent."""

    def forget(self) -> None:
        """Forget the checkpoints this container stored (as another container would know none of them)."""
        self._stored.clear()

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
            stored_document = packed_document(plan.document_json, plan.metadata)
            placement = place(plan, given, kept, len(stored_document), codec.encode_value)
            head = self._heads.for_put(pk, plan.ttl_seconds, plan.now_ms, plan.create_refused)
            if source is not None and not head.shows(source):
                # What was carried belongs to a former life of the thread: none of it is this one's.
                inline, sizes = {}, {}
            held = lay_in(placement, plan.checkpoint_id, inline, sizes)
            dynamo.put_all(
                self._client,
                self._table,
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
                ],
            )
            self._put_checkpoint(plan, stored_document, (inline, sizes, held), head)
            self._remember(pk, plan, head, inline, sizes, placement.index_bytes)
        return PutResult(plan.namespace, plan.checkpoint_id, head.expires_ms)

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
            packed = codec.encode_value(raw)
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
                dynamo.put_all(self._client, self._table, list({item[schema.SK]["S"]: item for item in items}.values()))
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
            stored = codec.encode_value(raw) if isinstance(raw, bytes) and not write.small else None
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
