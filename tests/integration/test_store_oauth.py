"""OAuth's items on both DynamoDB engines (in-process moto and DynamoDB Local): a code is exchanged once, a refresh
rotates in one transaction and leaves one live access token, revoking a grant deletes its tokens, every item expires
by TTL, and an access token is checked in one GetItem (then cached), standing for its approving key only while that
key works."""

from __future__ import annotations

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import oauth
from baton_checkpoints.domain.access import hash_secret
from baton_checkpoints.domain.errors import Unauthenticated
from baton_checkpoints.domain.oauth import OAuthError
from baton_checkpoints.store import schema
from tests.integration.conftest import put_key, table_items
from tests.integration.driver import CallCounter
from tests.proof_counts import record

pytestmark = pytest.mark.engines

NOW = 1_800_000_000_000
KEY_SECRET = "btn_test_oauth_agent_key_0001"
KEY_ID = "key_" + "b" * 32
RESOURCE = "https://baton.example/mcp"
SUITE = "oauth store (integration)"


@pytest.fixture
def approval(services: Services) -> oauth.Approval:
    """An approval by an agent key of tenant `acme` that holds mcp:call and checkpoints:read."""
    put_key(services, KEY_SECRET, "acme", "planner", {"mcp:call", "checkpoints:read"}, KEY_ID)
    client = oauth.Client(oauth.new_client_id(), ("https://client.example/cb",), "A client")
    services.oauth.register(client, NOW)
    return oauth.Approval(
        client_id=client.client_id,
        redirect_uri="https://client.example/cb",
        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        resource=RESOURCE,
        scopes=("mcp:call", "checkpoints:read"),
        tenant_id="acme",
        agent_id="planner",
        key_id=KEY_ID,
        key_hash=hash_secret(KEY_SECRET),
    )


def granted(services: Services, approval: oauth.Approval, now: int = NOW) -> tuple[str, str, str]:
    """A code approved and exchanged at `now`: (grant id, access token, refresh token)."""
    code = oauth.new_token(oauth.CODE_PREFIX)
    services.oauth.put_code(code, approval, now)
    found = services.oauth.code(code)
    assert found is not None
    grant_id = oauth.new_grant_id(now)
    access, refresh = oauth.new_token(oauth.ACCESS_PREFIX), oauth.new_token(oauth.REFRESH_PREFIX)
    services.oauth.exchange(code, found, grant_id, access, refresh, now)
    return grant_id, access, refresh


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_code_is_exchanged_once_in_one_transaction(services: Services, approval: oauth.Approval) -> None:
    code = oauth.new_token(oauth.CODE_PREFIX)
    services.oauth.put_code(code, approval, NOW)
    found = services.oauth.code(code)
    assert found is not None
    assert found.approval == approval
    assert found.grant_id is None
    calls = CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", calls)
    try:
        services.oauth.exchange(code, found, "grant_1", "bta_one", "btr_one", NOW)
    finally:
        services.dynamodb.meta.events.unregister("before-call.dynamodb", calls)
    assert dict(calls.calls) == {"TransactWriteItems": 1}
    used = services.oauth.code(code)
    assert used is not None
    assert used.grant_id == "grant_1"
    # A second exchange of the same code (as two racing requests would) is refused, and writes nothing.
    before = table_items(services.dynamodb)
    with pytest.raises(OAuthError) as refused:
        services.oauth.exchange(code, found, "grant_2", "bta_two", "btr_two", NOW)
    assert refused.value.error == "invalid_grant"
    assert table_items(services.dynamodb) == before
    record(SUITE, exchanges=2)


def test_a_refresh_rotates_the_pair_and_deletes_the_old_access_token(
    services: Services, approval: oauth.Approval
) -> None:
    grant_id, access, refresh = granted(services, approval)
    token = services.oauth.token(refresh, "refresh")
    assert token is not None
    assert token.grant_id == grant_id
    assert not token.rotated
    services.oauth.rotate(refresh, token, "bta_new", "btr_new", NOW + 1000)
    assert services.oauth.token(access, "access") is None  # one live access token per grant
    old = services.oauth.token(refresh, "refresh")
    assert old is not None
    assert old.rotated  # remembered, so that its reuse is recognized
    assert services.oauth.token("bta_new", "access") is not None
    # Rotating the old refresh token again (a replay racing the first) is refused and writes nothing.
    before = table_items(services.dynamodb)
    with pytest.raises(OAuthError):
        services.oauth.rotate(refresh, token, "bta_other", "btr_other", NOW + 2000)
    assert table_items(services.dynamodb) == before
    record(SUITE, rotations=2)


def test_revoking_a_grant_deletes_its_live_tokens(services: Services, approval: oauth.Approval) -> None:
    grant_id, access, refresh = granted(services, approval)
    assert services.oauth.revoke_grant("acme", grant_id, NOW + 1000) is True
    assert services.oauth.token(access, "access") is None
    assert services.oauth.token(refresh, "refresh") is None
    assert services.oauth.revoke_grant("acme", grant_id, NOW + 2000) is False
    # Another tenant's name for the same grant id finds nothing.
    assert services.oauth.revoke_grant("other", grant_id, NOW + 2000) is False
    record(SUITE, revocations=3)


