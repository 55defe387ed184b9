"""Reading a thread's checkpoints page by page: newest first, of the head's life, under a read budget, with `before`
as a key bound in each namespace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from baton.store import dynamo, layout, schema
from baton.store.attributes import Item, names_in
from baton.store.dynamo import Reads
from baton.store.thread_names import (
    NAMESPACE,
)

if TYPE_CHECKING:
    pass
from baton.store.threads.items import (
    Head,
)

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
