"""A tenant's limits, managed by the operator (routes `/v1/tenants/{tenant_id}/limits`)."""

from __future__ import annotations

from msgspec.structs import asdict

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.api.operations.audit import record
from baton_checkpoints.domain.tenancy import Settings

TENANT_PATH = "The path parameter tenant_id"


@operation("tenants:manage")
def limits(context: Context, tenant_id: str) -> Settings:
    """The tenant's settings (one GetItem)."""
    tenant = context.caller.tenant_for(tenant_id, TENANT_PATH)
    return context.services.tenants.settings(tenant).settings


@operation("tenants:manage")
def set_limits(context: Context, tenant_id: str, settings: Settings) -> Settings:
    """Replace the tenant's settings (None: the stage's default). Every container applies them at its next take of
    the tenant's requests (within `SHARE_SECONDS`), this one at once."""
    tenant = context.caller.tenant_for(tenant_id, TENANT_PATH)
    stored = context.services.tenants.put_settings(tenant, settings).settings
    context.services.limiter.forget(tenant)
    record(context, tenant, "limits.changed", {"type": "tenant", "id": tenant}, asdict(stored))
    return stored
