"""OAuth's authorization code flow by hand over HTTP, as a hosted MCP client goes through it: register, the consent
form approved with a Baton key, the code exchanged with PKCE, refresh, revoke. The proof suites (isolation, soak,
schemathesis' hooks) share it; tests/e2e/test_oauth.py proves each step and each refusal on its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.builders import (
    OAUTH_REDIRECT,
    OAUTH_SCOPE,
    authorization_form,
    client_registration,
    code_exchange_form,
    pkce,
    refresh_form,
)


@dataclass
class Decision:
    """The consent form's answer: its status, and the parameters of the redirect it sent (a 302)."""

    response: httpx.Response
    query: dict[str, str] = field(default_factory=dict)
    verifier: str = ""


@dataclass
class OAuthFlow:
    """One registered client's way through the endpoints. `http` is a client of the Baton (`base_url` its origin):
    whatever Authorization it sends, these routes are public and read none."""

    http: httpx.Client
    client_id: str = ""
    scope: str = OAUTH_SCOPE
    """What its authorization requests ask for."""

    @property
    def origin(self) -> str:
        return str(self.http.base_url).rstrip("/")

    @property
    def resource(self) -> str:
        return f"{self.origin}/mcp"

    def register(self, **fields: Any) -> str:
        """Register a client (its id, kept)."""
        answer = self.http.post("/oauth/register", json=client_registration(**fields))
        if answer.status_code != 201:
            raise AssertionError(f"registration answered {answer.status_code}: {answer.text}")
        self.client_id = str(answer.json()["client_id"])
        return self.client_id

    def authorization(self, **fields: str) -> tuple[str, dict[str, str]]:
        """(a new PKCE verifier, the authorization request made with its challenge)."""
        verifier, challenge = pkce()
        resource = fields.pop("resource", self.resource)  # another resource may be asked for (and refused)
        return verifier, authorization_form(self.client_id, challenge, resource, **{"scope": self.scope, **fields})

    def decide(self, key: str, decision: str = "approve", **fields: str) -> Decision:
        """Post the consent form signed in with `key`: a 302 (its redirect's parameters read) or a page."""
        verifier, params = self.authorization(**fields)
        answer = self.http.post("/oauth/authorize", data={**params, "key": key, "decision": decision})
        decided = Decision(answer, verifier=verifier)
        if answer.status_code == 302:
            location = answer.headers.get("location", "")
            if not location.startswith(f"{OAUTH_REDIRECT}?"):
                raise AssertionError(f"the consent form redirected to {location!r}, not the registered redirect_uri")
            decided.query = {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}
        return decided

    def code(self, key: str) -> tuple[str, str]:
        """An authorization code approved with `key`, and its PKCE verifier."""
        decided = self.decide(key)
        if decided.response.status_code != 302 or "code" not in decided.query:
            raise AssertionError(f"approval answered {decided.response.status_code}: {decided.response.text[:300]}")
        if decided.query.get("iss") != self.origin:
            raise AssertionError(f"the approval's iss is {decided.query.get('iss')!r}, not {self.origin}")
        return decided.query["code"], decided.verifier

    def exchange(self, code: str, verifier: str, **fields: str) -> httpx.Response:
        """The token request for `code`."""
        return self.http.post("/oauth/token", data=code_exchange_form(code, self.client_id, verifier, **fields))

    def grant(self, key: str) -> dict[str, Any]:
        """A new grant approved with `key`: the token answer of its code's exchange."""
        code, verifier = self.code(key)
        answer = self.exchange(code, verifier)
        if answer.status_code != 200:
            raise AssertionError(f"the code's exchange answered {answer.status_code}: {answer.text}")
        tokens: dict[str, Any] = answer.json()
        return tokens

    def refresh(self, refresh_token: str) -> httpx.Response:
        """The token request refreshing a grant."""
        return self.http.post("/oauth/token", data=refresh_form(refresh_token, self.client_id))

    def revoke(self, token: str, hint: str | None = None) -> httpx.Response:
        """Revoke the grant of `token` (RFC 7009)."""
        form = {"token": token} if hint is None else {"token": token, "token_type_hint": hint}
        return self.http.post("/oauth/revoke", data=form)


def mcp_message(method: str, params: dict[str, Any] | None = None, rpc_id: int = 1) -> dict[str, Any]:
    """A JSON-RPC request to /mcp."""
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params or {}}


MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
"""What a streamable HTTP client accepts."""


class MemoryTokenStorage:
    """The official `mcp` client's token storage (its `TokenStorage` protocol), in memory: what a test's client
    registered as and the tokens it holds."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info
