"""The api function: every HTTP request of the HTTP API's `$default` route."""

from __future__ import annotations

import gc
import os
import time
import uuid
from typing import Any

# Baton uses no pydantic plugin; without this, building the first model scans every installed distribution's
# entry points for one (milliseconds of each cold start). The deployed function sets it too.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from baton_checkpoints.api.app import app
from baton_checkpoints.observability import log_access, request_logging

# What the import built (modules, routes, models, validators) lives as long as the container: kept out of the
# collector's generations, a collection walks only what requests allocate (`bench/warm.py`: the mean of a thread put
# 1.43 -> 1.34 ms, from fewer and shorter pauses). What the first request builds (the AWS clients and their models,
# the validators pydantic builds on first use) is frozen after it, once (the mean 1.44 -> 1.35 ms again): only that
# request's cyclic garbage not collected yet stays, once, with it; refcounting frees everything else as before.
gc.freeze()
_first_request_frozen = False


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway HTTP API (payload 2.0) event, and log one access line for it."""
    started = time.perf_counter()
    request_context = event.setdefault("requestContext", {})
    # API Gateway always sends one; an event without (a hand-made test event) gets one here, so the logs and
    # the answer's meta.request_id name the same id.
    request_id = str(request_context.get("requestId") or uuid.uuid4())
    request_context["requestId"] = request_id
    with request_logging(request_id, getattr(context, "aws_request_id", None)):
        status = 500  # what API Gateway answers when the function fails
        try:
            result = app.resolve(event, context)
            status = int(result.get("statusCode", 200))
            return result
        finally:
            _log_access(event, status, (time.perf_counter() - started) * 1000)
            _freeze_after_first_request()


def _freeze_after_first_request() -> None:
    global _first_request_frozen
    if not _first_request_frozen:
        _first_request_frozen = True
        gc.freeze()


def _log_access(event: dict[str, Any], status: int, duration_ms: float) -> None:
    call = app.last_call
    principal = call.principal if call is not None else None
    method = str(event.get("requestContext", {}).get("http", {}).get("method", "")).upper()
    log_access(
        method=method,
        route=call.route if call is not None else None,
        status=status,
        duration_ms=duration_ms,
        tenant_id=principal.tenant_id if principal is not None else None,
        key_id=principal.key_id if principal is not None else None,
    )
