"""Listing and revoking keys: a page never reveals another key, and revocation respects privilege."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import time_machine

from tests.integration.conftest import OPERATOR_SECRET, put_key
from tests.integration.driver import ApiDriver

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

OPERATOR_KEY_ID = "key_" + "a" * 32


def _decoded(cursor: str) -> str:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()


def test_a_key_page_cursor_reveals_nothing_of_other_keys(api: ApiDriver, services: Any) -> None:
    # Given a key-manager of agent alice (no *) in a tenant whose operator key sorts first, and keys of other
    # agents minted between alice's own
    put_key(services, "btn_alice_manager_secret_0001", "acme", "alice", {"keys:manage"}, "key_" + "b" * 32)
    put_key(services, "btn_bob_reader_secret_000001", "acme", "bob", {"checkpoints:read"}, "key_" + "c" * 32)
    put_key(services, "btn_alice_reader_secret_0001", "acme", "alice", {"checkpoints:read"}, "key_" + "d" * 32)
    put_key(services, "btn_carol_reader_secret_0001", "acme", "carol", {"checkpoints:read"}, "key_" + "e" * 32)
    alice = ApiDriver("btn_alice_manager_secret_0001")
    from baton_checkpoints.domain.access import hash_secret

    # When alice lists her keys one at a time
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": "1"} | ({"cursor": cursor} if cursor else {})
        page = alice.invoke("list_keys", query=query)
        assert page.status == 200, page.raw_body
        pages += 1
        cursor = page.body["meta"]["next_cursor"]
        # Then no page is empty unless it is the last, and no cursor carries a secret hash or another key's id
        assert page.data or cursor is None
        seen.extend(k["key_id"] for k in page.data)
        if cursor is None:
            break
        decoded = _decoded(cursor)
        assert hash_secret(OPERATOR_SECRET) not in decoded
        assert "K#" not in decoded
        for other in ("a", "c", "e"):
            assert "key_" + other * 32 not in decoded
        assert decoded.count("key_") == 1
        assert seen[-1] in decoded
    # And paging reached exactly her own keys, each once, in two pages
    assert seen == ["key_" + "b" * 32, "key_" + "d" * 32]
    assert pages == 2


def test_expired_keys_are_not_listed(api: ApiDriver) -> None:
    # Given a key with an expiry, and one without
    created = api.invoke(
        "create_key", body={"agent_id": "bob", "scopes": ["checkpoints:read"], "expires_at": "2099-01-01T00:00:00Z"}
    )
    lasting = api.invoke("create_key", body={"agent_id": "carol", "scopes": ["checkpoints:read"]})
    assert created.status == 201
    assert lasting.status == 201
    # When the clock passes its expiry
    with time_machine.travel("2099-01-01T00:00:01Z", tick=False):
        listed = api.invoke("list_keys", query={})
    # Then it is no longer listed, the others are
    ids = {k["key_id"] for k in listed.data}
    assert created.data["key_id"] not in ids
    assert lasting.data["key_id"] in ids


def test_a_key_without_star_cannot_list_another_agents_keys(api: ApiDriver, services: Any) -> None:
    # Given a key-manager of agent alice without *
    put_key(services, "btn_alice_manager_secret_0002", "acme", "alice", {"keys:manage"}, "key_" + "c" * 32)
    # When it asks for the operator's keys
    result = ApiDriver("btn_alice_manager_secret_0002").invoke("list_keys", query={"agent_id": "operator"})
    # Then it is refused, naming agent_id
    assert result.status == 403
    assert "agent_id" in result.error["message"]


def test_a_star_key_cannot_revoke_a_key_holding_scopes_it_lacks(api: ApiDriver, services: Any) -> None:
    # Given a * key without tenants:manage, and the operator key (with it) in the same tenant
    put_key(services, "btn_star_only_secret_000001", "acme", "admin", {"*"}, "key_" + "d" * 32)
    star = ApiDriver("btn_star_only_secret_000001")
    # When it tries to revoke the operator key
    refused = star.invoke("revoke_key", path=f"/v1/keys/{OPERATOR_KEY_ID}")
    # Then it is forbidden, and the operator key still works
    assert refused.status == 403
    assert "tenants:manage" in refused.error["message"]
    assert api.invoke("list_keys", query={}).status == 200
    # And it may still revoke a key whose scopes it holds
    lesser = api.invoke("create_key", body={"agent_id": "bob", "scopes": ["checkpoints:read"]})
    done = star.invoke("revoke_key", path=f"/v1/keys/{lesser.data['key_id']}")
    assert done.status == 200, done.raw_body


def test_a_key_without_star_cannot_see_another_agents_key_to_revoke(api: ApiDriver, services: Any) -> None:
    # Given a key-manager of agent alice without *, and a key of agent bob
    put_key(services, "btn_alice_manager_secret_0003", "acme", "alice", {"keys:manage"}, "key_" + "e" * 32)
    bob = api.invoke("create_key", body={"agent_id": "bob", "scopes": ["keys:manage"]})
    # When alice tries to revoke bob's key
    result = ApiDriver("btn_alice_manager_secret_0003").invoke("revoke_key", path=f"/v1/keys/{bob.data['key_id']}")
    # Then it is as if the key did not exist
    assert result.status == 404
    assert json.loads(result.raw_body)["error"]["message"] == "Resource was not found."


def test_a_key_list_reads_at_most_its_budget_and_its_cursor_names_no_other_key(
    api: ApiDriver, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a key-manager of agent alice (no *) whose three keys lie after 40 keys of agent bob, and a budget of 8
    # key records read per request
    from baton_checkpoints.store import keys as key_store

    monkeypatch.setattr(key_store, "MAX_KEY_LIST_READS", 8)
    bobs = [f"key_{n:032x}" for n in range(0x1000, 0x1000 + 40 * 0x11, 0x11)]
    for n, key_id in enumerate(bobs):
        put_key(services, f"btn_bob_reader_secret_{n:06d}", "acme", "bob", {"checkpoints:read"}, key_id)
    alices = ["key_" + "f" * 31 + c for c in "012"]
    put_key(services, "btn_alice_manager_secret_0009", "acme", "alice", {"keys:manage"}, alices[0])
    for n, key_id in enumerate(alices[1:]):
        put_key(services, f"btn_alice_reader_secret_{n:04d}", "acme", "alice", {"checkpoints:read"}, key_id)
    scanned: list[int] = []

    def count_reads(parsed: dict[str, Any], **_: Any) -> None:
        scanned.append(int(parsed.get("ScannedCount", 0)))

    events = services.dynamodb.meta.events
    events.register("after-call.dynamodb.Query", count_reads)
    alice = ApiDriver("btn_alice_manager_secret_0009")
    try:
        # When alice lists her keys, following the cursors
        seen: list[str] = []
        cursor = None
        pages = 0
        while pages < 50:
            scanned.clear()
            query = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
            page = alice.invoke("list_keys", query=query)
            assert page.status == 200, page.raw_body
            pages += 1
            # Then no request read more than its budget of key records
            assert sum(scanned) <= 8, scanned
            seen.extend(k["key_id"] for k in page.data)
            cursor = page.body["meta"]["next_cursor"]
            if cursor is None:
                break
            # And no cursor names one of bob's keys: at most a part of one (what two keys read share, and a
            # character more)
            position = json.loads(_decoded(cursor))["a"]
            assert not any(key_id in position for key_id in bobs), position
            assert position in alices or len(position) < len(bobs[0]), position
    finally:
        events.unregister("after-call.dynamodb.Query", count_reads)
    # And the pages, some empty, reached exactly alice's keys, each once
    assert seen == alices
    assert 6 <= pages < 50


def test_a_key_page_whose_budget_ends_on_a_key_it_shows_resumes_after_that_key(
    api: ApiDriver, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's keys read first and eighth among bob's, and a budget of 8 records (reads of 3, then 5, at limit 2)
    from baton_checkpoints.store import keys as key_store

    monkeypatch.setattr(key_store, "MAX_KEY_LIST_READS", 8)
    ids = [f"key_{n:032x}" for n in range(0x100, 0x10C)]
    alices = [ids[0], ids[7]]
    put_key(services, "btn_alice_manager_secret_0010", "acme", "alice", {"keys:manage"}, alices[0])
    put_key(services, "btn_alice_reader_secret_0010", "acme", "alice", {"checkpoints:read"}, alices[1])
    for n, key_id in enumerate(k for k in ids if k not in alices):
        put_key(services, f"btn_bob_reader_secret_1{n:05d}", "acme", "bob", {"checkpoints:read"}, key_id)
    alice = ApiDriver("btn_alice_manager_secret_0010")
    # When alice lists two keys a page
    first = alice.invoke("list_keys", query={"limit": "2"})
    # Then the page shows both, its budget spent on the last, and its cursor resumes after it
    assert first.status == 200, first.raw_body
    assert [k["key_id"] for k in first.data] == alices
    cursor = first.body["meta"]["next_cursor"]
    assert cursor is not None
    assert json.loads(_decoded(cursor))["a"] == alices[1]
    second = alice.invoke("list_keys", query={"limit": "2", "cursor": cursor})
    assert second.status == 200, second.raw_body
    assert second.data == []
    assert second.body["meta"]["next_cursor"] is None
