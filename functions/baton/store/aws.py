"""AWS clients, created on first use (importing boto3 is most of a cold start); `store.errors` classifies their
failures."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def dynamodb_client(endpoint_url: str | None = None) -> DynamoDBClient:
    """A DynamoDB client with short timeouts and standard retries (the API has 30 s in all).

    Made with botocore itself: boto3 adds only import time. Parameter validation is off: every request is built
    by the store's own code, and botocore's check of a save's ~120-node request cost about a sixth of the save's
    CPU; DynamoDB validates again, and a request it refuses is a defect the store's tests catch.
    """
    import botocore.session
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=5,
        tcp_keepalive=True,
        parameter_validation=False,
    )
    client = botocore.session.get_session().create_client("dynamodb", endpoint_url=endpoint_url, config=config)
    return cast("DynamoDBClient", client)
