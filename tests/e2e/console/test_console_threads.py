"""The LangGraph threads view in a real browser: a thread built by a real graph on BatonSaver (an interrupt, then a
fork from an older checkpoint), its checkpoints as a timeline with parent links and pending writes per task, one
checkpoint's values and metadata (a `<script>` shown as text), and deleting a thread with a confirmation."""

from __future__ import annotations

import base64
import json
import operator
import os
import re
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from playwright.sync_api import expect

from baton_checkpoints.langgraph import BatonSaver
from tests.e2e.console.conftest import PHONE, open_page, shot, sign_in
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

SUITE = "console threads (e2e)"
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"


class Plan(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    draft: str


def draft(state: Plan) -> Plan:
    return {"steps": ["draft"], "draft": "first words"}


def review(state: Plan) -> Plan:
    answer = interrupt({"question": "Ship it?"})
    return {"steps": [f"review:{answer}"]}


@dataclass(frozen=True)
class GraphThread:
    """A thread a real graph left: its id and the API's list of it (newest first)."""

    thread_id: str
    tuples: list[dict[str, Any]]

    def by_source(self, source: str) -> list[dict[str, Any]]:
        return [t for t in self.tuples if t["metadata"].get("source") == source]


def headers(baton: BatonServe) -> dict[str, str]:
    return {"Authorization": f"Bearer {baton.key}"}


def listed(baton: BatonServe, thread_id: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{baton.url}/v1/threads/{quote(thread_id, safe='')}/checkpoints", params=params, headers=headers(baton)
    )


@pytest.fixture(scope="module")
def graph_thread(baton: BatonServe) -> GraphThread:
    """draft -> review (interrupts), run until the interrupt, then a fork from the checkpoint before `draft` ran."""
    thread_id = f"console-graph-{uuid.uuid4().hex[:10]}"
    config: Any = {"configurable": {"thread_id": thread_id}, "metadata": {"note": HOSTILE}}
    builder = StateGraph(Plan)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", END)
    with BatonSaver(url=baton.url, api_key=baton.key) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"steps": []}, config)
        before_draft = next(s for s in graph.get_state_history(config) if s.next == ("draft",))
        graph.update_state(before_draft.config, {"draft": "forked words"}, as_node="draft")
    answer = listed(baton, thread_id)
    assert answer.status_code == 200, answer.text
    tuples = answer.json()["data"]
    # input, loop 0 (before draft), loop 1 (interrupted in review), and the fork (an update, child of loop 0)
    assert [t["metadata"]["source"] for t in tuples] == ["update", "loop", "loop", "input"]
    return GraphThread(thread_id, tuples)


def put_thread(baton: BatonServe, thread_id: str, agent_id: str | None = None) -> list[str]:
    """Two checkpoints through the HTTP API: a `json` value holding `<script>`, a value big enough for the bucket,
    and pending writes of two tasks. Returns the checkpoint ids, oldest first."""
    params = {"agent_id": agent_id} if agent_id else {}
    url = f"{baton.url}/v1/threads/{quote(thread_id, safe='')}"
    document = json.dumps({"title": HOSTILE, "items": [1, 2, 3]}).encode()
    first, second = "1f0a-0001", "1f0a-0002"
    with httpx.Client(headers=headers(baton), params=params, timeout=30) as client:
        answer = client.post(
            f"{url}/checkpoints",
            json={
                "checkpoint": {"id": first, "ts": "2026-12-01T10:00:00+00:00", "channel_versions": {"doc": "1"}},
                "metadata": {"source": "input", "step": -1},
                "values": {"doc": {"type": "json", "data": base64.b64encode(document).decode()}},
            },
        )
        assert answer.status_code == 201, answer.text
        big = base64.b64encode(os.urandom(360_000)).decode()
        answer = client.post(
            f"{url}/checkpoints",
            json={
                "checkpoint": {
                    "id": second,
                    "ts": "2026-12-01T10:00:01+00:00",
                    "channel_versions": {"doc": "1", "blob": "2"},
                },
                "metadata": {"source": "loop", "step": 0, "owner": HOSTILE},
                "parent_checkpoint_id": first,
                "values": {"blob": {"type": "bytes", "data": big}},
            },
        )
        assert answer.status_code == 201, answer.text
        for task, writes in (
            ("task-b", [{"channel": "doc", "type": "json", "data": base64.b64encode(b'{"n": 2}').decode()}]),
            (
                "task-a",
                [{"channel": "x", "type": "msgpack", "data": "kaFh"}, {"channel": "y", "type": "null", "data": ""}],
            ),
        ):
            answer = client.post(
                f"{url}/writes",
                json={"checkpoint_id": second, "task_id": task, "task_path": f"~path, {task}", "writes": writes},
            )
            assert answer.status_code == 200, answer.text
    return [first, second]


