"""The audit trail through the api handler, on each engine: each management action appends one event to its
tenant's chain (key issued and revoked, limits changed, subject purged, thread deleted, lease taken over; OAuth's
grants are shown over HTTP, tests/e2e/test_audit.py), `GET /v1/audit` reads them newest first (filtered, paged),
the chain is whole by `client/audit.py`'s check, appends racing from two containers never fork it, and an event
removed, altered or cut from the end is found."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.api.services import Services
from baton_checkpoints.client.audit import event_hash, problems_of
from baton_checkpoints.domain import audit as domain_audit
from baton_checkpoints.domain.audit import Actor, Happened
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.store import layout
from tests import proof_counts
from tests.builders import save
from tests.integration.conftest import put_key, services_on
from tests.integration.driver import ApiDriver, Result
from tests.integration.test_quotas import thread_put

pytestmark = pytest.mark.engines
SUITE = "audit (integration)"


def tenant_key(services: Services, tenant: str, scopes: set[str] | None = None, agent: str = "worker") -> ApiDriver:
    digest = hashlib.sha256(f"{tenant}{agent}{sorted(scopes or ())}".encode()).hexdigest()
    secret = f"btn_audit_{digest[:24]}"
    put_key(services, secret, tenant, agent, scopes or {"*"}, "key_" + digest[:32])
    return ApiDriver(secret)


def trail(api: ApiDriver, **query: str) -> Result:
    return api.invoke("get_audit", query=query)


def every_event(api: ApiDriver) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every event of the caller's tenant, page by page (2 a page), and the head of the first page."""
    events: list[dict[str, Any]] = []
    head: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        answer = trail(api, limit="2", **({"cursor": cursor} if cursor else {}))
        assert answer.status == 200, answer.raw_body
        head = head or answer.body["meta"]["head"]
        events += answer.body["data"]
        cursor = answer.body["meta"]["next_cursor"]
        if cursor is None:
            return events, head


def test_each_management_action_appends_one_event_to_its_tenants_chain(
    api: ApiDriver, services: Services, engine: str
) -> None:
    tenant = f"audit-a-{engine}"
    admin = tenant_key(services, tenant)
    # Given a tenant whose admin issues and revokes a key, purges a subject and deletes a thread, whose limits the
    # operator changes, and one of whose checkpoints changes lease holder after the first lapsed
    created = admin.invoke("create_key", body={"agent_id": "helper", "scopes": ["checkpoints:read"]})
    assert created.status == 201, created.raw_body
    key_id = created.data["key_id"]
    assert admin.invoke("revoke_key", path=f"/v1/keys/{key_id}", query={}).status == 200
    assert save(admin, subject_id="gone", state={"n": 1}).status == 201
    assert admin.invoke("purge_subject", path="/v1/subjects/gone").status == 200
    assert thread_put(admin, "t-1", "1ef00000-0000-6000-8000-000000000001", b"x").status == 201
    assert admin.invoke("delete_checkpoint", path="/v1/threads/t-1", headers={"if-match": None}).status == 200
    limits = api.invoke("put_limits", path=f"/v1/tenants/{tenant}/limits", body={"burst": 5000})
    assert limits.status == 200, limits.raw_body
    leased = save(admin, subject_id="leased", state={"n": 1})
    checkpoint_id = leased.data["checkpoint_id"]
    lease_path = f"/v1/checkpoints/{checkpoint_id}/lease"
    with time_machine.travel(datetime.now(UTC), tick=False) as clock:
        first = admin.invoke("acquire_lease", path=lease_path, body={"holder": "first", "ttl_seconds": 60})
        assert first.status == 201, first.raw_body
        clock.shift(timedelta(seconds=61))
        second = admin.invoke("acquire_lease", path=lease_path, body={"holder": "second", "ttl_seconds": 60})
        assert second.status == 201, second.raw_body
    # When its trail is read, page by page
    events, head = every_event(admin)
    # Then each action is there once, newest first, with its actor, target and outcome
    assert [e["action"] for e in events] == [
        "lease.taken_over",
        "limits.changed",
        "thread.deleted",
        "subject.purged",
        "key.revoked",
        "key.issued",
    ]
    by_action = {e["action"]: e for e in events}
    assert by_action["key.issued"]["target"] == {"type": "key", "id": key_id}
    assert by_action["key.issued"]["details"]["scopes"] == ["checkpoints:read"]
    assert by_action["key.issued"]["actor"]["agent_id"] == "worker"
    assert by_action["limits.changed"]["actor"] == {"key_id": "key_" + "a" * 32, "agent_id": "operator"}
    assert by_action["limits.changed"]["details"]["burst"] == 5000
    assert by_action["subject.purged"]["details"] == {"deleted_checkpoints": 1, "complete": True}
    assert by_action["thread.deleted"]["target"] == {"type": "thread", "id": "t-1"}
    assert by_action["lease.taken_over"]["details"]["previous_holder"] == "first"
    assert all(e["request_id"] and e["outcome"] == "succeeded" for e in events)
    # And the chain is whole: numbered 1..6, each naming the one before, the newest the head
    assert [e["seq"] for e in events] == [6, 5, 4, 3, 2, 1]
    assert head == {"seq": 6, "hash": events[0]["hash"], "at": events[0]["at"]}
    assert problems_of(events, head) == []
    assert all(event_hash(e) == domain_audit.event_hash(e) for e in events)
    # And the operator's own tenant has none of these
    assert trail(api).data == [] or all(e["target"].get("id") != tenant for e in trail(api).data)
    proof_counts.record(SUITE, actions=len(events))


