"""The console's route, through the api handler in-process: every file it ships is served with its media type and the
security headers, conditional requests answer 304, anything else is a 404, the page's links resolve, and the console
costs nothing to a cold start that does not ask for it.

The files are those of the package (`functions/baton_checkpoints/console/`), listed here from the file system, so a
file added
there is served and checked without touching this test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import moto_world
from tests.integration.driver import ApiDriver, Result
from tests.proof_counts import record

REPO = Path(__file__).resolve().parents[2]
CONSOLE = REPO / "functions" / "baton_checkpoints" / "console"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
"""What each kind of file the console ships must be served as (a browser runs a module script only when its media
type is a JavaScript one, and `nosniff` makes it take the declared type at its word)."""
FILES = sorted(p.name for p in CONSOLE.iterdir() if p.suffix in MEDIA_TYPES and p.name != "index.html")
"""The files served under /console/ (the page, index.html, is served at /console only)."""
NOT_SERVED = sorted(p.name for p in CONSOLE.iterdir() if p.suffix not in MEDIA_TYPES)
"""Files that ship beside the console without being served: the licence notices of vendored libraries."""
NO_KEY: dict[str, str | None] = {"authorization": None}


@pytest.fixture(scope="module")
def api() -> Iterator[ApiDriver]:
    """One moto world for the module (the console's routes read and write nothing of it), with a key that the tests
    send where a key must change nothing."""
    from baton_checkpoints.api.app import app
    from tests.integration.conftest import OPERATOR_SECRET, put_key

    with moto_world():
        put_key(app.services(), OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
        yield ApiDriver(OPERATOR_SECRET)


def get(api: ApiDriver, path: str, headers: dict[str, str | None] | None = None) -> Result:
    """GET `path` through the handler, without a key unless `headers` gives one."""
    return api.invoke("health", path=path, headers={**NO_KEY, **(headers or {})})


def policy(answer: Result) -> dict[str, list[str]]:
    """The answer's Content-Security-Policy, as directive -> sources."""
    text = answer.header("Content-Security-Policy")
    assert text, f"no Content-Security-Policy: {answer.headers}"
    directives: dict[str, list[str]] = {}
    for directive in filter(None, (part.strip() for part in text.split(";"))):
        name, *sources = directive.split()
        assert name not in directives, f"{name} twice in {text}"
        directives[name] = sources
    return directives


def assert_served_safely(answer: Result) -> None:
    """The headers every answer of the console carries: a strict CSP, nosniff, no framing, no CORS, an ETag."""
    csp = policy(answer)
    every_source = [source for sources in csp.values() for source in sources]
    assert "'unsafe-inline'" not in every_source, csp
    assert "'unsafe-eval'" not in every_source, csp
    assert not [s for s in every_source if s == "*" or s.startswith(("http:", "https:", "*."))], csp
    assert csp.get("default-src") == ["'none'"], csp
    assert csp.get("script-src") == ["'self'"], csp
    assert csp.get("frame-ancestors") == ["'none'"], csp
    assert csp.get("connect-src") == ["'self'"], csp
    assert answer.header("X-Content-Type-Options") == "nosniff"
    assert answer.header("X-Frame-Options") == "DENY"
    assert not [name for name in answer.headers if name.lower().startswith("access-control-")], answer.headers
    etag = answer.header("ETag")
    assert etag is not None, answer.headers
    assert re.fullmatch(r'"[0-9a-f]{16,64}"', etag), etag


@pytest.mark.parametrize("name", FILES)
def test_every_console_file_is_served_with_its_media_type_and_the_security_headers(api: ApiDriver, name: str) -> None:
    # Given a file the console ships
    shipped = (CONSOLE / name).read_text(encoding="utf-8")
    # When it is asked for without a key, and with one
    answer = get(api, f"/console/{name}")
    with_key = api.invoke("health", path=f"/console/{name}")
    # Then it is served as it is in the package, with its media type and the security headers
    assert answer.status == 200, answer.raw_body[:300]
    assert answer.header("Content-Type") == MEDIA_TYPES[Path(name).suffix]
    assert answer.raw_body == shipped
    assert_served_safely(answer)
    # and a key changes nothing of it
    assert (with_key.status, with_key.headers, with_key.raw_body) == (answer.status, answer.headers, answer.raw_body)
    record("console route", files=1)


def test_the_page_is_served_at_console_with_the_security_headers(api: ApiDriver) -> None:
    # When /console is asked for
    answer = get(api, "/console")
    # Then it is index.html, as HTML, with the security headers
    assert answer.status == 200, answer.raw_body[:300]
    assert answer.header("Content-Type") == MEDIA_TYPES[".html"]
    assert answer.raw_body == (CONSOLE / "index.html").read_text(encoding="utf-8")
    assert_served_safely(answer)


@pytest.mark.parametrize("name", ["", *FILES])
def test_a_current_etag_answers_304_without_a_body_and_any_other_one_200(api: ApiDriver, name: str) -> None:
    # Given a file's current ETag ("" is the page)
    path = f"/console/{name}" if name else "/console"
    first = get(api, path)
    etag = first.header("ETag")
    assert first.status == 200
    assert etag
    # When it is sent back in If-None-Match: alone, weak, and in a list
    for sent in (etag, f"W/{etag}", f'"0000", {etag}', f" {etag} ,"):
        again = get(api, path, {"if-none-match": sent})
        # Then the answer is 304, with no body, the same tag and the same security headers
        assert again.status == 304, (sent, again.status)
        assert again.raw_body == "", sent
        assert again.header("ETag") == etag
        assert_served_safely(again)
        record("console route", not_modified=1)
    # and a tag that is not the current one, or `*`, or garbage, answers the file again
    for sent in ('"0000"', etag.strip('"'), f'"{etag}"', "*", "", "W/"):
        other = get(api, path, {"if-none-match": sent})
        assert other.status == 200, (sent, other.status)
        assert other.raw_body == first.raw_body


NOT_FILES = [
    "index.html",  # the page lives at /console only, so that its relative links mean one thing
    "INDEX.HTML",
    "App.js",
    "app.js.map",
    "app",
    "app.js%00",
    "app.js%20",
    "app.js%2F",
    ".",
    "..",
    "...",
    "%2e%2e",
    "..%2Fapp.js",
    "..%2F..%2Ffunctions%2Fbaton%2Fsettings.py",
    "%2e%2e%2fapi.js",
    "..%5Capp.js",
    "sub%2Fapp.js",
    "app.js%3Fv%3D1",
    "nothing.js",
    "nothing.css",
    "README.md",
    "__init__.py",
    "..%252Fapp.js",
]


@pytest.mark.parametrize("name", NOT_FILES)
def test_names_that_are_not_console_files_are_the_contracts_404(api: ApiDriver, name: str) -> None:
    # Given a name that is not one of the console's files (case, suffix, dots, encoded separators, the page)
    # When it is asked for under /console/
    answer = get(api, f"/console/{name}")
    # Then the answer is the contract's 404, with none of any file in it
    assert answer.status == 404, (name, answer.status, answer.raw_body[:200])
    assert answer.header("Content-Type") == "application/json"
    assert answer.body["error"] == {"code": "NOT_FOUND", "message": "Resource was not found."}
    record("console route", not_found=1)


def test_only_licence_notices_ship_beside_the_console_unserved(api: ApiDriver) -> None:
    # Given the files of the console's directory that are not of a kind it serves
    # Then they are licence notices of the vendored libraries (a file of any other kind would be served, or is a
    # mistake), and each is a 404 like any unknown name
    assert all(re.fullmatch(r"[\w.-]+\.LICENSE\.txt", name) for name in NOT_SERVED), NOT_SERVED
    for name in NOT_SERVED:
        assert get(api, f"/console/{name}").status == 404, name


@pytest.mark.parametrize("path", ["/console/../v1/whoami", "/console/a/app.js", "/console/./app.js", "/consolex"])
def test_paths_beyond_one_name_are_no_console_file(api: ApiDriver, path: str) -> None:
    # Given a path with more than one segment after /console, or one that only starts like it
    # When it is asked for without a key
    answer = get(api, path)
    # Then no console file and no other route answers it
    assert answer.status == 404, (path, answer.status, answer.raw_body[:200])
    assert answer.body["error"]["code"] == "NOT_FOUND"


class _Links(HTMLParser):
    """The URLs an HTML page makes the browser load: script src, link href, img src, and any other src."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "link" and found.get("href"):
            self.loaded.append(str(found["href"]))
        if found.get("src"):
            self.loaded.append(str(found["src"]))


IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}/[^'"]+)['"]""")


