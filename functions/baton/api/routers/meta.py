"""Routes about the API itself: health (the OpenAPI document is served by the app that it describes, `api/app.py`)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from baton import __version__
from baton.api.openapi import responses
from baton.api.resolver import PUBLIC, CurrentCall
from baton.api.responses import ok
from baton.api.schemas import DataEnvelope, Health

router = Router()


@router.get(
    "/v1/health",
    summary="Health check",
    description="Answers without a key and without touching AWS.",
    openapi_extensions=PUBLIC,
    responses=responses({200: ("The function is up", DataEnvelope[Health])}, ()),
    tags=["meta"],
)
def health(call: CurrentCall) -> Response[str]:
    """The function is up."""
    return ok(Health.model_construct(status="ok", version=__version__), call.request_id)
