"""What each tenant stores, counted from the table's stream: never on the request path.

A stream record carries an item's old and new images; what the item stores (its *footprint*) is read off an image,
and a record adds the difference. Summed over every record of a tenant, that is what the tenant stores now:

- bytes: each item's size by DynamoDB's rules (`store/sizes.py`), plus the object it stands for in S3 (a spilled
  state's or a large thread value's `n`, an uploaded blob's declared size);
- checkpoints: checkpoint items (an expired one counts until DynamoDB's TTL removes it);
- threads: thread heads, but those of threads deleted and not started again (`dl`), until DynamoDB removes them.

Counted are the items the reaper's stream filter lets through (checkpoints and their revisions, blob records,
thread items); keys, idempotency records, OAuth items and the tenant's own item are not the tenant's data.

The counts go to the tenant's own item (`store/tenants.py`: `ub`, `uc`, `ut`), so that every take of the rate limit
carries them back to the container that enforces the quotas. One batch makes one TransactWriteItems for all its
tenants (one request per batch, whatever its size: at most 0.01 requests per API request for a full batch), so the
batch's counts land together or not at all. Counted are the records before the batch's first failure only: Lambda
sends that record and those after it again, and they are counted then. The transaction's `ClientRequestToken` names
the records it counts, so the SDK's retry of a transaction whose answer was lost, or the same batch sent again
within DynamoDB's ten minutes, is applied once. What can count twice: a batch whose invocation is lost after its
count landed and before its answer reached Lambda, sent again split or after ten minutes (documented).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.usage import Usage, day_of
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item
from baton_checkpoints.store.errors import TRANSIENT, classify
from baton_checkpoints.store.sizes import value_bytes
from baton_checkpoints.store.usage import day_update

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import UpdateTypeDef

STORED_BYTES: Final = "ub"
CHECKPOINTS: Final = "uc"
THREADS: Final = "ut"
FOOTPRINT_ATTRIBUTES: Final = (STORED_BYTES, CHECKPOINTS, THREADS)
"""The tenant item's counters, as `Footprint`'s fields (`store/tenants.py` reads them into the bucket's usage)."""
OBJECT: Final = "so"
SIZE: Final = "n"
DELETED: Final = "dl"
"""The names `store/items.py` and `store/thread_names.py` give an item's object, its size, and a thread deleted and
not started again (not imported: `items` loads the domain's models, which the reaper's cold start does without; a
unit test holds them equal)."""
COUNT_ATTEMPTS: Final = 4
"""Tries of a batch's count (a transient failure: a conflict, a throttle, an answer lost) before the batch fails."""
COUNT_BACKOFF_SECONDS: Final = 0.05
MAX_TRANSACTION_ITEMS: Final = 100
"""DynamoDB's limit of items per transaction: a tenant's totals and its days (a batch seldom spans midnight) go in
one, so a batch of `BATCH_SIZE` records takes one transaction unless it names more than about 50 tenants."""


Footprint = Usage
"""What one item (or a difference of two) stores: the quantities the tenant's counters hold."""


NONE: Final = Footprint()
KEYS_ONLY: Final = frozenset({schema.PK, schema.SK})
COUNTED_PREFIXES: Final = (layout.CHECKPOINT_PK_PREFIX, layout.BLOB_PK_PREFIX, layout.THREAD_PK_PREFIX)


def tenant_of(pk: str) -> str | None:
    """The tenant of a counted item's partition key (None: not an item whose bytes are a tenant's data)."""
    for prefix in COUNTED_PREFIXES:
        if pk.startswith(prefix):
            tenant_id, sep, _ = pk.removeprefix(prefix).partition("#")
            return tenant_id if sep and tenant_id else None
    return None


def footprint(pk: str, sk: str, image: Item | None) -> Footprint:
    """What the item `image` (typed, as the stream carries it; None: no item) stores. An image of the keys alone is
    no item: every item Baton writes holds more, and moto (`baton serve`, the tests) announces an item an UpdateItem
    creates twice, as an INSERT of its keys alone and then as an INSERT of the whole item."""
    if not image or image.keys() <= KEYS_ONLY:
        return NONE
    size = _bytes(image)
    if OBJECT in image or pk.startswith(layout.BLOB_PK_PREFIX):
        size += _number(image.get(SIZE))
    if pk.startswith(layout.CHECKPOINT_PK_PREFIX) and sk.startswith(layout.CHECKPOINT):
        return Footprint(size, checkpoints=1)
    if pk.startswith(layout.THREAD_PK_PREFIX) and sk == layout.THREAD_HEAD_SK:
        return Footprint(size, threads=0 if DELETED in image else 1)
    return Footprint(size)


def _bytes(image: Item) -> int:
    """The item's size; an attribute that is not a DynamoDB value (never one the store wrote) counts nothing, so
    no record can stop its batch from being counted."""
    total = 0
    for name, value in image.items():
        try:
            total += len(name.encode("utf-8")) + value_bytes(_as_stored(value))
        except (ValueError, TypeError, AttributeError, ArithmeticError, binascii.Error):
            continue
    return total


def _as_stored(value: Any) -> Any:
    """A value of Lambda's event form as boto3 reads it from the table: binaries are base64 text in an event (their
    size is their bytes'), and DynamoDB Local's stream writes an empty map as `{}`."""
    if value == {}:
        return {"M": {}}
    ((kind, raw),) = value.items()
    if kind == "B" and isinstance(raw, str):
        return {"B": base64.b64decode(raw)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) if isinstance(v, str) else v for v in raw]}
    if kind == "M":
        return {"M": {k: _as_stored(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_as_stored(v) for v in raw]}
    return value


def _number(value: Any) -> int:
    """A typed number attribute's value (0 when it is not one)."""
    try:
        return max(0, int(value["N"]))
    except (KeyError, TypeError, ValueError):
        return 0


def change_of(record: Mapping[str, Any]) -> tuple[str, Footprint] | None:
    """The tenant a stream record (Lambda's event form) counts for, and what it adds; None when it counts nothing."""
    change = record.get("dynamodb") or {}
    keys = change.get("Keys") or {}
    pk, sk = keys.get(schema.PK, {}).get("S"), keys.get(schema.SK, {}).get("S")
    if not isinstance(pk, str) or not isinstance(sk, str):
        return None
    tenant_id = tenant_of(pk)
    if tenant_id is None:
        return None
    added = footprint(pk, sk, change.get("NewImage")) - footprint(pk, sk, change.get("OldImage"))
    return (tenant_id, added) if added else None


def day_of_record(record: Mapping[str, Any]) -> str:
    """The UTC day a stream record's change happened (`ApproximateCreationDateTime`; today when it has none)."""
    seconds = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    return day_of(int(seconds * 1000) if isinstance(seconds, int | float) else now_ms())


def tally_days(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Footprint]:
    """What a run of records adds, by tenant and day (those whose records cancel out are left out)."""
    totals: dict[tuple[str, str], Footprint] = {}
    for record in records:
        try:
            found = change_of(record)
            if found is None:
                continue
            key = (found[0], day_of_record(record))
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError):
            continue  # not a record of the shape Lambda sends: it counts nothing, and stops nothing
        totals[key] = totals.get(key, NONE) + found[1]
    return {key: added for key, added in totals.items() if added}


