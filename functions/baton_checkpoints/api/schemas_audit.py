"""What the audit route answers (`/v1/audit`): imported by its router's first request, never by a save's cold start
(nor is `domain.audit`, whose actions it names)."""

# No `from __future__ import annotations`, as in `schemas.py`: pydantic would evaluate every field's annotation
# from its string when each class is created.

from typing import Annotated, Any, Literal

from pydantic import Field

from baton_checkpoints.api.schemas import ListMeta, ResponseModel
from baton_checkpoints.domain.audit import Action
from baton_checkpoints.domain.models import Sha256Hex, Time


class AuditActor(ResponseModel):
    """Who acted: the key's id and agent (null: Baton itself, ending a grant whose token was used twice)."""

    key_id: str | None
    agent_id: str | None


class AuditEvent(ResponseModel):
    """One management action, chained to the tenant's event before it: `hash` is the SHA-256 (hex) of this object
    without `hash`, as JSON with its keys sorted, no spaces, UTF-8 (`prev_hash` of the first: 64 zeros)."""

    seq: Annotated[int, Field(ge=1)]
    action: Action
    at: Time
    request_id: str
    actor: AuditActor
    target: dict[str, str]
    outcome: Literal["succeeded", "partial"]
    details: dict[str, Any]
    prev_hash: Sha256Hex
    prev_at: Time | None
    """The time of the event before (null for the first): a verifier knows whether it may have expired."""
    hash: Sha256Hex


class AuditHead(ResponseModel):
    """The tenant's last event: its number, hash and time (0, 64 zeros and null before the first)."""

    seq: Annotated[int, Field(ge=0)]
    hash: Sha256Hex
    at: Time | None


class AuditMeta(ListMeta):
    """A page's meta, and the tenant's head: the newest event of an unfiltered first page is it (or a later one,
    while the head lags an append)."""

    head: AuditHead


class AuditPage(ResponseModel):
    """A page of audit events, newest first."""

    data: list[AuditEvent]
    meta: AuditMeta
