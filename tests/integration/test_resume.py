"""`POST /v1/resume` through the api handler, against in-process moto: every status, the OpenCheckpoint lifts,
cross-agent reads, the budget on the raw body, the requests each case costs, and that nothing is ever written."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from baton_checkpoints.api.operations import resume as resume_operation
from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import limits
from baton_checkpoints.store import items, layout
from tests.builders import KIND, SEED_DOCUMENT, SUBJECT, save
from tests.integration.conftest import OPERATOR_SECRET, TABLE, aws_world, put_key, table_items
from tests.integration.driver import ApiDriver, CallCounter, Result
from tests.integration.test_resources import declare
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

WORKER_SECRET = "btn_test_resume_worker_secret_01"
OTHER_TENANT_SECRET = "btn_test_resume_other_tenant_001"
WRITER_SECRET = "btn_test_resume_writer_only_0001"
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
OPENCHECKPOINT = "opencheckpoint/0.1"
MISSING_ID = "ckpt_" + "0" * 32


@pytest.fixture(scope="module")
def world(engine: str) -> Iterator[Services]:
    """One world for this module, per engine (a new one per test costs ~0.5 s): each test works on its own subject.
    Keys: the operator (`*`, tenant acme), agent `worker` of acme without `*`, a `*` key of tenant globex, and a key
    of acme without `checkpoints:read`."""
    with aws_world(engine):
        from baton_checkpoints.api.app import app

        services: Services = app.services()
        put_key(services, OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
        put_key(services, WORKER_SECRET, "acme", "worker", {"checkpoints:read", "checkpoints:write"}, "key_" + "c" * 32)
        put_key(services, OTHER_TENANT_SECRET, "globex", "operator", {"*"}, "key_" + "d" * 32)
        put_key(services, WRITER_SECRET, "acme", "writer", {"checkpoints:write"}, "key_" + "e" * 32)
        yield services


@pytest.fixture
def services(world: Services) -> Services:
    """The module's services (in place of conftest's fresh world per test)."""
    return world


@pytest.fixture
def api(world: Services) -> ApiDriver:
    """A driver holding the operator key."""
    return ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def subject() -> str:
    """This test's own subject."""
    return f"resume-{uuid.uuid4().hex}"


@pytest.fixture
def warm(api: ApiDriver, counter: CallCounter) -> CallCounter:
    """Every key authenticated once (their records cached in the container), then counting from zero."""
    for secret in (api.secret, WORKER_SECRET):
        assert resume(api, "warm-up", secret=secret).status == 200
    counter.reset()
    return counter


def resume(
    api: ApiDriver,
    subject_id: str,
    *,
    secret: str | None = None,
    headers: dict[str, str | None] | None = None,
    **body: Any,
) -> Result:
    """POST /v1/resume with `{"subject_id": subject_id, **body}`."""
    answer = api.invoke("resume", body={"subject_id": subject_id, **body}, secret=secret, headers=headers)
    record("resume (integration)", requests=1)
    return answer


def put(api: ApiDriver, subject_id: str, *, secret: str | None = None, **fields: Any) -> str:
    """Save (plainly) on `subject_id`; the checkpoint's id."""
    answer = save(api, secret=secret, subject_id=subject_id, **fields)
    assert answer.status in (200, 201), answer.raw_body
    checkpoint_id: str = answer.data["checkpoint_id"]
    return checkpoint_id


def raw_data(answer: Result) -> str:
    """The `data` value exactly as the body carries it: the text between `{"data":` and `,"meta":`."""
    body = answer.raw_body
    assert body.startswith('{"data":'), body[:80]
    return body[len('{"data":') : body.rindex(',"meta":')]


def get_by_id(api: ApiDriver, checkpoint_id: str, secret: str | None = None) -> Result:
    return api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", secret=secret)


# --- every status ----------------------------------------------------------------------------------


def test_nothing_saved_for_the_subject_is_none(api: ApiDriver, subject: str) -> None:
    answer = resume(api, subject)
    assert answer.status == 200
    assert raw_data(answer) == '{"status":"none"}'


