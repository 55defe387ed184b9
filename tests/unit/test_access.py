"""Who may do what: scopes, the `*` wildcard, agents, tenants, key issuance and key validity."""

from __future__ import annotations

import hashlib

import pytest

from baton_checkpoints.domain.access import (
    SCOPES,
    SECRET_PREFIX,
    TENANTS_MANAGE,
    WILDCARD,
    WILDCARD_COVERS,
    KeyRecord,
    Principal,
    check_can_issue,
    effective_scopes,
    hash_secret,
    new_secret,
)
from baton_checkpoints.domain.errors import Forbidden, NotFound, Unauthenticated
from tests.builders import key_record

ORDINARY_SCOPES = sorted(set(SCOPES) - {WILDCARD, TENANTS_MANAGE})
NOW = 1_785_412_084_652


def principal(*scopes: str, agent_id: str = "agent-a", tenant_id: str = "tenant-1") -> Principal:
    """A principal holding `scopes`."""
    return Principal(tenant_id=tenant_id, agent_id=agent_id, key_id="key_1", scopes=frozenset(scopes))


def key(**changes: object) -> KeyRecord:
    """A key record created an hour ago, with no validity window and not revoked (`tests.builders`)."""
    return key_record(**changes)


# --- the scope set --------------------------------------------------------------------------------------------


def test_the_scopes_are_exactly_the_contracts() -> None:
    # Given the scope set the code knows
    # Then it is the contract's list, and `*` covers all of it but itself and tenants:manage
    assert set(SCOPES) == {
        "checkpoints:read",
        "checkpoints:write",
        "checkpoints:delete",
        "blobs:write",
        "leases:write",
        "mcp:call",
        "keys:manage",
        "subjects:purge",
        "usage:read",
        "audit:read",
        "tenants:manage",
        "*",
    }
    assert set(ORDINARY_SCOPES) == WILDCARD_COVERS


# --- holds / require ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ORDINARY_SCOPES)
def test_the_wildcard_holds_every_ordinary_scope(scope: str) -> None:
    # Given a key with only `*`
    # When asked whether it holds an ordinary scope
    # Then it does, and require lets it through
    wildcard = principal(WILDCARD)
    assert wildcard.holds(scope)
    wildcard.require(scope)


def test_the_wildcard_does_not_hold_tenants_manage() -> None:
    # Given a key with `*`
    wildcard = principal(WILDCARD)
    # When asked for tenants:manage
    # Then it does not hold it, and require refuses naming the scope
    assert not wildcard.holds(TENANTS_MANAGE)
    with pytest.raises(Forbidden, match="tenants:manage"):
        wildcard.require(TENANTS_MANAGE)


def test_tenants_manage_is_held_only_when_granted_explicitly() -> None:
    # Given an operator key with `*` and tenants:manage
    operator = principal(WILDCARD, TENANTS_MANAGE)
    # When asked for tenants:manage
    # Then it holds it
    assert operator.holds(TENANTS_MANAGE)


@pytest.mark.parametrize("scope", ORDINARY_SCOPES)
def test_a_plain_key_holds_its_own_scope_and_no_other(scope: str) -> None:
    # Given a key with exactly one ordinary scope
    single = principal(scope)
    # When asked about every scope
    # Then it holds that one only (not `*`, not tenants:manage, not the others)
    assert {s for s in SCOPES if single.holds(s)} == {scope}


@pytest.mark.parametrize("scope", ["checkpoints:*", "CHECKPOINTS:READ", "", "checkpoints:read "])
def test_unknown_scope_names_are_never_held(scope: str) -> None:
    # Given a wildcard key
    # When asked about a name that is not a scope
    # Then it does not hold it (the wildcard is not a pattern)
    assert not principal(WILDCARD).holds(scope)


def test_require_names_the_missing_scope() -> None:
    # Given a read-only key
    reader = principal("checkpoints:read")
    # When a write scope is required
    # Then the refusal is FORBIDDEN and names the scope
    with pytest.raises(Forbidden) as exc:
        reader.require("checkpoints:write")
    assert exc.value.code == "FORBIDDEN"
    assert "checkpoints:write" in exc.value.message


# --- agents ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("requested", [None, "agent-a"])
def test_a_plain_key_reads_and_writes_its_own_agent(requested: str | None) -> None:
    # Given a key without `*`
    plain = principal("checkpoints:read", "checkpoints:write")
    # When it names no agent or its own
    # Then it acts for its own agent
    assert plain.agent_for_read(requested) == "agent-a"
    assert plain.agent_for_write(requested) == "agent-a"
    assert plain.can_see_agent("agent-a")


def test_another_agents_work_is_invisible_to_a_plain_key() -> None:
    # Given a key without `*` (even with every other scope)
    plain = principal(*ORDINARY_SCOPES)
    # When it reads another agent's work
    # Then it is the same NOT_FOUND as a missing resource
    with pytest.raises(NotFound) as exc:
        plain.agent_for_read("agent-b")
    assert exc.value.message == "Resource was not found."
    assert not plain.can_see_agent("agent-b")


