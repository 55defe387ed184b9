"""The checkpoints view in a real browser: a subject's checkpoints found, filtered and paged; one checkpoint's
metadata, state tree, resources and OpenCheckpoint document; its lease taken and released; its deletion confirmed;
a hostile state shown as text; and a phone's width. Data is saved through the API with unique subject ids."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.builders import SEED_DOCUMENT
from tests.e2e.console.conftest import PHONE, open_page, shot, sign_in
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "console checkpoints (browser)"


def saved(http: httpx.Client, **body: Any) -> dict[str, Any]:
    """Save a checkpoint through the API; the answer's data."""
    answer = http.post("/v1/checkpoints", json=body)
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def subject_id(label: str) -> str:
    """A subject no other test uses."""
    return f"console-{label}-{uuid.uuid4().hex[:12]}"


def open_checkpoint(page: Any, baton: BatonServe, checkpoint_id: str) -> None:
    """Show a checkpoint's page by its address, and wait for its metadata."""
    page.goto(f"{baton.url}/console#/checkpoints/{checkpoint_id}")
    page.get_by_role("heading", name="Metadata").wait_for()


def rows(page: Any) -> Any:
    """The rows of the checkpoints table."""
    return page.locator("table.ckpt-list tbody tr")


def links(page: Any) -> Any:
    """The checkpoint id each row of the checkpoints table links to, in order."""
    return rows(page).locator("td:first-child a")


def test_a_subject_is_found_filtered_and_paged_through(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = subject_id("list")
    # Six checkpoints: three agents, two kinds each; one of them completed.
    for number in range(3):
        for kind in ("task_state", "conversation"):
            status = "completed" if (number, kind) == (1, "conversation") else "active"
            saved(http, subject_id=subject, agent_id=f"agent-{number}", kind=kind, state={"n": number}, status=status)
    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/checkpoints")
    page.get_by_label("Subject id").fill(subject)
    page.get_by_role("button", name="Show checkpoints").click()
    # The operator key holds `*`: every agent's checkpoints are listed by default.
    page.get_by_role("heading", name=f"Subject {subject}").wait_for()
    expect(page.get_by_label("Agent")).to_have_value("*")
    expect(rows(page)).to_have_count(6)
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page).to_have_url(re.compile(f"subject={re.escape(subject)}"))
    # The list is newest first, as the API answers it.
    listed = http.get(f"/v1/subjects/{subject}/checkpoints").json()["data"]
    shown = [summary["checkpoint_id"] for summary in listed]
    assert len(shown) == 6
    expect(links(page)).to_have_text(shown)

    # Five a page: two pages, the cursor in the address, "First page" back. After each click the address changes
    # first and the router draws afterwards: every check below waits for the page it expects (a row count or the
    # ids shown), so that the list of the page before, still on screen for a moment, is not taken for it.
    page.get_by_label("Per page").select_option("5")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"limit=5"))
    expect(links(page)).to_have_text(shown[:5])
    expect(page.get_by_role("button", name="Next page")).to_be_visible()
    page.get_by_role("button", name="Next page").click()
    page.wait_for_url(re.compile(r"cursor="))
    expect(links(page)).to_have_text(shown[5:])
    expect(page.get_by_role("button", name="First page")).to_be_visible()
    expect(page.get_by_text("Last page")).to_be_visible()
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"cursor="))
    expect(links(page)).to_have_text(shown[:5])
    page.get_by_role("button", name="Next page").click()
    expect(links(page)).to_have_text(shown[5:])
    page.get_by_role("button", name="First page").click()
    expect(page).not_to_have_url(re.compile(r"cursor="))
    expect(links(page)).to_have_text(shown[:5])
    expect(page.get_by_role("button", name="Next page")).to_be_visible()

    # Filters: kind, then status; the completed conversation of agent-1 is the one left.
    page.get_by_label("Kind").select_option("conversation")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"kind=conversation"))
    expect(rows(page)).to_have_count(3)
    expect(page.get_by_text("Last page")).to_be_visible()
    expect(rows(page).locator("td:nth-child(2)")).to_have_text(["conversation"] * 3)
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"status=completed"))
    expect(rows(page)).to_have_count(1)
    only = rows(page).first
    expect(only).to_contain_text("agent-1")
    expect(only.locator(".badge")).to_have_text("completed")
    # One agent named: its two checkpoints of every kind and status.
    page.get_by_label("Kind").select_option("")
    page.get_by_label("Status").select_option("")
    page.get_by_label("Agent").fill("agent-2")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"agent=agent-2"))
    expect(rows(page)).to_have_count(2)
    expect(rows(page).locator("td:nth-child(3)")).to_have_text(["agent-2", "agent-2"])
    expect(page.get_by_text("Last page")).to_be_visible()

    # The subject is remembered in this tab, and offered as a link.
    recent = page.get_by_role("navigation", name="Subjects opened in this tab")
    expect(recent.get_by_role("link", name=subject)).to_be_visible()
    assert subject in json.loads(page.evaluate("sessionStorage.getItem('baton.recent-subjects')"))
    page.get_by_label("Agent").fill("*")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"agent=%2A|agent=\*"))
    expect(links(page)).to_have_text(shown[:5])
    expect(page.get_by_role("button", name="Next page")).to_be_visible()
    shot(page, "checkpoints-list")
    # A row links to its checkpoint.
    rows(page).first.get_by_role("link").click()
    page.get_by_role("heading", name="Metadata").wait_for()
    expect(page).to_have_url(re.compile(f"#/checkpoints/{shown[0]}$"))
    expect(page.locator("h1 .ckpt-id")).to_have_text(shown[0])
    record(SUITE, checkpoints=6, pages=4, filters=4)


