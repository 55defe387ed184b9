"""OAuth's consent page in a real browser (Debian's Chromium, Playwright) against the session's `baton serve`: it
draws in the console's style under its own Content-Security-Policy with nothing logged, names the client, the
scopes and where the person goes next, refuses a key without `mcp:call` on the page itself, and its form's
approval reaches the client's loopback redirect URI (the policy's `form-action` lets the browser follow it)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from playwright.sync_api import expect

from tests.e2e.console.conftest import PHONE, open_page
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "oauth consent page (browser)"
REDIRECT = "http://127.0.0.1:9/oauth/callback"


def registered(baton: BatonServe, name: str) -> str:
    answer = httpx.post(f"{baton.url}/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": name})
    assert answer.status_code == 201, answer.text
    client_id: str = answer.json()["client_id"]
    return client_id


def authorize_url(baton: BatonServe, client_id: str, state: str) -> str:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "scope": "mcp:call checkpoints:read",
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"{baton.url}/oauth/authorize?{urlencode(query)}"


def agent_key(http: httpx.Client, scopes: list[str]) -> str:
    answer = http.post("/v1/keys", json={"agent_id": f"consent-{uuid.uuid4().hex[:8]}", "scopes": scopes})
    assert answer.status_code == 201, answer.text
    secret: str = answer.json()["data"]["secret"]
    return secret


def test_a_person_approves_in_the_browser_and_is_sent_to_the_client(
    browser: Any, baton: BatonServe, http: httpx.Client
) -> None:
    client_id = registered(baton, 'Tool <b>"Quoted"</b>')
    state = "st-" + uuid.uuid4().hex
    watched = open_page(browser)
    page = watched.page
    arrived: list[str] = []
    # The redirect URI is a loopback port nothing listens on: the browser's request for it is the client's callback.
    page.route("http://127.0.0.1:9/**", lambda route: (arrived.append(route.request.url), route.fulfill(body="ok")))
    try:
        page.goto(authorize_url(baton, client_id, state))
        # Names the client as text (markup in its name stays text), the scopes and where the person goes next
        expect(page.get_by_role("heading", level=1)).to_contain_text('Tool <b>"Quoted"</b>')
        expect(page.locator("main")).to_contain_text("mcp:call")
        expect(page.locator("main")).to_contain_text(REDIRECT)
        assert page.locator("main b").count() == 0
        # drawn with the console's style sheet (not the browser's default look)
        assert page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor") != "rgba(0, 0, 0, 0)"
        page.get_by_label("API key").fill(agent_key(http, ["mcp:call", "checkpoints:read"]))
        page.get_by_role("button", name="Allow").click()
        page.wait_for_url(f"{REDIRECT}*")
        assert arrived, "the browser never reached the client's redirect URI"
        query = parse_qs(urlsplit(arrived[0]).query)
        assert query["state"] == [state]
        assert query["iss"] == [baton.url]
        assert query["code"][0].startswith("btc_")
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
    record(SUITE, approvals=1)


def test_a_key_without_mcp_call_is_refused_on_the_page_and_a_deny_goes_back(
    browser: Any, baton: BatonServe, http: httpx.Client
) -> None:
    client_id = registered(baton, "A reader's client")
    watched = open_page(browser, PHONE)
    page = watched.page
    arrived: list[str] = []
    page.route("http://127.0.0.1:9/**", lambda route: (arrived.append(route.request.url), route.fulfill(body="ok")))
    try:
        page.goto(authorize_url(baton, client_id, "s1"))
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.get_by_label("API key").fill(agent_key(http, ["checkpoints:read"]))
        page.get_by_role("button", name="Allow").click()
        expect(page.get_by_role("alert")).to_contain_text("mcp:call")
        assert not arrived
        # The page again, with the form: the person may deny
        page.get_by_role("button", name="Deny").click()
        page.wait_for_url(f"{REDIRECT}*")
        query = parse_qs(urlsplit(arrived[0]).query)
        assert query["error"] == ["access_denied"]
        assert "code" not in query
        assert watched.refusals, "the 403 page was an answer of the API"
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
    record(SUITE, refusals=1, denials=1)
