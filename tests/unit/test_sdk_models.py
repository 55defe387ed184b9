"""The SDK's pure parts: error codes to classes, answers to dataclasses, configuration, paths; and that
`baton_checkpoints.client` imports nothing of the server (it installs without pydantic or boto3)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
import respx
from pytest_socket import disable_socket, enable_socket

from baton_checkpoints.client import (
    AsyncBaton,
    AuditActor,
    Baton,
    BatonError,
    CheckpointRecord,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    QuotaExceededError,
    RevisionConflictError,
    S3Usage,
    etag_for,
)
from baton_checkpoints.client.audit import GENESIS, event_hash
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


# -- tenants' limits, usage and the audit trail -----------------------------------------------------------------

LIMITS = {
    "tenant_id": "t-1",
    "requests_per_minute": None,
    "burst": 50,
    "storage_bytes": None,
    "checkpoints": 10,
    "effective": {"requests_per_minute": 600, "burst": 50, "storage_bytes": 10**9, "checkpoints": 10},
}


def test_set_limits_sends_every_setting_and_none_as_null(router: respx.MockRouter) -> None:
    route = router.put("/v1/tenants/t-1/limits").mock(return_value=ok(LIMITS))
    with Baton(URL, "k") as sdk:
        # Given settings of which only some are named
        limits = sdk.set_limits("t-1", burst=50, checkpoints=10)
        # and the answer's settings passed back with one changed
        sdk.set_limits("t-1", **{**limits.settings(), "burst": 60})
        sdk.set_limits("t-1")
    record(SUITE, cases=3)
    # Then each body names all four settings (the PUT replaces them all: null is the stage's default)
    bodies = [json.loads(call.request.content) for call in route.calls]
    unset = dict.fromkeys(("requests_per_minute", "burst", "storage_bytes", "checkpoints"))
    assert bodies == [
        {**unset, "burst": 50, "checkpoints": 10},
        {**unset, "burst": 60, "checkpoints": 10},
        unset,
    ]
    # and the answer reads into the settings and what applies
    assert (limits.tenant_id, limits.requests_per_minute, limits.burst, limits.checkpoints) == ("t-1", None, 50, 10)
    assert (limits.effective.requests_per_minute, limits.effective.storage_bytes) == (600, 10**9)
    assert limits.raw == LIMITS


def test_set_limits_is_repeated_after_a_lost_answer(router: respx.MockRouter) -> None:
    route = router.put("/v1/tenants/t-1/limits").mock(side_effect=[httpx.ReadError("reset"), ok(LIMITS)])
    with Baton(URL, "k", sleep=lambda _: None, rng=random.Random(0)) as sdk:
        limits = sdk.set_limits("t-1", burst=50, checkpoints=10)
    record(SUITE, cases=1)
    assert route.call_count == 2
    assert limits.meta.attempts == 2
    assert route.calls[0].request.content == route.calls[1].request.content


def test_get_limits_encodes_the_tenant(router: respx.MockRouter) -> None:
    route = router.get("/v1/tenants/a%2Fb/limits").mock(return_value=ok({**LIMITS, "tenant_id": "a/b"}))
    with Baton(URL, "k") as sdk:
        limits = sdk.get_limits("a/b")
    record(SUITE, cases=1)
    assert route.call_count == 1
    assert limits.tenant_id == "a/b"


def _counts(requests: dict[str, int], s3_requests: int = 0) -> dict[str, Any]:
    return {
        "requests": requests,
        "dynamodb": {"read_units": 1.5, "write_units": 4.0},
        "s3": {
            "requests": s3_requests,
            "bytes_written": 0,
            "bytes_read": 0,
            "presigned_urls": 0,
            "presigned_upload_bytes": 0,
            "field_of_a_later_release": 1,
        },
    }


def test_usage_reads_days_and_totals(router: respx.MockRouter) -> None:
    day = {**_counts({"checkpoints": 3}, 1), "date": "2026-12-03", "stored_bytes": 10, "checkpoints": 2, "threads": 0}
    data = {"tenant_id": "t-1", "days": [day], "totals": _counts({"checkpoints": 3}, 1)}
    route = router.get("/v1/usage").mock(return_value=ok(data))
    # Given dates as `date`s, as strings, and as an aware `datetime` (its UTC date)
    late = datetime(2026, 12, 3, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    with Baton(URL, "k") as sdk:
        usage = sdk.usage(from_=date(2026, 12, 1), to="2026-12-03", tenant_id="t-1")
        sdk.usage(to=late)
        sdk.usage()
    record(SUITE, cases=3)
    # Then the query names them `from` and `to`, leaving out what was not given
    assert [dict(call.request.url.params) for call in route.calls] == [
        {"from": "2026-12-01", "to": "2026-12-03", "tenant_id": "t-1"},
        {"to": "2026-12-04"},
        {},
    ]
    # and the answer reads into days and totals
    assert usage.tenant_id == "t-1"
    (first,) = usage.days
    assert (first.date, first.requests, first.stored_bytes, first.checkpoints, first.threads) == (
        "2026-12-03",
        {"checkpoints": 3},
        10,
        2,
        0,
    )
    assert (first.dynamodb.read_units, first.dynamodb.write_units) == (1.5, 4.0)
    assert first.s3 == S3Usage(requests=1, bytes_written=0, bytes_read=0, presigned_urls=0, presigned_upload_bytes=0)
    assert usage.totals.requests == {"checkpoints": 3}
    assert usage.raw == data


def _chain(count: int) -> list[dict[str, Any]]:
    """A tenant's trail of `count` events, oldest first, each hashed as Baton hashes it."""
    events: list[dict[str, Any]] = []
    previous, previous_at = GENESIS, None
    for seq in range(1, count + 1):
        event: dict[str, Any] = {
            "seq": seq,
            "action": "key.issued",
            "at": f"2026-12-03T09:00:0{seq}.000Z",
            "request_id": f"r{seq}",
            "actor": {"key_id": "key_a", "agent_id": "admin"} if seq > 1 else {"key_id": None, "agent_id": None},
            "target": {"type": "key", "id": f"key_{seq}"},
            "outcome": "succeeded",
            "details": {"scopes": ["*"], "note": "é"},
            "prev_hash": previous,
            "prev_at": previous_at,
        }
        event["hash"] = event_hash(event)
        events.append(event)
        previous, previous_at = event["hash"], event["at"]
    return events


