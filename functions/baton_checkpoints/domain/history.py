"""History: which superseded revisions of a checkpoint stay readable, and what a save keeps.

A checkpoint with `keep_revisions` K > 0 keeps its last K superseded revisions: a save over revision r first writes r
as a revision item (a copy of what was read: revision r's content never changes, so the copy is right whether or not
the save then lands), then the checkpoint on the condition that it is still at r. A save deletes nothing: the
checkpoint's `revisions_from` rises with the window, a read shows only the window, and the reaper deletes what fell
below it (`store/reaping.py`). So a history save writes the checkpoint and the one revision it keeps, at DynamoDB's
standard rate, and no more.
"""

from __future__ import annotations

from typing import Final

from msgspec import Struct

from baton_checkpoints.domain.canonical import CanonicalState
from baton_checkpoints.domain.checkpoints import Checkpoint, CheckpointKey, SavePlan


class HistoryStep(Struct, frozen=True):
    """What a save does to its checkpoint's kept revisions."""

    keep_superseded: bool
    """Write the revision being superseded as a kept revision (before the checkpoint)."""
    revisions_from: int | None
    """The checkpoint's new `revisions_from`: no revision below it is ever readable again, so the reaper deletes
    what is stored below it (None: no revision is readable)."""


NO_HISTORY: Final = HistoryStep(keep_superseded=False, revisions_from=None)


def history_step(superseded: Checkpoint | None, keep: int) -> HistoryStep:
    """The history work of a save over `superseded` (its live current revision; None when the save creates the
    checkpoint) that leaves `keep` as the checkpoint's `keep_revisions`."""
    if superseded is None or keep <= 0:
        return NO_HISTORY
    # The first revision kept since history was turned on; it only ever rises, so that a revision once out of the
    # window (and perhaps deleted already) never shows again when `keep_revisions` grows.
    floor = superseded.revision if superseded.revisions_from is None else superseded.revisions_from
    # After the save (revision r + 1) the window is r + 1 - keep ... r.
    return HistoryStep(keep_superseded=True, revisions_from=max(floor, superseded.revision + 1 - keep))


def window(current: Checkpoint) -> range:
    """The revision numbers of `current` that are readable (if stored and not expired): its last `keep_revisions`
    superseded ones."""
    low = max(1, current.revision - current.keep_revisions)
    if current.revisions_from is None:
        return range(0)
    return range(max(low, current.revisions_from), current.revision)


def in_window(current: Checkpoint, revision: int) -> bool:
    """True when revision `revision` of `current` is readable (if stored and not expired)."""
    return revision in window(current)


def plan_restore(
    current: Checkpoint,
    kept: Checkpoint,
    expected_revision: int | None,
    lease_token: str | None,
    request_id: str,
    now_ms: int,
    caller_agent_id: str,
) -> SavePlan:
    """The save that writes kept revision `kept` of `current` as its next revision: its state, format, resources
    and source as they were (the blobs it names still belong to this checkpoint); the status, ttl and number of kept
    revisions as they are now. A restore never rewinds: the revision counts up."""
    if kept.state_text is None:
        raise ValueError("a kept revision was read without its state")
    return SavePlan(
        key=CheckpointKey(current.tenant_id, current.subject_id, current.agent_id, current.kind),
        state=CanonicalState(text=kept.state_text, sha256=kept.state_hash),
        status=current.status,
        ttl_seconds=None,
        keep_revisions=None,
        expected_revision=expected_revision,
        format=kept.format,
        resources=kept.resources,
        source=kept.source,
        request_id=request_id,
        now_ms=now_ms,
        caller_agent_id=caller_agent_id,
        lease_token=lease_token,
        only_checkpoint=current.checkpoint_id,
    )
