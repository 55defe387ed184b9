"""Response models: what every route answers, built from domain objects, and the source of the OpenAPI document.

Closed, so that the document lists every field an answer carries, with the constraints Baton keeps. The routes
build them with `of(...)` from what the domain hands back (`model_construct`: the values come from Baton itself, so
they are not validated again on the way out) and `baton_checkpoints.api.responses` serializes them.
"""

# No `from __future__ import annotations` here: pydantic would evaluate every field's annotation from its string when
# each class is created (about a fifth of the time the import spends creating these classes); without it Python builds
# them as it runs the class body. A method's annotation that names its own class is quoted.

import json
from dataclasses import asdict
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import KeyRecord, Principal, Scope, effective_scopes
from baton_checkpoints.domain.audit import Action
from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import Checkpoint, Saved
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import (
    MAX_MEDIA_TYPE_CHARS,
    Identifier,
    Presigned,
    Sha256Hex,
    ShortText,
    SubjectId,
    Time,
)
from baton_checkpoints.domain.tenancy import Limits, Settings
from baton_checkpoints.domain.usage import DAY_PATTERN, Counts, Day

T = TypeVar("T")

CheckpointId = Annotated[str, StringConstraints(pattern=r"^ckpt_[0-9a-f]{32}$")]
KeyId = Annotated[str, StringConstraints(pattern=r"^key_[0-9a-f]{32}$")]
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


class LeaseGranted(ResponseModel):
    """A lease acquired (201) or renewed by its holder (200)."""

    checkpoint_id: CheckpointId
    lease_token: Annotated[
        str,
        Field(
            description=(
                "The fencing token (`<counter>.<random>`): saves and restores send it as lease_token, a delete as "
                "the Lease-Token header. Its counter grows with every new lease of the checkpoint."
            ),
            json_schema_extra={"pattern": r"^[0-9]{1,16}\.[0-9a-f]{32}$"},
        ),
    ]
    holder: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_HOLDER_CHARS)]
    expires_at: Time


class LeaseReleased(ResponseModel):
    """A lease released (or none was live)."""

    checkpoint_id: CheckpointId
    released: Literal[True]


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

    @classmethod
    def of(cls, record: KeyRecord, **extra: Any) -> Any:
        """A key as listed (never its secret); `extra` adds fields of a subclass."""
        return cls.model_construct(
            key_id=record.key_id,
            tenant_id=record.tenant_id,
            agent_id=record.agent_id,
            scopes=sorted(record.scopes),
            not_before=format_ms(record.not_before_ms) if record.not_before_ms is not None else None,
            expires_at=format_ms(record.expires_ms) if record.expires_ms is not None else None,
            description=record.description,
            created_at=format_ms(record.created_ms),
            **extra,
        )


class Caller(ResponseModel):
    """The key a request was made with, as the gate knows it: whom it acts for and what it may do."""

    key_id: KeyId
    tenant_id: Identifier
    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1, description="The scopes the key was issued with.")]
    effective_scopes: Annotated[
        list[Scope],
        Field(description="Every scope the key holds, `*` expanded: what the key may do, route by route."),
    ]
    expires_at: Time | None

    @classmethod
    def of(cls, principal: Principal) -> Any:
        """The caller as answered."""
        return cls.model_construct(
            key_id=principal.key_id,
            tenant_id=principal.tenant_id,
            agent_id=principal.agent_id,
            scopes=sorted(principal.scopes),
            effective_scopes=sorted(effective_scopes(principal.scopes)),
            expires_at=format_ms(principal.expires_ms) if principal.expires_ms is not None else None,
        )


class CreatedKey(KeyInfo):
    """A new key: the only time its secret is shown."""

    secret: Annotated[str, StringConstraints(pattern=r"^btn_[A-Za-z0-9_-]{43}$")]


class KeyDeleted(ResponseModel):
    """What revoking a key answers."""

    key_id: KeyId
    deleted: Literal[True]


GrantId = Annotated[str, StringConstraints(pattern=r"^grant_[0-9a-f]{32}$")]


