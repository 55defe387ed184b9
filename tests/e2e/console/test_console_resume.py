"""The resume preview in a real browser: what `POST /v1/resume` answers, laid out by its status (`ready` with an
OpenCheckpoint document's pending operations and stop conditions, `ambiguous`, `omitted`, `none`)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

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
    page.locator(".resume-answer").wait_for(state="detached")
    page.get_by_label("Subject").fill(subject_id)
    page.get_by_label("Budget (bytes)").fill(budget)
    page.get_by_role("button", name="Preview resume").click()
    return answered(page)


def answered(page: Any) -> Any:
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
    assert answer.get_by_role("heading").first.inner_text() == "Answer: ready"
    # The request is in the hash: the preview can be linked, and the key is not in it
    assert f"subject={subject}" in page.url
    assert "budget=100000" in page.url
    assert baton.key not in page.url
    link = answer.get_by_role("link", name=checkpoint_id, exact=True)
    assert link.get_attribute("href") == f"#/checkpoints/{checkpoint_id}"
    text = answer.inner_text()
    assert "Billing lead approves refunding ch_2." in text
    assert "awaiting" in text
    assert "Never refund both charges." in text
    assert "of the budget of" in text
    expected = http.post("/v1/resume", json={"subject_id": subject}).json()["data"]
    assert expected["pending_operations"][0]["description"] in text
    shot(page, "resume-ready")
    record("console resume (e2e)", ready=1)


def test_two_agents_work_is_ambiguous_and_one_can_be_picked(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = f"console-resume-{uuid.uuid4().hex}"
    first = save(http, subject, agent_id="planner", state={"step": 2})
    second = save(http, subject, agent_id="executor", state={"step": 5})
    sign_in(page, baton)
    answer = preview(page, subject)
    assert answer.get_by_role("heading").first.inner_text() == "Answer: ambiguous"
    assert "2 checkpoints match" in answer.inner_text()
    rows = answer.locator("tbody tr")
    assert rows.count() == 2
    # Newest first, as Baton answers them, each linking to its checkpoint
    for row, (checkpoint_id, agent) in enumerate(((second, "executor"), (first, "planner"))):
        assert checkpoint_id in rows.nth(row).inner_text()
        assert agent in rows.nth(row).inner_text()
    assert answer.get_by_role("link", name=first, exact=True).get_attribute("href") == f"#/checkpoints/{first}"
    shot(page, "resume-ambiguous")
    # Picking one previews resuming that checkpoint
    answer.get_by_role("link", name=f"Preview resuming {first}").click()
    page.wait_for_url(f"**checkpoint={first}**")
    answer = answered(page)
    answer.get_by_role("heading", name="Answer: ready").wait_for()
    assert "planner" in answer.inner_text()
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
    assert answer.get_by_role("heading").first.inner_text() == "Answer: omitted"
    text = answer.inner_text()
    assert f"{required['required_bytes']} bytes" in text
    assert "1024 bytes" in text
    # The hint raises the budget to what the answer needs, and then it is ready
    answer.get_by_role("link", name=f"Preview with a budget of {required['required_bytes']} bytes").click()
    page.wait_for_url(f"**budget={required['required_bytes']}**")
    answered(page).get_by_role("heading", name="Answer: ready").wait_for()

    nobody = f"console-resume-{uuid.uuid4().hex}"
    answer = preview(page, nobody)
    answer.get_by_role("heading", name="Answer: none").wait_for()
    assert "No live checkpoint matches" in answer.inner_text()
    record("console resume (e2e)", omitted=1, ready=1, none=1)


def test_a_refused_request_shows_the_contracts_message(page: Any, baton: BatonServe) -> None:
    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/resume?subject=anything&checkpoint=not-a-checkpoint-id")
    alert = page.locator(".resume-answer").get_by_role("alert")
    alert.wait_for()
    said = alert.inner_text()
    assert "VALIDATION_ERROR" in said
    assert "/checkpoint_id" in said
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
