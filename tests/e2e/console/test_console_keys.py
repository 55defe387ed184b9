"""The keys view in a real browser: list, issue a key (its secret shown once), revoke one after a confirmation, and
the API's refusals shown with the contract's message."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.console.conftest import PHONE, open_page, shot, sign_in
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SECRET = re.compile(r"btn_[A-Za-z0-9_-]{43}")
OWN_OPERATOR_KEY = "btn_console_keys_operator_0000000001"


@pytest.fixture(scope="module")
def keys_baton() -> Iterator[BatonServe]:
    """A `baton serve` of this module's own, on embedded moto with one container.

    The session's server runs on an external moto endpoint, where its operator key expires 12 hours after it
    starts, and Baton refuses a key that outlives its issuer: a key valid for a day cannot be issued there. On
    embedded moto the operator key does not expire. One container makes a revocation visible to every later
    request at once (each container caches the keys it has seen for up to a minute).
    """
    server = BatonServe("--no-reaper", "--containers", "1", dev_key=OWN_OPERATOR_KEY)
    yield server
    server.stop()


def issue(baton: BatonServe, **body: Any) -> dict[str, Any]:
    """A key issued through the API with the server's operator key."""
    answer = httpx.post(f"{baton.url}/v1/keys", json=body, headers={"Authorization": f"Bearer {baton.key}"})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()["data"]
    return created


def listed(baton: BatonServe, agent_id: str) -> list[str]:
    """The ids of the live keys of `agent_id`, as the API lists them."""
    answer = httpx.get(
        f"{baton.url}/v1/keys", params={"agent_id": agent_id}, headers={"Authorization": f"Bearer {baton.key}"}
    )
    assert answer.status_code == 200, answer.text
    return [key["key_id"] for key in answer.json()["data"]]


def revoke_all(baton: BatonServe, agent_id: str) -> None:
    """Revoke what a test left of `agent_id`'s keys, so that other suites' listings stay small."""
    for key_id in listed(baton, agent_id):
        httpx.delete(f"{baton.url}/v1/keys/{key_id}", headers={"Authorization": f"Bearer {baton.key}"})


def storage_text(page: Any) -> str:
    """Everything the page keeps in sessionStorage and localStorage."""
    text: str = page.evaluate(
        "JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])",
    )
    return text


def open_keys(page: Any) -> None:
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Keys").click()
    page.get_by_role("heading", name="Live keys").wait_for()
    page.locator(".keys-table").wait_for()


