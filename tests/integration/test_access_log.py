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


HEALTH_IN_A_FRESH_PROCESS = """
import json, sys
from baton_checkpoints.handlers.api import handler
event = json.loads(open(sys.argv[1]).read())
status = handler(event, None)["statusCode"]
print(json.dumps({"status": status, "logging": "aws_lambda_powertools.logging.logger" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("levels", "written"),
    [
        ({}, True),
        ({"POWERTOOLS_LOG_LEVEL": "WARNING"}, False),
        ({"LOG_LEVEL": "ERROR"}, False),
        ({"POWERTOOLS_LOG_LEVEL": "DEBUG"}, True),
        # Lambda's advanced logging controls come first, as powertools reads them
        ({"AWS_LAMBDA_LOG_LEVEL": "WARN", "POWERTOOLS_LOG_LEVEL": "DEBUG"}, False),
        ({"AWS_LAMBDA_LOG_LEVEL": "DEBUG", "POWERTOOLS_LOG_LEVEL": "ERROR"}, True),
    ],
)
def test_a_request_that_logs_nothing_else_writes_its_access_line_at_the_configured_level_without_the_logger(
    levels: dict[str, str], written: bool
) -> None:
    # Given a fresh process (a cold container) with the log level set as Lambda and powertools read it
    from tests.integration.driver import EVENTS

    env = {"PATH": "", "PYTHONPATH": ":".join(p for p in sys.path if p), "BATON_TABLE_NAME": "t", **levels}
    # When it serves a request that logs nothing but its access line
    done = subprocess.run(
        [sys.executable, "-c", HEALTH_IN_A_FRESH_PROCESS, str(EVENTS / "health.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    *lines, outcome = done.stdout.splitlines()
    # Then the access line is written when the level lets INFO through, and powertools' logging is never imported
    assert json.loads(outcome) == {"status": 200, "logging": False}
    access = [json.loads(line) for line in lines if '"message":"request"' in line]
    assert len(access) == (1 if written else 0), done.stdout
    if written:
        assert access[0]["route"] == "/v1/health"
        assert access[0]["request_id"]


def test_another_librarys_warning_before_any_line_of_batons_is_a_json_line_with_the_request_id() -> None:
    # Given a process with no logging set up, where nothing of Baton's has logged yet (the service logger unmade)
    script = (
        "import logging\n"
        "from baton_checkpoints.observability import request_logging\n"
        "with request_logging('req-456', 'lambda-1'):\n"
        "    logging.getLogger('botocore.retries').warning('a library warning')\n"
    )
    # When a library logs a warning during a request
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    # Then it is a JSON line with the request's ids
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["message"], r["request_id"], r["lambda_request_id"]) for r in lines] == [
        ("a library warning", "req-456", "lambda-1")
    ]
    assert done.stderr == ""
