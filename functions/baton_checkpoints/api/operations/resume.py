"""Resume: which checkpoint to pick up again (route `POST /v1/resume`, tool `baton_resume`). Read-only: it writes
and claims nothing."""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct

from baton_checkpoints.api.operations import Context, operation
from baton_checkpoints.api.records import record_summary
from baton_checkpoints.api.schemas_resume import ResumeAmbiguous, ResumeClosed, ResumeNone, ResumeOmitted, ready_json
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, CheckpointKey
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.resume import ResumeRequest, agent_scope, decide, lift, matches, within_budget

SUBJECT_PAGE = limits.MAX_PAGE_LIMIT
"""Summaries read per page of a subject's checkpoints (one Query answers them all unless there are more)."""


class Ready(Struct, frozen=True):
    """A `ready` answer's `data`, already written as compact JSON (the state spliced in as the store holds it)."""

    data_json: str


Resumed = ResumeAmbiguous | ResumeClosed | ResumeNone | ResumeOmitted | Ready
"""What to resume: the answer's `data`, by its status."""


@operation("checkpoints:read")
def resume(context: Context, request: ResumeRequest) -> Resumed:
    """Decide what to resume: ready (exactly one active match, read whole), ambiguous, none, closed, or omitted
    (the ready data would exceed the request's budget)."""
    agent_id = agent_scope(context.caller, request.agent_id)
    found = _matching(context, request, agent_id)
    # At most two rounds: a ready checkpoint found by a summary is read whole, and if it changed in between (closed,
    # deleted, replaced) the matches are decided again with what the read found.
    for _ in range(2):
        decision = decide(found)
        chosen = decision.checkpoint
        if decision.status != "ready" or chosen is None or chosen.state_text is not None:
            break
        found = [cp for cp in found if cp is not chosen] + _reread(context, request, agent_id, chosen)
    now_ms = context.now_ms
    answer: Resumed
    if decision.status == "ambiguous":
        answer = ResumeAmbiguous.of(decision, now_ms)
    elif decision.status == "closed" and chosen is not None:
        answer = ResumeClosed.of(chosen, now_ms)
    elif decision.status != "ready" or chosen is None or chosen.state_text is None:
        answer = ResumeNone.model_construct(status="none")
    else:
        summary = record_summary(chosen, context.services, now_ms)
        data = ready_json(summary, chosen.state_text, lift(chosen.format, chosen.state_text))
        required_bytes = len(data.encode("utf-8"))
        if within_budget(required_bytes, request.budget_bytes):
            return Ready(data)
        answer = ResumeOmitted.of(chosen, required_bytes, now_ms)
    return answer


def _matching(context: Context, request: ResumeRequest, agent_id: str | None) -> list[Checkpoint]:
    """The live checkpoints the request names, read as cheaply as it allows: one GetItem when kind and agent fix
    the item, the id's index Query and GetItem for a checkpoint_id, else the subject's summaries (one Query)."""
    caller, now_ms = context.caller, context.now_ms
    tenant_id = caller.tenant_id
    store = context.services.checkpoints
    if request.kind is not None and agent_id is not None:
        key = CheckpointKey(tenant_id, request.subject_id, agent_id, request.kind)
        candidates = _found_or_none(lambda: store.get(key, now_ms))
    elif request.checkpoint_id is not None:
        checkpoint_id = request.checkpoint_id
        candidates = [
            cp
            for cp in _found_or_none(lambda: store.get_by_id(tenant_id, checkpoint_id, now_ms))
            if caller.can_see_agent(cp.agent_id)  # another agent's counts as no match
        ]
    else:
        candidates = []
        cursor: str | None = None
        while True:
            page = store.list_subject(
                tenant_id, request.subject_id, now_ms, agent_id, request.kind, None, SUBJECT_PAGE, cursor
            )
            candidates.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
    return [cp for cp in candidates if matches(cp, request, tenant_id, agent_id, now_ms)]


def _reread(context: Context, request: ResumeRequest, agent_id: str | None, summary: Checkpoint) -> list[Checkpoint]:
    """The checkpoint now in `summary`'s slot, whole (one consistent GetItem), if it still matches."""
    key = CheckpointKey(summary.tenant_id, summary.subject_id, summary.agent_id, summary.kind)
    found = _found_or_none(lambda: context.services.checkpoints.get(key, context.now_ms))
    return [cp for cp in found if matches(cp, request, context.caller.tenant_id, agent_id, context.now_ms)]


def _found_or_none(read: Callable[[], Checkpoint]) -> list[Checkpoint]:
    """[what `read()` returns], or [] when it raises NotFound."""
    try:
        return [read()]
    except NotFound:
        return []
