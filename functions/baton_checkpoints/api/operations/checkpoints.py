"""Checkpoints: save, look up, get by id, delete, and a subject's list (routes `api/routers/checkpoints.py`, tools
`baton_checkpoint_save`, `_get`, `_delete`, `_list`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.api.operations.inputs import Idempotent, claim
from baton_checkpoints.domain.checkpoints import Checkpoint, CheckpointKey, Page, SaveOutcome, SavePlan, plan_save
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import SaveCheckpointRequest

if TYPE_CHECKING:
    from baton_checkpoints.api.ratelimit import RateLimiter

SAVE_PATH = "/v1/checkpoints"
"""Where a save is reached over HTTP: part of an idempotency key's fingerprint, whichever way the save came."""


@operation("checkpoints:write", acts_for=("agent_id",))
def save(
    context: Context, request: SaveCheckpointRequest, idempotent: Idempotent | None = None, plain: bool = False
) -> SaveOutcome:
    """Upsert the checkpoint of (tenant, subject, agent, kind): one conditional write (a transaction when an
    idempotency key, kept revisions or a lease ride along). `plain`: the body's canonical form may take the fast
    path."""
    caller = context.caller
    agent_id = caller.agent_for_write(request.agent_id)
    plan = plan_save(
        request,
        caller.tenant_id,
        agent_id,
        context.request_id,
        context.now_ms,
        plain,
        caller_agent_id=caller.agent_id,
    )
    plan = within_quota(context.services.limiter, plan)
    return context.services.checkpoints.save(plan, claim(caller.agent_id, idempotent, "POST", SAVE_PATH))


def within_quota(limiter: RateLimiter, plan: SavePlan) -> SavePlan:
    """`plan` with the tenant's quotas applied (`SavePlan.over_quota`, `.create_refused`), as this container last
    learnt its usage: a save stores its state's bytes, and may create a checkpoint unless it writes one by id."""
    tenant_id = plan.key.tenant_id
    creates = limiter.quota_refusal(tenant_id, 0, creates=1) if plan.only_checkpoint is None else None
    over = limiter.quota_refusal(tenant_id, plan.state.size)
    if over is plan.over_quota and creates is plan.create_refused:
        return plan  # (within both quotas, as nearly every save is: nothing to change)
    return replace(plan, over_quota=over, create_refused=creates)


@operation("checkpoints:read")
def lookup(context: Context, subject_id: str, kind: Kind, agent_id: str | None = None) -> Checkpoint:
    """The checkpoint of (subject, kind) for the caller's agent, or for `agent_id` with `*`: one GetItem."""
    caller = context.caller
    key = CheckpointKey(caller.tenant_id, subject_id, caller.agent_for_read(agent_id), kind)
    return context.services.checkpoints.get(key, context.now_ms)


@operation("checkpoints:read")
def get(context: Context, checkpoint_id: str) -> Checkpoint:
    """The checkpoint with this id; another agent's answers exactly like a missing one without `*`."""
    found = context.services.checkpoints.get_by_id(context.caller.tenant_id, checkpoint_id, context.now_ms)
    if not context.caller.can_see_agent(found.agent_id):
        raise NotFound()
    return found


@operation("checkpoints:delete")
def delete(
    context: Context,
    checkpoint_id: str,
    if_match_revisions: tuple[int, ...] | None = None,
    lease_token: str | None = None,
) -> None:
    """Delete a checkpoint (terminal ones too) and its kept revisions, only while one of `if_match_revisions` is
    current (None: unconditional) and with the live lease's token; its blobs are removed later by the reaper."""
    caller = context.caller
    context.services.checkpoints.delete(
        caller.tenant_id,
        checkpoint_id,
        context.now_ms,
        only_agent=None if caller.is_wildcard else caller.agent_id,
        if_match_revisions=if_match_revisions,
        lease_token=lease_token,
    )


@operation("checkpoints:read")
def list_subject(
    context: Context,
    subject_id: str,
    kind: Kind | None,
    status: Status | None,
    agent_id: str | None,
    limit: int,
    cursor: str | None,
) -> Page:
    """A page of a subject's checkpoints (summaries), newest update first: one Query."""
    caller = context.caller
    return context.services.checkpoints.list_subject(
        caller.tenant_id, subject_id, context.now_ms, caller.agent_for_list(agent_id), kind, status, limit, cursor
    )
