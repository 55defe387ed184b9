"""The table's shape, defined once: the store, the moto fixtures, `baton serve` and the CDK stack all read it.

One table holds every item type; `baton_checkpoints.store.layout` builds its keys. One global index (gsi1) finds a
checkpoint by id and lists a tenant's keys. There are no local indexes: a subject's checkpoints are listed by a
Query on the table itself, so that a save never moves an index entry (see `layout`).
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import Struct

PK: Final = "pk"
SK: Final = "sk"
TTL_ATTRIBUTE: Final = "ttl"

GSI1: Final = "gsi1"
GSI1_PK: Final = "gpk"
GSI1_SK: Final = "gsk"

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
"""What gsi1 projects, so that listing keys needs no second read. Checkpoint items carry none of these names, so
their entries hold only keys: written once when a checkpoint is created, untouched by later saves."""


class Index(Struct, frozen=True):
    """A secondary index: its name, key attributes and projected attributes."""

    name: str
    partition_key: str
    sort_key: str
    non_key_attributes: tuple[str, ...]


class TableSchema(Struct, frozen=True):
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
    local_indexes=(),
)


def create_table_request(table_name: str, schema: TableSchema = TABLE) -> dict[str, Any]:
    """Arguments of `CreateTable` for this schema (on-demand billing, streams of new and old images)."""

    def projection(index: Index) -> dict[str, Any]:
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.non_key_attributes)}

    request: dict[str, Any] = {
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
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }
    if schema.local_indexes:  # DynamoDB refuses an empty list
        request["LocalSecondaryIndexes"] = [
            {
                "IndexName": i.name,
                "KeySchema": [
                    {"AttributeName": i.partition_key, "KeyType": "HASH"},
                    {"AttributeName": i.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": projection(i),
            }
            for i in schema.local_indexes
        ]
    return request


def ensure_table(client: Any, table_name: str, schema: TableSchema = TABLE) -> bool:
    """Create the table (and switch TTL on) unless it exists; True when it was created."""
    try:
        client.describe_table(TableName=table_name)
        return False
    except client.exceptions.ResourceNotFoundException:
        pass
    create_table(client, table_name, schema)
    return True


def create_table(client: Any, table_name: str, schema: TableSchema = TABLE) -> None:
    """Create the table, wait until it is active (DynamoDB Local and moto create it active at once), and switch TTL
    on."""
    created = client.create_table(**create_table_request(table_name, schema))
    if created["TableDescription"]["TableStatus"] != "ACTIVE":
        client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": schema.ttl_attribute},
    )


BLOB_PREFIX: Final = "blobs/"
"""Every object Baton writes lives under this prefix of the bucket; the api function may touch nothing else."""
PENDING_TAG: Final = ("baton-state", "pending")
"""Objects are written with this tag and retagged once a checkpoint references them; a lifecycle rule expires
what stayed pending (an upload never attached)."""
PENDING_EXPIRY_DAYS: Final = 2
ATTACHED_TAG: Final = ("baton-state", "attached")
"""The tag of an object a checkpoint references (set by the reaper when it sees the reference appear)."""


def bucket_lifecycle() -> dict[str, Any]:
    """The bucket's lifecycle rules as S3's API takes them (CDK states the same rules in `infra/`)."""
    key, value = PENDING_TAG
    return {
        "Rules": [
            {
                "ID": "AbortIncompleteUploads",
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            },
            {
                "ID": "ExpireNeverAttached",
                "Status": "Enabled",
                "Filter": {"And": {"Prefix": BLOB_PREFIX, "Tags": [{"Key": key, "Value": value}]}},
                "Expiration": {"Days": PENDING_EXPIRY_DAYS},
            },
        ]
    }


def ensure_bucket(client: Any, bucket_name: str) -> bool:
    """Create the blob bucket with its lifecycle rules unless it exists (moto, `baton serve`); True when created."""
    try:
        client.head_bucket(Bucket=bucket_name)
        return False
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    client.create_bucket(Bucket=bucket_name)
    client.put_bucket_lifecycle_configuration(Bucket=bucket_name, LifecycleConfiguration=bucket_lifecycle())
    return True