def tally(records: Iterable[Mapping[str, Any]]) -> dict[str, Footprint]:
    """What a run of records adds, by tenant (tenants whose records cancel out are left out)."""
    totals: dict[str, Footprint] = {}
    for (tenant_id, _), added in tally_days(records).items():
        totals[tenant_id] = totals.get(tenant_id, NONE) + added
    return {tenant_id: added for tenant_id, added in totals.items() if added}


def request_token(records: Iterable[Mapping[str, Any]], part: int = 0) -> str:
    """The `ClientRequestToken` of a batch's `part`-th transaction: the same records, the same token (36
    characters at most)."""
    digest = hashlib.sha256(f"{part}\n".encode())
    for record in records:
        change = record.get("dynamodb")
        digest.update(str(record.get("eventID", "")).encode())
        digest.update(str(change.get("SequenceNumber", "") if isinstance(change, Mapping) else "").encode())
        digest.update(b"\n")
    return digest.hexdigest()[:36]


def _total_update(table: str, tenant_id: str, added: Footprint) -> UpdateTypeDef:
    given = {STORED_BYTES: added.stored_bytes, CHECKPOINTS: added.checkpoints, THREADS: added.threads}
    counted = {name: value for name, value in given.items() if value}
    expression = "ADD " + ", ".join(f"#{name} :{name}" for name in counted)
    return {
        "TableName": table,
        "Key": layout.tenant_key(tenant_id),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": {f"#{name}": name for name in counted},
        "ExpressionAttributeValues": {f":{name}": {"N": str(value)} for name, value in counted.items()},
    }


def transactions(table: str, records: Sequence[Mapping[str, Any]]) -> list[list[UpdateTypeDef]]:
    """The updates that count `records`, packed into transactions of at most `MAX_TRANSACTION_ITEMS` (a tenant's
    total and its days in one): empty when they count nothing."""
    days = tally_days(records)
    totals = tally(records)
    parts: list[list[UpdateTypeDef]] = [[]]
    # A tenant whose changes cancel out over the batch has no total to add, and may still have days to: a
    # checkpoint made before midnight and deleted after it.
    for tenant_id in sorted({tenant for tenant, _ in days}):
        updates = [_total_update(table, tenant_id, totals[tenant_id])] if tenant_id in totals else []
        updates += [
            day_update(table, tenant_id, day, stored=added)
            for (tenant, day), added in sorted(days.items())
            if tenant == tenant_id
        ]
        if len(parts[-1]) + len(updates) > MAX_TRANSACTION_ITEMS:
            parts.append([])
        parts[-1] += updates
    return [part for part in parts if part]


class Meter:
    """Adds what stream records count to their tenants' items."""

    def __init__(self, client: Callable[[], DynamoDBClient], table_name: str) -> None:
        self._client = client
        self._table = table_name

    def count(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Footprint]:
        """Add what `records` count to their tenants' totals and to the days they happened on (one
        TransactWriteItems per `MAX_TRANSACTION_ITEMS` items, a tenant's items in one; none when they count
        nothing); what was added, by tenant. Raises on any failure: nothing of that transaction was added."""
        totals = tally(records)
        parts = transactions(self._table, records)
        for part, updates in enumerate(parts):
            request: dict[str, Any] = {
                "TransactItems": [{"Update": update} for update in updates],
                "ClientRequestToken": request_token(records, part),
            }
            for attempt in range(COUNT_ATTEMPTS):
                try:
                    self._client().transact_write_items(**request)
                    break
                except Exception as exc:
                    # A conflict with a take, a throttle, an answer lost: the same request again, after a jittered
                    # pause (its token makes a transaction that landed count once), before failing the batch.
                    if attempt + 1 == COUNT_ATTEMPTS or classify(exc) not in TRANSIENT:
                        raise
                    time.sleep(random.uniform(0, COUNT_BACKOFF_SECONDS * 2**attempt))
        return totals
