"""Logging in one place, created on first use (powertools' Tracer alone costs ~0.5 s of cold start; metrics and
tracing join here when something emits them).

Nothing here logs request bodies or headers, so API keys never reach the logs.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger


@cache
def logger() -> Logger:
    """The structured JSON logger of the service."""
    from aws_lambda_powertools import Logger

    return Logger(service="baton")
