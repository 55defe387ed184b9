"""Regressions for what the third black-box review broke (issue 20), one test or more per defect.

Each failed on the code as the review found it; the defect's number in the issue is in the test's docstring.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from tests.builders import KIND, save
from tests.integration.conftest import DYNAMODB_LOCAL, table_items
from tests.integration.driver import ApiDriver, Result

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


def acquire(api: ApiDriver, checkpoint_id: str, holder: str = "worker-1", ttl: int = 60) -> Result:
    body = {"ttl_seconds": ttl, "holder": holder}
    return api.invoke("acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", body=body)


def release(api: ApiDriver, checkpoint_id: str, token: str) -> Result:
    return api.invoke("release_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", headers={"lease-token": token})


def delete(api: ApiDriver, checkpoint_id: str, token: str | None) -> Result:
    return api.invoke(
        "delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None, "lease-token": token}
    )


def restore(api: ApiDriver, checkpoint_id: str, revision: int, token: str | None) -> Result:
    body: dict[str, Any] = {"revision": revision}
    if token is not None:
        body["lease_token"] = token
    return api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}/restore",
        body=body,
        headers={"idempotency-key": None},
    )


def purge(api: ApiDriver, raw_subject: str) -> Result:
    return api.invoke("purge_subject", path=f"/v1/subjects/{raw_subject}", query={})


def assert_lease_lost(answer: Result) -> None:
    assert answer.status == 409, answer.raw_body
    assert answer.error["code"] == "LEASE_LOST", answer.raw_body
    assert "lease" in answer.error["message"]


# -- 2. invalid UTF-8 in a path acts on another resource ----------------------------------------------------


@pytest.mark.parametrize("raw", ["%FE", "%80", "caf%E9", "caf%E8", "%C3", "%ED%A0%80", "%F4%90%80%80", "%C0%AF"])
def test_a_subject_path_that_is_not_utf8_is_refused_and_purges_nothing(api: ApiDriver, services: Any, raw: str) -> None:
    """Defect 2: `DELETE /v1/subjects/%FE` purged the subject named U+FFFD (bad bytes were replaced)."""
    assert save(api, subject_id="\ufffd").status == 201
    assert save(api, subject_id="caf\ufffd").status == 201
    before = table_items(services.dynamodb, services.settings.table_name)
    for answer in (
        purge(api, raw),
        api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{raw}/checkpoints", query={}),
    ):
        assert answer.status == 400, answer.raw_body
        assert answer.error["code"] == "VALIDATION_ERROR"
        assert answer.error["details"]["errors"][0]["pointer"] == "/subject_id"
        assert "UTF-8" in answer.error["message"]
    assert table_items(services.dynamodb, services.settings.table_name) == before


def test_a_thread_path_that_is_not_utf8_is_refused_and_deletes_nothing(api: ApiDriver) -> None:
    """Defect 2: `DELETE /v1/threads/%80` deleted the thread named U+FFFD."""
    answer = api.invoke("purge_subject", path="/v1/threads/%80", query={})
    assert answer.status == 400, answer.raw_body
    assert answer.error["details"]["errors"][0]["pointer"] == "/thread_id"
    assert "UTF-8" in answer.error["message"]
    listed = api.invoke("list_subject_checkpoints", path="/v1/threads/caf%E9/checkpoints", query={})
    assert listed.status == 400, listed.raw_body
    assert listed.error["details"]["errors"][0]["pointer"] == "/thread_id"


def test_every_path_parameter_is_decoded_strictly(api: ApiDriver) -> None:
    """Defect 2, the class: every route's path parameters refuse bytes that are not UTF-8, naming the parameter."""
    cases = {
        "/v1/checkpoints/ckpt_%FF": ("get_checkpoint", "/checkpoint_id"),
        "/v1/blobs/blob_%FF": ("get_blob", "/blob_id"),
        "/v1/keys/key_%FF": ("revoke_key", "/key_id"),
        "/v1/schemas/%FF.json": ("health", "/name"),
    }
    for path, (event, pointer) in cases.items():
        answer = api.invoke(event, path=path, query={})
        assert answer.status == 400, (path, answer.raw_body)
        assert answer.error["details"]["errors"][0]["pointer"] == pointer, (path, answer.raw_body)


