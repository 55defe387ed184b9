"""Logging in one place, created on first use (powertools' Tracer alone costs ~0.5 s of cold start; metrics and
tracing join here when something emits them). The access line is written here, without powertools' Logger: a
request that logs nothing else never imports powertools' logging (~10 ms of a cold start).

Every line the function writes is JSON and carries the request id of the request being served (API Gateway's,
the one clients see in `meta.request_id`). Each request writes one INFO access line; nothing here logs request
bodies, states or headers, so API keys and what agents park never reach the logs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

SERVICE = "baton"
REQUEST_KEYS = ("request_id", "lambda_request_id")
"""The keys bound to every line while a request is served."""


_made: Logger | None = None
"""The service logger, once something was logged through it."""


def logger() -> Logger:
    """The structured JSON logger of the service, made by the first line logged through it (a request whose only line
    is its access line never imports powertools' logging); inside a request, its lines carry the request's ids."""
    log = _service_logger()
    bound = _request_keys.get()
    if bound is not None and not bound.on_logger:
        log.append_keys(**bound.keys)
        bound.on_logger = True
    return log


@cache
def _service_logger() -> Logger:
    global _made
    from aws_lambda_powertools import Logger

    _made = Logger(service=SERVICE, utc=True, use_rfc3339=True, json_serializer=_to_json)
    _route_stray_records()
    return _made


def _to_json(record: dict[str, object]) -> str:
    """A log record as one JSON line: orjson writes it several times faster than `json.dumps` (every request
    writes one), and anything it cannot write is written as its `str`, as powertools' default does."""
    import orjson

    return orjson.dumps(record, default=str).decode("utf-8")


class _StrayRecords(logging.Handler):
    """Other libraries' warnings, written as the service logger writes its own lines (JSON, with the request's ids);
    the first one makes the service logger."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        # Baton's own records are written by the service logger's handler; the root must not write them again.
        self.addFilter(lambda record: record.name != SERVICE and not record.name.startswith(SERVICE + "."))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = logger().registered_formatter.format(record)
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except Exception:
            self.handleError(record)


def _route_stray_records() -> None:
    """Send other libraries' warnings through the service logger's formatter, so they carry the request id too.

    Only where nothing else formats them: on Lambda the runtime's own root handler stamps Lambda's request id on
    them (the access line names it as `lambda_request_id`), and a test runner has its own capture.
    """
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(_StrayRecords())


class _Bound(Struct):
    """The ids of the request being served, and whether the service logger carries them yet."""

    keys: dict[str, str]
    on_logger: bool = False


_request_keys: ContextVar[_Bound | None] = ContextVar("baton_request_keys", default=None)
"""The ids of the request being served (`request_logging` binds them)."""


@contextmanager
def request_logging(request_id: str, lambda_request_id: str | None) -> Iterator[None]:
    """Every line logged inside carries `request_id` (and Lambda's own id, to find its REPORT line)."""
    keys = {"request_id": request_id}
    if lambda_request_id is not None:
        keys["lambda_request_id"] = lambda_request_id
    bound = _Bound(keys)
    token = _request_keys.set(bound)
    _route_stray_records()
    try:
        yield
    finally:
        _request_keys.reset(token)
        if bound.on_logger and _made is not None:
            _made.remove_keys(REQUEST_KEYS)


def log_access(
    method: str, route: str | None, status: int, duration_ms: float, tenant_id: str | None, key_id: str | None
) -> None:
    """The one INFO line of a request: what was asked, of which route, by which key, and how it ended.

    `route` is the route's pattern (`/v1/checkpoints/{checkpoint_id}`), never the path: paths hold subject ids.

    The line has the shape of the service logger's other lines (level, location, message, timestamp, service, the
    request's ids, the X-Ray trace id when there is one; keys without a value left out) and goes to the same stream,
    but is written here rather than through `logging`: a record, its caller's frame and powertools' formatter cost
    about 0.1 ms per request (`bench/harness/warm.py`: an eighth of a LangGraph thread put's own CPU), for a line whose
    keys are fixed.
    """
    made = _made
    if made is None:
        if _level_to_be() > logging.INFO:
            return
    elif not logging.getLogger(SERVICE).isEnabledFor(logging.INFO):
        return
    bound = _request_keys.get()
    line = {
        "level": "INFO",
        "location": "log_access",
        "message": "request",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "service": SERVICE,
        **(bound.keys if bound is not None else {}),
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(duration_ms, 1),
        "tenant_id": tenant_id,
        "key_id": key_id,
        "xray_trace_id": _trace(),
    }
    text = _to_json({name: value for name, value in line.items() if value is not None}) + "\n"
    # The service logger's stream, under its handler's lock, once it is made; standard output, its stream, until then.
    handler = made.logger_handler if made is not None else None
    stream = handler.stream if handler is not None else sys.stdout  # type: ignore[attr-defined]
    with handler.lock if handler is not None and handler.lock is not None else nullcontext():
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: as `logging` does, the request is not failed
            pass


def _level_to_be() -> int:
    """The level the service logger will have when it is made, read as powertools reads it (Lambda's advanced
    logging controls first, then `POWERTOOLS_LOG_LEVEL`, then `LOG_LEVEL`; INFO when none is set), without making
    it."""
    from aws_lambda_powertools.shared import constants

    name = (
        constants.LAMBDA_ADVANCED_LOGGING_LEVELS.get(os.getenv(constants.LAMBDA_LOG_LEVEL_ENV))
        or os.getenv(constants.POWERTOOLS_LOG_LEVEL_ENV)
        or os.getenv(constants.POWERTOOLS_LOG_LEVEL_LEGACY_ENV)
        or "INFO"
    )
    level = logging.getLevelName(name.upper())
    return level if isinstance(level, int) else logging.INFO


def _trace() -> str | None:
    """The X-Ray trace id of the request being served (as powertools' formatter reads it)."""
    header = os.environ.get("_X_AMZN_TRACE_ID")
    return header.split(";", 1)[0].removeprefix("Root=") if header else None
