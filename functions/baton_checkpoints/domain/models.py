"""Request and response models, named exactly as the contract names them.

Requests are strict (no type coercion: `"60"` is not an integer) and closed (unknown fields are rejected), so
that a typo or a wrong type never passes silently.
"""

# No `from __future__ import annotations` here, as in `api/schemas.py`: pydantic would evaluate every field's
# annotation from its string when each class is created.

import re
from typing import Annotated, Any, Final

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import Scope
from baton_checkpoints.domain.lifecycle import Kind, Status

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

MAX_REPR_CHARS: Final = 100
"""Longest text a request's repr shows as it is (an id, a name); longer text is shown by its length."""


class RequestModel(BaseModel):
    """Base of request bodies: strict types, unknown fields rejected.

    Each model's validator and serializer are built by its first use (`defer_build`, which subclasses inherit), not
    by the import: a container's first save builds the save's body and nothing of the other routes' bodies, a
    lookup none at all. (Powertools validates a route's body with a `TypeAdapter` of its own, which builds the
    body's schema once for itself: building the model too, at import, was work no request used.)"""

    model_config = ConfigDict(strict=True, extra="forbid", defer_build=True)

    def __repr_args__(self) -> Any:
        """Field values in a repr, short: powertools formats the route's arguments into a debug message on every
        request, logged or not, and the repr of a whole body is both slow and content for a log. A state is shown
        by its type; containers, nested models and text over `MAX_REPR_CHARS` by their type and size; the rest as
        it is."""
        for name, value in super().__repr_args__():
            if name == "state":
                yield name, f"<{type(value).__name__}>"
            elif isinstance(value, str) and len(value) > MAX_REPR_CHARS:
                yield name, f"<str of {len(value)} chars>"
            elif isinstance(value, dict | list | tuple | set | frozenset):
                yield name, f"<{type(value).__name__} of {len(value)}>"
            elif isinstance(value, BaseModel):
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


LeaseToken = Annotated[str, StringConstraints(min_length=1, max_length=200)]
"""A lease's token as a write presents it (`<counter>.<random>`; anything else simply matches no lease)."""


class SaveCheckpointRequest(RequestModel):
    """Body of `POST /v1/checkpoints`: upsert on (tenant, subject_id, agent_id, kind)."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "subject_id": "ticket-4411",
                    "kind": "task_state",
                    "state": {"step": 3, "of": 7, "next": "rollback smoke"},
                    "expected_revision": 2,
                    "keep_revisions": 5,
                }
            ]
        },
    )

    subject_id: SubjectId
    kind: Kind
    state: Annotated[Any, Field(description="Any JSON value except null.")]
    ttl_seconds: Annotated[int, Field(ge=limits.MIN_TTL_SECONDS, le=limits.MAX_TTL_SECONDS)] | None = None
    agent_id: Identifier | None = None
    expected_revision: Annotated[int, Field(ge=0, le=limits.MAX_SAFE_INTEGER)] | None = None
    status: Status | None = None
    format: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_FORMAT_CHARS)] | None = None
    # An empty list by a lambda, not `list`: building the model, pydantic reads its factory's signature, and reading
    # a builtin's has `inspect` compile `tokenize`'s patterns (~2 ms of a container's first save).
    resources: Annotated[
        list[ResourceRef],
        Field(
            max_length=limits.MAX_RESOURCES,
            description=(
                "References to blobs (POST /v1/blobs) whose upload has landed, each with the SHA-256, size and media "
                "type it was declared with; names and blob ids unique. A blob belongs to one checkpoint."
            ),
        ),
    ] = Field(default_factory=lambda: [])
    source: Source | None = None
    lease_token: LeaseToken | None = None
    keep_revisions: Annotated[int, Field(ge=limits.MIN_KEEP_REVISIONS, le=limits.MAX_KEEP_REVISIONS)] | None = None

    @field_validator("state")
    @classmethod
    def _state_not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null")
        return value


class RestoreRequest(RequestModel):
    """Body of `POST /v1/checkpoints/{checkpoint_id}/restore`: write a kept revision's state as a new revision."""

    model_config = ConfigDict(
        strict=True, extra="forbid", json_schema_extra={"examples": [{"revision": 2, "expected_revision": 5}]}
    )

    revision: Annotated[
        int, Field(ge=1, le=limits.MAX_SAFE_INTEGER, description="The kept revision whose state is written again.")
    ]
    expected_revision: (
        Annotated[
            int,
            Field(
                ge=1,
                le=limits.MAX_SAFE_INTEGER,
                description="The checkpoint's current revision; another answers 409 REVISION_CONFLICT.",
            ),
        ]
        | None
    ) = None
    lease_token: (
        Annotated[LeaseToken, Field(description="The lease's token, required while the checkpoint is leased.")] | None
    ) = None


