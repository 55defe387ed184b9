"""OAuth grants: list and revoke a tenant's (routes `/v1/oauth/grants`), and end a grant wherever OAuth's own
endpoints must (a token revoked at `/oauth/revoke`, a code or refresh token presented twice).

The OAuth modules (`domain.oauth`, `store.oauth`) are imported by the first request that needs them, never at a
save's cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.api.operations.audit import record_by
from baton_checkpoints.api.operations.inputs import Named
from baton_checkpoints.domain.audit import Actor
from baton_checkpoints.domain.errors import NotFound

if TYPE_CHECKING:
    from baton_checkpoints.api.services import Services
    from baton_checkpoints.domain.oauth import Grant

TENANT_QUERY = "The query parameter tenant_id"


@operation("keys:manage")
def list_grants(
    context: Context, tenant_id: str | None, agent_id: str | None, limit: int, cursor: str | None
) -> tuple[list[Grant], str | None]:
    """A page of the tenant's live grants, and the cursor of the next; a key without `*` sees its own agent's."""
    caller = context.caller
    tenant = caller.tenant_for(tenant_id, TENANT_QUERY)
    only_agent = caller.agent_for_key_list(agent_id, what="grants")
    return context.services.oauth.grants(tenant, only_agent, context.now_ms, limit, cursor)


@operation("keys:manage", fresh_key=True)
def revoke(context: Context, grant_id: str, tenant_id: str | None = None, named: Named | None = None) -> None:
    """Revoke a grant: its tokens stop working. Another agent's, without `*`, is `NotFound` like a missing one."""
    from baton_checkpoints.domain.oauth import GRANT_ID_PATTERN

    if not GRANT_ID_PATTERN.match(grant_id):
        raise (named or Named.argument("grant_id")).refused("must be grant_ followed by 32 lowercase hex digits.")
    caller = context.caller
    tenant = caller.tenant_for(tenant_id, TENANT_QUERY)
    found = context.services.oauth.grant(tenant, grant_id, context.now_ms)
    if found is None or not caller.can_see_agent(found.approval.agent_id):
        raise NotFound()
    actor = Actor(caller.key_id, caller.agent_id)
    if not end_grant(context.services, tenant, grant_id, context.now_ms, actor, context.request_id, "api"):
        raise NotFound()  # revoked meanwhile


def end_grant(
    services: Services, tenant_id: str, grant_id: str, now_ms: int, actor: Actor, request_id: str, how: str
) -> bool:
    """End a grant (False: it was gone already): its items revoked, and its tokens forgotten by this container's
    cache at once (other containers' within the cache's lifetime; its refresh token is refused at once). A grant
    ended is in its tenant's audit trail, with `how` (`api`, `token` revoked by its client, `reuse` of a used
    token)."""
    ended = services.oauth.revoke_grant(tenant_id, grant_id, now_ms)
    services.authenticator.forget_grant(grant_id)
    if ended:
        target = {"type": "grant", "id": grant_id}
        record_by(services, tenant_id, actor, request_id, now_ms, "grant.revoked", target, {"how": how})
    return ended
