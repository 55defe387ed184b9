"""The console in a real browser: Debian's Chromium driven by Playwright for Python, against the session's
`baton serve`, with data saved through the API.

Playwright's own browser download cannot reach its servers here, so the tests launch the installed Chromium
(`/usr/bin/chromium`, or `BATON_CHROMIUM`); `make test` installs it. Each page fails its test on any console error
or uncaught exception (a Content-Security-Policy violation is a console error). Screenshots go to a temporary
folder, or to `docs/console/` under `make screenshots` (`BATON_SCREENSHOTS=docs`).

`BATON_CONSOLE_SLOWDOWN=<n>` (a whole number, 2 or more) makes every page slow on purpose, to shake out tests that
pass only on a fast machine: Chromium runs the page's scripts n times slower and delays each request by n × 100 ms
(at 4, close to the CI runner that answered 3 requests a second). A test that reads the page before it has drawn
fails there; a web-first assertion waits.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.server_process import BatonServe

REPO = Path(__file__).resolve().parents[3]
DOCS_SHOTS = REPO / "docs" / "console"
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
CHROMIUM_FLAGS = [
    # Chromium's background connections are refused by this machine's closed network, many at a time.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    """The installed Chromium: BATON_CHROMIUM, else Debian's."""
    found = os.environ.get("BATON_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).exists():
        pytest.fail(f"no Chromium at {found}: `make test` installs Debian's chromium; or set BATON_CHROMIUM")
    return found


WAIT_MS = 20_000
"""How long an action or a web-first assertion waits for the page: a loaded CI runner has answered 3 requests a
second, and Playwright's own 5 s for `expect` would fail a page that is only slow."""


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One headless Chromium for the console's tests, stopped when they end: Playwright's sync API keeps an asyncio
    loop running in the main thread while it is open, and every later `asyncio.run` of the session would fail."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


REFUSAL = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d ")
"""Chromium's own line for an answer of 4xx to a fetch: the API refusing what a test asked on purpose (a wrong key,
a stale revision) is the console working, not failing. A 5xx is an error like any other."""


class Watched:
    """A page and what went wrong on it: console errors and uncaught exceptions."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.refusals: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        if REFUSAL.match(message.text):
            self.refusals.append(message.text)
        else:
            self.errors.append(f"console: {message.text}")


def slowdown() -> int:
    """The factor of BATON_CONSOLE_SLOWDOWN, or 1 (full speed)."""
    text = os.environ.get("BATON_CONSOLE_SLOWDOWN", "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        pytest.fail(f"BATON_CONSOLE_SLOWDOWN is a whole number of 1 or more, not {text!r}")
    return int(text)


def slow_down(page: Any, factor: int) -> None:
    """Throttle the page's CPU by `factor` and add `factor` × 100 ms to each request (Chrome DevTools Protocol)."""
    session = page.context.new_cdp_session(page)
    session.send("Emulation.setCPUThrottlingRate", {"rate": factor})
    session.send("Network.enable")
    session.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 100 * factor, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def open_page(browser: Any, viewport: dict[str, int] = LAPTOP) -> Watched:
    """A fresh browser context (its own sessionStorage) and page; slowed down under BATON_CONSOLE_SLOWDOWN."""
    context = browser.new_context(viewport=viewport, locale="en-GB", timezone_id="UTC")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    factor = slowdown()
    if factor > 1:
        slow_down(page, factor)
    return Watched(page)


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    """A page on a laptop's width; the test fails if the page logged an error."""
    opened = open_page(browser)
    yield opened
    errors = list(opened.errors)
    opened.page.context.close()
    assert not errors, "the page logged errors:\n" + "\n".join(errors)


@pytest.fixture
def page(watched: Watched) -> Any:
    """The watched page itself."""
    return watched.page


def tenant_key(http: Any, tenant: str, scopes: list[str], agent: str = "admin") -> str:
    """A key of `tenant` (made with the operator key, `http`'s): its secret."""
    created = http.post("/v1/keys", json={"tenant_id": tenant, "agent_id": agent, "scopes": scopes})
    assert created.status_code == 201, created.text
    secret: str = created.json()["data"]["secret"]
    return secret


def sign_in(page: Any, baton: BatonServe, key: str | None = None) -> None:
    """Open the console and sign in with `key` (the operator key by default); waits for the navigation."""
    page.goto(f"{baton.url}/console")
    page.get_by_label("API key").fill(key or baton.key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Sign out").wait_for()


def shot(page: Any, name: str, tmp_path_factory: pytest.TempPathFactory | None = None) -> Path:
    """A screenshot of the whole page: into docs/console/ under `make screenshots`, else a temporary folder."""
    if os.environ.get("BATON_SCREENSHOTS") == "docs":
        folder = DOCS_SHOTS
    else:
        folder = Path(os.environ.get("BATON_SCREENSHOT_DIR") or "/tmp/baton-console-shots")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.png"
    # A modal dialog dims the viewport only: show just the viewport then, as a person sees it.
    whole = page.locator("dialog[open]").count() == 0
    page.screenshot(path=str(target), full_page=whole, animations="disabled", caret="hide")
    return target