HolderText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_HOLDER_CHARS, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$"),
]


class AcquireLeaseRequest(RequestModel):
    """Body of `POST /v1/checkpoints/{checkpoint_id}/lease`."""

    model_config = ConfigDict(
        strict=True, extra="forbid", json_schema_extra={"examples": [{"ttl_seconds": 300, "holder": "worker-7"}]}
    )

    ttl_seconds: Annotated[
        int,
        Field(
            ge=limits.MIN_LEASE_SECONDS,
            le=limits.MAX_LEASE_SECONDS,
            description="How long the lease lasts from now (a renewal counts from now too).",
        ),
    ]
    holder: (
        Annotated[
            HolderText,
            Field(
                description=(
                    "Who works on the checkpoint (an agent's session, a worker): the same holder renews its lease, any "
                    "other waits. Defaults to the calling key's key_id."
                )
            ),
        ]
        | None
    ) = None


class CreateKeyRequest(RequestModel):
    """Body of `POST /v1/keys`."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "agent_id": "planner",
                    "scopes": ["checkpoints:read", "checkpoints:write"],
                    "description": "the planner agent",
                    "expires_at": "2027-06-01T00:00:00Z",
                }
            ]
        },
    )

    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(Scope.__args__))]
    tenant_id: Identifier | None = None
    not_before: RequestTime | None = None
    expires_at: RequestTime | None = None
    description: Annotated[str, StringConstraints(max_length=limits.MAX_DESCRIPTION_CHARS)] | None = None


MAX_MEDIA_TYPE_CHARS: Final = 200
"""Longest `media_type` of a blob (as `resources` allow)."""
_MEDIA_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"[ !#-\[\]-~]*"'
_PARAMETER = rf" *; *{_TOKEN}=(?:{_TOKEN}|{_QUOTED})"
MEDIA_TYPE_PATTERN = rf"^{_MEDIA_TOKEN}/{_MEDIA_TOKEN}(?:{_PARAMETER})*$"
"""A MIME type (RFC 6838 names, RFC 9110 parameters in printable ASCII), e.g. `application/pdf` or
`text/plain; charset=utf-8`: what S3 stores as the object's Content-Type and signs into the upload URL."""
_MEDIA_TYPE = MEDIA_TYPE_PATTERN.removeprefix("^").removesuffix("$")
"""Compiled by the first blob declared (`re`'s cache keeps it), not by the import."""


class CreateBlobRequest(RequestModel):
    """Body of `POST /v1/blobs`: what the bytes about to be uploaded are."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                    "size": 4,
                    "media_type": "text/plain",
                }
            ]
        },
    )

    sha256: Annotated[Sha256Hex, Field(description="SHA-256 of the bytes, 64 lowercase hex digits.")]
    size: Annotated[int, Field(ge=0, le=limits.MAX_BLOB_BYTES, description="Length of the bytes (up to 5 GiB).")]
    media_type: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_MEDIA_TYPE_CHARS),
        Field(
            description="A MIME type such as application/pdf or text/plain; charset=utf-8.",
            json_schema_extra={"pattern": MEDIA_TYPE_PATTERN},
        ),
    ]

    @field_validator("media_type")
    @classmethod
    def _media_type(cls, value: str) -> str:
        # The documented pattern, checked here for a sentence a person can act on (pydantic's would quote the regex).
        if not re.fullmatch(_MEDIA_TYPE, value):
            raise ValueError("must be a MIME type such as application/pdf or text/plain; charset=utf-8")
        return value


class Presigned(Struct, frozen=True):
    """A presigned S3 request as a client must send it: the URL, the headers it was signed with, and when it stops
    working (the signing time, to the second, plus its validity)."""

    url: str
    method: str
    headers: tuple[tuple[str, str], ...]
    expires_ms: int
