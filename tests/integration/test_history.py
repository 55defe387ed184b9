"""History against moto: kept revisions (list, get), restore, the window, and what they cost."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.store import layout
from tests.builders import save
from tests.integration.conftest import put_key
from tests.integration.driver import ApiDriver, CallCounter, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

START = datetime(2027, 4, 1, 8, 0, tzinfo=UTC)
READER_SECRET = "btn_test_history_reader_01"


def revisions(api: ApiDriver, checkpoint_id: str, **query: str) -> Result:
    return api.invoke("list_revisions", path=f"/v1/checkpoints/{checkpoint_id}/revisions", query=query)


def revision(api: ApiDriver, checkpoint_id: str, number: int | str, **kw: Any) -> Result:
    return api.invoke("get_revision", path=f"/v1/checkpoints/{checkpoint_id}/revisions/{number}", **kw)


def restore(api: ApiDriver, checkpoint_id: str, key: str | None = None, **body: Any) -> Result:
    return api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}/restore",
        body=body,
        headers={"idempotency-key": key},
    )


def get(api: ApiDriver, checkpoint_id: str) -> Result:
    return api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")


def saved_steps(api: ApiDriver, steps: range, **fields: Any) -> str:
    """Save `{"step": n}` for each n, the first with `fields`; the checkpoint's id."""
    checkpoint_id = ""
    for n in steps:
        answer = save(api, state={"step": n}, **(fields if n == steps.start else {}))
        assert answer.status in (200, 201), answer.raw_body
        checkpoint_id = answer.data["checkpoint_id"]
    return checkpoint_id


def revision_items(services: Any) -> list[dict[str, Any]]:
    """The kept revisions stored in the test subject's partition (one Query: the test may look)."""
    response = services.dynamodb.query(
        TableName=services.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :v)",
        ExpressionAttributeValues={":pk": {"S": layout.checkpoint_pk("acme", "user_rama")}, ":v": {"S": "V#"}},
        ConsistentRead=True,
    )
    return list(response["Items"])


def test_the_last_keep_revisions_superseded_revisions_stay_readable_newest_first(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 6), keep_revisions=3)
    listed = revisions(api, checkpoint_id)
    assert listed.status == 200
    assert [r["revision"] for r in listed.data] == [4, 3, 2]
    assert all("state" not in r for r in listed.data)
    assert listed.data[0]["checkpoint_id"] == checkpoint_id
    assert listed.body["meta"]["next_cursor"] is None
    kept = revision(api, checkpoint_id, 3)
    assert kept.status == 200
    assert kept.data["state"] == {"step": 3}
    assert kept.data["revision"] == 3
    assert kept.header("ETag") == f'W/"{checkpoint_id}:3"'
    # Out of the window: gone, whether pruned or never kept
    assert revision(api, checkpoint_id, 1).status == 404
    assert revision(api, checkpoint_id, 5).status == 404  # the current revision is not a kept one
    assert get(api, checkpoint_id).data["keep_revisions"] == 3


def test_revisions_page_with_a_cursor(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 8), keep_revisions=10)
    first = revisions(api, checkpoint_id, limit="4")
    assert [r["revision"] for r in first.data] == [6, 5, 4, 3]
    second = revisions(api, checkpoint_id, limit="4", cursor=first.body["meta"]["next_cursor"])
    assert [r["revision"] for r in second.data] == [2, 1]
    assert second.body["meta"]["next_cursor"] is None
    other = saved_steps_other_subject(api)
    refused = revisions(api, other, limit="4", cursor=first.body["meta"]["next_cursor"])
    assert refused.status == 400
    assert refused.error["details"]["errors"][0]["pointer"] == "/cursor"


def saved_steps_other_subject(api: ApiDriver) -> str:
    answer = api.invoke(
        "save_checkpoint",
        body={"subject_id": "other", "kind": "workflow", "state": 1, "keep_revisions": 2},
        headers={"idempotency-key": None},
    )
    return str(answer.data["checkpoint_id"])


def test_keep_revisions_and_ttl_persist_until_a_save_changes_them(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=2, ttl_seconds=600)
    counter.reset()
    assert save(api, state={"step": 3}).status == 200  # neither sent
    record = get(api, checkpoint_id).data
    assert (record["keep_revisions"], record["ttl_seconds"]) == (2, 600)
    assert [r["revision"] for r in revisions(api, checkpoint_id).data] == [2, 1]


