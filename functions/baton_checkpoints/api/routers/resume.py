"""Resume: `POST /v1/resume`, which checkpoint to pick up again. Read-only: it writes and claims nothing."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, documented
from baton_checkpoints.api.operations import resume as operation
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import JSON, ok
from baton_checkpoints.api.schemas_resume import ResumeEnvelope
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.resume import ResumeRequest

router = Router()


@router.post(
    "/v1/resume",
    summary="Resume work on a subject",
    description=(
        "Which checkpoint to pick up: ready (exactly one active match, whole, with pending_operations and "
        "stop_conditions for an OpenCheckpoint document), ambiguous (several: candidates, never a guess by "
        "recency), none, closed (only one terminal match) or omitted (the ready data would exceed budget_bytes, or "
        f"{limits.MAX_ANSWER_DATA_BYTES:,} bytes whatever the budget: required_bytes, never a partial checkpoint; "
        "GET /v1/checkpoints/{checkpoint_id} reads it whole). Sizes are UTF-8 bytes of compact JSON. Read-only: it "
        "writes nothing and claims no lease; an Idempotency-Key header is not used."
    ),
    # Not `acts_for`: naming another agent without `*` is the contract's 404 (as for a missing checkpoint), which
    # the route answers, never the gate's 403 of a write acting for another agent.
    openapi_extensions=needs(operation.resume),
    responses=documented(
        {200: ("What to resume, by data.status", ResumeEnvelope)},
        (400, *AUTHENTICATED_ERRORS, 404, 413, 415),
        described={
            404: "NOT_FOUND: agent_id names another agent and the key lacks the scope *",
            413: "PAYLOAD_TOO_LARGE: the body is over its limit",
        },
    ),
    tags=["checkpoints"],
)
def resume(call: CurrentCall, services: Wired, request: Annotated[ResumeRequest, Body()]) -> Response[str]:
    """Pick up work where it was left."""
    resumed = operation.resume(context_of(call, services), request)
    if isinstance(resumed, operation.Ready):
        meta = dumps({"request_id": call.request_id})
        return Response(status_code=200, content_type=JSON, body=f'{{"data":{resumed.data_json},"meta":{meta}}}')
    return ok(resumed, call.request_id)