def entry(page: Any, checkpoint_id: str, ns: str = "") -> Any:
    """The timeline entry of a checkpoint, by its anchor id."""
    return page.locator(f'[id="ckpt-{quote(ns, safe="")}:{quote(checkpoint_id, safe="")}"]')


def open_thread(page: Any, thread_id: str, agent_id: str | None = None) -> None:
    """Through the start form, as a person does; waits for the thread's timeline."""
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="LangGraph threads").click()
    page.get_by_label("Thread id").fill(thread_id)
    if agent_id is not None:
        page.get_by_label("Agent").fill(agent_id)
    page.get_by_role("button", name="Open thread").click()
    expect(page.get_by_role("heading", name=f"Thread {thread_id}")).to_be_visible()
    page.locator("ul.timeline").wait_for()


def expect_entries(page: Any, checkpoint_ids: list[str]) -> None:
    """The timeline shows exactly these checkpoints, in this order; waits for them (the timeline of the address
    before may still be on the page for a moment)."""
    items = page.locator("ul.timeline > li")
    expect(items).to_have_count(len(checkpoint_ids))
    for index, checkpoint_id in enumerate(checkpoint_ids):
        expect(items.nth(index)).to_have_attribute("data-checkpoint-id", checkpoint_id)


def test_the_timeline_lists_every_checkpoint_newest_first_with_parent_links_and_writes_per_task(
    page: Any, baton: BatonServe, graph_thread: GraphThread
) -> None:
    sign_in(page, baton)
    open_thread(page, graph_thread.thread_id)
    expected = [t["checkpoint_id"] for t in graph_thread.tuples]
    expect_entries(page, expected)
    assert expected == sorted(expected, reverse=True)

    # The fork's parent is the checkpoint before `draft`, not the one next to it in the list: its link goes there.
    fork = graph_thread.by_source("update")[0]
    parent = fork["parent_checkpoint_id"]
    assert parent == graph_thread.by_source("loop")[1]["checkpoint_id"]
    entry(page, fork["checkpoint_id"]).get_by_role("link", name=parent).click()
    expect(entry(page, parent)).to_be_focused()
    expect(page).to_have_url(re.compile(f"at={re.escape(parent)}"))
    # Every parent link names an entry on the page (the whole thread fits one page).
    for tuple_ in graph_thread.tuples:
        if tuple_["parent_checkpoint_id"]:
            expect(entry(page, tuple_["parent_checkpoint_id"])).to_have_count(1)
        else:
            expect(entry(page, tuple_["checkpoint_id"])).to_contain_text("none: the thread starts here")

    # Pending writes, grouped per task: the interrupted checkpoint holds review's __interrupt__ (idx -3).
    interrupted = graph_thread.by_source("loop")[0]
    [task_id] = {w["task_id"] for w in interrupted["pending_writes"] if w["channel"] == "__interrupt__"}
    task = entry(page, interrupted["checkpoint_id"]).locator(".thread-task").filter(has_text=task_id)
    expect(task).to_have_count(1)
    row = task.get_by_role("row").filter(has_text="__interrupt__")
    expect(row.get_by_role("cell").nth(1)).to_have_text("-3")
    expect(row).to_contain_text("msgpack")
    # and the interrupt says what the graph waits for: the question interrupt() was given, decoded, as text
    waiting = entry(page, interrupted["checkpoint_id"]).locator(".thread-interrupt")
    expect(waiting).to_have_count(1)
    expect(waiting).to_contain_text("Waiting for input")
    expect(waiting.locator(".thread-question")).to_have_text("question Ship it?")
    # The thread's delete stands with its facts, outside the form that filters its checkpoints
    expect(page.locator("form.thread-filters").get_by_role("button", name="Delete thread")).to_have_count(0)
    expect(page.locator(".thread-actions").get_by_role("button", name="Delete thread")).to_have_count(1)
    # The checkpoint before draft holds draft's writes: one task, its channels in index order from 0.
    before_draft = graph_thread.by_source("loop")[1]
    draft_writes = [w for w in before_draft["pending_writes"] if "draft" in w["task_path"]]
    draft_task = (
        entry(page, before_draft["checkpoint_id"]).locator(".thread-task").filter(has_text=draft_writes[0]["task_id"])
    )
    expect(draft_task.locator("tbody tr td:first-child")).to_have_text([w["channel"] for w in draft_writes])
    expect(draft_task.locator("tbody tr td:nth-child(2)")).to_have_text([str(i) for i in range(len(draft_writes))])
    # The channel versions the interrupted step set, from updated_channels
    versions = entry(page, interrupted["checkpoint_id"]).locator(".thread-block").first
    for channel in interrupted["checkpoint"]["updated_channels"]:
        expect(versions).to_contain_text(channel)
    shot(page, "threads-timeline")

    # The thread is remembered in this tab, as a link back to it.
    page.get_by_role("link", name="← Threads").click()
    expect(page.locator("ul.thread-recent").get_by_role("link", name=graph_thread.thread_id)).to_be_visible()
    recent = json.loads(page.evaluate("sessionStorage.getItem('baton.recent-threads')"))
    assert recent[0]["thread_id"] == graph_thread.thread_id
    record(SUITE, checkpoints_shown=len(expected))