def test_restore_writes_an_old_state_as_a_new_revision(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 5), keep_revisions=5)
    restored = restore(api, checkpoint_id, revision=2, expected_revision=4)
    assert restored.status == 200, restored.raw_body
    assert restored.data["revision"] == 5
    assert restored.header("ETag") == f'W/"{checkpoint_id}:5"'
    current = get(api, checkpoint_id).data
    assert current["state"] == {"step": 2}
    assert current["revision"] == 5
    assert [r["revision"] for r in revisions(api, checkpoint_id).data] == [4, 3, 2, 1]
    assert revision(api, checkpoint_id, 4).data["state"] == {"step": 4}


def test_restore_with_a_stale_expected_revision_is_refused_and_writes_nothing(api: ApiDriver, services: Any) -> None:
    checkpoint_id = saved_steps(api, range(1, 4), keep_revisions=5)
    before = revision_items(services)
    refused = restore(api, checkpoint_id, revision=1, expected_revision=2)
    assert refused.status == 409
    assert refused.error["code"] == "REVISION_CONFLICT"
    assert refused.error["details"] == {"current_revision": 3}
    assert get(api, checkpoint_id).data["revision"] == 3
    assert revision_items(services) == before


def test_restore_is_idempotent_with_a_key(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 4), keep_revisions=5)
    first = restore(api, checkpoint_id, "restore-once", revision=1)
    again = restore(api, checkpoint_id, "restore-once", revision=1)
    assert first.status == again.status == 200
    assert again.header("Idempotent-Replayed") == "true"
    assert again.data == first.data
    assert get(api, checkpoint_id).data["revision"] == 4
    reused = restore(api, checkpoint_id, "restore-once", revision=2)
    assert reused.status == 422


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({}, "/revision"),
        ({"revision": 0}, "/revision"),
        ({"revision": "1"}, "/revision"),
        ({"revision": 1, "expected_revision": 0}, "/expected_revision"),
        ({"revision": 1, "nope": True}, "/nope"),
    ],
)
def test_a_bad_restore_names_the_field(api: ApiDriver, body: dict[str, Any], pointer: str) -> None:
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=5)
    answer = restore(api, checkpoint_id, **body)
    assert answer.status == 400
    assert answer.error["details"]["errors"][0]["pointer"] == pointer
    assert get(api, checkpoint_id).data["revision"] == 2


def test_a_bad_revision_number_in_the_path_names_it(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=5)
    for bad in ("0", "01", "x", "9007199254740992", "99999999999999999"):
        answer = revision(api, checkpoint_id, bad)
        assert answer.status == 400, bad
        assert answer.error["details"]["errors"][0]["pointer"] == "/revision"


def test_restore_of_a_closed_or_leased_checkpoint_is_refused(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=5)
    lease = api.invoke(
        "acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", body={"ttl_seconds": 60, "holder": "w"}
    ).data["lease_token"]
    assert restore(api, checkpoint_id, revision=1).error["code"] == "LEASE_HELD"
    assert restore(api, checkpoint_id, revision=1, lease_token=lease).status == 200
    assert save(api, state={"done": True}, status="completed", lease_token=lease).status == 200
    assert restore(api, checkpoint_id, revision=1, lease_token=lease).error["code"] == "CHECKPOINT_CLOSED"


def test_lowering_keep_revisions_hides_the_revisions_out_of_the_window_at_once(api: ApiDriver, services: Any) -> None:
    checkpoint_id = saved_steps(api, range(1, 26), keep_revisions=100)
    assert len(revision_items(services)) == 24
    assert save(api, state={"step": 26}, keep_revisions=1).status == 200
    # The window shows one revision at once; a save deletes nothing (the reaper deletes what fell below the window,
    # tests/integration/test_reaper_history.py), and what waits for it is never shown
    assert [r["revision"] for r in revisions(api, checkpoint_id).data] == [25]
    assert [revision(api, checkpoint_id, n).status for n in (1, 24, 25)] == [404, 404, 200]
    assert len(revision_items(services)) == 25
    # Raising it again shows none of them: a revision once out of the window stays out
    save(api, state={"step": 27}, keep_revisions=100)
    assert [r["revision"] for r in revisions(api, checkpoint_id).data] == [26, 25]
    # Turning history off hides every revision, and the next saves are plain again
    save(api, state={"step": 28}, keep_revisions=0)
    assert revisions(api, checkpoint_id).data == []
    assert revision(api, checkpoint_id, 27).status == 404


