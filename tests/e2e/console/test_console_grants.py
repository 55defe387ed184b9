"""The console's "Connected apps": the OAuth grants people approved with the tenant's keys, listed beside the keys
and revoked from there (a modal confirmation first), in a real browser against the session's `baton serve`."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.e2e.console.conftest import PHONE, open_page, shot, sign_in
from tests.e2e.oauth_flow import OAuthFlow
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "console grants (browser)"


def approved(baton: BatonServe, http: httpx.Client, app: str) -> tuple[OAuthFlow, dict[str, Any]]:
    """A grant for a new agent's key, by a client named `app`: its flow and its tokens."""
    agent = f"grants-{uuid.uuid4().hex[:8]}"
    created = http.post("/v1/keys", json={"agent_id": agent, "scopes": ["mcp:call", "checkpoints:read"]})
    assert created.status_code == 201, created.text
    flow = OAuthFlow(httpx.Client(base_url=baton.url))
    flow.register(client_name=app)
    return flow, flow.grant(created.json()["data"]["secret"])


def test_a_connected_app_is_listed_and_disconnected_after_a_confirmation(
    browser: Any, baton: BatonServe, http: httpx.Client
) -> None:
    app = f"Claude-like app {uuid.uuid4().hex[:6]} <i>"
    flow, tokens = approved(baton, http, app)
    watched = open_page(browser)
    page = watched.page
    try:
        sign_in(page, baton)
        page.goto(f"{baton.url}/console#/keys")
        panel = page.get_by_role("region", name="Connected apps")
        row = panel.locator("tr", has_text=app)
        expect(row).to_have_count(1)
        expect(row).to_contain_text("mcp:call")
        assert panel.locator("i").count() == 0  # the app's name is text, never markup
        panel.scroll_into_view_if_needed()
        shot(page, "keys-connected-apps")
        row.get_by_role("button", name="Revoke").click()
        dialog = page.get_by_role("dialog", name=f"Disconnect {app}?")
        expect(dialog).to_contain_text(flow.client_id)
        dialog.get_by_role("button", name="Revoke grant").click()
        expect(page.locator("#status")).to_contain_text(f"Disconnected {app}")
        expect(panel.locator("tr", has_text=app)).to_have_count(0)
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
    # Revoked for real: its refresh token is refused
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    record(SUITE, listed=1, revoked=1)


def test_the_connected_apps_fit_a_phone(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    approved(baton, http, "A phone-width app with a long enough name to wrap")
    watched = open_page(browser, PHONE)
    page = watched.page
    try:
        sign_in(page, baton)
        page.goto(f"{baton.url}/console#/keys")
        expect(page.get_by_role("region", name="Connected apps").locator("tbody tr").first).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width}px wide on a {PHONE['width']}px phone"
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
