"""The console's history view in a real browser: the timeline of kept revisions, a diff between two, and restoring
one (confirmed, conditional on the revision the page showed), against `baton serve` with data saved through the API.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests import proof_counts
from tests.e2e.console.conftest import PHONE, Watched, open_page, shot, sign_in
from tests.e2e.server_process import BatonServe

SUITE = "console_history"

STATES: list[dict[str, Any]] = [
    {"step": 1, "plan": ["read", "write"], "notes": {"a": 1}, "done": False, "log": "started; " * 40},
    {"step": 2, "plan": ["read", "write", "test"], "notes": {"a": 1, "b": "x"}, "done": False},
    {"step": 3, "plan": ["read"], "notes": {"b": "y"}, "done": "almost", "html": "<script>alert(1)</script>"},
    {"step": 4, "plan": ["read"], "notes": {"b": "y"}, "done": True},
]


def save(http: httpx.Client, subject: str, state: Any, **extra: Any) -> dict[str, Any]:
    """One save of `subject`'s task_state through the API; its answer's data."""
    answer = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": state, **extra})
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def with_history(http: httpx.Client, **extra: Any) -> str:
    """A checkpoint at revision 4 keeping revisions 1–3 (the states of STATES, in order); its id."""
    subject = f"history-{uuid.uuid4()}"
    saved = {}
    for state in STATES:
        saved = save(http, subject, state, keep_revisions=5, **extra)
    assert saved["revision"] == 4
    return str(saved["checkpoint_id"])


def checkpoint(http: httpx.Client, checkpoint_id: str) -> dict[str, Any]:
    """The checkpoint's record as the API answers it now."""
    answer = http.get(f"/v1/checkpoints/{checkpoint_id}")
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def open_history(page: Any, baton: BatonServe, checkpoint_id: str, query: str = "") -> None:
    """Sign in and open the checkpoint's history; waits for its timeline."""
    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/history/{checkpoint_id}{query}")
    page.locator("ul.timeline > li").first.wait_for()


def expect_timeline(page: Any, revisions: list[str]) -> None:
    """The timeline lists `revisions` in order, the current one written with a `*` ("4*"): waits for it, so that
    the timeline of a drawing before (the view draws again after a click or an address change) is not read."""
    items = page.locator("ul.timeline > li")
    expect(items).to_have_count(len(revisions))
    for index, revision in enumerate(revisions):
        item = items.nth(index)
        expect(item).to_have_attribute("data-revision", revision.rstrip("*"))
        expect(item).to_have_class("current" if revision.endswith("*") else "kept")


def expect_changes(scope: Any, expected: list[tuple[str, str]]) -> None:
    """The `ul.diff` inside `scope` lists the (op, pointer) changes `expected`, in order; waits for them."""
    items = scope.locator("ul.diff > li")
    expect(items).to_have_count(len(expected))
    for index, (op, pointer) in enumerate(expected):
        expect(items.nth(index)).to_have_class(op)
        expect(items.nth(index)).to_have_attribute("data-pointer", pointer)