def test_a_plain_key_may_not_write_for_another_agent() -> None:
    # Given a key without `*`
    plain = principal("checkpoints:write")
    # When it writes for another agent
    # Then it is FORBIDDEN, naming /agent_id, both agents and the missing scope
    with pytest.raises(Forbidden) as exc:
        plain.agent_for_write("agent-b")
    assert exc.value.message.startswith("/agent_id ")
    assert "agent-b" in exc.value.message
    assert "agent-a" in exc.value.message


@pytest.mark.parametrize("requested", [None, "agent-a", "agent-b"])
def test_a_wildcard_key_acts_for_any_agent_it_names(requested: str | None) -> None:
    # Given a key with `*`
    wildcard = principal(WILDCARD)
    # When it names an agent (or none)
    expected = requested or "agent-a"
    # Then it acts for that agent, defaulting to its own
    assert wildcard.agent_for_read(requested) == expected
    assert wildcard.agent_for_write(requested) == expected
    assert wildcard.can_see_agent(expected)


# --- effective_scopes / check_can_issue -----------------------------------------------------------------------


def test_effective_scopes_expand_the_wildcard_but_not_into_tenants_manage() -> None:
    # Given scope sets with and without `*`
    # When they are expanded
    # Then `*` adds every ordinary scope and keeps itself; nothing adds tenants:manage
    assert effective_scopes({WILDCARD}) == WILDCARD_COVERS | {WILDCARD}
    assert effective_scopes({"checkpoints:read"}) == frozenset({"checkpoints:read"})
    assert TENANTS_MANAGE not in effective_scopes({WILDCARD})


@pytest.mark.parametrize(
    ("issuer_scopes", "agent_id", "tenant_id", "scopes"),
    [
        (("keys:manage", "checkpoints:read"), "agent-a", "tenant-1", {"checkpoints:read"}),
        (("keys:manage", "checkpoints:read"), "agent-a", "tenant-1", {"keys:manage", "checkpoints:read"}),
        ((WILDCARD,), "agent-a", "tenant-1", {WILDCARD}),
        ((WILDCARD,), "agent-b", "tenant-1", {"checkpoints:write", "mcp:call"}),
        ((WILDCARD,), "agent-b", "tenant-1", set(ORDINARY_SCOPES)),
        ((WILDCARD, TENANTS_MANAGE), "agent-z", "tenant-2", {WILDCARD}),
        ((WILDCARD, TENANTS_MANAGE), "agent-a", "tenant-1", {WILDCARD, TENANTS_MANAGE}),
    ],
)
def test_a_key_may_issue_keys_within_what_it_holds(
    issuer_scopes: tuple[str, ...], agent_id: str, tenant_id: str, scopes: set[str]
) -> None:
    # Given an issuer and a key request within its scopes, agent and tenant rights
    issuer = principal(*issuer_scopes)
    # When it issues the key
    # Then nothing is refused
    check_can_issue(issuer, tenant_id, agent_id, frozenset(scopes))


@pytest.mark.parametrize(
    ("issuer_scopes", "agent_id", "tenant_id", "scopes", "named"),
    [
        # scopes it does not hold
        (("keys:manage",), "agent-a", "tenant-1", {"checkpoints:read"}, "checkpoints:read"),
        (("keys:manage", "checkpoints:read"), "agent-a", "tenant-1", {"checkpoints:write"}, "checkpoints:write"),
        # `*` asked for by a key that holds every ordinary scope but not `*` itself
        (tuple(ORDINARY_SCOPES), "agent-a", "tenant-1", {WILDCARD}, "/scopes asks for *"),
        # tenants:manage is not covered by `*`
        ((WILDCARD,), "agent-a", "tenant-1", {TENANTS_MANAGE}, TENANTS_MANAGE),
        # another agent needs `*`
        (tuple(ORDINARY_SCOPES), "agent-b", "tenant-1", {"checkpoints:read"}, "/agent_id"),
        # another tenant needs tenants:manage, `*` is not enough
        ((WILDCARD,), "agent-a", "tenant-2", {"checkpoints:read"}, "/tenant_id"),
        ((TENANTS_MANAGE, "keys:manage"), "agent-b", "tenant-2", {"keys:manage"}, "/agent_id"),
    ],
)
def test_a_key_may_not_issue_beyond_its_own_rights(
    issuer_scopes: tuple[str, ...], agent_id: str, tenant_id: str, scopes: set[str], named: str
) -> None:
    # Given an issuer and a key request beyond its scopes, agent or tenant rights
    issuer = principal(*issuer_scopes)
    # When it issues the key
    # Then it is FORBIDDEN, naming what it lacks
    with pytest.raises(Forbidden) as exc:
        check_can_issue(issuer, tenant_id, agent_id, frozenset(scopes))
    assert named in exc.value.message


