"""The table's shape, defined once: the store, the moto fixtures, `baton serve` and the CDK stack all read it.

One table holds every item type; each key starts with a type letter and then the tenant, so nothing of one tenant
can be addressed from another. Tenant and agent ids cannot contain `#`, and a free-form part (a subject, an
idempotency key) always comes last, so every key parses back one way only: no two inputs collide.

| item          | pk                                  | sk                   | gsi1pk                    | gsi1sk      |
|---------------|-------------------------------------|----------------------|---------------------------|-------------|
| checkpoint    | `C#<tenant>#<subject>`              | `C#<agent>#<kind>`   | `I#<tenant>#<checkpoint>` | `C`         |
| api key       | `K#<sha256 of secret>`              | `K`                  | `T#<tenant>#keys`         | `<key_id>`  |
| idempotency   | `D#<tenant>#<agent>#<key>`          | `D`                  |                           |             |

Checkpoints also carry `lsi1sk` (`updated_at`) and `lsi2sk` (`<agent>#<updated_at>`), the sort keys of the
two local indexes that list a subject's checkpoints newest first, for all agents or for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

PK: Final = "pk"
SK: Final = "sk"
TTL_ATTRIBUTE: Final = "ttl"

GSI1: Final = "gsi1"
GSI1_PK: Final = "gsi1pk"
GSI1_SK: Final = "gsi1sk"

LSI_UPDATED: Final = "lsi1"
LSI_UPDATED_SK: Final = "lsi1sk"
LSI_AGENT_UPDATED: Final = "lsi2"
LSI_AGENT_UPDATED_SK: Final = "lsi2sk"

SUMMARY_ATTRIBUTES: Final[tuple[str, ...]] = (
    "tenant_id",
    "checkpoint_id",
    "subject_id",
    "agent_id",
    "kind",
    "revision",
    "status",
    "state_hash",
    "state_bytes",
    "format",
    "resources",
    "source",
    "ttl_seconds",
    "keep_revisions",
    "lease",
    "created_at",
    "updated_at",
    "expires_at",
)
"""What the listing indexes project: a summary, never the state (indexes would otherwise store it again)."""

KEY_ATTRIBUTES: Final[tuple[str, ...]] = (
    "key_id",
    "tenant_id",
    "agent_id",
    "scopes",
    "not_before",
    "key_expires_at",
    "description",
    "created_at",
    "revoked_at",
)
"""What gsi1 projects, so that listing keys needs no second read; checkpoints project only their keys."""


@dataclass(frozen=True)
class Index:
    """A secondary index: its name, key attributes and projected attributes."""

    name: str
    partition_key: str
    sort_key: str
    non_key_attributes: tuple[str, ...]


@dataclass(frozen=True)
class TableSchema:
    """Everything about the table that code and infrastructure must agree on."""

    partition_key: str
    sort_key: str
    ttl_attribute: str
    global_indexes: tuple[Index, ...]
    local_indexes: tuple[Index, ...]

    @property
    def string_attributes(self) -> tuple[str, ...]:
        """Every key attribute of the table and its indexes (all are strings)."""
        names = [self.partition_key, self.sort_key]
        for index in (*self.global_indexes, *self.local_indexes):
            for name in (index.partition_key, index.sort_key):
                if name not in names:
                    names.append(name)
        return tuple(names)


TABLE: Final = TableSchema(
    partition_key=PK,
    sort_key=SK,
    ttl_attribute=TTL_ATTRIBUTE,
    global_indexes=(Index(GSI1, GSI1_PK, GSI1_SK, KEY_ATTRIBUTES),),
    local_indexes=(
        Index(LSI_UPDATED, PK, LSI_UPDATED_SK, SUMMARY_ATTRIBUTES),
        Index(LSI_AGENT_UPDATED, PK, LSI_AGENT_UPDATED_SK, SUMMARY_ATTRIBUTES),
    ),
)


def create_table_request(table_name: str, schema: TableSchema = TABLE) -> dict[str, Any]:
    """Arguments of `CreateTable` for this schema (on-demand billing, streams of new and old images)."""

    def projection(index: Index) -> dict[str, Any]:
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.non_key_attributes)}

    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in schema.string_attributes],
        "KeySchema": [
            {"AttributeName": schema.partition_key, "KeyType": "HASH"},
            {"AttributeName": schema.sort_key, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": i.name,
                "KeySchema": [
                    {"AttributeName": i.partition_key, "KeyType": "HASH"},
                    {"AttributeName": i.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": projection(i),
            }
            for i in schema.global_indexes
        ],
        "LocalSecondaryIndexes": [
            {
                "IndexName": i.name,
                "KeySchema": [
                    {"AttributeName": i.partition_key, "KeyType": "HASH"},
                    {"AttributeName": i.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": projection(i),
            }
            for i in schema.local_indexes
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }


def ensure_table(client: Any, table_name: str, schema: TableSchema = TABLE) -> bool:
    """Create the table (and switch TTL on) unless it exists; True when it was created."""
    try:
        client.describe_table(TableName=table_name)
        return False
    except client.exceptions.ResourceNotFoundException:
        pass
    client.create_table(**create_table_request(table_name, schema))
    client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": schema.ttl_attribute},
    )
    return True


BLOB_PREFIX: Final = "blobs/"
"""Every object Baton writes lives under this prefix of the bucket; the api function may touch nothing else."""
PENDING_TAG: Final = ("baton-state", "pending")
"""Objects are written with this tag and retagged once a checkpoint references them; a lifecycle rule expires
what stayed pending (an upload never attached)."""
PENDING_EXPIRY_DAYS: Final = 2
