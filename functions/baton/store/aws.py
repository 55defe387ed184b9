"""AWS clients, created on first use (importing boto3 is most of a cold start) and translated errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from baton.domain.errors import Unavailable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Error codes that mean "not now", never "no": the caller gets 503 with Retry-After, and nothing was written.
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionInProgressException",
        # A single-item write that meets an in-flight transaction on the same item; botocore does not retry it.
        "TransactionConflictException",
    }
)


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


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ClientError, else None."""
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn AWS throttling, outages and unreachable endpoints into `Unavailable`; let everything else through."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, ReadTimeoutError

    try:
        yield
    except ClientError as exc:
        if error_code(exc) in RETRYABLE_CODES:
            raise Unavailable("The database is busy; nothing was written. Retry after the Retry-After delay.") from exc
        raise
    except (ConnectionError, HTTPClientError, ReadTimeoutError) as exc:
        raise Unavailable("The database could not be reached; nothing was written. Retry shortly.") from exc
