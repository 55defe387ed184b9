"""An embedded moto server on a loopback port, every call serialized behind one lock.

moto is not atomic under threads: `update_item` checks a condition and then writes without a lock, and a
cancelled `transact_write_items` restores a snapshot of the whole table, erasing other threads' writes. Real
DynamoDB is atomic per item; serializing every request into moto makes moto behave like it, whatever number of
clients (threads or processes) talk to the server.

Serialized, one slow call stalls every client: so the lock is taken in arrival order (no client can take it again
ahead of others waiting, as `baton serve`'s reaper thread could, call after call), it can be closed (when the
server stops, calls waiting for it are answered 503 at once instead of running one by one), and moto's slowest
answer, a DynamoDB Streams GetRecords, is written by a JSON encoder rather than moto's shape-walking serializer
(`fast_stream_records`).
"""

from __future__ import annotations

import base64
import calendar
import collections
import datetime
import hashlib
import io
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

StartResponse = Callable[..., Any]

STOPPING_ANSWER = b'{"__type":"ServiceUnavailable","message":"the local moto server is stopping"}'
"""What a call still waiting for the lock gets once the server stops (botocore reads a 503 as retryable)."""


class FairLock:
    """A lock granted in the order it was asked for, handed from holder to next waiter directly.

    `threading.Lock` promises no order: a thread that releases it and asks again at once (a client making call after
    call) may take it ahead of threads that have waited longer. Here every caller waits at most for the calls that
    arrived before it. `close` refuses it from then on: callers waiting wake at once and are told no.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._changed = threading.Condition(self._guard)
        self._held = False
        self._closed = False
        self._waiting: collections.deque[threading.Event] = collections.deque()

    def acquire(self) -> bool:
        """Wait for the lock in turn; False (not held) when it is closed before or meanwhile."""
        with self._guard:
            if self._closed:
                return False
            if not self._held and not self._waiting:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
            self._changed.notify_all()
        turn.wait()
        with self._guard:
            return not self._closed  # else handed over by `release`: `_held` stayed True

    def release(self) -> None:
        """Hand the lock to the caller that has waited longest, or free it."""
        with self._guard:
            if self._waiting and not self._closed:
                self._waiting.popleft().set()
            else:
                self._held = False

    def close(self) -> None:
        """Refuse the lock from now on; callers waiting for it are woken and told no (the holder finishes)."""
        with self._guard:
            self._closed = True
            while self._waiting:
                self._waiting.popleft().set()

    def wait_for_waiting(self, count: int, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until at least `count` callers wait for the lock; True when they do."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._waiting) >= count, timeout)


class SerializedApp:
    """A WSGI app that runs the wrapped app one request at a time, the body included, in arrival order; once
    closed, a request still waiting is answered 503 without reaching the app."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self._app = app
        self.lock = FairLock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if not self.lock.acquire():
            start_response(
                "503 Service Unavailable",
                [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(STOPPING_ANSWER)))],
            )
            return [STOPPING_ANSWER]
        try:
            # Materialize the response inside the lock: moto may build it lazily.
            return list(self._app(environ, start_response))
        finally:
            self.lock.release()

    def close(self) -> None:
        """Answer every request still waiting, and every later one, 503 (the request in moto finishes)."""
        self.lock.close()


class ChecksumVerified:
    """A WSGI app that refuses an S3 upload whose body does not match its `x-amz-checksum-sha256`, as S3 does
    (400 `BadDigest`); moto stores whatever it is sent under whatever checksum the client claims. The presigned
    uploads of `POST /v1/blobs` sign that header, so locally too an upload of other bytes is refused."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        claimed = environ.get("HTTP_X_AMZ_CHECKSUM_SHA256")
        if environ.get("REQUEST_METHOD") != "PUT" or not claimed:
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        if base64.b64encode(hashlib.sha256(body).digest()).decode("ascii") != claimed:
            answer = (
                b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadDigest</Code><Message>The SHA256 you '
                b"specified did not match the calculated checksum.</Message></Error>"
            )
            start_response(
                "400 Bad Request", [("Content-Type", "application/xml"), ("Content-Length", str(len(answer)))]
            )
            return [answer]
        return self._app(environ, start_response)


def _stream_json(value: Any) -> Any:
    """What moto's serializer writes for the values of a stream record that JSON has no type for: a time as epoch
    seconds truncated to milliseconds (the Smithy rule moto follows), binary as base64."""
    if isinstance(value, datetime.datetime):
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "to_json"):
        return value.to_json()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def stream_records_body(result: dict[str, Any]) -> str:
    """GetRecords' answer (moto's `get_records` result: records already in DynamoDB's JSON form) as its JSON body."""
    import orjson

    return orjson.dumps(result, default=_stream_json, option=orjson.OPT_PASSTHROUGH_DATETIME).decode("utf-8")


