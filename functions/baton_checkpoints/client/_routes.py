"""One function per route of api-v1.md: the `Call` it makes (method, path, body, headers, retry safety, caching)
and how its answer becomes a typed result. Shared by `Baton` and `AsyncBaton`, which only run the calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote

from baton_checkpoints.client._core import Answer, Call, data_of, new_idempotency_key, next_cursor_of
from baton_checkpoints.client.models import (
    AuditPage,
    BlobInfo,
    CheckpointRecord,
    CheckpointSummary,
    CreatedBlob,
    CreatedKey,
    DeleteResult,
    Health,
    Identity,
    KeyDeleted,
    KeyInfo,
    LeaseGranted,
    LeaseReleased,
    Page,
    PurgeResult,
    RawResponse,
    ResourceRef,
    ResumeResult,
    SaveResult,
    Source,
    TenantLimits,
    TenantUsage,
    audit_event_from,
    audit_head_from,
    build,
    created_blob_from,
    key_from,
    limits_from,
    record_from,
    resume_from,
    summary_from,
    usage_from,
)

_UNSET: Any = object()

ResourceInput = ResourceRef | Mapping[str, Any]
SourceInput = Source | Mapping[str, Any]


def segment(value: str) -> str:
    """A path segment: every reserved character percent-encoded (a subject may hold `/`, `?`, `%`)."""
    return quote(value, safe="")


def etag_for(checkpoint_id: str, revision: int) -> str:
    """The weak entity tag of a checkpoint's revision, as `If-Match` takes it: `W/"<id>:<revision>"`."""
    return f'W/"{checkpoint_id}:{revision}"'


def _optional(**fields: Any) -> dict[str, Any]:
    """The fields that are not None (the body leaves out what the caller did not set)."""
    return {name: value for name, value in fields.items() if value is not None}


def _idempotent_post(path: str, body: Mapping[str, Any], key: str | None, parse: Any, **extra: Any) -> Call[Any]:
    return Call(
        method="POST",
        path=path,
        body=body,
        has_body=True,
        headers={"Idempotency-Key": key or new_idempotency_key()},
        repeatable=True,
        parse=parse,
        **extra,
    )


def _save_result(answer: Answer) -> SaveResult:
    return build(SaveResult, data_of(answer), answer.meta)


def _created_id(result: SaveResult) -> str | None:
    return result.checkpoint_id if result.meta.status == 201 else None


def save(
    subject_id: str,
    kind: str,
    state: Any,
    *,
    agent_id: str | None = None,
    expected_revision: int | None = None,
    status: str | None = None,
    format: str | None = None,
    resources: Sequence[ResourceInput] | None = None,
    source: SourceInput | None = None,
    lease_token: str | None = None,
    ttl_seconds: int | None = None,
    keep_revisions: int | None = None,
    idempotency_key: str | None = None,
) -> Call[SaveResult]:
    """`POST /v1/checkpoints`."""
    body: dict[str, Any] = {"subject_id": subject_id, "kind": kind, "state": state}
    body.update(
        _optional(
            agent_id=agent_id,
            expected_revision=expected_revision,
            status=status,
            format=format,
            lease_token=lease_token,
            ttl_seconds=ttl_seconds,
            keep_revisions=keep_revisions,
        )
    )
    if resources is not None:
        body["resources"] = [item.to_json() if isinstance(item, ResourceRef) else dict(item) for item in resources]
    if source is not None:
        body["source"] = source.to_json() if isinstance(source, Source) else dict(source)
    return _idempotent_post("/v1/checkpoints", body, idempotency_key, _save_result, created_id=_created_id)


def _record(answer: Answer) -> CheckpointRecord:
    return record_from(data_of(answer), answer.meta)


def lookup(subject_id: str, kind: str, *, agent_id: str | None = None) -> Call[CheckpointRecord]:
    """`GET /v1/checkpoints?subject_id&kind[&agent_id]`, ETag-aware."""
    params = _optional(subject_id=subject_id, kind=kind, agent_id=agent_id)
    return Call(
        method="GET",
        path="/v1/checkpoints",
        params=params,
        repeatable=True,
        parse=_record,
        cache_key=("lookup", subject_id, kind, agent_id or ""),
    )


