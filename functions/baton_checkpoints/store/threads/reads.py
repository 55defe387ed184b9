"""Reading a thread's checkpoints page by page: newest first, of the head's life, under a read budget, with `before`
as a key bound in each namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.errors import NotFound, Unavailable
from baton_checkpoints.domain.thread_puts import ThreadRef
from baton_checkpoints.domain.threads import (
    EMPTY_TYPE,
    LIST_READ_BYTES,
    Page,
    PendingWrite,
    StoredValue,
    ThreadCheckpoint,
    matches,
    overwrites,
    sorted_writes,
    version_key,
)
from baton_checkpoints.store import codec, dynamo, layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.batch import batch_get
from baton_checkpoints.store.cursors import decode_after, encode_after, invalid_cursor, query_binding
from baton_checkpoints.store.dynamo import Reads
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE, translated_errors
from baton_checkpoints.store.thread_names import (
    BYTES,
    CHANNEL,
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
    SIZES,
    TASK,
    TASK_PATH,
    TYPE,
    VERSION,
)
from baton_checkpoints.store.threads.items import (
    PAGE_ANSWER_BYTES,
    Head,
    Loaded,
    calls,
    held_in,
    held_value,
    held_write,
    live_head,
    tuple_estimate,
)

if TYPE_CHECKING:  # reading
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.store.objects import ObjectStore


from typing import TYPE_CHECKING

from baton_checkpoints.store.threads.heads import Heads, pk_of

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


LATEST_PROBE_ITEMS: Final = 4
"""Newest items a read of the latest checkpoint asks for at once (writes that came before their checkpoint's put, or
tombstones, may sort after it)."""


MAX_KEY_BYTES: Final = 1_024
"""DynamoDB's longest sort key (a cursor's position beyond it is not one this store made)."""


KEYS_ONLY: Final = f"#{schema.PK}, #{schema.SK}"


class Walk:
    """The checkpoint items of a thread's current life, newest first (of one namespace, or of all: one after
    another), under `reads`. `below` is an exclusive upper bound on the sort key (a cursor's position, or `before`
    in a namespace). `before` without a namespace is a key bound in each: the first item of a namespace at or after
    it moves the walk to just below it in that namespace (one Query), so no newer checkpoint is read twice.
    `stopped` is True when the reads ran out before the thread's end; `position` is then where to go on from."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        pk: str,
        head: Head,
        namespace: str | None,
        below: str | None,
        before: str | None,
        reads: Reads | None,
    ) -> None:
        self._client = client
        self._table = table
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
        pages = dynamo.query(self._client, self._reads, **self._request(prefix, below, page_size))
        for item in pages:
            sk = item[schema.SK]["S"]
            if sk == below:
                continue
            self.position = sk
            if self._head.shows(item):
                yield item
        self.stopped = self.stopped or pages.stopped

    def _before_in_each_namespace(self, before: str) -> Iterator[Item]:
        """Every namespace's checkpoints older than `before`, one namespace after another: a probe (one Query of at
        most two items) finds the next namespace below where the walk stands, and the walk goes on in that namespace
        from just below `before` (or from the probe's item when it is older). A namespace costs at most three items
        more than the checkpoints it shows: the probe's two, and the `before` checkpoint (a key bound is inclusive)."""
        below = self._below
        while not (self._reads is not None and self._reads.spent):
            probe = dynamo.query(self._client, self._reads, **self._request(layout.THREAD_CHECKPOINT, below, 2))
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
                if self._head.shows(found):
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
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names_in(condition),
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "ScanIndexForward": False,
        }
        if page_size is not None:
            request["Limit"] = page_size
        return request


class Reader:
    """Reads of the threads of one table."""

    def __init__(self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None, heads: Heads) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._heads = heads

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
                head = self._heads.read(ref, now_ms)
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
            (loaded,) = self.resolve(thread_id, pk, [self.load(item)])
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
        (loaded,) = self.resolve(thread_id, pk, [self.load(item)], also=[head_key], found=found)
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
            head = self._heads.read(ref, now_ms)
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
                loaded = self.load(item)
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
            if not chosen and stop is None and after is None and self._heads.deleted(pk, head):
                raise NotFound()  # deleted, and nothing put since
            page = self.resolve(ref.thread_id, pk, chosen)

        def cursor_after(checkpoint: ThreadCheckpoint) -> str | None:
            sk = layout.thread_checkpoint_sk(checkpoint.namespace, checkpoint.checkpoint_id)
            return encode_after(sk, binding)

        return Page(page, encode_after(stop, binding), cursor_after)

    def load(self, item: Item) -> Loaded:
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

    def resolve(
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