def test_issuance_lists_every_missing_scope_in_order() -> None:
    # Given a key that can only manage keys
    issuer = principal("keys:manage")
    # When it asks for three scopes it lacks
    with pytest.raises(Forbidden) as exc:
        check_can_issue(issuer, "tenant-1", "agent-a", frozenset({"mcp:call", "blobs:write", "keys:manage"}))
    # Then all missing scopes are listed, sorted
    assert "/scopes asks for blobs:write, mcp:call," in exc.value.message


# --- KeyRecord.principal --------------------------------------------------------------------------------------


def test_a_valid_key_stands_for_its_principal() -> None:
    # Given a key that is neither revoked, expired nor early
    record = key(scopes=frozenset({"checkpoints:read", "*"}))
    # When its principal is asked for now
    found = record.principal(NOW)
    # Then tenant, agent, key id and scopes come from the record
    assert found == Principal(
        tenant_id="tenant-1", agent_id="agent-a", key_id="key_1", scopes=frozenset({"checkpoints:read", "*"})
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"revoked_ms": NOW}, "revoked"),
        ({"revoked_ms": NOW - 1}, "revoked"),
        ({"expires_ms": NOW}, "expired"),
        ({"expires_ms": NOW - 1}, "expired"),
        ({"not_before_ms": NOW + 1}, "not valid yet"),
        ({"not_before_ms": NOW + 3_600_000, "expires_ms": NOW + 7_200_000}, "not valid yet"),
    ],
)
def test_a_revoked_expired_or_early_key_is_unauthenticated(changes: dict[str, int], reason: str) -> None:
    # Given a key that is revoked, expired, or not valid yet at NOW
    record = key(**changes)
    # When its principal is asked for
    # Then it is UNAUTHENTICATED, saying why
    with pytest.raises(Unauthenticated, match=reason) as exc:
        record.principal(NOW)
    assert exc.value.code == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "changes",
    [
        {"not_before_ms": NOW},
        {"not_before_ms": NOW - 1, "expires_ms": NOW + 1},
        {"revoked_ms": NOW + 60_000},  # a revocation scheduled for later has not happened yet
    ],
)
def test_a_key_is_valid_inside_its_window(changes: dict[str, int]) -> None:
    # Given a key whose window includes NOW
    record = key(**changes)
    # When its principal is asked for
    # Then it is returned
    assert record.principal(NOW).key_id == "key_1"


# --- secrets --------------------------------------------------------------------------------------------------


def test_new_secrets_carry_the_prefix_and_are_unique() -> None:
    # Given many new secrets
    made = [new_secret() for _ in range(200)]
    # Then each starts with btn_, holds 256 bits as URL-safe base64, and none repeats
    assert SECRET_PREFIX == "btn_"
    assert all(s.startswith("btn_") for s in made)
    assert all(len(s) == len("btn_") + 43 for s in made)
    assert all(set(s[4:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for s in made)
    assert len(set(made)) == len(made)


@pytest.mark.parametrize("secret", ["btn_abc", "", "btn_é"])
def test_hash_secret_is_sha256_hex_of_the_utf8_secret(secret: str) -> None:
    # Given a secret
    # When it is hashed
    # Then the hash is the SHA-256 hex of its UTF-8 bytes
    assert hash_secret(secret) == hashlib.sha256(secret.encode("utf-8")).hexdigest()


def test_different_secrets_hash_differently() -> None:
    # Given two secrets that differ in one character
    # When hashed
    # Then the hashes differ, and hashing is stable
    assert hash_secret("btn_a") != hash_secret("btn_b")
    assert hash_secret("btn_a") == hash_secret("btn_a")


def test_agent_for_list_lets_star_keys_list_anyone_and_others_only_themselves() -> None:
    # Given a * key and a plain key of agent-a
    star = Principal(tenant_id="acme", agent_id="agent-a", key_id="key_1", scopes=frozenset({"*"}))
    plain = Principal(tenant_id="acme", agent_id="agent-a", key_id="key_2", scopes=frozenset({"checkpoints:read"}))
    # When each asks whose work a list shows
    # Then the * key gets what it asked for (None: every agent), the plain key only its own agent
    assert star.agent_for_list(None) is None
    assert star.agent_for_list("agent-b") == "agent-b"
    assert plain.agent_for_list(None) == "agent-a"
    assert plain.agent_for_list("agent-a") == "agent-a"
    assert plain.agent_for_key_list("agent-a") == "agent-a"
    assert star.agent_for_key_list("agent-b") == "agent-b"
    # And naming another agent's work without * is as absent as a missing checkpoint (404); its keys are forbidden
    with pytest.raises(NotFound):
        plain.agent_for_list("agent-b")
    with pytest.raises(Forbidden, match=r"agent_id.*agent-b.*keys"):
        plain.agent_for_key_list("agent-b")
