"""The one error map: domain errors to HTTP, and pydantic's findings to the contract's sentences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baton_checkpoints.domain import errors as e
from baton_checkpoints.domain.canonical import pointer

INTERNAL_MESSAGE = "An internal error occurred; quote the request_id if you report it."
"""What a defect's answer says (its cause is logged with the request id, never answered)."""

STATUS: dict[type[e.BatonError], int] = {
    e.ValidationFailed: 400,
    e.Unauthenticated: 401,
    e.Forbidden: 403,
    e.NotFound: 404,
    e.UnknownRoute: 404,
    e.RevisionNotKept: 404,
    e.MethodNotAllowed: 405,
    e.RevisionConflict: 409,
    e.CheckpointClosed: 409,
    e.LeaseHeld: 409,
    e.LeaseLost: 409,
    e.PayloadTooLarge: 413,
    e.UnsupportedMediaType: 415,
    e.IdempotencyKeyReused: 422,
    e.RateLimited: 429,
    e.QuotaExceeded: 403,
    e.Unavailable: 503,
    e.ResponseTooLarge: 500,
}


def status_of(error: e.BatonError) -> int:
    """The HTTP status of a domain error, found along its class hierarchy (500 for anything unmapped)."""
    for cls in type(error).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def headers_of(error: e.BatonError) -> dict[str, str]:
    """Headers an error answer carries."""
    if isinstance(error, e.Unavailable):
        return {"Retry-After": str(error.retry_after)}
    if isinstance(error, e.RateLimited):
        return {"Retry-After": str(error.retry_after), "RateLimit-Policy": error.policy, "RateLimit": error.rate_limit}
    if isinstance(error, e.MethodNotAllowed):
        return {"Allow": ", ".join(error.allowed)}
    if isinstance(error, e.Unauthenticated):
        return {"WWW-Authenticate": error.challenge or 'Bearer realm="baton"'}
    if isinstance(error, e.Forbidden) and error.challenge is not None:
        return {"WWW-Authenticate": error.challenge}
    return {}


def _quoted_list(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _describe(kind: str, ctx: dict[str, Any], msg: str, subject: str) -> str:
    """One sentence naming the field (`subject`) and the rule it broke."""
    simple = {
        "missing": f"{subject} is required.",
        "extra_forbidden": f"{subject} is not a known field; remove it or check its spelling.",
        "int_type": f"{subject} must be an integer.",
        "int_parsing": f"{subject} must be an integer.",
        "int_from_float": f"{subject} must be an integer.",
        "string_type": f"{subject} must be a string.",
        "bool_type": f"{subject} must be a boolean.",
        "bool_parsing": f"{subject} must be true or false.",
        "list_type": f"{subject} must be an array.",
        "model_type": f"{subject} must be an object.",
        "model_attributes_type": f"{subject} must be an object.",
        "dict_type": f"{subject} must be an object.",
        "string_unicode": f"{subject} must be valid Unicode text.",
        "json_invalid": f"The body is not valid JSON: {ctx.get('error', msg)}.",
    }
    if kind in simple:
        return simple[kind]
    if kind in ("literal_error", "enum"):
        expected = ctx.get("expected", "")
        allowed = [part.strip(" '") for part in expected.replace(" or ", ", ").split(",") if part.strip(" '")]
        return f"{subject} must be one of: {_quoted_list(allowed)}."
    if kind == "greater_than_equal":
        return f"{subject} must be at least {ctx.get('ge')}."
    if kind == "less_than_equal":
        return f"{subject} must be at most {ctx.get('le')}."
    if kind == "greater_than":
        return f"{subject} must be greater than {ctx.get('gt')}."
    if kind == "less_than":
        return f"{subject} must be less than {ctx.get('lt')}."
    if kind == "string_too_short":
        return f"{subject} must be at least {ctx.get('min_length')} characters long."
    if kind == "string_too_long":
        return f"{subject} must be at most {ctx.get('max_length')} characters long."
    if kind == "too_short":
        return f"{subject} must have at least {ctx.get('min_length')} items."
    if kind == "too_long":
        return f"{subject} must have at most {ctx.get('max_length')} items."
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        if "x00" in pattern:
            return f"{subject} must not contain control characters."
        return f"{subject} must match the pattern {pattern}."
    if kind == "value_error":
        # Baton's own validators phrase their rule to follow the field's name ("must not be null").
        return f"{subject} {msg.removeprefix('Value error, ')}."
    return f"{subject}: {msg}."


def field_errors(raw: Sequence[Any]) -> list[e.FieldError]:
    """Pydantic / powertools validation errors as pointers and sentences, one per violation."""
    found: list[e.FieldError] = []
    for item in raw:
        loc = tuple(item.get("loc", ()))
        source = loc[0] if loc else "body"
        path = loc[1:] if source in ("body", "query", "path", "header") else loc
        # A union of a constrained type with None reports its branch names; they are not fields.
        path = tuple(p for p in path if not (isinstance(p, str) and p.startswith(("function-", "constrained-"))))
        if path and path[-1] == "[key]":
            # A dict key that breaks its rule (a channel name): pydantic names the key, then marks it; the pointer is
            # the key's own, as a client wrote it.
            path = path[:-1]
        if source == "header" and path and isinstance(path[0], str):
            # powertools reads headers lower-cased (HTTP compares them so); name them as the contract writes them
            path = ("-".join(word.capitalize() for word in path[0].split("-")), *path[1:])
        where = pointer(*path)
        if source == "header":
            subject = f"The {path[0] if path else ''} header"
        elif source == "query":
            subject = f"The query parameter {path[0] if path else ''}"
        elif source == "path":
            subject = f"The path parameter {path[0] if path else ''}"
        else:
            subject = where or "The body"
        message = _describe(str(item.get("type", "")), dict(item.get("ctx") or {}), str(item.get("msg", "")), subject)
        if source == "body" and not path and item.get("type") == "missing":
            message = "The body is required and must be a JSON object."
        location = source if source in ("query", "path", "header") else "body"
        found.append(e.FieldError(pointer=where, message=message, location=location))
    return found or [e.FieldError(pointer="", message="The request is not valid.")]


def validation_failed(found: Sequence[Any]) -> e.ValidationFailed:
    """Pydantic's findings as the contract's 400: described up to `MAX_REPORTED_ERRORS`, the rest counted (a body
    can carry 100,000 unknown fields)."""
    shown = list(found[: e.MAX_REPORTED_ERRORS])
    return e.ValidationFailed(field_errors(shown), more=len(found) - len(shown))


def error_object(error: e.BatonError) -> dict[str, Any]:
    """What an error answer says under `error`, and a tool's error result says whole (`error_fields`)."""
    return error_fields(error.code, error.message, error.details())


def error_fields(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """An error's code, message and, when there is something to add, details."""
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = details
    return body
