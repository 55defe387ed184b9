"""What the synchronous and the asynchronous client share: request building, answer parsing and the retry loop.

The loop is written once, without I/O, as a generator (`exchange`): it yields `Send(request)` and `Sleep(seconds)`
and is sent back the outcome of each (an `httpx.Response`, or the `httpx.TransportError` that replaced it). `Baton`
drives it with `httpx.Client` and `time.sleep`, `AsyncBaton` with `httpx.AsyncClient` and `asyncio.sleep`; neither
holds a decision of its own.

Retry rules (api-v1.md, "Idempotency" and "Error codes"):

- A connection that failed before the request left (connect error or timeout, no pooled connection) is retried for
  every request. A connection that broke after it left (read or write error, read timeout, protocol error) leaves
  the outcome unknown: it is retried only when repeating the request cannot apply it twice: `GET`, `DELETE`
  (deleting twice removes the same thing), the read-only `POST /v1/resume`, every `POST` carrying an
  `Idempotency-Key` (the SDK gives one to each state-changing POST the contract honours it for), and the `POST`s of
  the threads routes, idempotent by their own keys without one (`baton_checkpoints.langgraph` marks them `repeatable`).
- A local error (`httpx.LocalProtocolError`: a header value HTTP cannot carry; `httpx.UnsupportedProtocol`: a URL
  scheme httpx cannot speak) is raised at once: nothing was sent, and every attempt would fail alike. No error
  message quotes a transport error's text (h11 quotes the offending header, which may be the API key).
- `429` (Baton's `RATE_LIMITED` or API Gateway's throttling: nothing was done) is retried for every request.
- `503`, and API Gateway's own 500/502/504 (`{"message"}` bodies: the function failed or timed out, so it may have
  written) are retried when repeating is safe as above. `POST /v1/keys` is never repeated after those: it takes no
  `Idempotency-Key` and a second try could mint a second key.
- `409 IDEMPOTENCY_IN_PROGRESS` is retried (the same key, after a pause): it means the first try is still running,
  which is exactly the lost-answer case the key exists for. Every other 4xx, and Baton's own `500 INTERNAL` (a
  defect: repeating it does not help), are raised at once.
- Waits: exponential backoff with full jitter, or the `Retry-After` the answer asks for (plus a little jitter);
  an answer asking for more than `RetryPolicy.max_retry_after` is raised at once rather than waited for.
- A `404` on a route addressed by a checkpoint id that this client created within `recent_create_window` seconds is
  retried once after `not_found_pause` (the id index is eventually consistent for about a second).
"""

from __future__ import annotations

import copy
import json
import random
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import httpx

from baton_checkpoints import __version__
from baton_checkpoints.client.errors import (
    BatonConnectionError,
    BatonError,
    IdempotencyInProgressError,
    InternalError,
    MissingApiKeyError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
    UnexpectedResponseError,
    error_from_answer,
)
from baton_checkpoints.client.models import ResponseMeta

T = TypeVar("T")

