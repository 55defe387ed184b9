"""Leases: acquire (or renew) and release a checkpoint's lease."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header

from baton_checkpoints.api.idempotency import IdempotencyKeyHeader, idempotent
from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, REPLAYED_HEADER, documented, enveloped
from baton_checkpoints.api.operations import leases as operations
from baton_checkpoints.api.operations.inputs import lease_token_of
from baton_checkpoints.api.paths import CheckpointIdParameter, checkpoint_id_from_path
from baton_checkpoints.api.resolver import CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas_leases import LeaseGranted, LeaseReleased
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.models import AcquireLeaseRequest

router = Router()

RequiredLeaseTokenHeader = Annotated[
    str,
    Header(
        alias="Lease-Token",
        description="The token the lease was acquired with (from POST /v1/checkpoints/{checkpoint_id}/lease).",
        json_schema_extra={"minLength": 1, "maxLength": 200, "pattern": r"\S"},
    ),
]

_HELD = "LEASE_HELD: another holder has a live lease (details.lease_expires_at)"


@router.post(
    "/v1/checkpoints/<checkpoint_id>/lease",
    summary="Acquire or renew a checkpoint's lease",
    description=(
        "A new lease answers 201 with a fencing token; the same holder, through the same key, renews it (200, same "
        "token, expiry from now); anyone else gets 409 LEASE_HELD while it is live. holder defaults to the calling "
        "key's key_id. While a lease is live, saves and restores must send its token as lease_token, deletes as the "
        "Lease-Token header. Lease operations change neither the revision nor the expiry of the checkpoint. Honors "
        "an Idempotency-Key header: a replay answers the first answer (its lease) with Idempotent-Replayed: true."
    ),
    openapi_extensions=needs(operations.acquire),
    responses=documented(
        {
            201: ("A new lease", enveloped(LeaseGranted)),
            200: ("The holder's live lease, renewed", enveloped(LeaseGranted)),
        },
        (400, *AUTHENTICATED_ERRORS, 404, 409, 413, 415, 422),
        {201: REPLAYED_HEADER, 200: REPLAYED_HEADER},
        described={409: _HELD},
    ),
    tags=["leases"],
)
def acquire_lease(
    call: CurrentCall,
    services: Wired,
    checkpoint_id: CheckpointIdParameter,
    request: Annotated[AcquireLeaseRequest, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[str]:
    """Claim a checkpoint for a while, so that no one else acts on it."""
    target = checkpoint_id_from_path(checkpoint_id)
    acquired = operations.acquire(context_of(call, services), target, request, idempotent(call, idempotency_key))
    lease = acquired.grant.lease
    answer = LeaseGranted.model_construct(
        checkpoint_id=target, lease_token=lease.token, holder=lease.holder, expires_at=format_ms(lease.expires_ms)
    )
    headers = {"Idempotent-Replayed": "true"} if acquired.replayed else None
    return ok(answer, call.request_id, status=201 if acquired.grant.created else 200, headers=headers)


@router.delete(
    "/v1/checkpoints/<checkpoint_id>/lease",
    summary="Release a checkpoint's lease",
    description=(
        "Ends the lease whose token the Lease-Token header carries, and spends the token (a lapsed lease's too). "
        "When no lease of the token's is there to end it answers 200 all the same; while another lease is live, a "
        "token of ours answers 409 LEASE_LOST (taken over since), any other text 409 LEASE_HELD."
    ),
    openapi_extensions=needs(operations.release),
    responses=documented(
        {200: ("Released (or no lease was live)", enveloped(LeaseReleased))},
        (400, *AUTHENTICATED_ERRORS, 404, 409),
        described={409: f"{_HELD}; LEASE_LOST: the token's lease was taken over since"},
    ),
    tags=["leases"],
)
def release_lease(
    call: CurrentCall, services: Wired, checkpoint_id: CheckpointIdParameter, lease_token: RequiredLeaseTokenHeader
) -> Response[str]:
    """Let others work on the checkpoint again."""
    target = checkpoint_id_from_path(checkpoint_id)
    token = lease_token_of(lease_token, required=True)
    assert token is not None  # required: refused above otherwise
    operations.release(context_of(call, services), target, token)
    return ok(LeaseReleased.model_construct(checkpoint_id=target, released=True), call.request_id)
