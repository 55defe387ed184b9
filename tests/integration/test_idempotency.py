"""Idempotency: a retry with the same key replays the first answer and never writes twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.domain.checkpoints import IdempotencyClaim, plan_save, request_fingerprint
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.models import SaveCheckpointRequest
from tests.builders import KIND, SUBJECT, lookup, save, save_body
from tests.integration.conftest import put_key
from tests.integration.driver import ApiDriver, CallCounter, load_event

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
PLANNER_SECRET = "btn_test_planner_secret_0001"
WRITER_SECRET = "btn_test_writer_secret_00001"


def test_replay_repeats_the_first_answer_even_after_two_later_revisions(api: ApiDriver) -> None:
    # Given a checkpoint created with an Idempotency-Key, then updated twice without one
    first = save(api, "create-once", state={"step": 1})
    assert first.status == 201
    assert save(api, None, state={"step": 2}).data["revision"] == 2
    assert save(api, None, state={"step": 3}).data["revision"] == 3
    replay = save(api, "create-once", state={"step": 1})
    # The first answer comes back (status, data and ETag) marked as a replay, with its own request id
    assert replay.status == 201
    assert replay.data == first.data
    assert replay.data["revision"] == 1
    assert replay.header("ETag") == first.header("ETag")
    assert replay.header("Idempotent-Replayed") == "true"
    assert first.header("Idempotent-Replayed") is None
    assert replay.body["meta"]["request_id"] != first.body["meta"]["request_id"]
    # And the checkpoint itself was not touched by the replay
    assert lookup(api).data["revision"] == 3


def test_same_key_with_a_different_body_is_refused_and_writes_nothing(api: ApiDriver, counter: CallCounter) -> None:
    assert save(api, "k-1", state={"step": 1}).status == 201
    counter.reset()
    reused = save(api, "k-1", state={"step": 2})
    assert reused.status == 422
    assert reused.error["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert not WRITE_OPERATIONS & set(counter.calls)
    current = lookup(api)
    assert current.data["revision"] == 1
    assert current.data["state"] == {"step": 1}


def test_same_key_with_a_semantically_equal_body_replays(api: ApiDriver) -> None:
    first = api.invoke(
        "save_checkpoint", raw_body='{"subject_id":"user_rama","kind":"task_state","state":{"a":1,"b":2}}'
    )
    assert first.status == 201
    # When the same request arrives with its keys reordered and other whitespace (the same canonical body)
    again = api.invoke(
        "save_checkpoint", raw_body='{ "state": {"b": 2, "a": 1}, "kind": "task_state", "subject_id": "user_rama" }'
    )
    assert again.status == 201
    assert again.header("Idempotent-Replayed") == "true"
    assert again.data == first.data


def test_keys_belong_to_the_agent_another_agent_uses_the_same_key_string_independently(
    api: ApiDriver, services: Any
) -> None:
    put_key(services, PLANNER_SECRET, "acme", "planner", {"checkpoints:read", "checkpoints:write"}, "key_" + "1" * 32)
    put_key(services, WRITER_SECRET, "acme", "writer", {"checkpoints:read", "checkpoints:write"}, "key_" + "2" * 32)
    planner = save(api, "shared-key", secret=PLANNER_SECRET, state={"by": "planner"})
    assert planner.status == 201
    # Another agent's same key string with another body: a first request of its own, neither replay nor reuse
    writer = save(api, "shared-key", secret=WRITER_SECRET, state={"by": "writer"})
    assert writer.status == 201
    assert writer.header("Idempotent-Replayed") is None
    assert writer.data["agent_id"] == "writer"
    assert writer.data["checkpoint_id"] != planner.data["checkpoint_id"]
    assert lookup(api, secret=WRITER_SECRET).data["state"] == {"by": "writer"}
    assert lookup(api, secret=PLANNER_SECRET).data["state"] == {"by": "planner"}
    # Each agent's own retry still replays its own first answer
    assert save(api, "shared-key", secret=PLANNER_SECRET, state={"by": "planner"}).data == planner.data


def test_keys_belong_to_the_tenant_another_tenant_uses_the_same_key_string_independently(
    api: ApiDriver, services: Any
) -> None:
    assert save(api, "tenant-key", state={"tenant": "acme"}).status == 201
    # An agent of the same name in another tenant
    put_key(services, PLANNER_SECRET, "globex", "operator", {"*"}, "key_" + "3" * 32)
    other = save(api, "tenant-key", secret=PLANNER_SECRET, state={"tenant": "globex"})
    assert other.status == 201
    assert other.header("Idempotent-Replayed") is None


def test_a_validation_error_consumes_no_key(api: ApiDriver) -> None:
    rejected = save(api, "v", kind="novel", state={})
    assert rejected.status == 400
    accepted = save(api, "v")
    assert accepted.status == 201
    assert accepted.header("Idempotent-Replayed") is None


def test_a_revision_conflict_consumes_no_key_and_the_same_request_succeeds_later(api: ApiDriver) -> None:
    # Nothing exists yet
    rejected = save(api, "after-create", state={"step": 2}, expected_revision=1)
    assert rejected.status == 409
    assert rejected.error["code"] == "REVISION_CONFLICT"
    assert save(api, None, state={"step": 1}).status == 201
    retried = save(api, "after-create", state={"step": 2}, expected_revision=1)
    # Applied: not replayed as the 409, not refused as a reuse
    assert retried.status == 200
    assert retried.data["revision"] == 2
    assert retried.header("Idempotent-Replayed") is None


def test_a_conflict_then_a_different_valid_request_with_the_same_key_succeeds(api: ApiDriver) -> None:
    assert save(api, "k-409", expected_revision=3).status == 409
    accepted = save(api, "k-409", state={"fresh": True})
    assert accepted.status == 201


def test_a_record_older_than_24_hours_counts_as_absent(api: ApiDriver) -> None:
    start = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        # On a checkpoint that lives 30 days
        first = save(api, "daily", state={"day": 1}, ttl_seconds=2_592_000)
        assert first.status == 201
        traveller.shift(timedelta(hours=24) - timedelta(milliseconds=1))
        within = save(api, "daily", state={"day": 1}, ttl_seconds=2_592_000)
        assert within.header("Idempotent-Replayed") == "true"
        assert within.data == first.data
        traveller.shift(timedelta(milliseconds=1))
        later = save(api, "daily", state={"day": 1}, ttl_seconds=2_592_000)
        different = save(api, "daily", state={"day": 2}, ttl_seconds=2_592_000)
        # The old record counts as absent: the first is a new write, and the key is then bound to it
        assert later.status == 200
        assert later.header("Idempotent-Replayed") is None
        assert later.data["revision"] == 2
        assert different.status == 422


def test_a_record_older_than_24_hours_frees_the_key_for_another_body(api: ApiDriver) -> None:
    start = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        assert save(api, "reuse-tomorrow", state={"day": 1}, ttl_seconds=2_592_000).status == 201
        traveller.shift(timedelta(hours=24, seconds=1))
        accepted = save(api, "reuse-tomorrow", state={"day": 2})
        assert accepted.status == 200
        assert accepted.data["revision"] == 2
        assert lookup(api).data["state"] == {"day": 2}


def _plan(request_id: str, state: Any, **fields: Any) -> Any:
    request = SaveCheckpointRequest.model_validate(save_body(state=state, **fields), strict=False)
    return plan_save(request, "acme", "operator", request_id, now_ms())


def _revision(services: Any) -> int:
    from baton_checkpoints.domain.checkpoints import CheckpointKey

    return services.checkpoints.get(CheckpointKey("acme", SUBJECT, "operator", KIND), now_ms()).revision


def test_an_idempotent_write_whose_answer_was_lost_is_recognised_and_not_applied_twice(services: Any) -> None:
    # Given an existing checkpoint and an idempotent save that landed but whose answer was lost
    services.checkpoints.save(_plan("req-create", {"step": 1}))
    plan = _plan("req-lost-answer", {"step": 2})
    claim = IdempotencyClaim(
        key="lost", agent_id="operator", fingerprint=request_fingerprint("POST", "/v1/checkpoints", {"step": 2})
    )
    first = services.checkpoints.save(plan, claim)
    # When the very same write (same request id) is sent again
    second = services.checkpoints.save(plan, claim)
    # Then it reports the same result, as its own (not a replay), and the revision was bumped only once
    assert second.saved == first.saved
    assert first.saved.revision == 2
    assert second.replayed is False
    assert _revision(services) == 2


def test_a_plain_write_whose_answer_was_lost_is_recognised_and_not_applied_twice(services: Any) -> None:
    # Given an existing checkpoint and a plain save that landed but whose answer was lost
    services.checkpoints.save(_plan("req-create", {"step": 1}))
    plan = _plan("req-plain-lost", {"step": 2})
    first = services.checkpoints.save(plan)
    # When the very same write (same request id) is retried
    second = services.checkpoints.save(plan)
    # Then it reports the same result and the revision moved once, never reported as a conflict
    assert second.saved == first.saved
    assert first.saved.revision == 2
    assert _revision(services) == 2


def test_a_plain_create_whose_answer_was_lost_is_reported_as_the_create(services: Any) -> None:
    # Given a plain save that created a checkpoint but whose answer was lost
    plan = _plan("req-plain-create", {"step": 1})
    first = services.checkpoints.save(plan)
    # When it is retried with the same request id
    second = services.checkpoints.save(plan)
    # Then the retry reports the create (revision 1, not updated), and nothing was written again
    assert first.created is True
    assert second.created is True
    assert second.saved == first.saved
    assert _revision(services) == 1


def test_a_lost_write_with_expected_revision_is_not_reported_as_a_conflict(services: Any) -> None:
    # Given a checkpoint at revision 1 and a conditional save expecting it, whose answer was lost
    services.checkpoints.save(_plan("req-create", {"step": 1}))
    plan = _plan("req-conditional", {"step": 2}, expected_revision=1)
    first = services.checkpoints.save(plan)
    # When the same write is retried (the revision is now 2, not 1)
    second = services.checkpoints.save(plan)
    # Then it is recognised as applied, not answered with REVISION_CONFLICT
    assert second.saved == first.saved
    assert _revision(services) == 2


def test_a_plain_save_event_retried_with_the_same_request_id_does_not_write_twice(
    api: ApiDriver, services: Any
) -> None:
    from baton_checkpoints.handlers.api import handler

    assert save(api, None, state={"step": 1}).status == 201
    event = load_event("save_checkpoint")
    event["headers"].pop("idempotency-key")
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    event["body"] = '{"subject_id":"user_rama","kind":"task_state","state":{"step":2}}'
    first = handler(event, None)
    second = handler(event, None)  # the same event again: the same request id
    assert first["statusCode"] == second["statusCode"] == 200
    assert first["body"] == second["body"]
    assert _revision(services) == 2


def test_replay_of_an_update_repeats_its_200(api: ApiDriver) -> None:
    assert save(api, None).status == 201
    first = save(api, "update-key", state={"step": 2})
    assert first.status == 200
    assert save(api, None, state={"step": 3}).data["revision"] == 3
    replay = save(api, "update-key", state={"step": 2})
    assert replay.status == 200
    assert replay.data == first.data
    assert replay.data["updated"] is True
    assert replay.header("ETag") == first.header("ETag")
    assert replay.header("Idempotent-Replayed") == "true"


@pytest.mark.parametrize(
    "key", ["", "x" * 201, "tab\there", "naïve"], ids=["empty", "too-long", "control", "non-ascii"]
)
def test_an_invalid_idempotency_key_is_400_and_writes_nothing(api: ApiDriver, key: str) -> None:
    answer = save(api, key)
    assert answer.status == 400
    assert answer.error["code"] == "VALIDATION_ERROR"
    assert "Idempotency-Key" in answer.error["message"]
    assert lookup(api).status == 404


def test_an_idempotency_key_of_200_printable_characters_is_accepted(api: ApiDriver) -> None:
    key = ("step 3/7: ~!" * 20)[:200]  # the longest the contract allows, with spaces and punctuation
    first = save(api, key)
    again = save(api, key)
    assert first.status == 201
    assert again.header("Idempotent-Replayed") == "true"
