"""A tenant's usage by day (`GET /v1/usage`): what the containers count (requests by route family, the units
DynamoDB reported, S3 requests, bytes and presigned URLs) and what the stream consumer counts (what the tenant stores
at each day's end), through the api handler and the reaper function on each engine. What is shown: the figures equal
what the test did and what DynamoDB said it consumed; another tenant's requests are not in them; the counts are
written once per 100 requests, never per request; the range is checked; only `tenants:manage` reads another tenant.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.usage import day_of
from baton_checkpoints.settings import load_settings
from baton_checkpoints.store import layout
from baton_checkpoints.store.usage import UsageMeter
from tests import proof_counts
from tests.builders import save
from tests.integration import test_metering as metering_tests
from tests.integration import test_reaper_history as history
from tests.integration.conftest import put_key, services_on, settings_environment
from tests.integration.driver import ApiDriver, CallCounter, CapacityMeter, Result
from tests.integration.test_reaper_history import World, big_state

aws, stream, world, reaper_calls, _warm_reaper = (
    history.aws,
    history.stream,
    history.world,
    history.reaper_calls,
    history._warm_reaper,
)

pytestmark = pytest.mark.engines
SUITE = "usage (integration)"


def tenant_driver(services: Services, tenant: str, scopes: set[str] | None = None) -> ApiDriver:
    """A key of `tenant` (agent `worker`; `*` unless told)."""
    digest = hashlib.sha256(f"{tenant}{sorted(scopes or ())}".encode()).hexdigest()
    secret = f"btn_usage_{digest[:24]}"
    key_id = "key_" + digest[:32]
    put_key(services, secret, tenant, "worker", scopes or {"*"}, key_id)
    return ApiDriver(secret)


def usage(api: ApiDriver, **query: str) -> Result:
    return api.invoke("get_usage", query=query)


def today_of(answer: Result) -> dict[str, Any]:
    assert answer.status == 200, answer.raw_body
    days = answer.body["data"]["days"]
    assert days[-1]["date"] == day_of(now_ms())
    return days[-1]


def test_the_figures_equal_what_the_requests_did_and_what_dynamodb_reported(
    services: Services, world: World, engine: str
) -> None:
    tenant = f"usage-a-{engine}"
    worker = tenant_driver(services, tenant)
    other = tenant_driver(services, f"usage-b-{engine}")
    # (their keys are cached from here on: no lookup, which precedes admission, in what follows)
    assert worker.invoke("whoami").status == 200
    assert other.invoke("whoami").status == 200
    meter = CapacityMeter()
    meter.attach(services.dynamodb)
    try:
        # When the tenant saves (one state large enough to go to S3), reads, lists, deletes and declares a blob
        saved = [save(worker, subject_id=f"s{n}", state={"n": n}) for n in range(3)]
        big = save(worker, subject_id="big", state=big_state("usage"))
        assert all(a.status == 201 for a in (*saved, big))
        ids = [a.body["data"]["checkpoint_id"] for a in (*saved, big)]
        for checkpoint_id in ids[2:]:
            got = worker.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")
            assert got.status == 200, got.raw_body
        listed = worker.invoke("list_subject_checkpoints", path="/v1/subjects/s0/checkpoints")
        assert listed.status == 200
        deleted = worker.invoke("delete_checkpoint", path=f"/v1/checkpoints/{ids[0]}", headers={"if-match": None})
        assert deleted.status == 200
        blob = {"sha256": hashlib.sha256(b"x" * 10).hexdigest(), "size": 10, "media_type": "text/plain"}
        declared = worker.invoke("create_blob", body=blob)
        assert declared.status == 201, declared.raw_body
        # and another tenant makes requests of its own meanwhile
        assert save(other, subject_id="s", state={}).status == 201
    finally:
        meter.detach(services.dynamodb)
    services.usage.flush()
    # Then its day counts each request by its family, the units DynamoDB reported for them, and S3's share
    day = today_of(usage(worker))
    assert day["requests"] == {"blobs": 1, "checkpoints": 8, "keys": 1}  # 4 saves, 2 reads, a list, a delete
    other_day = today_of(usage(other))
    assert other_day["requests"] == {"checkpoints": 1, "keys": 1}
    if engine == "dynamodb-local":  # (moto's figures are not DynamoDB's: only their presence is checked there)
        mine = day["dynamodb"]["write_units"] + day["dynamodb"]["read_units"]
        theirs = other_day["dynamodb"]["write_units"] + other_day["dynamodb"]["read_units"]
        assert mine + theirs == pytest.approx(meter.write_units + meter.read_units)
        assert day["dynamodb"]["write_units"] >= 6
    else:
        assert day["dynamodb"]["write_units"] > 0
        assert day["dynamodb"]["read_units"] > 0
    big_bytes = day["s3"]["bytes_written"]
    assert day["s3"] == {
        "requests": 2,  # the big state's PutObject, and its GetObject
        "bytes_written": big_bytes,
        "bytes_read": big_bytes,
        "presigned_urls": 1,
        "presigned_upload_bytes": 10,
    }
    assert 10_000 < big_bytes < 60_000
    totals = usage(worker).body["data"]["totals"]
    assert totals["requests"] == day["requests"]  # (the reads of usage are not written yet: they wait their turn)
    proof_counts.record(SUITE, figures_checked=2)


def test_stored_figures_are_the_stream_consumers_count_at_each_days_end(services: Services, world: World) -> None:
    # Given a tenant whose writes the reaper has counted
    tenant = history.TENANT
    worker = tenant_driver(services, tenant)
    metering_tests.reap_once(world)
    before = metering_tests.counted(world)
    for n in range(3):
        assert save(worker, subject_id=f"level-{n}", state={"n": n}).status == 201
    metering_tests.reap_once(world)
    counted = metering_tests.counted(world)
    assert counted.checkpoints == before.checkpoints + 3
    # and a day item of yesterday, as the consumer leaves one
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    today_item = world.dynamodb.get_item(
        TableName=services.settings.table_name, Key=layout.usage_day_key(tenant, day_of(now_ms()))
    )["Item"]
    # When its usage is read
    answer = usage(worker, **{"from": yesterday})
    assert answer.status == 200, answer.raw_body
    days = answer.body["data"]["days"]
    # Then today ends at what is stored now, and yesterday at that less today's change
    assert [d["date"] for d in days] == [yesterday, day_of(now_ms())]
    assert (days[1]["stored_bytes"], days[1]["checkpoints"]) == (counted.stored_bytes, counted.checkpoints)
    change = int(today_item["dc"]["N"])
    assert days[0]["checkpoints"] == max(0, counted.checkpoints - change)
    assert change >= 3
    proof_counts.record(SUITE, levels_checked=2)


def test_counts_are_written_once_per_hundred_requests(services: Services, world: World) -> None:
    # Given a container on the stage's policy (100 requests or 30 s)
    environment = settings_environment(services.settings.table_name)
    environment.pop("BATON_USAGE_FLUSH_REQUESTS")
    environment.pop("BATON_USAGE_FLUSH_SECONDS")
    container = services_on(services.settings.table_name)
    meter = UsageMeter(container.dynamodb, container.settings.table_name, 100, 30)
    assert load_settings(environment).usage_flush_requests == 100
    calls = CallCounter()
    container.dynamodb.meta.events.register("before-call.dynamodb", calls)
    try:
        # When 250 requests of one tenant are counted
        for _ in range(250):
            with meter.request("usage-steady", "checkpoints", day_of(now_ms())):
                pass
    finally:
        container.dynamodb.meta.events.unregister("before-call.dynamodb", calls)
    # Then two writes were made (0.008 requests per request), and the rest waits
    assert dict(calls.calls) == {"UpdateItem": 2}
    meter.flush()
    item = container.dynamodb.get_item(
        TableName=container.settings.table_name, Key=layout.usage_day_key("usage-steady", day_of(now_ms()))
    )["Item"]
    assert item["r_checkpoints"] == {"N": "250"}
    proof_counts.record(SUITE, steady_requests=250, writes=2)


def test_the_range_is_checked_and_another_tenant_needs_tenants_manage(services: Services, world: World) -> None:
    worker = tenant_driver(services, "usage-c")
    today = datetime.now(UTC).date()
    cases = {
        (("from", "2026-02-30"),): "/from",
        (("to", (today + timedelta(days=1)).isoformat()),): "/to",
        (("from", today.isoformat()), ("to", (today - timedelta(days=1)).isoformat())): "/from",
        (("from", (today - timedelta(days=100)).isoformat()),): "/from",
        (("from", "2026-1-01"),): "/from",
        (("tenant_id", "Nope"),): "/tenant_id",
    }
    for query, pointer in cases.items():
        answer = usage(worker, **dict(query))
        assert answer.status == 400, (query, answer.raw_body)
        assert answer.error["details"]["errors"][0]["pointer"] == pointer, answer.raw_body
    # A hundred days is the most one read covers
    assert len(usage(worker, **{"from": (today - timedelta(days=99)).isoformat()}).body["data"]["days"]) == 100
    # Another tenant: 403 without tenants:manage; the operator reads it
    refused = usage(worker, tenant_id="usage-d")
    assert refused.status == 403
    assert "tenants:manage" in refused.error["message"]
    operator = tenant_driver(services, "usage-op", {"usage:read", "tenants:manage"})
    assert usage(operator, tenant_id="usage-c").body["data"]["tenant_id"] == "usage-c"
    # and a key without usage:read reads nothing
    reader = tenant_driver(services, "usage-c", {"checkpoints:read"})
    assert usage(reader).status == 403
    proof_counts.record(SUITE, refusals=len(cases) + 2)


def test_a_day_ended_with_many_tenants_held_writes_them_all_over_the_next_requests(services: Services) -> None:
    # Given a container holding ten tenants' counts of a day (nothing due yet)
    container = services_on(services.settings.table_name)
    meter = UsageMeter(container.dynamodb, container.settings.table_name, 1_000, 3_600)
    tenants = [f"usage-many-{n}" for n in range(10)]
    for tenant in tenants:
        with meter.request(tenant, "checkpoints", "2026-12-02"):
            pass
    # When requests of the next day come, each ends by writing at most four of what is due
    for _ in range(3):
        with meter.request("usage-many-next", "keys", "2026-12-03"):
            pass
    # Then every tenant's count of the day before is written, none lost, none twice
    for tenant in tenants:
        item = container.dynamodb.get_item(
            TableName=container.settings.table_name, Key=layout.usage_day_key(tenant, "2026-12-02")
        ).get("Item")
        assert item is not None, tenant
        assert item["r_checkpoints"] == {"N": "1"}
    proof_counts.record(SUITE, rollovers=1)


def test_a_read_costs_what_its_range_holds_not_the_tenants_whole_history(services: Services, world: World) -> None:
    from baton_checkpoints.domain.usage import Counts
    from baton_checkpoints.store.usage import day_update

    # Given a tenant with a year of usage days
    tenant = "usage-history"
    worker = tenant_driver(services, tenant)
    today = datetime.now(UTC).date()
    for back in range(365):
        day = (today - timedelta(days=back)).isoformat()
        services.dynamodb.update_item(
            **day_update(services.settings.table_name, tenant, day, Counts({"checkpoints": 1}))
        )
    assert usage(worker).status == 200  # (the key read once, and cached)
    counter = CallCounter()
    scanned: list[int] = []

    def count_scanned(parsed: dict[str, Any], **_: Any) -> None:
        scanned.append(int(parsed.get("ScannedCount", 0)))

    events = services.dynamodb.meta.events
    events.register("before-call.dynamodb", counter)
    events.register("after-call.dynamodb.Query", count_scanned)
    try:
        # When a week is read
        week = usage(worker, **{"from": (today - timedelta(days=6)).isoformat()})
    finally:
        events.unregister("before-call.dynamodb", counter)
        events.unregister("after-call.dynamodb.Query", count_scanned)
    # Then it is the tenant's own item and one Query of the week's days: not of the year's
    assert week.status == 200, week.raw_body
    assert [d["requests"] for d in week.body["data"]["days"]] == [{"checkpoints": 1}] * 7
    assert dict(counter.calls) == {"GetItem": 1, "Query": 1}
    assert scanned == [7]  # the week's day items: not the year's
    proof_counts.record(SUITE, ranged_reads=1)
