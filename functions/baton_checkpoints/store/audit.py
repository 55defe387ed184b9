"""A tenant's audit trail (`domain/audit.py`) in its partition `E#<tenant>`: the events (`E#<seq>`, each its document
as written, its action, its time and a TTL of `RETENTION_DAYS`) and the head (`H`: the last event's number, hash and
time, which outlives the events' TTL).

**Appending** never uses a transaction (moto copies every table named in one, stream and all, for each of its items):
the tenant's newest event is read (one Query of one item), and the next one is put at the next number on the
condition that nothing is there. Two appends racing for one number: one is refused, reads again and chains after
the other, so the chain never forks. A put whose answer was lost finds its own event at its number when tried again
(its hash), and is done: never appended twice. Then the head moves up to it (an UpdateItem that never moves it
back); a head that failed to move only lags, and the next append moves it.

**Reading** is one Query of the events, newest first, times and an action filtered by DynamoDB (at most
`MAX_PAGE_READS` events read per page), and a GetItem of the head, so that a reader can check that the newest event
is the chain's last.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from baton_checkpoints.domain.audit import RETENTION_DAYS, Happened, Head, chained
from baton_checkpoints.domain.clock import parse_time
from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.observability import logger
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.cursors import MAX_PAGE_READS, decode_after, encode_after, invalid_cursor, query_binding
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE, Failure, classify, translated_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

UNRECORDED: Final = "audit_event_unrecorded"
"""The `defect` field of the ERROR line of an event that could not be appended: a stable value to alarm on."""
DOCUMENT: Final = "doc"
ACTION: Final = "action"
SEQ: Final = "seq"
HASH: Final = "hash"
AT: Final = "at"
MAX_APPEND_ATTEMPTS: Final = 6
"""Appends one event may try: each attempt lost to another append of the same tenant, or refused for a moment."""
APPEND_BACKOFF_SECONDS: Final = 0.02
RETENTION_SECONDS: Final = RETENTION_DAYS * 86_400
_POSITION: Final = re.compile(r"E#[0-9]{12}\Z")


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

    def _latest(self, tenant_id: str) -> Head:
        """The tenant's newest event as a head (one Query of one item), or its head item when no event is kept."""
        with translated_errors():
            found = self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk AND begins_with(#sk, :events)",
                ExpressionAttributeNames={"#pk": schema.PK, "#sk": schema.SK},
                ExpressionAttributeValues={
                    ":pk": {"S": layout.audit_pk(tenant_id)},
                    ":events": {"S": layout.AUDIT_EVENT_PREFIX},
                },
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            ).get("Items", [])
        if not found:
            return self.head(tenant_id)
        document = json.loads(found[0][DOCUMENT]["S"])
        return Head(int(document["seq"]), str(document["hash"]), parse_time(document["at"]))

    def append(self, tenant_id: str, happened: Sequence[Happened], now_ms: int) -> list[dict[str, Any]]:
        """Chain each of `happened`, in order, after the tenant's newest event: a Query, a PutItem each, and an
        UpdateItem of the head (a Query more each time another append took the next number); their documents."""
        documents: list[dict[str, Any]] = []
        self._append_into(documents, tenant_id, happened, now_ms)
        return documents

    def _append_into(
        self, documents: list[dict[str, Any]], tenant_id: str, happened: Sequence[Happened], now_ms: int
    ) -> None:
        """`append`, each document added to `documents` once it is in the chain (what a failure leaves appended)."""
        latest: Head | None = None
        try:
            for event in happened:
                for _ in range(MAX_APPEND_ATTEMPTS):
                    if latest is None:
                        latest = self._latest(tenant_id)
                    document = chained(event, latest, now_ms)
                    try:
                        self._client.put_item(**self._put(tenant_id, document))
                    except Exception as exc:
                        if classify(exc) is Failure.DEFECT:
                            raise
                        if not self._holds(tenant_id, document):
                            # Another append took the number, or DynamoDB refused this one: read again and chain
                            # after what is there. (This one landed with every answer lost, or its retry refused:
                            # its event is found.)
                            latest = None
                            time.sleep(random.uniform(0, APPEND_BACKOFF_SECONDS))
                            continue
                    latest = Head(int(document["seq"]), str(document["hash"]), parse_time(document["at"]))
                    documents.append(document)
                    break
                else:
                    raise Unavailable(UNAVAILABLE_MESSAGE)
        finally:
            if documents:
                self._move_head(tenant_id, documents[-1])

    def record(self, tenant_id: str, happened: Sequence[Happened], now_ms: int) -> list[dict[str, Any]]:
        """Append `happened` after the actions they record took place; the documents appended. Those that could not
        be (after their retries) are each an ERROR line carrying the whole event (`defect` `audit_event_unrecorded`),
        and the action's own answer stands (it happened)."""
        documents: list[dict[str, Any]] = []
        try:
            self._append_into(documents, tenant_id, happened, now_ms)
        except Exception:
            for event in happened[len(documents) :]:
                logger().error(
                    "audit event not recorded",
                    extra={
                        "defect": UNRECORDED,
                        "tenant_id": tenant_id,
                        "audit_event": {**msgspec.to_builtins(event, enc_hook=str), "at_ms": now_ms},
                    },
                    exc_info=True,
                )
        return documents

    def _put(self, tenant_id: str, document: dict[str, Any]) -> dict[str, Any]:
        at_ms = parse_time(document["at"])
        return {
            "TableName": self._table,
            "Item": {
                schema.PK: {"S": layout.audit_pk(tenant_id)},
                schema.SK: {"S": layout.audit_event_sk(document["seq"])},
                DOCUMENT: {"S": json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)},
                ACTION: {"S": document["action"]},
                AT: {"N": str(at_ms)},
                schema.TTL_ATTRIBUTE: {"N": str(at_ms // 1000 + RETENTION_SECONDS)},
            },
            "ConditionExpression": f"attribute_not_exists({schema.PK})",
        }

    def _holds(self, tenant_id: str, document: dict[str, Any]) -> bool:
        """True when the event at `document`'s number is that very document (its put landed, its answer lost)."""
        with translated_errors():
            item = self._client.get_item(
                TableName=self._table,
                Key=layout.key(layout.audit_pk(tenant_id), layout.audit_event_sk(document["seq"])),
                ConsistentRead=True,
            ).get("Item")
        return item is not None and json.loads(item[DOCUMENT]["S"]).get("hash") == document["hash"]

    def _move_head(self, tenant_id: str, document: dict[str, Any]) -> None:
        """Move the head up to `document` (never back). A failure leaves it lagging, which the next append mends: a
        warning, not the action's failure."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=layout.key(layout.audit_pk(tenant_id), layout.AUDIT_HEAD_SK),
                UpdateExpression=f"SET #{SEQ} = :seq, #{HASH} = :hash, #{AT} = :at",
                ConditionExpression=f"attribute_not_exists(#{SEQ}) OR #{SEQ} < :seq",
                ExpressionAttributeNames={f"#{SEQ}": SEQ, f"#{HASH}": HASH, f"#{AT}": AT},
                ExpressionAttributeValues={
                    ":seq": {"N": str(document["seq"])},
                    ":hash": {"S": document["hash"]},
                    ":at": {"N": str(parse_time(document["at"]))},
                },
            )
        except Exception as exc:
            if classify(exc) is not Failure.CONDITION_FAILED:  # (refused: a later event's append moved it already)
                logger().warning("audit head not moved", extra={"tenant_id": tenant_id}, exc_info=True)

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
        at most `limit`, and the cursor of the next page (None: no more). One Query (more while a filter drops
        events, within `MAX_PAGE_READS` reads)."""
        binding = query_binding("audit", tenant_id, action, str(from_ms), str(to_ms))
        after = decode_after(cursor, binding)
        if after is not None and not _POSITION.match(after):
            raise invalid_cursor()
        if from_ms is not None and to_ms is not None and from_ms > to_ms:
            return [], None
        names = {"#pk": schema.PK, "#sk": schema.SK}
        values: dict[str, Any] = {":pk": {"S": layout.audit_pk(tenant_id)}, ":events": {"S": layout.AUDIT_EVENT_PREFIX}}
        key = "#pk = :pk AND begins_with(#sk, :events)"
        if after is not None:
            key = "#pk = :pk AND #sk BETWEEN :events AND :after"
            values[":after"] = {"S": after}
        filters = []
        if action is not None:
            filters.append("#action = :action")
            names["#action"] = ACTION
            values[":action"] = {"S": action}
        if from_ms is not None:
            filters.append("#at >= :from")
            names["#at"] = AT
            values[":from"] = {"N": str(from_ms)}
        if to_ms is not None:
            filters.append("#at <= :to")
            names["#at"] = AT
            values[":to"] = {"N": str(to_ms)}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": key,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if filters:
            request["FilterExpression"] = " AND ".join(filters)
        documents: list[dict[str, Any]] = []
        reads = 0
        want = limit + 1
        with translated_errors():
            while True:
                # One more than the page shows (to know whether another follows); while a filter drops events,
                # twice as many each round, within the page's budget of reads.
                request["Limit"] = max(1, min(want, MAX_PAGE_READS - reads))
                answer = self._client.query(**request)
                reads += int(answer.get("ScannedCount", len(answer.get("Items", []))))
                for item in answer.get("Items", []):
                    if item[schema.SK]["S"] == after:
                        continue  # the cursor's own event (BETWEEN includes its bound)
                    documents.append(json.loads(item[DOCUMENT]["S"]))
                if len(documents) > limit:
                    shown = documents[:limit]
                    return shown, encode_after(layout.audit_event_sk(shown[-1]["seq"]), binding)
                evaluated = answer.get("LastEvaluatedKey")
                if evaluated is None:
                    return documents, None
                if reads >= MAX_PAGE_READS:
                    # The filter dropped many: the next page goes on below the last event read.
                    return documents, encode_after(evaluated[schema.SK]["S"], binding)
                request["ExclusiveStartKey"] = evaluated
                want *= 2