def test_a_query_parameter_that_is_not_utf8_is_refused(api: ApiDriver) -> None:
    """Defect 2, the class: `subject_id=caf%E9` and `caf%E8` named the same subject in a lookup (the decoder
    replaced both with U+FFFD): a query string's bytes are UTF-8 or the request is refused."""
    assert save(api, subject_id="caf\ufffd").status == 201
    for raw in ("caf%E9", "caf%E8"):
        answer = lookup_raw(api, f"subject_id={raw}&kind={KIND}")
        assert answer.status == 400, answer.raw_body
        assert answer.error["details"]["errors"][0]["pointer"] == "/subject_id"
        assert "UTF-8" in answer.error["message"]
    assert lookup_raw(api, f"subject_id=caf%EF%BF%BD&kind={KIND}").status == 200


def lookup_raw(api: ApiDriver, raw_query: str) -> Result:
    """A lookup whose query string is `raw_query` as sent, with the parameters a lenient decoder would give."""
    from urllib.parse import parse_qsl

    from baton_checkpoints.handlers.api import handler
    from tests.integration.driver import body_text, load_event

    event = load_event("lookup_checkpoint")
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    event["rawQueryString"] = raw_query
    event["queryStringParameters"] = dict(parse_qsl(raw_query, errors="replace"))
    answer = handler(event, None)
    return Result(answer["statusCode"], dict(answer.get("headers") or {}), body_text(answer))


# -- 3. a renewal with a shorter TTL shortened the lease -----------------------------------------------------


def test_a_renewal_with_a_shorter_ttl_keeps_the_later_expiry(api: ApiDriver) -> None:
    """Defect 3: `ttl_seconds: 300` then `ttl_seconds: 10` by the same holder answered an expiry 10 s out, and
    another holder took the lease 11 s later."""
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = str(save(api).data["checkpoint_id"])
        first = acquire(api, checkpoint_id, ttl=300)
        assert first.status == 201
        renewed = acquire(api, checkpoint_id, ttl=10)
        assert renewed.status == 200, renewed.raw_body
        assert renewed.data["expires_at"] == "2027-03-01T09:05:00.000Z"
        clock.shift(timedelta(seconds=11))
        taken = acquire(api, checkpoint_id, holder="worker-2", ttl=60)
        assert taken.status == 409, taken.raw_body
        assert taken.error["code"] == "LEASE_HELD"
        assert taken.error["details"] == {"lease_expires_at": "2027-03-01T09:05:00.000Z"}
        # A longer renewal still extends it
        longer = acquire(api, checkpoint_id, ttl=600)
        assert longer.data["expires_at"] == "2027-03-01T09:10:11.000Z"


# -- 4. fencing did not survive a purge ----------------------------------------------------------------------


def test_a_zombie_save_after_a_purge_creates_nothing(api: ApiDriver, services: Any) -> None:
    """Defect 4: a worker held a lease, the subject was purged, and the worker's next save with its old token
    answered 201 and created a new checkpoint: purged data came back."""
    checkpoint_id = str(save(api).data["checkpoint_id"])
    token = acquire(api, checkpoint_id).data["lease_token"]
    purged = purge(api, "user_rama")
    assert purged.status == 200, purged.raw_body
    assert purged.data["deleted_checkpoints"] == 1
    assert_lease_lost(save(api, state={"step": 2}, lease_token=token))
    assert_lease_lost(save(api, "zombie-once", state={"step": 2}, lease_token=token))
    assert_lease_lost(save(api, state={"step": 2}, lease_token=token, keep_revisions=3))
    assert_lease_lost(save(api, state={"step": 2}, lease_token=token, expected_revision=0))
    assert api.invoke("lookup_checkpoint", query={"subject_id": "user_rama", "kind": KIND}).status == 404
    assert not [i for i in table_items(services.dynamodb, services.settings.table_name) if "user_rama" in str(i)]


