"""The summary part of a full record, as every route that answers one builds it (GET by id or lookup, a kept
revision, a `ready` resume)."""

from __future__ import annotations

from typing import Any

import orjson

from baton_checkpoints.api.jsontext import model_json
from baton_checkpoints.api.schemas import CheckpointSummary, Resource, SourceOut
from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.checkpoints import Checkpoint, Saved
from baton_checkpoints.domain.clock import format_ms

_SOURCE_FIELDS = tuple(SourceOut.model_fields)


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


def record_summary_json(cp: Checkpoint, services: Services, now_ms: int | None) -> str:
    """`record_summary(cp, services, now_ms)` as compact JSON, the way `model_json` writes the model. A checkpoint
    without resources (nearly every one) is written from its fields directly: the same text, without building
    the model (a fifth of a lookup's own CPU went to the model and its serialization); a unit test holds the two
    equal."""
    if cp.resources:
        return model_json(record_summary(cp, services, now_ms))
    lease = cp.live_lease(now_ms) if now_ms is not None else None
    source = cp.source
    fields: dict[str, Any] = {
        "checkpoint_id": cp.checkpoint_id,
        "subject_id": cp.subject_id,
        "agent_id": cp.agent_id,
        "kind": cp.kind,
        "revision": cp.revision,
        "status": cp.status,
        "state_hash": cp.state_hash,
        "state_bytes": cp.state_bytes,
        "format": cp.format,
        "resources": [],
        "source": None if source is None else {name: source[name] for name in _SOURCE_FIELDS if name in source},
        "ttl_seconds": cp.ttl_seconds,
        "keep_revisions": cp.keep_revisions,
        "lease": None if lease is None else {"holder": lease.holder, "expires_at": format_ms(lease.expires_ms)},
        "expires_at": format_ms(cp.expires_ms),
        "created_at": format_ms(cp.created_ms),
        "updated_at": format_ms(cp.updated_ms),
    }
    return orjson.dumps(fields).decode("utf-8")


def save_result_json(saved: Saved) -> str:
    """`SaveResult.of(saved)` as compact JSON, the way `model_json` writes it, without building the model (a unit
    test holds the two equal)."""
    fields = {
        "checkpoint_id": saved.checkpoint_id,
        "subject_id": saved.subject_id,
        "agent_id": saved.agent_id,
        "kind": saved.kind,
        "revision": saved.revision,
        "status": saved.status,
        "state_hash": saved.state_hash,
        "state_bytes": saved.state_bytes,
        "expires_at": format_ms(saved.expires_ms),
        "updated": saved.updated,
    }
    return orjson.dumps(fields).decode("utf-8")