def test_opening_by_id_shows_metadata_etag_countdown_state_and_a_resource(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    subject = subject_id("detail")
    content = f"the report {uuid.uuid4()}\n".encode() * 50
    declared = http.post(
        "/v1/blobs",
        json={"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": "text/plain"},
    )
    assert declared.status_code == 201, declared.text
    blob = declared.json()["data"]
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(blob["upload"]["url"], content=content, headers=blob["upload"]["headers"])
    assert put.status_code == 200, put.text
    resource = {
        "name": "report.txt",
        "blob_id": blob["blob_id"],
        "sha256": blob["sha256"],
        "size": blob["size"],
        "media_type": "text/plain",
    }
    state = {"plan": {"steps": [{"name": "fetch"}, {"name": "deeply", "detail": {"needle": "haystack-marker"}}]}}
    common = {"subject_id": subject, "kind": "workflow", "ttl_seconds": 120, "keep_revisions": 3}
    saved(http, **common, state={"plan": "first"})
    data = saved(http, **common, state=state, resources=[resource], source={"host": "ci-runner", "model": "a-model"})
    checkpoint_id = data["checkpoint_id"]

    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/checkpoints")
    # An id that is not a checkpoint id is refused before any request.
    page.get_by_label("Checkpoint id").fill("not-an-id")
    page.get_by_role("button", name="Open checkpoint").click()
    page.get_by_text("A checkpoint id is ckpt_ followed by 32 lowercase hex digits.").wait_for()
    page.get_by_label("Checkpoint id").fill(checkpoint_id)
    page.get_by_role("button", name="Open checkpoint").click()
    page.get_by_role("heading", name="Metadata").wait_for()
    metadata = page.locator("section.ckpt-meta")
    for expected in (subject, "workflow", "ci-runner", "a-model", "active"):
        expect(metadata).to_contain_text(expected)
    expect(metadata.locator(".ckpt-etag")).to_have_text(f'W/"{checkpoint_id}:2"')
    expect(metadata.get_by_role("link", name="Open its history")).to_have_attribute(
        "href", f"#/history/{checkpoint_id}"
    )
    # The expiry counts down every second.
    countdown = metadata.locator(".countdown")
    before = countdown.inner_text()
    assert re.fullmatch(r"in 1 min \d+ s|in \d+ s", before), before
    page.wait_for_function(
        "before => document.querySelector('section.ckpt-meta .countdown').textContent !== before", arg=before
    )

    # The state: a tree whose search opens the branch holding a match.
    tree = page.get_by_role("region", name="state")
    # Two levels are open: `plan` shows, the value three levels down is not built yet.
    expect(tree.get_by_text('"plan"')).to_be_visible()
    expect(tree.get_by_text("haystack")).to_have_count(0)
    page.get_by_label("Search the state").fill("haystack")
    page.get_by_label("Search the state").press("Enter")
    tree.get_by_text("1 match").or_(page.get_by_text("1 match")).first.wait_for()
    expect(tree.locator("mark")).to_have_text(["haystack"])
    expect(tree.get_by_text("-marker").first).to_be_visible()

    # The resource: its facts and a download link that opens in a new tab and downloads the bytes.
    resources = page.locator("table.ckpt-resources")
    expect(resources).to_contain_text("report.txt")
    expect(resources).to_contain_text(blob["sha256"])
    link = resources.get_by_role("link", name="Download report.txt")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    with httpx.Client(timeout=30) as outsider:
        downloaded = outsider.get(link.get_attribute("href") or "")
    assert downloaded.status_code == 200
    assert downloaded.content == content
    shot(page, "checkpoint-detail")
    record(SUITE, checkpoints=1, resources=1, searches=1)


def test_an_opencheckpoint_document_is_laid_out_apart(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    document = json.loads(json.dumps(SEED_DOCUMENT))
    document["task"]["objective"] = "Refund the duplicate, and only it."
    document["task"]["next"] = ["Ask the billing lead", "Refund ch_2"]
    document["operations"].append({"kind": "action", "status": "done", "description": "Looked up the charges."})
    document["operations"].append(
        {"kind": "action", "status": "queued", "description": "Refund ch_2.", "repeat_safe": False, "owner": "billing"}
    )
    document["continuation"]["stop_conditions"].append({"description": "Stop if the customer disputes."})
    data = saved(http, subject_id=subject_id("ocp"), kind="task_state", format="opencheckpoint/0.1", state=document)
    sign_in(page, baton)
    open_checkpoint(page, baton, data["checkpoint_id"])
    panel = page.locator("section.ckpt-ocp")
    panel.get_by_role("heading", name="OpenCheckpoint document").wait_for()
    for expected in ("Duplicate charge on annual renewal", "awaiting_input", "Refund the duplicate, and only it."):
        expect(panel).to_contain_text(expected)
    expect(panel.get_by_role("listitem").filter(has_text="Ask the billing lead")).to_have_count(1)
    # Pending: the approval and the queued refund; the finished lookup is not pending.
    expect(panel.get_by_role("heading", name="Pending operations (2 of 3)")).to_be_visible()
    pending = panel.locator("table.ckpt-operations tbody tr")
    expect(pending).to_have_count(2)
    expect(pending.nth(0)).to_contain_text("Billing lead approves refunding ch_2.")
    expect(pending.nth(1)).to_contain_text("Refund ch_2.")
    expect(pending.nth(1)).to_contain_text("billing")
    expect(panel.locator("table.ckpt-operations")).not_to_contain_text("Looked up the charges.")
    expect(panel.locator("ul.ckpt-stops li")).to_have_text(
        ["Never refund both charges.", "Stop if the customer disputes."]
    )
    # The rest (statements) is in the tree.
    page.get_by_label("Search the state").fill("customer email")
    page.get_by_label("Search the state").press("Enter")
    page.get_by_role("region", name="state").locator("mark").first.wait_for()
    shot(page, "checkpoint-opencheckpoint")
    record(SUITE, checkpoints=1, operations=4, stop_conditions=2)


def test_a_hostile_state_is_shown_as_text(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    script = "<script>window.pwned=1</script>"
    image = "<img src=x onerror=window.pwned=2>"
    data = saved(
        http,
        subject_id=subject_id("xss") + image,
        kind="task_state",
        state={script: image, "list": [script, {"deep": image}]},
        source={"host": script},
    )
    sign_in(page, baton)
    open_checkpoint(page, baton, data["checkpoint_id"])
    tree = page.get_by_role("region", name="state")
    tree.get_by_text(json.dumps(image)).first.wait_for()
    expect(tree.get_by_text(json.dumps(script)).first).to_be_visible()
    expect(page.locator("section.ckpt-meta").get_by_text(script)).to_be_visible()
    page.get_by_label("Search the state").fill("onerror")
    page.get_by_label("Search the state").press("Enter")
    # The search opens the way to every match: both images' text, the deep one included, are drawn.
    expect(tree.locator("mark")).to_have_count(2)
    assert page.evaluate("typeof window.pwned") == "undefined"
    expect(page.locator("main img")).to_have_count(0)
    expect(page.locator("main script")).to_have_count(0)
    # The subject list shows it as text too.
    page.get_by_role("link", name=re.compile("^All checkpoints of")).click()
    page.locator("table.ckpt-list tbody tr").first.wait_for()
    expect(page.get_by_role("heading", name=f"Subject {data['subject_id']}")).to_be_visible()
    assert page.evaluate("typeof window.pwned") == "undefined"
    expect(page.locator("main img")).to_have_count(0)
    record(SUITE, hostile_strings=2)


def test_a_lease_is_taken_and_released_through_the_console(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    data = saved(http, subject_id=subject_id("lease"), kind="task_state", state={"step": 1})
    checkpoint_id = data["checkpoint_id"]
    sign_in(page, baton)
    open_checkpoint(page, baton, checkpoint_id)
    lease = page.locator("section.ckpt-lease")
    expect(lease.get_by_text("No lease is held.")).to_be_visible()
    # Out of range: refused before asking.
    lease.get_by_label("Lease for (seconds)").fill("5")
    lease.get_by_label("Holder").fill("console-operator")
    lease.get_by_role("button", name="Take a lease").click()
    lease.get_by_text("The lease lasts 10 to 86400 seconds.").wait_for()
    # Cancelled: nothing is taken.
    lease.get_by_label("Lease for (seconds)").fill("600")
    lease.get_by_role("button", name="Take a lease").click()
    dialog = page.get_by_role("dialog", name="Take a lease")
    expect(dialog).to_contain_text("console-operator")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]["lease"] is None
    # Confirmed: the token is shown once, and the API shows the lease.
    lease.get_by_role("button", name="Take a lease").click()
    page.get_by_role("dialog", name="Take a lease").get_by_role("button", name="Take the lease").click()
    token = lease.locator(".ckpt-token code")
    expect(token).to_have_text(re.compile(r"^\d+\.\S+$"))
    expect(lease.get_by_role("button", name="Copy token")).to_be_visible()
    held = http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]["lease"]
    assert held["holder"] == "console-operator"
    expect(lease.locator("dl")).to_contain_text("console-operator")
    expect(lease.locator(".countdown")).to_have_text(re.compile(r"^in (9|10) min"))
    expect(lease.get_by_label("Lease token")).to_have_value(token.inner_text())
    shot(page, "checkpoint-lease")
    # A delete while leased carries the token this tab holds (the lease would refuse it otherwise): not done here.
    # Release, confirmed: the API shows no lease.
    lease.get_by_role("button", name="Release the lease").click()
    page.get_by_role("dialog", name="Release the lease").get_by_role("button", name="Release").click()
    lease.get_by_text("No lease is held.").wait_for()
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]["lease"] is None
    expect(lease.locator(".ckpt-token")).to_have_count(0)
    record(SUITE, leases_taken=1, leases_released=1, cancelled=1)


def test_a_lease_held_elsewhere_is_released_with_the_pasted_token(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    data = saved(http, subject_id=subject_id("lease-held"), kind="task_state", state={"step": 1})
    checkpoint_id = data["checkpoint_id"]
    granted = http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 300, "holder": "worker-7"})
    assert granted.status_code == 201, granted.text
    sign_in(page, baton)
    open_checkpoint(page, baton, checkpoint_id)
    lease = page.locator("section.ckpt-lease")
    expect(lease).to_contain_text("worker-7")
    expect(lease.get_by_label("Lease token")).to_have_value("")
    # A wrong token: the contract's LEASE_HELD, and the lease stays.
    lease.get_by_label("Lease token").fill("1.not-the-token")
    lease.get_by_role("button", name="Release the lease").click()
    page.get_by_role("dialog", name="Release the lease").get_by_role("button", name="Release").click()
    expect(lease.get_by_role("alert")).to_contain_text("LEASE_HELD")
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]["lease"]["holder"] == "worker-7"
    lease.get_by_label("Lease token").fill(granted.json()["data"]["lease_token"])
    lease.get_by_role("button", name="Release the lease").click()
    page.get_by_role("dialog", name="Release the lease").get_by_role("button", name="Release").click()
    lease.get_by_text("No lease is held.").wait_for()
    after = http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]
    assert after.get("lease") is None, after
    record(SUITE, leases_released=1, refused=1)


