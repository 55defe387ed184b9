"""Subjects: purge everything a tenant keeps about one subject, for every agent."""

from __future__ import annotations

import time
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import Field

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, documented, enveloped
from baton_checkpoints.api.operations.audit import record
from baton_checkpoints.api.paths import SubjectIdParameter, subject_from_path
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas import ResponseModel
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.models import SubjectId

router = Router()


class PurgeResult(ResponseModel):
    """What a purge answers."""

    subject_id: SubjectId
    deleted_checkpoints: Annotated[
        int,
        Field(
            ge=0,
            description=(
                "Checkpoints this call deleted (live or expired, of every agent). A repeat counts only what was "
                "left; a page deleted while DynamoDB's answer to it was lost is counted by neither."
            ),
        ),
    ]
    complete: Annotated[
        bool,
        Field(
            description=(
                "True when nothing of the subject is left. False when the call stopped early (before API "
                "Gateway's 30 s limit, or on a transient failure after some progress): send it again to continue."
            )
        ),
    ]


@router.delete(
    "/v1/subjects/<subject_id>",
    summary="Purge a subject",
    description=(
        "Removes every checkpoint of the subject in the caller's tenant, for every agent, with their revisions and "
        "leases, and the idempotency records of the writes made to it (a retry with such a key is then a new "
        "request); their blobs and stored states are removed shortly after. Works page by page; past "
        f"{limits.PURGE_SECONDS} s (well before API Gateway's 30 s limit) it stops with complete false, and repeating "
        "it continues. Idempotent: a subject with nothing left (or never used) answers deleted_checkpoints 0 and "
        "complete true, never 404."
    ),
    openapi_extensions=needs("subjects:purge"),
    responses=documented(
        {200: ("Purged, or partly purged (complete false)", enveloped(PurgeResult))},
        (400, *AUTHENTICATED_ERRORS),
        described={
            503: (
                "UNAVAILABLE: DynamoDB is throttling or failing and this call deleted nothing (a purge that got "
                "somewhere, deletes whose answer was lost included, answers 200 with complete false)"
            )
        },
    ),
    tags=["subjects"],
)
def purge_subject(call: CurrentCall, services: Wired, subject_id: SubjectIdParameter) -> Response[str]:
    """Remove everything kept about a subject."""
    # The deadline runs from here, before anything is read, so that the whole request ends well inside 30 s.
    deadline = time.monotonic() + limits.PURGE_SECONDS
    subject = subject_from_path(subject_id)
    purged = services.purger.purge(call.caller.tenant_id, subject, deadline)
    details = {"deleted_checkpoints": purged.deleted_checkpoints, "complete": purged.complete}
    target = {"type": "subject", "id": subject}
    outcome = "succeeded" if purged.complete else "partial"
    record(context_of(call, services), call.caller.tenant_id, "subject.purged", target, details, outcome)
    result = PurgeResult.model_construct(
        subject_id=subject, deleted_checkpoints=purged.deleted_checkpoints, complete=purged.complete
    )
    return ok(result, call.request_id)
