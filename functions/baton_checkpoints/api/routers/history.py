"""History: a checkpoint's kept revisions (list, get one) and restoring one as a new revision."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from baton_checkpoints.api.idempotency import IdempotencyKeyHeader, idempotency_claim
from baton_checkpoints.api.openapi import (
    AUTHENTICATED_ERRORS,
    ETAG_HEADER,
    REPLAYED_HEADER,
    WRITE_403,
    CursorParameter,
    documented,
    enveloped,
    paged,
)
from baton_checkpoints.api.operations.checkpoints import within_quota
from baton_checkpoints.api.paths import CheckpointIdParameter, checkpoint_id_from_path
from baton_checkpoints.api.records import record_summary
from baton_checkpoints.api.resolver import CurrentCall, Wired, needs
from baton_checkpoints.api.responses import fitted_page, ok, record
from baton_checkpoints.api.schemas import CheckpointRecord, CheckpointSummary, SaveResult
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.history import plan_restore
from baton_checkpoints.domain.models import RestoreRequest

router = Router()

RevisionParameter = Annotated[
    str,
    Path(
        description="A revision number, 1 to 2^53-1 in decimal; anything else answers 400.",
        json_schema_extra={"pattern": r"^[1-9][0-9]{0,15}$"},
    ),
]


def revision_from_path(raw: str) -> int:
    """A revision number of a path parameter; 400 naming it when it is not one."""
    if not (raw.isascii() and raw.isdigit() and not raw.startswith("0") and len(raw) <= 16):
        raise ValidationFailed.single(
            "/revision", "The path parameter revision must be a revision number from 1 to 2^53-1.", "path"
        )
    number = int(raw)
    if number > limits.MAX_SAFE_INTEGER:
        raise ValidationFailed.single(
            "/revision", "The path parameter revision must be a revision number from 1 to 2^53-1.", "path"
        )
    return number


def _only_agent(call: CurrentCall) -> str | None:
    """Whose checkpoints an id route may reach: any agent's with `*`, else the caller's own."""
    return None if call.caller.is_wildcard else call.caller.agent_id


@router.get(
    "/v1/checkpoints/<checkpoint_id>/revisions",
    summary="List a checkpoint's kept revisions",
    description=(
        "The last keep_revisions superseded revisions, as summaries, newest first; each keeps its own expiry. "
        "Paginated with limit and an opaque cursor."
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=documented(
        {200: ("A page of revision summaries", paged(CheckpointSummary))}, (400, *AUTHENTICATED_ERRORS, 404)
    ),
    tags=["history"],
)
def list_revisions(
    call: CurrentCall,
    services: Wired,
    checkpoint_id: CheckpointIdParameter,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
) -> Response[str]:
    """What the checkpoint looked like before its last writes."""
    result = services.history.list_revisions(
        call.caller.tenant_id, checkpoint_id_from_path(checkpoint_id), call.now_ms, _only_agent(call), limit, cursor
    )
    return fitted_page(result.items, CheckpointSummary.of, call.request_id, result.next_cursor, result.cursor_after)


@router.get(
    "/v1/checkpoints/<checkpoint_id>/revisions/<revision>",
    summary="Get a kept revision",
    description='The revision as a full record, state included, with ETag W/"<checkpoint_id>:<revision>".',
    openapi_extensions=needs("checkpoints:read"),
    responses=documented(
        {200: ("The revision, state parsed", enveloped(CheckpointRecord))},
        (400, *AUTHENTICATED_ERRORS, 404),
        {200: ETAG_HEADER},
    ),
    tags=["history"],
)
def get_revision(
    call: CurrentCall, services: Wired, checkpoint_id: CheckpointIdParameter, revision: RevisionParameter
) -> Response[str]:
    """Read one kept revision."""
    kept = services.history.get_revision(
        call.caller.tenant_id,
        checkpoint_id_from_path(checkpoint_id),
        revision_from_path(revision),
        call.now_ms,
        _only_agent(call),
    )
    return _revision_record(call, services, kept)


def _revision_record(call: CurrentCall, services: Wired, kept: Checkpoint) -> Response[str]:
    if kept.state_text is None:
        raise ValueError("a kept revision was read without its state")
    summary = record_summary(kept, services, None)  # a kept revision shows no lease
    return record(summary, kept.state_text, call.request_id, headers={"ETag": kept.etag})


@router.post(
    "/v1/checkpoints/<checkpoint_id>/restore",
    summary="Restore a kept revision",
    description=(
        "Writes the kept revision's state (with its format, resources and source) as the checkpoint's next "
        "revision: never a rewind. expected_revision makes it conditional; a leased checkpoint needs lease_token. "
        "Honors an Idempotency-Key header."
    ),
    openapi_extensions=needs("checkpoints:write"),
    responses=documented(
        {200: ("Restored as a new revision (or an idempotent replay)", enveloped(SaveResult))},
        (400, *AUTHENTICATED_ERRORS, 404, 409, 413, 415, 422),
        {200: {**ETAG_HEADER, **REPLAYED_HEADER}},
        described={
            403: WRITE_403,
            409: (
                "CHECKPOINT_CLOSED (a completed or cancelled checkpoint), LEASE_HELD (details.lease_expires_at), "
                "LEASE_LOST (lease_token names a lease that is gone) or REVISION_CONFLICT (details.current_revision)"
            ),
        },
    ),
    tags=["history"],
)
def restore_revision(
    call: CurrentCall,
    services: Wired,
    checkpoint_id: CheckpointIdParameter,
    request: Annotated[RestoreRequest, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[str]:
    """Pick up from an earlier revision, as a new one."""
    target = checkpoint_id_from_path(checkpoint_id)
    claim = idempotency_claim(call, "POST", f"/v1/checkpoints/{target}/restore", idempotency_key)
    outcome = services.history.restore(
        call.caller.tenant_id,
        target,
        request.revision,
        lambda current, kept: within_quota(
            services.limiter,
            plan_restore(
                current,
                kept,
                request.expected_revision,
                request.lease_token,
                call.request_id,
                call.now_ms,
                call.caller.agent_id,
            ),
        ),
        call.now_ms,
        _only_agent(call),
        claim,
    )
    headers = {"ETag": outcome.saved.etag}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    return ok(SaveResult.of(outcome.saved), call.request_id, headers=headers)
