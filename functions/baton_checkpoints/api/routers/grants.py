"""OAuth grants: what people approved for MCP clients with their keys, listed and revoked through the API (and the
console) by whoever manages keys. OAuth's repository is made by the first such request (its module is off a save's
cold start)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, CursorParameter, documented, enveloped, paged
from baton_checkpoints.api.operations import grants as operations
from baton_checkpoints.api.operations.inputs import Named
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok, page
from baton_checkpoints.api.schemas_keys import GrantInfo, GrantRevoked
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.models import Identifier

router = Router()

GRANT_ID_RULE = r"^grant_[0-9a-f]{32}$"

GrantIdParameter = Annotated[
    str,
    Path(
        description="grant_ and 32 lowercase hex digits; anything else answers 400.",
        json_schema_extra={"pattern": GRANT_ID_RULE},
    ),
]


@router.get(
    "/v1/oauth/grants",
    summary="List OAuth grants",
    description=(
        "Live grants (not revoked, not lapsed) of the caller's tenant (another tenant's with tenants:manage): which "
        "client a person approved, with which key, for which agent and scopes, until when. Never a token. A key "
        "without * sees only its own agent's. A request reads at most "
        f"{limits.MAX_KEY_LIST_READS:,} grants, live or not: a page that reaches that comes back short, or empty, "
        "with a next_cursor to follow."
    ),
    openapi_extensions=needs(operations.list_grants),
    responses=documented({200: ("A page of grants", paged(GrantInfo))}, (400, *AUTHENTICATED_ERRORS)),
    tags=["oauth"],
)
def list_grants(
    call: CurrentCall,
    services: Wired,
    tenant_id: Annotated[Identifier | None, Query()] = None,
    agent_id: Annotated[Identifier | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
) -> Response[str]:
    """List grants; a key without * sees only its own agent's."""
    grants, next_cursor = operations.list_grants(context_of(call, services), tenant_id, agent_id, limit, cursor)
    return page([GrantInfo.of(g) for g in grants], call.request_id, next_cursor)


@router.delete(
    "/v1/oauth/grants/<grant_id>",
    summary="Revoke an OAuth grant",
    description=(
        "Its tokens stop working: at once in this container, within 60 seconds everywhere (the cache's lifetime), "
        "and its refresh token is refused at once. A key without * revokes only its own agent's grants (another "
        "agent's answers 404, as a grant that is not there)."
    ),
    openapi_extensions=needs(operations.revoke),
    responses=documented({200: ("Revoked", enveloped(GrantRevoked))}, (400, *AUTHENTICATED_ERRORS, 404)),
    tags=["oauth"],
)
def revoke_grant(
    call: CurrentCall,
    services: Wired,
    grant_id: GrantIdParameter,
    tenant_id: Annotated[Identifier | None, Query()] = None,
) -> Response[str]:
    """Revoke a grant."""
    operations.revoke(context_of(call, services), grant_id, tenant_id, Named.path("grant_id"))
    return ok(GrantRevoked.model_construct(grant_id=grant_id, revoked=True), call.request_id)
