"""The summary part of a full record, as every route that answers one builds it (GET by id or lookup, a kept
revision, a `ready` resume)."""

from __future__ import annotations

from baton_checkpoints.api.schemas import CheckpointSummary, Resource
from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.clock import format_ms


def record_summary(cp: Checkpoint, services: Services, now_ms: int | None) -> CheckpointSummary:
    """`cp`'s summary with its lease when one is live at `now_ms` (None: no lease shown, as for a kept revision),
    and each resource with a fresh presigned GET of its blob (signed here: no request)."""
    summary: CheckpointSummary = CheckpointSummary.of(cp, now_ms)
    if summary.resources:
        summary.resources = [_with_download(resource, services, cp.tenant_id) for resource in summary.resources]
    return summary


def _with_download(resource: Resource, services: Services, tenant_id: str) -> Resource:
    link = services.blobs.download_of(tenant_id, resource.blob_id, name=resource.name, media_type=resource.media_type)
    return resource.model_copy(update={"download_url": link.url, "download_expires_at": format_ms(link.expires_ms)})
