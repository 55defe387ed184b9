"""The api function's resolver: routers, the error map, and the OpenAPI description.

`create_app(services)` builds a resolver on the services it is given; `app` is the Lambda's, whose services are
read from the environment by the first request that needs AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError

from baton_checkpoints import __version__
from baton_checkpoints.api.errors import INTERNAL_MESSAGE, headers_of, status_of, validation_failed
from baton_checkpoints.api.resolver import CALL_CONTEXT, PUBLIC, BatonResolver
from baton_checkpoints.api.responses import JSON, error
from baton_checkpoints.api.routers import (
    audit,
    blobs,
    checkpoints,
    console,
    grants,
    history,
    keys,
    leases,
    mcp,
    meta,
    oauth,
    resume,
    subjects,
    tenants,
    usage,
)
from baton_checkpoints.api.services import Services, from_environment
from baton_checkpoints.domain.errors import (
    BatonError,
    MethodNotAllowed,
    UnknownRoute,
    UnsupportedMediaType,
)


def create_app(services: Callable[[], Services]) -> BatonResolver:
    """A resolver with every route and the error map, serving with the services `services` provides (called by
    the first request that needs them, and by each one after: it should hand out the same services)."""
    app = BatonResolver(services)
    app.include_router(meta.router)
    _add_document_route(app)
    app.include_router(checkpoints.router)
    app.include_router(keys.router)
    app.include_router(blobs.router)
    app.include_router(history.router)
    app.include_router(leases.router)
    app.include_router(subjects.router)
    app.include_router(resume.router)
    # Thread routes (LangGraph's checkpointer) import their own models and the thread planner: not for a save.
    app.include_router_when_asked("baton_checkpoints.api.routers.threads", "/v1/threads")
    app.include_router(mcp.router)
    app.include_router(oauth.router)
    app.include_router(grants.router)
    app.include_router(tenants.router)
    app.include_router(usage.router)
    app.include_router(audit.router)
    app.include_router(console.router)
    _add_error_map(app)
    return app


def _add_error_map(app: BatonResolver) -> None:
    def request_id() -> str:
        call = app.context.get(CALL_CONTEXT)
        if call is not None:
            return str(call.request_id)
        return str(app.current_event.request_context.request_id or "")

    def answer(exc: BatonError) -> Response[str]:
        return error(status_of(exc), exc.code, exc.message, request_id(), exc.details(), headers_of(exc))

    @app.exception_handler(BatonError)
    def handle_baton_error(exc: BatonError) -> Response[str]:
        """Every domain error, through the one error map."""
        return answer(exc)

    @app.exception_handler(RequestUnsupportedContentType)
    def handle_unsupported_content_type(exc: RequestUnsupportedContentType) -> Response[str]:
        """Powertools' own media-type check, should a body reach it that the gate did not vet: a 415, never a 500."""
        return answer(UnsupportedMediaType(app.current_event.headers.get("content-type")))

    @app.exception_handler(RequestValidationError)
    def handle_validation_error(exc: RequestValidationError) -> Response[str]:
        """Pydantic's findings, as pointers and sentences."""
        return answer(validation_failed(exc.errors()))

    @app.not_found
    def handle_not_found(_: NotFoundError) -> Response[str]:
        """Unknown paths answer 404; known paths with another method answer 405."""
        event = app.current_event
        allowed = app.allowed_methods(event.path)
        if allowed:
            return answer(MethodNotAllowed(event.http_method.upper(), allowed))
        return answer(UnknownRoute(event.http_method.upper(), event.path))

    @app.exception_handler(Exception)
    def handle_defect(exc: Exception) -> Response[str]:
        """A defect: an opaque answer; the cause is logged with the request id."""
        from baton_checkpoints.observability import logger

        logger().exception("unhandled error", extra={"request_id": request_id()})
        return error(500, "INTERNAL", INTERNAL_MESSAGE, request_id())


def _add_document_route(app: BatonResolver) -> None:
    # Served here rather than by the meta router: the document describes the app, which the routers must not import.
    @app.get(
        "/v1/openapi.json",
        summary="The OpenAPI document of this API",
        openapi_extensions=PUBLIC,
        tags=["meta"],
        include_in_schema=False,
    )
    def openapi_document() -> Response[str]:
        """The same document as the committed `docs/openapi.json`."""
        return Response(status_code=200, content_type=JSON, body=document(app))


@cache
def document(app: BatonResolver) -> str:
    """The OpenAPI document of `app`, generated once (its models cost ~80 ms to import: not at cold start)."""
    import json

    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    from baton_checkpoints.api.openapi import finish

    app.configure_openapi(
        title="Baton",
        version=__version__,
        summary="A checkpoint API for AI agents: park unfinished work, resume it anywhere.",
        security_schemes={"bearer": HTTPBearer(description="An API key: Authorization: Bearer <key>")},
        security=[{"bearer": []}],
    )
    app.include_deferred_routers()
    generated = json.loads(app.get_openapi_json_schema(title="Baton", version=__version__))
    return json.dumps(finish(generated), indent=2, ensure_ascii=False)


lambda_services = from_environment()
"""The Lambda's services, built by its first request that needs AWS (`handlers/api.py` flushes their usage counts
when Lambda shuts the container down)."""
app = create_app(lambda_services)
"""The Lambda's resolver (`handlers/api.py`)."""


def openapi_json() -> str:
    """The OpenAPI document of the API (`make openapi` writes it to docs/openapi.json)."""
    return document(app)
