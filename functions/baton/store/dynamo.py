"""DynamoDB plumbing every repository shares: Queries page by page under a read budget, batch writes that finish
what DynamoDB leaves unprocessed, and one reading of a conditional write's outcome.

- `Reads` bounds what one request reads: item bytes (DynamoDB's sizes, `sizes.item_bytes`). A
  Query stops when the budget is spent and says where (`QueryPages.position`), so a page may come back short, or
  empty with a cursor, instead of reading a partition to its end.
- `write_all` sends Put and Delete requests 25 per BatchWriteItem, sending again (with backoff) what DynamoDB leaves
  unprocessed, then 503.
- `attempt` makes a conditional write and answers what a refusal found (`Refused`: the item's old image, asked for
  with `ReturnValuesOnConditionCheckFailure=ALL_OLD`), letting every other failure through to `translated_errors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from baton.domain.errors import Unavailable
from baton.store.attributes import Item
from baton.store.errors import UNAVAILABLE_MESSAGE, Failure, classify, was_retried
from baton.store.sizes import item_bytes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")

BATCH_WRITE_ITEMS: Final = 25
"""DynamoDB's most requests in one BatchWriteItem."""
WRITE_ROUNDS: Final = 4
"""BatchWriteItem rounds for what DynamoDB leaves unprocessed (then 503)."""
WRITE_BACKOFF_SECONDS: Final = 0.05


@dataclass
class Reads:
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


@dataclass
class QueryPages:
    """The items of a Query, page by page (`ExclusiveStartKey` from each `LastEvaluatedKey`), consistent as the
    request says. With `reads`, no request is made once the budget is spent: `stopped` is then True and `position`
    the key of the last item read (a caller's cursor resumes after it)."""

    client: DynamoDBClient
    request: dict[str, Any]
    reads: Reads | None = None
    stopped: bool = False
    position: Item | None = None
    _done: bool = field(default=False, repr=False)

    def __iter__(self) -> Iterator[Item]:
        request = dict(self.request)
        while not self._done:
            if self.reads is not None and self.reads.spent:
                self.stopped = True
                return
            answer = self.client.query(**request)
            found: list[Item] = answer.get("Items", [])
            if self.reads is not None:
                self.reads.charge(found)
            last = answer.get("LastEvaluatedKey")
            for item in found:
                self.position = item
                yield item
            if not last:
                self._done = True
                return
            self.position = last
            request["ExclusiveStartKey"] = last


def query(client: DynamoDBClient, reads: Reads | None = None, **request: Any) -> QueryPages:
    """Every item of a Query (see `QueryPages`)."""
    return QueryPages(client, request, reads)


def count(
    client: DynamoDBClient, enough: int | None = None, max_requests: int | None = None, **request: Any
) -> tuple[int, bool]:
    """How many items a Query's filter keeps (`Select=COUNT`: no item is read back), page by page, and whether it
    counted them all: it stops once it has counted `enough`, or after `max_requests` Queries."""
    counted = 0
    request = {**request, "Select": "COUNT"}
    made = 0
    while max_requests is None or made < max_requests:
        answer = client.query(**request)
        made += 1
        counted += int(answer.get("Count", 0))
        last = answer.get("LastEvaluatedKey")
        if not last:
            return counted, True
        if enough is not None and counted >= enough:
            break
        request["ExclusiveStartKey"] = last
    return counted, False


def write_all(client: DynamoDBClient, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """Every Put and Delete request, `BATCH_WRITE_ITEMS` per BatchWriteItem, sending again what DynamoDB leaves
    unprocessed (`WRITE_ROUNDS` rounds, backing off), then 503. Unconditional: for items only this request names."""
    for start in range(0, len(requests), BATCH_WRITE_ITEMS):
        pending: Any = list(requests[start : start + BATCH_WRITE_ITEMS])
        for round_ in range(WRITE_ROUNDS):
            if round_:
                time.sleep(WRITE_BACKOFF_SECONDS * 2 ** (round_ - 1))
            answer = client.batch_write_item(RequestItems={table: pending})
            pending = (answer.get("UnprocessedItems") or {}).get(table, [])
            if not pending:
                break
        else:
            raise Unavailable(UNAVAILABLE_MESSAGE)


def put_all(client: DynamoDBClient, table: str, items: Sequence[Item]) -> None:
    """Put every item (`write_all`)."""
    write_all(client, table, [{"PutRequest": {"Item": item}} for item in items])


def delete_all(client: DynamoDBClient, table: str, keys: Sequence[Item]) -> None:
    """Delete the item at every key (`write_all`)."""
    write_all(client, table, [{"DeleteRequest": {"Key": key}} for key in keys])


@dataclass(frozen=True)
class Refused:
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
