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
from baton_checkpoints.api.resolver import API_ROOT, CALL_CONTEXT, PUBLIC, BatonResolver
from baton_checkpoints.api.responses import JSON, error
from baton_checkpoints.api.routers import checkpoints, meta
from baton_checkpoints.api.services import Services, from_environment
from baton_checkpoints.domain.errors import (
    BatonError,
    MethodNotAllowed,
    UnknownRoute,
    UnsupportedMediaType,
)

DEFERRED_ROUTERS: tuple[tuple[str, ...], ...] = (
    ("keys", "/v1/keys", "/v1/whoami"),
    ("blobs", "/v1/blobs"),
    ("history", "/revisions", "/restore"),
    ("leases", "/lease"),
    ("subjects", "/v1/subjects/"),
    ("resume", "/v1/resume"),
    ("threads", "/v1/threads"),
    ("mcp", "/mcp"),
    ("oauth", "/.well-known/", "/oauth/"),
    ("grants", "/v1/oauth/"),
    ("tenants", "/v1/tenants/"),
    ("usage", "/v1/usage"),
    ("audit", "/v1/audit"),
    ("console", "/console", API_ROOT),
)
"""The routers `create_app` leaves to their first request, in the order they are included when all are (the
document, SnapStart): each module under `api/routers`, then what the paths of its routes hold (`API_ROOT`: the API's
own address)."""


def create_app(services: Callable[[], Services]) -> BatonResolver:
    """A resolver with every route and the error map, serving with the services `services` provides (called by
    the first request that needs them, and by each one after: it should hand out the same services)."""
    app = BatonResolver(services)
    app.include_router(meta.router)
    _add_document_route(app)
    app.include_router(checkpoints.router)
    # Every other family's routes are included by the first request that names them: a container's first save or
    # lookup imports none of their modules and models (the thread routes, LangGraph's, bring the thread planner;
    # MCP, OAuth and the console their own modules). Each entry: the router's module, and what its paths hold.
    for module, *prefixes in DEFERRED_ROUTERS:
        app.include_router_when_asked(f"baton_checkpoints.api.routers.{module}", *prefixes)
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
