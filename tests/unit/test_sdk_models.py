"""The SDK's pure parts: error codes to classes, answers to dataclasses, configuration, paths; and that
`baton_checkpoints.client` imports nothing of the server (it installs without pydantic or boto3)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from baton_checkpoints.client import (
    Baton,
    BatonError,
    CheckpointRecord,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    QuotaExceededError,
    RevisionConflictError,
    etag_for,
)
from baton_checkpoints.client.errors import ERRORS_BY_CODE, error_from_answer, parse_retry_after
from baton_checkpoints.client.models import resume_from
from tests.proof_counts import record
from tests.unit.test_sdk_retries import RECORD, URL, ok

SUITE = "sdk models (unit)"
CONTRACT_CODES = {
    "VALIDATION_ERROR": 400,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "QUOTA_EXCEEDED": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "REVISION_CONFLICT": 409,
    "CHECKPOINT_CLOSED": 409,
    "LEASE_HELD": 409,
    "LEASE_LOST": 409,
    "IDEMPOTENCY_IN_PROGRESS": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "IDEMPOTENCY_KEY_REUSED": 422,
    "RATE_LIMITED": 429,
    "UNAVAILABLE": 503,
    "INTERNAL": 500,
    "RESPONSE_TOO_LARGE": 500,
}
"""api-v1.md's table of error codes, and RESPONSE_TOO_LARGE (docs/api.md: an answer Lambda would not carry)."""


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as mock:
        yield mock


def test_every_contract_code_has_its_own_class() -> None:
    assert set(ERRORS_BY_CODE) == set(CONTRACT_CODES)
    assert len(set(ERRORS_BY_CODE.values())) == len(CONTRACT_CODES)
    for code, status in CONTRACT_CODES.items():
        body = {"error": {"code": code, "message": "m.", "details": {"x": 1}}, "meta": {"request_id": "r"}}
        error = error_from_answer(status, body, {}, "r")
        assert type(error) is ERRORS_BY_CODE[code]
        assert (error.code, error.status, error.message, dict(error.details), error.request_id) == (
            code,
            status,
            "m.",
            {"x": 1},
            "r",
        )
        assert error.gateway is False
        assert isinstance(error, ConflictError) == (status == 409)
    record(SUITE, codes=len(CONTRACT_CODES))


def test_a_quota_refusal_is_a_forbidden_error_that_says_which_quota() -> None:
    details = {"quota": "storage_bytes", "limit": 1000, "used": 990}
    body = {"error": {"code": "QUOTA_EXCEEDED", "message": "m.", "details": details}, "meta": {"request_id": "r"}}
    error = error_from_answer(403, body, {}, "r")
    assert isinstance(error, QuotaExceededError)
    assert isinstance(error, ForbiddenError)
    assert (error.quota, error.limit, error.used) == ("storage_bytes", 1000, 990)


def test_an_unknown_code_falls_back_on_the_status() -> None:
    error = error_from_answer(409, {"error": {"code": "SOMETHING_NEW", "message": "m."}}, {}, None)
    assert type(error) is ConflictError
    assert error.code == "SOMETHING_NEW"
    plain = error_from_answer(418, None, {}, None, "")
    assert type(plain) is BatonError
    record(SUITE, cases=2)


def test_retry_after_parsing() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    record(SUITE, cases=5)


def test_conflict_details_are_read() -> None:
    error = error_from_answer(
        409, {"error": {"code": "REVISION_CONFLICT", "message": "m.", "details": {"current_revision": 0}}}, {}, None
    )
    assert isinstance(error, RevisionConflictError)
    assert error.current_revision == 0
    record(SUITE, cases=1)


def test_a_record_parses_into_typed_fields() -> None:
    lease = {"holder": "w1", "expires_at": "2026-12-01T00:01:00.000Z"}
    resource = {"name": "f", "blob_id": "blob_" + "c" * 32, "sha256": "0" * 64, "size": 3, "media_type": "text/plain"}
    data = {
        **RECORD,
        "lease": lease,
        "source": {"host": "h"},
        "resources": [resource],
        "state": {"a": [1]},
        "field_of_a_later_release": True,
    }
    ready = resume_from({"status": "ready", "checkpoint": data, "pending_operations": [{"kind": "x"}]}, _meta())
    checkpoint = ready.checkpoint
    assert isinstance(checkpoint, CheckpointRecord)
    assert checkpoint.lease is not None
    assert (checkpoint.lease.holder, checkpoint.state, checkpoint.source and checkpoint.source.host) == (
        "w1",
        {"a": [1]},
        "h",
    )
    assert checkpoint.resources[0].to_json() == resource
    assert checkpoint.raw["field_of_a_later_release"] is True
    assert ready.pending_operations == ({"kind": "x"},)
    record(SUITE, cases=1)


