"""Checkpoints: save, lookup, get by id, delete, and a subject's list."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from baton_checkpoints.api.idempotency import IdempotencyKeyHeader, idempotent
from baton_checkpoints.api.openapi import (
    AUTHENTICATED_ERRORS,
    ETAG_HEADER,
    IF_MATCH_PATTERN,
    REPLAYED_HEADER,
    WRITE_403,
    CursorParameter,
    documented,
    enveloped,
    paged,
)
from baton_checkpoints.api.operations import Context
from baton_checkpoints.api.operations import checkpoints as operations
from baton_checkpoints.api.operations.inputs import lease_token_of
from baton_checkpoints.api.paths import (
    CheckpointIdParameter,
    SubjectIdParameter,
    checkpoint_id_from_path,
    subject_from_path,
)
from baton_checkpoints.api.records import record_summary_json, save_result_json
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import fitted_page, not_modified, ok, record
from baton_checkpoints.api.schemas import (
    CheckpointRecord,
    CheckpointSummary,
    DeleteResult,
    SaveResult,
)
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, parse_etag, parse_etag_list
from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import Identifier, SaveCheckpointRequest, SubjectId

router = Router()

# Path parameters are checked by the routes themselves, after percent-decoding and with their own messages; the
# document states the same rules (json_schema_extra documents without validating the raw value again).

# Request headers: the routes judge them (with their own messages, after the body), so the document states their
# rules without powertools validating them (json_schema_extra documents only; the value reaches the route as sent).
IfNoneMatchHeader = Annotated[
    str | None,
    Header(
        alias="If-None-Match",
        description=(
            'Entity tags W/"<checkpoint_id>:<revision>" (weak or strong), comma-separated, or *: when one of them is '
            "current (or *) the answer is 304 with no body. Any other value simply does not match."
        ),
    ),
]
IfMatchHeader = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description=(
            'Entity tags W/"<checkpoint_id>:<revision>" (weak or strong), comma-separated, or *: the delete happens '
            "only when a listed tag is current, otherwise 409 REVISION_CONFLICT (a tag of another checkpoint, or "
            "with a revision past 2^53-1, is never current). A malformed list, or one naming more than "
            f"{limits.MAX_IF_MATCH_TAGS} revisions of this checkpoint, answers 400."
        ),
        json_schema_extra={"pattern": IF_MATCH_PATTERN},
    ),
]

LeaseTokenHeader = Annotated[
    str | None,
    Header(
        alias="Lease-Token",
        description=(
            "The token of the checkpoint's live lease (from POST /v1/checkpoints/{checkpoint_id}/lease), 1 to 200 "
            "characters; without it, or with a text that is no token, a leased checkpoint answers 409 LEASE_HELD; "
            "a token of a lease that is not the checkpoint's current one (taken over, released) answers 409 "
            "LEASE_LOST."
        ),
        json_schema_extra={"minLength": 1, "maxLength": 200, "pattern": r"\S"},
    ),
]

_NOT_MODIFIED = "Not modified: If-None-Match names the current entity tag, or is *"
LEASE_CONFLICTS = (
    "REVISION_CONFLICT (details.current_revision), CHECKPOINT_CLOSED, LEASE_HELD (the checkpoint is leased and the "
    "write lacks its token; details.lease_expires_at) or LEASE_LOST (lease_token names a lease that is gone: taken "
    "over, released, or its checkpoint deleted or purged; nothing is created)"
)


def _matches(header: str | None, etag: str) -> bool:
    """True when an `If-None-Match` list names `etag` (weak comparison) or is `*`; a list that is not ours, or a
    tag that cannot be current, simply does not match."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    wanted = parse_etag(etag)
    return wanted in (parse_etag_list(header) or [])