ENV_URL = "BATON_URL"
ENV_API_KEY = "BATON_API_KEY"
USER_AGENT = f"baton-python/{__version__} httpx/{httpx.__version__}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How hard the client tries. The defaults fit an agent's calls under API Gateway's 30 s limit."""

    max_attempts: int = 4
    """Requests per call at most, the first included (1 disables retries)."""
    backoff_base: float = 0.25
    """The first backoff's upper bound in seconds; it doubles with each attempt (full jitter: uniform 0..bound)."""
    backoff_max: float = 8.0
    """The bound's ceiling."""
    max_retry_after: float = 30.0
    """An answer whose `Retry-After` asks for longer is raised at once (e.g. `3600` for blobs without a bucket)."""
    not_found_pause: float = 0.5
    """The pause before retrying a `404` on a checkpoint this client has just created."""
    recent_create_window: float = 10.0
    """How long after a create a `404` on its id counts as the id index lagging."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """The wait after the `attempt`-th failed attempt: full jitter under a doubling bound."""
        bound = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        return rng.uniform(0, bound)


@dataclass(frozen=True, slots=True)
class Send:
    """An instruction of `exchange`: send this request and send back its response (or its transport error)."""

    request: httpx.Request


@dataclass(frozen=True, slots=True)
class Sleep:
    """An instruction of `exchange`: wait this many seconds, then send back None."""

    seconds: float


Action = Send | Sleep
Outcome = httpx.Response | httpx.TransportError | None


@dataclass(frozen=True, slots=True)
class Answer:
    """A response as the parsers see it."""

    status: int
    headers: Mapping[str, str]
    body: Any
    meta: ResponseMeta


@dataclass(slots=True, kw_only=True)
class Call(Generic[T]):
    """One API call: the request to make (on every attempt alike) and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Answer], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    has_body: bool = False
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    repeatable: bool = False
    """True when sending it twice cannot apply it twice (see the module's docstring)."""
    checkpoint_id: str | None = None
    """The checkpoint an id route addresses (for the retry of a `404` right after a create)."""
    cache_key: tuple[str, ...] | None = None
    """Where an ETag-aware read keeps the record it last saw."""
    cached: Any = None
    """That record when the request carries its `If-None-Match`: what a `304` answers."""
    gone_is_done: Callable[[Answer], T] | None = None
    """For deletes: the result when a retry after a lost answer finds the target gone (`404`)."""
    created_id: Callable[[T], str | None] | None = None
    """For creates: the id of the checkpoint the result created, if it did."""
    invalidates: str | None = None
    """A checkpoint id whose cached records a success makes stale."""
    stream: Callable[[], Any] | None = None
    """For uploads: makes a fresh body stream (an iterator of bytes) for each attempt."""
    needs_key: bool = True
    """False for a call that carries no Baton key: a public route, a presigned transfer, a raw request."""
    translate_error: Callable[[BatonError, str], BatonError] | None = None
    """For presigned transfers: the error to raise instead of the one read from an answer and its body's text
    (S3's XML codes, which `error_from_answer` cannot know)."""

    @property
    def idempotency_key(self) -> str | None:
        """The `Idempotency-Key` this call sends, if any."""
        return self.headers.get("Idempotency-Key")


class RecordCache:
    """The last record seen per lookup and per checkpoint id, with its ETag: what `If-None-Match` sends.

    Bounded (least recently used out), thread-safe. A record whose resources carry download URLs is kept only until
    a minute before the first of them expires, so a `304` never hands back a dead URL. The server answers `304` only
    while no lease has been live since the revision was written (a lease changes the record, not its ETag), and this
    client's own lease calls drop the cached record too.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, ...], tuple[str, Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> tuple[str, Any] | None:
        """(etag, record) for `key` while usable."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            etag, record, usable_until = entry
            if time.time() >= usable_until:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return etag, record

    def put(self, key: tuple[str, ...], etag: str, record: Any, usable_until: float) -> None:
        """Remember a copy of `record` under `key` (the caller keeps, and may change, the record it was handed)."""
        kept = copy.deepcopy(record)
        with self._lock:
            self._entries[key] = (etag, kept, usable_until)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, checkpoint_id: str) -> None:
        """Drop every entry holding a record of `checkpoint_id` (it was deleted)."""
        with self._lock:
            for key in [key for key, entry in self._entries.items() if _record_id(entry[1]) == checkpoint_id]:
                del self._entries[key]


def _record_id(record: Any) -> str | None:
    value = getattr(record, "checkpoint_id", None)
    return value if isinstance(value, str) else None


class RecentCreates:
    """Checkpoint ids this client created lately, with when (monotonic)."""

    def __init__(self, window: float) -> None:
        self._window = window
        self._created: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, checkpoint_id: str) -> None:
        """Remember that `checkpoint_id` was created now."""
        now = time.monotonic()
        with self._lock:
            self._created = {key: at for key, at in self._created.items() if now - at < self._window}
            self._created[checkpoint_id] = now

    def __contains__(self, checkpoint_id: object) -> bool:
        with self._lock:
            at = self._created.get(str(checkpoint_id))
        return at is not None and time.monotonic() - at < self._window


