"""Leases: acquire (or renew) and release a checkpoint's lease."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header

from baton_checkpoints.api.idempotency import IdempotencyKeyHeader, idempotency_claim
from baton_checkpoints.api.openapi import AUTHENTICATED_ERRORS, REPLAYED_HEADER, responses
from baton_checkpoints.api.paths import CheckpointIdParameter, checkpoint_id_from_path
from baton_checkpoints.api.resolver import CurrentCall, needs
from baton_checkpoints.api.responses import ok
from baton_checkpoints.api.schemas import DataEnvelope, LeaseGranted, LeaseReleased
from baton_checkpoints.api.services import Wired
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.errors import ValidationFailed
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
MAX_TOKEN_CHARS = 200


def lease_token_of(header: str | None, required: bool = False) -> str | None:
    """The token a `Lease-Token` header carries (None when absent and not `required`): 1 to 200 characters once
    trimmed, else 400 naming the header (an empty one is not "no token": it would name no lease)."""
    token = None if header is None else header.strip()
    if token is None and not required:
        return None
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise ValidationFailed.single(
            "/Lease-Token",
            f"The Lease-Token header must be the token the lease was acquired with (1 to {MAX_TOKEN_CHARS} "
            "characters).",
            "header",
        )
    return token


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
    openapi_extensions=needs("leases:write"),
    responses=responses(
        {
            201: ("A new lease", DataEnvelope[LeaseGranted]),
            200: ("The holder's live lease, renewed", DataEnvelope[LeaseGranted]),
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
    holder = request.holder if request.holder is not None else call.caller.key_id
    claim = idempotency_claim(call, "POST", f"/v1/checkpoints/{target}/lease", idempotency_key)
    grant, replayed = services.leases.acquire(
        call.caller.tenant_id,
        target,
        holder,
        call.caller.key_id,
        request.ttl_seconds,
        call.now_ms,
        None if call.caller.is_wildcard else call.caller.agent_id,
        claim,
        call.request_id,
    )
    answer = LeaseGranted.model_construct(
        checkpoint_id=target,
        lease_token=grant.lease.token,
        holder=grant.lease.holder,
        expires_at=format_ms(grant.lease.expires_ms),
    )
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return ok(answer, call.request_id, status=201 if grant.created else 200, headers=headers)


@router.delete(
    "/v1/checkpoints/<checkpoint_id>/lease",
    summary="Release a checkpoint's lease",
    description=(
        "Ends the lease whose token the Lease-Token header carries, and spends the token (a lapsed lease's too). "
        "When no lease of the token's is there to end it answers 200 all the same; while another lease is live, a "
        "token of ours answers 409 LEASE_LOST (taken over since), any other text 409 LEASE_HELD."
    ),
    openapi_extensions=needs("leases:write"),
    responses=responses(
        {200: ("Released (or no lease was live)", DataEnvelope[LeaseReleased])},
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
    services.leases.release(
        call.caller.tenant_id,
        target,
        token,
        call.now_ms,
        None if call.caller.is_wildcard else call.caller.agent_id,
    )
    return ok(LeaseReleased.model_construct(checkpoint_id=target, released=True), call.request_id)
