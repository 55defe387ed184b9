"""Leases over real HTTP against `baton serve`: agents racing for one lease on concurrent connections (2 and 16 at
once, exactly one wins), renewal by the same holder, every write refused without the token (and writing nothing),
release, and a fencing token refused after its lease lapsed and another was granted.

The lapse needs real time (`ttl_seconds` is at least 10): the module's leases of 10 s are taken when the module
starts and the lapse test, last in the file, waits only for what is left of them, once."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton_checkpoints.store import layout
from tests.builders import save_body
from tests.e2e.conftest import TABLE, table_snapshot
from tests.e2e.server_process import BatonServe
from tests.e2e.test_checkpoints import client_for, parse_time_ms
from tests.e2e.test_concurrency import all_at_once
from tests.proof_counts import record

SUITE = "leases (e2e)"
TENANT = "dev"
"""The tenant of `baton serve`'s development key."""
SHORT_TTL = 10
"""The shortest lease the contract allows: what the lapse test waits for."""
WRONG_TOKEN = "1." + "0" * 32
"""Shaped like a token, but no lease's."""


# -- helpers ----------------------------------------------------------------------------------------------------


def new_subject() -> str:
    return f"e2e-lease-{uuid.uuid4().hex}"


def put(client: httpx.Client, subject_id: str, **fields: Any) -> dict[str, Any]:
    """Save on `subject_id` (created or updated); the save's answer."""
    answer = client.post("/v1/checkpoints", json=save_body(subject_id=subject_id, **fields))
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def acquire(client: httpx.Client, checkpoint_id: str, ttl: int = 60, holder: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"ttl_seconds": ttl}
    if holder is not None:
        body["holder"] = holder
    record(SUITE, requests=1)
    return client.post(f"/v1/checkpoints/{checkpoint_id}/lease", json=body)


def granted(answer: httpx.Response, status: int = 201) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    data: dict[str, Any] = answer.json()["data"]
    assert set(data) == {"checkpoint_id", "lease_token", "holder", "expires_at"}, data
    return data


def release(client: httpx.Client, checkpoint_id: str, token: str | None) -> httpx.Response:
    record(SUITE, requests=1)
    headers = {"Lease-Token": token} if token is not None else {}
    return client.delete(f"/v1/checkpoints/{checkpoint_id}/lease", headers=headers)


def counter_of(token: str) -> int:
    """The counter part of a `<counter>.<random>` token."""
    counter, dot, rest = token.partition(".")
    assert dot, token
    assert counter.isdigit(), token
    assert rest, token
    return int(counter)


def read(client: httpx.Client, checkpoint_id: str) -> httpx.Response:
    answer = client.get(f"/v1/checkpoints/{checkpoint_id}")
    assert answer.status_code == 200, answer.text
    return answer


def assert_lease_held(answer: httpx.Response, lease_expires_at: str, code: str = "LEASE_HELD") -> None:
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    assert error["details"] == {"lease_expires_at": lease_expires_at}, error
    record(SUITE, lease_held_answers=1)


def partition(table: Any, subject_id: str) -> list[dict[str, Any]]:
    """Every item of the subject's partition (read from moto directly): the checkpoint, its lease, its revisions."""
    found = table.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": layout.checkpoint_pk(TENANT, subject_id)}},
        ConsistentRead=True,
    )
    return sorted(found["Items"], key=lambda item: item["sk"]["S"])


def issue(http: httpx.Client, agent_id: str, scopes: list[str]) -> tuple[str, str]:
    """A new key: (key_id, secret)."""
    answer = http.post("/v1/keys", json={"agent_id": agent_id, "scopes": scopes})
    assert answer.status_code == 201, answer.text
    data = answer.json()["data"]
    return str(data["key_id"]), str(data["secret"])


