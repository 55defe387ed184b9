"""The reaper's part for LangGraph threads (`store/threads/`): what a thread's stream record asks for, and the table
work it needs. `store/reaping.py` dispatches thread records here and does the bucket work (retag, delete) itself.

A thread is one partition (`layout`): its head `H` (the generation `g`), checkpoints `K#...` (their generation `g`,
their pending writes in one attribute per `put_writes` call, `w:<digest>`, whose large values are write-value items
named by each entry's `r`), values
`V#<g>#...` and write values `W#...` (a value or write value too large for an item names its object, `so`). A record
asks for:

1. The head removed (expired, or the thread deleted), or replaced by a new generation (a put over an expired head: a
   MODIFY whose `g` changed): every item of the OLD generation goes. Its checkpoints (`K#` whose `g` is the old one)
   become tombstones, one conditional PutItem each (`g` still the old one: a new life that puts a checkpoint of the
   same id takes the item over, and keeps it; a tombstone refuses late writes, and TTL removes it); its values
   (`V#<old g>#`, a prefix no other life writes) by BatchWriteItem; its write values only when no head exists after
   they were listed (any life that writes one has a head from before it writes until it ends, so a write value listed
   before a moment without a head belongs to a life that is over). Under a new generation the write values of the old
   one go with their checkpoints (rule 3), and the unreferenced ones (of a `put_writes` refused after its values were
   written) wait for the thread's end.
2. A value or write value that names an object: written -> the object is retagged `attached` (it was written pending,
   and a lifecycle rule expires what stays pending); removed (or replaced) -> the object is deleted. Only keys under
   `blobs/<tenant>/states/` count, so no record can make the reaper touch another tenant's objects.
3. A checkpoint removed (delete_for_runs, prune, rule 1, a tombstone), or written over (a put over a former life's
   item drops its writes): the write values its old image referenced and its new one does not are deleted, except
   those the checkpoint as it is now (one consistent GetItem) references again: a copy into a thread deleted a moment
   ago writes write values under the same keys as the source's.

4. The head's `fl` moved (the thread deleted; its head stays, saying when): what was put before then and the delete
   had no time to remove goes, each item on the condition that it still was (a checkpoint leaves a tombstone). A put
   after the delete, by a container that still knew the head, stays: it is the thread's new start.

Everything is idempotent (deleting what is gone is a no-op), and a record whose work passes the deadline raises
`Unfinished`: the record is retried, and starts again on what is left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from msgspec import Struct

from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.dynamo import Refused, attempt, delete_some, query
from baton_checkpoints.store.thread_names import (
    DEAD,
    FLOOR,
    GENERATION,
    OBJECT,
    UPDATED,
    ended_by_delete,
    ending,
    tombstone,
    write_references,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PAGE: Final = 100
"""Items listed per Query of a partition."""
WRITE_ROUNDS: Final = 3
"""BatchWriteItem rounds for what DynamoDB leaves unprocessed (then the record is retried)."""

_LISTED: Final = f"#{schema.PK}, #{schema.SK}, #{GENERATION}, #{DEAD}, #{UPDATED}"
_PUT_BEFORE: Final = f"attribute_exists(#{schema.PK}) AND (attribute_not_exists(#{UPDATED}) OR #{UPDATED} <= :floor)"
_PREFIX: Final = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
_STILL_OLD: Final = f"#{GENERATION} = :old"
_HEAD_ONLY: Final = f"#{GENERATION}"


class Unfinished(RuntimeError):
    """The record's work did not finish before the deadline; what was done stays done, the retry does the rest."""


class ThreadChange(Struct, frozen=True):
    """What a thread record asks for."""

    tenant_id: str
    pk: str
    attach: tuple[str, ...] = ()
    """Object keys the new image names and the old did not: retagged attached."""
    drop_objects: tuple[str, ...] = ()
    """Object keys the old image named and the new does not: deleted."""
    checkpoint_sk: str | None = None
    """The checkpoint whose dropped write values (`drop_writes`) are deleted unless it references them again."""
    drop_writes: tuple[str, ...] = ()
    """Sort keys of write values the checkpoint's old image referenced and its new one does not."""
    generation: str | None = None
    """A generation that ended (head removed or replaced): its items are deleted."""
    floor_ms: int | None = None
    """When the thread was deleted (its head says so from then on): what was put before then goes."""