def _meta() -> Any:
    from baton_checkpoints.client import ResponseMeta

    return ResponseMeta(status=200)


def test_configuration_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, router: respx.MockRouter) -> None:
    monkeypatch.setenv("BATON_URL", URL + "/")
    monkeypatch.setenv("BATON_API_KEY", "btn_from_env")
    route = router.get("/v1/health").mock(return_value=ok({"status": "ok", "version": "0.1.0"}))
    with Baton() as sdk:
        sdk.health()
    with Baton(api_key="btn_given") as sdk:
        sdk.health()
    record(SUITE, cases=2)
    assert [call.request.headers["authorization"] for call in route.calls] == [
        "Bearer btn_from_env",
        "Bearer btn_given",
    ]
    assert route.calls[0].request.headers["user-agent"].startswith("baton-python/")


def test_path_parameters_are_percent_encoded(router: respx.MockRouter) -> None:
    route = router.get("/v1/subjects/a%2Fb%3Fc%25d%20e/checkpoints").mock(
        return_value=httpx.Response(200, json={"data": [], "meta": {"request_id": "r", "next_cursor": None}})
    )
    with Baton(URL, "k") as sdk:
        page = sdk.list_checkpoints("a/b?c%d e", kind="cursor")
    record(SUITE, cases=1)
    assert (page.items, page.next_cursor) == ([], None)
    assert route.calls[0].request.url.params["kind"] == "cursor"


def test_a_success_without_data_is_an_unexpected_response(router: respx.MockRouter) -> None:
    router.get("/v1/health").mock(return_value=httpx.Response(200, text="ok"))
    with Baton(URL, "k", sleep=lambda _: None, rng=random.Random(0)) as sdk, pytest.raises(BatonError) as raised:
        sdk.health()
    record(SUITE, cases=1)
    assert raised.value.code == "UNEXPECTED_RESPONSE"
    assert not isinstance(raised.value, NotFoundError)


def test_etag_for_builds_the_weak_tag() -> None:
    assert etag_for("ckpt_" + "a" * 32, 3) == 'W/"ckpt_' + "a" * 32 + ':3"'
    record(SUITE, cases=1)


def test_the_client_imports_nothing_of_the_server() -> None:
    server_packages = "('pydantic', 'boto3', 'botocore', 'aws_lambda_powertools')"
    probe = (
        "import sys, baton_checkpoints.client; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {server_packages}"
        " or (m.startswith('baton_checkpoints.') and not m.startswith('baton_checkpoints.client'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    record(SUITE, cases=1)
    assert loaded == "[]"


def test_a_call_without_a_key_is_a_local_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, router: respx.MockRouter
) -> None:
    from baton_checkpoints.client import MissingApiKeyError, UnauthenticatedError
    from baton_checkpoints.langgraph import BatonSaver

    monkeypatch.delenv("BATON_API_KEY", raising=False)
    health = router.get("/v1/health").mock(return_value=ok({"status": "ok", "version": "0.1.0"}))
    anything = router.route().mock(return_value=ok({}))
    # Given no key, neither given nor in the environment
    with Baton(URL) as sdk:
        # When a route that needs a key is called, Then it fails here, naming the variable to set
        with pytest.raises(MissingApiKeyError, match="BATON_API_KEY") as raised:
            sdk.lookup("ticket-1", "task_state")
        # and the public routes still answer without one
        sdk.health()
    with BatonSaver(URL) as saver, pytest.raises(MissingApiKeyError, match="BATON_API_KEY"):
        saver.get_tuple({"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}})
    record(SUITE, cases=3)
    # It is an authentication error (what a 401 raises), with no status: nothing was sent
    assert isinstance(raised.value, UnauthenticatedError)
    assert raised.value.status == 0
    assert raised.value.code == "MISSING_API_KEY"
    assert health.call_count == 1
    assert anything.call_count == 0