def race(baton: BatonServe, checkpoint_id: str, secrets: list[str]) -> list[httpx.Response]:
    """Every key asks for the lease at the same moment, each on its own connection, with its key id as holder."""
    answers = all_at_once(
        baton,
        len(secrets),
        lambda client, i: client.post(
            f"/v1/checkpoints/{checkpoint_id}/lease",
            json={"ttl_seconds": 60},
            headers={"Authorization": f"Bearer {secrets[i]}"},
        ),
    )
    record(SUITE, races=1, racers=len(secrets), requests=len(secrets))
    return answers


# -- the module's short leases, taken first so that their lapse overlaps the other tests --------------------


@dataclass(frozen=True)
class ShortLease:
    subject_id: str
    checkpoint_id: str
    token: str
    expires_at: str


@pytest.fixture(scope="module", autouse=True)
def short_leases(baton: BatonServe) -> dict[str, ShortLease]:
    """Three checkpoints leased by `worker-1` for 10 s, as the module starts (each at revision 2, revision 1 kept)."""
    leases: dict[str, ShortLease] = {}
    with client_for(baton, baton.key) as client:
        for name in ("taken_over", "left_alone", "same_holder_again"):
            subject = new_subject()
            put(client, subject, state={"step": 1}, keep_revisions=2)
            checkpoint_id = str(put(client, subject, state={"step": 2})["checkpoint_id"])
            lease = granted(acquire(client, checkpoint_id, ttl=SHORT_TTL, holder="worker-1"))
            leases[name] = ShortLease(subject, checkpoint_id, lease["lease_token"], lease["expires_at"])
    return leases


# -- racing -------------------------------------------------------------------------------------------------


def assert_one_winner(
    http: httpx.Client, checkpoint_id: str, answers: list[httpx.Response], holders: list[str]
) -> None:
    """Exactly one 201, every other answer 409 LEASE_HELD naming the winner's expiry; the record shows the winner."""
    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == Counter({201: 1, 409: len(answers) - 1}), [a.text for a in answers]
    winner_index = next(i for i, answer in enumerate(answers) if answer.status_code == 201)
    winner = granted(answers[winner_index])
    assert winner["holder"] == holders[winner_index]
    assert counter_of(winner["lease_token"]) == 1  # the checkpoint's first lease, whoever won it
    for loser in (answer for answer in answers if answer.status_code == 409):
        assert_lease_held(loser, winner["expires_at"])
    assert read(http, checkpoint_id).json()["data"]["lease"] == {
        "holder": winner["holder"],
        "expires_at": winner["expires_at"],
    }


def test_two_agents_racing_for_one_lease_exactly_one_wins(http: httpx.Client, baton: BatonServe) -> None:
    # Two other agents of the tenant, each with a `*` key, race for the lease of a third agent's checkpoint
    keys = [issue(http, f"racer-{n}-{uuid.uuid4().hex[:8]}", ["*"]) for n in range(2)]
    holders, secrets = [key_id for key_id, _ in keys], [secret for _, secret in keys]
    for _ in range(5):
        subject = new_subject()
        checkpoint_id = str(put(http, subject, agent_id="lease-owner")["checkpoint_id"])
        before = read(http, checkpoint_id)
        assert_one_winner(http, checkpoint_id, race(baton, checkpoint_id, secrets), holders)
        after = read(http, checkpoint_id)
        assert after.headers["ETag"] == before.headers["ETag"]
        assert after.json()["data"]["revision"] == 1


def test_sixteen_racers_for_one_lease_exactly_one_wins(http: httpx.Client, baton: BatonServe) -> None:
    # Eight `*` keys of other agents and eight keys of the checkpoint's own agent that may only lease
    owner = f"lease-owner-{uuid.uuid4().hex[:8]}"
    keys = [issue(http, f"racer-{n}-{uuid.uuid4().hex[:8]}", ["*"]) for n in range(8)]
    keys += [issue(http, owner, ["leases:write"]) for _ in range(8)]
    holders, secrets = [key_id for key_id, _ in keys], [secret for _, secret in keys]
    assert len(set(holders)) == 16
    for _ in range(2):
        subject = new_subject()
        checkpoint_id = str(put(http, subject, agent_id=owner)["checkpoint_id"])
        assert_one_winner(http, checkpoint_id, race(baton, checkpoint_id, secrets), holders)
        assert read(http, checkpoint_id).json()["data"]["revision"] == 1


