"""Regressions for what the black-box review of the core broke (issue 6), one test or more per defect.

Each failed on the code as the review found it; the defect's number in the issue is in the test's docstring.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.domain.checkpoints import RECENT_REQUESTS, CheckpointKey, plan_save
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.errors import MAX_REPORTED_ERRORS
from baton_checkpoints.domain.models import SaveCheckpointRequest
from tests.builders import KIND, PLAIN, SUBJECT, save
from tests.integration.conftest import DYNAMODB_LOCAL, data_items, put_key
from tests.integration.driver import ApiDriver, Result

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
MANAGER = "btn_review_manager_secret_001"  # keys:manage and checkpoints:read, agent `planner`, no *


def items(services: Any) -> list[dict[str, Any]]:
    """Every item of the table, sorted (the test may scan; the product never does)."""
    found: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": services.settings.table_name, "ConsistentRead": True}
    while True:
        response = services.dynamodb.scan(**request)
        found.extend(data_items(response["Items"]))
        if "LastEvaluatedKey" not in response:
            return sorted(found, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def create_key(api: ApiDriver, secret: str | None = None, **fields: Any) -> Result:
    body = {"agent_id": "planner", "scopes": ["checkpoints:read"], **fields}
    return api.invoke("create_key", body=body, secret=secret)


@pytest.fixture
def manager(api: ApiDriver, services: Any) -> ApiDriver:
    put_key(services, MANAGER, "acme", "planner", {"keys:manage", "checkpoints:read"}, "key_" + "1" * 32)
    return ApiDriver(MANAGER)


# -- 1. one key could break key management for its whole tenant -------------------------------------------


def test_a_year_below_1000_is_stored_in_four_digits_and_everything_reads_it_back(
    api: ApiDriver, manager: ApiDriver
) -> None:
    """Defect 1: `not_before` in year 999 was echoed as `999-06-01…`, then listing, revoking and using the key
    answered 500 for the whole tenant."""
    created = create_key(manager, not_before="0999-06-01T00:00:00Z")
    assert created.status == 201, created.raw_body
    assert created.data["not_before"] == "0999-06-01T00:00:00.000Z"
    for lister in (manager, api):
        listed = lister.invoke("list_keys", query={})
        assert listed.status == 200, listed.raw_body
        assert created.data["key_id"] in {k["key_id"] for k in listed.data}
    used = api.invoke(
        "lookup_checkpoint", query={"subject_id": "s", "kind": "task_state"}, secret=created.data["secret"]
    )
    assert used.status == 404, used.raw_body  # authenticated, and nothing saved yet
    revoked = manager.invoke("revoke_key", path=f"/v1/keys/{created.data['key_id']}")
    assert revoked.status == 200, revoked.raw_body


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expires_at", "9999-12-31T23:59:59-23:59"),  # year 10000 in UTC
        ("not_before", "0001-01-01T00:00:00+00:01"),  # year 0 in UTC
        ("not_before", "0000-06-01T00:00:00Z"),
    ],
)
def test_a_time_outside_years_1_to_9999_in_utc_is_refused_naming_the_field(
    api: ApiDriver, services: Any, field: str, value: str
) -> None:
    """Defect 1: such times answered 500 on create."""
    before = items(services)
    answer = create_key(api, **{field: value})
    assert answer.status == 400, answer.raw_body
    assert answer.error["details"]["errors"][0]["pointer"] == f"/{field}"
    assert "0001-9999" in answer.error["message"]
    assert items(services) == before


def test_an_unreadable_key_record_is_skipped_and_logged_never_a_500(
    api: ApiDriver, services: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 1: a record that cannot be read is skipped and logged, never a 500 for the tenant."""
    put_key(services, "btn_review_damaged_secret_01", "acme", "planner", {"checkpoints:read"}, "key_" + "2" * 32)
    damaged = next(i for i in items(services) if i.get("key_id", {}).get("S") == "key_" + "2" * 32)
    damaged["created_at"] = {"S": "999-06-01T00:00:00.000Z"}  # as the defect stored it
    services.dynamodb.put_item(TableName=services.settings.table_name, Item=damaged)
    listed = api.invoke("list_keys", query={})
    assert listed.status == 200, listed.raw_body
    assert "key_" + "2" * 32 not in {k["key_id"] for k in listed.data}
    assert "skipped an unreadable key record" in caplog.text
    used = api.invoke("list_keys", query={}, secret="btn_review_damaged_secret_01")
    assert used.status == 401
    assert api.invoke("revoke_key", path=f"/v1/keys/key_{'2' * 32}").status == 404


