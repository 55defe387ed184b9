"""`AsyncBaton`: the asynchronous client, on `httpx.AsyncClient`. Every decision lives in `_core` and `_routes`;
this module only sends what they ask for and sleeps when they say so."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from baton_checkpoints.client import _routes as routes
from baton_checkpoints.client._core import Call, ClientCore, RetryPolicy, adrive, default_headers, resolve_settings
from baton_checkpoints.client._routes import DayInput, ResourceInput, SourceInput, TimeInput
from baton_checkpoints.client.audit import problems_of
from baton_checkpoints.client.blobs import (
    CHUNK_SIZE,
    DownloadSink,
    Progress,
    file_chunks,
    file_sha256,
    media_type_of,
    upload_call,
)
from baton_checkpoints.client.errors import error_from_answer
from baton_checkpoints.client.models import (
    AuditEvent,
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
    ResumeResult,
    SaveResult,
    TenantLimits,
    TenantUsage,
)

T = TypeVar("T")


async def _in_thread(chunks: Iterator[bytes], total: int, progress: Progress | None) -> AsyncIterator[bytes]:
    """A file's chunks read off the event loop (each read in a worker thread); progress is reported on the loop."""
    end = object()
    done = 0
    while True:
        chunk = await asyncio.to_thread(next, chunks, end)
        if chunk is end:
            return
        assert isinstance(chunk, bytes)
        yield chunk
        done += len(chunk)
        if progress is not None:
            progress(done, total)


