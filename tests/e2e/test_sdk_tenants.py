"""The Python SDK's tenant routes against a real `baton serve`: a tenant's limits set, read and put back to the stage's
default (`get_limits`, `set_limits`); its usage, exactly what the test did (`usage`, on a server of its own that
writes each request's counts at its end); its audit trail page by page and checked whole (`list_audit`,
`iter_audit`, `verify_audit`); the async client alike; and a key without the scope refused with `ForbiddenError`."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from baton_checkpoints.client import AsyncBaton, Baton, CreatedKey, ForbiddenError, RetryPolicy
from baton_checkpoints.client.audit import GENESIS
from tests.e2e.server_process import BatonServe, serve_table
from tests.proof_counts import record

SUITE = "sdk tenants (e2e)"
FAST = RetryPolicy(backoff_base=0.01, backoff_max=0.05, not_found_pause=0.05)
"""Real retries, short waits: the suite's runtime stays small."""
LAG_SECONDS = 30.0
"""How long the usage test waits for what is stored to be counted (the documented bound is about 20 s)."""


@pytest.fixture
def client(baton: BatonServe) -> Iterator[Baton]:
    """The synchronous client with the session server's operator key (it has `tenants:manage`)."""
    with Baton(baton.url, baton.key, retry=FAST) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def metered(moto_endpoint: str) -> Iterator[BatonServe]:
    """`baton serve` on a table of its own, writing each request's counts at its end (its default: the session's
    server writes them every 100 requests), with its reaper (which counts what is stored)."""
    server = serve_table(moto_endpoint, f"baton-e2e-sdk-usage-{uuid.uuid4().hex[:8]}")
    yield server
    server.stop()


def new_tenant(operator: Baton, scopes: tuple[str, ...] = ("*",), agent: str = "admin") -> tuple[str, CreatedKey]:
    """A fresh tenant and a key of it, issued by the operator."""
    tenant = f"sdk-t-{uuid.uuid4().hex[:12]}"
    return tenant, operator.create_key(agent, list(scopes), tenant_id=tenant)


# -- limits ----------------------------------------------------------------------------------------------------


def test_limits_set_read_and_back_to_the_default(client: Baton) -> None:
    # Given a fresh tenant: no setting of its own, the stage's defaults apply
    tenant, _ = new_tenant(client)
    before = client.get_limits(tenant)
    assert before.settings() == dict.fromkeys(("requests_per_minute", "burst", "storage_bytes", "checkpoints"))
    assert before.tenant_id == tenant
    # When the operator sets three of its limits
    limits = client.set_limits(tenant, requests_per_minute=1200, burst=40, checkpoints=5)
    # Then the answer shows them and what applies: its own where set, the default where not
    assert limits.settings() == {"requests_per_minute": 1200, "burst": 40, "storage_bytes": None, "checkpoints": 5}
    assert (limits.effective.requests_per_minute, limits.effective.burst, limits.effective.checkpoints) == (1200, 40, 5)
    assert limits.effective.storage_bytes == before.effective.storage_bytes
    # and a read gives the same
    assert client.get_limits(tenant) == limits
    # When one is changed with the others passed back, only it changes
    changed = client.set_limits(tenant, **{**limits.settings(), "burst": 41})
    assert changed.settings() == {**limits.settings(), "burst": 41}
    # When a PUT names only one, every other goes back to the default (the body replaces every setting)
    only = client.set_limits(tenant, storage_bytes=1_000_000)
    assert only.settings() == {
        "requests_per_minute": None,
        "burst": None,
        "storage_bytes": 1_000_000,
        "checkpoints": None,
    }
    # and null (None) puts one back to the stage's default too
    reset = client.set_limits(tenant, storage_bytes=None)
    record(SUITE, requests=7)
    assert reset.settings() == before.settings()
    assert reset.effective == before.effective
    assert client.get_limits(tenant) == before