def _serve_trail(router: respx.MockRouter, events: list[dict[str, Any]], page: int) -> respx.Route:
    """`GET /v1/audit` answering `events` newest first, `page` a page, the head being the newest."""
    newest = events[-1]
    head = {"seq": newest["seq"], "hash": newest["hash"], "at": newest["at"]}
    ordered = events[::-1]

    def answer(request: httpx.Request) -> httpx.Response:
        start = int(request.url.params.get("cursor", "0"))
        end = start + min(page, int(request.url.params.get("limit", "50")))
        cursor = str(end) if end < len(ordered) else None
        meta = {"request_id": "r", "next_cursor": cursor, "head": head}
        return httpx.Response(200, json={"data": ordered[start:end], "meta": meta})

    return router.get("/v1/audit").mock(side_effect=answer)


def test_an_audit_page_keeps_each_event_as_sent_and_the_head(router: respx.MockRouter) -> None:
    events = _chain(3)
    route = _serve_trail(router, events, page=2)
    with Baton(URL, "k") as sdk:
        page = sdk.list_audit(action="key.issued", from_="2026-12-03T09:00:00Z", to=datetime(2026, 12, 4, tzinfo=UTC))
        every = list(sdk.iter_audit(page_size=2))
        with pytest.raises(ValueError, match="time zone"):
            sdk.list_audit(from_=datetime(2026, 12, 3))  # a naive time: refused before anything is sent
    record(SUITE, cases=3)
    assert dict(route.calls[0].request.url.params) == {
        "action": "key.issued",
        "from": "2026-12-03T09:00:00Z",
        "to": "2026-12-04T00:00:00+00:00",
    }
    assert route.call_count == 3
    # The page: newest first, typed, with the event as sent and the tenant's head
    assert [event.seq for event in page.items] == [3, 2]
    assert page.next_cursor == "2"
    newest = page.items[0]
    assert (newest.action, newest.actor, newest.target, newest.outcome) == (
        "key.issued",
        AuditActor(key_id="key_a", agent_id="admin"),
        {"type": "key", "id": "key_3"},
        "succeeded",
    )
    assert (newest.prev_hash, newest.prev_at, newest.hash) == (events[1]["hash"], events[1]["at"], events[2]["hash"])
    assert newest.raw == events[2]
    assert (page.head.seq, page.head.hash, page.head.at) == (3, events[2]["hash"], events[2]["at"])
    # The iteration follows next_cursor to the oldest
    assert [event.seq for event in every] == [3, 2, 1]
    assert every[-1].actor == AuditActor()


def test_verify_audit_reads_every_page_and_finds_an_altered_event(router: respx.MockRouter) -> None:
    events = _chain(5)
    _serve_trail(router, events, page=2)
    with Baton(URL, "k") as sdk:
        whole = sdk.verify_audit(page_size=2)
    altered = _chain(5)
    altered[2]["details"] = {"scopes": ["checkpoints:read"], "note": "é"}
    router.routes.clear()
    _serve_trail(router, altered, page=2)

    async def scenario() -> list[str]:
        async with AsyncBaton(URL, "k") as sdk:
            return await sdk.verify_audit()

    # asyncio's event loop opens a socketpair to wake itself: sockets for the loop only (respx answers every request)
    enable_socket()
    try:
        broken = asyncio.run(scenario())
    finally:
        disable_socket()
    record(SUITE, cases=2)
    assert whole == []
    assert broken == ["event 3 was altered: its hash is not that of its content"]
