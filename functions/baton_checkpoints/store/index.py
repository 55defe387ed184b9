"""Finding a checkpoint by its id: one Query of the id index (gsi1), which holds the keys only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def locate(client: DynamoDBClient, table: str, tenant_id: str, checkpoint_id: str) -> Item | None:
    """The table key of the checkpoint with this id in this tenant, or None. The index is eventually consistent:
    whoever reads the item at that key checks it still holds this id."""
    response = client.query(
        TableName=table,
        IndexName=schema.GSI1,
        KeyConditionExpression=f"{schema.GSI1_PK} = :id",
        ExpressionAttributeValues={":id": {"S": layout.checkpoint_index_pk(tenant_id, checkpoint_id)}},
        Limit=1,
    )
    found = response.get("Items", [])
    if not found:
        return None
    return {schema.PK: found[0][schema.PK], schema.SK: found[0][schema.SK]}
