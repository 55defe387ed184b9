"""The resume preview in a real browser: what `POST /v1/resume` answers, laid out by its status (`ready` with an
OpenCheckpoint document's pending operations and stop conditions, `ambiguous`, `omitted`, `none`)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.builders import SEED_DOCUMENT
from tests.e2e.console.conftest import PHONE, open_page, shot, sign_in
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

OPENCHECKPOINT = "opencheckpoint/0.1"


def save(http: httpx.Client, subject_id: str, **fields: Any) -> str:
    """Save a checkpoint through the API; its id."""
    body = {"subject_id": subject_id, "kind": "task_state", "state": {"step": 1}, **fields}
    answer = http.post("/v1/checkpoints", json=body)
    assert answer.status_code in (200, 201), answer.text
    checkpoint_id: str = answer.json()["data"]["checkpoint_id"]
    return checkpoint_id


def preview(page: Any, subject_id: str, budget: str = "") -> Any:
    """Fill the form, ask, and wait for the answer; the answer's panel."""
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Resume preview").click()
    page.wait_for_url("**#/resume")
    # The address changes before the router draws the view: wait for the resume form itself (not the form of the
    # view before, whose "Subject id" would match a loose "Subject"), and for any earlier answer to be gone.
    page.get_by_role("heading", name="Resume preview", exact=True).wait_for()
    page.locator(".resume-answer").wait_for(state="detached")
    page.get_by_label("Subject", exact=True).fill(subject_id)
    page.get_by_label("Budget (bytes)").fill(budget)
    page.get_by_role("button", name="Preview resume").click()
    return answered(page)


def answered(page: Any) -> Any:
    """The answer's panel, once it holds an answer (callers that follow a link wait for the answer they expect:
    the panel of the page before may still be on it)."""
    answer = page.locator(".resume-answer")
    answer.get_by_role("heading", name="Answer:").wait_for()
    return answer


def test_ready_lays_out_an_opencheckpoint_documents_pending_work(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    subject = f"console-resume-{uuid.uuid4().hex}"
    checkpoint_id = save(http, subject, state=SEED_DOCUMENT, format=OPENCHECKPOINT)
    sign_in(page, baton)
    answer = preview(page, subject, budget="100000")
    expect(answer.get_by_role("heading").first).to_have_text("Answer: ready")
    # The request is in the hash: the preview can be linked, and the key is not in it
    expect(page).to_have_url(re.compile(f"subject={re.escape(subject)}"))
    expect(page).to_have_url(re.compile("budget=100000"))
    assert baton.key not in page.url
    link = answer.get_by_role("link", name=checkpoint_id, exact=True)
    expect(link).to_have_attribute("href", f"#/checkpoints/{checkpoint_id}")
    for shown in (
        "Billing lead approves refunding ch_2.",
        "awaiting",
        "Never refund both charges.",
        "of the budget of",
    ):
        expect(answer).to_contain_text(shown)
    expected = http.post("/v1/resume", json={"subject_id": subject}).json()["data"]
    expect(answer).to_contain_text(expected["pending_operations"][0]["description"])
    shot(page, "resume-ready")
    record("console resume (e2e)", ready=1)


def test_two_agents_work_is_ambiguous_and_one_can_be_picked(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = f"console-resume-{uuid.uuid4().hex}"
    first = save(http, subject, agent_id="planner", state={"step": 2})
    second = save(http, subject, agent_id="executor", state={"step": 5})
    sign_in(page, baton)
    answer = preview(page, subject)
    expect(answer.get_by_role("heading").first).to_have_text("Answer: ambiguous")
    expect(answer).to_contain_text("2 checkpoints match")
    rows = answer.locator("tbody tr")
    expect(rows).to_have_count(2)
    # Newest first, as Baton answers them, each linking to its checkpoint
    for row, (checkpoint_id, agent) in enumerate(((second, "executor"), (first, "planner"))):
        expect(rows.nth(row)).to_contain_text(checkpoint_id)
        expect(rows.nth(row)).to_contain_text(agent)
    expect(answer.get_by_role("link", name=first, exact=True)).to_have_attribute("href", f"#/checkpoints/{first}")
    shot(page, "resume-ambiguous")
    # Picking one previews resuming that checkpoint
    answer.get_by_role("link", name=f"Preview resuming {first}").click()
    page.wait_for_url(f"**checkpoint={first}**")
    answer = answered(page)
    answer.get_by_role("heading", name="Answer: ready").wait_for()
    expect(answer).to_contain_text("planner")
    expect(answer).not_to_contain_text("executor")
    record("console resume (e2e)", ambiguous=1, ready=1)


def test_a_small_budget_is_omitted_and_a_subject_without_work_is_none(
    page: Any, baton: BatonServe, http: httpx.Client
) -> None:
    subject = f"console-resume-{uuid.uuid4().hex}"
    save(http, subject, state={"notes": "x" * 3000})
    required = http.post("/v1/resume", json={"subject_id": subject, "budget_bytes": 1024}).json()["data"]
    assert required["status"] == "omitted"
    sign_in(page, baton)
    answer = preview(page, subject, budget="1024")
    expect(answer.get_by_role("heading").first).to_have_text("Answer: omitted")
    expect(answer).to_contain_text(f"{required['required_bytes']} bytes")
    expect(answer).to_contain_text("1024 bytes")
    # The hint raises the budget to what the answer needs, and then it is ready
    answer.get_by_role("link", name=f"Preview with a budget of {required['required_bytes']} bytes").click()
    page.wait_for_url(f"**budget={required['required_bytes']}**")
    answered(page).get_by_role("heading", name="Answer: ready").wait_for()

    nobody = f"console-resume-{uuid.uuid4().hex}"
    answer = preview(page, nobody)
    answer.get_by_role("heading", name="Answer: none").wait_for()
    expect(answer).to_contain_text("No live checkpoint matches")
    record("console resume (e2e)", omitted=1, ready=1, none=1)


def test_a_refused_request_shows_the_contracts_message(page: Any, baton: BatonServe) -> None:
    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/resume?subject=anything&checkpoint=not-a-checkpoint-id")
    alert = page.locator(".resume-answer").get_by_role("alert")
    expect(alert).to_contain_text("VALIDATION_ERROR")
    expect(alert).to_contain_text("/checkpoint_id")
    record("console resume (e2e)", refused=1)


def test_the_resume_preview_fits_a_phone(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = f"console-resume-{uuid.uuid4().hex}"
    save(http, subject, state=SEED_DOCUMENT, format=OPENCHECKPOINT)
    watched = open_page(browser, PHONE)
    page = watched.page
    try:
        sign_in(page, baton)
        page.goto(f"{baton.url}/console#/resume?subject={subject}")
        answered(page).get_by_role("heading", name="Answer: ready").wait_for()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width}px wide on a {PHONE['width']}px phone"
        assert not watched.errors, watched.errors
    finally:
        page.context.close()
