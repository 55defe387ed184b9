"""History: which superseded revisions of a checkpoint stay readable, and what a save keeps and prunes.

A checkpoint with `keep_revisions` K > 0 keeps its last K superseded revisions: a save over revision r keeps r as a
revision item (in the same transaction as the new revision) and prunes what fell out of the window. The revisions
stored form a run from `revisions_from` up; a save prunes at most `MAX_PRUNE_PER_SAVE` of them, so that no write
exceeds DynamoDB's transaction limits, and a read shows only the window, so what awaits pruning is never seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from baton.domain.canonical import CanonicalState
from baton.domain.checkpoints import Checkpoint, CheckpointKey, SavePlan

MAX_PRUNE_PER_SAVE: Final = 10


@dataclass(frozen=True)
class HistoryStep:
    """What a save does to its checkpoint's kept revisions."""

    keep_superseded: bool
    """Write the revision being superseded as a kept revision."""
    prune: tuple[int, ...]
    """Revision numbers to delete (they fell out of the window)."""
    revisions_from: int | None
    """The checkpoint's new `revisions_from` (None: no revision stays stored)."""

    @property
    def writes(self) -> int:
        """How many items beside the checkpoint's own this step writes or deletes."""
        return int(self.keep_superseded) + len(self.prune)


NO_HISTORY: Final = HistoryStep(keep_superseded=False, prune=(), revisions_from=None)


def history_step(superseded: Checkpoint | None, keep: int) -> HistoryStep:
    """The history work of a save over `superseded` (its live current revision; None when the save creates the
    checkpoint) that leaves `keep` as the checkpoint's `keep_revisions`."""
    if superseded is None:
        return NO_HISTORY
    floor = superseded.revisions_from
    if keep > 0 and floor is None:
        floor = superseded.revision  # the first revision kept
    if floor is None:
        return NO_HISTORY
    top = superseded.revision if keep > 0 else superseded.revision - 1
    # After the save (revision r + 1) the window is r + 1 - keep ... r: anything below it goes, oldest first.
    below_window = superseded.revision - keep
    last = min(below_window, floor + MAX_PRUNE_PER_SAVE - 1, top)
    prune = tuple(range(floor, last + 1))
    remaining_from = max(floor, last + 1)
    return HistoryStep(
        keep_superseded=keep > 0,
        prune=prune,
        revisions_from=remaining_from if remaining_from <= top else None,
    )


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
    )
