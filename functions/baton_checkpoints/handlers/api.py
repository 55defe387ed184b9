"""The api function: every HTTP request of the HTTP API's `$default` route."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any

# Baton uses no pydantic plugin; without this, building the first model scans every installed distribution's
# entry points for one (milliseconds of each cold start). The deployed function sets it too.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from baton_checkpoints.api.app import app, lambda_services
from baton_checkpoints.observability import log_access, logger, request_logging

SHUTDOWN_FLUSH_SECONDS = 0.25
"""What the container's last act may take: Lambda grants the runtime 300 ms between SIGTERM and SIGKILL."""

# What the import built (modules, routes, models, validators) lives as long as the container: kept out of the
# collector's generations, a collection walks only what requests allocate (`bench/harness/warm.py`: the mean of a
# thread put 1.43 -> 1.34 ms, from fewer and shorter pauses). What the first request builds (the AWS clients and their
# models, the validators pydantic builds on first use) is frozen after it, once (the mean 1.44 -> 1.35 ms again): only
# that request's cyclic garbage not collected yet stays, once, with it; refcounting frees everything else as before.
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


def on_shutdown(signum: int, frame: Any) -> None:
    """Lambda is shutting the container down (SIGTERM, sent because the function has an external extension: the
    stack's `baton-shutdown` layer): write the usage counts it still holds, for at most `SHUTDOWN_FLUSH_SECONDS`,
    and end the process. Without this, what an idle container had counted since its last write would be lost with
    it. The writes run in a thread of their own, abandoned at the deadline: a handler runs in the thread it
    interrupted, whose locks (the meter's, the HTTP pool's) it must never wait on."""
    services = lambda_services.built
    if services is not None:
        deadline = time.monotonic() + SHUTDOWN_FLUSH_SECONDS

        def flush() -> None:
            try:
                written = services.usage.flush(deadline)
            except Exception:
                logger().warning("usage counts not written at shutdown", exc_info=True)
            else:
                logger().info("usage counts written at shutdown", extra={"usage_writes": written})

        writer = threading.Thread(target=flush, name="baton-shutdown-flush", daemon=True)
        writer.start()
        writer.join(SHUTDOWN_FLUSH_SECONDS)
        if writer.is_alive():
            logger().warning("usage counts not all written at shutdown: out of time")
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)


_exit = os._exit
"""How the process ends after a shutdown flush: at once (the runtime's own threads would hold it; SIGKILL follows
anyway). Tests put something else here."""


def install_shutdown_flush() -> None:
    """Handle SIGTERM with `on_shutdown` (in Lambda only: `baton serve` and the tests keep their own)."""
    signal.signal(signal.SIGTERM, on_shutdown)


if os.environ.get("AWS_LAMBDA_RUNTIME_API"):
    install_shutdown_flush()
    # SnapStart's hooks (run only when the function's versions are snapshotted; registering them costs nothing)
    from baton_checkpoints.handlers import snapstart  # noqa: F401


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