def get(checkpoint_id: str) -> Call[CheckpointRecord]:
    """`GET /v1/checkpoints/{id}`, ETag-aware."""
    return Call(
        method="GET",
        path=f"/v1/checkpoints/{segment(checkpoint_id)}",
        repeatable=True,
        parse=_record,
        checkpoint_id=checkpoint_id,
        cache_key=("id", checkpoint_id),
    )


def delete(
    checkpoint_id: str, *, if_match: str | int | None = None, lease_token: str | None = None
) -> Call[DeleteResult]:
    """`DELETE /v1/checkpoints/{id}`; `if_match` is an entity tag or a revision number of this checkpoint.

    After a lost answer (a broken connection, a gateway 5xx), a retry that meets `404` counts as done, with
    `confirmed=False`, for an unconditional delete: ids are never reused, so the checkpoint the caller meant to
    remove is gone for good whoever removed it. A conditional delete (`if_match`) raises the `NotFoundError` instead,
    since whether the condition held can no longer be known.
    """
    headers: dict[str, str] = {}
    if if_match is not None:
        headers["If-Match"] = etag_for(checkpoint_id, if_match) if isinstance(if_match, int) else if_match
    if lease_token is not None:
        headers["Lease-Token"] = lease_token

    def gone(answer: Answer) -> DeleteResult:
        return DeleteResult(checkpoint_id=checkpoint_id, deleted=True, confirmed=False, meta=answer.meta)

    return Call(
        method="DELETE",
        path=f"/v1/checkpoints/{segment(checkpoint_id)}",
        headers=headers,
        repeatable=True,
        parse=lambda answer: build(DeleteResult, data_of(answer), answer.meta),
        checkpoint_id=checkpoint_id,
        gone_is_done=None if if_match is not None else gone,
        invalidates=checkpoint_id,
    )


def _summaries(answer: Answer) -> Page[CheckpointSummary]:
    items = [summary_from(item) for item in data_of(answer)]
    return Page(items=items, next_cursor=next_cursor_of(answer), meta=answer.meta)


def list_checkpoints(
    subject_id: str,
    *,
    kind: str | None = None,
    status: str | None = None,
    agent_id: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[CheckpointSummary]]:
    """`GET /v1/subjects/{subject_id}/checkpoints`: one page."""
    return Call(
        method="GET",
        path=f"/v1/subjects/{segment(subject_id)}/checkpoints",
        params=_optional(kind=kind, status=status, agent_id=agent_id, limit=limit, cursor=cursor),
        repeatable=True,
        parse=_summaries,
    )