def _if_match_revisions(header: str | None, checkpoint_id: str) -> tuple[int, ...] | None:
    """The revisions an `If-Match` list allows for `checkpoint_id` (None: unconditional). Tags of other
    checkpoints allow nothing, so a list naming none of this one's revisions fails the precondition (409)."""
    if header is None or header.strip() == "*":
        return None
    tags = parse_etag_list(header)
    if tags is None:
        raise ValidationFailed.single(
            "/If-Match",
            'The If-Match header must be an entity tag like W/"<checkpoint_id>:<revision>", or a comma-separated '
            "list of them.",
            "header",
        )
    revisions = {revision for tag_id, revision in tags if tag_id == checkpoint_id and revision >= 0}
    if len(revisions) > limits.MAX_IF_MATCH_TAGS:
        raise ValidationFailed.single(
            "/If-Match", f"The If-Match header may list at most {limits.MAX_IF_MATCH_TAGS} entity tags.", "header"
        )
    return tuple(sorted(revisions))


def _record_response(context: Context, found: Checkpoint, if_none_match: str | None) -> Response[str]:
    if found.etag_is_whole and _matches(if_none_match, found.etag):
        return not_modified(found.etag)
    if found.state_text is None:
        raise ValueError("checkpoint was loaded without its state")
    # The record is the summary's fields and the state (`CheckpointRecord`, as the OpenAPI document describes it),
    # the state written as the canonical JSON the store holds.
    summary = record_summary_json(found, context.services, context.now_ms)
    return record(summary, found.state_text, context.request_id, headers={"ETag": found.etag})