def test_diff_json_in_the_browser(page: Any, baton: BatonServe) -> None:
    page.goto(f"{baton.url}/console")
    cases = page.evaluate(
        """async () => {
          const {diffJson} = await import('/console/diff.js');
          return {
            identical: diffJson({a: [1, {b: null}], c: 'x'}, {c: 'x', a: [1, {b: null}]}),
            nested: diffJson({a: {b: {c: 1, d: 2}}, 'x/y': 1, 't~': 0}, {a: {b: {c: 2, e: 3}}, 'x/y': 2, 't~': 0}),
            arrays: diffJson([1, 2, 3], [1, 5]),
            grown: diffJson({list: []}, {list: ['a', {k: 1}]}),
            types: diffJson({a: 1, b: [1], c: {}, d: null, e: '1'}, {a: '1', b: {0: 1}, c: [], d: false, e: 1}),
            root: diffJson(1, [1]),
            scalars: diffJson('same', 'same'),
          };
        }"""
    )
    assert cases["identical"] == []
    assert cases["scalars"] == []
    assert cases["nested"] == [
        {"op": "changed", "pointer": "/a/b/c", "before": 1, "after": 2},
        {"op": "removed", "pointer": "/a/b/d", "before": 2},
        {"op": "added", "pointer": "/a/b/e", "after": 3},
        {"op": "changed", "pointer": "/x~1y", "before": 1, "after": 2},
    ]
    assert cases["arrays"] == [
        {"op": "changed", "pointer": "/1", "before": 2, "after": 5},
        {"op": "removed", "pointer": "/2", "before": 3},
    ]
    assert cases["grown"] == [
        {"op": "added", "pointer": "/list/0", "after": "a"},
        {"op": "added", "pointer": "/list/1", "after": {"k": 1}},
    ]
    assert cases["types"] == [
        {"op": "changed", "pointer": "/a", "before": 1, "after": "1"},
        {"op": "changed", "pointer": "/b", "before": [1], "after": {"0": 1}},
        {"op": "changed", "pointer": "/c", "before": {}, "after": []},
        {"op": "changed", "pointer": "/d", "before": None, "after": False},
        {"op": "changed", "pointer": "/e", "before": "1", "after": 1},
    ]
    assert cases["root"] == [{"op": "changed", "pointer": "", "before": 1, "after": [1]}]
    proof_counts.record(SUITE, diff_cases=len(cases))


