"""Shared by every suite: no test may reach a real AWS account; the service's log lines, read back."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

Lines = Callable[[], list[dict[str, Any]]]
"""The JSON lines the service logger wrote so far, parsed."""


@pytest.fixture(autouse=True, scope="session")
def _offline_aws() -> None:
    """Fake credentials and a region, so nothing can sign a request for a real account."""
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)


@pytest.fixture
def logged() -> Iterator[Lines]:
    """The lines the service logger writes, parsed, read from its own handler (the formatter binds the keys)."""
    from baton.observability import logger

    handler = logger().logger_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    finally:
        handler.setStream(previous)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The proof suites' case counts, one line each."""
    from tests.proof_counts import COUNTS

    if not COUNTS:
        return
    terminalreporter.section("proof suites: cases tried")
    for suite in sorted(COUNTS):
        counts = ", ".join(f"{name} {value}" for name, value in sorted(COUNTS[suite].items()))
        terminalreporter.write_line(f"{suite}: {counts}")