@router.post(
    "/v1/checkpoints",
    summary="Save a checkpoint",
    description=(
        "Upserts on (tenant, subject_id, agent_id, kind): 201 when created, 200 when updated, with the same "
        "checkpoint_id. Honors an Idempotency-Key header: a replay answers the first answer's status and data with "
        "Idempotent-Replayed: true; the key with another request answers 422. A save that carries lease_token "
        "never creates a checkpoint: it writes only while that token's lease is the checkpoint's, else 409 "
        "LEASE_LOST."
    ),
    openapi_extensions=needs(operations.save),
    responses=documented(
        {
            201: ("Created (or an idempotent replay of a create)", enveloped(SaveResult)),
            200: ("Updated (or an idempotent replay of an update)", enveloped(SaveResult)),
        },
        (400, *AUTHENTICATED_ERRORS, 409, 413, 415, 422),
        {201: {**ETAG_HEADER, **REPLAYED_HEADER}, 200: {**ETAG_HEADER, **REPLAYED_HEADER}},
        described={403: WRITE_403, 409: LEASE_CONFLICTS},
    ),
    tags=["checkpoints"],
)
def save_checkpoint(
    call: CurrentCall,
    services: Wired,
    request: Annotated[SaveCheckpointRequest, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[str]:
    """Save where the work got to."""
    outcome = operations.save(
        context_of(call, services), request, idempotent(call, idempotency_key), plain=call.plain_body
    )
    headers = {"ETag": outcome.saved.etag}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    status = 200 if outcome.saved.updated else 201
    return ok(save_result_json(outcome.saved), call.request_id, status=status, headers=headers)


@router.get(
    "/v1/checkpoints",
    summary="Look up a checkpoint",
    description=(
        "The checkpoint of (subject_id, kind) for the caller's agent, or for agent_id with the scope *. "
        'Sends ETag W/"<checkpoint_id>:<revision>"; If-None-Match with it answers 304.'
    ),
    openapi_extensions=needs(operations.lookup),
    responses=documented(
        {200: ("The checkpoint, state parsed", enveloped(CheckpointRecord)), 304: (_NOT_MODIFIED, None)},
        (400, *AUTHENTICATED_ERRORS, 404),
        {200: ETAG_HEADER, 304: ETAG_HEADER},
    ),
    tags=["checkpoints"],
)
def lookup_checkpoint(
    call: CurrentCall,
    services: Wired,
    subject_id: Annotated[SubjectId, Query()],
    kind: Annotated[Kind, Query()],
    agent_id: Annotated[Identifier | None, Query()] = None,
    if_none_match: IfNoneMatchHeader = None,
) -> Response[str]:
    """Read the latest state of one unit of work."""
    context = context_of(call, services)
    return _record_response(context, operations.lookup(context, subject_id, kind, agent_id), if_none_match)


@router.get(
    "/v1/checkpoints/<checkpoint_id>",
    summary="Get a checkpoint by id",
    description="For about a second after a create this may answer 404 (the id index is eventually consistent).",
    openapi_extensions=needs(operations.get),
    responses=documented(
        {200: ("The checkpoint, state parsed", enveloped(CheckpointRecord)), 304: (_NOT_MODIFIED, None)},
        (400, *AUTHENTICATED_ERRORS, 404),
        {200: ETAG_HEADER, 304: ETAG_HEADER},
    ),
    tags=["checkpoints"],
)
def get_checkpoint(
    call: CurrentCall, services: Wired, checkpoint_id: CheckpointIdParameter, if_none_match: IfNoneMatchHeader = None
) -> Response[str]:
    """Read a checkpoint by its id."""
    context = context_of(call, services)
    found = operations.get(context, checkpoint_id_from_path(checkpoint_id))
    return _record_response(context, found, if_none_match)


@router.delete(
    "/v1/checkpoints/<checkpoint_id>",
    summary="Delete a checkpoint",
    description=(
        'If-Match: W/"<checkpoint_id>:<revision>" (or a list of tags) makes the delete conditional (409 when no '
        "listed tag is current). While the checkpoint is leased, the Lease-Token header must carry the lease's token "
        "(409 LEASE_HELD otherwise; 409 LEASE_LOST for a token whose lease is gone). Its kept revisions go with it."
    ),
    openapi_extensions=needs(operations.delete),
    responses=documented(
        {200: ("Deleted", enveloped(DeleteResult))},
        (400, *AUTHENTICATED_ERRORS, 404, 409),
        described={
            409: (
                "LEASE_HELD: the checkpoint is leased and Lease-Token is not its token (details.lease_expires_at); "
                "LEASE_LOST: Lease-Token names a lease that is gone (taken over, released); "
                "REVISION_CONFLICT: If-Match names no current entity tag of this checkpoint (details.current_revision)"
            )
        },
    ),
    tags=["checkpoints"],
)
def delete_checkpoint(
    call: CurrentCall,
    services: Wired,
    checkpoint_id: CheckpointIdParameter,
    if_match: IfMatchHeader = None,
    lease_token: LeaseTokenHeader = None,
) -> Response[str]:
    """Delete a checkpoint (terminal ones too); its blobs are removed later by the reaper."""
    target = checkpoint_id_from_path(checkpoint_id)
    revisions = _if_match_revisions(if_match, target)
    operations.delete(context_of(call, services), target, revisions, lease_token_of(lease_token))
    return ok(DeleteResult.model_construct(checkpoint_id=target, deleted=True), call.request_id)


@router.get(
    "/v1/subjects/<subject_id>/checkpoints",
    summary="List a subject's checkpoints",
    description=(
        "Summaries (no state), newest updated_at first. Without the scope * only the caller's own agent's. "
        "Paginated with limit and an opaque cursor."
    ),
    openapi_extensions=needs(operations.list_subject),
    responses=documented({200: ("A page of summaries", paged(CheckpointSummary))}, (400, *AUTHENTICATED_ERRORS)),
    tags=["checkpoints"],
)
def list_subject_checkpoints(
    call: CurrentCall,
    services: Wired,
    subject_id: SubjectIdParameter,
    kind: Annotated[Kind | None, Query()] = None,
    status: Annotated[Status | None, Query()] = None,
    agent_id: Annotated[Identifier | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
) -> Response[str]:
    """List what is parked for a subject."""
    result = operations.list_subject(
        context_of(call, services), subject_from_path(subject_id), kind, status, agent_id, limit, cursor
    )
    return fitted_page(
        result.items,
        lambda cp: CheckpointSummary.of(cp, call.now_ms),
        call.request_id,
        result.next_cursor,
        result.cursor_after,
    )