class GrantInfo(ResponseModel):
    """An OAuth grant as listed: what a person approved with a key, for which client, until when (never a token)."""

    grant_id: GrantId
    client_id: Annotated[str, Field(description="A registered client's id, or its metadata document's URL")]
    client_name: str | None
    tenant_id: Identifier
    agent_id: Identifier
    key_id: Annotated[KeyId, Field(description="The key that approved it: revoking the key revokes the grant")]
    scopes: list[Scope]
    resource: Annotated[str, Field(description="<origin>/mcp: where its access tokens are accepted")]
    created_at: Time
    expires_at: Annotated[Time, Field(description="When it lapses unless refreshed (each refresh extends it)")]

    @classmethod
    def of(cls, grant: Any) -> "GrantInfo":
        """A grant (`baton_checkpoints.domain.oauth.Grant`) as listed."""
        approval = grant.approval
        return cls.model_construct(
            grant_id=grant.grant_id,
            client_id=approval.client_id,
            client_name=approval.client_name,
            tenant_id=approval.tenant_id,
            agent_id=approval.agent_id,
            key_id=approval.key_id,
            scopes=list(approval.scopes),
            resource=approval.resource,
            created_at=format_ms(grant.created_ms),
            expires_at=format_ms(grant.expires_ms),
        )


class GrantRevoked(ResponseModel):
    """What revoking a grant answers."""

    grant_id: GrantId
    revoked: Literal[True]


class Health(ResponseModel):
    """What the health check answers."""

    status: Literal["ok"]
    version: str


BlobId = Annotated[str, StringConstraints(pattern=r"^blob_[0-9a-f]{32}$")]
BlobSize = Annotated[int, Field(ge=0, le=limits.MAX_BLOB_BYTES)]
MediaType = Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEDIA_TYPE_CHARS)]


class BlobUpload(ResponseModel):
    """How to upload a blob's bytes: a presigned PUT that S3 accepts only with these headers and these bytes."""

    url: Annotated[str, Field(description="A SigV4 presigned URL of the blob's object, valid 15 minutes.")]
    method: Literal["PUT"]
    headers: Annotated[
        dict[str, str],
        Field(
            description=(
                "Headers the PUT must carry exactly as given (they are signed): content-type, content-length, "
                "x-amz-checksum-sha256 (the SHA-256 as base64: S3 refuses other bytes), x-amz-sdk-checksum-algorithm "
                "and x-amz-tagging (the object stays pending until a checkpoint holds it)."
            )
        ),
    ]
    expires_at: Time


class BlobFacts(ResponseModel):
    """What a declared blob's bytes are (the fields every blob answer starts with)."""

    blob_id: BlobId
    sha256: Sha256Hex
    size: BlobSize
    media_type: MediaType
    created_at: Time

    @staticmethod
    def facts(blob: Blob) -> dict[str, Any]:
        """The fields of `blob`, for a subclass's builder."""
        return {
            "blob_id": blob.blob_id,
            "sha256": blob.sha256,
            "size": blob.size,
            "media_type": blob.media_type,
            "created_at": format_ms(blob.created_ms),
        }


class BlobInfo(BlobFacts):
    """A declared blob: what its bytes are, and a download URL valid 15 minutes."""

    download_url: Annotated[
        str,
        Field(description="A presigned GET of the blob's object, valid 15 minutes (404 from S3 until uploaded)."),
    ]
    download_expires_at: Time

    @classmethod
    def of(cls, blob: Blob, download: Presigned) -> "BlobInfo":
        """A blob and its download URL."""
        return cls.model_construct(
            **cls.facts(blob), download_url=download.url, download_expires_at=format_ms(download.expires_ms)
        )


class CreatedBlob(BlobFacts):
    """A blob just declared, and how to upload its bytes."""

    upload: BlobUpload

    @classmethod
    def of(cls, blob: Blob, upload: Presigned) -> "CreatedBlob":
        """A declared blob and its upload."""
        return cls.model_construct(
            **cls.facts(blob),
            upload=BlobUpload.model_construct(
                url=upload.url, method="PUT", headers=dict(upload.headers), expires_at=format_ms(upload.expires_ms)
            ),
        )


class EffectiveLimits(ResponseModel):
    """A tenant's limits as enforced: its own settings, the stage's defaults where it has none."""

    requests_per_minute: Annotated[int, Field(ge=1)]
    burst: Annotated[int, Field(ge=1)]
    storage_bytes: Annotated[int, Field(ge=0)]
    checkpoints: Annotated[int, Field(ge=0)]


class TenantLimits(ResponseModel):
    """A tenant's limit settings (null: the stage's default) and what is enforced."""

    tenant_id: Identifier
    requests_per_minute: int | None
    burst: int | None
    storage_bytes: int | None
    checkpoints: int | None
    effective: EffectiveLimits

    @classmethod
    def of(cls, tenant_id: str, settings: Settings, defaults: Limits) -> "TenantLimits":
        """The answer for a tenant's settings over the stage's defaults."""
        effective = EffectiveLimits.model_construct(**asdict(settings.over(defaults)))
        return cls.model_construct(tenant_id=tenant_id, **asdict(settings), effective=effective)