def test_a_token_never_acts_on_a_checkpoint_whose_lease_is_gone(api: ApiDriver) -> None:
    """Defect 4: a save, restore or delete carrying a lease token acts only on the lease it names; a released
    lease, a lease taken over and a checkpoint created anew after a delete are all LEASE_LOST."""
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = str(save(api, keep_revisions=2).data["checkpoint_id"])
        assert save(api, state={"step": 2}).status == 200
        # Released: the token is spent
        released = acquire(api, checkpoint_id).data["lease_token"]
        assert release(api, checkpoint_id, released).status == 200
        assert_lease_lost(save(api, state={"step": 3}, lease_token=released))
        assert_lease_lost(restore(api, checkpoint_id, 1, released))
        assert_lease_lost(delete(api, checkpoint_id, released))
        # Lapsed and taken over by another holder
        stale = acquire(api, checkpoint_id, ttl=10).data["lease_token"]
        clock.shift(timedelta(seconds=11))
        other = acquire(api, checkpoint_id, holder="worker-2", ttl=60).data["lease_token"]
        for answer in (
            save(api, state={"step": 3}, lease_token=stale),
            restore(api, checkpoint_id, 1, stale),
            delete(api, checkpoint_id, stale),
            release(api, checkpoint_id, stale),
        ):
            assert_lease_lost(answer)
            assert answer.error["details"] == {"lease_expires_at": "2027-03-01T09:01:11.000Z"}
        assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}").data["revision"] == 2
        # Deleted and created anew by someone else: the old token names no lease of the new checkpoint
        assert delete(api, checkpoint_id, other).status == 200
        assert save(api, state={"fresh": True}).status == 201
        assert_lease_lost(save(api, state={"step": 3}, lease_token=other))
        # A lapsed lease nobody took over still admits its holder
        new_id = str(
            api.invoke("lookup_checkpoint", query={"subject_id": "user_rama", "kind": KIND}).data["checkpoint_id"]
        )
        lapsed = acquire(api, new_id, ttl=10).data["lease_token"]
        clock.shift(timedelta(seconds=11))
        assert save(api, state={"step": 4}, lease_token=lapsed).status == 200


def test_releasing_a_lapsed_lease_spends_its_token(api: ApiDriver) -> None:
    """Defect 4 (found re-reading the fix): a release of a lease that had lapsed, with nobody taking it over,
    answered 200 and left the token writing."""
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = str(save(api).data["checkpoint_id"])
        token = acquire(api, checkpoint_id, ttl=10).data["lease_token"]
        clock.shift(timedelta(seconds=11))
        assert release(api, checkpoint_id, token).status == 200
        assert_lease_lost(save(api, state={"step": 2}, lease_token=token))
        assert release(api, checkpoint_id, token).status == 200  # a repeat is harmless
        assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}").data["revision"] == 1


def test_a_token_of_an_earlier_life_is_lease_lost_even_when_the_new_life_has_the_same_counter(api: ApiDriver) -> None:
    """Defect 4: after a purge, the subject saved again and leased again has a lease of counter 1 too; the zombie's
    token of counter 1 was told LEASE_HELD (wait), not LEASE_LOST (stop)."""
    first_id = str(save(api).data["checkpoint_id"])
    zombie = acquire(api, first_id).data["lease_token"]
    assert purge(api, "user_rama").status == 200
    second_id = str(save(api).data["checkpoint_id"])
    fresh = acquire(api, second_id, holder="worker-2").data["lease_token"]
    assert zombie.split(".")[0] == fresh.split(".")[0] == "1"
    answer = save(api, state={"zombie": True}, lease_token=zombie)
    assert_lease_lost(answer)
    assert "lease_expires_at" in answer.error["details"]
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{second_id}").data["revision"] == 1


def test_an_empty_lease_token_header_is_refused_naming_it(api: ApiDriver, services: Any) -> None:
    """A Lease-Token header must hold a token (1 to 200 characters); an empty one is a 400, never a lease error."""
    checkpoint_id = str(save(api).data["checkpoint_id"])
    for value in ("", "   ", "x" * 201):
        answer = delete(api, checkpoint_id, value)
        assert answer.status == 400, answer.raw_body
        assert answer.error["details"]["errors"][0]["pointer"] == "/Lease-Token"
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}").status == 200