# -- usage -----------------------------------------------------------------------------------------------------


def test_usage_of_a_fresh_tenant_equals_what_it_did(metered: BatonServe) -> None:
    with Baton(metered.url, metered.key, retry=FAST) as operator:
        # Given a fresh tenant with a `*` key
        tenant, key = new_tenant(operator)
        first = datetime.now(UTC).date()
        with Baton(metered.url, key.secret, retry=FAST) as worker:
            # When it saves three times (two subjects, one of them twice) and asks who it is
            worker.save("s1", "task_state", {"n": 1})
            worker.save("s1", "task_state", {"n": 2})
            worker.save("s2", "task_state", {"n": 3})
            assert worker.whoami().tenant_id == tenant
            last = datetime.now(UTC).date()
            # Then the operator reads exactly those requests, by family (`date`s and strings alike)
            usage = operator.usage(from_=first, to=last.isoformat(), tenant_id=tenant)
            assert usage.tenant_id == tenant
            assert [day.date for day in usage.days] == [first.isoformat(), last.isoformat()][: (last - first).days + 1]
            assert usage.totals.requests == {"checkpoints": 3, "keys": 1}
            # and the units DynamoDB reported (moto reports none for TransactWriteItems, which a save is)
            assert usage.totals.dynamodb.read_units > 0
            assert usage.totals.dynamodb.write_units >= 0
            # and no S3 (small states stay in DynamoDB)
            assert (usage.totals.s3.requests, usage.totals.s3.presigned_urls) == (0, 0)
            # And once the stream is counted, what it stores: two live checkpoints, their bytes, no thread
            started = time.monotonic()
            today = usage.days[-1]
            while (today.checkpoints, today.stored_bytes > 0) != (2, True):
                assert time.monotonic() - started < LAG_SECONDS, today
                time.sleep(1.0)
                today = operator.usage(from_=last, to=last, tenant_id=tenant).days[-1]
            assert today.threads == 0
            # And the tenant reads its own: the 30 days ending today by default
            own = worker.usage()
            assert own.tenant_id == tenant
            assert len(own.days) == 30
            assert own.days[-1].date == datetime.now(UTC).date().isoformat()
    record(SUITE, requests=7, stored_lag_ms=int((time.monotonic() - started) * 1000))


# -- the audit trail -------------------------------------------------------------------------------------------


def test_audit_pages_iteration_and_verification(client: Baton, baton: BatonServe) -> None:
    # Given a fresh tenant whose admin key the operator issued, which issues a key and revokes it, and whose limits
    # the operator then changes
    operator = client.whoami()
    tenant, admin_key = new_tenant(client)
    with Baton(baton.url, admin_key.secret, retry=FAST) as admin:
        helper = admin.create_key("helper", ["checkpoints:read"])
        assert admin.revoke_key(helper.key_id).deleted
        client.set_limits(tenant, burst=30)
        # When the admin reads the trail's newest page of two
        page = admin.list_audit(limit=2)
        # and every event, one a page
        events = list(admin.iter_audit(page_size=1))
        revoked = admin.list_audit(action="key.revoked").items
        bounded = admin.list_audit(from_=events[-1].at, to=events[0].at)
        later = admin.list_audit(from_=datetime.now(UTC) + timedelta(hours=1))
        problems = admin.verify_audit()
    record(SUITE, requests=12)
    # Then the page holds the newest two, and the tenant's head is its newest
    assert [event.action for event in page.items] == ["limits.changed", "key.revoked"]
    assert page.next_cursor is not None
    assert (page.head.seq, page.head.hash, page.head.at) == (4, page.items[0].hash, page.items[0].at)
    # and the iteration every event, newest first, each chained to the one before
    assert [event.seq for event in events] == [4, 3, 2, 1]
    assert [event.action for event in events] == ["limits.changed", "key.revoked", "key.issued", "key.issued"]
    for newer, older in itertools.pairwise(events):
        assert (newer.prev_hash, newer.prev_at) == (older.hash, older.at)
    assert (events[-1].prev_hash, events[-1].prev_at) == (GENESIS, None)
    assert all(event.raw["hash"] == event.hash and event.outcome == "succeeded" for event in events)
    # and each event says who did what to what
    assert (events[-1].actor.key_id, events[-1].actor.agent_id) == (operator.key_id, operator.agent_id)
    assert events[-1].target == {"type": "key", "id": admin_key.key_id}
    assert events[0].actor.key_id == operator.key_id
    assert events[0].target == {"type": "tenant", "id": tenant}
    assert events[0].details["burst"] == 30
    (gone,) = revoked
    assert (gone.actor.key_id, gone.actor.agent_id) == (admin_key.key_id, "admin")
    assert gone.target == {"type": "key", "id": helper.key_id}
    assert gone.details["agent_id"] == "helper"
    # and the time bounds keep what lies between them (inclusive), nothing after now
    assert [event.seq for event in bounded.items] == [4, 3, 2, 1]
    assert later.items == []
    assert later.head.seq == 4
    # and the chain is whole
    assert problems == []


