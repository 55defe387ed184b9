"""The console's JSON tree (json-tree.js) in a real browser: text stays text, branches open lazily, search opens
the way to every match."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.e2e.server_process import BatonServe

MOUNT = """async (value) => {
  const {jsonTree} = await import('/console/json-tree.js');
  const holder = document.createElement('div');
  holder.id = 'under-test';
  document.body.replaceChildren(holder);
  holder.append(jsonTree(value, {label: 'state', open: 1}));
}"""


def mount(page: Any, baton: BatonServe, value: Any) -> Any:
    page.goto(f"{baton.url}/console")
    page.evaluate(MOUNT, value)
    return page.locator("#under-test")


def test_markup_in_a_state_is_shown_as_text(page: Any, baton: BatonServe) -> None:
    hostile = {"<img src=x onerror=window.pwned=1>": "<script>window.pwned=1</script>", "b": ["<b>bold</b>"]}
    tree = mount(page, baton, hostile)
    tree.get_by_role("button", name="Expand shown").click()
    # The array's items are built by the toggle event that follows the click: wait for them, so that the absence
    # of elements below is checked on the whole tree.
    expect(tree).to_contain_text('"<b>bold</b>"')
    expect(tree).to_contain_text('"<script>window.pwned=1</script>"')
    expect(tree).to_contain_text('"<img src=x onerror=window.pwned=1>"')
    expect(tree.locator("script, img, b")).to_have_count(0)
    assert page.evaluate("window.pwned") is None


def test_search_opens_the_branches_that_lead_to_each_match(page: Any, baton: BatonServe) -> None:
    value = {"plan": {"steps": [{"name": "fetch"}, {"name": "parse", "detail": {"deep": {"needle": "Found it"}}}]}}
    tree = mount(page, baton, value)
    # Only the first level is open: the deep value is not even built yet.
    expect(tree.get_by_text('"plan"')).to_be_visible()
    assert "Found it" not in tree.inner_text()
    search = tree.get_by_label("Search the state")
    search.fill("found")
    search.press("Enter")
    mark = tree.locator("mark")
    expect(mark).to_have_text(["Found"])
    expect(tree).to_contain_text("1 match")
    # A key matches too, and clearing the search leaves the tree as it was.
    search.fill("needle")
    search.press("Enter")
    tree.locator("mark", has_text="needle").wait_for()
    search.fill("")
    search.press("Enter")
    expect(tree.locator("mark")).to_have_count(0)
    expect(tree).not_to_contain_text("match")
    expect(tree).not_to_contain_text("Found it")


def test_a_long_array_is_shown_in_chunks(page: Any, baton: BatonServe) -> None:
    tree = mount(page, baton, {"items": list(range(450))})
    items = tree.locator("li[data-pointer^='/items/']")
    # The branch is built when it opens (the toggle event comes after the click): wait for it.
    tree.locator("summary", has_text="items").click()
    expect(items).to_have_count(200)
    tree.get_by_role("button", name="Show 200 more of 250").click()
    expect(items).to_have_count(400)
    tree.get_by_role("button", name="Show 50 more of 50").click()
    expect(items).to_have_count(450)
