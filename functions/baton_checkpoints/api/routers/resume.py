"""Resume: `POST /v1/resume`, which checkpoint to pick up again. Read-only: it writes and claims nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, responses
from baton_checkpoints.api.records import record_summary
from baton_checkpoints.api.resolver import Call, CurrentCall, needs
from baton_checkpoints.api.responses import JSON, dumps, ok
from baton_checkpoints.api.schemas_resume import (
    ResumeAmbiguous,
    ResumeClosed,
    ResumeEnvelope,
    ResumeNone,
    ResumeOmitted,
    ready_json,
)
from baton_checkpoints.api.services import Services, Wired
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, CheckpointKey
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.resume import ResumeRequest, agent_scope, decide, lift, matches, within_budget

router = Router()

SUBJECT_PAGE = limits.MAX_PAGE_LIMIT
"""Summaries read per page of a subject's checkpoints (one Query answers them all unless there are more)."""


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
    openapi_extensions=needs("checkpoints:read"),
    responses=responses(
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
    agent_id = agent_scope(call.caller, request.agent_id)
    found = _matching(call, services, request, agent_id)
    # At most two rounds: a ready checkpoint found by a summary is read whole, and if it changed in between (closed,
    # deleted, replaced) the matches are decided again with what the read found.
    for _ in range(2):
        decision = decide(found)
        chosen = decision.checkpoint
        if decision.status != "ready" or chosen is None or chosen.state_text is not None:
            break
        found = [cp for cp in found if cp is not chosen] + _reread(call, services, request, agent_id, chosen)
    if decision.status == "ambiguous":
        return ok(ResumeAmbiguous.of(decision, call.now_ms), call.request_id)
    if decision.status == "closed" and chosen is not None:
        return ok(ResumeClosed.of(chosen, call.now_ms), call.request_id)
    if decision.status != "ready" or chosen is None or chosen.state_text is None:
        return ok(ResumeNone.model_construct(status="none"), call.request_id)
    data = ready_json(
        record_summary(chosen, services, call.now_ms), chosen.state_text, lift(chosen.format, chosen.state_text)
    )
    required_bytes = len(data.encode("utf-8"))
    if not within_budget(required_bytes, request.budget_bytes):
        return ok(ResumeOmitted.of(chosen, required_bytes, call.now_ms), call.request_id)
    return Response(
        status_code=200, content_type=JSON, body=f'{{"data":{data},"meta":{dumps({"request_id": call.request_id})}}}'
    )


def _matching(call: Call, services: Services, request: ResumeRequest, agent_id: str | None) -> list[Checkpoint]:
    """The live checkpoints the request names, read as cheaply as it allows: one GetItem when kind and agent fix
    the item, the id's index Query and GetItem for a checkpoint_id, else the subject's summaries (one Query)."""
    tenant_id = call.caller.tenant_id
    store = services.checkpoints
    if request.kind is not None and agent_id is not None:
        key = CheckpointKey(tenant_id, request.subject_id, agent_id, request.kind)
        candidates = _found_or_none(lambda: store.get(key, call.now_ms))
    elif request.checkpoint_id is not None:
        checkpoint_id = request.checkpoint_id
        candidates = [
            cp
            for cp in _found_or_none(lambda: store.get_by_id(tenant_id, checkpoint_id, call.now_ms))
            if call.caller.can_see_agent(cp.agent_id)  # another agent's counts as no match
        ]
    else:
        candidates = []
        cursor: str | None = None
        while True:
            page = store.list_subject(
                tenant_id, request.subject_id, call.now_ms, agent_id, request.kind, None, SUBJECT_PAGE, cursor
            )
            candidates.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
    return [cp for cp in candidates if matches(cp, request, tenant_id, agent_id, call.now_ms)]


def _reread(
    call: Call, services: Services, request: ResumeRequest, agent_id: str | None, summary: Checkpoint
) -> list[Checkpoint]:
    """The checkpoint now in `summary`'s slot, whole (one consistent GetItem), if it still matches."""
    key = CheckpointKey(summary.tenant_id, summary.subject_id, summary.agent_id, summary.kind)
    found = _found_or_none(lambda: services.checkpoints.get(key, call.now_ms))
    return [cp for cp in found if matches(cp, request, call.caller.tenant_id, agent_id, call.now_ms)]


def _found_or_none(read: Callable[[], Checkpoint]) -> list[Checkpoint]:
    """[what `read()` returns], or [] when it raises NotFound."""
    try:
        return [read()]
    except NotFound:
        return []