def fast_stream_records() -> None:
    """Make moto answer DynamoDB Streams GetRecords with `stream_records_body` (idempotent; process-wide).

    moto writes every answer by walking botocore's model of it, value by value, and probing each AttributeValue for
    its ten possible members: about 1.5 million steps for 26 records of a thread checkpoint growing to 1,000 pending
    writes (3.9 MB of images), 24 to 40 s during which the serialized server answers no one. The records moto keeps
    are already DynamoDB's JSON form (`StreamRecord.to_json`), so a JSON encoder writes the same body (a unit test
    holds the two equal as botocore reads them) in a fraction of a second.
    """
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    if getattr(DynamoDBStreamsHandler.get_records, "baton_fast", False):
        return

    def get_records(self: Any) -> str:
        iterator = self._get_param("ShardIterator")
        limit = self._get_param("Limit")
        return stream_records_body(self.backend.get_records(iterator, 1000 if limit is None else limit))

    get_records.baton_fast = True  # type: ignore[attr-defined]
    setattr(DynamoDBStreamsHandler, "get_records", get_records)  # noqa: B010 (mypy refuses assigning a method)


class LocalMotoServer:
    """moto's server app on `127.0.0.1:<port>` (0 picks a free port), serialized."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: Any = None
        self._app: SerializedApp | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> str:
        """Start serving in a daemon thread; returns the endpoint URL."""
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        # moto's request handler logs every call through werkzeug; `baton serve` writes its own line per request.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        fast_stream_records()
        self._app = SerializedApp(ChecksumVerified(DomainDispatcherApplication(create_backend_app)))
        self._server = make_server(self._host, self._port, self._app, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._serve, name="moto", daemon=True)
        self._thread.start()
        return self.endpoint

    def _serve(self) -> None:
        """Accept connections until `stop`, each waited for without a timeout: socketserver's `serve_forever` looks
        at its stop flag only between polls (half a second), which every stop would wait out; `stop` wakes this wait
        with a connection of its own instead."""
        while not self._stopping.is_set():
            self._server.handle_request()

    def _wake(self) -> None:
        """Connect to the server once, so that the wait for the next connection ends (its handler reads nothing)."""
        host, port = self._server.server_address[:2]
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        # Refused: the port is closed already (the serving thread is ending, or `stop`'s join is bounded anyway).
        with suppress(OSError):
            socket.create_connection((host, port), timeout=2).close()

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:<port>`."""
        if self._server is None:
            raise RuntimeError("the moto server is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @contextmanager
    def paused(self) -> Iterator[FairLock]:
        """Hold the lock while the block runs: every call into moto waits, as behind a call that never ends (for
        tests of what waits on moto); yields the lock, whose `wait_for_waiting` tells when calls queue behind it."""
        if self._app is None:
            raise RuntimeError("the moto server is not started")
        if not self._app.lock.acquire():
            raise RuntimeError("the moto server is stopping")
        try:
            yield self._app.lock
        finally:
            self._app.lock.release()

    def stop(self) -> None:
        """Stop serving: calls waiting for moto are answered 503 at once, the one in moto finishes in its thread;
        the serving thread is woken and waited for (bounded), then the port is closed."""
        if self._app is not None:
            self._app.close()
        if self._server is not None and self._thread is not None and not self._stopping.is_set():
            self._stopping.set()
            self._wake()
            self._thread.join(timeout=5)
        if self._server is not None:
            self._server.server_close()