def thread_work_of(event_name: str, pk: str, sk: str, old: Item | None, new: Item | None) -> ThreadChange | None:
    """What one record of a thread's item asks for (None: nothing)."""
    tenant_id = layout.read_thread_pk(pk)[0]
    if sk == layout.THREAD_HEAD_SK:
        before, after = _generation(old), _generation(new)
        if before is not None and before == after and _floor(new) > _floor(old):
            return ThreadChange(tenant_id, pk, floor_ms=_floor(new))  # the thread deleted: what it held goes
        if before is None or before == after:
            return None  # a head written, or refreshed within its generation
        return ThreadChange(tenant_id, pk, generation=before)
    if sk.startswith(layout.THREAD_CHECKPOINT):
        dropped = _write_references(old) - _write_references(new)
        if not dropped:
            return None
        return ThreadChange(tenant_id, pk, checkpoint_sk=sk, drop_writes=tuple(sorted(dropped)))
    if sk.startswith((layout.THREAD_VALUE, layout.THREAD_WRITE_VALUE)):
        before_object, after_object = _object_of(old, tenant_id), _object_of(new, tenant_id)
        if before_object == after_object:
            return None
        return ThreadChange(
            tenant_id,
            pk,
            attach=() if after_object is None else (after_object,),
            drop_objects=() if before_object is None else (before_object,),
        )
    return None


def _generation(image: Item | None) -> str | None:
    found = (image or {}).get(GENERATION, {}).get("S")
    return found if isinstance(found, str) and found else None


def _floor(image: Item | None) -> int:
    return int((image or {}).get(FLOOR, {}).get("N", "0"))


def _object_of(image: Item | None, tenant_id: str) -> str | None:
    """The object a value image names, when it lies in the tenant's states folder (the reaper's own guard)."""
    key = (image or {}).get(OBJECT, {}).get("S")
    if not isinstance(key, str):
        return None
    folder = layout.state_object(tenant_id, "")
    name = key.removeprefix(folder)
    return key if key.startswith(folder) and name and "/" not in name else None


def _write_references(image: Item | None) -> set[str]:
    """The write values a checkpoint image's pending writes reference (only write-value keys count)."""
    return {sk for sk in write_references(image) if sk.startswith(layout.THREAD_WRITE_VALUE)}


