"""API keys and authentication: secrets shown once and stored as hashes, issuing rules, revocation, scopes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.api.auth import Authenticator
from baton_checkpoints.domain.access import hash_secret
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.errors import Unauthenticated
from tests.builders import SUBJECT, lookup, save
from tests.integration.conftest import OPERATOR_SECRET, put_key, table_items
from tests.integration.driver import ApiDriver, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

START = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
MANAGER_SECRET = "btn_test_manager_secret_0001"
ADMIN_SECRET = "btn_test_admin_secret_000001"
READER_SECRET = "btn_test_reader_secret_00001"
WRITER_SECRET = "btn_test_writer_secret_00001"


def create_key(api: ApiDriver, secret: str | None = None, **fields: Any) -> Result:
    request = {"agent_id": "planner", "scopes": ["checkpoints:read", "checkpoints:write"], **fields}
    return api.invoke("create_key", body=request, secret=secret)


def list_keys(api: ApiDriver, secret: str | None = None, **query: str) -> Result:
    return api.invoke("list_keys", query=query, secret=secret)


def revoke(api: ApiDriver, key_id: str, secret: str | None = None) -> Result:
    return api.invoke("revoke_key", path=f"/v1/keys/{key_id}", secret=secret)


def assert_unauthenticated(answer: Result) -> None:
    assert answer.status == 401, answer.body
    assert answer.error["code"] == "UNAUTHENTICATED"


def assert_forbidden(answer: Result) -> None:
    assert answer.status == 403, answer.body
    assert answer.error["code"] == "FORBIDDEN"


# -- issuing and listing --------------------------------------------------------------------------------------


def test_a_new_key_shows_its_secret_once_and_works_at_once(api: ApiDriver) -> None:
    # When it issues a key for the planner agent
    created = create_key(api, description="planner agent")
    # Then the answer carries the secret and the key's facts, and the key authenticates immediately
    assert created.status == 201
    data = created.data
    assert data["secret"].startswith("btn_")
    assert data["key_id"].startswith("key_")
    assert (data["tenant_id"], data["agent_id"]) == ("acme", "planner")
    assert data["scopes"] == ["checkpoints:read", "checkpoints:write"]
    assert data["description"] == "planner agent"
    assert "secret_hash" not in data
    assert save(api, secret=data["secret"]).status == 201


def test_listing_keys_never_shows_a_secret_nor_its_hash(api: ApiDriver) -> None:
    # Given a key issued through the API
    created = create_key(api).data
    listed = list_keys(api)
    # Then the key is there, without its secret or the secret's hash anywhere in the answer
    assert listed.status == 200
    by_id = {item["key_id"]: item for item in listed.data}
    assert created["key_id"] in by_id
    for item in listed.data:
        assert "secret" not in item
        assert "secret_hash" not in item
    for secret in (created["secret"], OPERATOR_SECRET):
        assert secret not in listed.raw_body
        assert hash_secret(secret) not in listed.raw_body
    assert {k: v for k, v in created.items() if k != "secret"} == by_id[created["key_id"]]


def test_the_table_stores_only_the_sha256_of_a_secret(api: ApiDriver, services: Any) -> None:
    # Given a key issued through the API, and the operator key
    secret = create_key(api).data["secret"]
    dump = repr(table_items(services.dynamodb))
    # Then no secret appears anywhere, and each is stored as its SHA-256
    for known in (secret, OPERATOR_SECRET):
        assert known not in dump
        assert known.removeprefix("btn_") not in dump
        assert hash_secret(known) in dump


def test_a_key_cannot_grant_scopes_it_lacks(api: ApiDriver, services: Any) -> None:
    # Given a manager key of agent `manager` holding keys:manage and checkpoints:read
    put_key(services, MANAGER_SECRET, "acme", "manager", {"keys:manage", "checkpoints:read"}, "key_" + "1" * 32)
    # When it issues a key for itself with a scope it lacks, with *, or with tenants:manage
    refused = [
        create_key(api, MANAGER_SECRET, agent_id="manager", scopes=["checkpoints:write"]),
        create_key(api, MANAGER_SECRET, agent_id="manager", scopes=["checkpoints:read", "*"]),
        create_key(api, MANAGER_SECRET, agent_id="manager", scopes=["tenants:manage"]),
    ]
    # Then each is 403, and no key came into being; with the scopes it holds it succeeds
    for answer in refused:
        assert_forbidden(answer)
    assert [k["key_id"] for k in list_keys(api, MANAGER_SECRET).data] == ["key_" + "1" * 32]
    allowed = create_key(api, MANAGER_SECRET, agent_id="manager", scopes=["checkpoints:read"])
    assert allowed.status == 201


def test_a_wildcard_key_cannot_grant_tenants_manage(api: ApiDriver, services: Any) -> None:
    # Given a * key without tenants:manage
    put_key(services, ADMIN_SECRET, "acme", "admin", {"*"}, "key_" + "2" * 32)
    # When it issues a key with tenants:manage
    answer = create_key(api, ADMIN_SECRET, agent_id="admin", scopes=["tenants:manage"])
    assert_forbidden(answer)


def test_a_key_without_wildcard_cannot_issue_for_another_agent(api: ApiDriver, services: Any) -> None:
    # Given a manager key without *
    put_key(services, MANAGER_SECRET, "acme", "manager", {"keys:manage", "checkpoints:read"}, "key_" + "1" * 32)
    # When it issues a key for another agent, even with scopes it holds
    answer = create_key(api, MANAGER_SECRET, agent_id="planner", scopes=["checkpoints:read"])
    assert_forbidden(answer)


def test_another_tenant_needs_tenants_manage(api: ApiDriver, services: Any) -> None:
    # Given a * key of acme without tenants:manage
    put_key(services, ADMIN_SECRET, "acme", "admin", {"*"}, "key_" + "2" * 32)
    # When it issues a key for tenant globex
    answer = create_key(api, ADMIN_SECRET, tenant_id="globex", agent_id="admin", scopes=["checkpoints:read"])
    # Then it is 403 and globex has no keys
    assert_forbidden(answer)
    assert list_keys(api, tenant_id="globex").data == []


def test_a_key_issued_for_another_tenant_works_there_and_sees_nothing_of_the_first(api: ApiDriver) -> None:
    # Given a checkpoint of tenant acme
    acme = save(api, state={"tenant": "acme"})
    assert acme.status == 201
    acme_id = acme.data["checkpoint_id"]
    # When the operator issues a * key of tenant globex for an agent of the same name
    created = create_key(api, tenant_id="globex", agent_id="operator", scopes=["*"])
    assert created.status == 201
    assert created.data["tenant_id"] == "globex"
    globex = created.data["secret"]
    # Then the new key sees none of acme's checkpoints or keys
    assert lookup(api, secret=globex).status == 404
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{acme_id}", secret=globex).status == 404
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints", query={}, secret=globex)
    assert listed.status == 200
    assert listed.data == []
    assert [k["key_id"] for k in list_keys(api, globex).data] == [created.data["key_id"]]
    assert api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{acme_id}", secret=globex).status == 404
    assert revoke(api, "key_" + "a" * 32, globex).status == 404
    # And it works in its own tenant, without touching acme's checkpoint
    own = save(api, secret=globex, state={"tenant": "globex"})
    assert own.status == 201
    assert own.data["checkpoint_id"] != acme_id
    assert lookup(api, secret=globex).data["state"] == {"tenant": "globex"}
    assert lookup(api).data["state"] == {"tenant": "acme"}
    assert lookup(api).data["revision"] == 1


# -- revocation -------------------------------------------------------------------------------------------


def test_revocation_in_the_same_container_is_immediate(api: ApiDriver) -> None:
    # Given a key that has been used (so this container caches it)
    created = create_key(api).data
    assert save(api, secret=created["secret"]).status == 201
    revoked = revoke(api, created["key_id"])
    # Then the revocation is confirmed and the key is refused at once
    assert revoked.status == 200
    assert revoked.data == {"key_id": created["key_id"], "deleted": True}
    assert_unauthenticated(lookup(api, secret=created["secret"]))
    # And it is no longer listed, and revoking it again is 404
    assert created["key_id"] not in [k["key_id"] for k in list_keys(api).data]
    assert revoke(api, created["key_id"]).status == 404


def test_a_key_cached_in_another_container_works_until_the_cache_ttl_then_is_refused(
    api: ApiDriver, services: Any
) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a key, used once in another container (its own Authenticator over the same table)
        created = create_key(api).data
        header = f"Bearer {created['secret']}"
        other_container = Authenticator(services.keys)
        assert other_container.authenticate(header, now_ms()).key_id == created["key_id"]
        # When the key is revoked through this container
        assert revoke(api, created["key_id"]).status == 200
        # Then this container refuses it at once, while the other still trusts its cache just under 60 s
        assert_unauthenticated(lookup(api, secret=created["secret"]))
        traveller.shift(timedelta(seconds=59))
        assert other_container.authenticate(header, now_ms()).key_id == created["key_id"]
        # And once 60 s have passed the other container reads the record again and refuses it
        traveller.shift(timedelta(seconds=1, milliseconds=1))
        with pytest.raises(Unauthenticated):
            other_container.authenticate(header, now_ms())


def test_an_expired_key_is_refused(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a key valid for one hour, used once (so it is cached)
        created = create_key(api, expires_at="2027-01-15T13:00:00.000Z").data
        assert created["expires_at"] == "2027-01-15T13:00:00.000Z"
        traveller.shift(timedelta(minutes=59, seconds=59))
        assert save(api, secret=created["secret"]).status == 201
        traveller.shift(timedelta(seconds=1))
        # Then the key is refused, cached or not
        assert_unauthenticated(lookup(api, secret=created["secret"]))


def test_a_key_not_yet_valid_is_refused_until_not_before(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a key valid from one hour on
        created = create_key(api, not_before="2027-01-15T13:00:00.000Z").data
        # When it is used before that time
        early = lookup(api, secret=created["secret"])
        assert_unauthenticated(early)
        # And from not_before on it works
        traveller.shift(timedelta(hours=1))
        assert save(api, secret=created["secret"]).status == 201


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer btn_unknown_secret", "Bearer a b"],
    ids=["absent", "empty", "no-secret", "blank-secret", "basic", "unknown", "two-tokens"],
)
def test_requests_without_a_valid_bearer_key_are_401(api: ApiDriver, authorization: str | None) -> None:
    # Given a request to a route that needs a key
    # When it carries no usable key
    answer = api.invoke("lookup_checkpoint", headers={"authorization": authorization})
    # Then it is 401 with the contract's envelope and a WWW-Authenticate challenge
    assert_unauthenticated(answer)
    assert answer.header("WWW-Authenticate") is not None
    assert "details" not in answer.error


# -- scopes per route ------------------------------------------------------------------------------------


def test_a_read_only_key_reads_but_cannot_write_delete_or_manage_keys(api: ApiDriver, services: Any) -> None:
    # Given a checkpoint of agent reader, and reader's key holding only checkpoints:read
    saved = save(api, agent_id="reader")
    checkpoint_id = saved.data["checkpoint_id"]
    put_key(services, READER_SECRET, "acme", "reader", {"checkpoints:read"}, "key_" + "3" * 32)
    # When it reads, writes, deletes and manages keys
    # Then reads are allowed
    assert lookup(api, secret=READER_SECRET).status == 200
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", secret=READER_SECRET).status == 200
    listed = api.invoke(
        "list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints", query={}, secret=READER_SECRET
    )
    assert listed.status == 200
    assert [c["checkpoint_id"] for c in listed.data] == [checkpoint_id]
    # And everything else is 403
    assert_forbidden(save(api, secret=READER_SECRET, state={"step": 2}))
    assert_forbidden(
        api.invoke(
            "delete_checkpoint",
            path=f"/v1/checkpoints/{checkpoint_id}",
            headers={"if-match": None},
            secret=READER_SECRET,
        )
    )
    assert_forbidden(list_keys(api, READER_SECRET))
    assert_forbidden(create_key(api, READER_SECRET, agent_id="reader", scopes=["checkpoints:read"]))
    assert_forbidden(revoke(api, "key_" + "3" * 32, READER_SECRET))
    # And nothing changed
    assert lookup(api, secret=READER_SECRET).data["revision"] == 1


def test_a_write_only_key_cannot_read(api: ApiDriver, services: Any) -> None:
    # Given a key holding only checkpoints:write
    put_key(services, WRITER_SECRET, "acme", "writer", {"checkpoints:write"}, "key_" + "4" * 32)
    # When it saves and then reads
    saved = save(api, secret=WRITER_SECRET)
    # Then the save works and the reads are 403
    assert saved.status == 201
    assert_forbidden(lookup(api, secret=WRITER_SECRET))
    assert_forbidden(
        api.invoke("get_checkpoint", path=f"/v1/checkpoints/{saved.data['checkpoint_id']}", secret=WRITER_SECRET)
    )


def test_keys_manage_alone_manages_keys_but_reads_no_checkpoints(api: ApiDriver, services: Any) -> None:
    # Given a key holding only keys:manage
    put_key(services, MANAGER_SECRET, "acme", "manager", {"keys:manage"}, "key_" + "1" * 32)
    # When it lists keys and looks up a checkpoint
    # Then the key routes answer and the checkpoint route is 403
    assert list_keys(api, MANAGER_SECRET).status == 200
    assert_forbidden(lookup(api, secret=MANAGER_SECRET))


def test_a_key_without_wildcard_sees_only_its_own_keys_and_cannot_revoke_others(api: ApiDriver, services: Any) -> None:
    # Given a manager key without *, and a key of another agent
    put_key(services, MANAGER_SECRET, "acme", "manager", {"keys:manage", "checkpoints:read"}, "key_" + "1" * 32)
    other = create_key(api).data
    # When the manager lists keys and revokes the other agent's key
    listed = list_keys(api, MANAGER_SECRET)
    revoked = revoke(api, other["key_id"], MANAGER_SECRET)
    # Then it sees only its own agent's keys and the other key is not its to revoke (404); the key still works
    assert [k["agent_id"] for k in listed.data] == ["manager"]
    assert revoked.status == 404
    assert save(api, secret=other["secret"]).status == 201


# -- logs ------------------------------------------------------------------------------------------------


def _everything_logged(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    out, err = capsys.readouterr()
    records = "\n".join(repr(record.__dict__) for record in caplog.records)
    return "\n".join((out, err, caplog.text, records))


def test_logs_never_contain_a_secret(
    api: ApiDriver, services: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given every logger at DEBUG (Baton's, powertools', botocore's)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="baton")
    # When a key is created, used for writes and reads, revoked, and a wrong key is tried
    created = create_key(api).data
    secret = created["secret"]
    assert save(api, secret=secret).status == 201
    assert lookup(api, secret=secret).status == 200
    assert list_keys(api).status == 200
    assert revoke(api, created["key_id"]).status == 200
    assert lookup(api, secret=secret).status == 401
    assert lookup(api, secret="btn_wrong_secret_for_the_logs").status == 401
    logged = _everything_logged(capsys, caplog)
    # Then something was logged, and no secret appears in it
    assert caplog.records
    for known in (secret, OPERATOR_SECRET, "btn_wrong_secret_for_the_logs"):
        assert known not in logged


def test_a_defect_is_logged_with_its_request_id_and_without_the_secret(
    api: ApiDriver,
    services: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a lookup that fails unexpectedly inside the store
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="baton")

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("simulated defect in the store")

    monkeypatch.setattr(services.checkpoints, "get", broken)
    answer = lookup(api)
    logged = _everything_logged(capsys, caplog)
    # Then the answer is an opaque 500, the cause is logged with the request id, and the secret is not
    assert answer.status == 500
    assert answer.error["code"] == "INTERNAL"
    assert "simulated defect" not in answer.raw_body
    assert "simulated defect in the store" in logged
    assert answer.body["meta"]["request_id"] in logged
    assert OPERATOR_SECRET not in logged
