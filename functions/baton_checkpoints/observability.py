"""Logging in one place, created on first use (powertools' Tracer alone costs ~0.5 s of cold start; metrics and
tracing join here when something emits them).

Every line the function writes is JSON and carries the request id of the request being served (API Gateway's,
the one clients see in `meta.request_id`). Each request writes one INFO access line; nothing here logs request
bodies, states or headers, so API keys and what agents park never reach the logs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

SERVICE = "baton"
REQUEST_KEYS = ("request_id", "lambda_request_id")
"""The keys bound to every line while a request is served."""


@cache
def logger() -> Logger:
    """The structured JSON logger of the service."""
    from aws_lambda_powertools import Logger

    created = Logger(service=SERVICE, utc=True, use_rfc3339=True, json_serializer=_to_json)
    _route_stray_records(created)
    return created


def _to_json(record: dict[str, object]) -> str:
    """A log record as one JSON line: orjson writes it several times faster than `json.dumps` (every request
    writes one), and anything it cannot write is written as its `str`, as powertools' default does."""
    import orjson

    return orjson.dumps(record, default=str).decode("utf-8")


def _route_stray_records(service_logger: Logger) -> None:
    """Send other libraries' warnings through the same JSON handler, so they carry the request id too.

    Only where nothing else formats them: on Lambda the runtime's own root handler stamps Lambda's request id on
    them (the access line names it as `lambda_request_id`), and a test runner has its own capture.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(service_logger.registered_formatter)
    handler.setLevel(logging.WARNING)
    # Baton's own records are written by the service logger's handler; the root must not write them again.
    handler.addFilter(lambda record: record.name != SERVICE and not record.name.startswith(SERVICE + "."))
    root.addHandler(handler)


_request_keys: ContextVar[dict[str, str] | None] = ContextVar("baton_request_keys", default=None)
"""The ids of the request being served, for the access line (`request_logging` binds them)."""


@contextmanager
def request_logging(request_id: str, lambda_request_id: str | None) -> Iterator[None]:
    """Every line logged inside carries `request_id` (and Lambda's own id, to find its REPORT line)."""
    log = logger()
    log.append_keys(request_id=request_id, lambda_request_id=lambda_request_id)
    keys = {"request_id": request_id}
    if lambda_request_id is not None:
        keys["lambda_request_id"] = lambda_request_id
    token = _request_keys.set(keys)
    try:
        yield
    finally:
        _request_keys.reset(token)
        log.remove_keys(REQUEST_KEYS)


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
    log = logger()
    if not logging.getLogger(log.name).isEnabledFor(logging.INFO):
        return
    line = {
        "level": "INFO",
        "location": "log_access",
        "message": "request",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "service": SERVICE,
        **(_request_keys.get() or {}),
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(duration_ms, 1),
        "tenant_id": tenant_id,
        "key_id": key_id,
        "xray_trace_id": _trace(),
    }
    handler = log.logger_handler
    text = _to_json({name: value for name, value in line.items() if value is not None}) + "\n"
    handler.acquire()
    try:
        handler.stream.write(text)  # type: ignore[attr-defined]
        handler.flush()
    except (OSError, ValueError):  # a closed or broken stream: as `logging` does, the request is not failed for it
        pass
    finally:
        handler.release()


def _trace() -> str | None:
    """The X-Ray trace id of the request being served (as powertools' formatter reads it)."""
    header = os.environ.get("_X_AMZN_TRACE_ID")
    return header.split(";", 1)[0].removeprefix("Root=") if header else None
