"""What the OpenAPI document says about responses, so every route documents the same envelope."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from baton.domain.models import ErrorEnvelope

_ERROR_TEXT = {
    400: "VALIDATION_ERROR: a field is missing, malformed, out of range or unknown",
    401: "UNAUTHENTICATED: no key, or an unknown, revoked, expired or not-yet-valid key",
    403: "FORBIDDEN: the key lacks the route's scope",
    404: "NOT_FOUND: missing, expired, or not visible to the caller",
    409: "REVISION_CONFLICT or CHECKPOINT_CLOSED",
    413: "PAYLOAD_TOO_LARGE: body or state over its limit",
    415: "UNSUPPORTED_MEDIA_TYPE: the body is not application/json",
    422: "IDEMPOTENCY_KEY_REUSED: the key was used before with a different request",
    503: "UNAVAILABLE: a dependency is throttling or failing; nothing was written",
}


def responses(success: dict[int, tuple[str, Any]], errors: tuple[int, ...]) -> dict[int, OpenAPIResponse]:
    """Response documentation: the success bodies given, and the error envelope for each error status."""
    documented: dict[int, dict[str, Any]] = {}
    for status, (description, model) in success.items():
        entry: dict[str, Any] = {"description": description}
        if model is not None:
            entry["content"] = {"application/json": {"model": model}}
        documented[status] = entry
    for status in errors:
        documented[status] = {
            "description": _ERROR_TEXT[status],
            "content": {"application/json": {"model": ErrorEnvelope}},
        }
    return cast(dict[int, OpenAPIResponse], documented)


AUTHENTICATED_ERRORS = (401, 403, 503)
