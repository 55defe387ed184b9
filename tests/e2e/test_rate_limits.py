"""Rate limits over real HTTP against `baton serve` (four container processes sharing one table): the measured
overshoot of a hammered tenant stays within its documented bound, its refusals carry their headers, and another
tenant is served throughout. Real time: the bucket refills as the test runs."""

from __future__ import annotations

import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from baton_checkpoints.domain.tenancy import Limits
from tests.e2e.server_process import BatonServe
from tests.e2e.test_checkpoints import client_for
from tests.proof_counts import record

SUITE = "rate limits (e2e)"
CONTAINERS = 4
"""`baton serve`'s containers (its default)."""
RATE_LIMIT = re.compile(r'^"tenant";r=(\d+);t=(\d+)$')


def new_tenant(baton: BatonServe, http: httpx.Client, rpm: int, burst: int) -> str:
    """A fresh tenant limited to `rpm` a minute and `burst` at once, and a `*` key of it: the key's secret."""
    tenant = f"rl-{uuid.uuid4().hex[:12]}"
    limited = http.put(f"/v1/tenants/{tenant}/limits", json={"requests_per_minute": rpm, "burst": burst})
    assert limited.status_code == 200, limited.text
    created = http.post("/v1/keys", json={"tenant_id": tenant, "agent_id": "worker", "scopes": ["*"]})
    assert created.status_code == 201, created.text
    secret: str = created.json()["data"]["secret"]
    return secret


def test_a_hammered_tenant_is_served_within_its_bound_across_the_containers(
    baton: BatonServe, http: httpx.Client
) -> None:
    # Given a tenant allowed 120 requests a minute, 10 at once (a share of 1 per container), and another tenant
    limits = Limits(requests_per_minute=120, burst=10, storage_bytes=0, checkpoints=0)
    secret = new_tenant(baton, http, limits.requests_per_minute, limits.burst)
    other = new_tenant(baton, http, 6000, 200)
    statuses: list[int] = []
    refusals: list[httpx.Response] = []

    def hammer(worker: int) -> None:
        with client_for(baton, secret) as client:
            for _ in range(15):
                answer = client.get("/v1/whoami")
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    refusals.append(answer)

    # When 8 clients send 120 requests as fast as the containers answer them
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(hammer, range(8)))
    elapsed = time.monotonic() - started
    # Then no more were served than the bucket allows over that time plus what the containers can hold unspent
    served = statuses.count(200)
    bound = limits.burst + limits.requests_per_minute * elapsed / 60 + CONTAINERS * limits.share
    assert set(statuses) <= {200, 429}, statuses
    assert served <= bound, (served, bound, elapsed)
    assert served >= limits.burst - CONTAINERS * limits.share  # the burst itself is served
    # And every refusal says when to come back, under what policy
    assert refusals
    for refused in refusals:
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.headers["RateLimit-Policy"] == '"tenant";q=120;w=60'
        assert RATE_LIMIT.match(refused.headers["RateLimit"])
        assert refused.json()["error"]["code"] == "RATE_LIMITED"
    # And the other tenant was served all along
    with client_for(baton, other) as client:
        answers = [client.get("/v1/whoami") for _ in range(20)]
    assert {a.status_code for a in answers} == {200}
    assert all(RATE_LIMIT.match(a.headers["RateLimit"]) for a in answers)
    record(SUITE, requests=len(statuses), served=served, refused=len(refusals), bound=int(bound))


def test_a_refused_client_that_waits_its_retry_after_is_served(baton: BatonServe, http: httpx.Client) -> None:
    # Given a tenant allowed one request at once, 60 a minute, that spent it
    secret = new_tenant(baton, http, 60, 1)
    with client_for(baton, secret) as client:
        statuses = [client.get("/v1/whoami").status_code for _ in range(CONTAINERS + 2)]
        assert 429 in statuses
        refused = next(r for r in (client.get("/v1/whoami") for _ in range(5)) if r.status_code == 429)
        # When it waits what Retry-After says (and the containers' shares, held unspent, have been dropped or spent)
        time.sleep(int(refused.headers["Retry-After"]) + 1)
        # Then it is served again
        assert client.get("/v1/whoami").status_code == 200


def test_the_sdk_waits_out_a_429_and_is_served(baton: BatonServe, http: httpx.Client) -> None:
    from baton_checkpoints.client import Baton

    # Given a tenant allowed one request at once, 60 a minute, and the SDK on one of its keys
    secret = new_tenant(baton, http, 60, 1)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    # When it makes requests faster than the limit
    with Baton(baton.url, secret, sleep=sleep) as sdk:
        identities = [sdk.whoami() for _ in range(3)]
    # Then every one is served: the SDK waited what RateLimit (r=0) or a 429's Retry-After asked, and raised nothing
    assert {identity.tenant_id for identity in identities} == {identities[0].tenant_id}
    assert waits
    assert all(wait >= 0.5 for wait in waits)  # a RateLimit's t, or a 429's Retry-After (1 s at 60 a minute)
    record(SUITE, sdk_waits=len(waits))


def test_the_readmes_limits_command_sets_a_tenants_limits(baton: BatonServe, http: httpx.Client) -> None:
    import json
    import os
    import subprocess

    from tests.e2e.readme import readme_block

    # Given the README's command that sets a customer's limits, run as a reader would with its two variables set
    _, command = readme_block("## Tenants and keys", "which the\nSDK and `BatonSaver` follow on their own", "sh")
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, "BATON_URL": baton.url, "BATON_API_KEY": baton.key},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    # Then it answered the limits it set, and the tenant has them
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]["requests_per_minute"] == 1200
    assert http.get("/v1/tenants/customer-42/limits").json()["data"]["burst"] == 100