def test_a_key_is_issued_shown_once_and_revoked_after_a_cancel(page: Any, keys_baton: BatonServe) -> None:
    agent = f"console-{uuid.uuid4().hex[:12]}"
    # Keys of this module's own server, so that the list looks like a tenant's
    issue(
        keys_baton, agent_id="billing-worker", scopes=["checkpoints:read", "checkpoints:write"], description="Billing"
    )
    issue(keys_baton, agent_id="support-triage", scopes=["checkpoints:read"], description="Triage, read only")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, keys_baton)
    open_keys(page)
    own = page.locator("tr.own-key")
    expect(own).to_have_count(1)
    expect(own).to_contain_text("this console")
    shot(page, "keys-list")

    # Given a key for another agent, with two scopes and a validity of one day (an operator's form names no agent
    # of its own: a placeholder, never the operator's own agent as a value to issue for)
    agent_field = page.locator(".key-create").get_by_label("Agent", exact=True)
    expect(agent_field).to_have_value("")
    expect(agent_field).to_have_attribute("placeholder", "e.g. planner")
    agent_field.fill(agent)
    page.get_by_label("checkpoints:read", exact=True).check()
    page.get_by_label("keys:manage", exact=True).check()
    page.get_by_label("Description").fill("issued by the console test")
    page.get_by_label("Valid for (days)").fill("1")
    asked = datetime.now(UTC)
    page.get_by_role("button", name="Create key").click()
    # The confirmation says what will be issued; nothing is issued before it is confirmed
    dialog = page.get_by_role("dialog", name="Issue this key?")
    for shown in (agent, "checkpoints:read", "keys:manage"):
        expect(dialog).to_contain_text(shown)
    expect(dialog).not_to_contain_text("mcp:call")
    assert listed(keys_baton, agent) == []
    dialog.get_by_role("button", name="Issue key").click()

    # Then the secret is shown once, with a copy button and the warning
    panel = page.locator(".key-secret")
    expect(panel.locator(".key-secret-value")).to_have_text(SECRET)
    secret = panel.locator(".key-secret-value").inner_text()
    assert SECRET.fullmatch(secret)
    expect(panel).to_contain_text("will not be shown again")
    # The form starts over as it began: the agent field empty again, not the operator's own agent as a value.
    expect(agent_field).to_have_value("")
    copy = panel.get_by_role("button", name="Copy secret")
    copy.click()
    # The copy is asynchronous (navigator.clipboard.writeText): the status line says when it is done.
    expect(page.locator("#status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    assert secret not in storage_text(page)
    assert secret not in page.url
    shot(page, "keys-created-secret")

    # The key works against the API, as issued
    who = httpx.get(f"{keys_baton.url}/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
    assert who.status_code == 200, who.text
    caller = who.json()["data"]
    assert caller["agent_id"] == agent
    assert caller["scopes"] == ["checkpoints:read", "keys:manage"]
    expires = datetime.fromisoformat(caller["expires_at"])
    assert abs(expires - (asked + timedelta(days=1))) < timedelta(minutes=2)
    key_id = caller["key_id"]
    assert listed(keys_baton, agent) == [key_id]

    # "Done" drops the secret from the page; the list shows the new key
    page.get_by_role("button", name="Done").click()
    expect(panel).to_have_count(0)
    row = page.locator("tr", has=page.get_by_text(key_id, exact=True))
    expect(row).to_contain_text(agent)
    assert secret not in page.content()
    assert secret not in storage_text(page)

    # Revoking asks first: cancelled, the key still lists and works
    revoke = page.get_by_role("button", name=f"Revoke {key_id}")
    revoke.click()
    confirm = page.get_by_role("dialog", name=f"Revoke {key_id}?")
    for shown in (key_id, agent, "checkpoints:read", "keys:manage"):
        expect(confirm).to_contain_text(shown)
    expect(confirm).not_to_contain_text("signs the console out")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_have_count(0)
    expect(page.locator("#status")).to_have_text(f"Nothing was revoked: {key_id} still works.")
    assert listed(keys_baton, agent) == [key_id]
    assert httpx.get(f"{keys_baton.url}/v1/whoami", headers={"Authorization": f"Bearer {secret}"}).status_code == 200

    # Confirmed, the key is revoked: the API refuses it, and the list no longer shows it
    revoke.click()
    confirm.wait_for()
    shot(page, "keys-revoke-confirm")
    confirm.get_by_role("button", name="Revoke key").click()
    row.wait_for(state="detached")
    assert listed(keys_baton, agent) == []
    for method, url in (("GET", "/v1/whoami"), ("POST", "/v1/keys")):
        refused = httpx.request(
            method,
            f"{keys_baton.url}{url}",
            headers={"Authorization": f"Bearer {secret}"},
            json={"agent_id": agent, "scopes": ["checkpoints:read"]} if method == "POST" else None,
        )
        assert refused.status_code == 401, refused.text
    record("console keys (e2e)", issued=1, revoked=1, cancelled=1)


def test_a_narrower_key_is_offered_only_its_own_and_is_signed_out_when_it_revokes_itself(
    browser: Any, baton: BatonServe
) -> None:
    agent = f"narrow-{uuid.uuid4().hex[:12]}"
    narrow = issue(baton, agent_id=agent, scopes=["keys:manage", "checkpoints:read"])
    watched = open_page(browser)
    page = watched.page
    try:
        sign_in(page, baton, narrow["secret"])
        open_keys(page)
        # Only its own agent, only the scopes it holds (the create form is drawn with the view's heading)
        agent_field = page.get_by_label("Agent", exact=True)
        expect(agent_field).to_have_count(1)
        expect(agent_field).to_have_attribute("readonly", re.compile(".*"))
        expect(agent_field).to_have_value(agent)
        offered = page.locator(".key-scope-choice input[type=checkbox]")
        expect(offered).to_have_count(2)
        assert sorted(offered.evaluate_all("boxes => boxes.map((b) => b.value)")) == [
            "checkpoints:read",
            "keys:manage",
        ]
        expect(page.get_by_label("Tenant")).to_have_count(0)

        # A key issued here is shown once; leaving the view drops it
        page.get_by_label("checkpoints:read", exact=True).check()
        page.get_by_role("button", name="Create key").click()
        page.get_by_role("dialog").get_by_role("button", name="Issue key").click()
        expect(page.locator(".key-secret-value")).to_have_text(SECRET)
        secret = page.locator(".key-secret-value").inner_text()
        assert SECRET.fullmatch(secret)
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Resume preview").click()
        page.get_by_role("heading", name="Resume preview").wait_for()
        page.go_back()
        page.get_by_role("heading", name="Live keys").wait_for()
        # Drawn again, list included (the new key listed): the secret is not on the page.
        expect(page.locator(".keys-table")).to_contain_text(narrow["key_id"])
        expect(page.locator(".key-secret")).to_have_count(0)
        assert secret not in page.content()
        assert secret not in storage_text(page)

        # Revoking its own key warns, then signs the console out
        page.get_by_role("button", name=f"Revoke {narrow['key_id']}").click()
        confirm = page.get_by_role("dialog")
        expect(confirm).to_contain_text("signs the console out")
        confirm.get_by_role("button", name="Revoke key").click()
        page.get_by_label("API key").wait_for()
        expect(page.get_by_role("alert")).to_contain_text(narrow["key_id"])
        assert page.evaluate("sessionStorage.getItem('baton.key')") is None
        assert narrow["key_id"] not in listed(baton, agent)
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
        revoke_all(baton, agent)
    record("console keys (e2e)", issued=2, revoked=1)


def test_a_refused_create_shows_the_contracts_message(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    # Given a narrower key that expires in two hours
    agent = f"short-{uuid.uuid4().hex[:12]}"
    expires = (datetime.now(UTC) + timedelta(hours=2)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    answer = http.post("/v1/keys", json={"agent_id": agent, "scopes": ["keys:manage"], "expires_at": expires})
    assert answer.status_code == 201, answer.text
    short = answer.json()["data"]
    watched = open_page(browser)
    page = watched.page
    try:
        sign_in(page, baton, short["secret"])
        open_keys(page)
        # When it asks for a key that would outlive it
        page.get_by_label("keys:manage", exact=True).check()
        page.get_by_label("Valid for (days)").fill("1")
        page.get_by_role("button", name="Create key").click()
        page.get_by_role("dialog").get_by_role("button", name="Issue key").click()
        # Then Baton's refusal is shown with its code and the field it names, and nothing was issued
        alert = page.locator(".key-create").get_by_role("alert")
        expect(alert).to_contain_text("VALIDATION_ERROR")
        expect(alert).to_contain_text("/expires_at")
        expect(page.locator(".key-secret")).to_have_count(0)
        keys = http.get("/v1/keys", params={"agent_id": agent}).json()["data"]
        assert [k["key_id"] for k in keys] == [short["key_id"]]
        assert watched.refusals, "the refusal was an answer of the API"
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
        revoke_all(baton, agent)
    record("console keys (e2e)", refused=1)


def test_the_keys_view_fits_a_phone(browser: Any, baton: BatonServe) -> None:
    watched = open_page(browser, PHONE)
    page = watched.page
    try:
        sign_in(page, baton)
        open_keys(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width}px wide on a {PHONE['width']}px phone"
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
