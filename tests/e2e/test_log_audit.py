"""The logs of the whole end-to-end session: everything `baton serve` printed (its gateway's access lines and what
its containers, the api function, logged) holds no API key secret and no state content, and every line carries
the request id.

The file's name sorts it after every other end-to-end module, so it reads what the whole session logged. It makes
traffic of its own first (secrets in headers, queries and bodies, states full of markers, each kind of error), so
it means something when it runs alone.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests import proof_counts
from tests.e2e.planted import SECRETS, STATE_MARKERS, plant_secret, plant_state_marker
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


def own_traffic(baton: BatonServe) -> dict[str, str]:
    """Requests that put secrets and states where a careless log would pick them up; returns facts to check."""
    run = uuid.uuid4().hex[:12]
    marker = plant_state_marker(f"log-audit-state-{run}")
    subject = f"log-audit-{run}"
    with httpx.Client(base_url=baton.url, timeout=30) as client:
        operator = {"Authorization": f"Bearer {baton.key}"}
        minted = client.post(
            "/v1/keys",
            json={"agent_id": f"audit-{run}", "scopes": ["*"], "description": f"log audit {run}"},
            headers=operator,
        )
        assert minted.status_code == 201, minted.text
        secret = plant_secret(minted.json()["data"]["secret"])
        key_id = minted.json()["data"]["key_id"]
        mine = {"Authorization": f"Bearer {secret}"}
        state = {"note": marker, "turns": [{"role": "user", "text": marker}]}
        saved = client.post(
            "/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": state}, headers=mine
        )
        assert saved.status_code == 201, saved.text
        checkpoint_id = saved.json()["data"]["checkpoint_id"]
        lookup = {"subject_id": subject, "kind": "task_state"}
        assert client.get("/v1/checkpoints", params=lookup, headers=mine).status_code == 200
        assert client.get(f"/v1/checkpoints/{checkpoint_id}", headers=mine).status_code == 200
        assert client.get(f"/v1/subjects/{subject}/checkpoints", params={"limit": 1}, headers=mine).status_code == 200
        # Errors, each with the state or a secret somewhere in the request
        unknown_field = {"subject_id": subject, "kind": "task_state", "state": state, "stray": marker}
        assert client.post("/v1/checkpoints", json=unknown_field, headers=mine).status_code == 400
        bad_kind = {"subject_id": subject, "kind": marker, "state": state}
        assert client.post("/v1/checkpoints", json=bad_kind, headers=mine).status_code == 400
        text_body = client.post(
            "/v1/checkpoints", content=json.dumps(state), headers={**mine, "Content-Type": "text/plain"}
        )
        assert text_body.status_code == 415
        assert (
            client.get("/v1/checkpoints", params=lookup, headers={"Authorization": f"Bearer {secret}x"}).status_code
            == 401
        )
        forged = plant_secret(f"btn_{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}")
        assert (
            client.get("/v1/checkpoints", params=lookup, headers={"Authorization": f"Bearer {forged}"}).status_code
            == 401
        )
        assert client.get("/v1/health", params={"api_key": secret}, headers={"X-Api-Key": secret}).status_code == 200
        assert client.get(f"/v1/checkpoints/ckpt_{uuid.uuid4().hex}", headers=mine).status_code == 404
        assert client.get(f"/v1/nothing/{run}", headers=mine).status_code == 404
        assert client.get("/v1/keys", params={"tenant_id": "someone-else"}, headers=mine).status_code == 403
        assert client.delete(f"/v1/checkpoints/{checkpoint_id}", headers=mine).status_code == 200
        assert client.delete(f"/v1/keys/{key_id}", headers=operator).status_code == 200
    return {"key_id": key_id}


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


def test_the_sessions_logs_hold_no_secret_no_state_and_always_the_request_id(baton: BatonServe) -> None:
    facts = own_traffic(baton)
    wait_for_the_last_line(baton)
    everything = list(baton.lines)
    assert BANNER_END in everything, everything[:20]
    lines = everything[everything.index(BANNER_END) + 1 :]
    secrets = {baton.key, *SECRETS}
    markers = set(STATE_MARKERS)
    found = audit(lines, secrets, markers)
    check_access_lines(found)
    proof_counts.record(
        "log audit",
        lines=len(lines),
        secrets_checked=len(secrets),
        state_markers=len(markers),
        access_lines=len(found.access),
    )
    # The access lines of this test's own key name its tenant and key: the audit looked at real lines.
    own = [r for records in found.access.values() for r in records if r.get("key_id") == facts["key_id"]]
    assert len(own) >= 8, own
    assert {r.get("tenant_id") for r in own} == {"dev"}
    assert {r.get("route") for r in own} >= {"/v1/checkpoints", "/v1/checkpoints/{checkpoint_id}"}
    assert not found.problems, "\n".join(found.problems[:50]) + f"\n({len(found.problems)} problems)"
