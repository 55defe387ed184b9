"""A tenant's usage by day (route `GET /v1/usage`)."""

from __future__ import annotations

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.domain.usage import Day, day_of, day_range, levels

TENANT_QUERY = "The query parameter tenant_id"


@operation("usage:read")
def usage(context: Context, tenant_id: str | None, first: str | None, last: str | None) -> tuple[str, list[Day]]:
    """The caller's tenant's usage (another's needs `tenants:manage`) on each day from `first` to `last` (UTC
    dates; `domain/usage.py: day_range` has the defaults and bounds): a GetItem and one Query."""
    tenant = context.caller.tenant_for(tenant_id, TENANT_QUERY)
    wanted = day_range(first, last, day_of(context.now_ms))
    totals, days = context.services.tenants.usage(tenant, wanted.first.isoformat())
    return tenant, levels(totals, days, wanted.days())