# -- renew, release, and what lease operations leave alone --------------------------------------------------


def test_renewal_by_the_same_holder_keeps_the_token_and_lease_operations_change_no_revision_etag_or_expiry(
    http: httpx.Client,
) -> None:
    subject = new_subject()
    checkpoint_id = str(put(http, subject, ttl_seconds=3600)["checkpoint_id"])
    before = read(http, checkpoint_id)
    unchanged = ("revision", "expires_at", "updated_at", "created_at", "state_hash", "ttl_seconds")

    def assert_untouched(answer: httpx.Response) -> None:
        assert answer.headers["ETag"] == before.headers["ETag"]
        assert {f: answer.json()["data"][f] for f in unchanged} == {f: before.json()["data"][f] for f in unchanged}

    first = granted(acquire(http, checkpoint_id, ttl=60, holder="session-7"))
    assert first["checkpoint_id"] == checkpoint_id
    assert first["holder"] == "session-7"
    leased = read(http, checkpoint_id)
    assert_untouched(leased)
    assert leased.json()["data"]["lease"] == {"holder": "session-7", "expires_at": first["expires_at"]}
    assert first["lease_token"].encode() not in leased.content  # the token is shown once, to the holder
    listed = http.get(f"/v1/subjects/{subject}/checkpoints")
    assert listed.json()["data"][0]["lease"] == {"holder": "session-7", "expires_at": first["expires_at"]}
    assert first["lease_token"].encode() not in listed.content

    # The same holder again: 200, the same token, a later expiry; the record follows
    renewed = granted(acquire(http, checkpoint_id, ttl=120, holder="session-7"), status=200)
    assert renewed["lease_token"] == first["lease_token"]
    assert parse_time_ms(renewed["expires_at"]) > parse_time_ms(first["expires_at"])
    after_renewal = read(http, checkpoint_id)
    assert_untouched(after_renewal)
    assert after_renewal.json()["data"]["lease"] == {"holder": "session-7", "expires_at": renewed["expires_at"]}

    # Another holder, even on the same key: refused with the renewed expiry
    assert_lease_held(acquire(http, checkpoint_id, holder="session-8"), renewed["expires_at"])

    released = release(http, checkpoint_id, first["lease_token"])
    assert released.status_code == 200, released.text
    assert released.json()["data"] == {"checkpoint_id": checkpoint_id, "released": True}
    after_release = read(http, checkpoint_id)
    assert_untouched(after_release)
    assert after_release.json()["data"].get("lease") is None


def test_the_holder_defaults_to_the_calling_keys_id(http: httpx.Client, baton: BatonServe) -> None:
    key_id, secret = issue(http, "operator", ["leases:write", "checkpoints:read"])
    checkpoint_id = str(put(http, new_subject())["checkpoint_id"])
    with client_for(baton, secret) as worker:
        lease = granted(acquire(worker, checkpoint_id))
        assert lease["holder"] == key_id
        # The same key again is the same holder: a renewal
        assert granted(acquire(worker, checkpoint_id), status=200)["lease_token"] == lease["lease_token"]


def test_release_ends_the_lease_then_a_plain_save_succeeds_and_the_next_lease_counts_up(http: httpx.Client) -> None:
    subject = new_subject()
    checkpoint_id = str(put(http, subject)["checkpoint_id"])
    lease = granted(acquire(http, checkpoint_id, holder="w1"))
    # Without the header, the header is named; with another token, refused
    missing = release(http, checkpoint_id, None)
    assert missing.status_code == 400, missing.text
    assert missing.json()["error"]["details"]["errors"][0]["pointer"] == "/Lease-Token"
    assert_lease_held(release(http, checkpoint_id, WRONG_TOKEN), lease["expires_at"], code="LEASE_LOST")
    assert_lease_held(release(http, checkpoint_id, "not-a-token"), lease["expires_at"])
    assert read(http, checkpoint_id).json()["data"]["lease"] is not None
    # With its token: released, and a repeat is harmless
    assert release(http, checkpoint_id, lease["lease_token"]).status_code == 200
    assert release(http, checkpoint_id, lease["lease_token"]).status_code == 200
    plain = http.post("/v1/checkpoints", json=save_body(subject_id=subject, state={"step": 2}))
    assert plain.status_code == 200, plain.text
    assert plain.json()["data"]["revision"] == 2
    assert read(http, checkpoint_id).json()["data"]["state"] == {"step": 2}
    # Anyone may take it now, with a token whose counter is past the released one
    again = granted(acquire(http, checkpoint_id, holder="w2"))
    assert counter_of(again["lease_token"]) == counter_of(lease["lease_token"]) + 1
    assert again["lease_token"] != lease["lease_token"]


