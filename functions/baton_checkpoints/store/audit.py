"""A tenant's audit trail (`domain/audit.py`) in its partition `E#<tenant>`: the head (`H`: the last event's number,
hash and time) and the events (`E#<at>#<seq>`, each its document as written, its action, and a TTL of
`RETENTION_DAYS`).

**Appending** is one TransactWriteItems: the head moves to the new event on the condition that it still names the
event the new one follows, and the event is put where nothing is. An append that meets another (the head moved
meanwhile) reads the head again and chains after it; so the chain never forks and never skips. The transaction's
`ClientRequestToken` is the event's hash, so the SDK's retry of one whose answer was lost is applied once (DynamoDB
honours it for ten minutes); an append that finds its own event at the head (moto ignores the token) is done.

**Reading** is one Query of the partition's events, newest first, between two times, an action filtered by DynamoDB
(at most `MAX_PAGE_READS` events read per page); and a GetItem of the head, so that a reader can check that the
newest event is the chain's last.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain.audit import RETENTION_DAYS, Happened, Head, chained
from baton_checkpoints.domain.clock import parse_time
from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.observability import logger
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.cursors import decode_after, encode_after, query_binding
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE, Failure, classify, translated_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

UNRECORDED: Final = "audit_event_unrecorded"
"""The `defect` field of the ERROR line of an event that could not be appended: a stable value to alarm on."""
DOCUMENT: Final = "doc"
ACTION: Final = "action"
SEQ: Final = "seq"
HASH: Final = "hash"
AT: Final = "at"
MAX_APPEND_ATTEMPTS: Final = 6
"""Appends one event may try: each attempt lost only to another append of the same tenant that landed."""
APPEND_BACKOFF_SECONDS: Final = 0.02
MAX_PAGE_READS: Final = 1000
"""Most events one page reads while an action filter drops others."""
RETENTION_SECONDS: Final = RETENTION_DAYS * 86_400
LAST_MS: Final = 10**15 - 1
LAST_SEQ: Final = 10**12 - 1
"""The largest time and number a sort key holds (15 and 12 digits: past year 30000, and a trillion events)."""


class AuditTrail:
    """Tenants' audit events: appended after the actions they record, read a page at a time."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def head(self, tenant_id: str) -> Head:
        """The tenant's head (one consistent GetItem); `Head()` before its first event."""
        with translated_errors():
            item = self._client.get_item(
                TableName=self._table,
                Key=layout.key(layout.audit_pk(tenant_id), layout.AUDIT_HEAD_SK),
                ConsistentRead=True,
            ).get("Item")
        if not item:
            return Head()
        return Head(int(item[SEQ]["N"]), item[HASH]["S"], int(item[AT]["N"]))

    def append(self, tenant_id: str, happened: Happened, now_ms: int) -> dict[str, Any]:
        """Chain `happened` after the tenant's last event (a GetItem and a TransactWriteItems; again after another
        append landed first, or after an answer was lost); the event's document."""
        tried: dict[str, Any] | None = None
        for _ in range(MAX_APPEND_ATTEMPTS):
            head = self.head(tenant_id)
            if tried is not None and head.hash == tried["hash"]:
                return tried  # it landed: its answer was lost (or the SDK's retry of it refused)
            document = chained(happened, head, now_ms)
            try:
                self._client.transact_write_items(
                    TransactItems=self._items(tenant_id, head, document),
                    ClientRequestToken=document["hash"][:36],
                )
                return document
            except Exception as exc:
                if classify(exc) is Failure.DEFECT:
                    raise
                # Another append landed first, this one may have landed, or DynamoDB refused it for a moment (a
                # throttle cancelling the transaction): the head tells which, and the next try follows it.
                tried = document
                time.sleep(random.uniform(0, APPEND_BACKOFF_SECONDS))
        if tried is not None and self.head(tenant_id).hash == tried["hash"]:
            return tried
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def record(self, tenant_id: str, happened: Happened, now_ms: int) -> dict[str, Any] | None:
        """Append `happened` after the action it records took place; None when that failed for good (after its
        retries): then an ERROR line carries the whole event (`defect` `audit_event_unrecorded`), and the action's
        own answer stands (it happened)."""
        try:
            return self.append(tenant_id, happened, now_ms)
        except Exception:
            logger().error(
                "audit event not recorded",
                extra={
                    "defect": UNRECORDED,
                    "tenant_id": tenant_id,
                    "audit_event": {**asdict(happened), "at_ms": now_ms},
                },
                exc_info=True,
            )
            return None

    def _items(self, tenant_id: str, head: Head, document: dict[str, Any]) -> list[TransactWriteItemTypeDef]:
        pk = layout.audit_pk(tenant_id)
        at_ms = parse_time(document["at"])
        seq = document["seq"]
        moved = f"attribute_not_exists(#{SEQ})" if head.seq == 0 else f"#{SEQ} = :previous"
        values: dict[str, Any] = {
            ":seq": {"N": str(seq)},
            ":hash": {"S": document["hash"]},
            ":at": {"N": str(at_ms)},
        }
        if head.seq:
            values[":previous"] = {"N": str(head.seq)}
        return [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": layout.key(pk, layout.AUDIT_HEAD_SK),
                    "UpdateExpression": f"SET #{SEQ} = :seq, #{HASH} = :hash, #{AT} = :at",
                    "ConditionExpression": moved,
                    "ExpressionAttributeNames": {f"#{SEQ}": SEQ, f"#{HASH}": HASH, f"#{AT}": AT},
                    "ExpressionAttributeValues": values,
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        schema.PK: {"S": pk},
                        schema.SK: {"S": layout.audit_event_sk(at_ms, seq)},
                        DOCUMENT: {
                            "S": json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                        },
                        ACTION: {"S": document["action"]},
                        schema.TTL_ATTRIBUTE: {"N": str(at_ms // 1000 + RETENTION_SECONDS)},
                    },
                    "ConditionExpression": f"attribute_not_exists({schema.PK})",
                }
            },
        ]

    def page(
        self,
        tenant_id: str,
        action: str | None,
        from_ms: int | None,
        to_ms: int | None,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The tenant's events, newest first, at or after `from_ms` and at or before `to_ms`, of `action` if named:
        at most `limit`, and the cursor of the next page (None: no more). One Query."""
        binding = query_binding("audit", tenant_id, action, str(from_ms), str(to_ms))
        after = decode_after(cursor, binding)
        low = layout.audit_event_sk(min(max(0, from_ms or 0), LAST_MS), 0)
        high = after or layout.audit_event_sk(min(LAST_MS, to_ms if to_ms is not None else LAST_MS), LAST_SEQ)
        if high < low:
            return [], None  # an empty range (to before from, or before 1970): DynamoDB refuses BETWEEN on it
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": schema.PK, "#sk": schema.SK},
            "ExpressionAttributeValues": {
                ":pk": {"S": layout.audit_pk(tenant_id)},
                ":low": {"S": low},
                ":high": {"S": high},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if action is not None:
            request["FilterExpression"] = "#action = :action"
            request["ExpressionAttributeNames"]["#action"] = ACTION
            request["ExpressionAttributeValues"][":action"] = {"S": action}
        documents: list[dict[str, Any]] = []
        last_read: str | None = None
        reads = 0
        with translated_errors():
            while True:
                # Unfiltered, one more than the page shows (to know whether another follows); filtered, what is left
                # of the page's budget of reads.
                request["Limit"] = limit + 1 - len(documents) if action is None else MAX_PAGE_READS - reads
                answer = self._client.query(**request)
                reads += answer.get("ScannedCount", 0)
                for item in answer.get("Items", []):
                    if item[schema.SK]["S"] == after:
                        continue  # the cursor's own event (BETWEEN includes its bound)
                    documents.append(json.loads(item[DOCUMENT]["S"]))
                    last_read = item[schema.SK]["S"]
                    if len(documents) > limit:
                        break
                evaluated = answer.get("LastEvaluatedKey")
                if len(documents) > limit:
                    shown = documents[:limit]
                    return shown, encode_after(_sk_of(shown[-1]), binding)
                if evaluated is None:
                    return documents, None
                last_read = evaluated[schema.SK]["S"]
                if reads >= MAX_PAGE_READS:
                    # The filter dropped many: the next page goes on below the last event read.
                    return documents, encode_after(last_read, binding)
                request["ExclusiveStartKey"] = evaluated


def _sk_of(document: dict[str, Any]) -> str:
    return layout.audit_event_sk(parse_time(document["at"]), document["seq"])
