"""`BatonSaver`: LangGraph's checkpointer over HTTPS, one request per saver call, on the SDK's retry core."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from baton_checkpoints.client import _routes as routes
from baton_checkpoints.client._core import (
    Call,
    ClientCore,
    RetryPolicy,
    adrive,
    default_headers,
    drive,
    resolve_settings,
)
from baton_checkpoints.client.blobs import upload_call
from baton_checkpoints.client.errors import BatonConnectionError, NotFoundError, error_from_answer
from baton_checkpoints.langgraph import threads
from baton_checkpoints.langgraph.threads import Listing, checkpoint_id_of, namespace_of, thread_id_of, tuple_config

T = TypeVar("T")

NO_GLOBAL_SEARCH = (
    "BatonSaver.list needs a config naming a thread (config['configurable']['thread_id']): Baton lists the "
    "checkpoints of one thread at a time and has no search across threads."
)


BLOB_MEDIA_TYPE = "application/octet-stream"
"""How a value sent as a blob is declared (the serializer's type travels with the value, not the blob)."""


class BatonSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps threads in Baton, reached over HTTPS with one API key.

        from baton_checkpoints.langgraph import BatonSaver

        graph = builder.compile(checkpointer=BatonSaver())  # BATON_URL, BATON_API_KEY

    Every saver call is one HTTPS request (`list` one per page), retried by the SDK's core on throttling, on
    `503` and on a lost answer (every threads route is idempotent by its own keys). The key needs
    `checkpoints:read`, `checkpoints:write` and `checkpoints:delete` (the last for `delete_thread`, `prune` and
    `delete_for_runs`). Errors are the SDK's typed exceptions (`baton_checkpoints.client.BatonError` and its
    subclasses),
    except a missing thread or checkpoint where LangGraph expects none: `get_tuple` answers None, `list` yields
    nothing, `delete_thread` and `copy_thread` of a missing thread do nothing.

    `agent_id` names another agent of the tenant (a key holding `*`); `ttl_seconds` sets each thread's lifetime
    (60 s to 30 days after its last put, plus at most a tenth of it and never more than a minute, since a put
    refreshes the expiry only once that slack has passed; the server's default is a day). `serde` is LangGraph's
    serializer: Baton stores what it produces as opaque typed bytes. `timeout`, `retry` and the transports
    configure HTTP (tests pass transports). Both HTTP clients are created on first use; close them with `close()` /
    `aclose()` or use the saver as a (sync or async) context manager.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        agent_id: str | None = None,
        ttl_seconds: int | None = None,
        serde: SerializerProtocol | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(serde=serde)
        base_url, key = resolve_settings(url, api_key, os.environ)
        self.url = base_url
        self.agent_id = agent_id
        self.ttl_seconds = ttl_seconds
        self._headers = default_headers(key)
        self._timeout = timeout
        self._transport = transport
        self._async_transport = async_transport
        self._core = ClientCore(retry or RetryPolicy())
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._async_client: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._plain: httpx.Client | None = None
        self._async_plain: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"BatonSaver(url={self.url!r}, agent_id={self.agent_id!r})"  # never the key

    # -- transport --------------------------------------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        with self._lock:  # LangGraph calls put_writes from several threads at once
            if self._client is None:
                self._client = httpx.Client(
                    base_url=self.url, headers=self._headers, timeout=self._timeout, transport=self._transport
                )
            return self._client

    def _async_http(self) -> httpx.AsyncClient:
        # An AsyncClient's pooled connections belong to the event loop that opened them: a saver used from a second
        # loop (two `asyncio.run` calls) gets a client of its own there instead of a pool tied to a closed loop.
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._async_loop is not loop:
            self._async_client = httpx.AsyncClient(
                base_url=self.url, headers=self._headers, timeout=self._timeout, transport=self._async_transport
            )
            self._async_plain = None
            self._async_loop = loop
        return self._async_client

    def _presigned(self) -> httpx.Client:
        # Values in the bucket come as presigned URLs: fetched without the Baton key (the URL is its own credential).
        with self._lock:
            if self._plain is None:
                transport = self._transport or httpx.HTTPTransport(retries=2)
                self._plain = httpx.Client(timeout=self._timeout, transport=transport)
            return self._plain

    def _async_presigned(self) -> httpx.AsyncClient:
        self._async_http()  # a new event loop replaces both asynchronous clients
        if self._async_plain is None:
            transport = self._async_transport or httpx.AsyncHTTPTransport(retries=2)
            self._async_plain = httpx.AsyncClient(timeout=self._timeout, transport=transport)
        return self._async_plain

    def _decode(self, data: Any) -> CheckpointTuple:
        """A tuple of the API as LangGraph's, with the values kept in the bucket downloaded first."""
        downloads = {url: self._download(url) for url in threads.stored_urls(data)}
        return threads.tuple_from(data, self.serde, downloads)

    async def _adecode(self, data: Any) -> CheckpointTuple:
        urls = threads.stored_urls(data)
        fetched = await asyncio.gather(*(self._adownload(url) for url in urls))
        return threads.tuple_from(data, self.serde, dict(zip(urls, fetched, strict=True)))

    def _download(self, url: str) -> bytes:
        try:
            response = self._presigned().get(url)
        except httpx.TransportError as error:
            raise _download_failed(error) from None
        return _downloaded(response)

    async def _adownload(self, url: str) -> bytes:
        try:
            response = await self._async_presigned().get(url)
        except httpx.TransportError as error:
            raise _download_failed(error) from None
        return _downloaded(response)

    def _as_blobs(self, body: dict[str, Any]) -> None:
        """Send the values too large for a body as blobs first (two requests each: declare, upload), and name them
        in `body` by `blob_id` (Baton copies each into the thread's own storage)."""
        for value in threads.oversized(body):
            raw = base64.b64decode(value.pop("data"))
            blob = self._run(routes.declare_blob(hashlib.sha256(raw).hexdigest(), len(raw), BLOB_MEDIA_TYPE))
            self._run(upload_call(blob.upload, len(raw), _bytes_of(raw)), self._presigned())
            value["blob_id"] = blob.blob_id

    async def _aas_blobs(self, body: dict[str, Any]) -> None:
        for value in threads.oversized(body):
            raw = base64.b64decode(value.pop("data"))
            blob = await self._arun(routes.declare_blob(hashlib.sha256(raw).hexdigest(), len(raw), BLOB_MEDIA_TYPE))
            await self._arun(upload_call(blob.upload, len(raw), _bytes_of(raw)), self._async_presigned())
            value["blob_id"] = blob.blob_id

    def _run(self, call: Call[T], http: httpx.Client | None = None) -> T:
        """Drive `call`'s exchange on the synchronous client (the SDK's loop): send each request, sleep each wait."""
        return drive(self._core, http or self._http(), call)

    async def _arun(self, call: Call[T], http: httpx.AsyncClient | None = None) -> T:
        """Drive `call`'s exchange on the asynchronous client."""
        return await adrive(self._core, http or self._async_http(), call)

    def close(self) -> None:
        """Close the synchronous clients' connections."""
        with self._lock:
            clients, self._client, self._plain = (self._client, self._plain), None, None
        for client in clients:
            if client is not None:
                client.close()

    async def aclose(self) -> None:
        """Close every client's connections."""
        clients = (self._async_client, self._async_plain)
        self._async_client, self._async_plain, self._async_loop = None, None, None
        for client in clients:
            if client is not None:
                await client.aclose()
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- versions ---------------------------------------------------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next version of a channel: its counter, zero-padded so versions sort as strings, and a random
        fraction.

        Not the base class's bare integers: a value is stored once per (thread, namespace, channel, version), and a
        fork (`update_state` on an older checkpoint, a replay from one) bumps a channel from the same version as the
        branch it leaves, so with integers both branches would name different values with one version and one of
        them would read the other's. The random part keeps the versions of two branches apart, as LangGraph's
        in-memory and Postgres savers do (same format, so their versions read here too).
        """
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(str(current).split(".", 1)[0])
        return f"{counter + 1:032}.{random.random():016}"

    # -- synchronous ------------------------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (the namespace's latest without `checkpoint_id`), or None."""
        call = threads.get_tuple(thread_id_of(config), namespace_of(config), checkpoint_id_of(config), self.agent_id)
        try:
            data = self._run(call)
        except NotFoundError:
            return None
        return self._decode(data)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The thread's checkpoints, newest first: within `config`'s `checkpoint_ns` (every namespace when the
        config has none), older than `before`, whose metadata holds every pair of `filter`, at most `limit`.
        One request per page, asked for as the iterator is consumed."""
        if config is None:
            raise ValueError(NO_GLOBAL_SEARCH)
        if checkpoint_id_of(config) is not None:
            return self._list_one(config, filter, before, limit)
        return self._list_pages(_listing(config, filter, before, limit))

    def _list_one(
        self,
        config: RunnableConfig,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        found = self.get_tuple(config)
        if _listed(found, filter, before, limit):
            assert found is not None
            yield found

    def _list_pages(self, listing: Listing) -> Iterator[CheckpointTuple]:
        while (call := listing.next_call(self.agent_id)) is not None:
            try:
                page = self._run(call)
            except NotFoundError:
                return  # a thread that does not exist (or no longer does) has no checkpoints
            for item in listing.take(page):
                yield self._decode(item)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store `checkpoint` (with the values of the channels in `new_versions`) as the child of the checkpoint
        `config` names; the config of the stored checkpoint."""
        thread_id = thread_id_of(config)
        body = threads.put_body(config, checkpoint, metadata, new_versions, self.serde, ttl_seconds=self.ttl_seconds)
        self._as_blobs(body)
        self._run(threads.put(thread_id, body, self.agent_id))
        return tuple_config(thread_id, body["checkpoint_ns"], checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the checkpoint `config` names (a retry of the same writes changes
        nothing; the special channels overwrite)."""
        if not writes:
            return
        body = threads.writes_body(config, writes, task_id, task_path, self.serde)
        self._as_blobs(body)
        self._run(threads.put_writes(thread_id_of(config), body, self.agent_id))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and value of the thread (nothing when it does not exist)."""
        with contextlib.suppress(NotFoundError):
            self._run(threads.delete_thread(str(thread_id), self.agent_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (with its writes) whose `metadata.run_id` is one of `run_ids`; a delete bigger than
        one request reads is asked again until it is complete."""
        for chunk in threads.chunks(run_ids):
            while not threads.finished(self._run(threads.delete_for_runs(chunk, self.agent_id))):
                pass

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and value of the source thread into the target (nothing when the source
        does not exist, as LangGraph's SQL savers do)."""
        with contextlib.suppress(NotFoundError):
            self._run(threads.copy_thread(str(source_thread_id), str(target_thread_id), self.agent_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the threads: `keep_latest` keeps the latest checkpoint of each namespace (with its writes and the
        values it needs), `delete` removes everything. Threads that do not exist are skipped. A prune bigger than one
        request reads is asked again, each time going on from where the last stopped, until it is complete."""
        for chunk in threads.chunks(thread_ids):
            while not threads.finished(self._run(threads.prune(chunk, strategy, self.agent_id))):
                pass

    # -- asynchronous -----------------------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`get_tuple`, awaited."""
        call = threads.get_tuple(thread_id_of(config), namespace_of(config), checkpoint_id_of(config), self.agent_id)
        try:
            data = await self._arun(call)
        except NotFoundError:
            return None
        return await self._adecode(data)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """`list`, awaited page by page."""
        if config is None:
            raise ValueError(NO_GLOBAL_SEARCH)
        if checkpoint_id_of(config) is not None:
            found = await self.aget_tuple(config)
            if _listed(found, filter, before, limit):
                assert found is not None
                yield found
            return
        listing = _listing(config, filter, before, limit)
        while (call := listing.next_call(self.agent_id)) is not None:
            try:
                page = await self._arun(call)
            except NotFoundError:
                return
            for item in listing.take(page):
                yield await self._adecode(item)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`put`, awaited."""
        thread_id = thread_id_of(config)
        body = threads.put_body(config, checkpoint, metadata, new_versions, self.serde, ttl_seconds=self.ttl_seconds)
        await self._aas_blobs(body)
        await self._arun(threads.put(thread_id, body, self.agent_id))
        return tuple_config(thread_id, body["checkpoint_ns"], checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`put_writes`, awaited."""
        if not writes:
            return
        body = threads.writes_body(config, writes, task_id, task_path, self.serde)
        await self._aas_blobs(body)
        await self._arun(threads.put_writes(thread_id_of(config), body, self.agent_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """`delete_thread`, awaited."""
        with contextlib.suppress(NotFoundError):
            await self._arun(threads.delete_thread(str(thread_id), self.agent_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`delete_for_runs`, awaited."""
        for chunk in threads.chunks(run_ids):
            while not threads.finished(await self._arun(threads.delete_for_runs(chunk, self.agent_id))):
                pass

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """`copy_thread`, awaited."""
        with contextlib.suppress(NotFoundError):
            await self._arun(threads.copy_thread(str(source_thread_id), str(target_thread_id), self.agent_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`prune`, awaited."""
        for chunk in threads.chunks(thread_ids):
            while not threads.finished(await self._arun(threads.prune(chunk, strategy, self.agent_id))):
                pass


def _bytes_of(raw: bytes) -> Callable[[], bytes]:
    """The body of an upload, the same on every attempt."""
    return lambda: raw


def _download_failed(error: httpx.TransportError) -> BatonConnectionError:
    # Never the URL in the message: its query is a credential.
    return BatonConnectionError(
        f"GET of a stored value's presigned URL: no answer: {type(error).__name__}.", outcome_unknown=False
    )


def _downloaded(response: httpx.Response) -> bytes:
    if response.status_code != 200:
        raise error_from_answer(response.status_code, None, response.headers, None, response.text)
    return response.content


def _listing(
    config: RunnableConfig, filter: dict[str, Any] | None, before: RunnableConfig | None, limit: int | None
) -> Listing:
    # A config without `checkpoint_ns` lists every namespace of the thread (as LangGraph's savers do); with one,
    # only that namespace (`""` is the root graph's).
    configurable = config.get("configurable") or {}
    checkpoint_ns = configurable.get("checkpoint_ns")
    return Listing(
        thread_id_of(config),
        checkpoint_ns=None if checkpoint_ns is None else str(checkpoint_ns),
        before=checkpoint_id_of(before),
        filter=filter,
        limit=limit,
    )


def _listed(
    found: CheckpointTuple | None, filter: dict[str, Any] | None, before: RunnableConfig | None, limit: int | None
) -> bool:
    """Whether the one checkpoint a list addressed by `checkpoint_id` found passes the list's other conditions."""
    if found is None or (limit is not None and limit <= 0):
        return False
    before_id = checkpoint_id_of(before)
    if before_id is not None and not found.checkpoint["id"] < before_id:
        return False
    return threads.metadata_matches(found.metadata, filter)
