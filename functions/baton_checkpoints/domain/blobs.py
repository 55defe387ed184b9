"""Blobs: bytes a checkpoint refers to, uploaded by the client straight to S3 with a presigned PUT.

A blob is declared first (`POST /v1/blobs`: its SHA-256, size and media type), then uploaded; a save may attach
it once the upload has landed with exactly those bytes. A blob belongs to the agent that declared it and, once
attached, to one checkpoint (`owner`): the reaper deletes it when that checkpoint lets go of it, so no other
checkpoint may hold it.
"""

from __future__ import annotations

from typing import Final

from msgspec import Struct

from baton_checkpoints.domain.checkpoints import CheckpointKey

PENDING_DAYS: Final = 1
"""How long a declared blob may be attached: its record expires after that. Its object, tagged pending, is expired by
the bucket's lifecycle rule a day later (`store.schema.PENDING_EXPIRY_DAYS`), so a blob attached at the last moment
leaves the reaper a day to tag it attached before the rule could reach it."""
UPLOAD_SECONDS: Final = 900
"""How long a presigned upload or download URL is valid (15 minutes)."""


class Blob(Struct, frozen=True):
    """A declared blob, as its record holds it."""

    tenant_id: str
    blob_id: str
    agent_id: str
    """The agent whose key declared it: other agents (without `*`) get the same 404 as for a missing blob."""
    sha256: str
    """Hex, as declared."""
    size: int
    media_type: str
    created_ms: int
    expires_ms: int | None
    """When an unattached blob's record expires (None once attached: then it lives as long as its owner)."""
    owner: CheckpointKey | None = None
    """The checkpoint that holds it, by what a checkpoint is upserted on (not its id, which an expired checkpoint
    loses: a save over it may attach the same blobs again)."""