class ThreadItems:
    """The table work of thread records: deleting a generation's items and a checkpoint's dropped write values."""

    def __init__(self, dynamodb: DynamoDBClient, table: str, deadline: float | None) -> None:
        self._dynamodb = dynamodb
        self._table = table
        self._deadline = deadline
        self.deleted = 0
        """Items deleted (or found deleted: a conditional delete of an item already gone counts)."""

    def apply(self, change: ThreadChange) -> None:
        """Do the table work `change` asks for."""
        if change.checkpoint_sk is not None and change.drop_writes:
            self._drop_writes(change.pk, change.checkpoint_sk, change.drop_writes)
        if change.generation is not None:
            self._end_generation(change.pk, change.generation)
        if change.floor_ms is not None:
            self._end_before(change.pk, change.floor_ms)

    def _end_before(self, pk: str, floor_ms: int) -> None:
        """What a deleted thread held (items put before `floor_ms`) goes, each while it still is: a checkpoint
        leaves a tombstone, a value or write value is deleted. The delete itself did this for all it had time for:
        this is the rest (a put after the delete, by a container that still knew the head, stays)."""
        prefixes = (layout.THREAD_CHECKPOINT, layout.THREAD_VALUE, layout.THREAD_WRITE_VALUE)
        for page in (page for prefix in prefixes for page in self._pages(pk, prefix)):
            for item in page:
                if not ended_by_delete(item, floor_ms):
                    continue
                self._in_time()
                request: dict[str, Any] = {
                    "TableName": self._table,
                    "ConditionExpression": _PUT_BEFORE,
                    "ExpressionAttributeNames": names_in(_PUT_BEFORE),
                    "ExpressionAttributeValues": {":floor": {"N": str(floor_ms)}},
                }
                end = ending(layout.key(*layout.identity(item)), floor_ms)
                if "PutRequest" in end:
                    answer = attempt(self._dynamodb.put_item, **end["PutRequest"], **request)
                else:
                    answer = attempt(self._dynamodb.delete_item, **end["DeleteRequest"], **request)
                if not isinstance(answer, Refused):
                    self.deleted += 1

    def _drop_writes(self, pk: str, checkpoint_sk: str, dropped: tuple[str, ...]) -> None:
        answer = self._dynamodb.get_item(TableName=self._table, Key=layout.key(pk, checkpoint_sk), ConsistentRead=True)
        still = _write_references(answer.get("Item"))
        self._batch_delete([layout.key(pk, sk) for sk in dropped if sk not in still])

    def _end_generation(self, pk: str, generation: str) -> None:
        # Checkpoints: each a tombstone while it is still of the old generation. Writes-only items (pending writes
        # whose checkpoint never came: no generation) go like write values, only while no life is live; tombstones
        # stay until their TTL.
        for page in self._pages(pk, layout.THREAD_CHECKPOINT):
            orphans = []
            for item in page:
                found = item.get(GENERATION, {}).get("S")
                if found == generation:
                    self._delete_if_old(dict(item), generation)
                elif found is None and DEAD not in item:
                    orphans.append(layout.key(*layout.identity(item)))
            if orphans and not self._has_head(pk):
                self._batch_delete(orphans)
        # Values: their keys hold the generation, which no later life writes under.
        for page in self._pages(pk, layout.thread_values(generation)):
            self._batch_delete([layout.key(*layout.identity(item)) for item in page])
        # Write values: a page is deleted only when no head exists after it was listed.
        for page in self._pages(pk, layout.THREAD_WRITE_VALUE):
            if self._has_head(pk):
                return
            self._batch_delete([layout.key(*layout.identity(item)) for item in page])

    def _pages(self, pk: str, prefix: str) -> Iterator[list[Item]]:
        """The keys (and generation) of the partition's items under `prefix`, a page at a time (consistent), each
        Query made only while the deadline has not passed."""
        pages = query(
            self._dynamodb,
            TableName=self._table,
            KeyConditionExpression=_PREFIX,
            ProjectionExpression=_LISTED,
            ExpressionAttributeNames=names_in(_PREFIX, _LISTED),
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
            Limit=PAGE,
        )
        while not pages.finished:
            self._in_time()
            items = [dict(item) for item in pages.next_page() or []]
            if items:
                yield items

    def _delete_if_old(self, item: Item, generation: str) -> None:
        """Leave a tombstone for a checkpoint still of the old generation (a task's writes that arrive late are then
        refused, however late, instead of waiting for a put of the same id in a next life)."""
        self._in_time()
        answer = attempt(
            self._dynamodb.put_item,
            TableName=self._table,
            Item=tombstone(layout.key(*layout.identity(item)), int(time.time() * 1000)),
            ConditionExpression=_STILL_OLD,
            ExpressionAttributeNames=names_in(_STILL_OLD),
            ExpressionAttributeValues={":old": {"S": generation}},
        )
        if isinstance(answer, Refused):
            return  # a new life took this checkpoint over (or it is gone): it stays
        self.deleted += 1

    def _has_head(self, pk: str) -> bool:
        answer = self._dynamodb.get_item(
            TableName=self._table,
            Key=layout.key(pk, layout.THREAD_HEAD_SK),
            ProjectionExpression=_HEAD_ONLY,
            ExpressionAttributeNames=names_in(_HEAD_ONLY),
            ConsistentRead=True,
        )
        return GENERATION in (answer.get("Item") or {})

    def _batch_delete(self, keys: list[Item]) -> None:
        """Delete `keys` (`dynamo.delete_some`: 25 per BatchWriteItem, what DynamoDB leaves unprocessed sent again,
        `WRITE_ROUNDS` in all), no batch sent once the deadline has passed (`Unfinished`); what could not be deleted
        otherwise raises too: the record is retried."""
        left = delete_some(self._dynamodb, self._table, keys, WRITE_ROUNDS, self._deadline)
        self.deleted += len(keys) - len(left)
        if left:
            self._in_time()
            raise RuntimeError("DynamoDB left thread item deletes unprocessed; the record is retried")

    def _in_time(self) -> None:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise Unfinished("the reaper's time for this record is up; the record is retried")
