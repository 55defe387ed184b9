"""API keys: issue, list, revoke. A secret is shown once, at creation, and stored only as its hash."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, CursorParameter, documented, enveloped, paged
from baton_checkpoints.api.operations.audit import record
from baton_checkpoints.api.resolver import ANY_SCOPE, CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok, page
from baton_checkpoints.api.schemas_keys import Caller, CreatedKey, KeyDeleted, KeyInfo
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import check_can_issue, check_can_revoke, issue_key, key_validity
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.errors import NotFound, ValidationFailed
from baton_checkpoints.domain.ids import KEY_ID_PATTERN
from baton_checkpoints.domain.models import CreateKeyRequest, Identifier

router = Router()

# Checked by the route itself, with its own message; the document states the same rule.
KeyIdParameter = Annotated[
    str,
    Path(
        description="key_ and 32 lowercase hex digits; anything else answers 400.",
        json_schema_extra={"pattern": r"^key_[0-9a-f]{32}$"},
    ),
]

_TENANT_QUERY = "The query parameter tenant_id"


@router.post(
    "/v1/keys",
    summary="Issue an API key",
    description=(
        "The secret is in this answer only. A key issues keys only with scopes it holds itself; without * only "
        "for its own agent_id; a tenant_id other than its own needs tenants:manage (the tenant comes into being "
        "with its first key)."
    ),
    openapi_extensions=needs("keys:manage", acts_for=("agent_id", "tenant_id"), fresh_key=True),
    responses=documented({201: ("Created", enveloped(CreatedKey))}, (400, *AUTHENTICATED_ERRORS, 413, 415)),
    tags=["keys"],
)
def create_key(call: CurrentCall, services: Wired, request: Annotated[CreateKeyRequest, Body()]) -> Response[str]:
    """Issue a key for an agent."""
    tenant_id = request.tenant_id or call.caller.tenant_id
    scopes = frozenset(request.scopes)
    check_can_issue(call.caller, tenant_id, request.agent_id, scopes)
    not_before, expires = key_validity(request.not_before, request.expires_at, call.now_ms, call.caller.expires_ms)
    issued = issue_key(
        tenant_id,
        request.agent_id,
        scopes,
        call.now_ms,
        not_before_ms=not_before,
        expires_ms=expires,
        description=request.description,
    )
    services.keys.put(issued.record)
    details = {
        "agent_id": request.agent_id,
        "scopes": sorted(scopes),
        "expires_at": None if expires is None else format_ms(expires),
    }
    target = {"type": "key", "id": issued.record.key_id}
    record(context_of(call, services), tenant_id, "key.issued", target, details)
    return ok(CreatedKey.of(issued.record, secret=issued.secret), call.request_id, status=201)


@router.get(
    "/v1/whoami",
    summary="The calling key",
    description=(
        "Whom the key acts for (tenant, agent), its scopes as issued and as they apply (`*` expanded), and when it "
        "expires: what a client, such as the console, may offer. Any valid key may ask; nothing else is read."
    ),
    openapi_extensions=ANY_SCOPE,
    responses=documented({200: ("The calling key", enveloped(Caller))}, (401, 429, 503)),
    tags=["keys"],
)
def whoami(call: CurrentCall) -> Response[str]:
    """The calling key."""
    return ok(Caller.of(call.caller), call.request_id)


@router.get(
    "/v1/keys",
    summary="List API keys",
    description=(
        "Live keys (not revoked, not expired) of the caller's tenant (another tenant's with tenants:manage), "
        "without secrets; a key without * sees only its own agent's. A request reads at most "
        f"{limits.MAX_KEY_LIST_READS:,} key records, live or not: a page that reaches that comes back short, or "
        "empty, with a next_cursor to follow."
    ),
    openapi_extensions=needs("keys:manage"),
    responses=documented({200: ("A page of keys", paged(KeyInfo))}, (400, *AUTHENTICATED_ERRORS)),
    tags=["keys"],
)
def list_keys(
    call: CurrentCall,
    services: Wired,
    tenant_id: Annotated[Identifier | None, Query()] = None,
    agent_id: Annotated[Identifier | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
) -> Response[str]:
    """List keys; a key without * sees only its own agent's."""
    tenant = call.caller.tenant_for(tenant_id, _TENANT_QUERY)
    only_agent = call.caller.agent_for_key_list(agent_id)
    records, next_cursor = services.keys.list(tenant, only_agent, call.now_ms, limit, cursor)
    return page([KeyInfo.of(r) for r in records], call.request_id, next_cursor)


@router.delete(
    "/v1/keys/<key_id>",
    summary="Revoke an API key",
    description=(
        "Takes effect within 60 seconds everywhere (the key cache's lifetime), at once in this container. A key "
        "revokes only keys whose scopes it holds itself; without * only its own agent's."
    ),
    openapi_extensions=needs("keys:manage", fresh_key=True),
    responses=documented({200: ("Revoked", enveloped(KeyDeleted))}, (400, *AUTHENTICATED_ERRORS, 404)),
    tags=["keys"],
)
def revoke_key(
    call: CurrentCall,
    services: Wired,
    key_id: KeyIdParameter,
    tenant_id: Annotated[Identifier | None, Query()] = None,
) -> Response[str]:
    """Revoke a key."""
    if not KEY_ID_PATTERN.match(key_id):
        raise ValidationFailed.single(
            "/key_id", "The path parameter key_id must be key_ followed by 32 lowercase hex digits.", "path"
        )
    tenant = call.caller.tenant_for(tenant_id, _TENANT_QUERY)
    target = services.keys.find_by_id(tenant, key_id)
    if target is None:
        raise NotFound()
    check_can_revoke(call.caller, target)
    services.keys.revoke(target, call.now_ms)
    services.authenticator.forget(key_id)
    record(
        context_of(call, services), tenant, "key.revoked", {"type": "key", "id": key_id}, {"agent_id": target.agent_id}
    )
    return ok(KeyDeleted.model_construct(key_id=key_id, deleted=True), call.request_id)
