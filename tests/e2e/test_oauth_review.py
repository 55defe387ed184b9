"""A security review of OAuth for `/mcp`, over real HTTP against `baton serve`: each finding has a test that states
what Baton should do, and failed on the reviewed code. Found: a Host header whose check backtracked for seconds;
requests without a key that answered 500 (a client id or redirect URI with a broken port or bracket, grant types
that are not strings, a registration nested 200,000 deep, a client id too long for a table key); an authorization
link that redirected to any registered site without a person's action; and a code exchanged twice at the same
moment that left the winner's grant alive."""

from __future__ import annotations

import threading
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.e2e.oauth_flow import OAuthFlow
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "oauth review (e2e)"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_a_host_that_would_backtrack_is_refused_at_once(baton: BatonServe) -> None:
    # 31 letters and a "!" took the old pattern 30 s; any length is judged label by label now
    for host in ("a" * 31 + "!", "a" * 250 + "!", "a." * 120 + "-"):
        answer = httpx.get(f"{baton.url}/.well-known/oauth-authorization-server", headers={"Host": host}, timeout=10)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["details"]["errors"][0]["pointer"] == "/Host"
    record(SUITE, hosts=3)


@pytest.mark.parametrize(
    "client_id",
    [
        "https://client.example:99999/x",
        "https://client.example:abc/x",
        "https://[::1/x",
        "https://client.example/" + "a" * 2100,
        "cli_" + "a" * 2100,
    ],
)
def test_a_broken_or_huge_client_id_is_a_page_never_a_500(baton: BatonServe, client_id: str) -> None:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "http://127.0.0.1:9/cb",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
    }
    page = httpx.get(f"{baton.url}/oauth/authorize?{urlencode(query)}")
    assert page.status_code == 400, page.text
    assert "location" not in page.headers
    form = httpx.post(f"{baton.url}/oauth/authorize", data={**query, "decision": "deny"})
    assert form.status_code == 400, form.text
    assert "location" not in form.headers
    record(SUITE, client_ids=1)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"redirect_uris": ["https://[::1/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://[zz]/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://ü.example/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://a.example/cb"], "grant_types": [["a"]]}, "invalid_client_metadata"),
        ({"redirect_uris": ["https://a.example/cb"], "response_types": [{}]}, "invalid_client_metadata"),
    ],
)
def test_a_malformed_registration_is_refused_never_a_500(baton: BatonServe, body: dict[str, Any], error: str) -> None:
    answer = httpx.post(f"{baton.url}/oauth/register", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == error
    record(SUITE, registrations=1)


def test_a_registration_nested_deep_is_refused_never_a_500(baton: BatonServe) -> None:
    deep = '{"redirect_uris": ["https://a.example/cb"], "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    answer = httpx.post(
        f"{baton.url}/oauth/register", content=deep, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_client_metadata"


def test_an_authorization_link_never_redirects_without_a_persons_action(baton: BatonServe) -> None:
    flow = OAuthFlow(httpx.Client(base_url=baton.url))
    flow.register(redirect_uris=["https://attacker.example/cb"])
    for broken in ({"response_type": "token"}, {"code_challenge_method": "plain"}, {"scope": "keys:manage"}):
        _, query = flow.authorization(redirect_uri="https://attacker.example/cb", **broken)
        page = httpx.get(f"{baton.url}/oauth/authorize?{urlencode(query)}", follow_redirects=False)
        assert page.status_code == 400, (broken, page.text)
        assert "location" not in page.headers, broken
    record(SUITE, links=3)


def exchanged_at_once(flow: OAuthFlow, code: str, verifier: str) -> list[httpx.Response]:
    """The answers of two exchanges of one code, sent at the same moment."""
    answers: list[httpx.Response] = []
    start = threading.Barrier(2)

    def exchange() -> None:
        start.wait()
        answers.append(flow.exchange(code, verifier))

    threads = [threading.Thread(target=exchange) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_a_code_exchanged_twice_at_once_leaves_no_grant_alive(baton: BatonServe, http: httpx.Client) -> None:
    agent = f"race-{uuid.uuid4().hex[:8]}"
    key = http.post("/v1/keys", json={"agent_id": agent, "scopes": ["mcp:call"]}).json()["data"]["secret"]
    for _ in range(3):
        flow = OAuthFlow(httpx.Client(base_url=baton.url))
        flow.register()
        code, verifier = flow.code(key)
        answers = exchanged_at_once(flow, code, verifier)
        won = [a.json() for a in answers if a.status_code == 200]
        assert len(won) <= 1, answers
        # Whichever way the race went, the code was used twice: no token of it refreshes
        for tokens in won:
            assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    record(SUITE, races=3)
