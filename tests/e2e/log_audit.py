"""The log audit of the end-to-end suites: every line `baton serve` printed (its gateway's access lines and what its
containers, the api function, logged) holds no API key secret and no state content, and every line carries the
request id. `tests/e2e/test_log_audit.py` runs it on traffic of its own; the session's `baton` fixture runs it on
everything its server printed when the session ends (under pytest-xdist, each worker's server)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests import proof_counts
from tests.e2e.planted import SECRETS, STATE_MARKERS
from tests.e2e.server_process import BatonServe

BANNER_END = "Press Ctrl-C to stop."
"""The last line `baton serve` prints before it serves; the banner above it shows the development key on purpose."""
GATEWAY_LINE = re.compile(
    r"^\S+ (?P<method>[A-Z]+) (?P<path>\S*) (?P<status>\d{3}) [\d.]+ms request_id=(?P<request_id>\S+)$"
)
SECRET_SHAPE = re.compile(r"btn_[A-Za-z0-9_-]{16,}")
"""What every API key secret looks like (the prefix and URL-safe base64): catches keys minted by any test."""
GATEWAY_OWN_STATUSES = {400, 413, 500, 502, 503, 504}
"""Answers the gateway may give without invoking the function (framing, size, a failed or slow function)."""
QUIET_LEVELS = {"DEBUG", "INFO"}


@dataclass
class Audit:
    """What the log lines showed."""

    gateway: dict[str, list[re.Match[str]]] = field(default_factory=dict)
    access: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    logged: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def wait_for_the_last_line(baton: BatonServe) -> None:
    """A last request, then its access line: every line written before it has arrived (one pipe, in order)."""
    sentinel = httpx.get(f"{baton.url}/v1/health", timeout=30)
    request_id = sentinel.headers["apigw-requestid"]
    deadline = time.monotonic() + 10
    while not any(f"request_id={request_id}" in line for line in list(baton.lines)):
        assert time.monotonic() < deadline, f"no access line for the sentinel {request_id}"
        time.sleep(0.02)


def audit(lines: list[str], secrets: set[str], markers: set[str]) -> Audit:
    """Classify every line and collect what is wrong with each."""
    found = Audit()
    for number, line in enumerate(lines, start=1):
        where = f"line {number}: {line[:300]}"
        for secret in secrets:
            if secret in line:
                found.problems.append(f"{where}: holds an API key secret")
        if SECRET_SHAPE.search(line):
            found.problems.append(f"{where}: holds something shaped like an API key secret")
        gateway = GATEWAY_LINE.match(line)
        if gateway is not None:
            request_id = gateway["request_id"]
            if request_id == "-" or not request_id:
                found.problems.append(f"{where}: a gateway line without a request id")
            found.gateway.setdefault(request_id, []).append(gateway)
            level = "INFO"
        elif line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                found.problems.append(f"{where}: not JSON, though it looks like it")
                continue
            found.logged.append(record)
            level = str(record.get("level", ""))
            request_id = record.get("request_id")
            if not isinstance(request_id, str) or not request_id:
                found.problems.append(f"{where}: a log line without request_id")
            elif record.get("message") == "request":
                found.access.setdefault(request_id, []).append(record)
        else:
            found.problems.append(f"{where}: neither an access line nor a JSON log line, so no request id")
            continue
        if level in QUIET_LEVELS:
            shown = [m for m in markers if m in line]
            if shown:
                found.problems.append(f"{where}: state content at {level}: {shown}")
    return found


def check_access_lines(found: Audit) -> None:
    """One access line per request the function served, naming the same id, method and status as the gateway."""
    for request_id, records in found.access.items():
        if len(records) != 1:
            found.problems.append(f"{len(records)} access lines for request {request_id}")
        gateway = found.gateway.get(request_id, [])
        if len(gateway) != 1:
            found.problems.append(f"access line {records[0]} matches {len(gateway)} gateway lines")
            continue
        expected = (gateway[0]["method"], int(gateway[0]["status"]))
        if (records[0].get("method"), records[0].get("status")) != expected:
            found.problems.append(f"access line {records[0]} disagrees with the gateway's {gateway[0].group(0)}")
        missing = {"method", "status", "duration_ms"} - set(records[0])
        if missing:
            found.problems.append(f"access line {records[0]} lacks {sorted(missing)}")
    for record in found.logged:
        if record.get("request_id") not in found.gateway:
            found.problems.append(f"log line {record} names a request id no request had")
    for request_id, matches in found.gateway.items():
        status = int(matches[0]["status"])
        if request_id not in found.access and status not in GATEWAY_OWN_STATUSES:
            found.problems.append(f"the function answered {matches[0].group(0)} without an access line")


def audit_server(baton: BatonServe, suite: str) -> Audit:
    """Audit everything `baton` printed after its banner, with the secrets and markers planted so far; the counts go
    to `suite`'s line of the proof summary."""
    wait_for_the_last_line(baton)
    everything = list(baton.lines)
    assert BANNER_END in everything, everything[:20]
    lines = everything[everything.index(BANNER_END) + 1 :]
    secrets = {baton.key, *SECRETS}
    markers = set(STATE_MARKERS)
    found = audit(lines, secrets, markers)
    check_access_lines(found)
    proof_counts.record(
        suite,
        lines=len(lines),
        secrets_checked=len(secrets),
        state_markers=len(markers),
        access_lines=len(found.access),
    )
    return found


def stop_audited(server: BatonServe, suite: str) -> None:
    """Audit everything `server` printed (`audit_server`), then stop it whatever the audit found; the problems, if
    any, fail the fixture tearing it down."""
    try:
        found = audit_server(server, suite)
        assert not found.problems, "\n".join(found.problems[:50]) + f"\n({len(found.problems)} problems)"
    finally:
        server.stop()
