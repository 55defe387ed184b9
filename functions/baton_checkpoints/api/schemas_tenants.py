"""What the tenant administration routes answer: a tenant's limits (`/v1/tenants/{tenant_id}/limits`) and usage
(`/v1/usage`). Imported by their routers' first request, never by a save's cold start."""

# No `from __future__ import annotations`, as in `schemas.py`: pydantic would evaluate every field's annotation
# from its string when each class is created. A method's annotation that names its own class is quoted.

from typing import Annotated

from msgspec.structs import asdict
from pydantic import Field, StringConstraints

from baton_checkpoints.api.schemas import ResponseModel
from baton_checkpoints.domain.models import Identifier
from baton_checkpoints.domain.tenancy import Limits, Settings
from baton_checkpoints.domain.usage import DAY_PATTERN, Counts, Day


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
