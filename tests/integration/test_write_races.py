"""What real DynamoDB does that moto does not: single-item writes meeting an in-flight transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import PLAIN, lookup, save, save_body
from tests.integration.driver import ApiDriver

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

RACE = "race"


def _conflict_once(services: Any, operation: str, times: int = 1) -> list[int]:
    """Make the client's next `times` calls of `operation` fail with TransactionConflictException."""
    client = services.dynamodb
    original: Callable[..., Any] = getattr(client, operation)
    failures = [times]

    def flaky(**kwargs: Any) -> Any:
        if failures[0] > 0:
            failures[0] -= 1
            raise client.exceptions.TransactionConflictException(
                {"Error": {"Code": "TransactionConflictException", "Message": "in a transaction"}}, operation
            )
        return original(**kwargs)

    setattr(client, operation, flaky)
    return failures


def test_a_plain_save_meeting_a_transaction_tries_again_and_lands_once(api: ApiDriver, services: Any) -> None:
    # Given a checkpoint, and its next UpdateItem meeting an idempotent save's transaction
    assert save(api, subject_id=RACE, state={"step": 1}).status == 201
    remaining = _conflict_once(services, "update_item")
    result = save(api, subject_id=RACE, state={"step": 2})
    # Retried, and landed once
    assert result.status == 200, result.raw_body
    assert result.data["revision"] == 2
    assert remaining == [0]


def test_a_delete_meeting_a_transaction_answers_503_and_deletes_nothing(api: ApiDriver, services: Any) -> None:
    # Given a checkpoint whose DeleteItem meets a transaction
    created = save(api, subject_id=RACE, state={"step": 1})
    _conflict_once(services, "delete_item")
    result = api.invoke(
        "delete_checkpoint", path=f"/v1/checkpoints/{created.data['checkpoint_id']}", headers={"if-match": None}
    )
    # Then the caller is told to retry, and the checkpoint is still there
    assert result.status == 503
    assert result.header("Retry-After") == "1"
    found = lookup(api, subject_id=RACE)
    assert found.status == 200


def test_a_transaction_cancelled_for_another_reason_is_not_retried_as_a_race(api: ApiDriver, services: Any) -> None:
    # Given transactions that DynamoDB cancels for a validation error (not a lost race)
    client = services.dynamodb
    calls = [0]

    def invalid(**_: Any) -> Any:
        calls[0] += 1
        raise client.exceptions.TransactionCanceledException(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": [{"Code": "ValidationError", "Message": "item too large"}, {"Code": "None"}],
            },
            "TransactWriteItems",
        )

    client.transact_write_items = invalid
    # When an idempotent save is sent
    result = api.invoke("save_checkpoint")
    # Then it fails once as a defect (500), not five times as "too many writers" (503)
    assert result.status == 500
    assert calls == [1]


def test_listing_reads_the_table_consistently(api: ApiDriver, services: Any) -> None:
    # Given a checkpoint, and a hook that sees the parameters of every Query
    assert save(api, subject_id=RACE, state={"step": 1}).status == 201
    seen: list[dict[str, Any]] = []
    hook = lambda params, **_: seen.append(dict(params))  # noqa: E731
    services.dynamodb.meta.events.register("provide-client-params.dynamodb.Query", hook)
    try:
        result = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{RACE}/checkpoints", query={})
    finally:
        services.dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query", hook)
    # Then the one Query asked for a consistent read (a list right after a save shows it)
    assert result.status == 200
    assert [p.get("ConsistentRead") for p in seen] == [True]


@pytest.mark.parametrize("revision", [2**53, 10**40])
def test_an_expected_revision_beyond_exact_integers_is_a_400_naming_it(api: ApiDriver, revision: int) -> None:
    # Given an expected_revision no counter can reach (and DynamoDB could not even compare)
    for key in (None, "big-1"):
        result = save(api, key, subject_id="big", state={}, expected_revision=revision)
        assert result.status == 400, result.raw_body
        assert result.error["details"]["errors"][0]["pointer"] == "/expected_revision"


def test_acting_for_another_agent_is_refused_before_the_body_is_validated(api: ApiDriver, services: Any) -> None:
    # Given a key of agent alice without *
    from tests.integration.conftest import put_key

    put_key(services, "btn_alice_writer_secret_0001", "acme", "alice", {"checkpoints:write"}, "key_" + "f" * 32)
    # When it saves for bob with a body that is also invalid
    result = ApiDriver("btn_alice_writer_secret_0001").invoke(
        "save_checkpoint", headers=PLAIN, body=save_body(kind="nope", agent_id="bob")
    )
    # The 403 answers first, as the contract ranks it
    assert result.status == 403
    assert "/agent_id" in result.error["message"]


def test_a_stale_if_match_names_the_header_not_a_body_field(api: ApiDriver) -> None:
    # Given a checkpoint at revision 2
    created = save(api, subject_id=RACE, state={"step": 1})
    save(api, subject_id=RACE, state={"step": 2})
    checkpoint_id = created.data["checkpoint_id"]
    # When it is deleted with the tag of revision 1, and with another checkpoint's tag
    stale = api.invoke(
        "delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": f'W/"{checkpoint_id}:1"'}
    )
    other = api.invoke(
        "delete_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}",
        headers={"if-match": 'W/"ckpt_00000000000000000000000000000000:2"'},
    )
    # Then both conflicts name If-Match and carry the current revision
    for result in (stale, other):
        assert result.status == 409
        assert result.error["message"].startswith("If-Match")
        assert result.error["details"] == {"current_revision": 2}
    assert "-1" not in other.error["message"]
