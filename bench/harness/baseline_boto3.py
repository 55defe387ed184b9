"""The cold-start baseline: the least any Python function that talks to DynamoDB pays on its first request.

It imports boto3 and creates a DynamoDB client at import, as a minimal Lambda handler module would, and its handler
makes one GetItem. Baton's whole cold request (import and first save) is measured as a ratio to this import plus one
handled request, in the same run, with DynamoDB stubbed the same way for both (see `bench/harness/coldstart.py`).
"""

from typing import Any

import boto3

client = boto3.client("dynamodb", region_name="us-east-1")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One GetItem, and a 200."""
    client.get_item(TableName="baseline", Key={"pk": {"S": "k"}, "sk": {"S": "k"}}, ConsistentRead=True)
    return {"statusCode": 200}
