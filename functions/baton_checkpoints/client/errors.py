"""Typed exceptions: one class per error code of api-v1.md, under `BatonError`.

The 409s share `ConflictError`, so a caller (the CLI's exit codes) can tell "conflict" from "not found" from the
rest with one `except` each. API Gateway's own answers (`{"message": "…"}`, no `code`) map by status to the class
of the nearest contract code, with `gateway=True`.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any


class BatonError(Exception):
    """An error answer of the Baton API (or the SDK's failure to get one).

    `status` is the HTTP status (0 when no answer came), `code` the contract's error code, `message` the server's
    sentence, `details` its `details` object (empty when absent), `request_id` the answer's request id.
    """

    code_name: str | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        gateway: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code or self.code_name or "UNKNOWN"
        self.details: Mapping[str, Any] = details or {}
        self.request_id = request_id
        self.headers: Mapping[str, str] = headers or {}
        self.gateway = gateway
        """True when API Gateway answered with its own `{"message"}` body, before Baton saw the request."""

    @property
    def retry_after(self) -> float | None:
        """Seconds the `Retry-After` header asks to wait, or None."""
        return parse_retry_after(self.headers.get("retry-after"))

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.status} {self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"


class ValidationError(BatonError):
    """400 `VALIDATION_ERROR`: a field is missing, malformed, out of range or unknown (`details.errors`)."""

    code_name = "VALIDATION_ERROR"

    @property
    def errors(self) -> list[Mapping[str, Any]]:
        """`details.errors`: `[{pointer, message, in?}]`."""
        return list(self.details.get("errors") or [])


class UnauthenticatedError(BatonError):
    """401 `UNAUTHENTICATED`: no key, or an unknown, revoked, expired or not-yet-valid one."""

    code_name = "UNAUTHENTICATED"


class MissingApiKeyError(UnauthenticatedError):
    """No API key to send: neither `api_key=` nor `BATON_API_KEY` gave one. Raised before anything is sent (status 0),
    for every call but those that need no key (`health`, `openapi`, `schema`, `request`)."""

    code_name = "MISSING_API_KEY"


class ForbiddenError(BatonError):
    """403 `FORBIDDEN`: the key lacks the route's scope."""

    code_name = "FORBIDDEN"


class QuotaExceededError(ForbiddenError):
    """403 `QUOTA_EXCEEDED`: the write would take the tenant past a quota (`quota`, `limit`, `used`); nothing was
    written. Not retried: delete what is no longer needed, or ask the operator to raise the quota."""

    code_name = "QUOTA_EXCEEDED"

    @property
    def quota(self) -> str | None:
        """`details.quota`: `storage_bytes` or `checkpoints`."""
        value = self.details.get("quota")
        return value if isinstance(value, str) else None

    @property
    def limit(self) -> int | None:
        """`details.limit`."""
        value = self.details.get("limit")
        return value if isinstance(value, int) else None

    @property
    def used(self) -> int | None:
        """`details.used`: what the tenant stores, as last counted."""
        value = self.details.get("used")
        return value if isinstance(value, int) else None


class NotFoundError(BatonError):
    """404 `NOT_FOUND`: missing, expired, or not visible to the caller."""

    code_name = "NOT_FOUND"


class MethodNotAllowedError(BatonError):
    """405 `METHOD_NOT_ALLOWED`."""

    code_name = "METHOD_NOT_ALLOWED"


class ConflictError(BatonError):
    """A 409: the base of the four conflict codes."""


class RevisionConflictError(ConflictError):
    """409 `REVISION_CONFLICT`: `expected_revision` (or `If-Match`) is not the current revision."""

    code_name = "REVISION_CONFLICT"

    @property
    def current_revision(self) -> int | None:
        """`details.current_revision` (0 when the checkpoint does not exist)."""
        value = self.details.get("current_revision")
        return value if isinstance(value, int) else None


class CheckpointClosedError(ConflictError):
    """409 `CHECKPOINT_CLOSED`: a save or restore of a completed or cancelled checkpoint."""

    code_name = "CHECKPOINT_CLOSED"


class LeaseHeldError(ConflictError):
    """409 `LEASE_HELD`: another holder has the lease, or the write lacks the current token."""

    code_name = "LEASE_HELD"

    @property
    def lease_expires_at(self) -> str | None:
        """`details.lease_expires_at`."""
        value = self.details.get("lease_expires_at")
        return value if isinstance(value, str) else None


class LeaseLostError(ConflictError):
    """409 `LEASE_LOST`: the write's lease token names a lease that is gone (lapsed and taken over, released, or its
    checkpoint deleted or purged); nothing was written. Stop, acquire a new lease and read the checkpoint again."""

    code_name = "LEASE_LOST"

    @property
    def lease_expires_at(self) -> str | None:
        """`details.lease_expires_at`: when another holder's live lease ends (None when no lease is live)."""
        value = self.details.get("lease_expires_at")
        return value if isinstance(value, str) else None


class IdempotencyInProgressError(ConflictError):
    """409 `IDEMPOTENCY_IN_PROGRESS`: the first request with this `Idempotency-Key` has not finished."""

    code_name = "IDEMPOTENCY_IN_PROGRESS"


class PayloadTooLargeError(BatonError):
    """413 `PAYLOAD_TOO_LARGE`: body or state over its limit (`details.field`, `limit_bytes`, `actual_bytes`)."""

    code_name = "PAYLOAD_TOO_LARGE"


class UnsupportedMediaTypeError(BatonError):
    """415 `UNSUPPORTED_MEDIA_TYPE`."""

    code_name = "UNSUPPORTED_MEDIA_TYPE"


class IdempotencyKeyReusedError(BatonError):
    """422 `IDEMPOTENCY_KEY_REUSED`: the key was used before with a different request."""

    code_name = "IDEMPOTENCY_KEY_REUSED"


class RateLimitedError(BatonError):
    """429 `RATE_LIMITED` (or API Gateway's throttling)."""

    code_name = "RATE_LIMITED"


class UnavailableError(BatonError):
    """503 `UNAVAILABLE` (a dependency is throttling or failing), or API Gateway's 502/503/504."""

    code_name = "UNAVAILABLE"


class InternalError(BatonError):
    """500 `INTERNAL`: a defect (or API Gateway's 500: the function failed)."""

    code_name = "INTERNAL"


class ResponseTooLargeError(InternalError):
    """500 `RESPONSE_TOO_LARGE`: the answer would not have fit Lambda's 6 MB payload, so it was not sent (a defect of
    Baton's bounds, as `INTERNAL` is: the same request fails alike). The request's effect, if any, took place. Ask
    again accepting gzip (the SDK does), for a smaller page (`limit`), or keep large values in blobs
    (`details.limit_bytes`, `details.actual_bytes`)."""

    code_name = "RESPONSE_TOO_LARGE"


class BatonConnectionError(BatonError):
    """No answer: the connection failed, or broke before the answer arrived, on every attempt allowed."""

    code_name = "CONNECTION_ERROR"

    def __init__(self, message: str, *, outcome_unknown: bool) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown
        """True when a request may have reached the server (its effect is unknown)."""


class UnexpectedResponseError(BatonError):
    """An answer the contract does not describe (a success without its `data`, a body that is not JSON)."""

    code_name = "UNEXPECTED_RESPONSE"


class ChecksumMismatchError(BatonError):
    """A downloaded blob's bytes do not have the SHA-256 the blob was declared with."""

    code_name = "CHECKSUM_MISMATCH"


class FileChangedError(BatonError):
    """The file being uploaded changed after it was hashed (it grew, shrank or was rewritten): its bytes no longer
    have the declared size and SHA-256, so the upload cannot succeed. Upload it again once it is complete (or
    upload a copy). Also what S3's `BadDigest` answer to the presigned PUT means."""

    code_name = "FILE_CHANGED"


ERRORS_BY_CODE: dict[str, type[BatonError]] = {
    cls.code_name: cls
    for cls in (
        ValidationError,
        UnauthenticatedError,
        ForbiddenError,
        QuotaExceededError,
        NotFoundError,
        MethodNotAllowedError,
        RevisionConflictError,
        CheckpointClosedError,
        LeaseHeldError,
        LeaseLostError,
        IdempotencyInProgressError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        IdempotencyKeyReusedError,
        RateLimitedError,
        UnavailableError,
        InternalError,
        ResponseTooLargeError,
    )
    if cls.code_name
}
"""The contract's error codes and their classes."""

ERRORS_BY_STATUS: dict[int, type[BatonError]] = {
    400: ValidationError,
    401: UnauthenticatedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: PayloadTooLargeError,
    414: ValidationError,
    415: UnsupportedMediaTypeError,
    422: IdempotencyKeyReusedError,
    429: RateLimitedError,
    431: ValidationError,
    500: InternalError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}
"""For answers without a contract code (API Gateway's own bodies): the class of the nearest code by status."""


def error_from_answer(
    status: int, body: Any, headers: Mapping[str, str], request_id: str | None, text: str = ""
) -> BatonError:
    """The typed exception for an error answer: Baton's envelope `{"error": {code, message, details?}}`, API
    Gateway's `{"message": "…"}`, or anything else (a proxy's HTML page) by its status."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        problem = body["error"]
        code = str(problem.get("code") or "")
        cls = ERRORS_BY_CODE.get(code) or ERRORS_BY_STATUS.get(status, BatonError)
        details = problem.get("details")
        return cls(
            str(problem.get("message") or f"HTTP {status}"),
            status=status,
            code=code or None,
            details=details if isinstance(details, Mapping) else None,
            request_id=request_id,
            headers=headers,
        )
    cls = ERRORS_BY_STATUS.get(status) or (UnavailableError if status >= 500 else BatonError)
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        message = body["message"]
    else:
        message = text.strip()[:300] or f"HTTP {status} without a body."
    return cls(message, status=status, request_id=request_id, headers=headers, gateway=True)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` in seconds: delay-seconds or an HTTP-date (RFC 9110), None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
