"""Signing in and out of the console, and what a key's scopes offer."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect

from tests.e2e.console.conftest import open_page, shot, sign_in
from tests.e2e.server_process import BatonServe


def test_the_console_page_is_served_with_a_strict_policy(baton: BatonServe) -> None:
    answer = httpx.get(f"{baton.url}/console")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert "access-control-allow-origin" not in answer.headers
    again = httpx.get(f"{baton.url}/console", headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""


def test_signing_in_keeps_the_key_in_session_storage_only(page: Any, baton: BatonServe) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{baton.url}/console")
    shot(page, "sign-in")
    sign_in(page, baton)
    assert page.evaluate("sessionStorage.getItem('baton.key')") == baton.key
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    assert not [url for url in requests if baton.key in url]
    assert baton.key not in page.url
    # The operator key holds keys:manage: every section is offered.
    navigation = page.get_by_role("navigation", name="Sections")
    for label in ("Checkpoints", "LangGraph threads", "Resume preview", "Keys"):
        expect(navigation.get_by_role("link", name=label)).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    # The sign-in form is back: only then is the key's absence worth asserting.
    page.get_by_label("API key").wait_for()
    assert page.evaluate("sessionStorage.getItem('baton.key')") is None
    expect(navigation).to_be_hidden()


def test_a_wrong_key_is_refused_with_the_contracts_message(page: Any, baton: BatonServe) -> None:
    page.goto(f"{baton.url}/console")
    page.get_by_label("API key").fill("btn_not_a_key_of_this_baton_0000000000000000")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expected = httpx.get(f"{baton.url}/v1/whoami", headers={"Authorization": "Bearer btn_not_a_key"}).json()
    expect(alert).to_contain_text("UNAUTHENTICATED")
    expect(alert).to_contain_text(expected["error"]["message"])
    assert page.evaluate("sessionStorage.getItem('baton.key')") is None
    shot(page, "sign-in-refused")


def test_a_key_without_keys_manage_is_not_offered_keys(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    issued = http.post("/v1/keys", json={"agent_id": "console-reader", "scopes": ["checkpoints:read"]})
    assert issued.status_code == 201, issued.text
    watched = open_page(browser)
    try:
        sign_in(watched.page, baton, issued.json()["data"]["secret"])
        navigation = watched.page.get_by_role("navigation", name="Sections")
        # The navigation is drawn whole: once it offers Checkpoints, the missing Keys link is a real absence.
        expect(navigation.get_by_role("link", name="Checkpoints")).to_be_visible()
        expect(navigation.get_by_role("link", name="Keys")).to_have_count(0)
        # Asking for the section by its address shows no key management either: the router's own refusal (not the
        # view that was on the page before the address changed) is on the page when the button is looked for.
        watched.page.goto(f"{baton.url}/console#/keys")
        expect(watched.page.get_by_role("heading", level=1)).to_have_text("No access to keys")
        expect(watched.page.locator("#view")).to_contain_text("keys:manage")
        expect(watched.page.get_by_role("button", name="Create key")).to_have_count(0)
        assert not watched.errors
    finally:
        watched.page.context.close()
