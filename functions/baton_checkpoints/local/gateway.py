"""A local API Gateway (HTTP API, payload 2.0) in front of the api handler.

Each HTTP request becomes the event API Gateway would build, the handler's answer becomes the HTTP response,
and API Gateway's and Lambda's limits answer the way they do on AWS, with API Gateway's own bodies.

Like API Gateway's `$default` route, every method reaches the handler (whose resolver answers 405 for a method a
path does not have). A request whose framing cannot be read (a malformed `Content-Length`, `Transfer-Encoding` or
chunk) answers 400 in the contract's error envelope and ends the connection, since where the next request would
start is unknown.
"""

from __future__ import annotations

import atexit
import base64
import importlib
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import get_context
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

# Sizes are bytes as AWS counts them, never characters (sources below, checked 2026-12-02):
# - API Gateway HTTP API, "Payload size 10 MB":
#   https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html
# - Lambda, "Invocation payload (request and response): 6 MB each for request and response (synchronous)":
#   https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html. The exact figures are in Lambda's own
#   errors: an event over 6,291,456 bytes ("Request must be smaller than 6291456 bytes for the InvokeFunction
#   operation") and a result over 6,291,556 ("Response payload size exceeded maximum allowed payload size (6291556
#   bytes)"), measured in https://zaccharles.medium.com/deep-dive-lambdas-response-payload-size-limit-8aedba9530ed
#   and https://zaccharles.medium.com/deep-dive-lambdas-request-payload-size-limit-2-2-6350c1ae5577.
# - The event is the JSON API Gateway builds, UTF-8: a body's "€" costs its 3 bytes there (escaped as `\u20ac` it
#   would cost 6, and an emoji 12), and only what JSON must escape grows (`"` and `\` to two bytes).
# - The result is serialized by the python3.13 runtime with `ensure_ascii=False` (Unicode characters unescaped since
#   python3.12: https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html, "Response format"), by simplejson
#   with its default separators, which also escapes U+2028 and U+2029:
#   https://github.com/aws/aws-lambda-python-runtime-interface-client/blob/main/awslambdaric/lambda_runtime_marshaller.py
MAX_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway refuses request bodies over 10 MB."""
MAX_EVENT_BYTES = 6 * 1024 * 1024
"""Lambda refuses synchronous invocations whose event is over 6 MiB (6,291,456 bytes of UTF-8 JSON)."""
MAX_RESPONSE_BYTES = 6 * 1024 * 1024 + 100
"""Lambda refuses to return a result over 6,291,556 bytes (6 MiB + 100, as its error says), serialized."""
TIMEOUT_SECONDS = 30.0
"""API Gateway gives up on an integration after 30 s."""
IDLE_SECONDS = 120.0
"""A connection that sends nothing for this long is closed (a stalled body no longer holds a thread forever)."""
MAX_LINE_BYTES = 65_536
"""Longest request line, chunk-size line or trailer line read (the same bound http.server puts on header lines)."""

_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
"""RFC 9110 `method = token`."""
_DECIMAL = re.compile(r"[0-9]+\Z")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?\r?\n\Z")
"""RFC 9112 `chunk-size [ chunk-ext ] CRLF` (a bare LF is tolerated, as for header lines)."""

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


class FramingError(Exception):
    """The request cannot be read as HTTP/1.1: `header` names what is malformed (None for the request line),
    `message` says the rule it breaks."""

    def __init__(self, header: str | None, message: str) -> None:
        super().__init__(message)
        self.header = header
        self.message = message


def framing_error(error: FramingError, request_id: str) -> Answer:
    """A malformed request's 400, in the contract's error envelope, naming the header and the rule."""
    problem: dict[str, Any] = {"code": "VALIDATION_ERROR", "message": error.message}
    if error.header is not None:
        problem["details"] = {"errors": [{"pointer": f"/{error.header}", "message": error.message, "in": "header"}]}
    envelope = {"error": problem, "meta": {"request_id": request_id}}
    body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return Answer(400, [("Content-Type", "application/json")], body)


def content_length(values: list[str]) -> int | None:
    """The body length that `Content-Length` fields announce (None when there is none), or `FramingError`.

    RFC 9112 section 6.3: the value is one or more digits; repeated fields or a list are accepted only when every
    value is the same.
    """
    if not values:
        return None
    found = {part.strip() for value in values for part in value.split(",")}
    if len(found) != 1 or not _DECIMAL.match(next(iter(found))):
        raise FramingError(
            "Content-Length", "The Content-Length header must be one non-negative decimal integer (digits only)."
        )
    return int(found.pop())


def chunk_size(line: bytes) -> int | None:
    """The size a chunk-size line announces; None when the line is not `hex-digits [; extensions] CRLF`."""
    found = _CHUNK_SIZE.match(line)
    return None if found is None else int(found.group(1), 16)


def event_bytes(event: dict[str, Any]) -> int:
    """The size Lambda counts for `event`: the bytes of the UTF-8 JSON that API Gateway sends (characters as they
    are; quotes, backslashes and control characters escaped)."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def result_bytes(result: dict[str, Any]) -> int:
    """The size Lambda counts for a handler's `result`: the bytes of the JSON the python3.13 runtime writes of it
    (characters as they are, `", "` and `": "` between members, U+2028 and U+2029 escaped to six bytes)."""
    text = json.dumps(result, ensure_ascii=False)
    extra = 3 * (text.count("\u2028") + text.count("\u2029"))
    return len(text.encode("utf-8", "surrogatepass")) + extra


