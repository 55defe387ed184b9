"""One page of a tenant's items listed in gsi1 by id (keys, OAuth grants), with a filter that may drop most of what
it reads (revoked, expired, another agent's), under a read budget.

Query goes on until the page has one item more than it shows, the tenant's items end, or the request has read its
budget of items (each Query's `Limit` bounds what it reads, kept or not; reads double from `limit + 1`, so skipping N
dropped items takes log2 rounds). A page that reaches the budget comes back short, or empty, with a cursor past what
it read that names nothing the caller was not shown (`cursors.past`). The cursor carries only the last id shown:
DynamoDB's LastEvaluatedKey would hold the table key of the last item read (a key's is its secret's hash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from baton_checkpoints.store import schema
from baton_checkpoints.store.attributes import Item, names_in, to_attr
from baton_checkpoints.store.cursors import MAX_PAGE_READS, decode_after, encode_after, past
from baton_checkpoints.store.dynamo import query
from baton_checkpoints.store.errors import translated_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")


def index_page(
    client: DynamoDBClient,
    table: str,
    index_pk: str,
    filters: list[str],
    values: dict[str, Any],
    read: Callable[[Item], T | None],
    id_of: Callable[[T], str],
    binding: str,
    limit: int,
    cursor: str | None,
    budget: int,
) -> tuple[list[T], str | None]:
    """One page of the items under `index_pk` that `filters` keep (their `values` by placeholder), read into records
    by `read` (None: unreadable, skipped), and the next page's cursor (bound to `binding`)."""
    after = decode_after(cursor, binding)
    values = {":pk": index_pk, **values}
    key_condition = f"#{schema.GSI1_PK} = :pk"
    if after is not None:
        values[":after"] = after
        key_condition += f" AND #{schema.GSI1_SK} > :after"
    request: dict[str, Any] = {
        "TableName": table,
        "IndexName": schema.GSI1,
        "KeyConditionExpression": key_condition,
        "ExpressionAttributeNames": names_in(key_condition, *filters),
        "ExpressionAttributeValues": {k: to_attr(v) for k, v in values.items()},
    }
    if filters:
        request["FilterExpression"] = " AND ".join(filters)
    pages = query(client, **request)
    shown: list[T] = []
    reads = limit + 1
    read_first = ""  # where the first Query stopped: every item from there to where the last stopped was read
    with translated_errors():
        while len(shown) <= limit and budget > 0 and (found := pages.next_page(min(reads, budget))) is not None:
            budget -= min(reads, budget)
            shown.extend(r for r in map(read, found) if r is not None)
            if not read_first and pages.position is not None:
                read_first = pages.position[schema.GSI1_SK]["S"]
            reads = min(reads * 2, MAX_PAGE_READS)
    page = shown[:limit]
    if len(shown) > limit:
        return page, encode_after(id_of(page[-1]), binding)
    if pages.finished or pages.position is None:
        return page, None
    read_last = pages.position[schema.GSI1_SK]["S"]
    shown_last = id_of(page[-1]) if page else after or ""
    if shown_last >= read_last:  # the last item read is the last shown
        return page, encode_after(shown_last, binding)
    below = max(shown_last, read_first)
    if below >= read_last:  # one Query read everything: only what was shown lies before it
        below = shown_last
    return page, encode_after(past(below, read_last), binding)
