"""Tenants' rate limits through the api handler: 429 with its headers for the limited tenant alone, `RateLimit` on
every authenticated answer, the operator's limits routes, what the limiter adds to each request, and the overshoot
bound across containers sharing one table."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from baton_checkpoints.api.ratelimit import RateLimiter
from baton_checkpoints.api.services import Services, default_limits
from baton_checkpoints.domain.errors import RateLimited
from baton_checkpoints.domain.tenancy import Limits
from tests import proof_counts
from tests.builders import KIND, save, save_body
from tests.integration.conftest import put_key, services_on, table_items
from tests.integration.driver import ApiDriver, CallCounter

SUITE = "rate limits"
START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
START_US = int(START.timestamp() * 1_000_000)


class Clock:
    """The limiters' clock, held still and moved by the test (a limiter keeps its own time: `container_clock_us`)."""

    def __init__(self) -> None:
        self.now_us = START_US

    def __call__(self) -> int:
        return self.now_us

    def shift(self, delta: timedelta) -> None:
        self.now_us += int(delta.total_seconds() * 1_000_000)


@pytest.fixture
def clock(services: Services, monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The app's limiter on a clock the test moves."""
    held = Clock()
    monkeypatch.setattr(services.limiter, "_clock", held)
    return held


RATE_LIMIT = re.compile(r'^"tenant";r=(\d+);t=(\d+)$')


def tenant_key(services: Services, tenant: str) -> ApiDriver:
    """A `*` key of `tenant` (its agent `worker`)."""
    secret = f"btn_rate_{tenant}_secret_0001"
    put_key(services, secret, tenant, "worker", {"*"}, "key_" + format(abs(hash(tenant)) % 16**32, "032x"))
    return ApiDriver(secret)


def set_limits(api: ApiDriver, tenant: str, **settings: Any) -> Any:
    answer = api.invoke("put_limits", path=f"/v1/tenants/{tenant}/limits", body=settings)
    assert answer.status == 200, answer.raw_body
    return answer.data


def test_a_limited_tenant_gets_429_with_its_headers_and_another_tenant_is_unaffected(
    api: ApiDriver, services: Services, clock: Clock
) -> None:
    # Given a tenant limited to 60 requests a minute, 3 at once, and another tenant on the stage's defaults
    limited, other = tenant_key(services, "limited-a"), tenant_key(services, "roomy-a")
    set_limits(api, "limited-a", requests_per_minute=60, burst=3)
    # When the limited tenant makes 5 requests in the same instant
    answers = [limited.invoke("whoami") for _ in range(5)]
    # Then 3 are served, each saying what is left, and the rest are refused with Retry-After and the policy
    assert [a.status for a in answers] == [200, 200, 200, 429, 429]
    assert [RATE_LIMIT.match(a.header("RateLimit") or "")[1] for a in answers[:3]] == ["2", "1", "0"]  # type: ignore[index]
    refused = answers[3]
    assert refused.error["code"] == "RATE_LIMITED"
    assert refused.header("Retry-After") == "1"
    assert refused.header("RateLimit-Policy") == '"tenant";q=60;w=60'
    assert refused.header("RateLimit") == '"tenant";r=0;t=1'
    assert refused.error["details"] == {"retry_after_seconds": 1, "requests_per_minute": 60, "burst": 3}
    # And the other tenant is served all along
    assert all(other.invoke("whoami").status == 200 for _ in range(10))
    proof_counts.record(SUITE, refusals=2)


def test_a_refused_request_writes_nothing_and_a_second_later_one_more_is_served(
    api: ApiDriver, services: Services, clock: Clock
) -> None:
    limited = tenant_key(services, "limited-b")
    set_limits(api, "limited-b", requests_per_minute=60, burst=1)
    assert save(limited, subject_id="first").status == 201
    before = table_items(services.dynamodb)
    # When a save comes before the next token
    refused = save(limited, subject_id="second")
    # Then it is refused and nothing is written
    assert refused.status == 429
    assert table_items(services.dynamodb) == before
    # And a second later it is served
    clock.shift(timedelta(seconds=1))
    assert save(limited, subject_id="second").status == 201


def test_every_authenticated_answer_carries_ratelimit_and_an_unauthenticated_one_does_not(
    api: ApiDriver, services: Services
) -> None:
    worker = tenant_key(services, "headers-c")
    answers = {
        "served": worker.invoke("whoami"),
        "not found": worker.invoke("get_checkpoint", path="/v1/checkpoints/ckpt_" + "0" * 32),
        "invalid": worker.invoke("save_checkpoint", body={"kind": KIND}),
        "forbidden": worker.invoke("get_limits", path="/v1/tenants/headers-c/limits"),
    }
    for label, answer in answers.items():
        assert RATE_LIMIT.match(answer.header("RateLimit") or ""), (label, answer.headers)
    assert answers["forbidden"].status == 403
    assert api.invoke("whoami", secret="btn_no_such_key_000000000000").header("RateLimit") is None


def test_the_limits_routes_need_tenants_manage_validate_and_default(api: ApiDriver, services: Services) -> None:
    worker = tenant_key(services, "managed-d")
    defaults = default_limits(services.settings)
    # A key without tenants:manage may not read or set limits, even its own tenant's
    assert worker.invoke("get_limits", path="/v1/tenants/managed-d/limits").status == 403
    assert worker.invoke("put_limits", path="/v1/tenants/managed-d/limits", body={}).status == 403
    # A tenant never set has every setting null, and the stage's defaults in effect
    fresh = api.invoke("get_limits", path="/v1/tenants/managed-d/limits")
    assert fresh.status == 200
    assert fresh.data == {
        "tenant_id": "managed-d",
        "requests_per_minute": None,
        "burst": None,
        "storage_bytes": None,
        "checkpoints": None,
        "effective": {
            "requests_per_minute": defaults.requests_per_minute,
            "burst": defaults.burst,
            "storage_bytes": defaults.storage_bytes,
            "checkpoints": defaults.checkpoints,
        },
    }
    # A setting replaces; one left out goes back to the default
    assert set_limits(api, "managed-d", requests_per_minute=600, burst=50)["effective"]["requests_per_minute"] == 600
    again = set_limits(api, "managed-d", burst=70)
    assert (again["requests_per_minute"], again["burst"]) == (None, 70)
    assert again["effective"]["requests_per_minute"] == defaults.requests_per_minute
    # Bad input is refused naming the field, and changes nothing
    for body, pointer in [({"burst": 0}, "/burst"), ({"rpm": 5}, "/rpm"), ({"checkpoints": "9"}, "/checkpoints")]:
        refused = api.invoke("put_limits", path="/v1/tenants/managed-d/limits", body=body)
        assert refused.status == 400, refused.raw_body
        assert refused.error["details"]["errors"][0]["pointer"] == pointer
    bad_tenant = api.invoke("get_limits", path="/v1/tenants/Not%20a%20Tenant/limits")
    assert bad_tenant.status == 400
    assert bad_tenant.error["details"]["errors"][0] == {
        "pointer": "/tenant_id",
        "message": "The path parameter tenant_id must be 1 to 64 lowercase letters, digits, _ or -, starting with "
        "a letter or a digit.",
        "in": "path",
    }
    assert api.invoke("get_limits", path="/v1/tenants/managed-d/limits").data == again


def test_new_limits_apply_in_the_container_that_set_them_at_once(
    api: ApiDriver, services: Services, clock: Clock
) -> None:
    # Given a tenant that made a few requests under the defaults, whose limit is then lowered to 1 at once
    worker = tenant_key(services, "lowered-e")
    assert all(worker.invoke("whoami").status == 200 for _ in range(3))
    set_limits(api, "lowered-e", requests_per_minute=60, burst=1)
    # When it asks again a second later (what it spent still counts, at the new rate)
    clock.shift(timedelta(seconds=1))
    # Then the new limit applies: one request, then a refusal (the share taken under the defaults was dropped)
    assert [worker.invoke("whoami").status for _ in range(2)] == [200, 429]


def test_the_limiter_adds_at_most_a_twentieth_of_a_request_per_request(
    api: ApiDriver, services: Services, counter: CallCounter
) -> None:
    # Given a tenant on the stage's defaults, and the key already cached
    worker = tenant_key(services, "steady-f")
    assert worker.invoke("whoami").status == 200
    counter.reset()
    # When it makes a steady run of saves
    runs = 200
    for step in range(runs):
        assert save(worker, subject_id="steady", state={"step": step}).status in (200, 201)
    # Then each save made its own one write, and the limiter one take per share of 20
    assert dict(counter.calls) == {"UpdateItem": runs}
    assert counter.takes <= runs / Limits(1, 10_000, 0, 0).share + 1
    added = counter.takes / runs
    assert added <= 0.06
    proof_counts.record(SUITE, steady_requests=runs, takes=counter.takes)


@pytest.mark.parametrize("containers", [1, 4])
def test_the_overshoot_across_containers_stays_within_its_bound(
    services: Services, containers: int, clock: Clock
) -> None:
    # Given several containers (each its own limiter) sharing one tenant's bucket: 600 a minute, 40 at once
    limits = Limits(requests_per_minute=600, burst=40, storage_bytes=0, checkpoints=0)
    tenant = f"overshoot-{containers}"
    services.tenants.put_settings(tenant, limits_settings(limits))
    limiters = [
        RateLimiter(services_on(services.settings.table_name).tenants, default_limits(services.settings), clock=clock)
        for _ in range(containers)
    ]
    served = 0
    start_ms = START_US // 1000
    now_ms = start_ms
    # When they are asked for far more than the limit over 30 seconds, 10 requests each every 50 ms
    for _ in range(600):
        served += sum(admitted(limiter, tenant, 10) for limiter in limiters)
        clock.shift(timedelta(milliseconds=50))
        now_ms += 50
    # Then what was served is within burst + rate * t + containers * share
    elapsed_s = (now_ms - start_ms) / 1000
    bound = limits.burst + limits.requests_per_minute * elapsed_s / 60 + containers * limits.share
    assert served <= bound, (served, bound)
    # And the limit was not undershot by more than what the containers can hold unspent
    assert served >= limits.requests_per_minute * elapsed_s / 60 - containers * limits.share
    proof_counts.record(SUITE, overshoot_runs=1, served=served)


def admitted(limiter: RateLimiter, tenant: str, asked: int) -> int:
    """How many of `asked` requests of `tenant` `limiter` admits, one after the other."""
    served = 0
    for _ in range(asked):
        try:
            limiter.admit(tenant)
            served += 1
        except RateLimited:
            pass
    return served


def limits_settings(limits: Limits) -> Any:
    from baton_checkpoints.domain.tenancy import Settings

    return Settings(limits.requests_per_minute, limits.burst)


def test_the_429_body_is_the_contracts_envelope_and_a_save_refused_is_not_idempotency_consumed(
    api: ApiDriver, services: Services, clock: Clock
) -> None:
    limited = tenant_key(services, "limited-g")
    set_limits(api, "limited-g", requests_per_minute=60, burst=1)
    assert limited.invoke("whoami").status == 200
    refused = limited.invoke("save_checkpoint", body=save_body(subject_id="g"), headers={"idempotency-key": "g-1"})
    assert refused.status == 429
    assert set(refused.body) == {"error", "meta"}
    clock.shift(timedelta(seconds=2))
    # The same idempotency key later is a first save, not a replay of the refusal
    served = limited.invoke("save_checkpoint", body=save_body(subject_id="g"), headers={"idempotency-key": "g-1"})
    assert served.status == 201
    assert served.header("Idempotent-Replayed") is None


def test_a_containers_first_take_is_the_tenants_share_not_the_defaults(services: Services, clock: Clock) -> None:
    # Given a tenant of 60 a minute, 30 at once (a share of 3), and a container that has never seen it
    tenant = "first-share-h"
    limits = Limits(requests_per_minute=60, burst=30, storage_bytes=0, checkpoints=0)
    services.tenants.put_settings(tenant, limits_settings(limits))
    limiter = RateLimiter(
        services_on(services.settings.table_name).tenants, default_limits(services.settings), clock=clock
    )
    now_ms = START_US // 1000
    # When it admits the tenant's first request (its belief, the defaults, is refused: it learns the limits)
    limiter.admit(tenant)
    # Then it took the tenant's share of 3 (three tokens' worth of the bucket's time), not the defaults' 20
    taken = services.tenants.settings(tenant).tat_us
    assert taken == now_ms * 1000 + limits.share * limits.interval_us
    assert limits.share == 3


def test_a_raised_limit_reaches_a_container_that_refused_within_ten_seconds(services: Services, clock: Clock) -> None:
    # Given a tenant of 1 request a minute, refused in container Y (which would otherwise wait a minute)
    tenant = "raised-i"
    services.tenants.put_settings(tenant, limits_settings(Limits(1, 1, 0, 0)))
    y = RateLimiter(services_on(services.settings.table_name).tenants, default_limits(services.settings), clock=clock)
    y.admit(tenant)
    with pytest.raises(RateLimited) as refused:
        y.admit(tenant)
    assert refused.value.retry_after == 60
    # When the operator raises its limit (through another container) and 10 seconds pass
    services.tenants.put_settings(tenant, limits_settings(Limits(6000, 100, 0, 0)))
    clock.shift(timedelta(seconds=10, milliseconds=1))
    # Then Y serves it again: its refusal was remembered 10 seconds at most, then it read the tenant's item
    y.admit(tenant)


def test_a_container_whose_clock_is_behind_refuses_early_and_never_lets_more_through(
    services: Services, clock: Clock
) -> None:
    # Given two containers serving a tenant of 60 a minute (5 at once), one clock 2.5 seconds behind the other
    tenant = "skewed-j"
    limits = Limits(60, 5, 0, 0)
    services.tenants.put_settings(tenant, limits_settings(limits))

    def late() -> int:
        return clock() - 2_500_000

    on_time = RateLimiter(services_on(services.settings.table_name).tenants, default_limits(services.settings), clock)
    behind = RateLimiter(services_on(services.settings.table_name).tenants, default_limits(services.settings), late)
    served = 0
    # When both are asked for far more than the limit for a minute
    for _ in range(600):
        served += sum(admitted(limiter, tenant, 3) for limiter in (on_time, behind))
        clock.shift(timedelta(milliseconds=100))
    # Then no more were served than the bound allows (the late clock only makes its container refuse sooner)
    assert served <= limits.burst + limits.requests_per_minute + 2 * limits.share, served
    proof_counts.record(SUITE, skew_runs=1)


def test_a_tenant_id_with_a_final_newline_is_refused(api: ApiDriver) -> None:
    answer = api.invoke("get_limits", path="/v1/tenants/acme%0A/limits")
    assert answer.status == 400
    assert answer.error["details"]["errors"][0]["pointer"] == "/tenant_id"