def test_a_revision_not_kept_answers_which_are(api: ApiDriver, counter: CallCounter) -> None:
    # Given a checkpoint at revision 6 that keeps its last 3 superseded revisions (3 to 5)
    checkpoint_id = saved_steps(api, range(1, 7), keep_revisions=3)
    # When revision 1 (pruned from the window) is read or restored
    counter.reset()
    read, restored = revision(api, checkpoint_id, 1), restore(api, checkpoint_id, revision=1)
    # Then both are 404 NOT_FOUND saying which revisions are kept, in words and in details, without another read
    # than the one that found the revision missing
    for answer in (read, restored):
        assert answer.status == 404, answer.raw_body
        assert answer.error == {
            "code": "NOT_FOUND",
            "message": (
                "Revision 1 is not kept: this checkpoint keeps revisions 3 to 5, each until it expires; its current "
                "revision is 6."
            ),
            "details": {"current_revision": 6, "kept_revisions": [3, 4, 5]},
        }
    assert counter.calls["BatchGetItem"] == 2
    # and a checkpoint that keeps none says so, and how to keep some
    plain = save(api, subject_id="ticket-no-history", state={"step": 1})
    answer = revision(api, plain.data["checkpoint_id"], 1)
    assert answer.error["message"] == (
        "Revision 1 is not kept: this checkpoint keeps no earlier revision (a save with keep_revisions keeps some); "
        "its current revision is 1."
    )
    assert answer.error["details"] == {"current_revision": 1, "kept_revisions": []}
    # while a checkpoint the caller cannot see says nothing of its revisions
    assert revision(api, "ckpt_" + "0" * 32, 1).error == {"code": "NOT_FOUND", "message": "Resource was not found."}


def test_request_counts_with_and_without_history(api: ApiDriver, counter: CallCounter) -> None:
    saved_steps(api, range(1, 2))
    counter.reset()
    assert save(api, state={"step": 2}, keep_revisions=0).status == 200
    assert dict(counter.calls) == {"UpdateItem": 1}
    counter.reset()
    # With history on: one consistent read, then the revision it keeps and the checkpoint, each one PutItem at the
    # standard rate (a transaction would bill both twice)
    assert save(api, state={"step": 3}, keep_revisions=4).status == 200
    assert dict(counter.calls) == {"BatchGetItem": 1, "PutItem": 2}
    counter.reset()
    assert save(api, state={"step": 4}).status == 200  # keep_revisions not sent: this container knows
    assert dict(counter.calls) == {"BatchGetItem": 1, "PutItem": 2}
    checkpoint_id = str(save(api, state={"step": 5}).data["checkpoint_id"])
    counter.reset()
    assert revisions(api, checkpoint_id).status == 200
    assert dict(counter.calls) == {"Query": 2, "GetItem": 1}  # the id index, the checkpoint, the window
    counter.reset()
    assert revision(api, checkpoint_id, 3).status == 200
    assert dict(counter.calls) == {"Query": 1, "BatchGetItem": 1}
    counter.reset()
    assert restore(api, checkpoint_id, revision=3).status == 200
    assert dict(counter.calls) == {"Query": 1, "BatchGetItem": 1, "PutItem": 2}


def test_a_container_that_does_not_know_about_the_history_finds_out_from_the_refused_write(
    api: ApiDriver, services: Any, counter: CallCounter
) -> None:
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=3)
    services.checkpoints._with_history.clear()  # a new container
    counter.reset()
    assert save(api, state={"step": 3}).status == 200
    assert dict(counter.calls) == {"UpdateItem": 1, "BatchGetItem": 1, "PutItem": 2}
    assert [r["revision"] for r in revisions(api, checkpoint_id).data] == [2, 1]


