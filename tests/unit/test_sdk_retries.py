"""The SDK's retry loop against respx: what a live `baton serve` cannot be made to answer (429, 503, API Gateway's own
5xx bodies, `Retry-After`), and the rules of when a request may be repeated. No test sleeps: the sleep is injected."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
from pytest_socket import disable_socket, enable_socket

from baton_checkpoints.client import (
    AsyncBaton,
    Baton,
    BatonConnectionError,
    CheckpointClosedError,
    IdempotencyKeyReusedError,
    InternalError,
    LeaseHeldError,
    PayloadTooLargeError,
    RateLimitedError,
    RetryPolicy,
    RevisionConflictError,
    UnavailableError,
    ValidationError,
)
from tests.proof_counts import record
from tests.unit.conftest import Sleeps

SUITE = "sdk retries (unit)"
URL = "https://baton.test"
CKPT = "ckpt_" + "a" * 32
SAVED = {
    "checkpoint_id": CKPT,
    "subject_id": "s",
    "agent_id": "a",
    "kind": "task_state",
    "revision": 1,
    "status": "active",
    "state_hash": "0" * 64,
    "state_bytes": 2,
    "expires_at": "2026-12-02T00:00:00.000Z",
    "updated": False,
}
RECORD = {
    **{key: value for key, value in SAVED.items() if key != "updated"},
    "format": None,
    "resources": [],
    "source": None,
    "ttl_seconds": 86400,
    "keep_revisions": 0,
    "lease": None,
    "created_at": "2026-12-01T00:00:00.000Z",
    "updated_at": "2026-12-01T00:00:00.000Z",
    "state": {},
}


def ok(data: Any, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"data": data, "meta": {"request_id": "req-ok"}}, headers=headers)


def problem(
    status: int, code: str, details: dict[str, Any] | None = None, *, retry_after: str | None = None
) -> httpx.Response:
    error: dict[str, Any] = {"code": code, "message": f"{code} happened."}
    if details is not None:
        error["details"] = details
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return httpx.Response(status, json={"error": error, "meta": {"request_id": "req-err"}}, headers=headers)


def gateway(status: int, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"message": message}, headers={"apigw-requestid": "gw-1", **headers})


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as mock:
        yield mock


@pytest.fixture
def client(sleeps: Sleeps) -> Iterator[Baton]:
    with Baton(URL, "btn_test", sleep=sleeps, rng=random.Random(7)) as sdk:
        yield sdk


def keys_sent(route: respx.Route) -> list[str | None]:
    return [call.request.headers.get("idempotency-key") for call in route.calls]


# -- Retry-After and backoff -----------------------------------------------------------------------------------


def test_retry_after_in_seconds_is_waited_for(router: respx.MockRouter, client: Baton, sleeps: Sleeps) -> None:
    route = router.post("/v1/checkpoints").mock(
        side_effect=[problem(503, "UNAVAILABLE", retry_after="2"), ok(SAVED, 201)]
    )
    saved = client.save("s", "task_state", {})
    record(SUITE, cases=1)
    assert route.call_count == 2
    assert len(sleeps) == 1
    assert 2.0 <= sleeps[0] <= 2.0 + RetryPolicy().backoff_base
    assert (saved.revision, saved.meta.attempts) == (1, 2)


def test_retry_after_as_an_http_date_is_waited_for(router: respx.MockRouter, client: Baton, sleeps: Sleeps) -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    router.get(f"/v1/checkpoints/{CKPT}").mock(side_effect=[problem(429, "RATE_LIMITED", retry_after=when), ok(RECORD)])
    client.get(CKPT)
    record(SUITE, cases=1)
    assert len(sleeps) == 1
    assert 3.0 <= sleeps[0] <= 5.0 + RetryPolicy().backoff_base


def test_a_retry_after_past_the_policys_limit_is_raised_at_once(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps
) -> None:
    route = router.post("/v1/blobs").mock(return_value=problem(503, "UNAVAILABLE", retry_after="3600"))
    with pytest.raises(UnavailableError) as raised:
        client.declare_blob("0" * 64, 1, "text/plain")
    record(SUITE, cases=1)
    assert route.call_count == 1
    assert sleeps == []
    assert raised.value.retry_after == 3600


def test_retries_are_bounded_and_back_off_exponentially(router: respx.MockRouter, sleeps: Sleeps) -> None:
    policy = RetryPolicy(max_attempts=5, backoff_base=1.0, backoff_max=3.0)
    route = router.get(f"/v1/checkpoints/{CKPT}").mock(return_value=gateway(504, "Endpoint request timed out"))
    with (
        Baton(URL, "k", retry=policy, sleep=sleeps, rng=random.Random(3)) as sdk,
        pytest.raises(UnavailableError) as raised,
    ):
        sdk.get(CKPT)
    record(SUITE, cases=1)
    assert route.call_count == 5
    assert len(sleeps) == 4
    # Full jitter under a doubling bound, capped: 1, 2, 3, 3
    assert all(0 <= wait <= bound for wait, bound in zip(sleeps, [1.0, 2.0, 3.0, 3.0], strict=True))
    assert raised.value.gateway is True
    assert raised.value.request_id == "gw-1"


def test_one_attempt_means_no_retry(router: respx.MockRouter, sleeps: Sleeps) -> None:
    route = router.get("/v1/health").mock(return_value=problem(503, "UNAVAILABLE"))
    with Baton(URL, retry=RetryPolicy(max_attempts=1), sleep=sleeps) as sdk, pytest.raises(UnavailableError):
        sdk.health()
    record(SUITE, cases=1)
    assert (route.call_count, sleeps) == (1, [])


# -- API Gateway's own bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message", "expected", "retried"),
    [
        (413, "Request Entity Too Large", PayloadTooLargeError, False),
        (429, "Too Many Requests", RateLimitedError, True),
        (500, "Internal Server Error", InternalError, True),
        (502, "Bad Gateway", UnavailableError, True),
        (503, "Service Unavailable", UnavailableError, True),
        (504, "Endpoint request timed out", UnavailableError, True),
    ],
)
def test_api_gateway_bodies_map_to_typed_errors(
    router: respx.MockRouter,
    client: Baton,
    sleeps: Sleeps,
    status: int,
    message: str,
    expected: type[Exception],
    retried: bool,
) -> None:
    route = router.post("/v1/checkpoints").mock(return_value=gateway(status, message))
    with pytest.raises(expected) as raised:
        client.save("s", "task_state", {})
    record(SUITE, cases=1)
    error = raised.value
    assert type(error) is expected
    assert (error.status, error.message, error.gateway, error.request_id) == (status, message, True, "gw-1")  # type: ignore[attr-defined]
    assert route.call_count == (RetryPolicy().max_attempts if retried else 1)
    # Every attempt of the save carried the same Idempotency-Key
    assert len(set(keys_sent(route))) == 1


def test_a_gateway_page_that_is_not_json_still_maps_by_status(router: respx.MockRouter, client: Baton) -> None:
    router.get("/v1/health").mock(return_value=httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(UnavailableError) as raised:
        client.health()
    record(SUITE, cases=1)
    assert raised.value.message == "<html>Bad Gateway</html>"


# -- what may be repeated --------------------------------------------------------------------------------------


def test_the_idempotency_key_is_reused_across_retries(router: respx.MockRouter, client: Baton) -> None:
    route = router.post("/v1/checkpoints").mock(
        side_effect=[
            problem(503, "UNAVAILABLE", retry_after="1"),
            httpx.ReadError("connection reset"),
            gateway(500, "Internal Server Error"),
            ok(SAVED, 201, **{"Idempotent-Replayed": "true"}),
            ok(SAVED, 201),
        ]
    )
    saved = client.save("s", "task_state", {})
    client.save("s", "task_state", {}, idempotency_key="my-own-key")
    record(SUITE, cases=2)
    sent = keys_sent(route)
    assert len(sent) == 5
    assert sent[0]
    assert len(set(sent[:4])) == 1
    assert sent[4] == "my-own-key"
    assert saved.meta.idempotency_key == sent[0]
    assert (saved.meta.replayed, saved.meta.attempts) == (True, 4)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (problem(400, "VALIDATION_ERROR", {"errors": [{"pointer": "/kind", "message": "bad"}]}), ValidationError),
        (problem(409, "REVISION_CONFLICT", {"current_revision": 7}), RevisionConflictError),
        (problem(409, "CHECKPOINT_CLOSED"), CheckpointClosedError),
        (problem(409, "LEASE_HELD", {"lease_expires_at": "2026-12-01T00:00:00.000Z"}), LeaseHeldError),
        (problem(422, "IDEMPOTENCY_KEY_REUSED"), IdempotencyKeyReusedError),
        (problem(500, "INTERNAL"), InternalError),
    ],
)
def test_client_errors_and_baton_defects_are_never_retried(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps, answer: httpx.Response, expected: type[Exception]
) -> None:
    route = router.post("/v1/checkpoints").mock(return_value=answer)
    with pytest.raises(expected):
        client.save("s", "task_state", {})
    record(SUITE, cases=1)
    assert (route.call_count, sleeps) == (1, [])


def test_idempotency_in_progress_is_retried_with_the_same_key(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps
) -> None:
    route = router.post("/v1/checkpoints").mock(side_effect=[problem(409, "IDEMPOTENCY_IN_PROGRESS"), ok(SAVED, 201)])
    client.save("s", "task_state", {})
    record(SUITE, cases=1)
    assert route.call_count == 2
    assert len(set(keys_sent(route))) == 1
    assert len(sleeps) == 1


def test_key_creation_is_not_repeated_when_its_outcome_is_unknown(router: respx.MockRouter, client: Baton) -> None:
    route = router.post("/v1/keys").mock(side_effect=[httpx.ReadError("reset"), ok({})])
    with pytest.raises(BatonConnectionError) as lost:
        client.create_key("a1", ["checkpoints:read"])
    assert lost.value.outcome_unknown
    assert route.call_count == 1
    assert keys_sent(route) == [None]  # POST /v1/keys takes no Idempotency-Key
    route.side_effect = [gateway(504, "Endpoint request timed out"), ok({})]
    route.reset()
    with pytest.raises(UnavailableError):
        client.create_key("a1", ["checkpoints:read"])
    record(SUITE, cases=2)
    assert route.call_count == 1


def test_key_creation_is_repeated_when_nothing_happened(router: respx.MockRouter, client: Baton) -> None:
    created = {
        "key_id": "key_1",
        "tenant_id": "t",
        "agent_id": "a1",
        "scopes": ["checkpoints:read"],
        "not_before": None,
        "expires_at": None,
        "description": None,
        "created_at": "2026-12-01T00:00:00.000Z",
        "secret": "btn_secret",
    }
    route = router.post("/v1/keys").mock(
        side_effect=[httpx.ConnectError("refused"), gateway(429, "Too Many Requests"), ok(created, 201)]
    )
    key = client.create_key("a1", ["checkpoints:read"])
    record(SUITE, cases=1)
    assert route.call_count == 3
    assert key.secret == "btn_secret"


def test_connection_errors_are_bounded_and_typed(router: respx.MockRouter, client: Baton, sleeps: Sleeps) -> None:
    route = router.get("/v1/health").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(BatonConnectionError) as failed:
        client.health()
    record(SUITE, cases=1)
    assert route.call_count == RetryPolicy().max_attempts
    assert len(sleeps) == RetryPolicy().max_attempts - 1
    assert failed.value.outcome_unknown is False
    assert isinstance(failed.value.__cause__, httpx.ConnectError)


# -- a 404 right after a create, ETags, deletes after a lost answer --------------------------------------------


def test_a_404_on_a_checkpoint_just_created_is_retried_once(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps
) -> None:
    router.post("/v1/checkpoints").mock(return_value=ok(SAVED, 201))
    by_id = router.get(f"/v1/checkpoints/{CKPT}").mock(side_effect=[problem(404, "NOT_FOUND"), ok(RECORD)])
    other = router.get("/v1/checkpoints/ckpt_" + "b" * 32).mock(return_value=problem(404, "NOT_FOUND"))
    client.save("s", "task_state", {})
    found = client.get(CKPT)
    assert (found.checkpoint_id, by_id.call_count, sleeps) == (CKPT, 2, [RetryPolicy().not_found_pause])
    # Once only, and only for ids this client created
    by_id.side_effect = [problem(404, "NOT_FOUND"), problem(404, "NOT_FOUND"), ok(RECORD)]
    by_id.reset()
    with pytest.raises(Exception, match="NOT_FOUND"):
        client.get(CKPT)
    with pytest.raises(Exception, match="NOT_FOUND"):
        client.get("ckpt_" + "b" * 32)
    record(SUITE, cases=3)
    assert (by_id.call_count, other.call_count) == (2, 1)


def test_a_304_answers_the_cached_record(router: respx.MockRouter, client: Baton) -> None:
    etag = f'W/"{CKPT}:1"'
    route = router.get(f"/v1/checkpoints/{CKPT}").mock(
        side_effect=[ok(RECORD, ETag=etag), httpx.Response(304, headers={"ETag": etag, "apigw-requestid": "r2"})]
    )
    first = client.get(CKPT)
    second = client.get(CKPT)
    record(SUITE, cases=1)
    assert "if-none-match" not in route.calls[0].request.headers
    assert route.calls[1].request.headers["if-none-match"] == etag
    assert second == first
    assert (second.meta.status, second.meta.request_id, first.meta.status) == (304, "r2", 200)


def test_a_record_whose_download_urls_expire_soon_is_not_revalidated(router: respx.MockRouter, client: Baton) -> None:
    soon = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + 30))
    resource = {"name": "f", "blob_id": "blob_" + "c" * 32, "sha256": "0" * 64, "size": 1, "media_type": "text/plain"}
    data = {**RECORD, "resources": [{**resource, "download_url": "https://s3.test/x", "download_expires_at": soon}]}
    route = router.get(f"/v1/checkpoints/{CKPT}").mock(return_value=ok(data, ETag=f'W/"{CKPT}:1"'))
    client.get(CKPT)
    client.get(CKPT)
    record(SUITE, cases=1)
    assert "if-none-match" not in route.calls[1].request.headers


@pytest.mark.parametrize("lost", [httpx.ReadError("reset"), gateway(504, "Endpoint request timed out")])
def test_an_unconditional_delete_whose_answer_was_lost_is_done_on_a_404(
    router: respx.MockRouter, client: Baton, lost: Any
) -> None:
    route = router.delete(f"/v1/checkpoints/{CKPT}").mock(side_effect=[lost, problem(404, "NOT_FOUND")])
    deleted = client.delete(CKPT)
    assert (deleted.deleted, deleted.confirmed, route.call_count) == (True, False, 2)
    # Conditional: whether If-Match held is unknowable, so the 404 is raised
    route.side_effect = [lost, problem(404, "NOT_FOUND")]
    with pytest.raises(Exception, match="NOT_FOUND"):
        client.delete(CKPT, if_match=3)
    record(SUITE, cases=2)
    assert route.calls[-1].request.headers["if-match"] == f'W/"{CKPT}:3"'


def test_a_plain_404_on_delete_is_raised(router: respx.MockRouter, client: Baton) -> None:
    router.delete(f"/v1/checkpoints/{CKPT}").mock(return_value=problem(404, "NOT_FOUND"))
    with pytest.raises(Exception, match="NOT_FOUND"):
        client.delete(CKPT)
    record(SUITE, cases=1)


# -- the async client runs the same loop -----------------------------------------------------------------------


def test_the_async_client_retries_with_the_same_rules(router: respx.MockRouter) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    route = router.post("/v1/checkpoints").mock(
        side_effect=[httpx.ReadError("reset"), problem(429, "RATE_LIMITED", retry_after="1"), ok(SAVED, 201)]
    )

    async def scenario() -> Any:
        async with AsyncBaton(URL, "k", sleep=sleep, rng=random.Random(1)) as sdk:
            return await sdk.save("s", "task_state", {})

    # asyncio's event loop opens a socketpair to wake itself: allow sockets for the loop only; respx still answers
    # every request (an unmatched one raises), so nothing reaches a network.
    enable_socket()
    try:
        saved = asyncio.run(scenario())
    finally:
        disable_socket()
    record(SUITE, cases=1)
    assert (saved.meta.attempts, route.call_count, len(waits)) == (3, 3, 2)
    assert 1.0 <= waits[1] <= 1.0 + RetryPolicy().backoff_base
    assert len(set(keys_sent(route))) == 1


def test_an_answer_saying_no_request_is_left_makes_the_next_one_wait(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps
) -> None:
    # Given an answer whose RateLimit says the tenant has no request left for 3 seconds, then one with some left
    route = router.get(f"/v1/checkpoints/{CKPT}").mock(
        side_effect=[
            ok(RECORD, **{"RateLimit": '"tenant";r=0;t=3'}),
            ok(RECORD, **{"RateLimit": '"tenant";r=5;t=1'}),
            ok(RECORD),
        ]
    )
    # When the client asks three times
    client.get(CKPT)
    client.get(CKPT)
    client.get(CKPT)
    # Then the second request waited what the first answer said (no 429 was needed), and the third did not wait
    record(SUITE, cases=1)
    assert route.call_count == 3
    assert len(sleeps) == 1
    assert 2.5 <= sleeps[0] <= 3.0


def test_a_presigned_transfer_is_never_paced_by_the_tenants_rate() -> None:
    from baton_checkpoints.client._core import Call, ClientCore, Send

    # Given a client told by Baton that its tenant has no request left for 5 seconds
    core = ClientCore(RetryPolicy())
    core.pace({"ratelimit": '"tenant";r=0;t=5'})
    # When it starts a call that is no Baton request (a presigned URL: S3 counts for no tenant) and one that is
    with httpx.Client(base_url=URL) as http:
        transfer = core.exchange(
            http, Call(method="GET", path="https://s3.test/object?sig=1", needs_key=False, parse=lambda answer: answer)
        )
        baton = core.exchange(
            http, Call(method="GET", path=f"/v1/checkpoints/{CKPT}", needs_key=False, parse=lambda answer: answer)
        )
        first_of_transfer = next(transfer)
        core.pace({"ratelimit": '"tenant";r=0;t=5'})
        first_of_baton = next(baton)
    # Then the transfer is sent at once; a Baton request that needs no key is not paced either
    assert isinstance(first_of_transfer, Send)
    assert isinstance(first_of_baton, Send)
    # And a Baton request with the key waits what the answer said
    with httpx.Client(base_url=URL, headers={"authorization": "Bearer k"}) as http:
        keyed = core.exchange(http, Call(method="GET", path=f"/v1/checkpoints/{CKPT}", parse=lambda answer: answer))
        first = next(keyed)
    assert not isinstance(first, Send)
    assert 4.0 <= first.seconds <= 5.0  # type: ignore[union-attr]
