"""Routes about the API itself: health and its description."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from baton import __version__
from baton.api.openapi import responses
from baton.api.resolver import PUBLIC, current_call
from baton.api.responses import JSON, ok
from baton.domain.models import DataEnvelope, Health

router = Router()


@router.get(
    "/v1/health",
    summary="Health check",
    description="Answers without a key and without touching AWS.",
    openapi_extensions=PUBLIC,
    responses=responses({200: ("The function is up", DataEnvelope[Health])}, ()),
    tags=["meta"],
)
def health() -> Response[str]:
    """The function is up."""
    return ok({"status": "ok", "version": __version__}, current_call(router).request_id)


@router.get(
    "/v1/openapi.json",
    summary="The OpenAPI document of this API",
    openapi_extensions=PUBLIC,
    tags=["meta"],
    include_in_schema=False,
)
def openapi_document() -> Response[str]:
    """The same document as the committed `docs/openapi.json`."""
    from baton.api.app import openapi_json

    return Response(status_code=200, content_type=JSON, body=openapi_json())
