"""The audit trail: a tenant's management events, hash-chained (`audit:read`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, CursorParameter, documented
from baton_checkpoints.api.operations import audit as operations
from baton_checkpoints.api.operations.inputs import Named
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.api.schemas_audit import AuditPage
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.audit import DEFAULT_PAGE, MAX_PAGE, RETENTION_DAYS, Action
from baton_checkpoints.domain.clock import format_ms, parse_time

router = Router()

TimeParameter = Annotated[str | None, Query(json_schema_extra={"format": "date-time"})]


def _time(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError:
        raise Named(f"/{name}", f"The query parameter {name}", "query").refused(
            "must be an RFC 3339 time with a zone (2026-12-03T09:00:00Z)."
        ) from None


@router.get(
    "/v1/audit",
    summary="Read the tenant's audit trail",
    description=(
        "The caller's tenant's management events, newest first: keys issued and revoked, subjects purged, threads "
        "deleted, limits changed (by the operator), leases taken over, OAuth grants approved and revoked. Each "
        "records the actor's key id and agent, the time, the request id, the target and the outcome, and carries "
        "the hash of the event before it: `baton audit verify` follows the chain. action filters by one action; "
        "from and to (RFC 3339) bound the times. `meta.head` is the tenant's last event (the newest of an unfiltered "
        f"first page). Events are kept {RETENTION_DAYS} days. tenant_id names another tenant (needs tenants:manage): "
        "an integrator's operator key reads each customer's trail."
    ),
    openapi_extensions=needs(operations.events),
    responses=documented({200: ("A page of events", AuditPage)}, (400, *AUTHENTICATED_ERRORS)),
    tags=["audit"],
)
def get_audit(
    call: CurrentCall,
    services: Wired,
    action: Annotated[Action | None, Query()] = None,
    from_: Annotated[str | None, Query(alias="from", json_schema_extra={"format": "date-time"})] = None,
    to: TimeParameter = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: CursorParameter = None,
    tenant_id: Annotated[str | None, Query(pattern=limits.IDENTIFIER_PATTERN)] = None,
) -> Response[str]:
    """A page of the tenant's audit events."""
    first, last = _time(from_, "from"), _time(to, "to")
    context = context_of(call, services)
    events, next_cursor, head = operations.events(context, tenant_id, action, first, last, limit, cursor)
    at = format_ms(head.at_ms) if head.seq else None
    meta = {
        "request_id": call.request_id,
        "next_cursor": next_cursor,
        "head": {"seq": head.seq, "hash": head.hash, "at": at},
    }
    return Response(status_code=200, content_type=JSON, body=dumps({"data": events, "meta": meta}))