def test_every_link_of_the_page_and_every_module_import_resolves_to_a_served_file(api: ApiDriver) -> None:
    # Given what the page makes the browser load (its script, style sheet, icon)
    parser = _Links()
    parser.feed(get(api, "/console").raw_body)
    assert parser.loaded, "the page loads nothing"
    # When each is asked for, then each module that one imports, as a browser resolves them
    queue = list(parser.loaded)
    served: set[str] = set()
    while queue:
        url = queue.pop()
        if url in served:
            continue
        # Then each is a path of this origin under /console/ (never another origin), and is served
        assert url.startswith("/console/"), url
        assert "//" not in url, url
        answer = get(api, url)
        assert answer.status == 200, (url, answer.status)
        served.add(url)
        if url.endswith(".js"):
            queue.extend(f"/console/{Path(found).name}" for found in IMPORT.findall(answer.raw_body))
    # and the page's own links include its script and its style sheet
    assert {"/console/app.js", "/console/console.css"} <= served, served
    record("console route", links=len(served))


COLD_START_PROBE = """
import json, sys
audited = []
def audit(event, args):
    if event == "open" and isinstance(args[0], str) and "/baton_checkpoints/console/" in args[0].replace("\\\\", "/"):
        audited.append(args[0])
sys.addaudithook(audit)
from moto import mock_aws
with mock_aws():
    import boto3
    from baton_checkpoints.store.schema import ensure_table
    ensure_table(boto3.client("dynamodb", region_name="us-east-1"), "baton-probe")
    from baton_checkpoints.handlers.api import handler
    from baton_checkpoints.api.routers import console
    def event(path):
        sample = json.loads(open(HEALTH_EVENT).read())
        sample["rawPath"] = sample["requestContext"]["http"]["path"] = path
        return sample
    seen = {"import": [console.assets.cache_info().currsize, len(audited)]}
    status = handler(event("/v1/health"), None)["statusCode"]
    seen["health"] = [status, console.assets.cache_info().currsize, len(audited)]
    console_modules = [name for name, module in sys.modules.items()
                       if "/baton_checkpoints/console/"
                       in (getattr(module, "__file__", None) or "").replace("\\\\", "/")
                       or name == "baton_checkpoints.console" or name.startswith("baton_checkpoints.console.")]
    seen["modules"] = console_modules
    status = handler(event("/console"), None)["statusCode"]
    seen["console"] = [status, console.assets.cache_info().currsize, len(audited)]
print(json.dumps(seen))
"""