def test_a_restore_never_creates_a_checkpoint_deleted_meanwhile(api: ApiDriver, services: Any) -> None:
    """A restore acts on its checkpoint only: when the checkpoint is gone by the time the restore writes (deleted
    between its read and its write), it answers 404 and creates nothing."""
    from baton_checkpoints.store import checkpoints as store_checkpoints

    checkpoint_id = str(save(api, keep_revisions=2).data["checkpoint_id"])
    assert save(api, state={"step": 2}).status == 200
    real = store_checkpoints.CheckpointStore.save_restored

    def deleted_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert delete(api, checkpoint_id, None).status == 200  # after the restore's read, before its write
        return real(self, *args, **kwargs)

    store_checkpoints.CheckpointStore.save_restored = deleted_first  # type: ignore[method-assign]
    try:
        answer = restore(api, checkpoint_id, 1, None)
    finally:
        store_checkpoints.CheckpointStore.save_restored = real  # type: ignore[method-assign]
    assert answer.status == 404, answer.raw_body
    assert api.invoke("lookup_checkpoint", query={"subject_id": "user_rama", "kind": KIND}).status == 404


# -- the class: every answer within what Lambda carries ------------------------------------------------------


def wide_resources(tag: str) -> list[dict[str, Any]]:
    """100 resources whose names are 200 four-byte characters: the widest summary the contract allows (~117 KB)."""
    return [
        {
            "name": f"{tag}{n:03d}".ljust(200, "\U0001f600")[:200],
            "blob_id": f"blob_{n:032x}",
            "sha256": "0" * 64,
            "size": 1,
            "media_type": "application/octet-stream",
        }
        for n in range(100)
    ]


@pytest.mark.parametrize("engine", [DYNAMODB_LOCAL], indirect=True)  # 4 MB of items: 5 s there, 17-69 s on moto
def test_a_page_of_wide_summaries_stops_before_lambdas_limit_and_the_cursor_goes_on(
    api: ApiDriver, services: Any
) -> None:
    """The class of defects 1 and 7: 48 checkpoints whose summaries each carry 100 resources of 200 four-byte
    characters came to a 5.6 MB page of JSON (7.5 MB once base64-encoded): past Lambda's 6 MB, a 500. A page
    stops by encoded bytes, and its cursor starts the next page right after the last summary shown."""
    from msgspec.structs import replace

    from baton_checkpoints.domain.clock import now_ms
    from baton_checkpoints.store import items
    from tests.builders import stored_checkpoint

    now = now_ms()
    for n in range(48):
        cp = replace(
            stored_checkpoint(),
            tenant_id="acme",
            checkpoint_id=f"ckpt_{n:032x}",
            subject_id="wide",
            agent_id=f"agent-{n // 4}",
            kind=("task_state", "conversation", "workflow", "cursor")[n % 4],
            resources=wide_resources(f"r{n}-"),
            updated_ms=now - n,
            created_ms=now - 10_000,
            expires_ms=now + 3_600_000,
            keep_revisions=0,
        )
        services.dynamodb.put_item(TableName=services.settings.table_name, Item=items.checkpoint_item(cp))
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        answer = api.invoke("list_subject_checkpoints", path="/v1/subjects/wide/checkpoints", query=query)
        assert answer.status == 200, answer.raw_body[:300]
        data_bytes = len(__import__("json").dumps(answer.data, ensure_ascii=False, separators=(",", ":")).encode())
        assert data_bytes <= 4_500_000
        seen.extend(item["checkpoint_id"] for item in answer.data)
        pages += 1
        cursor = answer.body["meta"]["next_cursor"]
        if cursor is None:
            break
    assert pages >= 2
    assert seen == [f"ckpt_{n:032x}" for n in range(48)]


def test_a_repeated_query_parameter_is_refused_not_joined(api: ApiDriver) -> None:
    """API Gateway joins a repeated parameter's values with commas: `subject_id=a&subject_id=b` looked up the
    subject "a,b". A parameter is given once or the request is refused naming it."""
    assert save(api, subject_id="a,b").status == 201
    answer = lookup_raw(api, f"subject_id=a&subject_id=b&kind={KIND}")
    assert answer.status == 400, answer.raw_body
    assert answer.error["details"]["errors"][0]["pointer"] == "/subject_id"
    assert lookup_raw(api, f"subject_id=a%2Cb&kind={KIND}").status == 200