# -- 2. keys outlived their issuer; revocation could be sidestepped ------------------------------------------


def test_a_key_minted_without_expiry_expires_with_its_issuer(api: ApiDriver) -> None:
    """Defect 2: a key expiring in 8 s minted a key without expiry that kept working after its parent expired."""
    with time_machine.travel(START, tick=False):
        issuer_expiry = "2027-03-01T09:00:08.000Z"
        issuer = create_key(
            api, agent_id="planner", scopes=["keys:manage", "checkpoints:read"], expires_at=issuer_expiry
        )
        assert issuer.status == 201, issuer.raw_body
        child = create_key(api, secret=issuer.data["secret"])
        assert child.status == 201, child.raw_body
        assert child.data["expires_at"] == issuer_expiry
    with time_machine.travel(START + timedelta(seconds=9), tick=False):
        used = api.invoke("list_keys", query={}, secret=child.data["secret"])
        assert used.status == 401


def test_a_key_asking_to_outlive_its_issuer_is_refused(api: ApiDriver, services: Any) -> None:
    """Defect 2: a minted key never expires after its issuer."""
    with time_machine.travel(START, tick=False):
        issuer = create_key(api, scopes=["keys:manage", "checkpoints:read"], expires_at="2027-03-01T10:00:00Z")
        before = items(services)
        child = create_key(api, secret=issuer.data["secret"], expires_at="2027-03-01T10:00:00.001Z")
        assert child.status == 400, child.raw_body
        assert child.error["details"]["errors"][0]["pointer"] == "/expires_at"
        assert items(services) == before


def test_a_revoked_key_cannot_mint_or_revoke_even_where_it_is_cached(api: ApiDriver, services: Any) -> None:
    """Defect 2: a keys:manage key revoked a moment ago minted a key from a container that still cached it."""
    manager = create_key(api, scopes=["keys:manage", "checkpoints:read"])
    victim = create_key(api)
    secret = manager.data["secret"]
    # This container reads and caches the manager's record...
    assert api.invoke("list_keys", query={}, secret=secret).status == 200
    # ...and another container revokes it.
    record = services.keys.find_by_id("acme", manager.data["key_id"])
    services.keys.revoke(record, now_ms())
    before = items(services)
    minted = create_key(api, secret=secret)
    revoked = api.invoke("revoke_key", path=f"/v1/keys/{victim.data['key_id']}", secret=secret)
    assert (minted.status, revoked.status) == (401, 401), (minted.raw_body, revoked.raw_body)
    assert items(services) == before


# -- 3. a plain save could be applied twice ------------------------------------------------------------------


def _plan(request_id: str, step: int) -> Any:
    request = SaveCheckpointRequest.model_validate({"subject_id": "review", "kind": "task_state", "state": {"s": step}})
    return plan_save(request, "acme", "operator", request_id, now_ms())


def test_a_retried_plain_save_is_recognised_after_other_writers_saved(services: Any) -> None:
    """Defect 3: a save that landed, whose answer was lost, and that another writer saved over before the SDK's
    retry arrived, was applied again as a new revision with stale state."""
    store = services.checkpoints
    store.save(_plan("req-0", 0))
    lost = _plan("req-lost", 1)
    first = store.save(lost)  # lands at revision 2; its answer is lost
    for step in range(2, RECENT_REQUESTS + 1):  # seven other writes land in between (revisions 3..9)
        store.save(_plan(f"req-{step}", step))
    retried = store.save(lost)  # the SDK retries the same request
    current = store.get(CheckpointKey("acme", "review", "operator", "task_state"), now_ms())
    assert retried.saved == first.saved
    assert current.revision == RECENT_REQUESTS + 1
    assert json.loads(current.state_text or b"") == {"s": RECENT_REQUESTS}