# -- the asynchronous client -----------------------------------------------------------------------------------


def test_async_client_covers_limits_usage_and_audit(client: Baton, baton: BatonServe) -> None:
    tenant, admin_key = new_tenant(client)

    async def scenario() -> None:
        async with (
            AsyncBaton(baton.url, baton.key, retry=FAST) as operator,
            AsyncBaton(baton.url, admin_key.secret, retry=FAST) as admin,
        ):
            limits = await operator.set_limits(tenant, checkpoints=7)
            assert (limits.checkpoints, limits.effective.checkpoints) == (7, 7)
            assert await operator.get_limits(tenant) == limits
            usage = await operator.usage(tenant_id=tenant, to=datetime.now(UTC).date())
            assert (usage.tenant_id, len(usage.days)) == (tenant, 30)
            assert (await admin.usage()).tenant_id == tenant
            page = await admin.list_audit()
            assert [event.action for event in page.items] == ["limits.changed", "key.issued"]
            assert [event.seq async for event in admin.iter_audit(page_size=1)] == [2, 1]
            assert [event.seq async for event in admin.iter_audit(action="key.issued")] == [1]
            assert await admin.verify_audit(page_size=1) == []

    asyncio.run(scenario())
    record(SUITE, requests=10)


# -- scopes ----------------------------------------------------------------------------------------------------


def test_a_key_without_the_scope_is_forbidden(client: Baton, baton: BatonServe) -> None:
    # Given a tenant's `*` key (every scope but tenants:manage) and a key that may only read checkpoints
    tenant, admin_key = new_tenant(client)
    _, reader_key = new_tenant(client, ("checkpoints:read",), agent="reader")
    with (
        Baton(baton.url, admin_key.secret, retry=FAST) as admin,
        Baton(baton.url, reader_key.secret, retry=FAST) as reader,
    ):
        # When they call what their scopes do not cover, Then each raises ForbiddenError (403 FORBIDDEN)
        refused: list[ForbiddenError] = []
        calls = (
            lambda: admin.get_limits(tenant),
            lambda: admin.set_limits(tenant, burst=1),
            lambda: admin.usage(tenant_id="another-tenant"),
            lambda: reader.usage(),
            lambda: reader.list_audit(),
            lambda: reader.verify_audit(),
        )
        for call in calls:
            with pytest.raises(ForbiddenError) as raised:
                call()
            refused.append(raised.value)
        # while what they may do answers
        assert admin.list_audit().head.seq == 1
    record(SUITE, requests=len(calls) + 1)
    assert [(error.status, error.code) for error in refused] == [(403, "FORBIDDEN")] * len(calls)
    assert all(error.request_id for error in refused)
    # and the refused PUT changed nothing
    assert client.get_limits(tenant).burst is None
