"""The API key repository: records addressed by the SHA-256 of their secret, listed per tenant."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton_checkpoints.domain.access import KeyRecord
from baton_checkpoints.domain.clock import format_ms, parse_time
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.limits import MAX_KEY_LIST_READS
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, from_item, names_in, to_attr, to_item
from baton_checkpoints.store.cursors import query_binding
from baton_checkpoints.store.dynamo import refusal
from baton_checkpoints.store.errors import may_have_landed, translated_errors
from baton_checkpoints.store.index_pages import index_page

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def readable(item: Item) -> KeyRecord | None:
    """The key record of an item, or None (logged) when the item cannot be read: one damaged record must never
    take down its tenant's key management, nor authenticate anyone."""
    try:
        return _record_from(from_item(item))
    except (KeyError, TypeError, ValueError) as exc:
        from baton_checkpoints.observability import logger

        logger().error(
            "skipped an unreadable key record",
            extra={"key_id": str(item.get("key_id", {}).get("S", "?")), "cause": f"{type(exc).__name__}: {exc}"},
        )
        return None


def _record_from(values: dict[str, Any]) -> KeyRecord:
    def optional_time(name: str) -> int | None:
        value = values.get(name)
        return parse_time(value) if value is not None else None

    return KeyRecord(
        key_id=values["key_id"],
        secret_hash=layout.secret_hash_of(values[schema.PK]),
        tenant_id=values["tenant_id"],
        agent_id=values["agent_id"],
        scopes=frozenset(values["scopes"]),
        created_ms=parse_time(values["created_at"]),
        not_before_ms=optional_time("not_before"),
        expires_ms=optional_time("key_expires_at"),
        description=values.get("description"),
        revoked_ms=optional_time("revoked_at"),
    )


class KeyStore:
    """API keys in the Baton table. Key records never carry a TTL: they expire by their own `expires_at`."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def put(self, record: KeyRecord, overwrite: bool = False) -> None:
        """Store a key record; without `overwrite` an existing record with the same hash is never replaced."""
        item = to_item(
            {
                schema.PK: layout.key_pk(record.secret_hash),
                schema.SK: layout.KEY_SK,
                schema.GSI1_PK: layout.tenant_keys_pk(record.tenant_id),
                schema.GSI1_SK: record.key_id,
                "key_id": record.key_id,
                "tenant_id": record.tenant_id,
                "agent_id": record.agent_id,
                "scopes": set(record.scopes),
                "created_at": format_ms(record.created_ms),
                "not_before": format_ms(record.not_before_ms) if record.not_before_ms is not None else None,
                "key_expires_at": format_ms(record.expires_ms) if record.expires_ms is not None else None,
                "description": record.description,
            }
        )
        extra: dict[str, Any] = (
            {}
            if overwrite
            else {
                "ConditionExpression": f"attribute_not_exists({schema.PK})",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        )
        with translated_errors():
            try:
                self._client.put_item(TableName=self._table, Item=item, **extra)
            except Exception as exc:
                refused = refusal(exc)
                if refused is not None:
                    if refused.item.get("key_id", {}).get("S") == record.key_id:
                        return  # the SDK's first attempt stored it and its answer was lost
                elif may_have_landed(exc) and self._stored(record.secret_hash, "key_id", record.key_id):
                    return
                raise

    def find(self, secret_hash: str) -> KeyRecord | None:
        """The key record for a secret's hash (one consistent GetItem), or None."""
        with translated_errors():
            response = self._client.get_item(
                TableName=self._table,
                Key=layout.key(layout.key_pk(secret_hash), layout.KEY_SK),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return readable(item) if item is not None else None

    def list(
        self, tenant_id: str, agent_id: str | None, now_ms: int, limit: int, cursor: str | None
    ) -> tuple[list[KeyRecord], str | None]:
        """One page of a tenant's live keys (optionally one agent's), oldest first (one Query).

        The cursor carries only the last key id shown: DynamoDB's LastEvaluatedKey would hold the table key of
        the last record read, another agent's secret hash included.
        """
        filters = [
            "attribute_not_exists(#revoked_at)",
            "(attribute_not_exists(#key_expires_at) OR #key_expires_at > :now)",
        ]
        values: dict[str, Any] = {":now": format_ms(now_ms)}
        if agent_id is not None:
            values[":agent"] = agent_id
            filters.append("#agent_id = :agent")
        return index_page(
            self._client,
            self._table,
            layout.tenant_keys_pk(tenant_id),
            filters,
            values,
            read=readable,
            id_of=lambda record: record.key_id,
            binding=query_binding("keys", tenant_id, agent_id),
            limit=limit,
            cursor=cursor,
            budget=MAX_KEY_LIST_READS,
        )

    def find_by_id(self, tenant_id: str, key_id: str) -> KeyRecord | None:
        """A tenant's key record by its id, revoked or not (one index Query)."""
        with translated_errors():
            response = self._client.query(
                TableName=self._table,
                IndexName=schema.GSI1,
                KeyConditionExpression=f"#{schema.GSI1_PK} = :pk AND #{schema.GSI1_SK} = :key_id",
                ExpressionAttributeNames=names_in(f"#{schema.GSI1_PK} #{schema.GSI1_SK}"),
                ExpressionAttributeValues={":pk": {"S": layout.tenant_keys_pk(tenant_id)}, ":key_id": {"S": key_id}},
                Limit=1,
            )
        items = response.get("Items", [])
        return readable(items[0]) if items else None

    def revoke(self, record: KeyRecord, now_ms: int) -> None:
        """Mark a key revoked, unless it already is (NotFound)."""
        condition = "attribute_exists(#pk) AND attribute_not_exists(#revoked_at) AND #key_id = :key_id"
        revoked_at = format_ms(now_ms)
        with translated_errors():
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=layout.key(layout.key_pk(record.secret_hash), layout.KEY_SK),
                    UpdateExpression="SET #revoked_at = :now",
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names_in(condition, "#revoked_at"),
                    ExpressionAttributeValues={":now": to_attr(revoked_at), ":key_id": to_attr(record.key_id)},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except Exception as exc:
                refused = refusal(exc)
                if refused is not None:
                    if refused.retried and refused.item.get("revoked_at", {}).get("S") == revoked_at:
                        return  # the SDK's first attempt revoked it and its answer was lost
                    raise NotFound() from None
                if may_have_landed(exc) and self._stored(record.secret_hash, "revoked_at", revoked_at):
                    return
                raise

    def _stored(self, secret_hash: str, attribute: str, value: str) -> bool:
        """True when the key record holds `value` in `attribute` (False when that cannot be read now): how a write
        whose every answer was lost finds out that it landed."""
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key=layout.key(layout.key_pk(secret_hash), layout.KEY_SK),
                ConsistentRead=True,
            ).get("Item")
        except Exception:
            return False
        return item is not None and item.get(attribute, {}).get("S") == value
