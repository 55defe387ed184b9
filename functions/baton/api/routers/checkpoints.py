"""Checkpoints: save, lookup, get by id, delete, and a subject's list."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from baton.api.openapi import AUTHENTICATED_ERRORS, ETAG_HEADER, REPLAYED_HEADER, responses
from baton.api.resolver import current_call, needs
from baton.api.responses import not_modified, ok, page
from baton.api.services import services
from baton.domain import limits
from baton.domain.canonical import pointer
from baton.domain.checkpoints import (
    CheckpointKey,
    etag_for,
    parse_etag,
    parse_etag_list,
    plan_save,
    request_fingerprint,
)
from baton.domain.errors import NotFound, ValidationFailed
from baton.domain.ids import CHECKPOINT_ID_PATTERN
from baton.domain.lifecycle import Kind, Status
from baton.domain.models import (
    CheckpointRecord,
    CheckpointSummary,
    DataEnvelope,
    DeleteResult,
    Identifier,
    ListEnvelope,
    SaveCheckpointRequest,
    SaveResult,
    SubjectId,
)
from baton.store.checkpoints import IdempotencyClaim

router = Router()

# Path parameters are checked by the routes themselves, after percent-decoding and with their own messages; the
# document states the same rules (json_schema_extra documents without validating the raw value again).
CheckpointIdParameter = Annotated[
    str,
    Path(
        description="ckpt_ and 32 lowercase hex digits; anything else answers 400.",
        json_schema_extra={"pattern": r"^ckpt_[0-9a-f]{32}$"},
    ),
]
SubjectIdParameter = Annotated[
    str,
    Path(
        description=(
            f"1 to {limits.MAX_SUBJECT_ID_CHARS} characters without control characters, percent-encoded; "
            "anything else answers 400."
        ),
        json_schema_extra={
            "minLength": 1,
            "maxLength": limits.MAX_SUBJECT_ID_CHARS,
            "pattern": r"^[^\x00-\x1f\x7f-\x9f]+$",
        },
    ),
]
CursorParameter = Annotated[
    str | None,
    Query(
        max_length=2048,
        description=(
            "Opaque: meta.next_cursor of the previous page of the same query, unchanged. It is bound to the tenant "
            "and the query; any other value answers 400 naming cursor."
        ),
    ),
]

_PRINTABLE = re.compile(rf"[\x20-\x7e]{{1,{limits.IDEMPOTENCY_KEY_MAX_CHARS}}}\Z")


def _idempotency_claim(method: str, path: str) -> IdempotencyClaim | None:
    value = router.current_event.headers.get("idempotency-key")
    if value is None:
        return None
    if not _PRINTABLE.match(value):
        raise ValidationFailed.single(
            "/Idempotency-Key",
            f"The Idempotency-Key header must be 1 to {limits.IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters.",
            "header",
        )
    call = current_call(router)
    return IdempotencyClaim(
        key=value,
        agent_id=call.caller.agent_id,
        fingerprint=request_fingerprint(method, path, call.body, call.plain_body),
    )


def _checkpoint_id(raw: str) -> str:
    checkpoint_id = unquote(raw)
    if not CHECKPOINT_ID_PATTERN.match(checkpoint_id):
        raise ValidationFailed.single(
            "/checkpoint_id",
            "The path parameter checkpoint_id must be ckpt_ followed by 32 lowercase hex digits.",
            "path",
        )
    return checkpoint_id


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


def _record_response(record: dict[str, object], etag: str) -> Response[str]:
    if _matches(router.current_event.headers.get("if-none-match"), etag):
        return not_modified(etag)
    return ok(record, current_call(router).request_id, headers={"ETag": etag})


@router.post(
    "/v1/checkpoints",
    summary="Save a checkpoint",
    description=(
        "Upserts on (tenant, subject_id, agent_id, kind): 201 when created, 200 when updated, with the same "
        "checkpoint_id. Honors an Idempotency-Key header (1-200 printable characters, 24 hours)."
    ),
    openapi_extensions=needs("checkpoints:write", acts_for=("agent_id",)),
    responses=responses(
        {
            201: ("Created", DataEnvelope[SaveResult]),
            200: ("Updated (or an idempotent replay of an update)", DataEnvelope[SaveResult]),
        },
        (400, *AUTHENTICATED_ERRORS, 409, 413, 415, 422),
        {201: {**ETAG_HEADER, **REPLAYED_HEADER}, 200: {**ETAG_HEADER, **REPLAYED_HEADER}},
    ),
    tags=["checkpoints"],
)
def save_checkpoint(request: Annotated[SaveCheckpointRequest, Body()]) -> Response[str]:
    """Save where the work got to."""
    call = current_call(router)
    principal = call.caller
    agent_id = principal.agent_for_write(request.agent_id)
    plan = plan_save(request, principal.tenant_id, agent_id, call.request_id, call.now_ms, call.plain_body)
    claim = _idempotency_claim("POST", "/v1/checkpoints")
    outcome = services().checkpoints.save(plan, claim)
    headers = {"ETag": etag_for(outcome.result["checkpoint_id"], outcome.result["revision"])}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    return ok(outcome.result, call.request_id, status=201 if outcome.created else 200, headers=headers)


@router.get(
    "/v1/checkpoints",
    summary="Look up a checkpoint",
    description=(
        "The checkpoint of (subject_id, kind) for the caller's agent, or for agent_id with the scope *. "
        'Sends ETag W/"<checkpoint_id>:<revision>"; If-None-Match with it answers 304.'
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=responses(
        {200: ("The checkpoint, state parsed", DataEnvelope[CheckpointRecord]), 304: ("Not modified", None)},
        (400, *AUTHENTICATED_ERRORS, 404),
        {200: ETAG_HEADER, 304: ETAG_HEADER},
    ),
    tags=["checkpoints"],
)
def lookup_checkpoint(
    subject_id: Annotated[SubjectId, Query()],
    kind: Annotated[Kind, Query()],
    agent_id: Annotated[Identifier | None, Query()] = None,
) -> Response[str]:
    """Read the latest state of one unit of work."""
    call = current_call(router)
    principal = call.caller
    key = CheckpointKey(principal.tenant_id, subject_id, principal.agent_for_read(agent_id), kind)
    found = services().checkpoints.get(key, call.now_ms)
    return _record_response(found.record(), found.etag)


@router.get(
    "/v1/checkpoints/<checkpoint_id>",
    summary="Get a checkpoint by id",
    description="For about a second after a create this may answer 404 (the id index is eventually consistent).",
    openapi_extensions=needs("checkpoints:read"),
    responses=responses(
        {200: ("The checkpoint, state parsed", DataEnvelope[CheckpointRecord]), 304: ("Not modified", None)},
        (400, *AUTHENTICATED_ERRORS, 404),
        {200: ETAG_HEADER, 304: ETAG_HEADER},
    ),
    tags=["checkpoints"],
)
def get_checkpoint(checkpoint_id: CheckpointIdParameter) -> Response[str]:
    """Read a checkpoint by its id."""
    call = current_call(router)
    principal = call.caller
    found = services().checkpoints.get_by_id(principal.tenant_id, _checkpoint_id(checkpoint_id), call.now_ms)
    if not principal.can_see_agent(found.agent_id):
        raise NotFound()  # another agent's checkpoint answers exactly like a missing one
    return _record_response(found.record(), found.etag)


@router.delete(
    "/v1/checkpoints/<checkpoint_id>",
    summary="Delete a checkpoint",
    description='If-Match: W/"<checkpoint_id>:<revision>" makes the delete conditional (409 when stale).',
    openapi_extensions=needs("checkpoints:delete"),
    responses=responses({200: ("Deleted", DataEnvelope[DeleteResult])}, (400, *AUTHENTICATED_ERRORS, 404, 409)),
    tags=["checkpoints"],
)
def delete_checkpoint(checkpoint_id: CheckpointIdParameter) -> Response[str]:
    """Delete a checkpoint (terminal ones too); its blobs are removed later by the reaper."""
    call = current_call(router)
    principal = call.caller
    target = _checkpoint_id(checkpoint_id)
    revisions = _if_match_revisions(router.current_event.headers.get("if-match"), target)
    services().checkpoints.delete(
        principal.tenant_id,
        target,
        call.now_ms,
        only_agent=None if principal.is_wildcard else principal.agent_id,
        if_match_revisions=revisions,
    )
    return ok({"checkpoint_id": target, "deleted": True}, call.request_id)


@router.get(
    "/v1/subjects/<subject_id>/checkpoints",
    summary="List a subject's checkpoints",
    description=(
        "Summaries (no state), newest updated_at first. Without the scope * only the caller's own agent's. "
        "Paginated with limit and an opaque cursor."
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=responses({200: ("A page of summaries", ListEnvelope[CheckpointSummary])}, (400, *AUTHENTICATED_ERRORS)),
    tags=["checkpoints"],
)
def list_subject_checkpoints(
    subject_id: SubjectIdParameter,
    kind: Annotated[Kind | None, Query()] = None,
    status: Annotated[Status | None, Query()] = None,
    agent_id: Annotated[Identifier | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
) -> Response[str]:
    """List what is parked for a subject."""
    call = current_call(router)
    principal = call.caller
    subject = unquote(subject_id)
    if (
        not subject
        or len(subject) > limits.MAX_SUBJECT_ID_CHARS
        or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in subject)
    ):
        raise ValidationFailed.single(
            pointer("subject_id"),
            f"The path parameter subject_id must be 1 to {limits.MAX_SUBJECT_ID_CHARS} characters without control "
            "characters.",
            "path",
        )
    only_agent = principal.agent_for_list(agent_id, "checkpoints")
    result = services().checkpoints.list_subject(
        principal.tenant_id, subject, call.now_ms, only_agent, kind, status, limit, cursor
    )
    return page([cp.summary() for cp in result.items], call.request_id, result.next_cursor)
