"""DynamoDB plumbing every repository shares: Queries page by page under a read budget, batch writes that finish
what DynamoDB leaves unprocessed, and one reading of a conditional write's outcome.

- `Reads` bounds what one request reads: item bytes (DynamoDB's sizes, `sizes.item_bytes`). A
  Query stops when the budget is spent and says where (`QueryPages.position`), so a page may come back short, or
  empty with a cursor, instead of reading a partition to its end.
- `QueryPages` is the one paging loop (`ExclusiveStartKey` from each `LastEvaluatedKey`): item by item, or page by
  page (`next_page`, `pages`) for a caller that does something with each page (deletes it) or decides between pages
  (a deadline) whether to read on.
- `write_some` sends Put and Delete requests 25 per BatchWriteItem, sending again (with backoff) what DynamoDB leaves
  unprocessed, and hands back what it could not write (`Unwritten`), for a caller that leaves the rest to a later
  pass; `write_all` (`put_all`, `delete_all`) answers 503 instead.
- `attempt` makes a conditional write and answers what a refusal found (`Refused`: the item's old image, asked for
  with `ReturnValuesOnConditionCheckFailure=ALL_OLD`), letting every other failure through to `translated_errors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from msgspec import Struct, field

from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.store.attributes import Item
from baton_checkpoints.store.errors import TRANSIENT, UNAVAILABLE_MESSAGE, Failure, classify, unavailable, was_retried
from baton_checkpoints.store.sizes import item_bytes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")

BATCH_WRITE_ITEMS: Final = 25
"""DynamoDB's most requests in one BatchWriteItem."""
WRITE_ROUNDS: Final = 4
"""BatchWriteItem rounds for what DynamoDB leaves unprocessed (then 503)."""
WRITE_BACKOFF_SECONDS: Final = 0.05


class Reads(Struct):
    """What one request may still read: item bytes (DynamoDB's sizes). `None` is no bound."""

    max_bytes: int | None = None
    bytes_read: int = 0
    requests: int = 0

    @property
    def spent(self) -> bool:
        """No further request may be made."""
        return self.max_bytes is not None and self.bytes_read >= self.max_bytes

    def charge(self, items: Sequence[Item]) -> None:
        """Count one request and the items it read."""
        self.requests += 1
        self.bytes_read += sum(item_bytes(item) for item in items)


class QueryPages(Struct):
    """The items of a Query, page by page (`ExclusiveStartKey` from each `LastEvaluatedKey`), consistent as the
    request says: iterate it for its items, or take a page at a time (`next_page`, `pages`).

    With `reads`, no request is made once the budget is spent: `stopped` is then True. `position` is where the
    reading stands: the key of the last item read (a caller's cursor resumes after it), or, between pages, the
    `LastEvaluatedKey` the next page starts after. `finished` is True once a page came back without one: the Query
    was read to its end. `counted` adds up each answer's `Count` (what its filter kept; with `Select=COUNT`, the
    items it counted without reading them back)."""

    client: DynamoDBClient
    request: dict[str, Any]
    reads: Reads | None = None
    stopped: bool = False
    position: Item | None = None
    finished: bool = False
    counted: int = 0
    _start: Item | None = None

    def next_page(self, limit: int | None = None) -> list[Item] | None:
        """The next page's items (one Query; at most `limit` read when given: DynamoDB's `Limit`), or None when
        there is no next page: the Query was read to its end, or `reads` is spent (`stopped`). A page may be empty
        with more after it (a filter dropped what it read): `finished` tells."""
        if self.finished:
            return None
        if self.reads is not None and self.reads.spent:
            self.stopped = True
            return None
        request = dict(self.request)
        if self._start is not None:
            request["ExclusiveStartKey"] = self._start
        if limit is not None:
            request["Limit"] = limit
        answer = self.client.query(**request)
        found: list[Item] = answer.get("Items", [])
        if self.reads is not None:
            self.reads.charge(found)
        self.counted += int(answer.get("Count", 0))
        self._start = answer.get("LastEvaluatedKey") or None
        self.finished = self._start is None
        self.position = self._start or (found[-1] if found else self.position)
        return found

    def pages(self) -> Iterator[list[Item]]:
        """Every page (`next_page`), each read when the one before it is done with."""
        while (page := self.next_page()) is not None:
            yield page

    def __iter__(self) -> Iterator[Item]:
        for page in self.pages():
            after = self.position
            for item in page:
                self.position = item
                yield item
            self.position = after


def query(client: DynamoDBClient, reads: Reads | None = None, **request: Any) -> QueryPages:
    """Every item of a Query (see `QueryPages`)."""
    return QueryPages(client, request, reads)


def count(
    client: DynamoDBClient, enough: int | None = None, max_requests: int | None = None, **request: Any
) -> tuple[int, bool]:
    """How many items a Query's filter keeps (`Select=COUNT`: no item is read back), page by page, and whether it
    counted them all: it stops once it has counted `enough`, or after `max_requests` Queries."""
    pages = query(client, **{**request, "Select": "COUNT"})
    made = 0
    while (max_requests is None or made < max_requests) and pages.next_page() is not None:
        made += 1
        if enough is not None and pages.counted >= enough:
            break
    return pages.counted, pages.finished