def test_the_timeline_lists_the_revisions_and_compares_two(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    checkpoint_id = with_history(http)
    open_history(page, baton, checkpoint_id)
    expect_timeline(page, ["4*", "3", "2", "1"])
    expect(page.get_by_role("heading", name="Revision 4").locator("..").get_by_text("current")).to_be_visible()
    # The summaries' sizes and hashes, as the API lists them.
    listed = http.get(f"/v1/checkpoints/{checkpoint_id}/revisions").json()["data"]
    for summary in listed:
        item = page.locator(f"ul.timeline > li[data-revision='{summary['revision']}']")
        expect(item.locator(f"code[title='{summary['state_hash']}']")).to_have_count(1)
        expect(item).to_contain_text(f"{summary['state_bytes']} B")
    shot(page, "history-timeline")

    page.get_by_label("Compare from revision").select_option("1")
    page.get_by_label("to revision").select_option("4")
    page.get_by_role("button", name="Compare").click()
    result = page.locator(".comparison")
    result.get_by_role("heading", name="Revision 1 → revision 4").wait_for()
    expect_changes(
        result,
        [
            ("changed", "/done"),
            ("removed", "/log"),
            ("removed", "/notes/a"),
            ("added", "/notes/b"),
            ("removed", "/plan/1"),
            ("changed", "/step"),
        ],
    )
    expect(page).to_have_url(re.compile(r"\?from=1&to=4$"))
    # A long value is cut with an ellipsis and opens to the whole.
    long_value = result.locator("li[data-pointer='/log']")
    expect(long_value.locator("summary")).to_have_text(re.compile(r'^"started; started;.*…'))
    expect(long_value.locator("pre")).to_be_hidden()
    long_value.locator("summary").click()
    expect(long_value.locator("pre")).to_be_visible()
    assert long_value.locator("pre").inner_text() == json.dumps(STATES[0]["log"])
    shot(page, "history-diff")
    # Both states whole, as trees with their own search.
    result.get_by_text("Both states as trees").click()
    expect(result.get_by_label("Search the state of revision 1")).to_be_visible()
    expect(result.get_by_label("Search the state of revision 4")).to_be_visible()

    # A kept revision against another, through its link: a string holding markup is shown as its characters.
    page.goto(f"{baton.url}/console#/history/{checkpoint_id}?from=3&to=2")
    result.get_by_role("heading", name="Revision 3 → revision 2").wait_for()
    expect_changes(
        result,
        [
            ("changed", "/done"),
            ("removed", "/html"),
            ("added", "/notes/a"),
            ("changed", "/notes/b"),
            ("added", "/plan/1"),
            ("added", "/plan/2"),
            ("changed", "/step"),
        ],
    )
    expect(result.locator("li[data-pointer='/html']")).to_contain_text('"<script>alert(1)</script>"')
    expect(page.locator(".comparison script")).to_have_count(0)
    # The same revision on both sides: identical (the note and the diff are drawn together: no diff is left).
    page.goto(f"{baton.url}/console#/history/{checkpoint_id}?from=2&to=2")
    result.get_by_text("The two revisions hold identical states").wait_for()
    expect(result.locator("ul.diff")).to_have_count(0)
    proof_counts.record(SUITE, browser_cases=1)


def test_the_timeline_pages_with_the_cursor_in_the_address(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    checkpoint_id = with_history(http)
    open_history(page, baton, checkpoint_id, "?limit=2")
    expect_timeline(page, ["4*", "3", "2"])
    page.get_by_role("button", name="Next page").click()
    page.wait_for_url("**cursor=*")
    expect_timeline(page, ["1"])
    expect(page.get_by_role("button", name="First page")).to_be_visible()
    page.go_back()
    expect(page).not_to_have_url(re.compile("cursor="))
    expect_timeline(page, ["4*", "3", "2"])
    proof_counts.record(SUITE, browser_cases=1)


def test_restore_asks_first_and_writes_a_new_revision(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    checkpoint_id = with_history(http)
    open_history(page, baton, checkpoint_id)
    page.get_by_role("button", name="Restore revision 2…").click()
    dialog = page.get_by_role("dialog", name="Restore revision 2?")
    # What will be written: revision 2's state as revision 5, and the changes from the current state to it.
    expect(dialog).to_contain_text("as revision 5")
    expect(dialog).to_contain_text("never a rewind")
    expect_changes(
        dialog,
        [
            ("changed", "/done"),
            ("added", "/notes/a"),
            ("changed", "/notes/b"),
            ("added", "/plan/1"),
            ("added", "/plan/2"),
            ("changed", "/step"),
        ],
    )
    shot(page, "history-restore-confirm")
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    assert checkpoint(http, checkpoint_id)["revision"] == 4

    page.get_by_role("button", name="Restore revision 2…").click()
    dialog.get_by_role("button", name="Restore as revision 5").click()
    # The timeline was read again: revision 5 is current, 4 is kept; the outcome names the new revision and ETag.
    expect_timeline(page, ["5*", "4", "3", "2", "1"])
    outcome = page.locator(".history-outcome")
    expect(outcome).to_contain_text("Restored revision 2 as revision 5.")
    expect(outcome).to_contain_text(f'W/"{checkpoint_id}:5"')
    # The focus is on the outcome (the button pressed is gone).
    expect(outcome.get_by_role("status")).to_be_focused()
    record = checkpoint(http, checkpoint_id)
    assert record["revision"] == 5
    assert record["state"] == STATES[1]
    proof_counts.record(SUITE, browser_cases=1, restores=1)


def test_a_stale_page_restores_nothing_and_shows_the_conflict(
    watched: Watched, baton: BatonServe, http: httpx.Client
) -> None:
    page = watched.page
    checkpoint_id = with_history(http)
    open_history(page, baton, checkpoint_id)
    save(http, checkpoint(http, checkpoint_id)["subject_id"], {"step": 5})  # another writer, after the page loaded
    page.get_by_role("button", name="Restore revision 1…").click()
    page.get_by_role("dialog").get_by_role("button", name="Restore as revision 5").click()
    alert = page.locator(".history-outcome").get_by_role("alert")
    expect(alert).to_contain_text("REVISION_CONFLICT")
    expected = http.post(f"/v1/checkpoints/{checkpoint_id}/restore", json={"revision": 1, "expected_revision": 4})
    assert expected.status_code == 409
    expect(alert).to_contain_text(expected.json()["error"]["message"])
    record = checkpoint(http, checkpoint_id)
    assert record["revision"] == 5
    assert record["state"] == {"step": 5}
    expect_timeline(page, ["4*", "3", "2", "1"])  # nothing else happened: the page is as it was
    assert watched.refusals, "the browser saw the 409"
    proof_counts.record(SUITE, browser_cases=1, conflicts=1)


def test_a_leased_checkpoint_restores_with_its_token(watched: Watched, baton: BatonServe, http: httpx.Client) -> None:
    page = watched.page
    checkpoint_id = with_history(http)
    lease = http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 300})
    assert lease.status_code == 201, lease.text
    open_history(page, baton, checkpoint_id)
    dialog = page.get_by_role("dialog")
    # Without the token, Baton refuses: the contract's message, nothing written.
    page.get_by_role("button", name="Restore revision 3…").click()
    dialog.get_by_role("button", name="Restore as revision 5").click()
    alert = page.locator(".history-outcome").get_by_role("alert")
    expect(alert).to_contain_text("LEASE_HELD")
    assert checkpoint(http, checkpoint_id)["revision"] == 4
    # By keyboard this time: Enter on the button, the token typed, Enter in the field confirms.
    page.get_by_role("button", name="Restore revision 3…").focus()
    page.keyboard.press("Enter")
    dialog.get_by_label("Lease token").fill(lease.json()["data"]["lease_token"])
    page.keyboard.press("Enter")
    page.get_by_text("Restored revision 3 as revision 5.").first.wait_for()
    assert checkpoint(http, checkpoint_id)["state"] == STATES[2]
    proof_counts.record(SUITE, browser_cases=1, restores=1)


def test_a_checkpoint_keeping_none_says_so(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    subject = f"history-{uuid.uuid4()}"
    save(http, subject, {"step": 1})
    checkpoint_id = save(http, subject, {"step": 2})["checkpoint_id"]
    open_history(page, baton, checkpoint_id)
    expect(page.get_by_text("This checkpoint keeps no revisions (keep_revisions 0)")).to_be_visible()
    expect_timeline(page, ["2*"])
    expect(page.get_by_text("There is only the current revision: nothing to compare it with.")).to_be_visible()
    expect(page.get_by_role("button", name="Compare")).to_have_count(0)
    expect(page.get_by_role("button", name="Restore revision 1…")).to_have_count(0)
    proof_counts.record(SUITE, browser_cases=1)


def test_a_reader_is_not_offered_restore_and_a_phone_fits(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    agent = f"reader-{uuid.uuid4().hex[:12]}"
    checkpoint_id = with_history(http, agent_id=agent)
    issued = http.post("/v1/keys", json={"agent_id": agent, "scopes": ["checkpoints:read"]})
    assert issued.status_code == 201, issued.text
    watched = open_page(browser, PHONE)
    try:
        page = watched.page
        sign_in(page, baton, issued.json()["data"]["secret"])
        page.goto(f"{baton.url}/console#/history/{checkpoint_id}?from=1&to=4")
        page.locator(".comparison ul.diff").wait_for()
        expect_timeline(page, ["4*", "3", "2", "1"])
        expect(page.get_by_role("link", name="Compare revision 1 with the current one")).to_be_visible()
        expect(page.get_by_text("restoring is not offered")).to_be_visible()
        expect(page.get_by_role("button", name="Restore revision 1…")).to_have_count(0)
        # Readable at a phone's width: nothing wider than the screen.
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        shot(page, "history-phone")
        assert not watched.errors, watched.errors
    finally:
        watched.page.context.close()
    proof_counts.record(SUITE, browser_cases=1)


@pytest.mark.parametrize("address", ["ckpt_00000000000000000000000000000000", "not-an-id"])
def test_an_unknown_checkpoint_shows_the_contracts_error(
    watched: Watched, baton: BatonServe, http: httpx.Client, address: str
) -> None:
    page = watched.page
    sign_in(page, baton)
    page.goto(f"{baton.url}/console#/history/{address}")
    alert = page.get_by_role("alert")
    expected = http.get(f"/v1/checkpoints/{address}").json()["error"]
    expect(alert).to_contain_text(expected["code"])
    expect(alert).to_contain_text(expected["message"])
    proof_counts.record(SUITE, browser_cases=1)