def test_the_sample_event_resumes_the_samples_checkpoint(api: ApiDriver, world: Services) -> None:
    checkpoint_id = put(api, SUBJECT, kind=KIND)
    answer = api.invoke("resume")  # events/resume.json as shipped: subject, kind and a budget
    assert answer.status == 200, answer.raw_body
    assert answer.data["status"] == "ready"
    assert answer.data["checkpoint"]["checkpoint_id"] == checkpoint_id


def test_one_active_checkpoint_is_ready_with_the_record_exactly_as_get_by_id_answers_it(
    api: ApiDriver, subject: str
) -> None:
    checkpoint_id = put(api, subject, state={"step": 3, "note": "résumé"}, source={"host": "ci"})
    answer = resume(api, subject)
    assert answer.status == 200
    assert raw_data(answer) == f'{{"status":"ready","checkpoint":{raw_data(get_by_id(api, checkpoint_id))}}}'
    assert answer.data["checkpoint"]["state"] == {"step": 3, "note": "résumé"}
    assert "pending_operations" not in answer.data
    assert "stop_conditions" not in answer.data


def test_two_active_checkpoints_are_ambiguous_newest_first_without_state_and_never_a_guess(
    api: ApiDriver, subject: str
) -> None:
    older = put(api, subject, kind="workflow", state={"w": 1})
    newer = put(api, subject, kind="cursor", state={"c": 1})
    answer = resume(api, subject)
    assert answer.data["status"] == "ambiguous"
    assert answer.data["candidate_count"] == 2
    assert [c["checkpoint_id"] for c in answer.data["candidates"]] == [newer, older]
    assert all("state" not in c for c in answer.data["candidates"])
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{subject}/checkpoints", query={})
    assert answer.data["candidates"] == listed.data  # the summaries the list route shows


def test_kind_or_checkpoint_id_narrows_several_candidates_to_the_ready_one(api: ApiDriver, subject: str) -> None:
    workflow = put(api, subject, kind="workflow")
    cursor = put(api, subject, kind="cursor", state={"c": 2})
    by_kind = resume(api, subject, kind="cursor")
    by_id = resume(api, subject, checkpoint_id=workflow)
    assert (by_kind.data["status"], by_kind.data["checkpoint"]["checkpoint_id"]) == ("ready", cursor)
    assert (by_id.data["status"], by_id.data["checkpoint"]["checkpoint_id"]) == ("ready", workflow)


def test_a_checkpoint_id_of_another_subject_or_kind_or_none_at_all_is_none(api: ApiDriver, subject: str) -> None:
    elsewhere = put(api, f"{subject}-other")
    here = put(api, subject, kind="workflow")
    assert resume(api, subject, checkpoint_id=elsewhere).data == {"status": "none"}
    assert resume(api, subject, checkpoint_id=here, kind="cursor").data == {"status": "none"}
    assert resume(api, subject, checkpoint_id=MISSING_ID).data == {"status": "none"}


def test_the_only_checkpoint_being_terminal_is_closed_with_its_summary(api: ApiDriver, subject: str) -> None:
    checkpoint_id = put(api, subject, status="completed")
    for fields in ({}, {"kind": KIND}, {"checkpoint_id": checkpoint_id}):
        answer = resume(api, subject, **fields)
        assert answer.data["status"] == "closed", fields
        assert answer.data["checkpoint"]["checkpoint_id"] == checkpoint_id
        assert answer.data["checkpoint"]["status"] == "completed"
        assert "state" not in answer.data["checkpoint"]


def test_an_active_checkpoint_beside_terminal_ones_is_ready(api: ApiDriver, subject: str) -> None:
    put(api, subject, kind="workflow", status="completed")
    put(api, subject, kind="conversation", status="cancelled")
    active = put(api, subject, kind="cursor")
    answer = resume(api, subject)
    assert (answer.data["status"], answer.data["checkpoint"]["checkpoint_id"]) == ("ready", active)


def test_several_terminal_checkpoints_and_no_active_one_are_ambiguous_among_them(api: ApiDriver, subject: str) -> None:
    first = put(api, subject, kind="workflow", status="completed")
    second = put(api, subject, kind="cursor", status="cancelled")
    answer = resume(api, subject)
    assert answer.data["status"] == "ambiguous"
    assert answer.data["candidate_count"] == 2
    assert [c["checkpoint_id"] for c in answer.data["candidates"]] == [second, first]