class Unwritten(Struct, frozen=True):
    """What `write_some` did not write: the requests (none when it wrote them all; else what was left of the batch
    it stopped at, then every request after it), and the transient failure of a resend that ended it, when that is
    what did (None when DynamoDB kept leaving them unprocessed, or the deadline came)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    failure: Exception | None = None


def write_some(
    client: DynamoDBClient,
    table: str,
    requests: Sequence[dict[str, Any]],
    rounds: int = WRITE_ROUNDS,
    deadline: float | None = None,
) -> Unwritten:
    """Put and Delete requests, `BATCH_WRITE_ITEMS` per BatchWriteItem in the order given, each batch sent up to
    `rounds` times in all while DynamoDB leaves some of it unprocessed (backing off between sends); what it could
    not write is handed back rather than raised, for a caller that leaves the rest to a later pass.

    It stops, handing back what is left of the batch and every request after it, when a batch is still partly
    unprocessed after its rounds, when a resend fails transiently (DynamoDB refused it, or its answer was lost:
    the requests it carried are handed back, `failure` says why), and before any batch once `deadline` (a
    `time.monotonic()` value) has passed. A failure of a batch's first send is raised as it came, as is any
    failure `classify` does not call transient. Unconditional: for items only this request names."""
    for start in range(0, len(requests), BATCH_WRITE_ITEMS):
        if deadline is not None and time.monotonic() >= deadline:
            return Unwritten(list(requests[start:]))
        pending: Any = list(requests[start : start + BATCH_WRITE_ITEMS])
        for round_ in range(rounds):
            if round_:
                time.sleep(WRITE_BACKOFF_SECONDS * 2 ** (round_ - 1))
            try:
                answer = client.batch_write_item(RequestItems={table: pending})
            except Exception as exc:
                if not round_ or classify(exc) not in TRANSIENT:
                    raise
                return Unwritten([*pending, *requests[start + BATCH_WRITE_ITEMS :]], exc)
            pending = (answer.get("UnprocessedItems") or {}).get(table, [])
            if not pending:
                break
        else:
            return Unwritten([*pending, *requests[start + BATCH_WRITE_ITEMS :]])
    return Unwritten()


def write_all(client: DynamoDBClient, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """Every Put and Delete request (`write_some`, `WRITE_ROUNDS` rounds), else 503: what a transient failure of a
    resend becomes (`unavailable`), or, when DynamoDB kept leaving some unprocessed, `Unavailable`."""
    left = write_some(client, table, requests)
    if left.failure is not None:
        raise unavailable(left.failure) from left.failure
    if left.requests:
        raise Unavailable(UNAVAILABLE_MESSAGE)


def write_until(client: DynamoDBClient, table: str, requests: Sequence[dict[str, Any]], deadline: float) -> bool:
    """Every Put and Delete request (`write_some`) unless `deadline` (a `time.monotonic()` value) passes first: True
    when all were written, False when the deadline stopped it (the rest left to a later pass); 503 as `write_all`
    when DynamoDB would not take them."""
    left = write_some(client, table, requests, deadline=deadline)
    if left.failure is not None:
        raise unavailable(left.failure) from left.failure
    if left.requests and time.monotonic() < deadline:
        raise Unavailable(UNAVAILABLE_MESSAGE)
    return not left.requests


def put_all(client: DynamoDBClient, table: str, items: Sequence[Item]) -> None:
    """Put every item (`write_all`)."""
    write_all(client, table, [{"PutRequest": {"Item": item}} for item in items])


def delete_all(client: DynamoDBClient, table: str, keys: Sequence[Item]) -> None:
    """Delete the item at every key (`write_all`)."""
    write_all(client, table, _deletes(keys))


def delete_some(
    client: DynamoDBClient,
    table: str,
    keys: Sequence[Item],
    rounds: int = WRITE_ROUNDS,
    deadline: float | None = None,
) -> list[Item]:
    """Delete the item at every key (`write_some`): the keys it did not delete."""
    left = write_some(client, table, _deletes(keys), rounds, deadline)
    return [request["DeleteRequest"]["Key"] for request in left.requests]


def _deletes(keys: Sequence[Item]) -> list[dict[str, Any]]:
    return [{"DeleteRequest": {"Key": key}} for key in keys]


class Refused(Struct, frozen=True):
    """A conditional write DynamoDB refused: the item it found (`{}` when there was none, or when the write did not
    ask for the old image), and whether the SDK had sent it more than once (an earlier attempt may have landed)."""

    item: Item
    retried: bool

    @property
    def found(self) -> bool:
        return bool(self.item)


def refusal(exc: BaseException) -> Refused | None:
    """What a refused conditional write found, or None when `exc` is another failure."""
    if classify(exc) is not Failure.CONDITION_FAILED:
        return None
    found: Item = getattr(exc, "response", {}).get("Item") or {}
    return Refused(found, was_retried(exc))


def attempt(call: Callable[..., T], **request: Any) -> T | Refused:
    """Make one conditional write: its answer, or `Refused` when a condition was false. Any other failure is
    raised as it came (`translated_errors` turns the transient ones into 503)."""
    try:
        return call(**request)
    except Exception as exc:
        refused = refusal(exc)
        if refused is None:
            raise
        return refused
