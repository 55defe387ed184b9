"""Response models: what every route answers, built from domain objects, and the source of the OpenAPI document.

Closed, so that the document lists every field an answer carries, with the constraints Baton keeps. The routes
build them with `of(...)` from what the domain hands back (`model_construct`: the values come from Baton itself, so
they are not validated again on the way out) and `baton_checkpoints.api.responses` serializes them.

This module holds what every route shares (the base, the envelopes, the common types) and the checkpoint routes'
answers: what a container's first save and lookup import. Each other family's answers are in a module of its own,
imported by its router's first request: `schemas_keys` (keys and OAuth grants), `schemas_blobs`, `schemas_leases`,
`schemas_tenants` (limits and usage), `schemas_audit`, `schemas_resume` (and `schemas_oauth`, JSON Schemas only).
"""

# No `from __future__ import annotations` here: pydantic would evaluate every field's annotation from its string when
# each class is created (about a fifth of the time the import spends creating these classes); without it Python builds
# them as it runs the class body. A method's annotation that names its own class is quoted.

import json
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, Saved
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import Identifier, Sha256Hex, ShortText, SubjectId, Time

T = TypeVar("T")

CheckpointId = Annotated[str, StringConstraints(pattern=r"^ckpt_[0-9a-f]{32}$")]
Revision = Annotated[int, Field(ge=1, le=limits.MAX_SAFE_INTEGER)]
TtlSeconds = Annotated[int, Field(ge=limits.MIN_TTL_SECONDS, le=limits.MAX_TTL_SECONDS)]
KeepRevisions = Annotated[int, Field(ge=limits.MIN_KEEP_REVISIONS, le=limits.MAX_KEEP_REVISIONS)]
StateBytes = Annotated[int, Field(ge=1, le=limits.MAX_STATE_BYTES)]


class ResponseModel(BaseModel):
    """Base of response documentation: no field beyond those listed.

    Each model's validator and serializer are built by its first use (`defer_build`): the routes build answers with
    `model_construct`, so a model is built when an answer is first serialized, or when the OpenAPI document is
    generated (powertools' `TypeAdapter`s of the documented responses defer too). Importing a router builds only the
    unparametrized generic envelopes: pydantic builds `DataEnvelope` when `DataEnvelope[X]` is first made."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Meta(ResponseModel):
    """Facts about the response itself."""

    request_id: Annotated[str, StringConstraints(min_length=1)]


class ListMeta(Meta):
    """Meta of a page: `next_cursor` is null on the last page."""

    next_cursor: str | None


class DataEnvelope(ResponseModel, Generic[T]):
    """Every success: `{data, meta}`."""

    data: T
    meta: Meta


class ListEnvelope(ResponseModel, Generic[T]):
    """Every page: `{data: [...], meta: {request_id, next_cursor}}`."""

    data: list[T]
    meta: ListMeta


class ErrorBody(ResponseModel):
    """The error itself; `details` is left out when there is nothing to add (never null)."""

    code: str
    message: Annotated[str, StringConstraints(min_length=1)]
    details: dict[str, Any] | SkipJsonSchema[None] = None


class ErrorEnvelope(ResponseModel):
    """Every failure: `{error: {code, message, details?}, meta}`."""

    error: ErrorBody
    meta: Meta


class SaveResult(ResponseModel):
    """What a save answers."""

    checkpoint_id: CheckpointId
    subject_id: SubjectId
    agent_id: Identifier
    kind: Kind
    revision: Revision
    status: Status
    state_hash: Sha256Hex
    state_bytes: StateBytes
    expires_at: Time
    updated: bool

    @classmethod
    def of(cls, saved: Saved) -> "SaveResult":
        """What a save answers, from what it wrote."""
        return cls.model_construct(
            checkpoint_id=saved.checkpoint_id,
            subject_id=saved.subject_id,
            agent_id=saved.agent_id,
            kind=saved.kind,
            revision=saved.revision,
            status=saved.status,
            state_hash=saved.state_hash,
            state_bytes=saved.state_bytes,
            expires_at=format_ms(saved.expires_ms),
            updated=saved.updated,
        )


class Resource(ResponseModel):
    """A blob reference as stored; on a record's reads, with a download URL (summaries leave it out)."""

    name: str
    blob_id: str
    sha256: Sha256Hex
    size: int
    media_type: str
    download_url: Annotated[
        str | None, Field(description="A presigned GET of the blob's bytes, valid 15 minutes (records only).")
    ] = None
    download_expires_at: Annotated[str | None, Field(description="When `download_url` stops working.")] = None


class SourceOut(ResponseModel):
    """Provenance as stored: only the parts the write sent."""

    host: ShortText | SkipJsonSchema[None] = None
    session: ShortText | SkipJsonSchema[None] = None
    model: ShortText | SkipJsonSchema[None] = None


class Lease(ResponseModel):
    """A live lease, without its token."""

    holder: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_HOLDER_CHARS)]
    expires_at: Time


class CheckpointSummary(ResponseModel):
    """A checkpoint without its state."""

    checkpoint_id: CheckpointId
    subject_id: SubjectId
    agent_id: Identifier
    kind: Kind
    revision: Revision
    status: Status
    state_hash: Sha256Hex
    state_bytes: StateBytes
    format: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_FORMAT_CHARS)] | None
    resources: Annotated[list[Resource], Field(max_length=limits.MAX_RESOURCES)]
    source: SourceOut | None
    ttl_seconds: TtlSeconds
    keep_revisions: KeepRevisions
    lease: Lease | None
    expires_at: Time
    created_at: Time
    updated_at: Time

    @classmethod
    def of(cls, cp: Checkpoint, now_ms: int | None = None, **extra: Any) -> Any:
        """A checkpoint's summary (no state), with its lease when one is live at `now_ms` (None: no lease shown, as
        for a kept revision); `extra` adds fields of a subclass."""
        lease = cp.live_lease(now_ms) if now_ms is not None else None
        return cls.model_construct(
            checkpoint_id=cp.checkpoint_id,
            subject_id=cp.subject_id,
            agent_id=cp.agent_id,
            kind=cp.kind,
            revision=cp.revision,
            status=cp.status,
            state_hash=cp.state_hash,
            state_bytes=cp.state_bytes,
            format=cp.format,
            resources=[Resource.model_construct(**r) for r in cp.resources],
            source=SourceOut.model_construct(None, **cp.source) if cp.source is not None else None,
            ttl_seconds=cp.ttl_seconds,
            keep_revisions=cp.keep_revisions,
            lease=None
            if lease is None
            else Lease.model_construct(holder=lease.holder, expires_at=format_ms(lease.expires_ms)),
            expires_at=format_ms(cp.expires_ms),
            created_at=format_ms(cp.created_ms),
            updated_at=format_ms(cp.updated_ms),
            **extra,
        )


class CheckpointRecord(CheckpointSummary):
    """A checkpoint with its state, parsed."""

    state: Annotated[Any, Field(description="The state as saved: any JSON value except null.")]

    @classmethod
    def of_record(cls, cp: Checkpoint) -> "CheckpointRecord":
        """A checkpoint with its state parsed (it must have been read with its state)."""
        if cp.state_text is None:
            raise ValueError("checkpoint was loaded without its state")
        record: CheckpointRecord = cls.of(cp, state=json.loads(cp.state_text))
        return record


class DeleteResult(ResponseModel):
    """What a delete answers."""

    checkpoint_id: CheckpointId
    deleted: Literal[True]


class Health(ResponseModel):
    """What the health check answers."""

    status: Literal["ok"]
    version: str
