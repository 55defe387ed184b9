"""Shared by every suite: no test may reach a real AWS account; the service's log lines, read back."""

from __future__ import annotations

import functools
import gc
import io
import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import botocore.loaders
import botocore.session
import pytest

Lines = Callable[[], list[dict[str, Any]]]
"""The JSON lines the service logger wrote so far, parsed."""


_create_loader = botocore.loaders.create_loader


@functools.cache
def _shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """One botocore data loader per search path for the whole test process.

    Every botocore session makes its own loader, which parses the service's JSON models again: about 0.13 s of CPU
    per client, and the integration tests make three clients a test (one per simulated container) in a fresh moto
    account each. The loader only reads botocore's packaged data and caches it; sharing it changes no request,
    no response and no client's configuration, only how often the same files are parsed.
    """
    return _create_loader(search_path_string)


botocore.session.create_loader = _shared_loader  # what `Session._register_data_loader` calls

# The cyclic garbage collector, less often: a test process keeps what its tests imported and cached (hundreds of
# thousands of objects), and moto deep-copies items on every call, so the default thresholds (700 new objects)
# started a collection every few calls and a full one, walking everything alive, every few hundred. Measured on 200
# integration tests and the widest page test: 122 s with the defaults, 91 s with these; the process's memory stays
# near 400 MB. Only the test processes: `baton serve` and the Lambda runtime keep Python's defaults.
gc.set_threshold(100_000, 50, 100)


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
    from baton_checkpoints.observability import logger

    handler = logger().logger_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    finally:
        handler.setStream(previous)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--engines",
        default=None,
        help="the DynamoDB engines the integration modules marked `engines` run on: moto, dynamodb-local or both "
        "(comma-separated; both unless told). `make check` runs them on dynamodb-local alone, `make test` on both.",
    )


ONE_WORKER = {
    "tests/e2e/test_serve.py": "servers of its own",
    "tests/e2e/test_serve_reaper.py": "servers of its own",
    "tests/e2e/test_serve_reaper_bounds.py": "a moto server of its own",
    "tests/e2e/test_thread_reaper_serve.py": "servers of its own",
    "tests/e2e/console/test_console_keys.py": "a server of its own",
    "tests/infrastructure": "one synth of the CDK app per package",
    "tests/e2e/test_install.py": "one wheel built per module",
}
"""Modules (or folders) whose tests share what a module- or package-scoped fixture starts: under pytest-xdist each
runs on one worker, so it starts once (`make test` runs `--dist loadgroup`). Everything else is spread test by test;
each worker has its own moto, its own `baton serve` for the e2e session and its own browser."""


def worker_group(nodeid: str) -> str | None:
    """The `ONE_WORKER` entry that `nodeid`'s test belongs to, if any."""
    path = nodeid.split("::", 1)[0]
    return next((entry for entry in ONE_WORKER if path == entry or path.startswith(entry + "/")), None)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with the groups of `ONE_WORKER`, decided by the controller from each test's path.

    pytest-xdist's own loadgroup reads `xdist_group` markers on the workers and appends the group to each test's
    nodeid, which pytest 9 no longer lets a plugin change: every test stayed a group of its own, and the modules
    above were spread over the workers, each starting their servers again. Other `--dist` modes are left to xdist.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerGroups(LoadScopeScheduling):  # type: ignore[misc]
        """Each test its own unit of work, but the tests of one `ONE_WORKER` entry one unit together."""

        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid) or nodeid

    return OneWorkerGroups(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, a worker hands its proof counts to the controller, which prints the summary."""
    from tests.proof_counts import COUNTS

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["proof_counts"] = json.dumps(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The controller adds up the counts of each worker as it finishes (every count is a sum)."""
    from tests.proof_counts import record

    for suite, counts in json.loads(getattr(node, "workeroutput", {}).get("proof_counts", "{}")).items():
        record(suite, **counts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The proof suites' case counts, one line each."""
    from tests.proof_counts import COUNTS

    if not COUNTS:
        return
    terminalreporter.section("proof suites: cases tried")
    for suite in sorted(COUNTS):
        counts = ", ".join(f"{name} {value}" for name, value in sorted(COUNTS[suite].items()))
        terminalreporter.write_line(f"{suite}: {counts}")