def test_the_bound_of_remembered_request_ids_is_the_documented_one(services: Any) -> None:
    """Defect 3: the bound is stated in the docs; past it a retry is a new write (documented)."""
    store = services.checkpoints
    lost = _plan("req-lost", 1)
    store.save(lost)
    for step in range(2, RECENT_REQUESTS + 2):  # eight other writes: the lost one falls off
        store.save(_plan(f"req-{step}", step))
    again = store.save(lost)
    assert again.saved.revision == RECENT_REQUESTS + 2


# -- 4. throttled transactions answered 500 ------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_a_transaction_cancelled_for_throttling_answers_503_with_retry_after(
    api: ApiDriver, services: Any, reason: str
) -> None:
    """Defect 4: a TransactWriteItems cancelled for throttling reached the defect handler (500)."""
    from botocore.exceptions import ClientError

    def throttled(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": [{"Code": reason}, {"Code": "None"}],
            },
            "TransactWriteItems",
        )

    services.dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", throttled)
    try:
        before = items(services)
        answer = api.invoke("save_checkpoint", body={"subject_id": "t", "kind": "task_state", "state": {"a": 1}})
    finally:
        services.dynamodb.meta.events.unregister("before-call.dynamodb.TransactWriteItems", throttled)
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    assert int(answer.header("Retry-After") or "0") >= 1
    assert items(services) == before


# -- 5. validation errors were unbounded ---------------------------------------------------------------------


def test_a_body_of_120000_unknown_fields_gets_a_small_bounded_400(api: ApiDriver, services: Any) -> None:
    """Defect 5: 120,000 unknown fields in a 1.57 MB body answered 500 (the 400 was over Lambda's 6 MB)."""
    body = {"subject_id": "s", "kind": "task_state", "state": {}} | {f"x{i:06d}": 0 for i in range(120_000)}
    before = items(services)
    answer = api.invoke("save_checkpoint", body=body, headers=PLAIN)
    assert answer.status == 400
    details = answer.error["details"]
    assert len(details["errors"]) == MAX_REPORTED_ERRORS
    assert details["more"] == 120_000 - MAX_REPORTED_ERRORS
    assert len(answer.raw_body) < 20_000
    assert items(services) == before


def test_a_huge_field_name_is_not_echoed_whole(api: ApiDriver) -> None:
    """Defect 5: no request can amplify its answer (a field's name is quoted in its pointer and message)."""
    name = "\u0001" * 500_000  # each character is escaped to six bytes in the answer
    answer = api.invoke("save_checkpoint", body={"subject_id": "s", "kind": "task_state", "state": {}, name: 1})
    assert answer.status == 400
    assert len(answer.raw_body) < 20_000


# -- 6. entity tags with huge revisions answered 500 ---------------------------------------------------------


@pytest.mark.parametrize("digits", [39, 5_000])
def test_a_tag_with_a_huge_revision_does_not_match_and_does_not_fail(api: ApiDriver, digits: int) -> None:
    """Defect 6: If-None-Match / If-Match with `W/"<id>:<5,000 nines>"` answered 500."""
    saved = save(api)
    checkpoint_id = saved.data["checkpoint_id"]
    tag = f'W/"{checkpoint_id}:{"9" * digits}"'
    looked_up = api.invoke(
        "lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND}, headers={"if-none-match": tag}
    )
    by_id = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-none-match": tag})
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": tag})
    assert (looked_up.status, by_id.status) == (200, 200)
    assert deleted.status == 409, deleted.raw_body
    assert deleted.error["details"]["current_revision"] == 1


# -- 7. the key-list cursor leaked key ids: see test_key_listing_and_revocation; lists of checkpoints too ----


def test_a_page_of_checkpoints_is_empty_only_at_the_end(api: ApiDriver) -> None:
    """Defect 7 (its rule for every list): expired checkpoints the filter drops never make an empty page."""
    with time_machine.travel(START, tick=False):
        for kind in ("task_state", "conversation", "workflow"):
            save(api, subject_id="pages", kind=kind, state={"k": kind}, ttl_seconds=60)
    with time_machine.travel(START + timedelta(seconds=30), tick=False):
        save(api, subject_id="pages", kind="cursor", state={}, ttl_seconds=600)
    with time_machine.travel(START + timedelta(seconds=120), tick=False):
        # the three older ones expired; they sort after the live one
        first = api.invoke("list_subject_checkpoints", path="/v1/subjects/pages/checkpoints", query={"limit": "1"})
        assert [c["kind"] for c in first.data] == ["cursor"]
        assert first.body["meta"]["next_cursor"] is None


