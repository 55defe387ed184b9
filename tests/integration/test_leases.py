"""Leases against moto: acquire, renew, release, expiry, fencing, and what every write checks while one is live."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from tests.builders import save
from tests.integration.conftest import put_key
from tests.integration.driver import ApiDriver, CallCounter, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
TOKEN = re.compile(r"^[0-9]+\.[0-9a-f]{32}$")
WORKER_SECRET = "btn_test_lease_worker_0001"
OTHER_AGENT_SECRET = "btn_test_lease_other_0001"


def acquire(api: ApiDriver, checkpoint_id: str, holder: str | None = "worker-1", ttl: int = 60, **kw: Any) -> Result:
    body: dict[str, Any] = {"ttl_seconds": ttl}
    if holder is not None:
        body["holder"] = holder
    return api.invoke("acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", body=body, **kw)


def release(api: ApiDriver, checkpoint_id: str, token: str | None, **kw: Any) -> Result:
    return api.invoke(
        "release_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", headers={"lease-token": token}, **kw
    )


def get(api: ApiDriver, checkpoint_id: str) -> Result:
    return api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")


def delete(api: ApiDriver, checkpoint_id: str, token: str | None = None) -> Result:
    return api.invoke(
        "delete_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}",
        headers={"if-match": None, "lease-token": token},
    )


def created(api: ApiDriver) -> str:
    answer = save(api)
    assert answer.status == 201, answer.raw_body
    return str(answer.data["checkpoint_id"])


def assert_lease_held(answer: Result, expires_at: str) -> None:
    assert answer.status == 409, answer.raw_body
    assert answer.error["code"] == "LEASE_HELD"
    assert answer.error["details"] == {"lease_expires_at": expires_at}


def assert_lease_lost(answer: Result, expires_at: str) -> None:
    assert answer.status == 409, answer.raw_body
    assert answer.error["code"] == "LEASE_LOST"
    assert answer.error["details"] == {"lease_expires_at": expires_at}


def test_acquire_answers_a_fencing_token_and_the_record_shows_the_lease_without_it(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False):
        checkpoint_id = created(api)
        before = get(api, checkpoint_id)
        granted = acquire(api, checkpoint_id, ttl=120)
        assert granted.status == 201, granted.raw_body
        assert TOKEN.match(granted.data["lease_token"])
        assert granted.data["lease_token"].startswith("1.")
        assert granted.data["holder"] == "worker-1"
        assert granted.data["expires_at"] == "2027-03-01T09:02:00.000Z"
        after = get(api, checkpoint_id)
        # Lease operations change neither the revision nor the expiry, and the token is never shown again
        assert after.data["revision"] == before.data["revision"] == 1
        assert after.data["expires_at"] == before.data["expires_at"]
        assert after.header("ETag") == before.header("ETag")
        assert after.data["lease"] == {"holder": "worker-1", "expires_at": "2027-03-01T09:02:00.000Z"}
        assert granted.data["lease_token"] not in after.raw_body
        listed = api.invoke("list_subject_checkpoints", path="/v1/subjects/user_rama/checkpoints", query={})
        assert listed.data[0]["lease"] == {"holder": "worker-1", "expires_at": "2027-03-01T09:02:00.000Z"}


def test_the_same_holder_renews_with_the_same_token_and_another_holder_is_refused(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = created(api)
        first = acquire(api, checkpoint_id, ttl=60)
        clock.shift(timedelta(seconds=30))
        renewed = acquire(api, checkpoint_id, ttl=60)
        assert renewed.status == 200
        assert renewed.data["lease_token"] == first.data["lease_token"]
        assert renewed.data["expires_at"] == "2027-03-01T09:01:30.000Z"
        other = acquire(api, checkpoint_id, holder="worker-2")
        assert_lease_held(other, "2027-03-01T09:01:30.000Z")
        assert "Another holder" in other.error["message"]


def test_the_holder_defaults_to_the_calling_keys_id(api: ApiDriver) -> None:
    checkpoint_id = created(api)
    granted = acquire(api, checkpoint_id, holder=None)
    assert granted.status == 201
    assert granted.data["holder"] == "key_" + "a" * 32


def test_while_leased_every_write_needs_the_token_and_a_refused_one_writes_nothing(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False):
        checkpoint_id = created(api)
        token = acquire(api, checkpoint_id, ttl=300).data["lease_token"]
        expires_at = "2027-03-01T09:05:00.000Z"
        # Without a token, with a malformed one: LEASE_HELD; with a token of ours that is not this lease's (a guess,
        # another lease's): LEASE_LOST. Refused whoever sends it
        assert_lease_held(save(api, state={"step": 2}), expires_at)
        assert_lease_held(save(api, state={"step": 2}, lease_token="garbage"), expires_at)
        assert_lease_held(save(api, "idem-1", state={"step": 2}), expires_at)
        assert_lease_held(delete(api, checkpoint_id), expires_at)
        assert_lease_lost(save(api, state={"step": 2}, lease_token="1." + "0" * 32), expires_at)
        assert_lease_lost(delete(api, checkpoint_id, "1." + "f" * 32), expires_at)
        unchanged = get(api, checkpoint_id)
        assert unchanged.data["revision"] == 1
        assert unchanged.data["state"] == {"step": 1}
        # With it: accepted, and the lease stays
        saved = save(api, state={"step": 2}, lease_token=token)
        assert saved.status == 200, saved.raw_body
        idempotent = save(api, "idem-2", state={"step": 3}, lease_token=token)
        assert idempotent.status == 200, idempotent.raw_body
        assert get(api, checkpoint_id).data["lease"]["holder"] == "worker-1"
        assert delete(api, checkpoint_id, token).status == 200


def test_a_closed_checkpoint_answers_closed_before_the_lease_and_the_lease_before_a_conflict(api: ApiDriver) -> None:
    checkpoint_id = created(api)
    token = acquire(api, checkpoint_id).data["lease_token"]
    conflict_and_lease = save(api, state={"step": 2}, expected_revision=7)
    assert conflict_and_lease.error["code"] == "LEASE_HELD"
    assert save(api, state={"step": 2}, expected_revision=7, lease_token=token).error["code"] == "REVISION_CONFLICT"
    assert save(api, status="completed", lease_token=token).status == 200
    assert save(api, state={"step": 3}).error["code"] == "CHECKPOINT_CLOSED"


def test_release_ends_the_lease_and_repeating_it_is_harmless(api: ApiDriver) -> None:
    checkpoint_id = created(api)
    token = acquire(api, checkpoint_id).data["lease_token"]
    assert_lease_lost(release(api, checkpoint_id, "1." + "0" * 32), acquire_expiry(api, checkpoint_id))
    assert_lease_held(release(api, checkpoint_id, "not-a-token"), acquire_expiry(api, checkpoint_id))
    released = release(api, checkpoint_id, token)
    assert released.status == 200
    assert released.data == {"checkpoint_id": checkpoint_id, "released": True}
    assert release(api, checkpoint_id, token).status == 200
    assert "lease" not in get(api, checkpoint_id).data or get(api, checkpoint_id).data["lease"] is None
    assert save(api, state={"step": 2}).status == 200
    # A new lease after a release counts up
    assert acquire(api, checkpoint_id, holder="worker-2").data["lease_token"].startswith("2.")


def acquire_expiry(api: ApiDriver, checkpoint_id: str) -> str:
    return str(get(api, checkpoint_id).data["lease"]["expires_at"])


def test_release_without_the_header_names_it(api: ApiDriver) -> None:
    checkpoint_id = created(api)
    answer = release(api, checkpoint_id, None)
    assert answer.status == 400
    assert answer.error["details"]["errors"][0]["pointer"] == "/Lease-Token"


def test_a_holder_whose_lease_lapsed_cannot_write_once_another_was_granted(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = created(api)
        stale = acquire(api, checkpoint_id, holder="worker-1", ttl=10).data["lease_token"]
        clock.shift(timedelta(seconds=11))
        # Lapsed: anyone may write, and another holder may take the checkpoint over
        taken = acquire(api, checkpoint_id, holder="worker-2", ttl=60)
        assert taken.status == 201
        assert taken.data["lease_token"].startswith("2.")
        # The stale holder is told it lost the lease (LEASE_LOST), with when the new one ends
        for refused in (
            save(api, state={"step": 2}, lease_token=stale),
            delete(api, checkpoint_id, stale),
            release(api, checkpoint_id, stale),
        ):
            assert refused.status == 409, refused.raw_body
            assert refused.error["code"] == "LEASE_LOST"
            assert refused.error["details"] == {"lease_expires_at": "2027-03-01T09:01:11.000Z"}
        assert get(api, checkpoint_id).data["revision"] == 1
        assert save(api, state={"step": 2}, lease_token=taken.data["lease_token"]).status == 200


def test_a_lapsed_lease_stops_guarding_writes(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = created(api)
        acquire(api, checkpoint_id, ttl=10)
        clock.shift(timedelta(seconds=10))
        assert save(api, state={"step": 2}).status == 200
        assert get(api, checkpoint_id).data["lease"] is None


def test_another_agents_checkpoint_is_a_404_to_a_key_without_star(api: ApiDriver, services: Any) -> None:
    put_key(
        services, OTHER_AGENT_SECRET, "acme", "other-agent", {"leases:write", "checkpoints:read"}, "key_" + "b" * 32
    )
    checkpoint_id = created(api)
    missing = acquire(api, "ckpt_" + "0" * 32)
    for answer in (
        acquire(api, checkpoint_id, secret=OTHER_AGENT_SECRET),
        release(api, checkpoint_id, "1.x", secret=OTHER_AGENT_SECRET),
    ):
        assert answer.status == 404
        assert answer.error == missing.error
    assert get(api, checkpoint_id).data["lease"] is None


def test_an_expired_checkpoint_cannot_be_leased(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as clock:
        checkpoint_id = str(save(api, ttl_seconds=60).data["checkpoint_id"])
        clock.shift(timedelta(seconds=61))
        assert acquire(api, checkpoint_id).status == 404


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"ttl_seconds": 9}, "/ttl_seconds"),
        ({"ttl_seconds": 86_401}, "/ttl_seconds"),
        ({}, "/ttl_seconds"),
        ({"ttl_seconds": 60, "holder": ""}, "/holder"),
        ({"ttl_seconds": 60, "holder": "x" * 201}, "/holder"),
        ({"ttl_seconds": 60, "holder": "tab\there"}, "/holder"),
        ({"ttl_seconds": 60, "extra": 1}, "/extra"),
    ],
)
def test_a_bad_lease_request_names_the_field_and_leases_nothing(
    api: ApiDriver, body: dict[str, Any], pointer: str
) -> None:
    checkpoint_id = created(api)
    answer = api.invoke("acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", body=body)
    assert answer.status == 400
    assert answer.error["details"]["errors"][0]["pointer"] == pointer
    assert get(api, checkpoint_id).data["lease"] is None


def test_lease_request_counts(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = created(api)
    counter.reset()
    token = acquire(api, checkpoint_id).data["lease_token"]
    assert dict(counter.calls) == {"Query": 1, "UpdateItem": 1}
    counter.reset()
    acquire(api, checkpoint_id)
    assert dict(counter.calls) == {"Query": 1, "UpdateItem": 2}  # the grant is refused, then the renewal
    counter.reset()
    assert save(api, state={"step": 2}, lease_token=token).status == 200
    assert dict(counter.calls) == {"UpdateItem": 1}  # the lease is a condition of the save's one write
    counter.reset()
    release(api, checkpoint_id, token)
    assert dict(counter.calls) == {"Query": 1, "UpdateItem": 1}


def test_a_take_over_costs_one_more_write_and_its_audit_event(api: ApiDriver, counter: CallCounter) -> None:
    with time_machine.travel(datetime.now(UTC), tick=False) as clock:
        checkpoint_id = created(api)
        assert acquire(api, checkpoint_id, holder="worker-1", ttl=10).status == 201
        clock.shift(timedelta(seconds=11))
        counter.reset()
        # Another holder's lapsed lease that was never released: the plain grant is refused, the take-over fenced
        # on that lease is granted, and the trail gets its event
        assert acquire(api, checkpoint_id, holder="worker-2", ttl=10).status == 201
        assert dict(counter.calls) == {"Query": 1, "UpdateItem": 2}
        # The trail's newest event read (and its head, while the trail holds no event), the event put, the head moved
        assert counter.audits in (3, 4)
        # The same holder again after its own lease lapsed: no take-over, one write
        clock.shift(timedelta(seconds=11))
        counter.reset()
        assert acquire(api, checkpoint_id, holder="worker-2").status == 201
        assert (dict(counter.calls), counter.audits) == ({"Query": 1, "UpdateItem": 1}, 0)


def test_an_idempotent_acquire_replays_its_first_lease_and_writes_once(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = created(api)
    counter.reset()
    first = acquire(api, checkpoint_id, headers={"idempotency-key": "lease-once"})
    assert first.status == 201
    assert dict(counter.calls) == {"Query": 1, "BatchGetItem": 1, "TransactWriteItems": 1}
    again = acquire(api, checkpoint_id, headers={"idempotency-key": "lease-once"})
    assert again.status == 201
    assert again.header("Idempotent-Replayed") == "true"
    assert again.data == first.data
    # A new key over the same holder's live lease renews it; another request under the first key is refused
    renewed = acquire(api, checkpoint_id, headers={"idempotency-key": "lease-twice"})
    assert renewed.status == 200
    assert renewed.data["lease_token"] == first.data["lease_token"]
    assert acquire(api, checkpoint_id, holder="someone-else", headers={"idempotency-key": "lease-once"}).status == 422
    held = acquire(api, checkpoint_id, holder="worker-2", headers={"idempotency-key": "lease-other"})
    assert held.error["code"] == "LEASE_HELD"
    # After a release, the next lease counts on from the released one's counter
    assert release(api, checkpoint_id, first.data["lease_token"]).status == 200
    taken = acquire(api, checkpoint_id, holder="worker-2", headers={"idempotency-key": "lease-after"})
    assert taken.status == 201
    assert taken.data["lease_token"].startswith("2.")


def test_the_holders_name_alone_does_not_renew_another_keys_lease(api: ApiDriver, services: Any) -> None:
    put_key(services, WORKER_SECRET, "acme", "operator", {"leases:write", "checkpoints:read"}, "key_" + "d" * 32)
    checkpoint_id = created(api)
    first = acquire(api, checkpoint_id, holder="worker-1")
    # Another key of the same agent naming the same holder (its name shows in every record) gets no token
    impostor = acquire(api, checkpoint_id, holder="worker-1", secret=WORKER_SECRET)
    assert impostor.status == 409
    assert impostor.error["code"] == "LEASE_HELD"
    assert first.data["lease_token"] not in impostor.raw_body
    impostor_once = acquire(
        api, checkpoint_id, holder="worker-1", secret=WORKER_SECRET, headers={"idempotency-key": "x"}
    )
    assert impostor_once.error["code"] == "LEASE_HELD"
    # The key that acquired it renews it
    assert acquire(api, checkpoint_id, holder="worker-1").status == 200


def test_a_cached_record_never_hides_a_lease_taken_or_released_since(api: ApiDriver) -> None:
    def revalidated(checkpoint_id: str, etag: str) -> Result:
        return api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-none-match": etag})

    with time_machine.travel(START, tick=False) as clock:
        # Given a record a client cached with its ETag, which revalidates as 304
        checkpoint_id = created(api)
        etag = str(get(api, checkpoint_id).header("ETag"))
        assert revalidated(checkpoint_id, etag).status == 304
        # When another agent takes a lease (the revision stays), the same tag gets the whole record, lease shown
        token = acquire(api, checkpoint_id, holder="worker-2").data["lease_token"]
        leased = revalidated(checkpoint_id, etag)
        assert leased.status == 200, leased.raw_body
        assert leased.data["lease"]["holder"] == "worker-2"
        assert leased.header("ETag") == etag
        # And after the release too (the cached copy may show the lease)
        clock.shift(timedelta(seconds=1))
        assert release(api, checkpoint_id, token).status == 200
        released = revalidated(checkpoint_id, etag)
        assert released.status == 200
        assert "lease" not in released.data or released.data["lease"] is None
        # And once a save wrote after the lease ended, its tag alone tells the record apart again
        clock.shift(timedelta(seconds=1))
        saved = save(api, state={"step": 2})
        assert revalidated(checkpoint_id, str(saved.header("ETag"))).status == 304
