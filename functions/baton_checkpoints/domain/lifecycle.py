"""The status lifecycle: `active` → `completed` | `cancelled`; a terminal status is final."""

from __future__ import annotations

from typing import Final, Literal, get_args

Status = Literal["active", "completed", "cancelled"]
STATUSES: Final[tuple[str, ...]] = get_args(Status)
ACTIVE: Final = "active"
TERMINAL: Final = frozenset({"completed", "cancelled"})

Kind = Literal["task_state", "conversation", "workflow", "cursor"]
KINDS: Final[tuple[str, ...]] = get_args(Kind)


def is_terminal(status: str) -> bool:
    """True when a checkpoint in this status takes no further writes."""
    return status in TERMINAL


OPENCHECKPOINT_FORMAT: Final = "opencheckpoint/0.1"
"""The `format` whose states are validated as OpenCheckpoint 0.1 documents
(`baton_checkpoints.domain.opencheckpoint`)."""
