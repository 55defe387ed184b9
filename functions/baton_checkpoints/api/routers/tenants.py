"""Tenants: the operator's settings of a tenant's limits (`tenants:manage`)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, documented, enveloped
from baton_checkpoints.api.operations import tenants as operations
from baton_checkpoints.api.operations.inputs import Named, identifier
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas_tenants import TenantLimits
from baton_checkpoints.api.services import default_limits
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.tenancy import LimitsRequest

router = Router()

TenantIdParameter = Annotated[
    str,
    Path(
        description="The tenant's id: 1 to 64 lowercase letters, digits, _ or -; anything else answers 400.",
        json_schema_extra={"pattern": limits.IDENTIFIER_PATTERN},
    ),
]
_DESCRIPTION = (
    "requests_per_minute and burst: the tenant's rate limit (a token bucket: burst requests at once, then "
    "requests_per_minute a minute; over it, 429 RATE_LIMITED with Retry-After). storage_bytes and checkpoints: its "
    "quotas: bytes stored and live checkpoints and threads (a write past one: 403 QUOTA_EXCEEDED, nothing written; "
    "reads and deletes never refused; usage counted from the table's stream, within about 20 s). null: the stage's "
    "default; effective: what applies."
)


def _tenant(raw: str) -> str:
    return identifier(unquote(raw), Named.path("tenant_id"))


@router.get(
    "/v1/tenants/<tenant_id>/limits",
    summary="Get a tenant's limits",
    description=_DESCRIPTION,
    openapi_extensions=needs(operations.limits),
    responses=documented({200: ("The tenant's limits", enveloped(TenantLimits))}, (400, *AUTHENTICATED_ERRORS)),
    tags=["tenants"],
)
def get_limits(call: CurrentCall, services: Wired, tenant_id: TenantIdParameter) -> Response[str]:
    """Read a tenant's limit settings and what applies."""
    tenant = _tenant(tenant_id)
    settings = operations.limits(context_of(call, services), tenant)
    return ok(TenantLimits.of(tenant, settings, default_limits(services.settings)), call.request_id)


@router.put(
    "/v1/tenants/<tenant_id>/limits",
    summary="Set a tenant's limits",
    description=(
        f"{_DESCRIPTION} The body replaces every setting: one left out or null goes back to the stage's default. "
        "Every container applies new limits within 10 seconds."
    ),
    openapi_extensions=needs(operations.set_limits),
    responses=documented(
        {200: ("The tenant's limits, as set", enveloped(TenantLimits))}, (400, *AUTHENTICATED_ERRORS, 413, 415)
    ),
    tags=["tenants"],
)
def put_limits(
    call: CurrentCall, services: Wired, tenant_id: TenantIdParameter, request: Annotated[LimitsRequest, Body()]
) -> Response[str]:
    """Set a tenant's limits."""
    tenant = _tenant(tenant_id)
    settings = operations.set_limits(context_of(call, services), tenant, request.settings())
    return ok(TenantLimits.of(tenant, settings, default_limits(services.settings)), call.request_id)
