"""Signing in and out of the console, and what a key's scopes offer."""

from __future__ import annotations

from typing import Any

import httpx

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
        assert navigation.get_by_role("link", name=label).is_visible()
    page.get_by_role("button", name="Sign out").click()
    assert page.evaluate("sessionStorage.getItem('baton.key')") is None
    page.get_by_label("API key").wait_for()


def test_a_wrong_key_is_refused_with_the_contracts_message(page: Any, baton: BatonServe) -> None:
    page.goto(f"{baton.url}/console")
    page.get_by_label("API key").fill("btn_not_a_key_of_this_baton_0000000000000000")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    expected = httpx.get(f"{baton.url}/v1/whoami", headers={"Authorization": "Bearer btn_not_a_key"}).json()
    assert "UNAUTHENTICATED" in alert.inner_text()
    assert expected["error"]["message"] in alert.inner_text()
    assert page.evaluate("sessionStorage.getItem('baton.key')") is None
    shot(page, "sign-in-refused")


def test_a_key_without_keys_manage_is_not_offered_keys(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    issued = http.post("/v1/keys", json={"agent_id": "console-reader", "scopes": ["checkpoints:read"]})
    assert issued.status_code == 201, issued.text
    watched = open_page(browser)
    try:
        sign_in(watched.page, baton, issued.json()["data"]["secret"])
        navigation = watched.page.get_by_role("navigation", name="Sections")
        assert navigation.get_by_role("link", name="Checkpoints").is_visible()
        assert navigation.get_by_role("link", name="Keys").count() == 0
        # Asking for the section by its address shows no key management either.
        watched.page.goto(f"{baton.url}/console#/keys")
        watched.page.get_by_role("heading").first.wait_for()
        assert watched.page.get_by_role("button", name="Create key").count() == 0
        assert not watched.errors
    finally:
        watched.page.context.close()
