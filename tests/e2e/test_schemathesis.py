"""Schemathesis against a running `baton serve`, from the committed docs/openapi.json, with every check.

The document must say exactly what the API does: a valid request by the document is accepted, an invalid one is
refused with a 4xx, every answer matches its documented status, headers and schema, undeclared methods answer 405
with `Allow`, and routes that need a key refuse a request without one.

The run is the schemathesis CLI (its phases: coverage, fuzzing, stateful), seeded and bounded by time:
`SCHEMATHESIS_SECONDS` within `make test`, `BATON_FUZZ_SECONDS` (with a fresh seed, or `BATON_FUZZ_SEED`) for
`make fuzz`. It acts with a key of its own tenant, so what it writes never meets the other end-to-end tests.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.server_process import REPO, BatonServe
from tests.proof_counts import record

DOCUMENT = REPO / "docs" / "openapi.json"
CONFIG = REPO / "tests" / "e2e" / "schemathesis.toml"
SCHEMATHESIS_SECONDS = 60
"""The bounded run inside `make test`."""
SEED = 20261201
FUZZ_TENANT = "schemathesis"


@pytest.fixture(scope="module")
def fuzz_key(baton: BatonServe) -> str:
    """A key with every scope (tenants:manage included) in a tenant of its own, issued by the operator key."""
    response = httpx.post(
        f"{baton.url}/v1/keys",
        json={
            "agent_id": "fuzzer",
            "tenant_id": FUZZ_TENANT,
            "scopes": ["*", "tenants:manage"],
            "description": "schemathesis run of tests/e2e/test_schemathesis.py",
        },
        headers={"Authorization": f"Bearer {baton.key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["secret"])


def run_settings() -> tuple[int, int]:
    """(seconds, seed) of this run: bounded and fixed in `make test`, longer and fresh in `make fuzz`."""
    fuzz_seconds = os.environ.get("BATON_FUZZ_SECONDS")
    if not fuzz_seconds:
        return SCHEMATHESIS_SECONDS, SEED
    seed = int(os.environ.get("BATON_FUZZ_SEED") or random.SystemRandom().randrange(1, 2**31))
    return int(fuzz_seconds), seed


def run_schemathesis(
    url: str, key: str, seconds: int, seed: int, report: Path, header_counts: Path
) -> subprocess.CompletedProcess[str]:
    """`schemathesis run` with every check against `url`; its JSON report is written to `report`, and the hooks'
    counts of the request headers Baton reads to `header_counts`."""
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        str(DOCUMENT),
        "--url",
        url,
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-time",
        str(seconds),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "35",
        "--suppress-health-check",
        "too_slow",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        "--output-sanitize",
        "true",
    ]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "BATON_SCHEMATHESIS_HEADER_COUNTS": str(header_counts),
    }
    return subprocess.run(
        command,
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=seconds + 240,
        check=False,
    )


def test_schemathesis_finds_nothing_the_document_does_not_say(baton: BatonServe, fuzz_key: str, tmp_path: Path) -> None:
    # Given baton serve and the committed document
    seconds, seed = run_settings()
    report_path = tmp_path / "schemathesis.json"
    header_counts_path = tmp_path / "headers.json"
    # When schemathesis runs every check against it
    done = run_schemathesis(baton.url, fuzz_key, seconds, seed, report_path, header_counts_path)
    output = done.stdout + done.stderr
    assert report_path.exists(), f"schemathesis wrote no report (exit {done.returncode}):\n{output}"
    report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    failures = sum(group["count"] for group in report["failures"])
    errors = sum(group["count"] for group in report["errors"])
    record(
        "schemathesis",
        cases=report["test_cases"]["generated"],
        operations=(report["operations"] or {}).get("tested", 0),
        failures=failures,
        errors=errors,
    )
    header_counts: dict[str, int] = (
        json.loads(header_counts_path.read_text(encoding="utf-8")) if header_counts_path.exists() else {}
    )
    record(
        "schemathesis headers",
        **{name.lower().replace("-", "_").replace(" ", "_"): count for name, count in header_counts.items()},
    )
    print(f"\nschemathesis seed {seed}, {seconds} s: {json.dumps(report['test_cases'])}")
    print(f"request headers sent, and their answers: {json.dumps(dict(sorted(header_counts.items())))}")
    # Then it found no failure and no error (the output names each, with a curl command to reproduce it)
    assert report["complete"], output
    assert failures == 0, f"schemathesis (seed {seed}) found failures:\n{output}"
    assert errors == 0, f"schemathesis (seed {seed}) hit errors:\n{output}"
    assert report["operations"]["tested"] == report["operations"]["selected"] > 0, output
    # and it sent each request header Baton reads (they are declared, so they are fuzzed)
    for name in ("If-Match", "If-None-Match", "Idempotency-Key"):
        assert header_counts.get(f"{name} sent", 0) > 0, f"schemathesis never sent {name}: {header_counts}"
    assert done.returncode == 0, output
