"""Request and response models, named exactly as the contract names them.

Requests are strict (no type coercion: `"60"` is not an integer) and closed (unknown fields are rejected), so
that a typo or a wrong type never passes silently.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from baton.domain import limits
from baton.domain.access import Scope
from baton.domain.lifecycle import Kind, Status

SubjectId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_SUBJECT_ID_CHARS, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$"),
]
Identifier = Annotated[str, StringConstraints(pattern=limits.IDENTIFIER_PATTERN)]
ShortText = Annotated[str, StringConstraints(max_length=limits.MAX_SOURCE_FIELD_CHARS)]
Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Time = Annotated[str, Field(description="RFC 3339 UTC with milliseconds and Z, e.g. 2026-07-30T11:48:04.652Z")]


class RequestModel(BaseModel):
    """Base of request bodies: strict types, unknown fields rejected."""

    model_config = ConfigDict(strict=True, extra="forbid")


class Source(RequestModel):
    """Provenance of a write: which host, session and model wrote it."""

    host: ShortText | None = None
    session: ShortText | None = None
    model: ShortText | None = None


class ResourceRef(RequestModel):
    """A reference to an uploaded blob."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    blob_id: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    sha256: Sha256Hex
    size: Annotated[int, Field(ge=0, le=limits.MAX_BLOB_BYTES)]
    media_type: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class SaveCheckpointRequest(RequestModel):
    """Body of `POST /v1/checkpoints`: upsert on (tenant, subject_id, agent_id, kind)."""

    subject_id: SubjectId
    kind: Kind
    state: Annotated[Any, Field(description="Any JSON value except null.")]
    ttl_seconds: Annotated[int, Field(ge=limits.MIN_TTL_SECONDS, le=limits.MAX_TTL_SECONDS)] | None = None
    agent_id: Identifier | None = None
    expected_revision: Annotated[int, Field(ge=0, le=limits.MAX_SAFE_INTEGER)] | None = None
    status: Status | None = None
    format: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_FORMAT_CHARS)] | None = None
    resources: Annotated[list[ResourceRef], Field(max_length=limits.MAX_RESOURCES)] = Field(default_factory=list)
    source: Source | None = None
    lease_token: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    keep_revisions: Annotated[int, Field(ge=limits.MIN_KEEP_REVISIONS, le=limits.MAX_KEEP_REVISIONS)] | None = None

    @field_validator("state")
    @classmethod
    def _state_not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null")
        return value


class CreateKeyRequest(RequestModel):
    """Body of `POST /v1/keys`."""

    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(Scope.__args__))]
    tenant_id: Identifier | None = None
    not_before: Time | None = None
    expires_at: Time | None = None
    description: Annotated[str, StringConstraints(max_length=limits.MAX_DESCRIPTION_CHARS)] | None = None


# Responses (they document the API; the routes build plain dicts of the same shape).

T = TypeVar("T")


class Meta(BaseModel):
    """Facts about the response itself."""

    request_id: str


class ListMeta(Meta):
    """Meta of a page: `next_cursor` is null on the last page."""

    next_cursor: str | None


class DataEnvelope(BaseModel, Generic[T]):
    """Every success: `{data, meta}`."""

    data: T
    meta: Meta


class ListEnvelope(BaseModel, Generic[T]):
    """Every page: `{data: [...], meta: {request_id, next_cursor}}`."""

    data: list[T]
    meta: ListMeta


class ErrorBody(BaseModel):
    """The error itself."""

    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorEnvelope(BaseModel):
    """Every failure: `{error: {code, message, details?}, meta}`."""

    error: ErrorBody
    meta: Meta


class SaveResult(BaseModel):
    """What a save answers."""

    checkpoint_id: str
    subject_id: str
    agent_id: str
    kind: Kind
    revision: int
    status: Status
    state_hash: str
    state_bytes: int
    expires_at: Time
    updated: bool


class Resource(BaseModel):
    """A blob reference as stored."""

    name: str
    blob_id: str
    sha256: str
    size: int
    media_type: str


class SourceOut(BaseModel):
    """Provenance as stored."""

    host: str | None = None
    session: str | None = None
    model: str | None = None


class Lease(BaseModel):
    """A live lease, without its token."""

    holder: str
    expires_at: Time


class CheckpointSummary(BaseModel):
    """A checkpoint without its state."""

    checkpoint_id: str
    subject_id: str
    agent_id: str
    kind: Kind
    revision: int
    status: Status
    state_hash: str
    state_bytes: int
    format: str | None
    resources: list[Resource]
    source: SourceOut | None
    ttl_seconds: int
    keep_revisions: int
    lease: Lease | None
    expires_at: Time
    created_at: Time
    updated_at: Time


class CheckpointRecord(CheckpointSummary):
    """A checkpoint with its state, parsed."""

    state: Any


class DeleteResult(BaseModel):
    """What a delete answers."""

    checkpoint_id: str
    deleted: bool


class KeyInfo(BaseModel):
    """An API key as listed: never its secret."""

    key_id: str
    tenant_id: str
    agent_id: str
    scopes: list[str]
    not_before: Time | None
    expires_at: Time | None
    description: str | None
    created_at: Time


class CreatedKey(KeyInfo):
    """A new key: the only time its secret is shown."""

    secret: str


class KeyDeleted(BaseModel):
    """What revoking a key answers."""

    key_id: str
    deleted: bool


class Health(BaseModel):
    """What the health check answers."""

    status: str
    version: str