class DynamoDBUsage(ResponseModel):
    """DynamoDB capacity units consumed serving the tenant's requests, as DynamoDB reported them."""

    read_units: Annotated[float, Field(ge=0)]
    write_units: Annotated[float, Field(ge=0)]


class S3Usage(ResponseModel):
    """S3 requests Baton made serving the tenant's requests, their bytes, and the presigned URLs it handed out
    (each may become one request straight to S3; an upload's admits `presigned_upload_bytes`)."""

    requests: Annotated[int, Field(ge=0)]
    bytes_written: Annotated[int, Field(ge=0)]
    bytes_read: Annotated[int, Field(ge=0)]
    presigned_urls: Annotated[int, Field(ge=0)]
    presigned_upload_bytes: Annotated[int, Field(ge=0)]


class UsageCounts(ResponseModel):
    """What was counted over a day or a range: admitted requests by route family (the operation's tag), DynamoDB
    units, S3."""

    requests: dict[str, Annotated[int, Field(ge=0)]]
    dynamodb: DynamoDBUsage
    s3: S3Usage

    @classmethod
    def of(cls, counts: Counts) -> "UsageCounts":
        """The figures of `counts`."""
        return cls.model_construct(
            requests=dict(sorted(counts.requests.items())),
            dynamodb=DynamoDBUsage.model_construct(read_units=counts.read_units, write_units=counts.write_units),
            s3=S3Usage.model_construct(
                requests=counts.s3_requests,
                bytes_written=counts.s3_bytes_written,
                bytes_read=counts.s3_bytes_read,
                presigned_urls=counts.presigned_urls,
                presigned_upload_bytes=counts.presigned_upload_bytes,
            ),
        )


class UsageDay(UsageCounts):
    """One day (UTC): what was counted, and what the tenant stored at the day's end (today: now)."""

    date: Annotated[str, StringConstraints(pattern=DAY_PATTERN)]
    stored_bytes: Annotated[int, Field(ge=0)]
    checkpoints: Annotated[int, Field(ge=0)]
    threads: Annotated[int, Field(ge=0)]


class TenantUsage(ResponseModel):
    """A tenant's usage, day by day, and what was counted over the whole range."""

    tenant_id: Identifier
    days: list[UsageDay]
    totals: UsageCounts

    @classmethod
    def of(cls, tenant_id: str, days: list[Day]) -> "TenantUsage":
        """The answer for `days` (in order, with their levels)."""
        total = Counts()
        for day in days:
            total.add(day.counts)
        return cls.model_construct(
            tenant_id=tenant_id,
            days=[
                UsageDay.model_construct(
                    date=day.day,
                    **dict(UsageCounts.of(day.counts)),
                    stored_bytes=day.level.stored_bytes,
                    checkpoints=day.level.checkpoints,
                    threads=day.level.threads,
                )
                for day in days
            ],
            totals=UsageCounts.of(total),
        )


class AuditActor(ResponseModel):
    """Who acted: the key's id and agent (null: Baton itself, ending a grant whose token was used twice)."""

    key_id: str | None
    agent_id: str | None


class AuditEvent(ResponseModel):
    """One management action, chained to the tenant's event before it: `hash` is the SHA-256 (hex) of this object
    without `hash`, as JSON with its keys sorted, no spaces, UTF-8 (`prev_hash` of the first: 64 zeros)."""

    seq: Annotated[int, Field(ge=1)]
    action: Action
    at: Time
    request_id: str
    actor: AuditActor
    target: dict[str, str]
    outcome: Literal["succeeded", "partial"]
    details: dict[str, Any]
    prev_hash: Sha256Hex
    prev_at: Time | None
    """The time of the event before (null for the first): a verifier knows whether it may have expired."""
    hash: Sha256Hex


class AuditHead(ResponseModel):
    """The tenant's last event: its number, hash and time (0, 64 zeros and null before the first)."""

    seq: Annotated[int, Field(ge=0)]
    hash: Sha256Hex
    at: Time | None


class AuditMeta(ListMeta):
    """A page's meta, and the tenant's head: the newest event of an unfiltered first page is it (or a later one,
    while the head lags an append)."""

    head: AuditHead


class AuditPage(ResponseModel):
    """A page of audit events, newest first."""

    data: list[AuditEvent]
    meta: AuditMeta