# -- writes while leased ------------------------------------------------------------------------------------


def test_while_leased_a_save_restore_or_delete_without_the_token_is_refused_and_writes_nothing(
    http: httpx.Client, table: Any
) -> None:
    subject = new_subject()
    put(http, subject, state={"step": 1}, keep_revisions=3)
    checkpoint_id = str(put(http, subject, state={"step": 2})["checkpoint_id"])
    lease = granted(acquire(http, checkpoint_id, ttl=300, holder="holder-a"))
    expires_at, token = lease["expires_at"], lease["lease_token"]
    before = read(http, checkpoint_id)
    table_before = table_snapshot(table)
    idempotency_key = f"e2e-lease-{uuid.uuid4()}"

    def save(**extra: Any) -> httpx.Response:
        headers = extra.pop("headers", None)
        return http.post(
            "/v1/checkpoints", json=save_body(subject_id=subject, state={"step": 3}, **extra), headers=headers
        )

    refused = [
        save(),
        save(lease_token="not-a-token"),
        save(lease_token=token + "0"),
        save(expected_revision=1),  # LEASE_HELD answers before REVISION_CONFLICT
        save(headers={"Idempotency-Key": idempotency_key}),
        save(status="completed"),
        http.post(f"/v1/checkpoints/{checkpoint_id}/restore", json={"revision": 1}),
        http.delete(f"/v1/checkpoints/{checkpoint_id}"),
        http.delete(f"/v1/checkpoints/{checkpoint_id}", headers={"If-Match": before.headers["ETag"]}),
        acquire(http, checkpoint_id, holder="holder-b"),  # nor may another holder take it over
    ]
    # A token of ours that is not this lease's names a lease that is gone (or never was): LEASE_LOST
    lost = [
        save(lease_token=WRONG_TOKEN),
        http.post(f"/v1/checkpoints/{checkpoint_id}/restore", json={"revision": 1, "lease_token": WRONG_TOKEN}),
        http.delete(f"/v1/checkpoints/{checkpoint_id}", headers={"Lease-Token": WRONG_TOKEN}),
    ]
    record(SUITE, requests=len(refused) + len(lost) - 1)
    for answer in refused:
        assert_lease_held(answer, expires_at)
    for answer in lost:
        assert_lease_held(answer, expires_at, code="LEASE_LOST")
    # Nothing was written: not the checkpoint, not its revisions, not an idempotency record
    after = read(http, checkpoint_id)
    assert after.content.replace(after.json()["meta"]["request_id"].encode(), b"") == before.content.replace(
        before.json()["meta"]["request_id"].encode(), b""
    )
    assert after.headers["ETag"] == before.headers["ETag"]
    assert table_snapshot(table) == table_before

    # With the token: the save is accepted (the refused Idempotency-Key was not consumed), the lease stays
    accepted = save(lease_token=token, headers={"Idempotency-Key": idempotency_key})
    assert accepted.status_code == 200, accepted.text
    assert accepted.headers.get("Idempotent-Replayed") is None
    assert accepted.json()["data"]["revision"] == 3
    restored = http.post(f"/v1/checkpoints/{checkpoint_id}/restore", json={"revision": 1, "lease_token": token})
    assert restored.status_code == 200, restored.text
    assert restored.json()["data"]["revision"] == 4
    current = read(http, checkpoint_id).json()["data"]
    assert current["state"] == {"step": 1}
    assert current["lease"] == {"holder": "holder-a", "expires_at": expires_at}
    deleted = http.delete(f"/v1/checkpoints/{checkpoint_id}", headers={"Lease-Token": token})
    assert deleted.status_code == 200, deleted.text
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 404


