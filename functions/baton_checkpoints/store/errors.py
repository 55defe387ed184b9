"""The one classifier of AWS errors: every store path asks it what a failure means, and nothing else looks at
error codes, modelled exception classes or cancellation reasons.

- CONDITION_FAILED: a condition of the write was false; the item it found is in the error when `ALL_OLD` was
  asked for, and the store decides from it (no second read).
- RACE: another writer holds or changed the item right now; the store reads again and retries a bounded number
  of times, else answers 503.
- UNAVAILABLE: throttled, failing, timed out or unreachable: 503 `UNAVAILABLE` with `Retry-After`.
- DEFECT: anything else (a malformed request, a missing table): let through, a 500 with the cause logged.

A cancelled transaction is classified from its `CancellationReasons`: any throttling or failure among them makes
it UNAVAILABLE; only condition failures and conflicts make it a CONDITION_FAILED (or a RACE).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, Final, NoReturn

from baton_checkpoints.domain.errors import Unavailable


class Failure(Enum):
    """What an AWS error means to the store."""

    CONDITION_FAILED = "condition_failed"
    RACE = "race"
    UNAVAILABLE = "unavailable"
    DEFECT = "defect"


# Codes that mean "not now", never "no": the request may succeed when retried after a moment.
UNAVAILABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "TransactionInProgressException",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
# The same, as a transaction's cancellation reasons spell them.
UNAVAILABLE_REASONS = frozenset(
    {
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "InternalServerError",
        "TransactionInProgress",
    }
)
RACE_CODES = frozenset({"TransactionConflictException"})
CONDITION_CODES = frozenset({"ConditionalCheckFailedException"})
TRANSACTION_CANCELLED = "TransactionCanceledException"

UNAVAILABLE_MESSAGE = "The database is busy; nothing was written. Retry after the Retry-After delay."
UNCONFIRMED_MESSAGE = (
    "The database did not confirm the write, which may or may not have been applied; retry after the Retry-After "
    "delay (a retry with the same Idempotency-Key is applied at most once)."
)


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore `ClientError`, else None."""
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None


def cancellation_reasons(exc: BaseException) -> list[str]:
    """The reason codes of a cancelled transaction, in the order of its items ("None" for items that passed)."""
    response: Any = getattr(exc, "response", None)
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    return [str(r.get("Code", "None")) for r in reasons or [] if isinstance(r, dict)]


def _is_transport_failure(exc: BaseException) -> bool:
    """Timeouts and dropped or refused connections: botocore's, and urllib3's should they leak through."""
    from botocore.exceptions import ConnectionError as BotocoreConnectionError
    from botocore.exceptions import HTTPClientError

    return isinstance(exc, BotocoreConnectionError | HTTPClientError | TimeoutError | ConnectionError)


def classify(exc: BaseException) -> Failure:
    """What `exc`, raised by an AWS client call, means (see the module's table)."""
    code = error_code(exc)
    if code is None:
        return Failure.UNAVAILABLE if _is_transport_failure(exc) else Failure.DEFECT
    if code in CONDITION_CODES:
        return Failure.CONDITION_FAILED
    if code in RACE_CODES:
        return Failure.RACE
    if code in UNAVAILABLE_CODES:
        return Failure.UNAVAILABLE
    if code == TRANSACTION_CANCELLED:
        reasons = set(cancellation_reasons(exc))
        if reasons & UNAVAILABLE_REASONS:
            return Failure.UNAVAILABLE
        if reasons and reasons <= {"None", "ConditionalCheckFailed", "TransactionConflict"}:
            return Failure.CONDITION_FAILED if "ConditionalCheckFailed" in reasons else Failure.RACE
        return Failure.DEFECT
    response: Any = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    if isinstance(status, int) and status >= 500:
        return Failure.UNAVAILABLE  # a 5xx of the service that botocore did not model: not the request's fault
    return Failure.DEFECT


def may_have_landed(exc: BaseException) -> bool:
    """True when a write failed without saying whether it was applied: no answer came back (a timeout, a dropped
    connection) or the service failed (5xx) after perhaps applying it. Throttling refuses before applying."""
    if classify(exc) is not Failure.UNAVAILABLE:
        return False
    code = error_code(exc)
    if code is None or code == "TransactionInProgressException":
        return True  # no answer; or the SDK's retry of a transaction still being applied (same request token)
    response: Any = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    return isinstance(status, int) and status >= 500


def was_retried(exc: BaseException) -> bool:
    """True when the AWS SDK sent the request more than once before this answer (an earlier attempt may have
    been applied, its answer lost)."""
    response: Any = getattr(exc, "response", None)
    attempts = response.get("ResponseMetadata", {}).get("RetryAttempts") if isinstance(response, dict) else None
    return isinstance(attempts, int) and attempts > 0


def unavailable(exc: BaseException) -> Unavailable:
    """The 503 for a transient failure: "nothing was written" only where that is certain (the service refused
    the request); where no answer came back, or the service failed after perhaps applying it, the message says
    the outcome is unknown (the store reads back first where it can, so this is rare)."""
    return Unavailable(UNCONFIRMED_MESSAGE if may_have_landed(exc) else UNAVAILABLE_MESSAGE)


TRANSIENT: Final = frozenset({Failure.UNAVAILABLE, Failure.RACE})
"""Failures that a later retry can get past: where the store does not retry them itself, the caller gets a 503."""


def reraise(exc: BaseException, failure: Failure | None = None) -> NoReturn:
    """Raise what a failure the caller does not handle itself becomes: `Unavailable`, or `exc` as it was."""
    if (failure or classify(exc)) in TRANSIENT:
        raise unavailable(exc) from exc
    raise exc


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn transient failures (UNAVAILABLE, RACE) into `Unavailable`; let every other failure through unchanged."""
    try:
        yield
    except Unavailable:
        raise
    except Exception as exc:
        if classify(exc) in TRANSIENT:
            raise unavailable(exc) from exc
        raise
