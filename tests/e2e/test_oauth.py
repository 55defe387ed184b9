"""OAuth 2.1 for `/mcp` over real HTTP against `baton serve`: the official `mcp` client's OAuth provider discovers,
registers, is approved through the consent form, exchanges its code with PKCE, lists tools and saves and reads a
checkpoint; then each refusal the contract names, one test each (a wrong verifier, a reused code, a token bound to
another resource, a reused refresh token, a revoked token, a deny, a key lacking `mcp:call`), each checking that
nothing was granted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.builders import OAUTH_REDIRECT as REDIRECT
from tests.builders import pkce
from tests.e2e.oauth_flow import MemoryTokenStorage, OAuthFlow
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "oauth (e2e)"


def issued_key(http: httpx.Client, agent: str, scopes: list[str]) -> str:
    answer = http.post("/v1/keys", json={"agent_id": agent, "scopes": scopes, "description": "oauth test"})
    assert answer.status_code == 201, answer.text
    secret: str = answer.json()["data"]["secret"]
    return secret


@pytest.fixture
def agent_key(http: httpx.Client) -> tuple[str, str]:
    """A new agent and its key, holding what the MCP tools under test need."""
    agent = f"oauth-{uuid.uuid4().hex[:10]}"
    return agent, issued_key(http, agent, ["mcp:call", "checkpoints:read", "checkpoints:write"])


def new_flow(baton: BatonServe) -> OAuthFlow:
    """A client's way through the endpoints by hand, as a hosted platform goes (`tests/e2e/oauth_flow.py`)."""
    return OAuthFlow(httpx.Client(base_url=baton.url))