def list_revisions(
    checkpoint_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[Page[CheckpointSummary]]:
    """`GET /v1/checkpoints/{id}/revisions`: one page."""
    return Call(
        method="GET",
        path=f"/v1/checkpoints/{segment(checkpoint_id)}/revisions",
        params=_optional(limit=limit, cursor=cursor),
        repeatable=True,
        parse=_summaries,
        checkpoint_id=checkpoint_id,
    )


def get_revision(checkpoint_id: str, revision: int) -> Call[CheckpointRecord]:
    """`GET /v1/checkpoints/{id}/revisions/{n}`."""
    return Call(
        method="GET",
        path=f"/v1/checkpoints/{segment(checkpoint_id)}/revisions/{int(revision)}",
        repeatable=True,
        parse=_record,
        checkpoint_id=checkpoint_id,
    )


def restore(
    checkpoint_id: str,
    revision: int,
    *,
    expected_revision: int | None = None,
    lease_token: str | None = None,
    idempotency_key: str | None = None,
) -> Call[SaveResult]:
    """`POST /v1/checkpoints/{id}/restore`."""
    body = {"revision": revision, **_optional(expected_revision=expected_revision, lease_token=lease_token)}
    return _idempotent_post(
        f"/v1/checkpoints/{segment(checkpoint_id)}/restore",
        body,
        idempotency_key,
        _save_result,
        checkpoint_id=checkpoint_id,
    )


def resume(
    subject_id: str,
    *,
    kind: str | None = None,
    agent_id: str | None = None,
    checkpoint_id: str | None = None,
    budget_bytes: int | None = None,
) -> Call[ResumeResult]:
    """`POST /v1/resume`: read-only, so repeatable without a key."""
    body = {
        "subject_id": subject_id,
        **_optional(kind=kind, agent_id=agent_id, checkpoint_id=checkpoint_id, budget_bytes=budget_bytes),
    }
    return Call(
        method="POST",
        path="/v1/resume",
        body=body,
        has_body=True,
        repeatable=True,
        parse=lambda answer: resume_from(data_of(answer), answer.meta),
        checkpoint_id=checkpoint_id,
    )


def acquire_lease(
    checkpoint_id: str, ttl_seconds: int, *, holder: str | None = None, idempotency_key: str | None = None
) -> Call[LeaseGranted]:
    """`POST /v1/checkpoints/{id}/lease`: grant (201) or renew by the same holder (200)."""
    body = {"ttl_seconds": ttl_seconds, **_optional(holder=holder)}
    return _idempotent_post(
        f"/v1/checkpoints/{segment(checkpoint_id)}/lease",
        body,
        idempotency_key,
        lambda answer: build(LeaseGranted, data_of(answer), answer.meta),
        checkpoint_id=checkpoint_id,
        invalidates=checkpoint_id,  # a lease changes the record but not its ETag: forget the cached one
    )


def release_lease(checkpoint_id: str, lease_token: str) -> Call[LeaseReleased]:
    """`DELETE /v1/checkpoints/{id}/lease` with `Lease-Token` (a retry after a lost answer is answered 200)."""
    return Call(
        method="DELETE",
        path=f"/v1/checkpoints/{segment(checkpoint_id)}/lease",
        headers={"Lease-Token": lease_token},
        repeatable=True,
        parse=lambda answer: build(LeaseReleased, data_of(answer), answer.meta),
        checkpoint_id=checkpoint_id,
        invalidates=checkpoint_id,
    )


def purge_subject(subject_id: str) -> Call[PurgeResult]:
    """`DELETE /v1/subjects/{subject_id}`: idempotent; repeat while `complete` is false."""
    return Call(
        method="DELETE",
        path=f"/v1/subjects/{segment(subject_id)}",
        repeatable=True,
        parse=lambda answer: build(PurgeResult, data_of(answer), answer.meta),
    )


def declare_blob(sha256: str, size: int, media_type: str, *, idempotency_key: str | None = None) -> Call[CreatedBlob]:
    """`POST /v1/blobs`: a presigned upload for these bytes."""
    body = {"sha256": sha256, "size": size, "media_type": media_type}
    return _idempotent_post(
        "/v1/blobs", body, idempotency_key, lambda answer: created_blob_from(data_of(answer), answer.meta)
    )


def get_blob(blob_id: str) -> Call[BlobInfo]:
    """`GET /v1/blobs/{blob_id}`: metadata and a presigned download."""
    return Call(
        method="GET",
        path=f"/v1/blobs/{segment(blob_id)}",
        repeatable=True,
        parse=lambda answer: build(BlobInfo, data_of(answer), answer.meta),
    )


def create_key(
    agent_id: str,
    scopes: Sequence[str],
    *,
    tenant_id: str | None = None,
    not_before: str | None = None,
    expires_at: str | None = None,
    description: str | None = None,
) -> Call[CreatedKey]:
    """`POST /v1/keys`: takes no `Idempotency-Key` (its answer holds a secret), so it is never repeated once it
    may have reached the server."""

    def parse(answer: Answer) -> CreatedKey:
        key = key_from(data_of(answer), answer.meta)
        assert isinstance(key, CreatedKey)  # the answer of a create carries the secret
        return key

    body = {
        "agent_id": agent_id,
        "scopes": list(scopes),
        **_optional(tenant_id=tenant_id, not_before=not_before, expires_at=expires_at, description=description),
    }
    return Call(method="POST", path="/v1/keys", body=body, has_body=True, repeatable=False, parse=parse)


def list_keys(
    *,
    tenant_id: str | None = None,
    agent_id: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[KeyInfo]]:
    """`GET /v1/keys`: one page of live keys, without secrets."""

    def parse(answer: Answer) -> Page[KeyInfo]:
        items = [key_from(item) for item in data_of(answer)]
        return Page(items=items, next_cursor=next_cursor_of(answer), meta=answer.meta)

    return Call(
        method="GET",
        path="/v1/keys",
        params=_optional(tenant_id=tenant_id, agent_id=agent_id, limit=limit, cursor=cursor),
        repeatable=True,
        parse=parse,
    )


def revoke_key(key_id: str, *, tenant_id: str | None = None) -> Call[KeyDeleted]:
    """`DELETE /v1/keys/{key_id}`; after a lost answer a `404` counts as done (`confirmed=False`), as for deletes."""

    def gone(answer: Answer) -> KeyDeleted:
        return KeyDeleted(key_id=key_id, deleted=True, confirmed=False, meta=answer.meta)

    return Call(
        method="DELETE",
        path=f"/v1/keys/{segment(key_id)}",
        params=_optional(tenant_id=tenant_id),
        repeatable=True,
        parse=lambda answer: build(KeyDeleted, data_of(answer), answer.meta),
        gone_is_done=gone,
    )


def whoami() -> Call[Identity]:
    """`GET /v1/whoami`: the calling key (any valid key may ask)."""

    def parse(answer: Answer) -> Identity:
        data = data_of(answer)
        scopes, effective = tuple(data.get("scopes") or ()), tuple(data.get("effective_scopes") or ())
        return build(Identity, data, answer.meta, scopes=scopes, effective_scopes=effective)

    return Call(method="GET", path="/v1/whoami", repeatable=True, parse=parse)


def get_limits(tenant_id: str) -> Call[TenantLimits]:
    """`GET /v1/tenants/{tenant_id}/limits` (`tenants:manage`): the tenant's settings and what applies."""
    return Call(
        method="GET",
        path=f"/v1/tenants/{segment(tenant_id)}/limits",
        repeatable=True,
        parse=lambda answer: limits_from(data_of(answer), answer.meta),
    )


def set_limits(
    tenant_id: str,
    *,
    requests_per_minute: int | None = None,
    burst: int | None = None,
    storage_bytes: int | None = None,
    checkpoints: int | None = None,
) -> Call[TenantLimits]:
    """`PUT /v1/tenants/{tenant_id}/limits` (`tenants:manage`): the body replaces every setting, so each is sent,
    None as `null` (the stage's default; the server reads a setting left out the same way). Repeatable: sending the
    same settings twice sets the same thing (each request appends its own `limits.changed` audit event)."""
    body = {
        "requests_per_minute": requests_per_minute,
        "burst": burst,
        "storage_bytes": storage_bytes,
        "checkpoints": checkpoints,
    }
    return Call(
        method="PUT",
        path=f"/v1/tenants/{segment(tenant_id)}/limits",
        body=body,
        has_body=True,
        repeatable=True,
        parse=lambda answer: limits_from(data_of(answer), answer.meta),
    )


DayInput = date | str
TimeInput = datetime | str


def _day(value: DayInput | None) -> str | None:
    """A `YYYY-MM-DD` query value: a `date` as written, a `datetime` by its UTC date (naive: as written), a string
    as given."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo is not None else value).date().isoformat()
    return value.isoformat()


def _time(value: TimeInput | None, name: str) -> str | None:
    """An RFC 3339 query value: a string as given, a `datetime` with its zone (a naive one is refused here, as the
    server would refuse a time without a zone)."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError(f"{name} must carry a time zone (e.g. datetime.now(UTC)), not a naive datetime.")
    return value.isoformat()


def usage(
    *, from_: DayInput | None = None, to: DayInput | None = None, tenant_id: str | None = None
) -> Call[TenantUsage]:
    """`GET /v1/usage?from&to[&tenant_id]` (`usage:read`; another tenant's needs `tenants:manage`)."""
    return Call(
        method="GET",
        path="/v1/usage",
        params=_optional(**{"from": _day(from_), "to": _day(to), "tenant_id": tenant_id}),
        repeatable=True,
        parse=lambda answer: usage_from(data_of(answer), answer.meta),
    )


def list_audit(
    *,
    action: str | None = None,
    from_: TimeInput | None = None,
    to: TimeInput | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    tenant_id: str | None = None,
) -> Call[AuditPage]:
    """`GET /v1/audit` (`audit:read`): one page of the caller's tenant's events (another's needs `tenants:manage`),
    newest first, and its head."""

    def parse(answer: Answer) -> AuditPage:
        items = [audit_event_from(item) for item in data_of(answer)]
        meta = answer.body.get("meta") if isinstance(answer.body, Mapping) else None
        head = audit_head_from(meta.get("head") if isinstance(meta, Mapping) else None)
        return AuditPage(items=items, next_cursor=next_cursor_of(answer), meta=answer.meta, head=head)

    params = {
        "action": action,
        "from": _time(from_, "from_"),
        "to": _time(to, "to"),
        "limit": limit,
        "cursor": cursor,
        "tenant_id": tenant_id,
    }
    return Call(method="GET", path="/v1/audit", params=_optional(**params), repeatable=True, parse=parse)


def health() -> Call[Health]:
    """`GET /v1/health` (no key needed)."""
    return Call(
        method="GET",
        path="/v1/health",
        repeatable=True,
        needs_key=False,
        parse=lambda answer: build(Health, data_of(answer), answer.meta),
    )


def _document(answer: Answer) -> dict[str, Any]:
    if not isinstance(answer.body, dict):
        return data_of(answer)  # type: ignore[no-any-return]  # raises: not a JSON document
    return answer.body


def openapi() -> Call[dict[str, Any]]:
    """`GET /v1/openapi.json`: the OpenAPI document (a plain dict)."""
    return Call(method="GET", path="/v1/openapi.json", repeatable=True, needs_key=False, parse=_document)


def schema(name: str) -> Call[dict[str, Any]]:
    """`GET /v1/schemas/{name}.json` (`name` with or without `.json`)."""
    filename = name if name.endswith(".json") else f"{name}.json"
    return Call(
        method="GET", path=f"/v1/schemas/{segment(filename)}", repeatable=True, needs_key=False, parse=_document
    )


def raw(
    method: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    json: Any = _UNSET,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
) -> Call[RawResponse]:
    """Any request (what no typed method covers); errors still raise typed exceptions. Repeated after a lost answer
    only when its method is GET/HEAD/DELETE or it carries an `Idempotency-Key`."""
    call_headers = dict(headers or {})
    if idempotency_key is not None:
        call_headers["Idempotency-Key"] = idempotency_key
    method = method.upper()

    def parse(answer: Answer) -> RawResponse:
        data = answer.body.get("data") if isinstance(answer.body, Mapping) else answer.body
        return RawResponse(
            status_code=answer.status,
            data=data,
            headers=dict(answer.headers),
            meta=answer.meta,
            raw=answer.body if isinstance(answer.body, Mapping) else {},
        )

    return Call(
        method=method,
        path=path,
        params=params,
        body=None if json is _UNSET else json,
        has_body=json is not _UNSET,
        content=content,
        headers=call_headers,
        repeatable=method in ("GET", "HEAD", "DELETE") or "Idempotency-Key" in call_headers,
        needs_key=False,  # any route, public ones too: the server says what a request without a key gets
        parse=parse,
    )
