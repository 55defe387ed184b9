"""A container's last act: the `baton-shutdown` external extension (the api function's layer) registers for
Lambda's SHUTDOWN event only, so Lambda sends the runtime SIGTERM before stopping the container, and the api
handler then writes the usage counts the container still holds (`handlers/api.py: on_shutdown`).

The extension is run as Lambda runs it (its launcher, a process of its own) against a stand-in for the Lambda
Extensions API on 127.0.0.1; the flush runs on a real SIGTERM, against the table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from baton_checkpoints.api.services import OnFirstUse, Services
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.usage import day_of
from baton_checkpoints.store import layout
from baton_checkpoints.store.usage import UsageMeter
from tests import proof_counts
from tests.integration.conftest import services_on

pytestmark = pytest.mark.engines
SUITE = "shutdown (integration)"
LAYER = Path(__file__).resolve().parents[2] / "functions" / "layers" / "shutdown"


class ExtensionsApi(BaseHTTPRequestHandler):
    """The Lambda Extensions API as far as the extension uses it: register, then the next event (SHUTDOWN after
    `events_before` INVOKE events, which an extension registered for SHUTDOWN alone never gets in Lambda)."""

    seen: list[tuple[str, str, dict[str, str], bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(("POST", self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Lambda-Extension-Identifier", "ext-id-1")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"functionName":"baton-api","functionVersion":"1","handler":"h"}')

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, dict(self.headers), b""))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"eventType": "SHUTDOWN", "shutdownReason": "spindown"}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def extensions_api() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    handler = type("Recorded", (ExtensionsApi,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_extension_registers_for_shutdown_alone_and_ends_with_it(
    extensions_api: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    address, seen = extensions_api
    launcher = LAYER / "extensions" / "baton-shutdown"
    assert os.access(launcher, os.X_OK), "Lambda starts only executable files of /opt/extensions"
    # When Lambda starts it (its name is its file's)
    done = subprocess.run(
        [str(launcher)], env={**os.environ, "AWS_LAMBDA_RUNTIME_API": address}, capture_output=True, timeout=30
    )
    # Then it registered under that name for SHUTDOWN only, waited for the next event with its identifier, and
    # ended when it was SHUTDOWN
    assert done.returncode == 0, done.stderr
    (method, path, headers, body), (next_method, next_path, next_headers, _) = seen
    assert (method, path) == ("POST", "/2020-01-01/extension/register")
    assert headers["Lambda-Extension-Name"] == launcher.name
    assert json.loads(body) == {"events": ["SHUTDOWN"]}
    assert (next_method, next_path) == ("GET", "/2020-01-01/extension/event/next")
    assert next_headers["Lambda-Extension-Identifier"] == "ext-id-1"
    proof_counts.record(SUITE, extension_runs=1)


def lambda_container(services: Services, monkeypatch: pytest.MonkeyPatch) -> tuple[Services, UsageMeter]:
    """A container as the Lambda's own (`handlers/api.py: lambda_services`, built), counting usage on the stage's
    policy (written at 100 requests, or after 30 s and another request: never, if it idles until Lambda stops it)."""
    from baton_checkpoints.handlers import api as api_handler

    table = services.settings.table_name
    container = services_on(table)
    meter = UsageMeter(container.dynamodb, table, 100, 30)
    object.__setattr__(container, "usage", meter)
    built = OnFirstUse(lambda: container)
    built()
    monkeypatch.setattr(api_handler, "lambda_services", built)
    return container, meter


def test_sigterm_writes_the_usage_counts_the_container_holds(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_checkpoints.handlers import api as api_handler

    # Given a container that counted 7 requests of a tenant (and would not write them before its 100th)
    container, meter = lambda_container(services, monkeypatch)
    table = services.settings.table_name
    day = day_of(now_ms())
    for _ in range(7):
        with meter.request("usage-shutdown", "checkpoints", day):
            pass
    key = layout.usage_day_key("usage-shutdown", day)
    assert "Item" not in container.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)
    # When Lambda sends SIGTERM (the handler that Lambda's runtime installs at import)
    exits: list[int] = []
    monkeypatch.setattr(api_handler, "_exit", exits.append)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        api_handler.install_shutdown_flush()
        signal.raise_signal(signal.SIGTERM)  # its handler runs at once, in this thread
    finally:
        signal.signal(signal.SIGTERM, previous)
    # Then the counts are written, and the process ends cleanly
    assert exits == [0]
    item = container.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["r_checkpoints"] == {"N": "7"}
    proof_counts.record(SUITE, shutdown_flushes=1)


def test_a_flush_stops_at_its_deadline_and_keeps_what_it_did_not_write(services: Services) -> None:
    table = services.settings.table_name
    container = services_on(table)
    meter = UsageMeter(container.dynamodb, table, 100, 30)
    day = day_of(now_ms())
    for tenant in ("usage-late-1", "usage-late-2"):
        with meter.request(tenant, "checkpoints", day):
            pass
    # A deadline already passed writes nothing and keeps everything; the next flush writes it all
    assert meter.flush(time.monotonic() - 1) == 0
    assert meter.flush() == 2
    for tenant in ("usage-late-1", "usage-late-2"):
        item = container.dynamodb.get_item(TableName=table, Key=layout.usage_day_key(tenant, day), ConsistentRead=True)
        assert item["Item"]["r_checkpoints"] == {"N": "1"}


def test_a_flush_interrupting_the_thread_that_holds_the_counts_gives_up_at_its_deadline(services: Services) -> None:
    table = services.settings.table_name
    container = services_on(table)
    meter = UsageMeter(container.dynamodb, table, 100, 30)
    with meter.request("usage-interrupted", "checkpoints", day_of(now_ms())):
        pass
    # A SIGTERM handled while this very thread is adding a request's counts (holding them): the flush waits no
    # longer than its deadline, writes nothing and keeps everything, instead of waiting on itself forever
    with meter._lock:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            meter.flush(time.monotonic() + 0.05)
        assert time.monotonic() - started < 1
    assert meter.flush() == 1


def test_a_shutdown_whose_writes_hang_ends_the_process_at_its_deadline(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_checkpoints.handlers import api as api_handler

    # Given a container whose counts are held by the thread SIGTERM interrupts (mid-request, say)
    _, meter = lambda_container(services, monkeypatch)
    exits: list[int] = []
    monkeypatch.setattr(api_handler, "_exit", exits.append)
    # When the handler runs, the flush waits at most its deadline, and the process ends all the same
    with meter._lock:
        started = time.monotonic()
        api_handler.on_shutdown(signal.SIGTERM, None)
        assert time.monotonic() - started < api_handler.SHUTDOWN_FLUSH_SECONDS + 1
    assert exits == [0]
