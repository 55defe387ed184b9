"""Routes about the API itself: health and the JSON Schemas of accepted formats (the OpenAPI document is served by
the app that it describes, `api/app.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from baton_checkpoints import __version__
from baton_checkpoints.api.openapi import documented, enveloped, responses
from baton_checkpoints.api.resolver import PUBLIC, CurrentCall
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas import Health
from baton_checkpoints.domain.errors import NotFound

router = Router()

SCHEMA_MEDIA_TYPE = "application/schema+json"
"""The media type of a JSON Schema document (JSON Schema 2020-12, core, section 15)."""


def _opencheckpoint_schema() -> bytes:
    # Imported here, not at cold start: compiling the module costs ~2 ms, and few requests ask for a schema.
    from baton_checkpoints.domain import opencheckpoint

    return opencheckpoint.schema_text()


SCHEMA_FILES: dict[str, Callable[[], bytes]] = {"opencheckpoint-0.1.json": _opencheckpoint_schema}
"""The JSON Schemas served, by file name (`<SCHEMA_NAME>.json` of the format's module): the schema of each format a
save validates."""

SchemaNameParameter = Annotated[
    str,
    Path(
        description="The schema's file name; any other name answers 404.",
        json_schema_extra={"enum": sorted(SCHEMA_FILES)},
    ),
]


@router.get(
    "/v1/health",
    summary="Health check",
    description="Answers without a key and without touching AWS.",
    openapi_extensions=PUBLIC,
    responses=documented({200: ("The function is up", enveloped(Health))}, ()),
    tags=["meta"],
)
def health(call: CurrentCall) -> Response[str]:
    """The function is up."""
    return ok(Health.model_construct(status="ok", version=__version__), call.request_id)


def _schema_responses() -> dict[int, OpenAPIResponse]:
    # The 200 body is a JSON Schema document, not Baton's envelope: described here rather than by a model.
    body = {"type": "object", "description": "A JSON Schema document (draft 2020-12)."}
    documented: dict[int, OpenAPIResponse] = {
        200: {
            "description": "The JSON Schema (draft 2020-12) of the format, byte for byte as the package ships it",
            "content": {SCHEMA_MEDIA_TYPE: {"schema": body}},
        }
    }
    documented.update(responses({}, (404,), described={404: "NOT_FOUND: no schema has this name"}))
    return documented


@router.get(
    "/v1/schemas/<name>",
    summary="The JSON Schema of an accepted format",
    description=(
        "Answers without a key and without touching AWS. The schema states exactly the rules a save with that "
        "format must follow; opencheckpoint-0.1.json is the schema of format opencheckpoint/0.1."
    ),
    openapi_extensions=PUBLIC,
    responses=_schema_responses(),
    tags=["meta"],
)
def json_schema(name: SchemaNameParameter) -> Response[str]:
    """The schema file, byte for byte."""
    text = SCHEMA_FILES.get(unquote(name))
    if text is None:
        raise NotFound()
    return Response(status_code=200, content_type=SCHEMA_MEDIA_TYPE, body=text().decode("utf-8"))