def mcp_call(
    baton: BatonServe, token: str, method: str = "tools/list", params: dict[str, Any] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{baton.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )


# ---- discovery --------------------------------------------------------------------------------------------------


def test_mcp_without_credentials_points_at_the_resource_metadata_and_the_documents_name_baton(
    baton: BatonServe,
) -> None:
    answer = httpx.post(f"{baton.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{baton.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp:call' in challenge

    resource = httpx.get(f"{baton.url}/.well-known/oauth-protected-resource/mcp").json()
    assert resource["resource"] == f"{baton.url}/mcp"
    assert resource["authorization_servers"] == [baton.url]
    assert resource["bearer_methods_supported"] == ["header"]
    assert "mcp:call" in resource["scopes_supported"]

    server = httpx.get(f"{baton.url}/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == baton.url
    for name, path in (
        ("authorization", "authorize"),
        ("token", "token"),
        ("registration", "register"),
        ("revocation", "revoke"),
    ):
        assert server[f"{name}_endpoint"] == f"{baton.url}/oauth/{path}"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "none" in server["token_endpoint_auth_methods_supported"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert "client_id_metadata_document_supported" in server
    record(SUITE, discovery=3)


# ---- the official client ----------------------------------------------------------------------------------------


def test_the_official_client_discovers_registers_is_approved_and_saves_through_mcp(
    baton: BatonServe, agent_key: tuple[str, str]
) -> None:
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    agent, key = agent_key
    pages: list[int] = []
    decided: dict[str, str] = {}

    async def person(url: str) -> None:
        # A person opens the consent page, signs in with the agent's key and allows.
        async with httpx.AsyncClient() as browser:
            page = await browser.get(url)
            pages.append(page.status_code)
            assert "Baton&#x27;s OAuth client" in page.text or "Baton's OAuth client" in page.text
            params = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
            answer = await browser.post(
                f"{baton.url}/oauth/authorize", data={**params, "key": key, "decision": "approve"}
            )
        assert answer.status_code == 302, answer.text
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        decided.update({name: values[0] for name, values in query.items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=decided["code"], state=decided.get("state"), iss=decided.get("iss"))

    storage = MemoryTokenStorage()
    provider = OAuthClientProvider(
        server_url=f"{baton.url}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT],
            client_name="Baton's OAuth client",
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=person,
        callback_handler=callback,
    )
    subject = f"oauth-{uuid.uuid4().hex[:10]}"

    versions: list[str] = []

    async def session() -> tuple[list[str], Any, Any]:
        http = httpx2.AsyncClient(auth=provider)
        async with http, Client(streamable_http_client(f"{baton.url}/mcp", http_client=http)) as mcp:
            versions.append(mcp.protocol_version)
            tools = await mcp.list_tools()
            saved = await mcp.call_tool(
                "baton_checkpoint_save", {"subject_id": subject, "kind": "task_state", "state": {"step": 1}}
            )
            got = await mcp.call_tool("baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"})
        return [tool.name for tool in tools.tools], saved, got

    names, saved, got = asyncio.run(session())
    assert pages == [200]
    assert versions == ["2026-07-28"]  # the default mode, over OAuth
    assert "baton_checkpoint_save" in names
    assert not saved.is_error, saved
    assert not got.is_error, got
    assert got.structured_content["state"] == {"step": 1}
    assert got.structured_content["agent_id"] == agent  # the grant acts for the approving key's agent
    assert storage.tokens is not None
    assert storage.tokens.access_token.startswith("bta_")
    record(SUITE, official_client_flows=1)


# ---- refusals -----------------------------------------------------------------------------------------------------


def test_a_wrong_verifier_is_refused_and_the_code_still_gives_nothing(
    baton: BatonServe, agent_key: tuple[str, str]
) -> None:
    flow = new_flow(baton)
    flow.register()
    code, _ = flow.code(agent_key[1])
    wrong, _ = pkce()
    answer = flow.exchange(code, wrong)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"
    assert "code_verifier" in answer.json()["error_description"]
    record(SUITE, refusals=1)


def test_a_reused_code_is_refused_and_revokes_what_it_gave(baton: BatonServe, agent_key: tuple[str, str]) -> None:
    flow = new_flow(baton)
    flow.register()
    code, verifier = flow.code(agent_key[1])
    first = flow.exchange(code, verifier)
    assert first.status_code == 200, first.text
    assert first.headers["cache-control"] == "no-store"
    access = first.json()["access_token"]
    assert mcp_call(baton, access).status_code == 200
    again = flow.exchange(code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    # The grant the first exchange made is gone: its tokens no longer work (not cached in any container yet for the
    # refresh token; the access token was cached by the container that served it, for at most the cache's 60 s).
    assert flow.refresh(first.json()["refresh_token"]).json()["error"] == "invalid_grant"
    record(SUITE, refusals=1)


def test_a_token_bound_to_another_resource_is_refused(baton: BatonServe, agent_key: tuple[str, str]) -> None:
    flow = new_flow(baton)
    flow.register()
    elsewhere = flow.decide(agent_key[1], resource="https://elsewhere.example/mcp").response
    assert elsewhere.status_code == 302
    assert parse_qs(urlsplit(elsewhere.headers["location"]).query)["error"] == ["invalid_target"]
    # A token of this origin's /mcp, presented under another origin's name (the Host the client called), is refused.
    tokens = flow.grant(agent_key[1])
    host = urlsplit(baton.url).netloc.replace("127.0.0.1", "localhost")
    answer = httpx.post(
        f"{baton.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {tokens['access_token']}", "Host": host, "Accept": "application/json"},
    )
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    # Nor does any route but /mcp accept it.
    listed = httpx.get(f"{baton.url}/v1/whoami", headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert listed.status_code == 401
    record(SUITE, refusals=3)


def test_a_reused_refresh_token_revokes_its_grant(baton: BatonServe, agent_key: tuple[str, str]) -> None:
    flow = new_flow(baton)
    flow.register()
    tokens = flow.grant(agent_key[1])
    rotated = flow.refresh(tokens["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    reused = flow.refresh(tokens["refresh_token"])
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    # The whole grant went: the newest refresh token too.
    assert flow.refresh(fresh["refresh_token"]).json()["error"] == "invalid_grant"
    record(SUITE, refusals=1)


def test_a_revoked_token_stops_working(baton: BatonServe, agent_key: tuple[str, str]) -> None:
    flow = new_flow(baton)
    flow.register()
    tokens = flow.grant(agent_key[1])
    revoked = httpx.post(f"{baton.url}/oauth/revoke", data={"token": tokens["refresh_token"]})
    assert revoked.status_code == 200
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    # The access token of that grant is deleted; a container that never saw it refuses it at once.
    answer = mcp_call(baton, tokens["access_token"])
    assert answer.status_code == 401
    record(SUITE, refusals=1)


def test_a_deny_goes_back_to_the_client_with_access_denied(baton: BatonServe, agent_key: tuple[str, str]) -> None:
    flow = new_flow(baton)
    flow.register()
    answer = flow.decide(agent_key[1], decision="deny").response
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    assert query["error"] == ["access_denied"]
    assert "code" not in query
    record(SUITE, refusals=1)


def test_a_key_lacking_mcp_call_is_refused_on_the_page(
    baton: BatonServe, http: httpx.Client, agent_key: tuple[str, str]
) -> None:
    reader = issued_key(http, agent_key[0], ["checkpoints:read"])
    flow = new_flow(baton)
    flow.register()
    answer = flow.decide(reader).response
    assert answer.status_code == 403
    assert "mcp:call" in answer.text
    assert "location" not in answer.headers
    wrong = flow.decide("btn_" + "x" * 43).response
    assert wrong.status_code == 401
    record(SUITE, refusals=2)


def test_an_unregistered_redirect_uri_is_never_redirected_to(baton: BatonServe) -> None:
    flow = new_flow(baton)
    flow.register()
    _, params = flow.authorization(redirect_uri="https://attacker.example/cb")
    page = httpx.get(f"{baton.url}/oauth/authorize?{urlencode(params)}", follow_redirects=False)
    assert page.status_code == 400
    assert "location" not in page.headers
    assert "redirect_uri" in page.text
    record(SUITE, refusals=1)


# ---- grants, listed and revoked ---------------------------------------------------------------------------------


def test_grants_are_listed_for_their_agent_and_revoked_through_the_api(
    baton: BatonServe, http: httpx.Client, agent_key: tuple[str, str]
) -> None:
    agent, key = agent_key
    flow = new_flow(baton)
    flow.register(client_name="Baton's OAuth test")
    tokens = flow.grant(key)
    assert mcp_call(baton, tokens["access_token"]).status_code == 200
    # The agent's own key (it holds keys:manage here) lists the grant it approved: whom for, what, until when
    manager = issued_key(http, agent, ["keys:manage", "mcp:call"])
    mine = httpx.get(f"{baton.url}/v1/oauth/grants", headers={"Authorization": f"Bearer {manager}"})
    assert mine.status_code == 200, mine.text
    listed = mine.json()["data"]
    assert [g["client_id"] for g in listed] == [flow.client_id]
    grant = listed[0]
    assert grant["agent_id"] == agent
    assert grant["client_name"] == "Baton's OAuth test"
    assert grant["scopes"] == ["mcp:call", "checkpoints:read", "checkpoints:write"]
    assert grant["resource"] == f"{baton.url}/mcp"
    assert "access_token" not in mine.text
    assert tokens["access_token"] not in mine.text
    assert tokens["refresh_token"] not in mine.text
    # Another agent's key without * sees none of it, and cannot revoke it (404, as absent)
    other = issued_key(http, f"other-{uuid.uuid4().hex[:8]}", ["keys:manage"])
    theirs = httpx.get(f"{baton.url}/v1/oauth/grants", headers={"Authorization": f"Bearer {other}"})
    assert theirs.json()["data"] == []
    refused = httpx.delete(
        f"{baton.url}/v1/oauth/grants/{grant['grant_id']}", headers={"Authorization": f"Bearer {other}"}
    )
    assert refused.status_code == 404
    # The operator's * key revokes it: its refresh token is refused at once
    revoked = http.delete(f"/v1/oauth/grants/{grant['grant_id']}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["data"] == {"grant_id": grant["grant_id"], "revoked": True}
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    assert http.delete(f"/v1/oauth/grants/{grant['grant_id']}").status_code == 404
    assert (
        httpx.get(f"{baton.url}/v1/oauth/grants", headers={"Authorization": f"Bearer {manager}"}).json()["data"] == []
    )
    record(SUITE, grants_listed=2, grants_revoked=1)


def test_revoking_the_approving_key_stops_its_grants_tokens(
    baton: BatonServe, http: httpx.Client, agent_key: tuple[str, str]
) -> None:
    agent, _ = agent_key
    created = http.post("/v1/keys", json={"agent_id": agent, "scopes": ["mcp:call", "checkpoints:read"]}).json()["data"]
    flow = new_flow(baton)
    flow.register()
    tokens = flow.grant(created["secret"])
    assert http.delete(f"/v1/keys/{created['key_id']}").status_code == 200
    # refreshing reads the key fresh: refused at once, everywhere
    refreshed = flow.refresh(tokens["refresh_token"])
    assert refreshed.status_code == 400
    assert "no longer works" in refreshed.json()["error_description"]
    record(SUITE, refusals=1)