def to_answer(result: dict[str, Any]) -> Answer:
    """The handler's result as an HTTP response (API Gateway's interpretation of payload 2.0 results); a result
    Lambda cannot return is API Gateway's 500."""
    if result_bytes(result) > MAX_RESPONSE_BYTES:
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
    """A new "container": Ctrl-C belongs to `baton serve` itself, which stops its containers; when the pool ends
    it, it ends at once (`_container_end`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit.register(_container_end)


def _container_end() -> None:
    """The container's last step: the pool's worker has returned and multiprocessing has finished it (its
    finalizers run, its threads joined, its output flushed), so the process ends here, without the interpreter's
    teardown of every module the handler loaded (about 0.1 s of CPU per container, which a loaded machine stretches
    to seconds, and `Gateway.close` waits for each container to end). A Lambda container is not torn down either:
    it is frozen, then discarded."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


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
        if event_bytes(event) > MAX_EVENT_BYTES:
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
        """Stop the containers: invocations not started are cancelled, one running finishes (within its timeout).
        Waiting also lets the pool's own thread end before the interpreter does: left running, it raced the exit
        handler of concurrent.futures, which then wrote to a pipe already closed (a traceback after "stopped")."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def make_server(gateway: Gateway, host: str, port: int, log: TextIO = sys.stderr) -> ThreadingHTTPServer:
    """An HTTP server on (host, port) that answers every request through `gateway`."""

    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "baton-local"
        timeout = IDLE_SECONDS

        def setup(self) -> None:
            super().setup()
            # Each response goes out in one write; without Nagle's delay, nothing waits for the client's ACK.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle_one_request(self) -> None:
            """Read one request and answer it; unlike http.server's, every method is forwarded (no 501)."""
            try:
                self.raw_requestline = self.rfile.readline(MAX_LINE_BYTES + 1)
                if len(self.raw_requestline) > MAX_LINE_BYTES:
                    self.requestline = self.request_version = self.command = ""
                    self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                    return
                if not self.raw_requestline:
                    self.close_connection = True
                    return
                if not self.parse_request():
                    return  # parse_request has answered (through send_error)
                self._handle()
            except TimeoutError:
                self.close_connection = True  # the client stalled mid-request or stayed idle: drop it
            except (ConnectionResetError, BrokenPipeError):
                # The client went away (a process exiting with a keep-alive connection open resets it): nothing to
                # answer and nothing wrong here, so no traceback in the server's log.
                self.close_connection = True

        def _handle(self) -> None:
            started = time.perf_counter()
            request_id = _request_id()
            try:
                if not _METHOD.match(self.command or ""):
                    raise FramingError(None, "The request method must be an HTTP token (RFC 9110).")
                if not (self.path or "").isascii():
                    # http.server reads the request line as Latin-1: a raw byte past 0x7F would reach the routes as
                    # another character (caf\xE9 naming "café"). RFC 3986 targets are ASCII; other bytes travel
                    # percent-encoded, where the api's gate judges them as UTF-8.
                    raise FramingError(None, "The request target must be ASCII: percent-encode any other byte.")
                body = self._read_body()
                event = None
                if body is not None:
                    headers = [(k, v) for k, v in self.headers.items() if k.lower() != "transfer-encoding"]
                    try:
                        event = build_event(self.command, self.path, headers, body, self.client_address[0], request_id)
                    except ValueError:  # urlsplit refuses the target (an absolute URL with a broken host)
                        raise FramingError(None, "The request target is not a valid path or URL.") from None
            except FramingError as error:
                answer = framing_error(error, request_id)
                self.close_connection = True
            except ConnectionError:
                self.close_connection = True  # the client went away mid-body: nobody to answer
                return
            else:
                if event is None:
                    answer = gateway_error(413, "Request Entity Too Large")
                    self.close_connection = True
                else:
                    answer = gateway.invoke(event)
            self._write(answer, request_id)
            self._log(answer, request_id, started)

        def _log(self, answer: Answer, request_id: str, started: float) -> None:
            elapsed = (time.perf_counter() - started) * 1000
            try:
                path = urlsplit(getattr(self, "path", "") or "").path
            except ValueError:
                path = "-"
            line = (
                f"{self.client_address[0]} {self.command or '-'} {path or '-'} {answer.status} "
                f"{elapsed:.1f}ms request_id={request_id}\n"
            )
            # One write per line: print() writes the text and the newline apart, and the containers' JSON lines
            # would land between them.
            log.write(line)
            log.flush()

        def _write(self, answer: Answer, request_id: str) -> None:
            """Status line, headers and body in one write (two writes stall keep-alive clients on delayed ACKs)."""
            reason = self.responses.get(answer.status, ("",))[0]
            lines = [
                f"{self.protocol_version} {answer.status} {reason}",
                f"Server: {self.version_string()}",
                f"Date: {self.date_time_string()}",
            ]
            for name, value in answer.headers:
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                    lines.append(f"{name}: {value}")
            lines.append(f"Content-Length: {len(answer.body)}")
            lines.append(f"apigw-requestid: {request_id}")
            if self.close_connection:
                lines.append("Connection: close")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
            self.wfile.write(head if self.command == "HEAD" else head + answer.body)

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """http.server's own refusals (a malformed request line, headers too large) as JSON, never HTML."""
            started = time.perf_counter()
            self.close_connection = True
            request_id = _request_id()
            if code == HTTPStatus.BAD_REQUEST:
                answer = framing_error(FramingError(None, f"{message or 'Bad request'}."), request_id)
            else:
                answer = gateway_error(code, self.responses.get(code, ("Error",))[0])
            self._write(answer, request_id)
            self._log(answer, request_id, started)

        def _read_body(self) -> bytes | None:
            """The request body (plain or chunked); None when it is over API Gateway's 10 MB; `FramingError` when
            its framing is malformed (RFC 9112 section 6)."""
            encodings = self.headers.get_all("Transfer-Encoding") or []
            length = content_length(self.headers.get_all("Content-Length") or [])
            if encodings:
                codings = [part.strip().lower() for value in encodings for part in value.split(",") if part.strip()]
                if codings != ["chunked"]:
                    raise FramingError(
                        "Transfer-Encoding",
                        "The Transfer-Encoding header must be chunked (no other coding is accepted).",
                    )
                if length is not None:
                    raise FramingError(
                        "Content-Length",
                        "A request must not carry both Content-Length and Transfer-Encoding; send one of them.",
                    )
                return self._read_chunked()
            if not length:
                return b""
            if length > MAX_BODY_BYTES:
                return None
            body = self.rfile.read(length)
            if len(body) < length:
                raise ConnectionError("the body ended before Content-Length bytes")
            return body

        def _read_chunked(self) -> bytes | None:
            parts: list[bytes] = []
            size = 0
            while True:
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
                if not line:
                    raise ConnectionError("the body ended before its last chunk")
                announced = chunk_size(line)
                if announced is None:
                    raise FramingError(
                        "Transfer-Encoding",
                        "A chunk must start with its size in hexadecimal digits, optional extensions and CRLF.",
                    )
                if announced == 0:
                    self._skip_trailers()
                    return b"".join(parts)
                size += announced
                if size > MAX_BODY_BYTES:
                    return None
                chunk = self.rfile.read(announced)
                if len(chunk) < announced:
                    raise ConnectionError("the body ended inside a chunk")
                parts.append(chunk)
                if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise FramingError(
                        "Transfer-Encoding", "A chunk's data must be exactly its announced size, followed by CRLF."
                    )

        def _skip_trailers(self) -> None:
            """Read the trailer section up to its empty line (trailers are not passed on, as API Gateway does)."""
            total = 0
            while True:
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
                if line in (b"\r\n", b"\n"):
                    return
                if not line:
                    raise ConnectionError("the body ended inside its trailers")
                total += len(line)
                if total > MAX_LINE_BYTES:
                    raise FramingError(
                        "Transfer-Encoding", "The trailer section of a chunked body must be at most 65,536 bytes."
                    )

        def log_message(self, format: str, *args: Any) -> None:
            """The one line per request is written by `_handle`; silence the default access log."""

    server = ThreadingHTTPServer((host, port), RequestHandler)
    server.daemon_threads = True
    return server
