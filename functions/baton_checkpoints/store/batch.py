"""Consistent batch reads: every item of a list of keys, in as few BatchGetItem requests as DynamoDB allows."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.store import layout
from baton_checkpoints.store.attributes import Item
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_BATCH_KEYS: Final = 100
"""DynamoDB's limit on the keys of one BatchGetItem."""
MAX_BATCH_ROUNDS: Final = 3
"""Keys a BatchGetItem leaves unprocessed (throttling) are asked again this many times in all, backing off."""
BATCH_BACKOFF_SECONDS: Final = 0.05


def batch_get(dynamodb: DynamoDBClient, table: str, keys: list[Item]) -> dict[tuple[str, str], Item]:
    """The items at `keys`, consistently, by (pk, sk): one BatchGetItem per 100 keys (DynamoDB's limit: a save
    naming many blobs with an idempotency record takes two)."""
    found: dict[tuple[str, str], Item] = {}
    for start in range(0, len(keys), MAX_BATCH_KEYS):
        found.update(_batch_get_some(dynamodb, table, keys[start : start + MAX_BATCH_KEYS]))
    return found


def _batch_get_some(dynamodb: DynamoDBClient, table: str, keys: list[Item]) -> dict[tuple[str, str], Item]:
    """One consistent BatchGetItem; keys DynamoDB leaves unprocessed are asked again, a few times with a short
    backoff, then the caller gets a 503."""
    found: dict[tuple[str, str], Item] = {}
    pending: list[Item] = keys
    for attempt in range(MAX_BATCH_ROUNDS):
        if attempt:
            time.sleep(BATCH_BACKOFF_SECONDS * 2 ** (attempt - 1))
        response = dynamodb.batch_get_item(RequestItems={table: {"Keys": pending, "ConsistentRead": True}})
        for item in response.get("Responses", {}).get(table, []):
            found[layout.identity(item)] = item
        unprocessed: Any = response.get("UnprocessedKeys") or {}
        pending = unprocessed.get(table, {}).get("Keys", [])
        if not pending:
            return found
    raise Unavailable(UNAVAILABLE_MESSAGE)
