"""Logging in one place, created on first use (powertools' Tracer alone costs ~0.5 s of cold start; metrics and
tracing join here when something emits them).

Every line the function writes is JSON and carries the request id of the request being served (API Gateway's,
the one clients see in `meta.request_id`). Each request writes one INFO access line; nothing here logs request
bodies, states or headers, so API keys and what agents park never reach the logs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def request_logging(request_id: str, lambda_request_id: str | None) -> Iterator[None]:
    """Every line logged inside carries `request_id` (and Lambda's own id, to find its REPORT line)."""
    log = logger()
    log.append_keys(request_id=request_id, lambda_request_id=lambda_request_id)
    try:
        yield
    finally:
        log.remove_keys(REQUEST_KEYS)


def log_access(
    method: str, route: str | None, status: int, duration_ms: float, tenant_id: str | None, key_id: str | None
) -> None:
    """The one INFO line of a request: what was asked, of which route, by which key, and how it ended.

    `route` is the route's pattern (`/v1/checkpoints/{checkpoint_id}`), never the path: paths hold subject ids.
    """
    logger().info(
        "request",
        extra={
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(duration_ms, 1),
            "tenant_id": tenant_id,
            "key_id": key_id,
        },
    )