def test_an_expired_checkpoint_is_not_resumed(api: ApiDriver, services: Services, subject: str) -> None:
    checkpoint_id = put(api, subject)
    services.dynamodb.update_item(
        TableName=TABLE,
        Key=layout.checkpoint_key("acme", subject, "operator", KIND),
        UpdateExpression="SET #expires = :past",
        ExpressionAttributeNames={"#expires": items.EXPIRES},
        ExpressionAttributeValues={":past": {"N": "1700000000.000"}},
    )
    for fields in ({}, {"kind": KIND}, {"checkpoint_id": checkpoint_id}):
        assert resume(api, subject, **fields).data == {"status": "none"}, fields


def test_candidates_are_cut_at_the_cap_and_the_count_says_how_many_matched_across_pages(
    api: ApiDriver, subject: str, warm: CallCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given five active checkpoints, pages of two summaries, and at most three candidates shown (the real figures,
    # 200 and 50, would take 200 saves: the unit tests hold the cap of 50)
    monkeypatch.setattr(resume_operation, "SUBJECT_PAGE", 2)
    monkeypatch.setattr(limits, "MAX_RESUME_CANDIDATES", 3)
    saved = [put(api, subject, agent_id=agent, kind="cursor") for agent in ("a1", "a2", "a3", "a4", "a5")]
    warm.reset()
    answer = resume(api, subject)
    assert answer.data["status"] == "ambiguous"
    assert answer.data["candidate_count"] == 5
    assert [c["checkpoint_id"] for c in answer.data["candidates"]] == saved[::-1][:3]
    # One Query per page: the cursor is followed while there are more
    assert dict(warm.calls) == {"Query": 3}


# --- the budget, on the raw body -------------------------------------------------------------------


def test_a_budget_one_byte_below_the_ready_data_is_omitted_and_exactly_at_it_is_ready(
    api: ApiDriver, subject: str
) -> None:
    # Multi-byte characters: the budget counts UTF-8 bytes
    checkpoint_id = put(api, subject, state={"notes": ["ünïcödé ✓ " * 40] * 10})
    unbounded = resume(api, subject)
    required = len(raw_data(unbounded).encode("utf-8"))
    assert required > len(raw_data(unbounded))
    below = resume(api, subject, budget_bytes=required - 1)
    at = resume(api, subject, budget_bytes=required)
    above = resume(api, subject, budget_bytes=required + 1)
    # One byte short: the size and the summary, nothing of the state
    assert below.data["status"] == "omitted"
    assert below.data["required_bytes"] == required
    assert below.data["checkpoint"]["checkpoint_id"] == checkpoint_id
    assert "state" not in below.data["checkpoint"]
    assert "ünïcödé" not in below.raw_body
    # Exactly at the size: the whole ready data, whose bytes are exactly required_bytes long
    for fitting in (at, above):
        assert fitting.data["status"] == "ready"
        assert len(raw_data(fitting).encode("utf-8")) == required
        assert raw_data(fitting) == raw_data(unbounded)


def test_the_smallest_budget_omits_a_larger_checkpoint_and_applies_only_to_a_ready_answer(
    api: ApiDriver, subject: str
) -> None:
    put(api, subject, kind="workflow", state={"pad": "x" * 3000})
    answer = resume(api, subject, budget_bytes=1024)
    assert answer.data["status"] == "omitted"
    assert answer.data["required_bytes"] > 3000
    put(api, subject, kind="cursor", state={"pad": "x" * 3000})
    assert resume(api, subject, budget_bytes=1024).data["status"] == "ambiguous"


# --- OpenCheckpoint documents ----------------------------------------------------------------------


def test_the_seed_document_resumes_with_its_pending_operations_and_stop_conditions_listed_apart(
    api: ApiDriver, subject: str
) -> None:
    document = {
        **SEED_DOCUMENT,
        "operations": [
            *SEED_DOCUMENT["operations"],
            {"kind": "lookup", "status": "done", "description": "Read both charges.", "repeat_safe": True},
        ],
    }
    put(api, subject, state=document, format=OPENCHECKPOINT)
    answer = resume(api, subject)
    assert answer.data["status"] == "ready"
    assert list(answer.data) == ["status", "checkpoint", "pending_operations", "stop_conditions"]
    assert answer.data["pending_operations"] == SEED_DOCUMENT["operations"]  # the done one is not pending
    assert answer.data["stop_conditions"] == [{"description": "Never refund both charges."}]
    assert answer.data["checkpoint"]["state"] == document
    assert answer.data["checkpoint"]["format"] == OPENCHECKPOINT
    # The lifted lists count toward the budget
    required = len(raw_data(answer).encode("utf-8"))
    assert resume(api, subject, budget_bytes=required - 1).data["required_bytes"] == required
    assert resume(api, subject, budget_bytes=required).data["status"] == "ready"


def test_a_document_without_operations_or_stop_conditions_lists_both_empty(api: ApiDriver, subject: str) -> None:
    put(
        api,
        subject,
        state={"opencheckpoint": "0.1", "task": {"title": "Rotate keys", "status": "open"}},
        format=OPENCHECKPOINT,
    )
    answer = resume(api, subject)
    assert (answer.data["pending_operations"], answer.data["stop_conditions"]) == ([], [])


def test_a_plain_state_shaped_like_a_document_lists_neither(api: ApiDriver, subject: str) -> None:
    put(api, subject, state=SEED_DOCUMENT)
    answer = resume(api, subject)
    assert answer.data["status"] == "ready"
    assert "pending_operations" not in answer.data
    assert "stop_conditions" not in answer.data


# --- whose checkpoints -----------------------------------------------------------------------------


def test_a_star_key_without_agent_id_considers_every_agents_checkpoints(api: ApiDriver, subject: str) -> None:
    mine = put(api, subject)
    theirs = put(api, subject, secret=WORKER_SECRET)
    answer = resume(api, subject, kind=KIND)
    assert answer.data["status"] == "ambiguous"
    assert {c["checkpoint_id"] for c in answer.data["candidates"]} == {mine, theirs}
    assert {c["agent_id"] for c in answer.data["candidates"]} == {"operator", "worker"}


def test_a_star_key_naming_another_agent_resumes_that_agents_checkpoint(api: ApiDriver, subject: str) -> None:
    put(api, subject)
    theirs = put(api, subject, secret=WORKER_SECRET, state={"by": "worker"})
    answer = resume(api, subject, agent_id="worker")
    assert answer.data["status"] == "ready"
    assert raw_data(answer) == f'{{"status":"ready","checkpoint":{raw_data(get_by_id(api, theirs))}}}'
    assert resume(api, subject, agent_id="worker", kind=KIND).data["checkpoint"]["checkpoint_id"] == theirs
    assert resume(api, subject, agent_id="nobody").data == {"status": "none"}


def test_a_key_without_star_considers_only_its_own_agents_checkpoints(api: ApiDriver, subject: str) -> None:
    operators = put(api, subject)
    own = put(api, subject, secret=WORKER_SECRET)
    assert resume(api, subject, secret=WORKER_SECRET).data["checkpoint"]["checkpoint_id"] == own
    assert resume(api, subject, secret=WORKER_SECRET, agent_id="worker").data["checkpoint"]["checkpoint_id"] == own
    # Another agent's checkpoint named by id is simply no match
    assert resume(api, subject, secret=WORKER_SECRET, checkpoint_id=operators).data == {"status": "none"}


def test_a_key_without_star_naming_another_agent_gets_the_404_of_a_missing_checkpoint_byte_for_byte(
    api: ApiDriver, subject: str
) -> None:
    put(api, subject)
    missing = get_by_id(api, MISSING_ID, secret=WORKER_SECRET)
    for body in ({"agent_id": "operator"}, {"agent_id": "operator", "kind": KIND}, {"agent_id": "nobody"}):
        refused = resume(api, subject, secret=WORKER_SECRET, **body)
        assert refused.status == missing.status == 404
        assert refused.error == missing.error == {"code": "NOT_FOUND", "message": "Resource was not found."}
        assert refused.raw_body.replace(refused.body["meta"]["request_id"], "<id>") == missing.raw_body.replace(
            missing.body["meta"]["request_id"], "<id>"
        )


def test_another_tenants_checkpoints_are_never_considered(api: ApiDriver, subject: str) -> None:
    checkpoint_id = put(api, subject)
    for fields in ({}, {"kind": KIND, "agent_id": "operator"}, {"checkpoint_id": checkpoint_id}):
        assert resume(api, subject, secret=OTHER_TENANT_SECRET, **fields).data == {"status": "none"}, fields


def test_a_key_without_checkpoints_read_is_forbidden(api: ApiDriver, subject: str) -> None:
    refused = resume(api, subject, secret=WRITER_SECRET)
    assert (refused.status, refused.error["code"]) == (403, "FORBIDDEN")


def test_a_live_lease_shows_in_the_ready_record_and_the_candidates_and_resume_claims_nothing(
    api: ApiDriver, services: Services, subject: str
) -> None:
    leased = put(api, subject, kind="workflow", state={"pad": "x" * 2000})
    acquired = api.invoke(
        "acquire_lease",
        path=f"/v1/checkpoints/{leased}/lease",
        body={"ttl_seconds": 300, "holder": "worker-7"},
        headers={"idempotency-key": None},
    )
    assert acquired.status == 201, acquired.raw_body
    lease = {"holder": "worker-7", "expires_at": acquired.data["expires_at"]}
    before = table_items(services.dynamodb)
    ready = resume(api, subject)
    assert ready.data["status"] == "ready"
    assert ready.data["checkpoint"]["lease"] == lease
    assert raw_data(ready) == f'{{"status":"ready","checkpoint":{raw_data(get_by_id(api, leased))}}}'
    put(api, subject, kind="cursor")
    ambiguous = resume(api, subject)
    assert {c["checkpoint_id"]: c["lease"] for c in ambiguous.data["candidates"]}[leased] == lease
    omitted = resume(api, subject, kind="workflow", budget_bytes=1024)
    assert (omitted.data["status"], omitted.data["checkpoint"]["lease"]) == ("omitted", lease)
    # Reading the leased checkpoint neither took nor renewed its lease
    after = {(i["pk"]["S"], i["sk"]["S"]): i for i in table_items(services.dynamodb)}
    assert all(after[(i["pk"]["S"], i["sk"]["S"])] == i for i in before)


# --- read-only -------------------------------------------------------------------------------------


def test_resume_writes_nothing_whatever_it_answers(
    api: ApiDriver, services: Services, subject: str, warm: CallCounter
) -> None:
    put(api, subject, kind="workflow", status="completed")
    put(api, subject, kind="cursor", state={"pad": "y" * 2000})
    put(api, f"{subject}-two", kind="workflow")
    put(api, f"{subject}-two", kind="cursor")
    before = table_items(services.dynamodb)
    warm.reset()
    answers = [
        resume(api, subject),  # ready
        resume(api, subject, budget_bytes=1024),  # omitted
        resume(api, f"{subject}-two"),  # ambiguous
        resume(api, subject, kind="workflow"),  # closed
        resume(api, f"{subject}-none"),  # none
        resume(api, subject, headers={"idempotency-key": "resume-1"}),  # the header is not used
        resume(api, subject, headers={"idempotency-key": "resume-1"}, kind="cursor"),
    ]
    assert [a.data["status"] for a in answers] == ["ready", "omitted", "ambiguous", "closed", "none", "ready", "ready"]
    assert not any(a.header("Idempotent-Replayed") for a in answers)
    assert not WRITES & set(warm.calls), dict(warm.calls)
    assert table_items(services.dynamodb) == before


# --- requests per case -----------------------------------------------------------------------------


def test_kind_with_a_single_agent_costs_one_get_item(api: ApiDriver, subject: str, warm: CallCounter) -> None:
    put(api, subject, secret=WORKER_SECRET)
    put(api, subject)
    cases = [
        ({"secret": WORKER_SECRET, "kind": KIND}, "ready"),  # a key without *: its own agent
        ({"kind": KIND, "agent_id": "worker"}, "ready"),  # a * key naming the agent
        ({"kind": "cursor", "agent_id": "worker"}, "none"),  # nothing there
        ({"kind": KIND, "agent_id": "operator", "checkpoint_id": MISSING_ID}, "none"),  # another id in that slot
    ]
    for fields, status in cases:
        warm.reset()
        assert resume(api, subject, **fields).data["status"] == status
        assert dict(warm.calls) == {"GetItem": 1}, (fields, dict(warm.calls))
    record("resume (integration)", counted_cases=len(cases))


def test_checkpoint_id_costs_the_index_query_and_one_get_item(api: ApiDriver, subject: str, warm: CallCounter) -> None:
    checkpoint_id = put(api, subject)
    cases = [
        ({"checkpoint_id": checkpoint_id}, "ready", {"Query": 1, "GetItem": 1}),
        ({"checkpoint_id": MISSING_ID}, "none", {"Query": 1}),  # the index knows no such id: no GetItem
    ]
    for fields, status, calls in cases:
        warm.reset()
        assert resume(api, subject, **fields).data["status"] == status
        assert dict(warm.calls) == calls, (fields, dict(warm.calls))
    record("resume (integration)", counted_cases=len(cases))


def test_the_subject_costs_one_query_and_one_get_item_for_the_ready_checkpoint(
    api: ApiDriver, subject: str, warm: CallCounter
) -> None:
    put(api, subject, kind="workflow", status="completed")
    put(api, subject, kind="cursor", state={"pad": "z" * 2000})
    cases = [
        ({}, "ready", {"Query": 1, "GetItem": 1}),
        ({"budget_bytes": 1024}, "omitted", {"Query": 1, "GetItem": 1}),
        ({"kind": "workflow"}, "closed", {"Query": 1}),
        ({"kind": "conversation"}, "none", {"Query": 1}),
    ]
    for fields, status, calls in cases:
        warm.reset()
        assert resume(api, subject, **fields).data["status"] == status
        assert dict(warm.calls) == calls, (fields, dict(warm.calls))
    put(api, subject, kind="conversation")
    warm.reset()
    assert resume(api, subject).data["status"] == "ambiguous"
    assert dict(warm.calls) == {"Query": 1}
    record("resume (integration)", counted_cases=len(cases) + 1)


def test_a_spilled_state_resumes_with_one_more_s3_get_object(
    api: ApiDriver, services: Services, subject: str, warm: CallCounter, s3_calls: CallCounter
) -> None:
    # 300 KB of random hex: it does not pack below the item limit, so it lives in the bucket
    state = {"blob": secrets.token_hex(150_000)}
    checkpoint_id = put(api, subject, state=state)
    stored = services.dynamodb.get_item(
        TableName=TABLE, Key=layout.checkpoint_key("acme", subject, "operator", KIND), ConsistentRead=True
    )["Item"]
    assert items.state_object_of(stored) is not None, "the state was expected to spill to the bucket"
    warm.reset()
    s3_calls.reset()
    answer = resume(api, subject)
    assert answer.data["status"] == "ready"
    assert answer.data["checkpoint"]["state"] == state
    assert dict(warm.calls) == {"Query": 1, "GetItem": 1}
    assert dict(s3_calls.calls) == {"GetObject": 1}
    required = len(raw_data(answer).encode("utf-8"))
    omitted = resume(api, subject, budget_bytes=required - 1)
    assert (omitted.data["status"], omitted.data["required_bytes"]) == ("omitted", required)
    assert omitted.data["checkpoint"]["checkpoint_id"] == checkpoint_id
    assert len(omitted.raw_body) < 2000


def test_a_ready_answer_over_1_mb_is_encoded_for_lambda_and_its_data_still_measures_required_bytes(
    api: ApiDriver, subject: str
) -> None:
    # Given a state whose ready answer is larger than 1 MB: it travels base64-encoded, gzipped when accepted
    state = {"blob": secrets.token_hex(600_000)}
    put(api, subject, state=state)
    unbounded = resume(api, subject, headers={"accept-encoding": "gzip"})
    required = len(raw_data(unbounded).encode("utf-8"))
    assert required > 1_200_000
    for encoding in ("gzip", None):
        at = resume(api, subject, budget_bytes=required, headers={"accept-encoding": encoding})
        below = resume(api, subject, budget_bytes=required - 1, headers={"accept-encoding": encoding})
        assert at.header("content-encoding") == encoding
        assert at.data["status"] == "ready"
        assert len(raw_data(at).encode("utf-8")) == required
        assert (below.data["status"], below.data["required_bytes"]) == ("omitted", required)


def test_a_ready_checkpoint_with_resources_carries_download_urls_and_its_summaries_do_not(
    api: ApiDriver, services: Services, subject: str
) -> None:
    resource = declare(services, b"the quarterly report")
    put(api, subject, resources=[resource])
    ready = resume(api, subject).data["checkpoint"]["resources"]
    assert [r["blob_id"] for r in ready] == [resource["blob_id"]]
    assert ready[0]["download_url"].startswith("http")
    assert "download_expires_at" in ready[0]
    omitted = resume(api, subject, budget_bytes=1024).data
    assert omitted["status"] == "omitted"
    assert "download_url" not in omitted["checkpoint"]["resources"][0]


# --- a checkpoint that changes between the Query and the GetItem -----------------------------------


@pytest.mark.parametrize(
    ("change", "status"), [("close", "closed"), ("delete", "none")], ids=["closed meanwhile", "deleted meanwhile"]
)
def test_a_checkpoint_that_changes_between_its_summary_and_its_read_is_decided_again(
    api: ApiDriver, services: Services, subject: str, change: str, status: str
) -> None:
    put(api, subject)
    key = layout.checkpoint_key("acme", subject, "operator", KIND)
    changed: list[str] = []

    def meanwhile(params: Any, **_: Any) -> None:
        # Just before the route's GetItem of the chosen checkpoint, another writer closes or deletes it
        if changed or params.get("Key") != key:
            return
        changed.append(change)
        if change == "close":
            services.dynamodb.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #status = :done",
                ExpressionAttributeNames={"#status": items.STATUS},
                ExpressionAttributeValues={":done": {"S": "completed"}},
            )
        else:
            services.dynamodb.delete_item(TableName=TABLE, Key=key)

    services.dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", meanwhile)
    try:
        answer = resume(api, subject)
    finally:
        services.dynamodb.meta.events.unregister("provide-client-params.dynamodb.GetItem", meanwhile)
    assert changed == [change]
    assert answer.data["status"] == status


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"budget": 4096}, "/budget"),
        ({"budget_bytes": 1023}, "/budget_bytes"),
        ({"budget_bytes": 6_000_001}, "/budget_bytes"),
        ({"budget_bytes": "4096"}, "/budget_bytes"),
        ({"checkpoint_id": "ckpt_123"}, "/checkpoint_id"),
        ({"checkpoint_id": "CKPT_" + "0" * 32}, "/checkpoint_id"),
        ({"kind": "notes"}, "/kind"),
        ({"agent_id": "Not An Id"}, "/agent_id"),
    ],
)
def test_a_request_breaking_a_rule_is_400_naming_the_field(
    api: ApiDriver, subject: str, body: dict[str, Any], pointer: str
) -> None:
    refused = resume(api, subject, **body)
    assert refused.status == 400, refused.raw_body
    assert refused.error["code"] == "VALIDATION_ERROR"
    assert [e["pointer"] for e in refused.error["details"]["errors"]] == [pointer]
    assert pointer in refused.error["message"]


def test_a_body_without_a_valid_subject_id_or_not_a_json_object_is_400(api: ApiDriver) -> None:
    for body, pointer in (({"kind": KIND}, "/subject_id"), ({"subject_id": ""}, "/subject_id")):
        refused = api.invoke("resume", body=body)
        assert refused.status == 400
        assert [e["pointer"] for e in refused.error["details"]["errors"]] == [pointer]
    assert api.invoke("resume", raw_body="{").status == 400
    assert api.invoke("resume", raw_body=json.dumps([SUBJECT])).status == 400
