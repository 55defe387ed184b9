"""Leases: acquire (or renew) and release a checkpoint's lease (routes `api/routers/leases.py`, tools
`baton_lease_acquire` and `baton_lease_release`)."""

from __future__ import annotations

from msgspec import Struct

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.api.operations.audit import record
from baton_checkpoints.api.operations.inputs import Idempotent, claim
from baton_checkpoints.domain.leases import LeaseGrant
from baton_checkpoints.domain.models import AcquireLeaseRequest


class Acquired(Struct, frozen=True):
    """What acquiring did, and whether it replays an earlier request with the same idempotency key."""

    grant: LeaseGrant
    replayed: bool


def lease_path(checkpoint_id: str) -> str:
    """Where a checkpoint's lease is reached over HTTP (part of an idempotency key's fingerprint)."""
    return f"/v1/checkpoints/{checkpoint_id}/lease"


@operation("leases:write")
def acquire(
    context: Context, checkpoint_id: str, request: AcquireLeaseRequest, idempotent: Idempotent | None = None
) -> Acquired:
    """A new lease for the holder (default: the calling key), or the holder's live one renewed; `LeaseHeld` while
    another holder's is live."""
    caller = context.caller
    grant, replayed = context.services.leases.acquire(
        caller.tenant_id,
        checkpoint_id,
        request.holder if request.holder is not None else caller.key_id,
        caller.key_id,
        request.ttl_seconds,
        context.now_ms,
        None if caller.is_wildcard else caller.agent_id,
        claim(caller.agent_id, idempotent, "POST", lease_path(checkpoint_id)),
        context.request_id,
    )
    if grant.taken_over_from is not None and not replayed:
        details = {
            "holder": grant.lease.holder,
            "previous_holder": grant.taken_over_from,
            "lease_counter": grant.lease.counter,
        }
        record(context, caller.tenant_id, "lease.taken_over", {"type": "checkpoint", "id": checkpoint_id}, details)
    return Acquired(grant, replayed)


@operation("leases:write")
def release(context: Context, checkpoint_id: str, lease_token: str) -> None:
    """End the lease whose token this is, and spend the token (a lapsed lease's too)."""
    caller = context.caller
    context.services.leases.release(
        caller.tenant_id, checkpoint_id, lease_token, context.now_ms, None if caller.is_wildcard else caller.agent_id
    )
