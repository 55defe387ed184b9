"""AWS clients, created on first use (importing boto3 is most of a cold start); `store.errors` classifies their
failures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client


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


def s3_client(endpoint_url: str | None = None) -> S3Client:
    """An S3 client that signs with SigV4 (presigned URLs included: only SigV4 makes S3 check the
    `x-amz-checksum-sha256` an upload was signed with) and, on a local endpoint, addresses buckets by path (a
    loopback address has no bucket subdomains).

    Created only when a request first needs S3 (a spilled state, a blob): most requests never pay for it.
    """
    import botocore.session
    from botocore.config import Config

    config = Config(
        signature_version="s3v4",
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=10,
        tcp_keepalive=True,
        s3={"addressing_style": "path" if endpoint_url else "auto"},
    )
    client = botocore.session.get_session().create_client("s3", endpoint_url=endpoint_url, config=config)
    return cast("S3Client", client)


def events_client(endpoint_url: str | None = None) -> Any:
    """An EventBridge client (the reaper's change events), made on the first batch that has events to publish."""
    import botocore.session
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=5)
    return botocore.session.get_session().create_client("events", endpoint_url=endpoint_url, config=config)
