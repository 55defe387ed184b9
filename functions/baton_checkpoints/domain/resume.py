"""Resume: which checkpoint a caller should pick up again, decided from what matches, never guessed by recency.

`POST /v1/resume` is read-only. The route finds the live checkpoints that match the request (`matches`), and
`decide` says what they mean: exactly one active match is `ready`; several are `ambiguous` (candidates, the caller
chooses); none at all is `none`; no active one but one terminal is `closed`. A `ready` answer larger than the
caller's `budget_bytes` (or than one answer can carry, `limits.MAX_ANSWER_DATA_BYTES`) is `omitted` instead
(`within_budget`): never a partial checkpoint. Sizes are the UTF-8 bytes of the compact JSON `data`, never characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Literal

from msgspec import Struct
from pydantic import ConfigDict, Field, StringConstraints

from baton_checkpoints.domain import limits, opencheckpoint
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.canonical import canonical_json
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.lifecycle import Kind, is_terminal
from baton_checkpoints.domain.models import Identifier, RequestModel, SubjectId

CheckpointIdText = Annotated[str, StringConstraints(pattern=r"^ckpt_[0-9a-f]{32}$")]
BudgetBytes = Annotated[int, Field(ge=limits.MIN_RESUME_BUDGET_BYTES, le=limits.MAX_RESUME_BUDGET_BYTES)]


class ResumeRequest(RequestModel):
    """Body of `POST /v1/resume`: which work to pick up again, and how many bytes of answer the caller takes."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={"examples": [{"subject_id": "ticket-4411", "budget_bytes": 32000}]},
    )

    subject_id: SubjectId
    kind: Kind | None = None
    agent_id: Annotated[
        Identifier | None,
        Field(description="Whose checkpoints: another agent's only with the scope * (else 404, as if missing)."),
    ] = None
    checkpoint_id: Annotated[
        CheckpointIdText | None, Field(description="Only this checkpoint (ckpt_ and 32 lowercase hex digits).")
    ] = None
    budget_bytes: Annotated[
        BudgetBytes | None,
        Field(
            description=(
                "The most bytes of compact UTF-8 JSON the `data` of a `ready` answer may take; a larger one answers "
                "`omitted` with `required_bytes`. No budget when absent; whatever the budget, a `ready` data over "
                f"{limits.MAX_ANSWER_DATA_BYTES:,} bytes (more than one answer carries) is `omitted` too."
            )
        ),
    ] = None


Outcome = Literal["ready", "ambiguous", "none", "closed"]


class Decision(Struct, frozen=True):
    """What the matching checkpoints mean, before any budget: `checkpoint` for `ready` and `closed`, `candidates`
    (newest updated first, at most `MAX_RESUME_CANDIDATES`) and `candidate_count` for `ambiguous`."""

    status: Outcome
    checkpoint: Checkpoint | None = None
    candidates: tuple[Checkpoint, ...] = ()
    candidate_count: int = 0


def agent_scope(caller: Principal, requested: str | None) -> str | None:
    """Whose checkpoints a resume considers: the named agent's (`NotFound` for another agent without `*`), else
    every agent's for a `*` key (None) and the caller's own for any other key."""
    if requested is not None:
        return caller.agent_for_read(requested)
    return None if caller.is_wildcard else caller.agent_id


def matches(cp: Checkpoint, request: ResumeRequest, tenant_id: str, agent_id: str | None, now_ms: int) -> bool:
    """True when `cp` is live and is what the request names: its tenant and subject, and its kind, checkpoint id
    and agent (`agent_id`, None: any) when given."""
    return (
        cp.is_live(now_ms)
        and cp.tenant_id == tenant_id
        and cp.subject_id == request.subject_id
        and (request.kind is None or cp.kind == request.kind)
        and (request.checkpoint_id is None or cp.checkpoint_id == request.checkpoint_id)
        and (agent_id is None or cp.agent_id == agent_id)
    )


def newest_first(checkpoints: Iterable[Checkpoint]) -> list[Checkpoint]:
    """Newest `updated_at` first, then by agent and kind, as a subject's list orders them."""
    return sorted(checkpoints, key=lambda cp: (-cp.updated_ms, cp.agent_id, cp.kind, cp.checkpoint_id))


def decide(found: Iterable[Checkpoint]) -> Decision:
    """What the matching checkpoints `found` mean. Active ones decide first; terminal ones count only when no
    active one matches. Several of either are `ambiguous`: the caller chooses, Baton never picks the newest."""
    matched = list(found)
    active = newest_first(cp for cp in matched if not is_terminal(cp.status))
    if len(active) == 1:
        return Decision("ready", checkpoint=active[0])
    if active:
        return _ambiguous(active)
    terminal = newest_first(cp for cp in matched if is_terminal(cp.status))
    if not terminal:
        return Decision("none")
    if len(terminal) == 1:
        return Decision("closed", checkpoint=terminal[0])
    return _ambiguous(terminal)


def _ambiguous(candidates: list[Checkpoint]) -> Decision:
    return Decision(
        "ambiguous",
        candidates=tuple(candidates[: limits.MAX_RESUME_CANDIDATES]),
        candidate_count=len(candidates),
    )


def within_budget(required_bytes: int, budget_bytes: int | None) -> bool:
    """True when a `ready` answer whose `data` is `required_bytes` of compact UTF-8 JSON may be sent: within the
    caller's budget (none: no limit of the caller's) and within `MAX_ANSWER_DATA_BYTES`, the most one answer carries
    through Lambda. A `ready` answer repeats an OpenCheckpoint document's pending operations and stop conditions
    beside its state, so its data can pass that bound even without a budget: it is then `omitted`, never a partial
    checkpoint, and the record itself (`GET /v1/checkpoints/{checkpoint_id}`) always fits."""
    limit = limits.MAX_ANSWER_DATA_BYTES if budget_bytes is None else min(budget_bytes, limits.MAX_ANSWER_DATA_BYTES)
    return required_bytes <= limit


class Lifted(Struct, frozen=True):
    """What a `ready` resume of an OpenCheckpoint document lists apart from its state, as canonical JSON arrays, so
    that a runtime can hold an approval or enforce a stop condition without reading the document's prose."""

    pending_operations: bytes
    stop_conditions: bytes


def lift(format_name: str | None, state_text: bytes) -> Lifted | None:
    """The pending operations and stop conditions of a state saved as `opencheckpoint/0.1` (None for any other
    format or none). Each is written as it stands in the state (canonical JSON, the same bytes)."""
    if format_name != opencheckpoint.FORMAT:
        return None
    document = json.loads(state_text)
    return Lifted(
        pending_operations=canonical_json(opencheckpoint.pending_operations(document)),
        stop_conditions=canonical_json(opencheckpoint.stop_conditions(document)),
    )
