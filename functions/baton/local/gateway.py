"""A local API Gateway (HTTP API, payload 2.0) in front of the api handler.

Each HTTP request becomes the event API Gateway would build, the handler's answer becomes the HTTP response,
and API Gateway's and Lambda's limits answer the way they do on AWS, with API Gateway's own bodies.
"""

from __future__ import annotations

import base64
import importlib
import json
import secrets
import signal
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import get_context
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

MAX_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway refuses request bodies over 10 MB."""
MAX_EVENT_BYTES = 6 * 1024 * 1024
"""Lambda refuses synchronous invocations whose event is over 6 MB."""
MAX_RESPONSE_BYTES = 6 * 1024 * 1024
"""Lambda refuses to return a response over 6 MB."""
TIMEOUT_SECONDS = 30.0
"""API Gateway gives up on an integration after 30 s."""

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "application/x-www-form")


@dataclass
class LambdaContext:
    """The parts of Lambda's context object that handlers and powertools read."""

    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_name: str = "baton-api-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:baton-api-local"
    log_group_name: str = "/aws/lambda/baton-api-local"
    log_stream_name: str = "local"
    deadline_ms: int = 0

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the 30 s limit."""
        return max(0, self.deadline_ms - int(time.time() * 1000))


def _is_text(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media.startswith(TEXT_TYPES) or media.endswith(("+json", "+xml"))


def _request_id() -> str:
    # API Gateway's request ids look like `JzlSlhQ4IAMEV5g=`: 15 random bytes of base64 would be longer; keep the look.
    return base64.b64encode(secrets.token_bytes(10)).decode("ascii")


def build_event(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str,
    request_id: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The API Gateway HTTP API payload 2.0 event for one request."""
    moment = time.time() if now is None else now
    split = urlsplit(target)
    raw_path = split.path or "/"
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(split.query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": split.query,
        "headers": merged,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": merged.get("host", "127.0.0.1"),
            "domainPrefix": merged.get("host", "127.0.0.1").split(".")[0],
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": request_id or _request_id(),
            "routeKey": "$default",
            "stage": "$default",
            "time": datetime.fromtimestamp(moment, tz=UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(moment * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if body:
        text: str | None = None
        if _is_text(merged.get("content-type")):
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        if text is None:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
        else:
            event["body"] = text
    return event


@dataclass(frozen=True)
class Answer:
    """An HTTP response ready to write."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def gateway_error(status: int, message: str) -> Answer:
    """API Gateway's own answer: `{"message": "..."}`."""
    body = json.dumps({"message": message}).encode("utf-8")
    return Answer(status, [("Content-Type", "application/json")], body)


def to_answer(result: dict[str, Any]) -> Answer:
    """The handler's result as an HTTP response (API Gateway's interpretation of payload 2.0 results)."""
    if len(json.dumps(result)) > MAX_RESPONSE_BYTES:
        return gateway_error(500, "Internal Server Error")
    status = int(result.get("statusCode", 200))
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((name, str(v)) for v in values)
    headers.extend(("Set-Cookie", c) for c in result.get("cookies") or [])
    return Answer(status, headers, body)


def _container_start() -> None:
    """A new "container": Ctrl-C belongs to `baton serve` itself, which stops its containers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _invoke_in_container(target: str, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run the handler named `module:function` on one event, inside a container process."""
    module_name, _, function_name = target.partition(":")
    handler: Handler = getattr(importlib.import_module(module_name), function_name)
    return handler(event, context)


def _load_in_container(target: str) -> None:
    """Import the handler's module, as Lambda's init phase does before the first event."""
    importlib.import_module(target.partition(":")[0])


class Gateway:
    """Turns requests into events, runs the handler with Lambda's limits, and turns results into responses.

    Like Lambda, each container (a process) handles one event at a time and keeps its own state (the resolver's
    current request, the key cache) between events; concurrent requests go to different containers.
    """

    def __init__(self, target: str, containers: int = 4, timeout: float = TIMEOUT_SECONDS) -> None:
        self._target = target
        self._timeout = timeout
        self._pool = ProcessPoolExecutor(
            max_workers=containers, mp_context=get_context("spawn"), initializer=_container_start
        )

    def warm(self, containers: int) -> None:
        """Start the containers and run their init phase now, so the first requests do not pay for it."""
        for future in [self._pool.submit(_load_in_container, self._target) for _ in range(containers)]:
            future.result(timeout=60)

    def invoke(self, event: dict[str, Any]) -> Answer:
        """Run the handler on `event` as Lambda would behind API Gateway."""
        if len(json.dumps(event).encode("utf-8")) > MAX_EVENT_BYTES:
            return gateway_error(413, "Request Entity Too Large")
        context = LambdaContext(deadline_ms=int(time.time() * 1000 + self._timeout * 1000))
        future = self._pool.submit(_invoke_in_container, self._target, event, context)
        try:
            result = future.result(timeout=self._timeout)
        except FutureTimeout:
            return gateway_error(503, "Service Unavailable")
        except Exception:
            return gateway_error(500, "Internal Server Error")
        if not isinstance(result, dict):
            return gateway_error(500, "Internal Server Error")
        return to_answer(result)

    def close(self) -> None:
        """Stop the containers (an invocation still running is abandoned)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_server(gateway: Gateway, host: str, port: int, log: TextIO = sys.stderr) -> ThreadingHTTPServer:
    """An HTTP server on (host, port) that answers every request through `gateway`."""

    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "baton-local"

        def _handle(self) -> None:
            started = time.perf_counter()
            body = self._read_body()
            if body is None:
                answer = gateway_error(413, "Request Entity Too Large")
                self.close_connection = True
                request_id = "-"
            else:
                request_id = _request_id()
                headers = [(k, v) for k, v in self.headers.items() if k.lower() != "transfer-encoding"]
                event = build_event(self.command, self.path, headers, body, self.client_address[0], request_id)
                answer = gateway.invoke(event)
            self.send_response(answer.status)
            for name, value in answer.headers:
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.send_header("apigw-requestid", request_id)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)
            elapsed = (time.perf_counter() - started) * 1000
            print(
                f"{self.client_address[0]} {self.command} {urlsplit(self.path).path} {answer.status} "
                f"{elapsed:.1f}ms request_id={request_id}",
                file=log,
                flush=True,
            )

        def _read_body(self) -> bytes | None:
            """The request body (plain or chunked), or None when it is over API Gateway's 10 MB."""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts: list[bytes] = []
                size = 0
                while True:
                    chunk_size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if chunk_size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(parts)
                    size += chunk_size
                    if size > MAX_BODY_BYTES:
                        return None
                    parts.append(self.rfile.read(chunk_size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return None
            return self.rfile.read(length) if length else b""

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            """The one line per request is written by `_handle`; silence the default access log."""

    server = ThreadingHTTPServer((host, port), RequestHandler)
    server.daemon_threads = True
    return server