def test_a_revision_keeps_its_own_expiry(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = str(save(api, state={"step": 1}, ttl_seconds=120, keep_revisions=5).data["checkpoint_id"])
        clock.shift(timedelta(seconds=60))
        save(api, state={"step": 2}, ttl_seconds=3600)
        assert revision(api, checkpoint_id, 1).data["expires_at"] == "2027-04-01T08:02:00.000Z"
        clock.shift(timedelta(seconds=61))
        assert revision(api, checkpoint_id, 1).status == 404
        assert revisions(api, checkpoint_id).data == []
        assert get(api, checkpoint_id).status == 200


def test_revisions_disappear_with_their_checkpoint(api: ApiDriver) -> None:
    checkpoint_id = saved_steps(api, range(1, 4), keep_revisions=5)
    deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None})
    assert deleted.status == 200
    assert revisions(api, checkpoint_id).status == 404
    assert revision(api, checkpoint_id, 1).status == 404
    # The slot's next checkpoint is a new one, with no past
    again = saved_steps(api, range(1, 2), keep_revisions=5)
    assert again != checkpoint_id
    assert revisions(api, again).data == []
    assert revision(api, again, 1).status == 404


def test_another_agents_history_is_a_404_to_a_key_without_star(api: ApiDriver, services: Any) -> None:
    put_key(services, READER_SECRET, "acme", "reader", {"checkpoints:read", "checkpoints:write"}, "key_" + "c" * 32)
    checkpoint_id = saved_steps(api, range(1, 3), keep_revisions=5)
    missing = revision(api, "ckpt_" + "0" * 32, 1)
    for answer in (
        api.invoke("list_revisions", path=f"/v1/checkpoints/{checkpoint_id}/revisions", secret=READER_SECRET),
        revision(api, checkpoint_id, 1, secret=READER_SECRET),
        api.invoke(
            "restore_checkpoint",
            path=f"/v1/checkpoints/{checkpoint_id}/restore",
            body={"revision": 1},
            headers={"idempotency-key": None},
            secret=READER_SECRET,
        ),
    ):
        assert answer.status == 404
        assert answer.error == missing.error
    assert get(api, checkpoint_id).data["revision"] == 2


def test_a_spilled_state_stays_readable_as_a_revision(api: ApiDriver) -> None:
    big = {"blob": secrets.token_hex(150_000)}
    checkpoint_id = str(save(api, state=big, keep_revisions=2).data["checkpoint_id"])
    save(api, state={"step": 2})
    assert revision(api, checkpoint_id, 1).data["state"] == big
    restored = restore(api, checkpoint_id, revision=1)
    assert restored.status == 200
    assert get(api, checkpoint_id).data["state"] == big


def test_a_save_whose_checkpoint_is_deleted_between_its_copy_and_its_write_leaves_no_copy(
    api: ApiDriver, services: Any, aws: Any
) -> None:
    # Given a checkpoint keeping revisions, at revision 2
    old_id = saved_steps(api, range(1, 3), keep_revisions=3)
    deleted: list[str] = []

    def delete_before_the_checkpoint_write(params: dict[str, Any], **_: Any) -> None:
        sk = params.get("Item", {}).get("sk", {}).get("S", "")
        if not deleted and sk.startswith(layout.CHECKPOINT):
            # Another client deletes the checkpoint after the save copied revision 2, before its own write
            key = layout.key(*layout.identity(params["Item"]))
            aws.delete_item(TableName=services.settings.table_name, Key=key)
            deleted.append(sk)

    services.dynamodb.meta.events.register("provide-client-params.dynamodb.PutItem", delete_before_the_checkpoint_write)
    try:
        answer = save(api, state={"step": 3})
    finally:
        services.dynamodb.meta.events.unregister(
            "provide-client-params.dynamodb.PutItem", delete_before_the_checkpoint_write
        )
    # Then the save created a new checkpoint (the old one is gone), and the copy of the old one's revision 2 was
    # deleted: nothing could ever show it
    assert deleted
    assert answer.status == 201, answer.raw_body
    assert answer.data["checkpoint_id"] != old_id
    stored = {layout.read_revision_sk(item["sk"]["S"])[2:] for item in revision_items(services)}
    assert (old_id, 2) not in stored
    assert (old_id, 1) in stored  # the reaper deletes a gone checkpoint's revisions; none runs here