def test_a_cold_start_that_does_not_ask_for_the_console_reads_none_of_its_files() -> None:
    # Given a fresh interpreter that watches every file it opens
    env = {
        "PATH": "",
        "PYTHONPATH": str(REPO / "functions"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "BATON_TABLE_NAME": "baton-probe",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    # When it imports the api handler and serves GET /v1/health, then GET /console
    source = f"HEALTH_EVENT = {str(REPO / 'events' / 'health.json')!r}\n" + COLD_START_PROBE
    done = subprocess.run(
        [sys.executable, "-c", source], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # Then neither the import nor the health check read a console file, nor imported one as a module
    assert seen["import"] == [0, 0], seen
    assert seen["health"] == [200, 0, 0], seen
    assert seen["modules"] == [], seen
    # and the probe can see them being read: the page's request reads them, once, all at once
    status, cached, opened = seen["console"]
    assert status == 200, seen
    assert cached == 1, seen  # the cache of `assets()`: one entry, every file
    assert opened >= len(FILES) + 1, seen


def test_the_document_says_every_media_type_the_file_route_serves() -> None:
    # Given the committed OpenAPI document's answer for a console file
    document = json.loads((REPO / "docs" / "openapi.json").read_text(encoding="utf-8"))
    documented = set(document["paths"]["/console/{asset}"]["get"]["responses"]["200"]["content"])
    # Then each media type a console file is served as is documented there (clients and schemathesis read it)
    served = {MEDIA_TYPES[Path(name).suffix].split(";")[0] for name in FILES}
    assert served <= documented, f"served but undocumented: {sorted(served - documented)}"


def test_the_apis_address_leads_a_browser_to_the_console(api: ApiDriver) -> None:
    # When a browser opens the API's address, with or without a key
    answer = get(api, "/")
    # Then it is sent to the console, with the console's security headers and no body
    assert answer.status == 302
    assert answer.header("Location") == "/console"
    assert answer.header("X-Content-Type-Options") == "nosniff"
    assert not answer.raw_body
    record("console route", redirects=1)
