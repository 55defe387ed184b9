"""OAuth's pure rules: what Baton publishes, which redirect URIs a client may register, what a person may grant,
PKCE (RFC 7636's own example), and what an access token acts as."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton_checkpoints.domain import oauth
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.errors import Unauthenticated
from baton_checkpoints.domain.oauth import OAuthError
from tests.proof_counts import record

ORIGIN = "https://api.baton.example"


def test_the_documents_name_the_origin_as_issuer_and_mcp_as_the_resource() -> None:
    resource = oauth.protected_resource_metadata(ORIGIN)
    assert resource["resource"] == ORIGIN + "/mcp"
    assert resource["authorization_servers"] == [ORIGIN]
    server = oauth.authorization_server_metadata(ORIGIN)
    assert server["issuer"] == ORIGIN
    assert server["token_endpoint"] == ORIGIN + "/oauth/token"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["authorization_response_iss_parameter_supported"] is True
    challenge = oauth.challenge(ORIGIN, "insufficient_scope", "mcp:call")
    assert challenge == (
        f'Bearer resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/mcp", '
        'error="insufficient_scope", scope="mcp:call"'
    )


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "http://127.0.0.1:33418/callback",
        "http://localhost:8080/cb",
        "http://[::1]:9000/cb",
        "https://vscode.dev/redirect",
        "com.example.app:/oauth2redirect",
        "cursor.anysphere:/oauth/callback",
    ],
)
def test_a_client_registers_https_loopback_and_private_use_redirect_uris(uri: str) -> None:
    assert oauth.check_redirect_uri(uri, "/redirect_uris/0") == uri


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("http://example.com/cb", "loopback"),
        ("http://127.0.0.1.example.com/cb", "loopback"),
        ("https://example.com/cb#frag", "fragment"),
        ("javascript:alert(1)", "private-use"),
        ("data:text/html,hi", "private-use"),
        ("myapp:/cb", "private-use"),
        ("https://user:pw@example.com/cb", "user name"),
        ("https:///nohost", "host"),
        ("https://example.com/a b", "spaces"),
        ("https://example.com/" + "a" * 2000, "at most"),
    ],
)
def test_a_redirect_uri_that_is_not_safe_is_refused_naming_the_rule(uri: str, rule: str) -> None:
    with pytest.raises(OAuthError) as refused:
        oauth.check_redirect_uri(uri, "/redirect_uris/3")
    assert refused.value.error == "invalid_redirect_uri"
    assert refused.value.description.startswith("/redirect_uris/3 ")
    assert rule in refused.value.description


def test_a_registered_redirect_uri_is_matched_exactly() -> None:
    client = oauth.Client("cli_x", ("https://a.example/cb", "http://127.0.0.1:9/cb"), None)
    assert client.redirect_for("http://127.0.0.1:9/cb") == "http://127.0.0.1:9/cb"
    for near in ("https://a.example/cb/", "https://A.example/cb", "http://127.0.0.1:10/cb", "https://a.example/cb?x=1"):
        with pytest.raises(OAuthError):
            client.redirect_for(near)
    with pytest.raises(OAuthError, match="several"):
        client.redirect_for(None)
    assert oauth.Client("cli_y", ("https://a.example/cb",), None).redirect_for(None) == "https://a.example/cb"


def test_scopes_asked_are_known_and_granted_at_most_as_the_key_holds() -> None:
    assert oauth.requested_scopes(None) == oauth.GRANTABLE_SCOPES
    assert oauth.requested_scopes("checkpoints:read mcp:call") == ("mcp:call", "checkpoints:read")
    with pytest.raises(OAuthError) as refused:
        oauth.requested_scopes("mcp:call keys:manage")
    assert refused.value.error == "invalid_scope"
    assert "keys:manage" in refused.value.description
    reader = Principal("acme", "planner", "key_1", frozenset({"mcp:call", "checkpoints:read"}))
    assert oauth.granted_scopes(oauth.GRANTABLE_SCOPES, reader) == ("mcp:call", "checkpoints:read")
    wildcard = Principal("acme", "ops", "key_2", frozenset({"*"}))
    assert oauth.granted_scopes(oauth.GRANTABLE_SCOPES, wildcard) == oauth.GRANTABLE_SCOPES
    without = Principal("acme", "planner", "key_3", frozenset({"checkpoints:read"}))
    with pytest.raises(OAuthError) as denied:
        oauth.granted_scopes(oauth.GRANTABLE_SCOPES, without)
    assert denied.value.status == 403
    assert "mcp:call" in denied.value.description


def test_pkce_s256_matches_rfc_7636s_example_and_nothing_else() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert oauth.check_code_challenge(challenge, "S256") == challenge
    assert oauth.verifier_matches(verifier, challenge)
    assert not oauth.verifier_matches(verifier[:-1] + "l", challenge)
    assert not oauth.verifier_matches(None, challenge)
    assert not oauth.verifier_matches("short", challenge)
    for method in (None, "plain", "s256"):
        with pytest.raises(OAuthError, match="S256"):
            oauth.check_code_challenge(challenge, method)
    with pytest.raises(OAuthError, match="required"):
        oauth.check_code_challenge(None, "S256")


@given(st.text(alphabet="ABCabc0123456789-._~", min_size=43, max_size=128))
def test_any_verifier_matches_only_its_own_challenge(verifier: str) -> None:
    import base64
    import hashlib

    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    assert oauth.verifier_matches(verifier, challenge)
    assert not oauth.verifier_matches(verifier + "A" if len(verifier) < 128 else verifier[:-1], challenge)
    record("oauth domain (unit)", verifiers=1)


def test_an_access_token_acts_as_its_key_with_the_grants_scopes_until_either_ends() -> None:
    approval = oauth.Approval(
        "cli_x",
        "https://a.example/cb",
        "c" * 43,
        ORIGIN + "/mcp",
        ("mcp:call", "checkpoints:write"),
        "acme",
        "planner",
        "key_1",
        "hash",
    )
    token = oauth.Token("access", "grant_1", approval, expires_ms=10_000)
    key = Principal("acme", "planner", "key_1", frozenset({"mcp:call", "checkpoints:read"}), expires_ms=5_000)
    principal = token.principal(key, now_ms=1_000)
    # The key lost checkpoints:write since the grant: the token holds only what both hold.
    assert principal.scopes == frozenset({"mcp:call"})
    assert principal.expires_ms == 5_000
    assert principal.resource == ORIGIN + "/mcp"
    with pytest.raises(Unauthenticated, match="expired"):
        token.principal(key, now_ms=10_000)


def test_the_authenticator_knows_an_access_token_by_oauths_own_prefix() -> None:
    from baton_checkpoints.api.auth import ACCESS_TOKEN_PREFIX

    assert ACCESS_TOKEN_PREFIX == oauth.ACCESS_PREFIX
    assert oauth.new_token(oauth.ACCESS_PREFIX).startswith(ACCESS_TOKEN_PREFIX)


def test_loopback_redirect_uris_with_or_without_a_port_and_hosts_judged_label_by_label() -> None:
    from baton_checkpoints.api.origin import valid_host

    assert oauth.check_redirect_uri("http://[::1]/cb", "/r") == "http://[::1]/cb"
    assert oauth.check_redirect_uri("http://localhost/cb", "/r") == "http://localhost/cb"
    for good in ("127.0.0.1:8787", "abc.execute-api.us-east-1.amazonaws.com", "[::1]:9000", "localhost", "a.b."):
        assert valid_host(good), good
    # An input that made the old pattern backtrack for minutes is judged at once
    for bad in ("a" * 5000 + "!", "[::1", "[zz]", "-a.com", "a..b", "a.com:99999999", "a.com:", "a b"):
        assert not valid_host(bad), bad
    for embedded in ("::7f00:1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1"):
        assert not oauth.allowed_address(embedded, loopback=True), embedded
