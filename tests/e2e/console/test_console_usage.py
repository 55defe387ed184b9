"""The usage view in a real browser: a tenant's requests per day as a chart, what it stored as a line, and every
figure in a table (`GET /v1/usage`); the operator picks the tenant, a tenant's own key sees its own, and a key
without `usage:read` is not offered the view."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.console.conftest import PHONE, shot, sign_in, tenant_key
from tests.e2e.server_process import BatonServe, serve_table
from tests.proof_counts import record


def show_usage(page: Any, tenant: str = "") -> Any:
    """Open the usage view, name the tenant (an operator), ask, and wait for the chart; the answer's panel."""
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Usage").click()
    page.get_by_role("heading", name="Usage", exact=True).wait_for()
    if tenant:
        page.get_by_label("Tenant").fill(tenant)
        page.get_by_role("button", name="Show usage").click()
        page.wait_for_url(f"**tenant={tenant}*")
    answer = page.locator(".usage-answer")
    answer.get_by_role("img").wait_for()
    return answer


@pytest.fixture(scope="module")
def counted(moto_endpoint: str) -> Iterator[BatonServe]:
    """A `baton serve` of this module's own, writing each request's counts at its end (its default; the session's
    server writes them every 100 requests)."""
    server = serve_table(moto_endpoint, f"baton-e2e-console-usage-{uuid.uuid4().hex[:8]}")
    yield server
    server.stop()


def test_the_operator_charts_a_tenants_requests_and_reads_every_figure(page: Any, counted: BatonServe) -> None:
    baton = counted
    http = httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=30)
    # Given a tenant whose key saved three checkpoints and asked who it is
    tenant = f"console-usage-{uuid.uuid4().hex[:12]}"
    secret = tenant_key(http, tenant, ["*"])
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as worker:
        for n in range(3):
            saved = worker.post("/v1/checkpoints", json={"subject_id": f"s{n}", "kind": "task_state", "state": {}})
            assert saved.status_code == 201, saved.text
        assert worker.get("/v1/whoami").status_code == 200
    # When the operator shows its usage
    sign_in(page, baton)
    answer = show_usage(page, tenant)
    # Then the chart has a bar for each of the 30 days, today's saying its 4 requests, and a line of what it stored
    chart = answer.get_by_role("img")
    expect(chart).to_have_attribute("aria-label", re.compile("^Requests per day from "))
    expect(answer.locator("svg g.day")).to_have_count(30)
    today = datetime.now(UTC).date().isoformat()
    expect(answer.locator("svg g.day").last.locator("title")).to_have_text(
        re.compile(rf"^{today}: 4 requests, [0-9.]+ K?B stored$")  # (this server's reaper counts what is stored)
    )
    expect(answer.locator("svg polyline.stored-line")).to_have_count(1)
    # And the legend names the families, and the table holds today's figures, newest first
    expect(answer.locator(".usage-legend")).to_contain_text("checkpoints")
    expect(answer.locator(".usage-legend")).to_contain_text("keys")
    first_row = answer.locator(".usage-table tbody tr").first
    expect(first_row.locator("th")).to_have_text(today)
    expect(first_row.locator("td").nth(0)).to_have_text("4")
    expect(first_row.locator("td").nth(1)).to_have_text("checkpoints 3, keys 1")
    expect(answer.locator(".usage-summary")).to_contain_text(f"{tenant}: 4 requests over 30 days")
    shot(page, "usage")
    record("console usage (e2e)", charts=1)


def test_a_tenants_key_sees_its_own_usage_and_a_key_without_the_scope_is_not_offered_it(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    tenant = f"console-usage-{uuid.uuid4().hex[:12]}"
    own = tenant_key(http, tenant, ["*"])
    reader = tenant_key(http, tenant, ["checkpoints:read"])
    page.set_viewport_size(PHONE)
    # A `*` key: its own tenant's usage, no tenant to pick
    sign_in(page, baton, own)
    answer = show_usage(page)
    expect(page.get_by_label("Tenant")).to_have_count(0)
    expect(answer.locator(".usage-summary")).to_contain_text(f"{tenant}:")
    # An invalid range is refused, naming it, and the view stays usable
    page.get_by_label("From", exact=True).fill("2020-01-01")
    page.get_by_role("button", name="Show usage").click()
    expect(page.locator(".usage-answer")).to_contain_text("from")
    page.get_by_role("button", name="Sign out").click()
    # A key without usage:read: no Usage in the navigation
    sign_in(page, baton, reader)
    navigation = page.get_by_role("navigation", name="Sections")
    expect(navigation.get_by_role("link", name="Checkpoints")).to_be_visible()
    expect(navigation.get_by_role("link", name="Usage")).to_have_count(0)
    record("console usage (e2e)", views=2)
