"""What the lease routes answer (`/v1/checkpoints/{checkpoint_id}/lease`) and their MCP tools: imported by their
first use, never by a save's cold start (a checkpoint's own `lease`, without its token, is `schemas.Lease`)."""

# No `from __future__ import annotations`, as in `schemas.py`: pydantic would evaluate every field's annotation
# from its string when each class is created.

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from baton_checkpoints.api.schemas import CheckpointId, ResponseModel
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.models import Time


class LeaseGranted(ResponseModel):
    """A lease acquired (201) or renewed by its holder (200)."""

    checkpoint_id: CheckpointId
    lease_token: Annotated[
        str,
        Field(
            description=(
                "The fencing token (`<counter>.<random>`): saves and restores send it as lease_token, a delete as "
                "the Lease-Token header. Its counter grows with every new lease of the checkpoint."
            ),
            json_schema_extra={"pattern": r"^[0-9]{1,16}\.[0-9a-f]{32}$"},
        ),
    ]
    holder: Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_HOLDER_CHARS)]
    expires_at: Time


class LeaseReleased(ResponseModel):
    """A lease released (or none was live)."""

    checkpoint_id: CheckpointId
    released: Literal[True]
