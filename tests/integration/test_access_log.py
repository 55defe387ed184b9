"""What the api function logs, read from the JSON lines its logger writes: one access line per request, the request
id on every line, and never a secret or a state."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest

from tests import proof_counts
from tests.conftest import Lines
from tests.integration.conftest import OPERATOR_SECRET
from tests.integration.driver import ApiDriver, Result


def request_id_of(answer: Result) -> str:
    request_id: str = answer.body["meta"]["request_id"]
    return request_id


def test_each_request_writes_one_access_line_with_its_request_id_and_caller(
    api: ApiDriver, services: Any, logged: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given states and secrets that a careless log would show
    marker = f"access-log-state-{uuid.uuid4().hex}"
    state = {"note": marker}
    created = api.invoke("create_key", body={"agent_id": "planner", "scopes": ["checkpoints:read"]})
    secret = created.data["secret"]
    # When requests of every outcome are made
    answers = {
        "created": created,
        "saved": api.invoke(
            "save_checkpoint",
            body={"subject_id": "s", "kind": "task_state", "state": state},
            headers={"idempotency-key": None},
        ),
        "looked up": api.invoke("lookup_checkpoint", query={"subject_id": "s", "kind": "task_state"}),
        "read by the new key": api.invoke("list_keys", secret=secret),
        "unknown key": api.invoke(
            "lookup_checkpoint", query={"subject_id": "s", "kind": "task_state"}, secret="btn_nope"
        ),
        "invalid": api.invoke("save_checkpoint", body={"subject_id": "s", "kind": marker, "state": state}),
        "unknown path": api.invoke("health", path=f"/v1/nothing-{marker}"),
    }

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("simulated defect")

    monkeypatch.setattr(services.checkpoints, "get", broken)
    answers["defect"] = api.invoke("lookup_checkpoint", query={"subject_id": "s", "kind": "task_state"})
    lines = logged()
    # Then each request wrote exactly one access line, under its own request id, with what it asked and got
    expected = {
        "created": ("POST", "/v1/keys", 201, "acme"),
        "saved": ("POST", "/v1/checkpoints", 201, "acme"),
        "looked up": ("GET", "/v1/checkpoints", 200, "acme"),
        "read by the new key": ("GET", "/v1/keys", 403, "acme"),
        "unknown key": ("GET", "/v1/checkpoints", 401, None),
        "invalid": ("POST", "/v1/checkpoints", 400, "acme"),
        "unknown path": ("GET", None, 404, None),
        "defect": ("GET", "/v1/checkpoints", 500, "acme"),
    }
    for name, answer in answers.items():
        method, route, status, tenant = expected[name]
        assert answer.status == status, (name, answer.raw_body)
        access = [r for r in lines if r["message"] == "request" and r["request_id"] == request_id_of(answer)]
        assert len(access) == 1, (name, lines)
        assert (access[0]["method"], access[0].get("route"), access[0]["status"]) == (method, route, status), name
        assert access[0].get("tenant_id") == tenant, (name, access[0])
        assert isinstance(access[0]["duration_ms"], float | int)
    assert lines[0].get("key_id") == "key_" + "a" * 32  # the operator's key, as conftest stored it
    # And every line, the defect's ERROR line included, names the request it belongs to
    assert all(isinstance(r.get("request_id"), str) and r["request_id"] for r in lines), lines
    defect = [r for r in lines if r["level"] == "ERROR"]
    assert [r["request_id"] for r in defect] == [request_id_of(answers["defect"])]
    # And no line holds a secret, nor (below ERROR) the state
    text = "\n".join(json.dumps(r) for r in lines)
    for known in (OPERATOR_SECRET, secret, "btn_nope"):
        assert known not in text
    assert not [r for r in lines if r["level"] in ("DEBUG", "INFO", "WARNING") and marker in json.dumps(r)]
    proof_counts.record("log audit", lines=len(lines), secrets_checked=3)


def test_a_line_logged_between_requests_names_no_request(api: ApiDriver, logged: Lines) -> None:
    from baton_checkpoints.observability import logger

    # Given a request that was served
    assert api.invoke("health").status == 200
    # When something is logged after it
    logger().info("between requests")
    # Then that line carries no request id: the keys of a request do not outlive it
    after = [r for r in logged() if r["message"] == "between requests"]
    assert len(after) == 1
    assert "request_id" not in after[0]


def test_another_librarys_warning_is_a_json_line_with_the_request_id_where_nothing_else_formats_it() -> None:
    # Given a process with no logging set up (a `baton serve` container), serving a request
    script = (
        "import logging\n"
        "from baton_checkpoints.observability import logger, request_logging\n"
        "with request_logging('req-123', None):\n"
        "    logger().info('own line')\n"
        "    logging.getLogger('botocore.retries').warning('a library warning')\n"
        "    logging.getLogger('botocore.retries').info('a library detail')\n"
    )
    # When a library logs a warning and an info line during it
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    # Then both Baton's line and the warning are JSON with the request id, once each; the info stays quiet
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["message"], r["request_id"]) for r in lines] == [
        ("own line", "req-123"),
        ("a library warning", "req-123"),
    ]
    assert done.stderr == ""


def test_a_broken_log_stream_fails_no_request(api: ApiDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a log stream that cannot be written (a closed pipe)
    from baton_checkpoints.observability import logger

    class Broken:
        def write(self, _: str) -> int:
            raise BrokenPipeError("the pipe is closed")

        def flush(self) -> None:
            raise BrokenPipeError("the pipe is closed")

    handler = logger().logger_handler
    monkeypatch.setattr(handler, "stream", Broken())
    # When a request is served, then it is answered all the same
    assert api.invoke("health").status == 200


def test_the_log_level_turns_the_access_line_off(api: ApiDriver, logged: Lines) -> None:
    # Given the service logger at WARNING (POWERTOOLS_LOG_LEVEL=WARNING)
    from baton_checkpoints.observability import logger

    previous = logger().log_level
    logger().setLevel("WARNING")
    try:
        # When a request is served
        answer = api.invoke("health")
    finally:
        logger().setLevel(previous)
    # Then it writes no access line
    assert answer.status == 200
    assert not [r for r in logged() if r["message"] == "request"]


def test_a_dependency_override_besides_the_services_sends_routes_through_powertools_chain(api: ApiDriver) -> None:
    # Given a test's override of the current call's dependency (the direct path applies `wired` alone)
    from baton_checkpoints.api.resolver import CALL_CONTEXT, Call, current_call
    from baton_checkpoints.handlers.api import app

    def overridden() -> Call:
        found: Call = app.context[CALL_CONTEXT]
        return found

    app.dependency_overrides[current_call] = overridden
    try:
        # When a route is called, then it answers through the chain, which applies the override
        answer = api.invoke("whoami")
    finally:
        app.dependency_overrides.pop(current_call)
    assert answer.status == 200, answer.raw_body
