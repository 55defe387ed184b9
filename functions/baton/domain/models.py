"""Request and response models, named exactly as the contract names them.

Requests are strict (no type coercion: `"60"` is not an integer) and closed (unknown fields are rejected), so
that a typo or a wrong type never passes silently.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic.json_schema import SkipJsonSchema

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
Time = Annotated[
    str,
    Field(
        description="RFC 3339 UTC with milliseconds and Z, e.g. 2026-07-30T11:48:04.652Z",
        json_schema_extra={
            "format": "date-time",
            "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$",
        },
    ),
]
"""A time Baton writes."""

_DATE = (
    r"(?:(?!0000)[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
    r"-02-29)"
)
_TIME_OF_DAY = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?"
_ZONE = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
RFC3339_PATTERN = rf"^{_DATE}[Tt ]{_TIME_OF_DAY}{_ZONE}$"
"""RFC 3339 `date-time` as `clock.parse_time` reads it: a real calendar date of years 0001-9999 (leap days
included), no leap second, up to nine fraction digits, `Z` or an offset; `T` may be `t` or a space."""

RequestTime = Annotated[
    str,
    Field(
        description=(
            "An RFC 3339 time with a zone (Z or an offset), e.g. 2026-07-30T11:48:04.652Z; it must lie within years "
            "0001-9999 once converted to UTC."
        ),
        json_schema_extra={"pattern": RFC3339_PATTERN},
    ),
]
"""A time a client sends: the document states the form; `clock.parse_time` enforces it with its own message."""


class RequestModel(BaseModel):
    """Base of request bodies: strict types, unknown fields rejected."""

    model_config = ConfigDict(strict=True, extra="forbid")

    def __repr_args__(self) -> Any:
        """Field values in a repr, with a state shown only by its type: powertools formats the route's arguments
        into a debug message on every request, and a repr of a 3 MB state is both slow and content for a log."""
        for name, value in super().__repr_args__():
            if name == "state":
                yield name, f"<{type(value).__name__}>"
            else:
                yield name, value


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
    resources: Annotated[
        list[ResourceRef],
        Field(
            max_length=limits.MAX_RESOURCES,
            description=(
                "References to uploaded blobs. Blob uploads are not available yet, so no reference can name a landed "
                "upload: any item answers 400 naming /resources/0/blob_id."
            ),
            json_schema_extra={"maxItems": 0},
        ),
    ] = Field(default_factory=list)
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
    not_before: RequestTime | None = None
    expires_at: RequestTime | None = None
    description: Annotated[str, StringConstraints(max_length=limits.MAX_DESCRIPTION_CHARS)] | None = None


# Responses (they document the API; the routes build plain dicts of the same shape). Closed, so that the document
# lists every field an answer carries, with the constraints Baton keeps.

T = TypeVar("T")

CheckpointId = Annotated[str, StringConstraints(pattern=r"^ckpt_[0-9a-f]{32}$")]
KeyId = Annotated[str, StringConstraints(pattern=r"^key_[0-9a-f]{32}$")]
Revision = Annotated[int, Field(ge=1, le=limits.MAX_SAFE_INTEGER)]
TtlSeconds = Annotated[int, Field(ge=limits.MIN_TTL_SECONDS, le=limits.MAX_TTL_SECONDS)]
KeepRevisions = Annotated[int, Field(ge=limits.MIN_KEEP_REVISIONS, le=limits.MAX_KEEP_REVISIONS)]
StateBytes = Annotated[int, Field(ge=1, le=limits.MAX_INLINE_STATE_BYTES)]


class ResponseModel(BaseModel):
    """Base of response documentation: no field beyond those listed."""

    model_config = ConfigDict(extra="forbid")


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


class Resource(ResponseModel):
    """A blob reference as stored."""

    name: str
    blob_id: str
    sha256: Sha256Hex
    size: int
    media_type: str


class SourceOut(ResponseModel):
    """Provenance as stored: only the parts the write sent."""

    host: ShortText | SkipJsonSchema[None] = None
    session: ShortText | SkipJsonSchema[None] = None
    model: ShortText | SkipJsonSchema[None] = None


class Lease(ResponseModel):
    """A live lease, without its token."""

    holder: str
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


class CheckpointRecord(CheckpointSummary):
    """A checkpoint with its state, parsed."""

    state: Annotated[Any, Field(description="The state as saved: any JSON value except null.")]


class DeleteResult(ResponseModel):
    """What a delete answers."""

    checkpoint_id: CheckpointId
    deleted: Literal[True]


class KeyInfo(ResponseModel):
    """An API key as listed: never its secret."""

    key_id: KeyId
    tenant_id: Identifier
    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1)]
    not_before: Time | None
    expires_at: Time | None
    description: Annotated[str, StringConstraints(max_length=limits.MAX_DESCRIPTION_CHARS)] | None
    created_at: Time


class CreatedKey(KeyInfo):
    """A new key: the only time its secret is shown."""

    secret: Annotated[str, StringConstraints(pattern=r"^btn_[A-Za-z0-9_-]{43}$")]


class KeyDeleted(ResponseModel):
    """What revoking a key answers."""

    key_id: KeyId
    deleted: Literal[True]


class Health(ResponseModel):
    """What the health check answers."""

    status: Literal["ok"]
    version: str