class AsyncBaton:
    """The asynchronous Baton client (the same methods as `Baton`, awaited).

    `url` and `api_key` default to `BATON_URL` and `BATON_API_KEY`. `retry` bounds attempts and waits; `transport`
    replaces httpx's (tests, proxies); `sleep` replaces `time.sleep` (tests). Use it as a context manager, or call
    `close()`. Safe to share between tasks of one event loop.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        base_url, key = resolve_settings(url, api_key, os.environ)
        self.url = base_url
        self._core = ClientCore(retry or RetryPolicy(), rng)
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=default_headers(key), timeout=timeout, transport=transport
        )
        self._transport = transport
        self._timeout = timeout
        self._plain: httpx.AsyncClient | None = None

    # -- plumbing --------------------------------------------------------------------------------------------------

    async def _run(self, call: Call[T], http: httpx.AsyncClient | None = None) -> T:
        """Drive `call`'s exchange: send each request, sleep each wait, return its result."""
        return await adrive(self._core, http or self._http, call, self._sleep)

    def _presigned(self) -> httpx.AsyncClient:
        """The client for S3's presigned URLs: no Baton key, no base URL."""
        if self._plain is None:
            transport = self._transport or httpx.AsyncHTTPTransport(retries=2)
            self._plain = httpx.AsyncClient(timeout=self._timeout, transport=transport)
        return self._plain

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()
        if self._plain is not None:
            await self._plain.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- checkpoints -----------------------------------------------------------------------------------------------

    async def save(
        self,
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
    ) -> SaveResult:
        """Save (upsert) the checkpoint of (`subject_id`, agent, `kind`): `POST /v1/checkpoints`.

        An `Idempotency-Key` is generated unless given, and reused by every retry, so the save lands once.
        """
        return await self._run(
            routes.save(
                subject_id,
                kind,
                state,
                agent_id=agent_id,
                expected_revision=expected_revision,
                status=status,
                format=format,
                resources=resources,
                source=source,
                lease_token=lease_token,
                ttl_seconds=ttl_seconds,
                keep_revisions=keep_revisions,
                idempotency_key=idempotency_key,
            )
        )

    async def lookup(self, subject_id: str, kind: str, *, agent_id: str | None = None) -> CheckpointRecord:
        """The full record of (`subject_id`, agent, `kind`); a cached record when the server answers `304`."""
        return await self._run(routes.lookup(subject_id, kind, agent_id=agent_id))

    async def get(self, checkpoint_id: str) -> CheckpointRecord:
        """The full record by id; a cached record when the server answers `304`."""
        return await self._run(routes.get(checkpoint_id))

    async def delete(
        self, checkpoint_id: str, *, if_match: str | int | None = None, lease_token: str | None = None
    ) -> DeleteResult:
        """Delete a checkpoint; `if_match` (an ETag or a revision) makes it conditional, `lease_token` passes a
        live lease."""
        return await self._run(routes.delete(checkpoint_id, if_match=if_match, lease_token=lease_token))

    async def list_checkpoints(
        self,
        subject_id: str,
        *,
        kind: str | None = None,
        status: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[CheckpointSummary]:
        """One page of a subject's checkpoints (summaries, newest first)."""
        return await self._run(
            routes.list_checkpoints(subject_id, kind=kind, status=status, agent_id=agent_id, limit=limit, cursor=cursor)
        )

    async def iter_checkpoints(
        self,
        subject_id: str,
        *,
        kind: str | None = None,
        status: str | None = None,
        agent_id: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[CheckpointSummary]:
        """Every checkpoint of a subject, page after page (following `next_cursor`)."""
        cursor: str | None = None
        while True:
            page = await self.list_checkpoints(
                subject_id, kind=kind, status=status, agent_id=agent_id, limit=page_size, cursor=cursor
            )
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def list_revisions(
        self, checkpoint_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[CheckpointSummary]:
        """One page of a checkpoint's kept revisions (summaries, newest first)."""
        return await self._run(routes.list_revisions(checkpoint_id, limit=limit, cursor=cursor))

    async def iter_revisions(
        self, checkpoint_id: str, *, page_size: int | None = None
    ) -> AsyncIterator[CheckpointSummary]:
        """Every kept revision of a checkpoint, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_revisions(checkpoint_id, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_revision(self, checkpoint_id: str, revision: int) -> CheckpointRecord:
        """One kept revision, state included."""
        return await self._run(routes.get_revision(checkpoint_id, revision))

    async def restore(
        self,
        checkpoint_id: str,
        revision: int,
        *,
        expected_revision: int | None = None,
        lease_token: str | None = None,
        idempotency_key: str | None = None,
    ) -> SaveResult:
        """Write a kept revision's state as the next revision (with an automatic `Idempotency-Key`)."""
        return await self._run(
            routes.restore(
                checkpoint_id,
                revision,
                expected_revision=expected_revision,
                lease_token=lease_token,
                idempotency_key=idempotency_key,
            )
        )

    async def resume(
        self,
        subject_id: str,
        *,
        kind: str | None = None,
        agent_id: str | None = None,
        checkpoint_id: str | None = None,
        budget_bytes: int | None = None,
    ) -> ResumeResult:
        """What to resume for a subject: `ready`, `ambiguous`, `none`, `closed` or `omitted`."""
        return await self._run(
            routes.resume(
                subject_id, kind=kind, agent_id=agent_id, checkpoint_id=checkpoint_id, budget_bytes=budget_bytes
            )
        )

    # -- leases ----------------------------------------------------------------------------------------------------

    async def acquire_lease(
        self, checkpoint_id: str, ttl_seconds: int, *, holder: str | None = None, idempotency_key: str | None = None
    ) -> LeaseGranted:
        """Acquire (201) or renew (200, same holder) a checkpoint's lease."""
        return await self._run(
            routes.acquire_lease(checkpoint_id, ttl_seconds, holder=holder, idempotency_key=idempotency_key)
        )

    async def release_lease(self, checkpoint_id: str, lease_token: str) -> LeaseReleased:
        """Release a lease by its token."""
        return await self._run(routes.release_lease(checkpoint_id, lease_token))

    # -- subjects --------------------------------------------------------------------------------------------------

    async def purge_subject(self, subject_id: str, *, until_complete: bool = False) -> PurgeResult:
        """Remove everything of a subject in the tenant; with `until_complete`, repeat until `complete` (the
        result then counts every checkpoint removed)."""
        result = await self._run(routes.purge_subject(subject_id))
        total = result.deleted_checkpoints
        while until_complete and not result.complete:
            result = await self._run(routes.purge_subject(subject_id))
            total += result.deleted_checkpoints
        return PurgeResult(
            subject_id=result.subject_id,
            deleted_checkpoints=total,
            complete=result.complete,
            meta=result.meta,
            raw=result.raw,
        )

    # -- blobs -----------------------------------------------------------------------------------------------------

    async def declare_blob(
        self, sha256: str, size: int, media_type: str, *, idempotency_key: str | None = None
    ) -> CreatedBlob:
        """Declare a blob: its presigned upload (an automatic `Idempotency-Key`)."""
        return await self._run(routes.declare_blob(sha256, size, media_type, idempotency_key=idempotency_key))

    async def get_blob(self, blob_id: str) -> BlobInfo:
        """A blob's metadata and a presigned download URL."""
        return await self._run(routes.get_blob(blob_id))

    async def upload_blob(
        self,
        path: str | os.PathLike[str],
        *,
        media_type: str | None = None,
        progress: Progress | None = None,
        chunk_size: int = CHUNK_SIZE,
        idempotency_key: str | None = None,
    ) -> CreatedBlob:
        """Hash a file, declare it and PUT it to its presigned URL, streaming; `progress(done, total)` after each
        chunk. Returns the declared blob (`as_resource(name)` names it in a save)."""
        file = Path(path)
        size = file.stat().st_size
        digest = await asyncio.to_thread(file_sha256, file, chunk_size)
        blob = await self.declare_blob(
            digest,
            size,
            media_type or media_type_of(file),
            idempotency_key=idempotency_key,
        )
        call = upload_call(
            blob.upload, size, lambda: _in_thread(file_chunks(file, size, None, chunk_size), size, progress)
        )
        await self._run(call, self._presigned())
        return blob

    async def download_blob(
        self,
        blob: str | BlobInfo,
        path: str | os.PathLike[str],
        *,
        progress: Progress | None = None,
        chunk_size: int = CHUNK_SIZE,
    ) -> BlobInfo:
        """Stream a blob (its id, or a `BlobInfo`) to a file, checking its SHA-256; `progress(done, total)` after
        each chunk. The file appears only once its bytes are verified."""
        info = blob if isinstance(blob, BlobInfo) else await self.get_blob(blob)
        sink = DownloadSink(Path(path), info.sha256, info.size, None)
        try:
            async with self._presigned().stream("GET", info.download_url) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise error_from_answer(response.status_code, None, response.headers, None, response.text)
                async for chunk in response.aiter_bytes(chunk_size):
                    await asyncio.to_thread(sink.write, chunk)
                    if progress is not None:
                        progress(sink.done, max(info.size, sink.done))
            await asyncio.to_thread(sink.finish)
        except BaseException:
            sink.abort()
            raise
        return info

    # -- keys ------------------------------------------------------------------------------------------------------

    async def create_key(
        self,
        agent_id: str,
        scopes: Sequence[str],
        *,
        tenant_id: str | None = None,
        not_before: str | None = None,
        expires_at: str | None = None,
        description: str | None = None,
    ) -> CreatedKey:
        """Issue an API key; its `secret` is in this answer only. Never repeated once it may have reached the
        server (no `Idempotency-Key` on this route)."""
        return await self._run(
            routes.create_key(
                agent_id,
                scopes,
                tenant_id=tenant_id,
                not_before=not_before,
                expires_at=expires_at,
                description=description,
            )
        )

    async def list_keys(
        self,
        *,
        tenant_id: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[KeyInfo]:
        """One page of live keys (oldest first, no secrets)."""
        return await self._run(routes.list_keys(tenant_id=tenant_id, agent_id=agent_id, limit=limit, cursor=cursor))

    async def iter_keys(
        self, *, tenant_id: str | None = None, agent_id: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[KeyInfo]:
        """Every live key, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_keys(tenant_id=tenant_id, agent_id=agent_id, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def revoke_key(self, key_id: str, *, tenant_id: str | None = None) -> KeyDeleted:
        """Revoke a key."""
        return await self._run(routes.revoke_key(key_id, tenant_id=tenant_id))

    async def whoami(self) -> Identity:
        """The calling key: its tenant, agent, scopes and expiry (`GET /v1/whoami`, any valid key)."""
        return await self._run(routes.whoami())

    # -- tenants, usage and audit ----------------------------------------------------------------------------------

    async def get_limits(self, tenant_id: str) -> TenantLimits:
        """A tenant's limit settings (None: the stage's default) and what applies (`effective`); needs
        `tenants:manage`."""
        return await self._run(routes.get_limits(tenant_id))

    async def set_limits(
        self,
        tenant_id: str,
        *,
        requests_per_minute: int | None = None,
        burst: int | None = None,
        storage_bytes: int | None = None,
        checkpoints: int | None = None,
    ) -> TenantLimits:
        """Set a tenant's limits (`tenants:manage`): the rate limit (`requests_per_minute`, `burst`) and the quotas
        (`storage_bytes`, `checkpoints`: live checkpoints and threads). Returns the limits as set.

        The request replaces every setting: one not given, or given as None, goes back to the stage's default; it
        is not left as it was. To change one and keep the others, pass back what `get_limits` read:
        `set_limits(tenant, **{**(await baton.get_limits(tenant)).settings(), "burst": 50})` (two requests, not
        atomic). Repeated after a lost answer (setting the same values twice sets the same thing; the audit trail
        then holds a `limits.changed` event per request that arrived). Every container applies new limits within 10
        seconds.
        """
        return await self._run(
            routes.set_limits(
                tenant_id,
                requests_per_minute=requests_per_minute,
                burst=burst,
                storage_bytes=storage_bytes,
                checkpoints=checkpoints,
            )
        )

    async def usage(
        self, *, from_: DayInput | None = None, to: DayInput | None = None, tenant_id: str | None = None
    ) -> TenantUsage:
        """The tenant's usage day by day (UTC) from `from_` to `to` (`datetime.date`s or `YYYY-MM-DD`; by default
        the 30 days ending today; at most 100 days), and the totals; `tenant_id` names another tenant (needs
        `tenants:manage`). Needs `usage:read`."""
        return await self._run(routes.usage(from_=from_, to=to, tenant_id=tenant_id))

    async def list_audit(
        self,
        *,
        action: str | None = None,
        from_: TimeInput | None = None,
        to: TimeInput | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> AuditPage:
        """One page of the key's tenant's audit trail, newest first (`limit` 1 to 100, default 50), and the
        tenant's `head`; `action` keeps one action, `from_` and `to` bound the times (RFC 3339 strings, or
        `datetime`s with a zone); `tenant_id` names another tenant (needs `tenants:manage`). Needs `audit:read`."""
        return await self._run(
            routes.list_audit(action=action, from_=from_, to=to, limit=limit, cursor=cursor, tenant_id=tenant_id)
        )

    async def iter_audit(
        self,
        *,
        action: str | None = None,
        from_: TimeInput | None = None,
        to: TimeInput | None = None,
        page_size: int | None = None,
        tenant_id: str | None = None,
    ) -> AsyncIterator[AuditEvent]:
        """Every event of the key's tenant's audit trail (filtered as `list_audit`), newest first, page after
        page."""
        cursor: str | None = None
        while True:
            page = await self.list_audit(
                action=action, from_=from_, to=to, limit=page_size, cursor=cursor, tenant_id=tenant_id
            )
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def read_audit_trail(
        self, *, page_size: int = 100, tenant_id: str | None = None
    ) -> tuple[list[Mapping[str, Any]], Mapping[str, Any]]:
        """The key's tenant's whole audit trail (another tenant's with `tenant_id`: needs `tenants:manage`): every
        event as sent, newest first, and the head as the first page answered it (no event newer than it was read).
        Needs `audit:read`."""
        events: list[Mapping[str, Any]] = []
        head: Mapping[str, Any] | None = None
        cursor: str | None = None
        while True:
            page = await self.list_audit(limit=page_size, cursor=cursor, tenant_id=tenant_id)
            if head is None:
                head = page.head.raw
            events.extend(event.raw for event in page.items)
            if page.next_cursor is None:
                return events, head
            cursor = page.next_cursor

    async def verify_audit(self, *, page_size: int = 100, tenant_id: str | None = None) -> list[str]:
        """Check the hash chain of the key's tenant's whole audit trail (`read_audit_trail`), as `baton audit
        verify` does: recompute each event's hash from the event as sent, and check that each names the one before
        it and that the newest is the head. The problems found, empty when the chain is whole."""
        events, head = await self.read_audit_trail(page_size=page_size, tenant_id=tenant_id)
        return problems_of(events, head)

    # -- service ---------------------------------------------------------------------------------------------------

    async def health(self) -> Health:
        """`GET /v1/health` (needs no key)."""
        return await self._run(routes.health())

    async def openapi(self) -> dict[str, Any]:
        """The OpenAPI document."""
        return await self._run(routes.openapi())

    async def schema(self, name: str) -> dict[str, Any]:
        """A JSON Schema of an accepted format, e.g. `opencheckpoint-0.1`."""
        return await self._run(routes.schema(name))

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = routes._UNSET,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> RawResponse:
        """Any request, for what no typed method covers; error answers still raise typed exceptions."""
        return await self._run(
            routes.raw(
                method,
                path,
                params=params,
                json=json,
                content=content,
                headers=headers,
                idempotency_key=idempotency_key,
            )
        )