def test_a_checkpoint_shows_its_metadata_and_values_as_text_and_trees(
    page: Any, baton: BatonServe, graph_thread: GraphThread
) -> None:
    thread_id = f"console-http-{uuid.uuid4().hex[:10]}"
    first, second = put_thread(baton, thread_id)
    sign_in(page, baton)
    open_thread(page, thread_id)
    # The parent of the newest is on this page; the bucket value is answered as a download link.
    newest = entry(page, second)
    link = newest.get_by_role("link", name="download (in the bucket)")
    expect(link).to_have_attribute("href", re.compile("^https?://"))
    downloaded = httpx.get(link.get_attribute("href") or "")
    assert downloaded.status_code == 200
    assert len(downloaded.content) == 360_000
    newest.get_by_role("link", name=second).click()

    page.get_by_role("heading", name=f"Checkpoint {second}").wait_for()
    metadata = page.get_by_role("region", name="metadata")
    expect(metadata).to_contain_text(HOSTILE)
    # The doc channel's json value (carried from the parent) as a tree, its <script> as characters
    doc = page.get_by_role("region", name="doc").first
    expect(doc).to_contain_text(HOSTILE)
    expect(doc).to_contain_text("items")
    expect(page.locator("main script, main img")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    # Pending writes of two tasks, each with its path; the json write opened as a tree
    writes = page.locator(".thread-task")
    expect(writes).to_have_count(2)
    expect(writes.nth(0)).to_contain_text("~path, task-a")
    expect(writes.nth(1)).to_contain_text("~path, task-b")
    expect(writes.nth(1).get_by_role("region", name="doc")).to_contain_text('"n"')
    shot(page, "threads-checkpoint")

    # The parent link opens the parent's own page.
    page.get_by_role("link", name=first).click()
    page.get_by_role("heading", name=f"Checkpoint {first}").wait_for()
    expect(page.get_by_text("none: the thread starts here")).to_be_visible()

    # The graph's checkpoint: its metadata holds the hostile note LangGraph copied from the run's config.
    interrupted = graph_thread.by_source("loop")[0]
    page.goto(f"{baton.url}/console#/threads/{quote(graph_thread.thread_id, safe='')}/{interrupted['checkpoint_id']}")
    page.get_by_role("heading", name=f"Checkpoint {interrupted['checkpoint_id']}").wait_for()
    expect(page.get_by_role("region", name="metadata")).to_contain_text(HOSTILE)
    assert page.evaluate("window.__pwned") is None
    # Its msgpack values decoded (the vendored MessagePack build): a channel's string, and the interrupt written by
    # `review` as LangGraph's own type with its payload.
    expect(page.get_by_role("region", name="draft").first).to_contain_text('"first words"')
    interrupt = page.get_by_role("region", name="__interrupt__")
    interrupt.locator("summary").last.click()
    expect(interrupt).to_contain_text('"langgraph.types.Interrupt"')
    record(SUITE, checkpoints_opened=3)


def test_a_page_boundary_says_where_the_parent_is_and_a_bad_filter_shows_the_contracts_error(
    page: Any, baton: BatonServe, graph_thread: GraphThread
) -> None:
    sign_in(page, baton)
    thread = quote(graph_thread.thread_id, safe="")
    page.goto(f"{baton.url}/console#/threads/{thread}?limit=2")
    expect_entries(page, [t["checkpoint_id"] for t in graph_thread.tuples[:2]])
    # The second's parent is the third: on the next page.
    second = graph_thread.tuples[1]
    expect(entry(page, second["checkpoint_id"])).to_contain_text("is on another page")
    page.get_by_role("button", name="Next page").click()
    expect_entries(page, [t["checkpoint_id"] for t in graph_thread.tuples[2:]])

    # A metadata filter is matched on the server; a filter that is not JSON is the API's 400, named. The page
    # before also shows two checkpoints: the ids, not the count, prove the filtered page is drawn (and that its
    # form, not the one about to be replaced, is filled next).
    page.get_by_label("Metadata filter (JSON)").fill('{"source": "loop"}')
    page.get_by_role("button", name="Show").click()
    expect_entries(page, [t["checkpoint_id"] for t in graph_thread.by_source("loop")])
    page.get_by_label("Metadata filter (JSON)").fill("{not json")
    page.get_by_role("button", name="Show").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("VALIDATION_ERROR")
    expect(alert).to_contain_text("/filter")
    record(SUITE, pages=2, filters=2)


def test_deleting_a_thread_of_another_agent_is_confirmed_first(page: Any, baton: BatonServe) -> None:
    agent = f"console-{uuid.uuid4().hex[:8]}"
    thread_id = f"console-del-{uuid.uuid4().hex[:10]}"
    put_thread(baton, thread_id, agent_id=agent)
    sign_in(page, baton)
    open_thread(page, thread_id, agent_id=agent)

    page.get_by_role("button", name="Delete thread").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(thread_id)
    expect(dialog).to_contain_text(f"of agent {agent}")
    expect(dialog).to_contain_text("every checkpoint in every namespace")
    expect(dialog).to_contain_text("2 checkpoints in this namespace, all shown on this page")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert listed(baton, thread_id, agent_id=agent).status_code == 200

    page.get_by_role("button", name="Delete thread").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete thread").click()
    expect(page.locator("#status")).to_contain_text(f"Thread {thread_id} deleted.")
    assert listed(baton, thread_id, agent_id=agent).status_code == 404
    # Gone from the threads opened in this tab too: the status line is written before the start page is drawn,
    # so wait for the list of threads opened in this tab first.
    page.get_by_role("heading", name="Opened in this tab").wait_for()
    expect(page.get_by_role("link", name=thread_id)).to_have_count(0)
    record(SUITE, deletes=1)


def test_a_reader_is_not_offered_delete_and_the_phone_width_fits(
    browser: Any, baton: BatonServe, graph_thread: GraphThread
) -> None:
    issued = httpx.post(
        f"{baton.url}/v1/keys",
        json={"agent_id": "operator", "scopes": ["checkpoints:read"]},
        headers=headers(baton),
    )
    assert issued.status_code == 201, issued.text
    watched = open_page(browser, PHONE)
    try:
        page = watched.page
        sign_in(page, baton, issued.json()["data"]["secret"])
        page.goto(f"{baton.url}/console#/threads/{quote(graph_thread.thread_id, safe='')}")
        expect_entries(page, [t["checkpoint_id"] for t in graph_thread.tuples])
        expect(page.get_by_role("button", name="Delete thread")).to_have_count(0)
        # A key without `*` names no other agent: no agent field.
        page.get_by_role("link", name="← Threads").click()
        page.get_by_label("Thread id").wait_for()
        expect(page.get_by_label("Agent")).to_have_count(0)
        page.goto(f"{baton.url}/console#/threads/{quote(graph_thread.thread_id, safe='')}")
        page.locator("ul.timeline > li").first.wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert not watched.errors
    finally:
        watched.page.context.close()
    record(SUITE, viewports=1)
