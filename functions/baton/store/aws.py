"""AWS clients, created on first use (importing boto3 is most of a cold start); `store.errors` classifies their
failures."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def dynamodb_client(endpoint_url: str | None = None) -> DynamoDBClient:
    """A DynamoDB client with short timeouts and standard retries (the API has 30 s in all)."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=5,
        tcp_keepalive=True,
    )
    return boto3.session.Session().client("dynamodb", endpoint_url=endpoint_url, config=config)