# -- 8. If-Match lists were not honoured ---------------------------------------------------------------------


@pytest.mark.parametrize("joined", [True, False])
def test_any_tag_of_an_if_match_list_matches(api: ApiDriver, joined: bool) -> None:
    """Defect 8: `If-Match: W/"a:1", W/"<current>:1"` answered 409 "names another checkpoint"."""
    saved = save(api)
    checkpoint_id = saved.data["checkpoint_id"]
    separator = "," if joined else ", "  # the gateway joins two If-Match headers with a bare comma
    header = f'W/"a:1"{separator}W/"{checkpoint_id}:1"'
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": header})
    assert deleted.status == 200, deleted.raw_body


def test_an_if_match_list_naming_only_stale_revisions_fails_the_precondition(api: ApiDriver) -> None:
    """Defect 8: the precondition still holds when no listed tag is current."""
    save(api)
    saved = save(api)
    checkpoint_id = saved.data["checkpoint_id"]
    header = f'W/"{checkpoint_id}:1", W/"{checkpoint_id}:3"'
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": header})
    assert deleted.status == 409
    assert "revisions 1, 3" in deleted.error["message"]


# -- 9. an over-limit state was compressed before it was refused ---------------------------------------------


def test_an_oversized_state_is_refused_without_compressing_it(
    api: ApiDriver, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 9: a state of 3,010,000 bytes of varied text took 2.3 s to be refused (Brotli ran first)."""
    from baton_checkpoints.store import codec

    def no_compression(text: bytes) -> bytes:
        raise AssertionError("an oversized state was compressed")

    monkeypatch.setattr(codec, "encode", no_compression)
    state = {"text": " ".join(f"word{i}" for i in range(400_000))[:3_010_000]}  # under the body limit
    before = items(services)
    answer = api.invoke("save_checkpoint", body={"subject_id": "big", "kind": "task_state", "state": state})
    assert answer.status == 413, answer.raw_body[:300]
    assert answer.error["details"]["field"] == "/state"
    assert items(services) == before


# -- 11. small ones --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tenant", ["acme", "globex"])
def test_a_save_naming_tenant_id_is_the_same_unknown_field_400_for_any_tenant(
    api: ApiDriver, services: Any, tenant: str
) -> None:
    """Defect 11: a save body with tenant_id answered 403 for another tenant but 400 for one's own."""
    put_key(services, "btn_review_writer_secret_001", "acme", "planner", {"checkpoints:write"}, "key_" + "3" * 32)
    answer = api.invoke(
        "save_checkpoint",
        body={"subject_id": "s", "kind": "task_state", "state": {}, "tenant_id": tenant},
        secret="btn_review_writer_secret_001",
    )
    assert answer.status == 400, answer.raw_body
    assert answer.error["details"]["errors"] == [
        {"pointer": "/tenant_id", "message": "/tenant_id is not a known field; remove it or check its spelling."}
    ]


def test_every_state_baton_serves_can_be_saved_back(api: ApiDriver, services: Any) -> None:
    """Found by the property tests and schemathesis: `2.99e16` was saved, served as `29915291971768410`, and the
    same state saved back was refused. Numbers past ±(2^53-1) are refused however written; the rest round-trip."""
    before = items(services)
    for number in ("1e20", "2.991529197176841e+16", "100000000000000000000", "1.5e300"):
        refused = api.invoke(
            "save_checkpoint",
            raw_body='{"subject_id":"doubles","kind":"task_state","state":{"n":' + number + "}}",
            headers=PLAIN,
        )
        assert refused.status == 400, refused.raw_body
        assert refused.error["details"]["errors"][0]["pointer"] == "/state/n"
    assert items(services) == before
    state = {"a": 9007199254740991.0, "b": -1e-7, "c": 0.1, "d": 123456789.125}
    saved = save(api, subject_id="doubles", state=state)
    assert saved.status == 201, saved.raw_body
    served = api.invoke("lookup_checkpoint", query={"subject_id": "doubles", "kind": "task_state"})
    again = api.invoke(
        "save_checkpoint",
        raw_body='{"subject_id":"doubles","kind":"task_state","state":' + json.dumps(served.data["state"]) + "}",
        headers=PLAIN,
    )
    assert again.status == 200, again.raw_body
    assert again.data["state_hash"] == saved.data["state_hash"]


# -- found by the review of this change -------------------------------------------------------------------------


def test_a_recognised_retry_reports_the_expiry_its_own_write_set(services: Any) -> None:
    """A retried save recognised after other writes reports the expiry it set, even when a later write changed
    ttl_seconds (it used to compute it from the ttl stored now)."""
    store = services.checkpoints
    request = SaveCheckpointRequest.model_validate(
        {"subject_id": "ttl", "kind": "task_state", "state": {"s": 0}, "ttl_seconds": 7200}
    )
    store.save(plan_save(request, "acme", "operator", "req-0", now_ms()))
    lost_request = SaveCheckpointRequest.model_validate({"subject_id": "ttl", "kind": "task_state", "state": {"s": 1}})
    lost = plan_save(lost_request, "acme", "operator", "req-lost", now_ms())
    first = store.save(lost)  # keeps ttl 7200; its answer is lost
    shorter = SaveCheckpointRequest.model_validate(
        {"subject_id": "ttl", "kind": "task_state", "state": {"s": 2}, "ttl_seconds": 600}
    )
    store.save(plan_save(shorter, "acme", "operator", "req-2", now_ms()))
    retried = store.save(lost)
    assert retried.saved == first.saved


@pytest.mark.parametrize("engine", [DYNAMODB_LOCAL], indirect=True)  # 301 saves: 2 s there, 28 s on moto
def test_a_filtered_page_skips_many_items_in_few_queries(api: ApiDriver, services: Any, counter: Any) -> None:
    """A page whose filter drops hundreds of items read them one Query per `limit + 1` items (a client could
    push a page past API Gateway's 30 s); reads now double each round."""
    store = services.checkpoints
    for i in range(300):
        request = SaveCheckpointRequest.model_validate(
            {"subject_id": "crowd", "kind": "task_state", "state": {"i": i}, "status": "completed"}
        )
        store.save(plan_save(request, "acme", f"agent-{i:03d}", f"req-{i}", now_ms()))
    request = SaveCheckpointRequest.model_validate({"subject_id": "crowd", "kind": "cursor", "state": {}})
    store.save(plan_save(request, "acme", "agent-000", "req-active", now_ms() - 60_000))  # the oldest
    counter.reset()
    page = api.invoke(
        "list_subject_checkpoints", path="/v1/subjects/crowd/checkpoints", query={"status": "active", "limit": "1"}
    )
    assert [c["kind"] for c in page.data] == ["cursor"]
    assert page.body["meta"]["next_cursor"] is None
    assert counter.calls["Query"] <= 10


@pytest.mark.parametrize("content_type", ["Application/JSON", "APPLICATION/JSON; charset=UTF-8"])
def test_a_media_type_in_capitals_is_json_too(api: ApiDriver, content_type: str) -> None:
    """Media types are case-insensitive; these answered 500 (powertools compares them case-sensitively)."""
    answer = api.invoke(
        "save_checkpoint",
        body={"subject_id": "case", "kind": "task_state", "state": {}},
        headers={"content-type": content_type, **PLAIN},
    )
    assert answer.status == 201, answer.raw_body


def test_an_integer_written_with_a_fraction_is_that_integer(api: ApiDriver) -> None:
    """Found by schemathesis: the document (JSON Schema) counts 3600.0 as an integer and Baton refused it."""
    answer = api.invoke(
        "save_checkpoint",
        raw_body='{"subject_id":"f","kind":"task_state","state":{"n":2.0},"ttl_seconds":3600.0,"keep_revisions":2e0}',
        headers=PLAIN,
    )
    assert answer.status == 201, answer.raw_body
    served = api.invoke("lookup_checkpoint", query={"subject_id": "f", "kind": "task_state"})
    assert (served.data["ttl_seconds"], served.data["keep_revisions"], served.data["state"]) == (3600, 2, {"n": 2})
