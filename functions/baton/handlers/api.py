"""The api function: every HTTP request of the HTTP API's `$default` route."""

from __future__ import annotations

import time
import uuid
from typing import Any

from baton.api.app import app
from baton.observability import log_access, request_logging


class _RoutingContext(dict[str, Any]):
    """The resolver's routing context, which keeps what the last request put in it after `resolve` clears it.

    The gate records the caller (`call`) and powertools the matched route (`_route`) there, and `resolve`
    clears the context before it returns; the access line needs both.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last: dict[str, Any] = {}

    def clear(self) -> None:
        self.last = dict(self)
        super().clear()


_context = _RoutingContext(app.context)
app.context = _context


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway HTTP API (payload 2.0) event, and log one access line for it."""
    started = time.perf_counter()
    request_context = event.setdefault("requestContext", {})
    # API Gateway always sends one; an event without (a hand-made test event) gets one here, so the logs and
    # the answer's meta.request_id name the same id.
    request_id = str(request_context.get("requestId") or uuid.uuid4())
    request_context["requestId"] = request_id
    _context.last = {}
    with request_logging(request_id, getattr(context, "aws_request_id", None)):
        status = 500  # what API Gateway answers when the function fails
        try:
            result = app.resolve(event, context)
            status = int(result.get("statusCode", 200))
            return result
        finally:
            _log_access(event, status, (time.perf_counter() - started) * 1000)


def _log_access(event: dict[str, Any], status: int, duration_ms: float) -> None:
    seen = _context.last
    route = seen.get("_route")
    # Powertools' stand-in route for unmatched paths has no Baton metadata; its "pattern" would be the raw path.
    pattern = route.openapi_path if route is not None and route.openapi_extensions else None
    call = seen.get("call")
    principal = getattr(call, "principal", None)
    method = str(event.get("requestContext", {}).get("http", {}).get("method", "")).upper()
    log_access(
        method=method,
        route=pattern,
        status=status,
        duration_ms=duration_ms,
        tenant_id=getattr(principal, "tenant_id", None),
        key_id=getattr(principal, "key_id", None),
    )
