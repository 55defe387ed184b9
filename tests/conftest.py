"""Shared by every suite: no test may reach a real AWS account."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _offline_aws() -> None:
    """Fake credentials and a region, so nothing can sign a request for a real account."""
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The proof suites' case counts, one line each."""
    from tests.proof_counts import COUNTS

    if not COUNTS:
        return
    terminalreporter.section("proof suites: cases tried")
    for suite in sorted(COUNTS):
        counts = ", ".join(f"{name} {value}" for name, value in sorted(COUNTS[suite].items()))
        terminalreporter.write_line(f"{suite}: {counts}")