def test_delete_is_confirmed_and_conditional_on_the_etag_shown(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    subject = subject_id("delete")
    data = saved(http, subject_id=subject, kind="cursor", state={"at": 1})
    checkpoint_id = data["checkpoint_id"]
    sign_in(page, baton)
    open_checkpoint(page, baton, checkpoint_id)
    # By keyboard: Enter opens the confirmation, Escape cancels it; nothing changes.
    page.get_by_role("button", name="Delete checkpoint").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Delete this checkpoint")
    expect(dialog).to_contain_text(f'W/"{checkpoint_id}:1"')
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 200
    # Saved again behind the page's back: the ETag shown is stale, and Baton refuses with the contract's message.
    saved(http, subject_id=subject, kind="cursor", state={"at": 2})
    page.get_by_role("button", name="Delete checkpoint").click()
    page.get_by_role("dialog", name="Delete this checkpoint").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("alert")).to_contain_text("REVISION_CONFLICT")
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").json()["data"]["revision"] == 2
    # Read again, then confirmed: gone, and the page goes back to the subject.
    page.reload()
    page.get_by_role("heading", name="Metadata").wait_for()
    expect(page.locator(".ckpt-etag")).to_have_text(f'W/"{checkpoint_id}:2"')
    page.get_by_role("button", name="Delete checkpoint").click()
    page.get_by_role("dialog", name="Delete this checkpoint").get_by_role("button", name="Delete").click()
    page.get_by_text("No live checkpoint matches.").wait_for()
    expect(page).to_have_url(re.compile(f"subject={re.escape(subject)}"))
    assert http.get(f"/v1/checkpoints/{checkpoint_id}").status_code == 404
    record(SUITE, deletes=1, cancelled=1, stale=1)


