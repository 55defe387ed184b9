"""An embedded moto server on a loopback port, every call serialized behind one lock.

moto is not atomic under threads: `update_item` checks a condition and then writes without a lock, and a
cancelled `transact_write_items` restores a snapshot of the whole table, erasing other threads' writes. Real
DynamoDB is atomic per item; serializing every request into moto makes moto behave like it, whatever number of
clients (threads or processes) talk to the server.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]


class SerializedApp:
    """A WSGI app that runs the wrapped app one request at a time, the body included."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        with self._lock:
            # Materialize the response inside the lock: moto may build it lazily.
            return list(self._app(environ, start_response))


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


class LocalMotoServer:
    """moto's server app on `127.0.0.1:<port>` (0 picks a free port), serialized."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

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
        app = SerializedApp(ChecksumVerified(DomainDispatcherApplication(create_backend_app)))
        self._server = make_server(self._host, self._port, app, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()
        return self.endpoint

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:<port>`."""
        if self._server is None:
            raise RuntimeError("the moto server is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
