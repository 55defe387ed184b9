"""Schemathesis against a running `baton serve`, from the committed docs/openapi.json, with every check.

The document must say exactly what the API does: a valid request by the document is accepted, an invalid one is
refused with a 4xx, every answer matches its documented status, headers and schema, undeclared methods answer 405
with `Allow`, and routes that need a key refuse a request without one.

The run is the schemathesis CLI (its phases: coverage, fuzzing, stateful), seeded. Within `make test` it is
bounded by cases, `SCHEMATHESIS_EXAMPLES` per operation, so a busy or parallel run tries the same cases as a quiet
one, only slower; `make fuzz` is bounded by time, `BATON_FUZZ_SECONDS`, with a fresh seed (or `BATON_FUZZ_SEED`).
It acts with a key of its own tenant, so what it writes never meets the other end-to-end tests.
Some positive cases of the id routes are sent to real checkpoints, subjects and LangGraph threads of that tenant
(tests/e2e/schemathesis_hooks.py), and each of those routes must have succeeded on one at least: a 404 proves nothing.
So are some of OAuth's endpoints' (a registered client, a code or grant approved with that key): each must have
succeeded, a code exchanged and a grant refreshed, a decision approved and one denied, each kind of token revoked.
And the grants' routes: a listing of the fuzz tenant's grants that shows the grant that stays, and a real grant
revoked through `DELETE /v1/oauth/grants/{grant_id}` (its refresh token then refused, a second revocation 404).
And a tenant's limits (the fuzz key holds tenants:manage): a scratch tenant's set by real PUTs and read back, the fuzz
tenant's own read and never set; no PUT ever names a tenant a key belongs to, so no answer of the run is a 429.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import schemathesis_hooks
from tests.e2e.server_process import REPO, BatonServe
from tests.proof_counts import record

DOCUMENT = REPO / "docs" / "openapi.json"
CONFIG = REPO / "tests" / "e2e" / "schemathesis.toml"
SCHEMATHESIS_EXAMPLES = 10
"""The run inside `make test`: at most this many generated cases per operation in each of the fuzzing and stateful
phases (the coverage phase's cases are its own). About 2,000 cases in all, a minute on a quiet 2-core machine."""
SCHEMATHESIS_TIMEOUT = 900
"""How long the bounded run may take before the test fails: a loaded machine is slow, not wrong."""
SEED = 20261201
FUZZ_TENANT = "schemathesis"
REAL_SUCCESSES = (
    "GET /v1/checkpoints/{checkpoint_id} 200",
    "DELETE /v1/checkpoints/{checkpoint_id} 200",
    "GET /v1/checkpoints/{checkpoint_id}/revisions 200",
    "GET /v1/checkpoints/{checkpoint_id}/revisions/{revision} 200",
    "POST /v1/checkpoints/{checkpoint_id}/restore 200",
    "POST /v1/checkpoints/{checkpoint_id}/lease 201",
    "DELETE /v1/checkpoints/{checkpoint_id}/lease 200",
    "POST /v1/resume 200",
    "DELETE /v1/subjects/{subject_id} 200",
    "GET /v1/threads/{thread_id}/checkpoint 200",
    "GET /v1/threads/{thread_id}/checkpoints 200",
    "POST /v1/threads/{thread_id}/writes 200",
    "DELETE /v1/threads/{thread_id} 200",
    "POST /v1/threads/{thread_id}/copy 200",
    "POST /v1/threads:prune 200",
    "POST /v1/threads:delete-for-runs 200",
    "GET /console 304",
    "GET /console/{asset} 200",
    "GET /console/{asset} 304",
    "POST /oauth/register 201",
    "GET /oauth/authorize 200",
    "POST /oauth/authorize 302",
    "POST /oauth/token 200",
    "POST /oauth/revoke 200",
    "GET /v1/oauth/grants 200",
    "DELETE /v1/oauth/grants/{grant_id} 200",
    "GET /v1/tenants/{tenant_id}/limits 200",
    "PUT /v1/tenants/{tenant_id}/limits 200",
)
"""The answers each route must have given a case sent to a real resource at least once."""
ANSWERED = (
    "GET /console 200",
    "GET /console/{asset} 404",
    "GET /v1/whoami 200",
    "GET /.well-known/oauth-protected-resource/mcp 200",
    "GET /.well-known/oauth-protected-resource 200",
    "GET /.well-known/oauth-authorization-server 200",
    "GET /oauth/authorize 400",
    "POST /oauth/token 400",
    "GET /v1/usage 200",
    "GET /v1/audit 200",
)
"""Answers of routes without real resources that the run must have seen: the console's page, an unknown file of the
console, a tenant's usage and audit trail (the fuzz key's own, or any tenant's: it holds tenants:manage),
the calling key's identity (its refusal without a key is the `ignored_auth` check's, which every operation that needs
a key gets, and the isolation matrix's), OAuth's discovery documents, the page for an unknown client and the token
endpoint's OAuth error."""
OAUTH_ANSWERS = (
    "register 201",
    "consent page 200",
    "approve 302",
    "deny 302",
    "authorization_code 200",
    "authorization_code access token at /mcp 200",
    "refresh_token 200",
    "refresh_token access token at /mcp 200",
    "revoke refresh_token 200",
    "revoke refresh_token: its refresh token 400",
    "revoke access_token 200",
    "revoke access_token: its refresh token 400",
    "grants list 200",
    "grants list: the kept grant listed",
    "grant revoke 200",
    "grant revoke: its refresh token 400",
    "grant revoke: again 404",
    "grant revoke: no longer listed",
)
"""What the real OAuth cases must have answered, and their follow-ups (tests/e2e/schemathesis_hooks.py): a code
exchanged and a grant refreshed, each access token working at /mcp, and each kind of token revoking its grant; the
fuzz agent's grants listed with the one that stays, and a grant revoked through the API, then refused."""
LIMITS_ANSWERS = ("set 200", "set: read back 200", "read back 200", "read the fuzz tenant's 200")
"""What the real limits cases must have answered (tests/e2e/schemathesis_hooks.py): the scratch tenant's limits set
and read back at once, read back by a later real GET, and the fuzz tenant's own read (null: never set)."""


@pytest.fixture(scope="module")
def fuzz_key(baton: BatonServe) -> str:
    """A key with every scope (tenants:manage included) in a tenant of its own, issued by the operator key."""
    response = httpx.post(
        f"{baton.url}/v1/keys",
        json={
            "agent_id": schemathesis_hooks.FIXTURE_AGENT,
            "tenant_id": FUZZ_TENANT,
            "scopes": ["*", "tenants:manage"],
            "description": "schemathesis run of tests/e2e/test_schemathesis.py",
        },
        headers={"Authorization": f"Bearer {baton.key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["secret"])


@dataclass(frozen=True)
class Budget:
    """How a run is bounded: by cases per operation (`make test`) or by time (`make fuzz`), and its seed."""

    seed: int
    examples: int | None = None
    seconds: int | None = None

    def arguments(self) -> list[str]:
        """The CLI's bound for this budget."""
        if self.examples is not None:
            return ["--max-examples", str(self.examples)]
        return ["--max-time", str(self.seconds)]

    @property
    def timeout(self) -> int:
        """How long the CLI may run before it is stopped and the test fails."""
        return SCHEMATHESIS_TIMEOUT if self.seconds is None else self.seconds + 240

    def __str__(self) -> str:
        bound = f"{self.examples} cases per operation" if self.examples is not None else f"{self.seconds} s"
        return f"seed {self.seed}, {bound}"


def run_settings() -> Budget:
    """This run's budget: fixed cases and seed in `make test`, a time and a fresh seed in `make fuzz`."""
    fuzz_seconds = os.environ.get("BATON_FUZZ_SECONDS")
    if not fuzz_seconds:
        return Budget(seed=SEED, examples=SCHEMATHESIS_EXAMPLES)
    seed = int(os.environ.get("BATON_FUZZ_SEED") or random.SystemRandom().randrange(1, 2**31))
    return Budget(seed=seed, seconds=int(fuzz_seconds))


def run_schemathesis(
    url: str, key: str, budget: Budget, report: Path, counts: Path
) -> subprocess.CompletedProcess[str]:
    """`schemathesis run` with every check against `url`; its JSON report is written to `report`, and the hooks'
    counts (per operation and answer, of the real resources' cases, of the request headers Baton reads) to
    `counts`."""
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
        *budget.arguments(),
        "--seed",
        str(budget.seed),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "35",
        # What an answer may take is API Gateway's bound (30 s, the function's timeout 29 s), not schemathesis'
        # default 10 s: a loaded CI runner took 18.7 s once to declare a blob through `baton serve`.
        "--max-response-time",
        "29",
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
        schemathesis_hooks.COUNTS_VARIABLE: str(counts),
        schemathesis_hooks.URL_VARIABLE: url,
        schemathesis_hooks.KEY_VARIABLE: key,
    }
    return subprocess.run(
        command,
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=budget.timeout,
        check=False,
    )


def count_name(answer: str) -> str:
    """`POST /v1/keys 201` as a count's name: `post_v1_keys_201`."""
    return re.sub(r"[^a-z0-9]+", "_", answer.lower()).strip("_")


def per_operation(counts: dict[str, int]) -> dict[str, dict[str, int]]:
    """`{"METHOD path status": n}` as `{"METHOD path": {"status": n}}`."""
    grouped: dict[str, dict[str, int]] = {}
    for answer, count in counts.items():
        operation, _, status = answer.rpartition(" ")
        grouped.setdefault(operation, {})[status] = count
    return grouped


def per_operation_totals(counts: dict[str, int]) -> list[tuple[str, int]]:
    """How many cases each documented operation had (all undeclared methods as one count)."""
    declared = documented_operations()
    totals: Counter[str] = Counter()
    for operation, answers in per_operation(counts).items():
        totals[operation if operation in declared else "undeclared methods"] += sum(answers.values())
    return sorted(totals.items())


def documented_operations() -> set[str]:
    """`METHOD path` of every operation of the committed document."""
    paths: dict[str, dict[str, Any]] = json.loads(DOCUMENT.read_text(encoding="utf-8"))["paths"]
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    return {f"{method.upper()} {path}" for path, item in paths.items() for method in item if method in methods}


def test_schemathesis_finds_nothing_the_document_does_not_say(baton: BatonServe, fuzz_key: str, tmp_path: Path) -> None:
    # Given baton serve and the committed document
    budget = run_settings()
    report_path = tmp_path / "schemathesis.json"
    counts_path = tmp_path / "counts.json"
    # When schemathesis runs every check against it
    done = run_schemathesis(baton.url, fuzz_key, budget, report_path, counts_path)
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
    counts: dict[str, Any] = json.loads(counts_path.read_text(encoding="utf-8")) if counts_path.exists() else {}
    header_counts: dict[str, int] = counts.get("headers", {})
    operation_counts: dict[str, int] = counts.get("operations", {})
    real_counts: dict[str, int] = counts.get("real", {})
    resume_answers: dict[str, int] = counts.get("resume", {})
    oauth_answers: dict[str, int] = counts.get("oauth", {})
    limits_answers: dict[str, int] = counts.get("limits", {})
    record("schemathesis headers", **{count_name(name): count for name, count in header_counts.items()})
    record("schemathesis cases", **{count_name(name): count for name, count in per_operation_totals(operation_counts)})
    record(
        "schemathesis real resources", **{count_name(name): count for name, count in per_operation_totals(real_counts)}
    )
    record("schemathesis real resumes", **resume_answers)
    record("schemathesis real oauth", **{count_name(name): count for name, count in oauth_answers.items()})
    record("schemathesis real limits", **{count_name(name): count for name, count in limits_answers.items()})
    print(f"\nschemathesis {budget}: {json.dumps(report['test_cases'])}")
    print(f"request headers sent, and their answers: {json.dumps(dict(sorted(header_counts.items())))}")
    print("cases per operation, by answer:")
    declared = documented_operations()
    undeclared: Counter[str] = Counter()
    for operation, answers in sorted(per_operation(operation_counts).items()):
        if operation not in declared:
            undeclared.update(answers)
            continue
        real = per_operation(real_counts).get(operation, {})
        print(f"  {operation}: {sum(answers.values())} {answers}; to real resources: {sum(real.values())} {real}")
    print(f"  methods the document does not declare: {sum(undeclared.values())} {dict(undeclared)}")
    print(f"  resumes of the real subject, by data.status: {resume_answers}")
    print(f"  real OAuth requests and their follow-ups, by answer: {dict(sorted(oauth_answers.items()))}")
    print(f"  real limits requests and their follow-ups, by answer: {dict(sorted(limits_answers.items()))}")
    # Then it found no failure and no error (the output names each, with a curl command to reproduce it)
    assert report["complete"], output
    assert failures == 0, f"schemathesis ({budget}) found failures:\n{output}"
    assert errors == 0, f"schemathesis ({budget}) hit errors:\n{output}"
    assert report["operations"]["tested"] == report["operations"]["selected"] > 0, output
    # and it sent each request header Baton reads (they are declared, so they are fuzzed)
    for name in ("If-Match", "If-None-Match", "Idempotency-Key"):
        assert header_counts.get(f"{name} sent", 0) > 0, f"schemathesis never sent {name}: {header_counts}"
    # and every id route got past its 404 on a real resource, whose answers held what it was given
    missed = [answer for answer in REAL_SUCCESSES if real_counts.get(answer, 0) == 0]
    assert not missed, f"no case sent to a real resource answered {missed}: {real_counts}"
    assert resume_answers.get("ready", 0) > 0, f"no resume of the real subject was ready: {resume_answers}"
    # and the console's routes and whoami were run, with the answers that prove them
    assert {answer.rpartition(" ")[0] for answer in ANSWERED} <= declared, "run `make openapi`"
    unseen = [answer for answer in ANSWERED if operation_counts.get(answer, 0) == 0]
    assert not unseen, f"no case answered {unseen}: {operation_counts}"
    # and OAuth's flow went all the way, each way
    missed_oauth = [answer for answer in OAUTH_ANSWERS if oauth_answers.get(answer, 0) == 0]
    assert not missed_oauth, f"no real OAuth request answered {missed_oauth}: {oauth_answers}"
    # and a tenant's limits were set and read back, the fuzz tenant's never set, and no request was ever throttled
    missed_limits = [answer for answer in LIMITS_ANSWERS if limits_answers.get(answer, 0) == 0]
    assert not missed_limits, f"no real limits request answered {missed_limits}: {limits_answers}"
    throttled = {answer: n for answer, n in operation_counts.items() if answer.endswith(" 429")}
    assert not throttled, f"the fuzz tenant was throttled: {throttled}"
    assert not counts.get("problems"), counts["problems"]
    assert done.returncode == 0, output