def test_a_read_only_key_is_offered_no_lease_or_delete(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    issued = http.post("/v1/keys", json={"agent_id": "console-viewer", "scopes": ["checkpoints:read"]})
    assert issued.status_code == 201, issued.text
    data = saved(http, subject_id=subject_id("viewer"), agent_id="console-viewer", kind="task_state", state={"a": 1})
    watched = open_page(browser)
    try:
        sign_in(watched.page, baton, issued.json()["data"]["secret"])
        open_checkpoint(watched.page, baton, data["checkpoint_id"])
        # The checkpoint's page is drawn at once, lease panel included: what is missing is not offered.
        expect(watched.page.get_by_role("heading", name="Lease")).to_be_visible()
        expect(watched.page.get_by_role("button", name="Take a lease")).to_have_count(0)
        expect(watched.page.get_by_role("button", name="Delete checkpoint")).to_have_count(0)
        # A key without `*` lists its own agent's work by default.
        watched.page.get_by_role("link", name=re.compile("^All checkpoints of")).click()
        watched.page.locator("table.ckpt-list tbody tr").first.wait_for()
        expect(watched.page.get_by_label("Agent")).to_have_value("")
        assert not watched.errors
    finally:
        watched.page.context.close()
    record(SUITE, keys=1)


def test_a_phone_width_scrolls_no_page_sideways(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = subject_id("phone")
    data = saved(http, subject_id=subject, kind="task_state", format="opencheckpoint/0.1", state=SEED_DOCUMENT)
    saved(http, subject_id=subject, kind="conversation", state={"messages": ["a" * 300]})
    watched = open_page(browser, PHONE)
    try:
        page = watched.page
        sign_in(page, baton)
        page.goto(f"{baton.url}/console#/checkpoints?subject={subject}")
        page.locator("table.ckpt-list tbody tr").nth(1).wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        shot(page, "checkpoints-phone")
        open_checkpoint(page, baton, data["checkpoint_id"])
        page.get_by_role("heading", name="OpenCheckpoint document").wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert not watched.errors
    finally:
        watched.page.context.close()
    record(SUITE, widths=1)
