"""The one classifier of AWS errors: what each failure means to the store (no AWS needed to build them)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.store.errors import Failure, classify, reraise, translated_errors


def client_error(code: str, status: int = 400, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "AnyOperation")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (client_error("ConditionalCheckFailedException"), Failure.CONDITION_FAILED),
        (client_error("TransactionConflictException"), Failure.RACE),
        (client_error("ProvisionedThroughputExceededException"), Failure.UNAVAILABLE),
        (client_error("ThrottlingException"), Failure.UNAVAILABLE),
        (client_error("RequestLimitExceeded"), Failure.UNAVAILABLE),
        (client_error("InternalServerError", 500), Failure.UNAVAILABLE),
        (client_error("ServiceUnavailable", 503), Failure.UNAVAILABLE),
        (client_error("SomethingNew", 502), Failure.UNAVAILABLE),
        (client_error("TransactionCanceledException", reasons=["ThrottlingError", "None"]), Failure.UNAVAILABLE),
        (
            client_error("TransactionCanceledException", reasons=["None", "ProvisionedThroughputExceeded"]),
            Failure.UNAVAILABLE,
        ),
        (
            client_error("TransactionCanceledException", reasons=["ConditionalCheckFailed", "None"]),
            Failure.CONDITION_FAILED,
        ),
        (client_error("TransactionCanceledException", reasons=["TransactionConflict", "None"]), Failure.RACE),
        (
            client_error("TransactionCanceledException", reasons=["ValidationError", "None"]),
            Failure.DEFECT,
        ),
        (client_error("ValidationException"), Failure.DEFECT),
        (client_error("ResourceNotFoundException"), Failure.DEFECT),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1"), Failure.UNAVAILABLE),
        (ConnectionClosedError(endpoint_url="http://127.0.0.1"), Failure.UNAVAILABLE),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1"), Failure.UNAVAILABLE),
        (ValueError("a bug"), Failure.DEFECT),
    ],
)
def test_every_failure_is_classified_one_way(error: BaseException, failure: Failure) -> None:
    assert classify(error) is failure


@pytest.mark.parametrize(
    "error",
    [
        client_error("ThrottlingException"),
        client_error("TransactionConflictException"),
        client_error("TransactionCanceledException", reasons=["ThrottlingError"]),
        ReadTimeoutError(endpoint_url="http://127.0.0.1"),
    ],
)
def test_transient_failures_become_unavailable_with_a_retry_delay(error: BaseException) -> None:
    with pytest.raises(Unavailable) as raised:
        reraise(error)
    assert raised.value.retry_after >= 1
    with pytest.raises(Unavailable), translated_errors():
        raise error


@pytest.mark.parametrize("error", [client_error("ValidationException"), ValueError("a bug")])
def test_defects_pass_through_unchanged(error: BaseException) -> None:
    with pytest.raises(type(error)) as raised, translated_errors():
        raise error
    assert raised.value is error
