"""Blobs: declare one (and get a presigned upload), read one back (with a presigned download).

The bytes never pass through the API: the client PUTs them to S3 with the upload it was given, whose signed
checksum makes S3 refuse any other bytes. A blob belongs to the agent that declared it; a save attaches it to one
checkpoint.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from baton_checkpoints.api.idempotency import IdempotencyKeyHeader, idempotency_claim
from baton_checkpoints.api.openapi import (
    AUTHENTICATED_ERRORS,
    REPLAYED_HEADER,
    WRITE_403,
    documented,
    enveloped,
)
from baton_checkpoints.api.resolver import CurrentCall, Wired, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas_blobs import BlobInfo, CreatedBlob
from baton_checkpoints.domain.blobs import PENDING_DAYS, Blob
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.ids import new_blob_id
from baton_checkpoints.domain.models import CreateBlobRequest

router = Router()

# Checked by the route itself: an id that is not a blob id names no blob, so it answers the same 404 as a missing
# one (nothing about the id's form is worth a different answer). The document states the form.
BlobIdParameter = Annotated[
    str,
    Path(
        description="blob_ and 32 lowercase hex digits; any other value names no blob and answers 404.",
        json_schema_extra={"pattern": r"^blob_[0-9a-f]{32}$"},
    ),
]


_DAY_MS = 86_400_000
_UNAVAILABLE = (
    "UNAVAILABLE: DynamoDB is throttling or failing (nothing was written), or this deployment has no blob bucket"
)


@router.post(
    "/v1/blobs",
    summary="Declare a blob and get its upload URL",
    description=(
        "Declares bytes by their SHA-256, size and media type, and answers a SigV4 presigned PUT, valid 15 "
        "minutes, that S3 accepts only with exactly those bytes and the headers given. A blob not attached to a "
        f"checkpoint within {PENDING_DAYS * 24} hours is gone. Honors an Idempotency-Key header: a replay answers the "
        "first answer (its upload URL included, which may have expired) with Idempotent-Replayed: true; the key "
        "with another request answers 422."
    ),
    openapi_extensions=needs("blobs:write"),
    responses=documented(
        {201: ("Declared (or an idempotent replay of a declaration)", enveloped(CreatedBlob))},
        (400, *AUTHENTICATED_ERRORS, 413, 415, 422),
        {201: REPLAYED_HEADER},
        described={403: WRITE_403, 503: _UNAVAILABLE},
    ),
    tags=["blobs"],
)
def create_blob(
    call: CurrentCall,
    services: Wired,
    request: Annotated[CreateBlobRequest, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[str]:
    """Declare a blob before uploading it."""
    agent_id = call.caller.agent_id
    claim = idempotency_claim(call, "POST", "/v1/blobs", idempotency_key)
    blob = Blob(
        tenant_id=call.caller.tenant_id,
        blob_id=new_blob_id(),
        agent_id=agent_id,
        sha256=request.sha256,
        size=request.size,
        media_type=request.media_type,
        created_ms=call.now_ms,
        expires_ms=call.now_ms + PENDING_DAYS * _DAY_MS,
    )
    refused = services.limiter.quota_refusal(blob.tenant_id, blob.size)
    declared = services.blobs.declare(blob, call.request_id, call.now_ms, claim, refused)
    headers = {"Idempotent-Replayed": "true"} if declared.replayed else None
    return ok(CreatedBlob.of(declared.blob, declared.upload), call.request_id, status=201, headers=headers)


@router.get(
    "/v1/blobs/<blob_id>",
    summary="Get a blob and its download URL",
    description=(
        "The blob as declared, with a presigned GET valid 15 minutes (S3 answers 404 to it until the upload has "
        "landed). A blob of another tenant, of another agent (without the scope *), or expired unattached answers "
        "404, as a missing one does."
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=documented(
        {200: ("The blob", enveloped(BlobInfo))},
        (*AUTHENTICATED_ERRORS, 404),
        described={503: _UNAVAILABLE},
    ),
    tags=["blobs"],
)
def get_blob(call: CurrentCall, services: Wired, blob_id: BlobIdParameter) -> Response[str]:
    """Read a blob's metadata and where to download it."""
    blob = services.blobs.get(call.caller.tenant_id, unquote(blob_id), call.now_ms)
    if not call.caller.can_see_agent(blob.agent_id):
        raise NotFound()  # another agent's blob answers exactly like a missing one
    return ok(BlobInfo.of(blob, services.blobs.download(blob)), call.request_id)