def test_the_trail_is_filtered_by_action_and_time(api: ApiDriver, services: Services, engine: str) -> None:
    tenant = f"audit-b-{engine}"
    admin = tenant_key(services, tenant)
    start = datetime(2027, 1, 10, 9, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        for n in range(3):
            body = {"agent_id": f"a{n}", "scopes": ["checkpoints:read"]}
            assert admin.invoke("create_key", body=body).status == 201
            clock.shift(timedelta(hours=1))
        assert api.invoke("put_limits", path=f"/v1/tenants/{tenant}/limits", body={}).status == 200
        issued = trail(admin, action="key.issued")
        assert [e["details"]["agent_id"] for e in issued.data] == ["a2", "a1", "a0"]
        window = trail(admin, **{"from": "2027-01-10T09:30:00Z", "to": "2027-01-10T10:30:00.000Z"})
        assert [e["details"].get("agent_id") for e in window.data] == ["a1"]
        assert [e["action"] for e in trail(admin, action="limits.changed").data] == ["limits.changed"]
        refusals = (({"from": "yesterday"}, "/from"), ({"action": "key.lost"}, "/action"), ({"limit": "0"}, "/limit"))
        for query, pointer in refusals:
            refused = trail(admin, **query)
            assert refused.status == 400, refused.raw_body
            assert refused.error["details"]["errors"][0]["pointer"] == pointer
    # A key without audit:read reads nothing
    assert trail(tenant_key(services, tenant, {"checkpoints:read"})).status == 403
    proof_counts.record(SUITE, filters=3, refusals=4)


def test_appends_racing_from_two_containers_never_fork_the_chain(services: Services, engine: str) -> None:
    if engine == "moto":
        pytest.skip("moto checks a condition and writes without holding one lock between threads; DynamoDB Local holds")
    tenant = f"audit-c-{engine}"
    containers = [services_on(services.settings.table_name) for _ in range(2)]
    actor = Actor("key_" + "b" * 32, "racer")

    def append(container: Services, n: int) -> None:
        # One event an append, then two (a request that acted on two things: each chained after the other)
        for k in range(4):
            happened = Happened("limits.changed", actor, f"r-{n}-{k}", {"type": "tenant", "id": tenant})
            container.audit.append(tenant, [happened], now_ms())
        for k in range(4, 8, 2):
            pair = [Happened("thread.deleted", actor, f"r-{n}-{k}", {"type": "thread", "id": f"t-{j}"}) for j in (1, 2)]
            container.audit.append(tenant, pair, now_ms())

    threads = [threading.Thread(target=append, args=(c, n)) for n, c in enumerate(containers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found, _ = services.audit.page(tenant, None, None, None, 100, None)
    head = services.audit.head(tenant)
    assert sorted(e["seq"] for e in found) == list(range(1, 17))
    assert problems_of(found, {"seq": head.seq, "hash": head.hash}) == []
    proof_counts.record(SUITE, raced_appends=16)


def test_an_event_removed_altered_or_cut_from_the_end_is_found(services: Services, engine: str) -> None:
    tenant = f"audit-d-{engine}"
    admin = tenant_key(services, tenant)
    for n in range(4):
        assert admin.invoke("create_key", body={"agent_id": f"b{n}", "scopes": ["checkpoints:read"]}).status == 201
    events, head = every_event(admin)
    assert problems_of(events, head) == []
    items = {e["seq"]: e for e in events}
    table = services.settings.table_name

    def key_of(event: dict[str, Any]) -> dict[str, Any]:

        return layout.key(layout.audit_pk(tenant), layout.audit_event_sk(event["seq"]))

    # Removed from the middle: a gap
    assert any("events 2 to 2 are missing" in p for p in problems_of([e for e in events if e["seq"] != 2], head))
    services.dynamodb.delete_item(TableName=table, Key=key_of(items[2]))
    after_removal, head = every_event(admin)
    assert any("missing" in p for p in problems_of(after_removal, head))
    # Altered: its content no longer hashes to its hash
    altered = dict(items[3], details={**items[3]["details"], "agent_id": "someone-else"})
    assert any("event 3 was altered" in p for p in problems_of([altered if e["seq"] == 3 else e for e in events], head))
    # The newest removed: the head names it still
    services.dynamodb.delete_item(TableName=table, Key=key_of(items[4]))
    cut, head = every_event(admin)
    assert any("events 4 to 4 are missing: the head names event 4" in p for p in problems_of(cut, head))
    proof_counts.record(SUITE, tamperings_found=3)


def test_an_empty_range_answers_no_event(services: Services, engine: str) -> None:
    admin = tenant_key(services, f"audit-e-{engine}")
    assert admin.invoke("create_key", body={"agent_id": "x", "scopes": ["checkpoints:read"]}).status == 201
    for query in (
        {"from": "2027-01-02T00:00:00Z", "to": "2027-01-01T00:00:00Z"},
        {"to": "1969-12-31T23:59:59Z"},
        {"from": "0001-01-01T00:00:00Z", "to": "0001-01-02T00:00:00Z"},
        {"from": "9999-12-31T23:59:59Z"},
    ):
        answer = trail(admin, **query)
        assert answer.status == 200, (query, answer.raw_body)
        assert answer.data == [], query
    assert len(trail(admin, **{"from": "0001-01-01T00:00:00Z"}).data) == 1
    proof_counts.record(SUITE, empty_ranges=4)


def test_a_prune_that_deletes_threads_records_each_thread_deleted(services: Services, engine: str) -> None:
    admin = tenant_key(services, f"audit-f-{engine}")
    # Given three threads, two of them pruned by deletion (with one that never existed), one pruned to its latest
    for n, thread_id in enumerate(("t-1", "t-2", "t-3"), start=1):
        for m in (1, 2):
            checkpoint_id = f"1ef00000-0000-6000-8000-00000000000{m}"
            assert thread_put(admin, thread_id, checkpoint_id, b"x" * n).status == 201
    prune = {"thread_ids": ["t-1", "never", "t-2", "t-1"], "strategy": "delete"}
    pruned = admin.invoke("save_checkpoint", path="/v1/threads:prune", body=prune)
    assert pruned.status == 200, pruned.raw_body
    assert pruned.data["pruned_threads"] == 2
    kept = admin.invoke("save_checkpoint", path="/v1/threads:prune", body={"thread_ids": ["t-3"]})
    assert kept.status == 200, kept.raw_body
    # When the trail is read
    events, head = every_event(admin)
    # Then each thread the prune deleted has its event, in the order named, from the prune's request; the prune
    # that kept the latest checkpoint deleted no thread, and a prune again deletes none
    assert [(e["action"], e["target"]) for e in events] == [
        ("thread.deleted", {"type": "thread", "id": "t-2"}),
        ("thread.deleted", {"type": "thread", "id": "t-1"}),
    ]
    assert {e["request_id"] for e in events} == {pruned.body["meta"]["request_id"]}
    assert all(e["details"] == {"agent_id": "worker"} for e in events)
    assert problems_of(events, head) == []
    again = admin.invoke("save_checkpoint", path="/v1/threads:prune", body=prune)
    assert again.status == 200, again.raw_body
    assert again.data["pruned_threads"] == 0
    assert every_event(admin)[0] == events
    proof_counts.record(SUITE, actions=len(events))


def test_the_operator_reads_a_customers_trail_and_a_tenant_reads_no_other(
    api: ApiDriver, services: Services, engine: str
) -> None:
    tenant, other = f"audit-g-{engine}", f"audit-h-{engine}"
    admin, stranger = tenant_key(services, tenant), tenant_key(services, other)
    # Given a customer's trail of three events
    for n in range(3):
        assert admin.invoke("create_key", body={"agent_id": f"a{n}", "scopes": ["checkpoints:read"]}).status == 201
    # When the integrator's operator key names the customer, page by page
    first = trail(api, tenant_id=tenant, limit="2")
    assert first.status == 200, first.raw_body
    following = trail(api, tenant_id=tenant, limit="2", cursor=first.body["meta"]["next_cursor"])
    # Then it reads the customer's trail, the same as the customer does
    events = first.data + following.data
    assert [e["seq"] for e in events] == [3, 2, 1]
    assert events == every_event(admin)[0]
    assert problems_of(events, first.body["meta"]["head"]) == []
    # And a page's cursor serves that tenant's trail only
    forged = trail(api, limit="2", cursor=first.body["meta"]["next_cursor"])
    assert forged.status == 400, forged.raw_body
    assert forged.error["details"]["errors"][0]["pointer"] == "/cursor"
    # And a tenant's key without tenants:manage names no other tenant (its own, it may)
    refused = trail(stranger, tenant_id=tenant)
    assert refused.status == 403, refused.raw_body
    assert "tenants:manage" in refused.error["message"]
    assert trail(admin, tenant_id=tenant).data == trail(admin).data
    proof_counts.record(SUITE, operator_reads=2)


def test_a_prune_that_fails_partway_records_the_threads_it_deleted(services: Services, engine: str) -> None:
    from tests.integration.faults import THROTTLING, Duration, Fault, Phase, injected

    admin = tenant_key(services, f"audit-i-{engine}")
    for thread_id in ("t-1", "t-2"):
        assert thread_put(admin, thread_id, "1ef00000-0000-6000-8000-000000000001", b"x").status == 201
    prune = {"thread_ids": ["t-1", "t-2"], "strategy": "delete"}
    # When the prune deletes t-1, then DynamoDB keeps refusing t-2's delete (its hiding write, the prune's second
    # UpdateItem)
    with injected(services.dynamodb) as injector:
        fault = injector.arm(Fault("UpdateItem", THROTTLING, Phase.BEFORE, Duration.EVERY, skip=1))
        failed = admin.invoke("save_checkpoint", path="/v1/threads:prune", body=prune)
    assert fault.struck >= 1, injector.attempts
    # Then the answer is a 503, and t-1's deletion is in the trail all the same (a retry skips t-1: it is gone)
    assert failed.status == 503, failed.raw_body
    assert [e["target"]["id"] for e in every_event(admin)[0]] == ["t-1"]
    # And the retry deletes t-2, whose event follows
    again = admin.invoke("save_checkpoint", path="/v1/threads:prune", body=prune)
    assert again.status == 200, again.raw_body
    assert again.data["pruned_threads"] == 1
    events, head = every_event(admin)
    assert [e["target"]["id"] for e in events] == ["t-2", "t-1"]
    assert problems_of(events, head) == []
    proof_counts.record(SUITE, actions=len(events))
