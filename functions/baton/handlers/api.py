"""The api function: every HTTP request of the HTTP API's `$default` route."""

from __future__ import annotations

from typing import Any

from baton.api.app import app


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway HTTP API (payload 2.0) event."""
    return app.resolve(event, context)