def resolve_settings(url: str | None, api_key: str | None, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The base URL and key: the arguments, else `BATON_URL` / `BATON_API_KEY`."""
    base = url or environ.get(ENV_URL)
    if not base:
        raise ValueError(f"No Baton URL: pass url= or set {ENV_URL}.")
    key = api_key if api_key is not None else environ.get(ENV_API_KEY) or None
    return base.rstrip("/"), key


def default_headers(api_key: str | None) -> dict[str, str]:
    """Headers of every API request."""
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def encode_json(body: Any) -> bytes:
    """Compact UTF-8 JSON; NaN and Infinity are refused here, as the server would refuse them."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def new_idempotency_key() -> str:
    """A fresh key: a random UUID."""
    return str(uuid.uuid4())


MAX_PACE_SECONDS = 60.0
"""The longest a client waits for its tenant's rate on its own (a longer `t` is not Baton's)."""
_RATE_LIMIT = re.compile(r'"[^"]*";\s*r=(?P<r>\d+);\s*t=(?P<t>\d+)')
"""The `RateLimit` field's item: requests left (`r`) and seconds (`t`)."""


class ClientCore:
    """The state a client keeps between calls (caches, recent creates, the policy) and its request logic."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()
        self.records = RecordCache()
        self.recent = RecentCreates(policy.recent_create_window)
        self.paced_until = 0.0
        """`time.monotonic()` before which the next request waits: the tenant's `RateLimit` said none was left."""
        self._pacing = threading.Lock()

    def pace(self, headers: Mapping[str, str]) -> None:
        """Honour an answer's `RateLimit` field: when it says no request is left (`r=0`), the next request waits
        its `t` seconds (at most `max_retry_after`, and never more than `MAX_PACE_SECONDS`) instead of being
        refused with 429."""
        found = _RATE_LIMIT.search(headers.get("ratelimit", ""))
        if found is not None and int(found["r"]) == 0:
            wait = min(float(found["t"]), self.policy.max_retry_after, MAX_PACE_SECONDS)
            with self._pacing:
                self.paced_until = max(self.paced_until, time.monotonic() + wait)

    def pause(self) -> tuple[float, float]:
        """Seconds the next request should wait to keep within the tenant's rate (0: none), and the time it waits
        for (what `paced` is given back once waited)."""
        with self._pacing:
            until = self.paced_until
        return max(0.0, until - time.monotonic()), until

    def paced(self, until: float) -> None:
        """A wait for `until` is over: unless a later answer asked for longer meanwhile, the next request goes."""
        with self._pacing:
            if self.paced_until == until:
                self.paced_until = 0.0

    def prepare(self, call: Call[T]) -> None:
        """Add what the caches say to `call` before its first attempt: the `If-None-Match` of a record seen before."""
        if call.cache_key is None:
            return
        seen = self.records.get(call.cache_key)
        if seen is not None:
            call.headers["If-None-Match"] = seen[0]
            call.cached = seen[1]

    def build_request(self, client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        """The request of `call`; built once and sent as is on every attempt (its body is bytes)."""
        headers = dict(call.headers)
        content: Any = call.content
        if call.stream is not None:
            content = call.stream()
        elif call.has_body:
            content = encode_json(call.body)
            headers.setdefault("Content-Type", "application/json")
        return client.build_request(call.method, call.path, params=call.params, content=content, headers=headers)

    def retry_wait(self, call: Call[Any], error: BatonError, attempt: int) -> float | None:
        """Seconds to wait before repeating `call` after `error`, or None to raise it."""
        if attempt >= self.policy.max_attempts:
            return None
        if isinstance(error, RateLimitedError):
            pass
        elif isinstance(error, IdempotencyInProgressError):
            if call.idempotency_key is None:
                return None
        elif isinstance(error, UnavailableError) or (isinstance(error, InternalError) and error.gateway):
            if not call.repeatable:
                return None
        else:
            return None
        asked = error.retry_after
        if asked is None:
            return self.policy.backoff(attempt, self.rng)
        if asked > self.policy.max_retry_after:
            return None
        return asked + self.rng.uniform(0, self.policy.backoff_base)

    def exchange(self, client: httpx.Client | httpx.AsyncClient, call: Call[T]) -> Generator[Action, Outcome, T]:
        """The whole life of one call: attempts, waits and the result (or the typed exception)."""
        if call.needs_key and "authorization" not in client.headers:
            raise MissingApiKeyError(
                f"No API key for {call.method} {call.path.split('?', 1)[0]}: pass api_key= or set {ENV_API_KEY} "
                "(`make serve` prints one; `baton keys create` makes more)."
            )
        self.prepare(call)
        request = self.build_request(client, call)
        attempt = 0
        sent = 0
        lost_answer = False
        not_found_retried = False
        while True:
            attempt += 1
            if sent and call.stream is not None:
                request = self.build_request(client, call)  # a stream is spent by the attempt that sent it
            sent += 1
            paused, until = self.pause() if call.needs_key else (0.0, 0.0)
            if paused > 0:
                yield Sleep(paused)
                self.paced(until)  # waited out (whatever clock the sleep keeps)
            outcome = yield Send(request)
            if isinstance(outcome, httpx.TransportError):
                # A local error (a header value httpx refuses, a URL scheme it cannot speak) fails the same way on
                # every attempt, and nothing was sent.
                local = isinstance(outcome, httpx.LocalProtocolError | httpx.UnsupportedProtocol)
                # Connect errors and pool timeouts happen before a byte of the request left.
                unknown = not local and not isinstance(
                    outcome, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
                )
                if not local and attempt < self.policy.max_attempts and (call.repeatable or not unknown):
                    lost_answer = lost_answer or unknown
                    yield Sleep(self.policy.backoff(attempt, self.rng))
                    continue
                # The message names the exception's type and a fixed sentence, never `str(outcome)`: h11's text
                # quotes the offending header, which may be the `Authorization` one (the API key). The path is
                # without its query: a presigned URL's query is a credential.
                failure = BatonConnectionError(
                    f"{call.method} {call.path.split('?', 1)[0]}: no answer after {sent} attempt(s): "
                    f"{type(outcome).__name__}: {_transport_reason(outcome)}",
                    outcome_unknown=lost_answer or unknown,
                )
                if local:
                    raise failure from None  # its text holds the header's value
                raise failure from outcome
            if not isinstance(outcome, httpx.Response):
                raise TypeError(f"exchange expects a response or a transport error, got {outcome!r}")
            answer = read_answer(outcome, call, sent)
            if call.needs_key:  # Baton's answer (a presigned transfer's is S3's, and counts for no tenant)
                self.pace(answer.headers)
            if answer.status == 304 and call.cached is not None:
                # A copy: the caller may change what it is handed, and the cache must keep what the server sent.
                return copy.deepcopy(replace(call.cached, meta=answer.meta))  # type: ignore[no-any-return]
            if 200 <= answer.status < 300:
                return self._succeeded(call, answer)
            error = error_from_answer(answer.status, answer.body, answer.headers, answer.meta.request_id, outcome.text)
            if call.translate_error is not None:
                error = call.translate_error(error, outcome.text)
            if isinstance(error, NotFoundError) and not not_found_retried and call.checkpoint_id in self.recent:
                # The id index lags a create by about a second: one more look, not counted as an attempt.
                not_found_retried = True
                attempt -= 1
                yield Sleep(self.policy.not_found_pause)
                continue
            if isinstance(error, NotFoundError) and lost_answer and call.gone_is_done is not None:
                return call.gone_is_done(answer)
            wait = self.retry_wait(call, error, attempt)
            if wait is None:
                raise error
            lost_answer = lost_answer or (error.status >= 500 and error.gateway)
            yield Sleep(wait)

    def _succeeded(self, call: Call[T], answer: Answer) -> T:
        result = call.parse(answer)
        if call.created_id is not None:
            created = call.created_id(result)
            if created:
                self.recent.add(created)
        if call.invalidates:
            self.records.forget(call.invalidates)
        if call.cache_key is not None and answer.meta.etag:
            self.records.put(call.cache_key, answer.meta.etag, result, usable_until(result))
        return result


def _transport_reason(error: httpx.TransportError) -> str:
    """A sentence for a transport error that quotes nothing of the request (its text may quote a header)."""
    if isinstance(error, httpx.LocalProtocolError):
        return "the request could not be sent: a header value (the API key?) is not valid in HTTP"
    if isinstance(error, httpx.UnsupportedProtocol):
        return "the URL's scheme is not http or https"
    if isinstance(error, httpx.TimeoutException):
        return "timed out"
    if isinstance(error, httpx.ConnectError):
        return "could not connect"
    if isinstance(error, httpx.ProxyError):
        return "the proxy failed"
    return "the connection broke before the answer arrived"


def usable_until(record: Any) -> float:
    """Until when a cached `record` may be handed back on a `304`: a minute before its first download URL expires
    (forever when it has none)."""
    from datetime import datetime

    limit = float("inf")
    for resource in getattr(record, "resources", ()) or ():
        expires = getattr(resource, "download_expires_at", None)
        if isinstance(expires, str):
            try:
                limit = min(limit, datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp() - 60)
            except ValueError:
                return 0.0
    return limit


def read_answer(response: httpx.Response, call: Call[Any], attempts: int) -> Answer:
    """The response's status, headers, parsed JSON body (None when empty or not JSON) and `ResponseMeta`."""
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = None
    request_id: str | None = None
    if isinstance(body, Mapping) and isinstance(body.get("meta"), Mapping):
        value = body["meta"].get("request_id")
        request_id = value if isinstance(value, str) else None
    request_id = request_id or response.headers.get("apigw-requestid")
    meta = ResponseMeta(
        status=response.status_code,
        request_id=request_id,
        etag=response.headers.get("etag"),
        replayed=response.headers.get("idempotent-replayed", "").lower() == "true",
        idempotency_key=call.idempotency_key,
        attempts=attempts,
    )
    return Answer(status=response.status_code, headers=response.headers, body=body, meta=meta)


def data_of(answer: Answer) -> Any:
    """The `data` of a success envelope; an `UnexpectedResponseError` when there is none."""
    if isinstance(answer.body, Mapping) and "data" in answer.body:
        return answer.body["data"]
    raise UnexpectedResponseError(
        f"HTTP {answer.status} without the success envelope's data.",
        status=answer.status,
        request_id=answer.meta.request_id,
        headers=answer.headers,
    )


def next_cursor_of(answer: Answer) -> str | None:
    """`meta.next_cursor` of a list answer."""
    meta = answer.body.get("meta") if isinstance(answer.body, Mapping) else None
    cursor = meta.get("next_cursor") if isinstance(meta, Mapping) else None
    return cursor if isinstance(cursor, str) else None


def drive(core: ClientCore, client: httpx.Client, call: Call[T], sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call`'s exchange on a synchronous client: send each request, sleep each wait, return its result (the
    one loop the synchronous client and the LangGraph saver share)."""
    steps = core.exchange(client, call)
    outcome: Outcome = None
    while True:
        try:
            action = steps.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(action, Sleep):
            sleep(action.seconds)
            outcome = None
            continue
        try:
            outcome = client.send(action.request)
        except httpx.TransportError as error:
            outcome = error


async def adrive(
    core: ClientCore,
    client: httpx.AsyncClient,
    call: Call[T],
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> T:
    """`drive` on an asynchronous client, awaiting each request and wait (`asyncio.sleep` by default)."""
    import asyncio

    pause = sleep or asyncio.sleep
    steps = core.exchange(client, call)
    outcome: Outcome = None
    while True:
        try:
            action = steps.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(action, Sleep):
            await pause(action.seconds)
            outcome = None
            continue
        try:
            outcome = await client.send(action.request)
        except httpx.TransportError as error:
            outcome = error
