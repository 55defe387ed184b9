"""The audit trail: recording a management action once it took place, and reading a tenant's events (route
`GET /v1/audit`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.domain.audit import Actor, Happened, Head

if TYPE_CHECKING:
    from baton_checkpoints.api.services import Services


def record(
    context: Context,
    tenant_id: str,
    action: str,
    target: dict[str, str],
    details: dict[str, Any] | None = None,
    outcome: str = "succeeded",
) -> None:
    """Append the caller's `action` on `target` to `tenant_id`'s trail (the tenant whose thing it was: an operator's
    change of another tenant's limits or keys is in that tenant's trail)."""
    record_each(context, tenant_id, action, [(target, details or {})], outcome)


def record_each(
    context: Context,
    tenant_id: str,
    action: str,
    targets: Sequence[tuple[dict[str, str], dict[str, Any]]],
    outcome: str = "succeeded",
) -> None:
    """`record` of one `action` on each of `targets` (each with its details), chained in one append: the events of
    one request that acted on several things (a prune that deleted threads)."""
    actor = Actor(context.caller.key_id, context.caller.agent_id)
    _append(context.services, tenant_id, actor, context.request_id, context.now_ms, action, targets, outcome)


def record_by(
    services: Services,
    tenant_id: str,
    actor: Actor,
    request_id: str,
    now_ms: int,
    action: str,
    target: dict[str, str],
    details: dict[str, Any] | None = None,
) -> None:
    """`record` for an actor that is not the request's key (OAuth's endpoints)."""
    _append(services, tenant_id, actor, request_id, now_ms, action, [(target, details or {})], "succeeded")


def _append(
    services: Services,
    tenant_id: str,
    actor: Actor,
    request_id: str,
    now_ms: int,
    action: str,
    targets: Sequence[tuple[dict[str, str], dict[str, Any]]],
    outcome: str,
) -> None:
    if targets:
        happened = [
            Happened(action, actor, request_id, target, outcome, details)  # type: ignore[arg-type]
            for target, details in targets
        ]
        services.audit.record(tenant_id, happened, now_ms)


@operation("audit:read")
def events(
    context: Context,
    tenant_id: str | None,
    action: str | None,
    from_ms: int | None,
    to_ms: int | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[dict[str, Any]], str | None, Head]:
    """A page of the caller's tenant's events (another's needs `tenants:manage`), newest first, and its head (a
    GetItem and one Query)."""
    tenant = context.caller.tenant_for(tenant_id, "The query parameter tenant_id")
    head = context.services.audit.head(tenant)
    found, next_cursor = context.services.audit.page(tenant, action, from_ms, to_ms, limit, cursor)
    return found, next_cursor, head
