"""Usage: a tenant's figures by day, to bill its customer by (`usage:read`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, documented, enveloped
from baton_checkpoints.api.operations import usage as operations
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas_tenants import TenantUsage
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.usage import DAY_PATTERN, MAX_RANGE_DAYS, RETENTION_DAYS

router = Router()

DayParameter = Annotated[str | None, Query(pattern=DAY_PATTERN, json_schema_extra={"format": "date"})]


@router.get(
    "/v1/usage",
    summary="Read a tenant's usage by day",
    description=(
        "Per day (UTC), from `from` to `to` (default: the 30 days ending today; at most "
        f"{MAX_RANGE_DAYS} days, none after today, kept {RETENTION_DAYS} days; a date outside these is a 400 "
        "naming it): the requests admitted, by route "
        "family (the operation's tag; `mcp` for tool calls); the DynamoDB read and write units DynamoDB reported for "
        "them; the S3 requests Baton made, their bytes, and the presigned URLs it handed out; and what the tenant "
        "stored at the day's end (today: now): bytes, live checkpoints and threads. `totals` sums the counted "
        "figures over the range. Requests and units reach the figures within 30 seconds or 100 requests per "
        "container; stored figures within about 20 seconds. tenant_id names another tenant (needs tenants:manage)."
    ),
    openapi_extensions=needs(operations.usage),
    responses=documented({200: ("The tenant's usage", enveloped(TenantUsage))}, (400, *AUTHENTICATED_ERRORS)),
    tags=["usage"],
)
def get_usage(
    call: CurrentCall,
    services: Wired,
    from_: Annotated[str | None, Query(alias="from", pattern=DAY_PATTERN, json_schema_extra={"format": "date"})] = None,
    to: DayParameter = None,
    tenant_id: Annotated[str | None, Query(pattern=limits.IDENTIFIER_PATTERN)] = None,
) -> Response[str]:
    """A tenant's usage by day."""
    tenant, days = operations.usage(context_of(call, services), tenant_id, from_, to)
    return ok(TenantUsage.of(tenant, days), call.request_id)