def test_every_oauth_item_expires_by_ttl_and_holds_no_secret(services: Services, approval: oauth.Approval) -> None:
    code = oauth.new_token(oauth.CODE_PREFIX)
    services.oauth.put_code(code, approval, NOW)
    _, access, refresh = granted(services, approval)
    items = [i for i in table_items(services.dynamodb) if i[schema.PK]["S"][:2] in ("A#", "S#", "G#")]
    assert {i[schema.PK]["S"][:2] for i in items} == {"A#", "S#", "G#"}
    text = repr(items)
    for secret in (code, access, refresh):
        assert secret not in text  # stored as its SHA-256 only
    for item in items:
        assert int(item[schema.TTL_ATTRIBUTE]["N"]) > NOW // 1000, item[schema.PK]
    record(SUITE, items_checked=len(items))


def test_an_access_token_is_one_get_item_then_cached_and_stops_with_its_key(
    services: Services, approval: oauth.Approval
) -> None:
    _, access, _ = granted(services, approval)
    authenticator = services.authenticator
    calls = CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", calls)
    try:
        principal = authenticator.authenticate(bearer(access), NOW + 1000)
        first = dict(calls.calls)
        calls.reset()
        again = authenticator.authenticate(bearer(access), NOW + 2000)
        second = dict(calls.calls)
    finally:
        services.dynamodb.meta.events.unregister("before-call.dynamodb", calls)
    # The token's GetItem, and the approving key's (cached as any key: the test's key was not read before).
    assert first == {"GetItem": 2}
    assert second == {}
    assert principal == again
    assert (principal.tenant_id, principal.agent_id, principal.key_id) == ("acme", "planner", KEY_ID)
    assert principal.scopes == frozenset({"mcp:call", "checkpoints:read"})
    assert principal.resource == RESOURCE
    # Revoked, the approving key takes its tokens with it (here at once: this container forgets the key).
    record_ = services.keys.find(hash_secret(KEY_SECRET))
    assert record_ is not None
    services.keys.revoke(record_, NOW + 3000)
    authenticator.forget(KEY_ID)
    with pytest.raises(Unauthenticated):
        authenticator.authenticate(bearer(access), NOW + 4000)
    # An expired access token is refused too (a new container, nothing cached).
    record(SUITE, authentications=3)


def test_an_expired_or_unknown_access_token_is_refused(services: Services, approval: oauth.Approval) -> None:
    _, access, _ = granted(services, approval)
    later = NOW + oauth.ACCESS_SECONDS * 1000
    with pytest.raises(Unauthenticated, match="expired"):
        services.authenticator.authenticate(bearer(access), later)
    with pytest.raises(Unauthenticated):
        services.authenticator.authenticate(bearer("bta_" + "x" * 43), NOW)
    record(SUITE, authentications=2)


def test_a_client_lapses_with_its_ttl(services: Services, approval: oauth.Approval) -> None:
    found = services.oauth.client(approval.client_id, NOW)
    assert found is not None
    assert found.redirect_uris == ("https://client.example/cb",)
    assert services.oauth.client(approval.client_id, NOW + oauth.CLIENT_SECONDS * 1000) is None
    assert services.oauth.client("cli_" + "0" * 32, NOW) is None
    record(SUITE, clients=3)


def test_grants_are_listed_live_by_agent_and_paged(services: Services, approval: oauth.Approval) -> None:
    from msgspec.structs import replace

    ids = [granted(services, approval, NOW + n)[0] for n in range(3)]  # grant ids sort by approval time
    other = replace(approval, agent_id="reviewer")
    other_id = granted(services, other, NOW + 1)[0]
    services.oauth.revoke_grant("acme", ids[1], NOW + 10)
    calls = CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", calls)
    try:
        first, cursor = services.oauth.grants("acme", "planner", NOW + 20, 1, None)
    finally:
        services.dynamodb.meta.events.unregister("before-call.dynamodb", calls)
    # The index finds the page (reading on past another agent's grant), one BatchGetItem reads it whole and one
    # its approving keys (a grant lives only while its key works)
    assert calls.calls["BatchGetItem"] == 2
    assert set(calls.calls) == {"Query", "BatchGetItem"}
    assert [g.grant_id for g in first] == [ids[0]]
    assert first[0].approval == approval
    assert first[0].expires_ms > NOW
    assert cursor is not None
    rest, end = services.oauth.grants("acme", "planner", NOW + 20, 10, cursor)
    assert [g.grant_id for g in rest] == [ids[2]]  # the revoked one is not listed
    assert end is None
    everyone, _ = services.oauth.grants("acme", None, NOW + 20, 10, None)
    assert sorted(g.grant_id for g in everyone) == sorted([ids[0], ids[2], other_id])
    assert services.oauth.grants("other", None, NOW + 20, 10, None) == ([], None)
    # A grant past its expiry (not removed by TTL yet) is neither listed nor found
    later = NOW + oauth.REFRESH_SECONDS * 1000 + 1000
    assert services.oauth.grants("acme", None, later, 10, None)[0] == []
    assert services.oauth.grant("acme", ids[0], later) is None
    assert services.oauth.grant("acme", ids[0], NOW + 20) is not None
    # Once the approving key is revoked, its grants are listed no more
    record_ = services.keys.find(hash_secret(KEY_SECRET))
    assert record_ is not None
    services.keys.revoke(record_, NOW + 30)
    assert services.oauth.grants("acme", None, NOW + 40, 10, None)[0] == []
    record(SUITE, grants_listed=6)
