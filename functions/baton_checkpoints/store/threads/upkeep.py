"""A thread's upkeep: delete (tombstones), prune, copy, and deletes for runs, each bounded whatever the thread's size:
a delete by a deadline (the reaper removes the rest), a copy by what it reads (a larger thread is refused before
anything is written), a `keep_latest` prune and a delete for runs by what they read (past it they answer not
complete, having done what they read, and go on when asked again)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.errors import NotFound, PayloadTooLarge, QuotaExceeded, Unavailable
from baton_checkpoints.domain.thread_puts import ThreadRef
from baton_checkpoints.domain.threads import MAX_COPY_READ_BYTES, MAX_PRUNE_READ_BYTES, MAX_RUNS_READ_BYTES
from baton_checkpoints.observability import logger
from baton_checkpoints.store import dynamo, layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.batch import batch_get
from baton_checkpoints.store.dynamo import Reads
from baton_checkpoints.store.errors import Failure, classify, translated_errors
from baton_checkpoints.store.thread_names import (
    DEAD,
    DELETED,
    EXPIRES_MS,
    FLOOR,
    GENERATION,
    HELD,
    NAMESPACE,
    OBJECT,
    SIZE,
    UPDATED,
    ended_by_delete,
    ending,
    write_references,
)
from baton_checkpoints.store.threads.heads import Heads, pk_of
from baton_checkpoints.store.threads.items import (
    Head,
    Loaded,
    head_of,
    relocated,
    rename_write_values,
)
from baton_checkpoints.store.threads.reads import (
    KEYS_ONLY,
    Reader,
    Walk,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.store.objects import ObjectStore


PRUNE_PAGE_ITEMS = 100
"""Checkpoints a prune's walk asks for a Query: its budget is checked between Queries."""
RUNS_PAGE_ITEMS = 100
"""Checkpoint keys a delete for runs asks gsi1 for a Query: each page is read, relocated and deleted before the next."""


Quota = Callable[[int, int], QuotaExceeded | None]
"""The tenant's quotas, asked of a write that stores this many bytes and creates this many threads."""


class Pruned(NamedTuple):
    """What a prune did."""

    threads: int
    """Live threads among those named."""
    checkpoints: int
    """Checkpoints deleted."""
    complete: bool
    """False when `keep_latest` stopped at what one prune reads."""


