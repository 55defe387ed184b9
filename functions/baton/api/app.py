"""The api function's resolver: routers, the error map, and the OpenAPI description."""

from __future__ import annotations

from functools import cache

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError

from baton import __version__
from baton.api.errors import field_errors, headers_of, status_of
from baton.api.resolver import BatonResolver
from baton.api.responses import error
from baton.api.routers import checkpoints, keys, meta
from baton.domain.errors import (
    MAX_REPORTED_ERRORS,
    BatonError,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
    ValidationFailed,
)

app = BatonResolver()
app.include_router(meta.router)
app.include_router(checkpoints.router)
app.include_router(keys.router)


def _request_id() -> str:
    call = app.context.get("call")
    if call is not None:
        return str(call.request_id)
    return str(app.current_event.request_context.request_id or "")


def _answer(exc: BatonError) -> Response[str]:
    return error(status_of(exc), exc.code, exc.message, _request_id(), exc.details(), headers_of(exc))


@app.exception_handler(BatonError)
def handle_baton_error(exc: BatonError) -> Response[str]:
    """Every domain error, through the one error map."""
    return _answer(exc)


@app.exception_handler(RequestUnsupportedContentType)
def handle_unsupported_content_type(exc: RequestUnsupportedContentType) -> Response[str]:
    """Powertools' own media-type check, should a body reach it that the gate did not vet: a 415, never a 500."""
    return _answer(UnsupportedMediaType(app.current_event.headers.get("content-type")))


@app.exception_handler(RequestValidationError)
def handle_validation_error(exc: RequestValidationError) -> Response[str]:
    """Pydantic's findings, as pointers and sentences."""
    found = exc.errors()
    # Describe only what the answer will show; count the rest (a body can carry 100,000 unknown fields).
    shown = list(found[:MAX_REPORTED_ERRORS])
    return _answer(ValidationFailed(field_errors(shown), more=len(found) - len(shown)))


@app.not_found
def handle_not_found(_: NotFoundError) -> Response[str]:
    """Unknown paths answer 404; known paths with another method answer 405."""
    event = app.current_event
    allowed = app.allowed_methods(event.path)
    if allowed:
        return _answer(MethodNotAllowed(event.http_method.upper(), allowed))
    return _answer(NotFound())


@app.exception_handler(Exception)
def handle_defect(exc: Exception) -> Response[str]:
    """A defect: an opaque answer; the cause is logged with the request id."""
    from baton.observability import logger

    logger().exception("unhandled error", extra={"request_id": _request_id()})
    return error(500, "INTERNAL", "An internal error occurred; quote the request_id if you report it.", _request_id())


@cache
def openapi_json() -> str:
    """The OpenAPI document, generated once per container (its models cost ~80 ms to import: not at cold start)."""
    import json

    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    from baton.api.openapi import finish

    app.configure_openapi(
        title="Baton",
        version=__version__,
        summary="A checkpoint API for AI agents: park unfinished work, resume it anywhere.",
        security_schemes={"bearer": HTTPBearer(description="An API key: Authorization: Bearer <key>")},
        security=[{"bearer": []}],
    )
    generated = json.loads(app.get_openapi_json_schema(title="Baton", version=__version__))
    return json.dumps(finish(generated), indent=2, ensure_ascii=False)
