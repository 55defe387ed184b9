"""Stored text cannot reorder the console (issue 20, defect 6): right-to-left overrides and isolates (U+202E RLO,
U+202D LRO, U+2066–U+2069, U+200F RLM, U+061C ALM) and right-to-left letters in a subject id, state keys and values,
a lease holder, source fields, an OpenCheckpoint document, a thread's id, namespace, channels, task ids and paths,
its metadata and a key's description, saved through the API and shown in every view that shows them.

Two proofs. Isolation: every text node of the page holding such a character is the only child of an element that
isolates its direction (a `<bdi>`, or computed `unicode-bidi` of isolate, isolate-override or plaintext), and is one
stored value whole: no label or neighbour shares its bidi context. Geometry: where a label, a hostile value and the
next value share a line (a lease's "held by … until …", a pending write's "Task … · path …"), the boxes lie left to
right in their logical order, as they do when the same view shows the same data without those characters.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import expect

from tests.builders import SEED_DOCUMENT
from tests.e2e.console.conftest import open_page, sign_in
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "console bidi (browser)"

RLO, LRO, RLE, LRE, PDF = "\u202e", "\u202d", "\u202b", "\u202a", "\u202c"
LRI, RLI, FSI, PDI = "\u2066", "\u2067", "\u2068", "\u2069"
RLM, ALM = "\u200f", "\u061c"
HEBREW = "\u05e9\u05dc\u05d5\u05dd"  # shalom: strong right-to-left letters
HOSTILE = "[\u0590-\u08ff\u200f\u202a-\u202e\u2066-\u2069]"
"""What can reorder text around it: right-to-left letters (Hebrew, Arabic, ALM among them) and the bidi controls."""
HOSTILE_RE = re.compile(HOSTILE)

FOUND_JS = """
(pattern) => {
  const hostile = new RegExp(pattern, 'u');
  const isolating = (element) => element.localName === 'bdi'
    || ['isolate', 'isolate-override', 'plaintext'].includes(getComputedStyle(element).unicodeBidi);
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!hostile.test(node.data)) continue;
    const holder = node.parentElement;
    const block = holder.closest('dd, td, li, h1, h2, h3, h4, p, summary, caption, dialog') || holder;
    found.push({
      text: node.data,
      holder: holder.localName,
      isolated: isolating(holder),
      alone: holder.childNodes.length === 1,
      in: `${block.localName}: ${block.textContent.slice(0, 80)}`,
    });
  }
  return found;
}
"""

BOXES_JS = """
(element, needles) => {
  // The boxes of `needles`, found in this order in the element's text (which may run over several text nodes).
  const nodes = [];
  let text = '';
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    nodes.push([node, text.length]);
    text += node.data;
  }
  const point = (offset, end) => {
    for (const [node, start] of nodes) {
      const last = start + node.length;
      const inside = end ? offset > start && offset <= last : offset >= start && offset < last;
      if (inside) return [node, offset - start];
    }
    return null;
  };
  let from = 0;
  return needles.map((needle) => {
    const start = text.indexOf(needle, from);
    if (start < 0) return null;
    from = start + needle.length;
    const range = document.createRange();
    range.setStart(...point(start, false));
    range.setEnd(...point(start + needle.length, true));
    const rects = [...range.getClientRects()].filter((r) => r.width > 0);
    if (!rects.length) return null;
    return {
      left: Math.min(...rects.map((r) => r.left)),
      right: Math.max(...rects.map((r) => r.right)),
      top: Math.min(...rects.map((r) => r.top)),
    };
  });
}
"""


def plain(text: str) -> str:
    """`text` without the characters that can reorder text."""
    return HOSTILE_RE.sub("", text)


class Planted:
    """Stored text of one run: hostile (with the characters) or plain (the same words without them)."""

    def __init__(self, hostile: bool) -> None:
        self.hostile = hostile
        self.tag = uuid.uuid4().hex[:10]
        self.values: set[str] = set()

    def __call__(self, text: str) -> str:
        value = text.replace("#", self.tag) if self.hostile else plain(text.replace("#", self.tag))
        self.values.add(value)
        return value


def expect_isolated(page: Any, planted: Planted, shown: Iterable[str], where: str) -> None:
    """Every hostile text node of the page is a stored value alone in an isolating element, and `shown` are among
    them (the view did show the stored text, so the check is not vacuous)."""
    found: list[dict[str, Any]] = page.evaluate(FOUND_JS, HOSTILE)
    loose = [f for f in found if not (f["isolated"] and f["alone"] and f["text"] in planted.values)]
    assert not loose, f"{where}: stored text shares its direction with what is around it:\n" + "\n".join(
        f"  {f['text']!r} in <{f['holder']}> (isolated: {f['isolated']}, alone: {f['alone']}) of {f['in']!r}"
        for f in loose
    )
    missing = set(shown) - {f["text"] for f in found}
    assert not missing, f"{where}: not shown: {sorted(missing)}"
    record(SUITE, views=1, values=len(found))


def save(http: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = http.post("/v1/checkpoints", json=body)
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def dialog_checked(page: Any, opener: Callable[[], None], name: str, check: Callable[[Any], None]) -> None:
    """Open a confirmation, check it, and cancel it."""
    opener()
    dialog = page.get_by_role("dialog", name=name)
    expect(dialog).to_be_visible()
    check(dialog)
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.locator("dialog[open]")).to_have_count(0)


# ---- checkpoints: list, one checkpoint, its lease, its history, a resume preview --------------------------------


def test_stored_text_is_isolated_in_the_checkpoint_views(page: Any, baton: BatonServe, http: httpx.Client) -> None:
    v = Planted(hostile=True)
    subject = v(f"{RLI}bidi-#{RLO}")
    key, value, other = v(f"{RLO}state-key"), v(f"{LRO}value{RLI}"), v(f"{LRO}other{RLI}")
    hebrew, item, added_key, added = v(f"{RLM}{HEBREW} 1 2"), v(f"{RLO}item"), v(f"{RLI}added"), v(f"new{RLO}")
    host, session, model = v(f"host{RLO}"), v(f"{RLI}session"), v(f"{ALM}model 1 2")
    holder = v(f"{RLO}holder-#")
    first = {key: value, "plain": hebrew, "list": [item, "after"]}
    second = {key: other, "plain": hebrew, "list": [item, "after"], added_key: added}
    source = {"host": host, "session": session, "model": model}
    save(http, subject_id=subject, kind="task_state", state=first, keep_revisions=5, source=source)
    checkpoint_id = save(http, subject_id=subject, kind="task_state", state=second, keep_revisions=5, source=source)[
        "checkpoint_id"
    ]
    sign_in(page, baton)

    # One checkpoint: metadata, source, state tree; a lease taken with a hostile holder (its confirmation, the
    # status line, the lease panel), the release and delete confirmations.
    page.goto(f"{baton.url}/console#/checkpoints/{checkpoint_id}")
    page.get_by_role("heading", name="Metadata").wait_for()
    expect_isolated(page, v, [subject, host, session, model, key, other, hebrew, item, added_key, added], "checkpoint")
    lease = page.locator("section.ckpt-lease")
    lease.get_by_label("Holder").fill(holder)
    lease.get_by_role("button", name="Take a lease").click()
    dialog = page.get_by_role("dialog", name="Take a lease")
    expect(dialog).to_contain_text(holder)
    expect_isolated(page, v, [holder], "the lease's confirmation")
    dialog.get_by_role("button", name="Take the lease").click()
    expect(page.locator("#status")).to_contain_text("Lease taken by")
    expect(lease.locator(".ckpt-token code")).to_be_visible()
    expect_isolated(page, v, [holder], "the lease taken, and the status line")
    dialog_checked(
        page,
        lambda: lease.get_by_role("button", name="Release the lease").click(),
        "Release the lease",
        lambda d: expect_isolated(page, v, [holder], "the release's confirmation"),
    )
    dialog_checked(
        page,
        lambda: page.get_by_role("button", name="Delete checkpoint").click(),
        "Delete this checkpoint",
        lambda d: expect_isolated(page, v, [holder, subject], "the delete's confirmation"),
    )

    # The subject's list: its heading, the subjects opened in this tab, the lease holder's column.
    page.goto(f"{baton.url}/console#/checkpoints?subject={quote(subject, safe='')}")
    expect(page.locator("table.ckpt-list tbody tr")).to_have_count(1)
    expect(page.locator("nav.ckpt-recent")).to_contain_text(subject)
    expect_isolated(page, v, [subject, holder], "the subject's checkpoints")

    # History: the heading, the lease, a diff whose pointers and values hold the characters, the restore's dialog.
    page.goto(f"{baton.url}/console#/history/{checkpoint_id}?from=1&to=2")
    expect(page.locator(".comparison ul.diff > li")).to_have_count(2)
    expect_isolated(page, v, [subject, holder, key, value, other, added_key, added], "history")
    dialog_checked(
        page,
        lambda: page.get_by_role("button", name="Restore revision 1…").click(),
        "Restore revision 1?",
        lambda d: expect_isolated(page, v, [holder, key, value, other], "the restore's confirmation"),
    )

    # An OpenCheckpoint document: its panel, and a resume preview of it (operations, stop conditions, summary).
    document = json.loads(json.dumps(SEED_DOCUMENT))
    title, operation, stop = v(f"{RLO}title of the task"), v(f"{RLI}approve{RLO} 1 2"), v(f"{LRO}never{RLO}")
    document["task"]["title"] = title
    document["operations"][0]["description"] = operation
    document["continuation"]["stop_conditions"][0]["description"] = stop
    ocp_subject = v(f"{RLO}ocp-#")
    ocp = save(http, subject_id=ocp_subject, kind="task_state", format="opencheckpoint/0.1", state=document)
    page.goto(f"{baton.url}/console#/checkpoints/{ocp['checkpoint_id']}")
    page.get_by_role("heading", name="OpenCheckpoint document").wait_for()
    expect_isolated(page, v, [ocp_subject, title, operation, stop], "an OpenCheckpoint document")
    page.goto(f"{baton.url}/console#/resume?subject={quote(ocp_subject, safe='')}")
    expect(page.locator(".resume-answer .badge").first).to_have_text("ready")
    expect_isolated(page, v, [ocp_subject, operation, stop], "a resume preview")


# ---- LangGraph threads ------------------------------------------------------------------------------------------


def encoded(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def put_thread(baton: BatonServe, v: Planted) -> dict[str, str]:
    """A thread of two checkpoints in a namespace, with a `json` channel value and pending writes of a task, each name
    and value planted; the names by role."""
    names = {
        "thread": v(f"thread-#{RLO}"),
        "ns": v(f"{RLI}ns"),
        "first": v(f"{RLO}1f0a-0001"),
        "second": v(f"{RLO}1f0a-0002"),
        "channel": v(f"{RLO}chan"),
        "task": v(f"{RLO}task-a"),
        "path": v(f"~path{RLI}, a"),
        "source": v(f"loop{RLO}"),
        "meta_key": v(f"{RLI}note"),
        "meta_value": v(f"{ALM}{HEBREW} 3 4"),
        "value_key": v(f"{RLO}title"),
        "value": v(f"value{RLI} 5 6"),
    }
    url = f"{baton.url}/v1/threads/{quote(names['thread'], safe='')}"
    ns, channel = names["ns"], names["channel"]
    with httpx.Client(headers={"Authorization": f"Bearer {baton.key}"}, timeout=30) as client:
        for id_, parent, ts in ((names["first"], None, "10:00:00"), (names["second"], names["first"], "10:00:01")):
            body: dict[str, Any] = {
                "checkpoint_ns": ns,
                "checkpoint": {"id": id_, "ts": f"2026-12-01T{ts}+00:00", "channel_versions": {channel: "1"}},
                "metadata": {"source": names["source"], "step": 0, names["meta_key"]: names["meta_value"]},
                "values": {channel: {"type": "json", "data": encoded({names["value_key"]: names["value"]})}}
                if parent is None
                else {},
            }
            if parent:
                body["parent_checkpoint_id"] = parent
            answer = client.post(f"{url}/checkpoints", json=body)
            assert answer.status_code == 201, answer.text
        answer = client.post(
            f"{url}/writes",
            json={
                "checkpoint_ns": ns,
                "checkpoint_id": names["second"],
                "task_id": names["task"],
                "task_path": names["path"],
                "writes": [{"channel": channel, "type": "json", "data": encoded({names["value_key"]: names["value"]})}],
            },
        )
        assert answer.status_code == 200, answer.text
    return names


def thread_href(baton: BatonServe, names: dict[str, str], checkpoint: str | None = None) -> str:
    parts = "/".join(quote(p, safe="") for p in [names["thread"], checkpoint] if p)
    return f"{baton.url}/console#/threads/{parts}?ns={quote(names['ns'], safe='')}"


def test_stored_text_is_isolated_in_the_thread_views(page: Any, baton: BatonServe) -> None:
    v = Planted(hostile=True)
    names = put_thread(baton, v)
    sign_in(page, baton)
    # The timeline: its heading, the namespace, each entry's id, parent, source, channels and pending writes.
    page.goto(thread_href(baton, names))
    expect(page.locator(".thread-entry")).to_have_count(2)
    expect(page.locator(".thread-task")).to_have_count(1)
    shown = ["thread", "ns", "first", "second", "channel", "task", "path", "source"]
    expect_isolated(page, v, [names[n] for n in shown], "a thread's timeline")
    dialog_checked(
        page,
        lambda: page.get_by_role("button", name="Delete thread").click(),
        "Delete this thread?",
        lambda d: expect_isolated(page, v, [names["thread"]], "the thread's delete confirmation"),
    )
    # One checkpoint: its facts, metadata tree, channel values (decoded), pending writes and document.
    page.goto(thread_href(baton, names, names["first"]))
    page.get_by_role("heading", name="Channel values").wait_for()
    expect(page.locator(".thread-channels .tree")).to_have_count(1)
    shown = ["thread", "ns", "first", "channel", "source", "meta_key", "meta_value", "value_key", "value"]
    expect_isolated(page, v, [names[n] for n in shown], "a thread's checkpoint")
    page.goto(thread_href(baton, names, names["second"]))
    expect(page.locator(".thread-task .tree")).to_have_count(1)
    expect_isolated(page, v, [names[n] for n in ["second", "first", "task", "path", "value"]], "pending writes")
    # The threads opened in this tab.
    page.goto(f"{baton.url}/console#/threads")
    expect(page.locator(".thread-recent li").first).to_contain_text(names["thread"])
    expect_isolated(page, v, [names["thread"], names["ns"]], "the threads opened in this tab")


# ---- keys -------------------------------------------------------------------------------------------------------


def test_stored_text_is_isolated_in_the_keys_view(page: Any, baton: BatonServe) -> None:
    v = Planted(hostile=True)
    agent = f"bidi-{v.tag}"
    description = v(f"{RLO}billing worker{RLI} of #")
    auth = {"Authorization": f"Bearer {baton.key}"}
    answer = httpx.post(
        f"{baton.url}/v1/keys",
        json={"agent_id": agent, "scopes": ["checkpoints:read"], "description": description},
        headers=auth,
    )
    assert answer.status_code == 201, answer.text
    key_id = answer.json()["data"]["key_id"]
    try:
        sign_in(page, baton)
        page.goto(f"{baton.url}/console#/keys?agent={agent}")
        expect(page.locator(".keys-table tbody tr")).to_have_count(1)
        expect_isolated(page, v, [description], "the keys")
        dialog_checked(
            page,
            lambda: page.get_by_role("button", name=f"Revoke {key_id}").click(),
            f"Revoke {key_id}?",
            lambda d: expect_isolated(page, v, [description], "the revoke's confirmation"),
        )
    finally:
        httpx.delete(f"{baton.url}/v1/keys/{key_id}", headers=auth)


# ---- geometry: a hostile value moves nothing around it ---------------------------------------------------------


def boxes(scope: Any, needles: list[str]) -> list[dict[str, float]]:
    found: list[dict[str, float] | None] = scope.evaluate(BOXES_JS, needles)
    assert all(found), f"not all of {needles!r} are drawn: {found}"
    return [box for box in found if box]


def order(found: list[dict[str, float]]) -> list[int]:
    """The logical positions of the boxes, read left to right (by their centres)."""
    return sorted(range(len(found)), key=lambda i: (found[i]["left"] + found[i]["right"]) / 2)


def lines(browser: Any, baton: BatonServe, http: httpx.Client, hostile: bool) -> dict[str, list[dict[str, float]]]:
    """The boxes of two lines where a label, a stored value and the next value share a line, in one run."""
    v = Planted(hostile=hostile)
    subject, holder = v(f"{RLI}geometry-#{RLO}"), v(f"{RLO}holder-#")
    checkpoint_id = ""
    for step in (1, 2):
        checkpoint_id = save(http, subject_id=subject, kind="task_state", state={"step": step}, keep_revisions=2)[
            "checkpoint_id"
        ]
    answer = http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 600, "holder": holder})
    assert answer.status_code == 201, answer.text
    names = put_thread(baton, v)
    watched = open_page(browser)
    page = watched.page
    try:
        sign_in(page, baton)
        # History: "held by <holder> until <time>".
        page.goto(f"{baton.url}/console#/history/{checkpoint_id}")
        held = page.locator(".facts dd").filter(has_text="held by")
        expect(held).to_have_count(1)
        when = held.locator("time").inner_text()
        found = {"lease": boxes(held, ["held by", holder, "until", when])}
        # A pending write: "Task <task id> · path <task path>".
        page.goto(thread_href(baton, names))
        task = page.locator(".thread-task > p")
        expect(task).to_have_count(1)
        found["task"] = boxes(task, ["Task", names["task"], "path", names["path"]])
    finally:
        errors = list(watched.errors)
        page.context.close()
    assert not errors, errors
    return found


def test_a_hostile_value_moves_nothing_around_it(browser: Any, baton: BatonServe, http: httpx.Client) -> None:
    calm = lines(browser, baton, http, hostile=False)
    hostile = lines(browser, baton, http, hostile=True)
    for line in ("lease", "task"):
        # Without the characters the label, the value and its neighbour read left to right, on one line;
        assert order(calm[line]) == [0, 1, 2, 3], (line, calm[line])
        # with them, the same: the label before the value stays on its left, the next value on its right.
        assert order(hostile[line]) == order(calm[line]), (line, hostile[line])
        for before, after in zip(hostile[line], hostile[line][1:], strict=False):
            assert before["right"] <= after["left"] + 0.5, (line, hostile[line])
        record(SUITE, lines=1)