class Upkeep:
    """Deletes, prunes and copies of the threads of one table."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None, heads: Heads, reader: Reader
    ) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._heads = heads
        self._reader = reader

    def delete(self, ref: ThreadRef, now_ms: int, deadline: float) -> bool:
        """Hide the thread at once and remove its items until `deadline`; the reaper removes the rest. False when
        there was no live thread (its items are removed all the same)."""
        return self._delete(ref, now_ms, deadline, None)[0]

    def _delete(self, ref: ThreadRef, now_ms: int, deadline: float, life: Head | None) -> tuple[bool, int]:
        """`delete`, and how many checkpoints of `life` (the thread's head as read before; by default as the delete
        found it, which a retried delete finds with its own floor already set) it ended before `deadline`.

        A live thread keeps its head, which records when it was deleted (`FLOOR`): nothing put before then shows,
        and a put after it (from a container that still knows the head, so it touches nothing) starts the thread
        again without losing a checkpoint. An expired head is deleted (the reaper ends its generation)."""
        pk = pk_of(ref)
        key = layout.key(pk, layout.THREAD_HEAD_SK)
        self._heads.forget(pk)  # this container's next put touches the head: that starts the thread again
        with translated_errors():
            live = f"#{EXPIRES_MS} > :now"
            answer = dynamo.attempt(
                self._client.update_item,
                TableName=self._table,
                Key=key,
                UpdateExpression=f"SET #{FLOOR} = :now, #{DELETED} = :now",
                ConditionExpression=live,
                ExpressionAttributeNames=names_in(f"#{FLOOR}, #{DELETED}", live),
                ExpressionAttributeValues={":now": {"N": str(now_ms)}},
                ReturnValues="ALL_OLD",
            )
            if isinstance(answer, dynamo.Refused):
                if answer.found:
                    self._client.delete_item(TableName=self._table, Key=key)
                self._delete_partition(pk, deadline, now_ms, None)
                return False, 0
            # A retry of a delete that landed (botocore sent it again) finds the floor it set: still a success.
            was = head_of(answer["Attributes"])
            retried = int(answer.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0
            existed = retried or not self._heads.deleted(pk, was)
        try:
            ended = self._delete_partition(pk, deadline, now_ms, life or was)
        except Exception as exc:
            # The thread is deleted already (its head's floor hides it all, and the reaper removes what is left, as
            # after a deadline): DynamoDB failing the removal of its items now is no failure of the delete.
            if not isinstance(exc, Unavailable) and classify(exc) is Failure.DEFECT:
                raise
            logger().warning("thread items left to the reaper", extra={"thread_pk": pk}, exc_info=True)
            ended = 0
        return existed, ended

    def _delete_partition(self, pk: str, deadline: float, floor_ms: int, life: Head | None) -> int:
        """Remove a deleted thread's items put before `floor_ms`, page by page, until `deadline`; the checkpoints of
        `life` (the thread's head before the delete) it ended. Each checkpoint becomes a tombstone (`DEAD`, removed by
        TTL after `TOMBSTONE_SECONDS`), so a task's writes that arrive late are refused instead of waiting for a put
        of the same id in the thread's next life; values and write values are deleted; the head stays."""
        condition = f"#{schema.PK} = :pk"
        projection = f"#{schema.PK}, #{schema.SK}, #{DEAD}, #{UPDATED}, #{GENERATION}"
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
        of_life = 0
        for page in pages.pages():
            doomed = [item for item in page if ended_by_delete(item, floor_ms)]
            ended = [ending(layout.key(*layout.identity(item)), floor_ms) for item in doomed]
            if not dynamo.write_until(self._client, self._table, ended, deadline):
                break  # out of time: the reaper finishes (what this page ended is not known, so not counted)
            if life is not None:
                of_life += sum(
                    1
                    for item in doomed
                    if item[schema.SK]["S"].startswith(layout.THREAD_CHECKPOINT) and life.shows(item)
                )
            if time.monotonic() >= deadline:
                break  # out of time (pages of tombstones cost reads too): the reaper finishes
        return of_life

    def prune(
        self, refs: Iterable[ThreadRef], strategy: str, now_ms: int, deadline: float, deleted: list[str] | None = None
    ) -> Pruned:
        """Prune each live thread: `delete` removes it (its id added to `deleted` as soon as it is, so that a caller
        knows what was deleted even when a later thread's delete fails), `keep_latest` keeps the latest checkpoint of
        each namespace (its pending writes and the values it needs). `keep_latest` reads at most
        `MAX_PRUNE_READ_BYTES` of checkpoint items over all the threads: past it, what was read is pruned and the
        answer is not complete (a prune again goes on from there)."""
        threads = 0
        checkpoints = 0
        gone = deleted if deleted is not None else []
        reads = Reads(max_bytes=MAX_PRUNE_READ_BYTES)
        with translated_errors():
            for ref in dict.fromkeys(refs):
                if reads.spent:
                    return Pruned(threads, checkpoints, False)
                pk = pk_of(ref)
                head = self._heads.read(ref, now_ms)
                if head is None or self._heads.deleted(pk, head):
                    continue
                threads += 1
                if strategy == "delete":
                    # What the delete ended: counting the life first would read all of it, whatever the deadline.
                    existed, ended = self._delete(ref, now_ms, deadline, head)
                    checkpoints += ended
                    if existed:
                        gone.append(ref.thread_id)
                    continue
                pruned, whole = self._keep_latest(pk, head, reads)
                checkpoints += pruned
                if not whole:
                    return Pruned(threads, checkpoints, False)
        return Pruned(threads, checkpoints, True)

    def _keep_latest(self, pk: str, head: Head, reads: Reads) -> tuple[int, bool]:
        """Delete every checkpoint but the latest of each namespace, and the values and write values only they held;
        (the checkpoints deleted, whether it read them all). Only the kept checkpoints are decoded.

        The walk goes newest first, so whatever it read past a namespace's first checkpoint goes, however early
        `reads` runs out; the values and write values are cleaned up only after a whole walk (checkpoints it did not
        read may need them), and the checkpoints it did not read wait for the next prune."""
        latest: dict[str, Loaded] = {}
        doomed: list[Item] = []
        holders: dict[str, Item] = {}
        walk = Walk(self._client, self._table, pk, head, None, None, None, reads)
        walk.page_size = PRUNE_PAGE_ITEMS
        for item in walk:
            keyed, _ = layout.read_thread_checkpoint_sk(item[schema.SK]["S"])
            namespace = keyed if keyed is not None else item[NAMESPACE]["S"]
            if namespace in latest:
                doomed.append(layout.key(*layout.identity(item)))
                if item.get(HELD, {}).get("M"):
                    holders[item[schema.SK]["S"]] = item
            else:
                latest[namespace] = self._reader.load(item)
        # A kept checkpoint may keep a version that a pruned one holds in its item: its value item first.
        needed_held = {holder for one in latest.values() for holder in one.held.values()}
        relocating = [holders[sk] for sk in needed_held if sk in holders]
        dynamo.put_all(self._client, self._table, relocated(relocating, now_ms()))
        if not walk.stopped:
            needed = {sk for one in latest.values() for sk in one.missing.values()}
            needed |= {value for one in latest.values() for _, value in one.writes if isinstance(value, str)}
            needed |= self._early_references(pk)
            values = (layout.thread_values(head.generation), layout.THREAD_WRITE_VALUE)
            for item in self._partition_items(pk, values):
                if layout.identity(item)[1] not in needed:
                    doomed.append(layout.key(*layout.identity(item)))
        dynamo.delete_all(self._client, self._table, doomed)
        return sum(
            1 for key in doomed if layout.identity(key)[1].startswith(layout.THREAD_CHECKPOINT)
        ), not walk.stopped

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

    def copy(self, source: ThreadRef, target_id: str, now_ms: int, deadline: float, quota: Quota | None = None) -> int:
        """Copy every checkpoint (with its pending writes) and value of a thread into its owner's thread `target_id`
        (merged into it when it exists), with the source's time to live; the checkpoints copied. A thread whose items
        pass `MAX_COPY_READ_BYTES` is refused (413) once the reads pass it, before anything is written or copied;
        so is a copy that `quota` refuses (the bytes read, and a thread to create), before anything is written."""
        source_pk = pk_of(source)
        target_pk = pk_of(ThreadRef(source.tenant_id, source.agent_id, target_id))
        with translated_errors():
            head = self._heads.read(source, now_ms)
            if head is None or self._heads.deleted(source_pk, head):
                raise NotFound()
            if source.thread_id == target_id:
                # A Query that counts reads up to 1 MB of items: one more than the copy's budget would make.
                made = MAX_COPY_READ_BYTES // 1_000_000 + 1
                counted, whole = dynamo.count(self._client, None, made, **self._heads.life_request(source_pk, head))
                if not whole:
                    raise _too_large_to_copy(made * 1_000_000)
                return counted
            reads = Reads(max_bytes=MAX_COPY_READ_BYTES)
            found = list(self._all_of_generation(source_pk, head, reads))
            if reads.spent:
                raise _too_large_to_copy(reads.bytes_read)
            # What the copy stores: the items read, and a copy of each object they stand for
            objects = sum(int(item.get(SIZE, {}).get("N", "0")) for item in found if OBJECT in item)
            refused = None if quota is None else quota(reads.bytes_read + objects, 0)
            if refused is not None:
                raise refused
            creates = None if quota is None else quota(0, 1)
            target = self._heads.touch(target_pk, head.ttl_ms // 1000, now_ms, creates)
            copies: list[Item] = []
            checkpoints: list[Item] = []
            renamed: dict[str, str] = {}
            for item in found:
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
            dynamo.put_all(self._client, self._table, copies)
            dynamo.put_all(self._client, self._table, checkpoints)
        return len(checkpoints)

    def _all_of_generation(self, pk: str, head: Head, reads: Reads) -> Iterator[Item]:
        """Every item of the thread's current generation except its head, read under `reads` (spent: it stopped
        before the partition's end)."""
        condition = f"#{schema.PK} = :pk"
        items = dynamo.query(
            self._client,
            reads,
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

    def delete_for_runs(self, tenant_id: str, agent_id: str, run_ids: Iterable[str]) -> tuple[int, bool]:
        """Delete the agent's thread checkpoints whose metadata names one of `run_ids` (found through gsi1, Queries of
        keys per run, never a Scan), a page of at most 100 at a time; their large pending writes are removed by the
        reaper. (the checkpoints deleted, complete): it reads at most `MAX_RUNS_READ_BYTES` of checkpoint items, and
        past that answers not complete (a delete again goes on from there)."""
        deleted = 0
        reads = Reads(max_bytes=MAX_RUNS_READ_BYTES)
        condition = f"#{schema.GSI1_PK} = :gpk"
        with translated_errors():
            for run_id in dict.fromkeys(run_ids):
                pages = dynamo.query(
                    self._client,
                    reads,
                    TableName=self._table,
                    IndexName=schema.GSI1,
                    KeyConditionExpression=condition,
                    ProjectionExpression=KEYS_ONLY,
                    ExpressionAttributeNames=names_in(condition, KEYS_ONLY),
                    ExpressionAttributeValues={":gpk": {"S": layout.run_index_pk(tenant_id, agent_id, run_id)}},
                    Limit=RUNS_PAGE_ITEMS,
                )
                for page in pages.pages():
                    doomed = [layout.key(*layout.identity(item)) for item in page]
                    if not doomed:
                        continue
                    # Their children may keep versions they hold in their items: those go to value items first.
                    found = list(batch_get(self._client, self._table, doomed).values())
                    reads.charge(found)
                    dynamo.put_all(self._client, self._table, relocated(found, now_ms()))
                    dynamo.delete_all(self._client, self._table, doomed)
                    deleted += len(doomed)
                if pages.stopped:
                    return deleted, False
        return deleted, True


def _too_large_to_copy(read_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        field="thread_id",
        limit_bytes=MAX_COPY_READ_BYTES,
        actual_bytes=read_bytes,
        what="What a copy read of this thread before it stopped (its items, by DynamoDB's sizes)",
    )
