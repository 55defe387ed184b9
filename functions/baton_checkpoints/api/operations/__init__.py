"""The application layer: each of Baton's operations written once, and reached two ways, by its HTTP route
(`api/routers/`) and by its MCP tool (`api/mcp/tools.py`).

An operation is a function of a `Context` (who calls, when, on which services) and of inputs already read and
validated by whoever reached it. It checks its own scope, calls the domain and the store, and returns domain objects
or response models, or raises the domain's errors. It knows no transport: no status code, no header, no JSON-RPC
(an import-linter contract keeps powertools, the resolver, the routers and MCP out of this package). So a route and
a tool answer the same thing for the same call, with the same requests and the same errors; only how an answer is
written, and how an error is told, differ.

What must be judged before any input is validated (the contract ranks 403 above 400) is stated here too:
`authorize` checks an operation's scope and the body fields that claim authority (`agent_id`, `tenant_id`), for the
resolver's gate and for a tool call alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from msgspec import Struct

from baton_checkpoints.domain.access import Principal

if TYPE_CHECKING:
    from baton_checkpoints.api.services import Services

P = ParamSpec("P")
R = TypeVar("R")


class Context(Struct, frozen=True):
    """Who calls an operation, when, and on which services."""

    caller: Principal
    request_id: str
    now_ms: int
    services: Services


class Operation(Struct, Generic[P, R], frozen=True):
    """An operation: its function, the scope it needs, and the body fields that say whom it acts for.

    Calling it checks the scope, whoever calls: a route's gate has checked it already (to rank a 403 before the
    route's validation), and checking again is a set lookup."""

    run: Callable[Concatenate[Context, P], R]
    scope: str
    acts_for: tuple[str, ...] = ()
    fresh_key: bool = False
    """The caller's key must be read fresh, never from the container's cache (key and grant management), so that
    a key revoked a moment ago can do nothing with it."""

    def __call__(self, context: Context, /, *args: P.args, **kwargs: P.kwargs) -> R:
        context.caller.require(self.scope)
        return self.run(context, *args, **kwargs)

    def authorize(self, caller: Principal, body: Any) -> None:
        """What is judged before the operation's inputs are validated: its scope, and the authority `body` claims."""
        authorize(caller, self.scope, self.acts_for, body)


def operation(
    scope: str, acts_for: tuple[str, ...] = (), fresh_key: bool = False
) -> Callable[[Callable[Concatenate[Context, P], R]], Operation[P, R]]:
    """Declare an operation: the scope it needs, its body's authority fields, and whether its caller's key is read
    fresh."""

    def declare(run: Callable[Concatenate[Context, P], R]) -> Operation[P, R]:
        return Operation(run, scope, acts_for, fresh_key)

    return declare


def authorize(caller: Principal, scope: str | None, acts_for: tuple[str, ...] | list[str], body: Any) -> None:
    """`Forbidden` unless `caller` holds `scope` (None: any valid credential) and may act for whom `body` names in
    its `acts_for` fields (another agent needs `*`, another tenant `tenants:manage`).

    Only the operation's own authority fields count: where there is no `tenant_id`, that field is just unknown (400).
    """
    if scope is not None:
        caller.require(scope)
    if not acts_for or not isinstance(body, dict):
        return
    agent_id = body.get("agent_id")
    if "agent_id" in acts_for and isinstance(agent_id, str):
        caller.agent_for_write(agent_id)
    tenant_id = body.get("tenant_id")
    if "tenant_id" in acts_for and isinstance(tenant_id, str):
        caller.tenant_for(tenant_id, "/tenant_id")
