"""The audit view in a real browser: the tenant's management events, newest first, filtered by action, page by page,
each with its actor, target and outcome; a key without `audit:read` is not offered the view."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.e2e.console.conftest import shot, sign_in, tenant_key
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record


def test_the_audit_view_lists_a_tenants_events_and_filters_them(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    # Given a tenant whose admin issued three keys and revoked one
    tenant = f"console-audit-{uuid.uuid4().hex[:12]}"
    admin = tenant_key(http, tenant, ["*"])
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as client:
        made = [client.post("/v1/keys", json={"agent_id": f"a{n}", "scopes": ["checkpoints:read"]}) for n in range(3)]
        assert all(m.status_code == 201 for m in made)
        assert client.delete(f"/v1/keys/{made[0].json()['data']['key_id']}").status_code == 200
    # When the admin opens the audit view
    sign_in(page, baton, admin)
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Audit").click()
    page.get_by_role("heading", name="Audit", exact=True).wait_for()
    answer = page.locator(".audit-answer")
    rows = answer.locator(".audit-table tbody tr")
    # Then its five events are there, newest first, each naming the one before it
    expect(rows).to_have_count(5)
    expect(rows.first.locator("th")).to_have_text("5")
    expect(rows.first).to_contain_text("key.revoked")
    expect(rows.last).to_contain_text("key.issued")
    expect(rows.last).to_contain_text("operator")  # the admin's own key, issued by the operator
    expect(answer.locator(".audit-summary")).to_contain_text("Each event on this page names the one before it.")
    shot(page, "audit")
    # And filtered to revocations, one
    page.get_by_label("Action").select_option("key.revoked")
    page.get_by_role("button", name="Show events").click()
    page.wait_for_url("**action=key.revoked*")
    expect(page.locator(".audit-answer .audit-table tbody tr")).to_have_count(1)
    record("console audit (e2e)", views=2)


def test_a_key_without_audit_read_is_not_offered_the_view(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    reader = tenant_key(http, f"console-audit-{uuid.uuid4().hex[:12]}", ["checkpoints:read"], agent="reader")
    sign_in(page, baton, reader)
    navigation = page.get_by_role("navigation", name="Sections")
    expect(navigation.get_by_role("link", name="Checkpoints")).to_be_visible()
    expect(navigation.get_by_role("link", name="Audit")).to_have_count(0)
    record("console audit (e2e)", refusals=1)