# -- the lapse: last in the file, so that the wait overlaps the tests above ---------------------------------


def test_after_the_lease_lapsed_a_stale_token_is_refused_once_another_was_granted(
    http: httpx.Client, table: Any, short_leases: dict[str, ShortLease]
) -> None:
    # Wait (once) until every short lease has lapsed
    last_expiry_ms = max(parse_time_ms(lease.expires_at) for lease in short_leases.values())
    wait = last_expiry_ms / 1000 + 0.3 - time.time()
    if wait > 0:
        time.sleep(wait)
    record(SUITE, lapse_waits=1)

    # Another holder takes the lapsed lease over: a new lease, its counter one past
    stale = short_leases["taken_over"]
    taken = granted(acquire(http, stale.checkpoint_id, ttl=60, holder="worker-2"))
    assert counter_of(taken["lease_token"]) == counter_of(stale.token) + 1
    before = read(http, stale.checkpoint_id)
    items_before = partition(table, stale.subject_id)
    # The lapsed holder's token no longer writes, restores, deletes or releases (LEASE_LOST: the lease it names was
    # taken over); nor can it renew (LEASE_HELD: another holder's lease is live)
    lost = [
        http.post(
            "/v1/checkpoints",
            json=save_body(subject_id=stale.subject_id, state={"step": "stale"}, lease_token=stale.token),
        ),
        http.post(f"/v1/checkpoints/{stale.checkpoint_id}/restore", json={"revision": 1, "lease_token": stale.token}),
        http.delete(f"/v1/checkpoints/{stale.checkpoint_id}", headers={"Lease-Token": stale.token}),
        release(http, stale.checkpoint_id, stale.token),
    ]
    for answer in lost:
        assert_lease_held(answer, taken["expires_at"], code="LEASE_LOST")
    assert_lease_held(acquire(http, stale.checkpoint_id, holder="worker-1"), taken["expires_at"])
    after = read(http, stale.checkpoint_id)
    assert after.headers["ETag"] == before.headers["ETag"]
    assert after.json()["data"]["state"] == {"step": 2}
    assert after.json()["data"]["lease"] == {"holder": "worker-2", "expires_at": taken["expires_at"]}
    assert partition(table, stale.subject_id) == items_before
    # The new holder's token writes
    saved = http.post(
        "/v1/checkpoints",
        json=save_body(subject_id=stale.subject_id, state={"step": 3}, lease_token=taken["lease_token"]),
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["data"]["revision"] == 3

    # A lapsed lease no one took over guards nothing any more: a plain save passes and the record shows no lease
    alone = short_leases["left_alone"]
    assert read(http, alone.checkpoint_id).json()["data"].get("lease") is None
    plain = http.post("/v1/checkpoints", json=save_body(subject_id=alone.subject_id, state={"step": 3}))
    assert plain.status_code == 200, plain.text
    assert plain.json()["data"]["revision"] == 3

    # The same holder acquiring after its lease lapsed gets a new lease, and its old token is stale too
    again = short_leases["same_holder_again"]
    renewed = granted(acquire(http, again.checkpoint_id, holder="worker-1"), status=201)
    assert counter_of(renewed["lease_token"]) == counter_of(again.token) + 1
    assert renewed["lease_token"] != again.token
    old_token_save = http.post(
        "/v1/checkpoints", json=save_body(subject_id=again.subject_id, state={"step": 3}, lease_token=again.token)
    )
    assert_lease_held(old_token_save, renewed["expires_at"], code="LEASE_LOST")
    assert read(http, again.checkpoint_id).json()["data"]["revision"] == 2
