"""The console's files, read as text: nothing in them turns a string into HTML or code, the page has nothing inline
(its Content-Security-Policy would refuse it, and a checkpoint's text must never become markup), nothing is loaded
from another origin, and every module a script imports is a file the console ships.

Text enters the page in one place: dom.js, whose `append` draws each string in a `<bdi>` of its own when it holds a
character that can reorder the text around it (right-to-left letters, the bidi controls), so that stored text
reorders only itself. No other module creates text (text nodes, `textContent`, a string given to `append`), and the
helper's character class holds every character Unicode gives a right-to-left or explicit bidi class.

The checks read code with its comments taken out (a comment saying "no innerHTML" is no use of it) and keep string
literals (`el['innerHTML']` is one). Each check is also run on a small sample that breaks it, so that a check that
could never fail would be seen.
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.proof_counts import record

CONSOLE = Path(__file__).resolve().parents[2] / "functions" / "baton_checkpoints" / "console"
FILES = sorted(p.name for p in CONSOLE.iterdir() if p.is_file())
SCRIPTS = [name for name in FILES if name.endswith(".js")]
NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml", "http://www.w3.org/1999/xlink")
"""XML namespace names: identifiers that look like URLs, which nothing loads."""

# Sinks that parse a string as HTML or run it as code.
CODE_SINKS: dict[str, re.Pattern[str]] = {
    "innerHTML": re.compile(r"\binnerHTML\b"),
    "outerHTML": re.compile(r"\bouterHTML\b"),
    "insertAdjacentHTML": re.compile(r"\binsertAdjacentHTML\b"),
    "document.write": re.compile(r"\bdocument\s*\.\s*write(?:ln)?\b"),
    "eval(": re.compile(r"(?<![\w$.])eval\s*\("),
    "new Function": re.compile(r"\bnew\s+Function\b"),
    "setTimeout/setInterval with a string": re.compile(r"\bset(?:Timeout|Interval)\s*\(\s*['\"`]"),
    "javascript: URL": re.compile(r"javascript\s*:", re.IGNORECASE),
    "srcdoc": re.compile(r"\bsrcdoc\b"),
    "createContextualFragment": re.compile(r"\bcreateContextualFragment\b"),
    "DOMParser": re.compile(r"\bDOMParser\b"),
    # `h(tag, attributes)` sets every other attribute with setAttribute: an inline handler or style would be one
    "inline handler or style attribute": re.compile(
        r"""setAttribute\s*\(\s*['"](?:on\w+|style)['"]|[{,]\s*['"]?(?:on(?!ce\b)[a-z]+|style)['"]?\s*:"""
    ),
}
# What creates text without dom.js (whose `append` isolates each string's direction): text nodes, text written into an
# element, or a string handed to a DOM method that makes it a text node.
TEXT_SINKS: dict[str, re.Pattern[str]] = {
    "createTextNode": re.compile(r"\bcreateTextNode\b"),
    "text written into an element": re.compile(
        r"\.\s*(?:textContent|innerText|outerText|nodeValue)\s*(?:\+?=(?!=))|\binsertAdjacentText\b"
    ),
    "a string given to a DOM method": re.compile(
        r"\.\s*(?:append|prepend|before|after|replaceWith|replaceChildren|appendChild|insertBefore)\s*\(\s*['\"`]"
    ),
}
TEXT_MAKER = "dom.js"
"""The one module that creates text."""
OWN_SCRIPTS = [name for name in SCRIPTS if not name.startswith("msgpack-")]
"""The console's own scripts (the vendored MessagePack build decodes bytes; it builds nothing of the page)."""
# What names another origin: an absolute http(s) URL, or a protocol-relative one where a URL is loaded.
OTHER_ORIGIN = re.compile(r"""https?://[^\s'"`)<>]*|(?:src|href|action)\s*=\s*['"]?//|url\(\s*['"]?//|@import""")
STATIC_IMPORT = re.compile(r"""\b(?:import|export)\b[^'"`;]*?\bfrom\s*(['"])([^'"]+)\1|\bimport\s*(['"])([^'"]+)\3""")
DYNAMIC_IMPORT = re.compile(r"""\bimport\s*\(\s*([^)]*)\)""")
MODULE_LITERAL = re.compile(r"""(['"`])(\.{0,2}/?[\w./-]*\.m?js)\1""")


def strip_comments(source: str) -> str:
    """JavaScript (or CSS) without its comments, strings and regular expression literals kept as they are.

    A small scanner, not a parser: it knows string and template literals (without nesting a template in `${}`),
    `//` and `/* */` comments, and takes a `/` after an operator or an opening bracket to start a regular
    expression literal. That is all the console's plain modern JavaScript needs.
    """
    out: list[str] = []
    i, n = 0, len(source)
    last = ""  # the last significant character written
    while i < n:
        c = source[i]
        pair = source[i : i + 2]
        if pair == "//":
            end = source.find("\n", i)
            i = n if end == -1 else end
            continue
        if pair == "/*":
            end = source.find("*/", i + 2)
            i = n if end == -1 else end + 2
            out.append(" ")
            continue
        if c in "'\"`" or (c == "/" and (not last or last in "(,=:[!&|?{};+-*%<>~^")):
            j = i + 1
            in_class = False
            while j < n:
                if source[j] == "\\":
                    j += 2
                    continue
                if c == "/" and source[j] == "[":
                    in_class = True
                elif c == "/" and source[j] == "]":
                    in_class = False
                elif source[j] == c and not in_class:
                    break
                elif c in "'\"/" and source[j] == "\n":
                    break  # an unterminated string or regex: stop at the line's end
                j += 1
            out.append(source[i : j + 1])
            last = c
            i = j + 1
            continue
        out.append(c)
        if not c.isspace():
            last = c
        i += 1
    return "".join(out)


def code_of(name: str, text: str) -> str:
    """The text of a file as its checks read it: scripts without comments, style sheets without `/* */` comments
    (`//` is no comment in CSS), markup without `<!-- -->` comments."""
    if name.endswith(".js"):
        return strip_comments(text)
    if name.endswith(".css"):
        return re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)


def sinks_in(name: str, text: str) -> list[str]:
    """Which of the code sinks a file uses."""
    code = code_of(name, text)
    return [sink for sink, pattern in CODE_SINKS.items() if pattern.search(code)]


def text_sinks_in(name: str, text: str) -> list[str]:
    """Which of the ways of creating text without dom.js a file uses."""
    code = code_of(name, text)
    return [sink for sink, pattern in TEXT_SINKS.items() if pattern.search(code)]


def bidi_class_of(text: str) -> re.Pattern[str]:
    """dom.js's class of the characters that reorder text around them (`const BIDI = /[…]/u`), as a Python pattern."""
    found = re.search(r"const BIDI = /(\[[^\]]*\])/u;", text)
    assert found, "dom.js defines no `const BIDI = /[…]/u`"
    return re.compile(re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda m: f"\\U{int(m.group(1), 16):08x}", found.group(1)))


REORDERING = {"R", "AL", "AN", "LRE", "LRO", "RLE", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}
"""Bidi classes that can move the text around a character: right-to-left letters and Arabic numbers, and the explicit
embeddings, overrides and isolates (Unicode's Bidi_Class; RLM is R, ALM is AL)."""


def other_origins_in(name: str, text: str) -> list[str]:
    """The URLs of another origin a file names (XML namespace names aside)."""
    code = code_of(name, text)
    return [m.group(0) for m in OTHER_ORIGIN.finditer(code) if m.group(0) not in NAMESPACES]


class _Markup(HTMLParser):
    """What of a page would be inline: handler and style attributes, style elements, scripts without src."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._script_without_src = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for attribute, value in attrs:
            if attribute.startswith("on"):
                self.problems.append(f"<{tag} {attribute}=…>: an inline handler")
            if attribute == "style":
                self.problems.append(f"<{tag} style=…>: an inline style")
            if attribute in ("src", "href", "action") and (value or "").strip().lower().startswith("javascript:"):
                self.problems.append(f"<{tag} {attribute}=javascript:…>")
        if tag == "style":
            self.problems.append("<style>: an inline style sheet")
        if tag == "script":
            found = dict(attrs)
            if not found.get("src"):
                self.problems.append("<script> without src: an inline script")
                self._script_without_src = True
            elif found.get("type") != "module":
                self.problems.append(f"<script src={found['src']}> that is not a module")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script_without_src = False

    def handle_data(self, data: str) -> None:
        if self._script_without_src and data.strip():
            self.problems.append("inline script text")


def inline_in_markup(text: str) -> list[str]:
    """What of a page would be inline (its CSP refuses all of it)."""
    parser = _Markup()
    parser.feed(text)
    parser.close()
    # The parser's view, and a plain look at the text (an attribute the parser might not see as one)
    raw = [f"raw {m.group(0)!r}" for m in re.finditer(r"\s(?:on[a-z]+|style)\s*=", code_of("x.html", text), re.I)]
    return parser.problems + raw


def imports_of(text: str) -> tuple[list[str], list[str]]:
    """(module specifiers a script imports statically or dynamically with a literal, dynamic imports of anything
    else); a non-literal dynamic import is judged by the module literals the script holds (`MODULE_LITERAL`)."""
    code = strip_comments(text)
    found = [m.group(2) or m.group(4) for m in STATIC_IMPORT.finditer(code)]
    computed = []
    for m in DYNAMIC_IMPORT.finditer(code):
        argument = m.group(1).strip()
        literal = re.fullmatch(r"""(['"`])([^'"`$]+)\1""", argument)
        if literal:
            found.append(literal.group(2))
        else:
            computed.append(argument)
    return found, computed


# -- the console's files -------------------------------------------------------------------------------------------


def test_the_console_ships_its_page_scripts_and_style_sheet() -> None:
    assert {"index.html", "app.js", "api.js", "dom.js", "ui.js", "console.css"} <= set(FILES), FILES


@pytest.mark.parametrize("name", FILES)
def test_no_console_file_turns_a_string_into_html_or_code(name: str) -> None:
    # Given a file of the console
    text = (CONSOLE / name).read_text(encoding="utf-8")
    # When it is read for the sinks that parse a string as HTML or run it as code
    found = sinks_in(name, text)
    # Then it uses none of them
    assert not found, f"{name} uses {found}"
    record("console files", files=1)


@pytest.mark.parametrize("name", FILES)
def test_no_console_file_names_another_origin(name: str) -> None:
    # Given a file of the console
    text = (CONSOLE / name).read_text(encoding="utf-8")
    # Then it names no URL of another origin: the page loads nothing from anywhere but Baton
    assert not other_origins_in(name, text), f"{name} names {other_origins_in(name, text)}"


@pytest.mark.parametrize("name", [n for n in FILES if n.endswith((".html", ".svg"))])
def test_the_markup_has_nothing_inline(name: str) -> None:
    # Given the page (and the icon, which is markup too)
    text = (CONSOLE / name).read_text(encoding="utf-8")
    # Then it has no inline handler, style attribute, style element or script without src
    assert not inline_in_markup(text), f"{name}: {inline_in_markup(text)}"


def test_the_page_loads_its_script_as_a_module_from_this_origin() -> None:
    # Given the page
    text = (CONSOLE / "index.html").read_text(encoding="utf-8")
    # Then its one script is the console's app, as a module, by an absolute path of this origin
    scripts = re.findall(r"<script\b[^>]*>", text)
    assert scripts == ['<script type="module" src="/console/app.js">'], scripts


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_module_a_script_imports_is_a_file_the_console_ships(name: str) -> None:
    # Given a script of the console
    text = (CONSOLE / name).read_text(encoding="utf-8")
    # When its imports are read (static, and dynamic ones with a literal)
    found, computed = imports_of(text)
    # Then each names a sibling file by a relative path (no bare name: there is no build step), and it exists
    for specifier in found:
        assert specifier.startswith("./"), f"{name} imports {specifier!r}: only ./sibling.js resolves in a browser"
        assert "/" not in specifier[2:], f"{name} imports {specifier!r} outside the console's directory"
        assert (CONSOLE / specifier[2:]).is_file(), f"{name} imports {specifier}, which the console does not ship"
        record("console files", imports=1)
    # and a dynamic import of a computed name picks one of the module names the script holds, each shipped
    if computed:
        literals = [m.group(2) for m in MODULE_LITERAL.finditer(strip_comments(text))]
        assert literals, f"{name} imports {computed} but names no module"
        for specifier in literals:
            assert specifier.startswith("./"), f"{name} names the module {specifier!r}"
            assert (CONSOLE / specifier[2:]).is_file(), f"{name} names {specifier}, which the console does not ship"
            record("console files", imports=1)


SERVED_SUFFIXES = (".js", ".css", ".svg")
"""What /console/<name> serves (baton_checkpoints.api.routers.console's media types; the page itself is /console)."""
CONSOLE_PATH = re.compile(r"""['"`(]/console/([^'"`)\s?#]*)""")


@pytest.mark.parametrize("name", [n for n in FILES if n.endswith((".js", ".html", ".css"))])
def test_every_console_path_a_file_names_is_a_file_the_console_serves(name: str) -> None:
    # Given the /console/<name> paths a file names (a script loaded by URL, the page's links, a style's url())
    paths = CONSOLE_PATH.findall(code_of(name, (CONSOLE / name).read_text(encoding="utf-8")))
    # Then each is a file of the console of a kind it serves (the page is /console itself, not /console/index.html)
    for found in paths:
        if not found:
            continue  # `/console/` itself: a prefix the script completes, or a link to the page
        assert found.endswith(SERVED_SUFFIXES), f"{name} names /console/{found}, which is no kind of file served"
        assert (CONSOLE / found).is_file(), f"{name} names /console/{found}, which the console does not ship"
        record("console files", paths=1)


def test_the_app_loads_each_sections_view_by_a_name_it_ships() -> None:
    # Given the app's sections (a view is loaded with import(section.module))
    text = strip_comments((CONSOLE / "app.js").read_text(encoding="utf-8"))
    modules = re.findall(r"module:\s*(['\"])(\./view-[\w-]+\.js)\1", text)
    # Then there are views, and each is a file of the console
    assert len(modules) >= 5, modules
    for _, specifier in modules:
        assert (CONSOLE / specifier[2:]).is_file(), specifier


@pytest.mark.parametrize("name", [n for n in OWN_SCRIPTS if n != TEXT_MAKER])
def test_no_console_script_but_dom_js_creates_text(name: str) -> None:
    # Given a script of the console other than dom.js
    text = (CONSOLE / name).read_text(encoding="utf-8")
    # Then it creates no text itself: every string reaches the page through dom.js, which isolates its direction
    found = text_sinks_in(name, text)
    assert not found, f"{name} creates text without dom.js: {found} (use h(), append() or replace())"
    record("console files", files=1)


def test_dom_js_isolates_every_character_that_reorders_text() -> None:
    # Given dom.js's class of the characters for which a string is drawn in a <bdi> of its own
    text = (CONSOLE / TEXT_MAKER).read_text(encoding="utf-8")
    pattern = bidi_class_of(text)
    # Then it holds every code point whose bidi class can move the text around it, and no left-to-right letter
    missed, taken = [], []
    for point in range(0x110000):
        if 0xD800 <= point <= 0xDFFF:
            continue
        kind = unicodedata.bidirectional(chr(point))
        matched = pattern.match(chr(point)) is not None
        if kind in REORDERING and not matched:
            missed.append(f"U+{point:04X} {kind}")
        elif kind == "L" and matched:
            taken.append(f"U+{point:04X}")
    assert not missed, f"dom.js would draw these without isolating them: {missed[:20]}"
    assert not taken, f"dom.js takes left-to-right letters for reordering ones: {taken[:20]}"
    # and every string `append` draws goes through the isolating helper
    assert "parent.append(isolated(String(child)))" in text
    record("console files", files=1)


# -- the checks themselves: each finds what it is for --------------------------------------------------------------

BROKEN_SCRIPTS = {
    "innerHTML": "el.innerHTML = state.note;",
    "outerHTML": "node.outerHTML = `<b>${x}</b>`;",
    "insertAdjacentHTML": "root.insertAdjacentHTML('beforeend', text);",
    "document.write": "document.write(x)",
    "eval(": "const v = eval(text);",
    "new Function": "const f = new Function('a', body);",
    "setTimeout/setInterval with a string": "setTimeout('go()', 10); setInterval(\"x()\", 5);",
    "javascript: URL": "h('a', {href: 'javascript:alert(1)'})",
    "srcdoc": "frame.srcdoc = html;",
    "createContextualFragment": "range.createContextualFragment(text)",
    "DOMParser": "new DOMParser().parseFromString(t, 'text/html')",
    "inline handler or style attribute": "h('button', {onclick: 'go()'}); el.setAttribute('style', 'x');",
}


@pytest.mark.parametrize("sink", sorted(BROKEN_SCRIPTS))
def test_the_sink_check_finds_each_sink_in_code_and_not_in_a_comment(sink: str) -> None:
    # Given code that uses the sink, and the same code as a comment
    code = BROKEN_SCRIPTS[sink]
    # Then the check finds it in the code, not in the comment
    assert sink in sinks_in("x.js", f"const a = 1;\n{code}\n"), code
    assert sinks_in("x.js", f"// {code}\n/* {code} */\nconst b = '//';\n") == [], code
    record("console files", check_mutants=1)


def test_the_sink_check_keeps_strings_and_regular_expressions_intact() -> None:
    # A `//` inside a string or a regular expression starts no comment: the sink after it is still found
    assert sinks_in("x.js", "const u = 'a//b'; el.innerHTML = u;") == ["innerHTML"]
    assert sinks_in("x.js", "const r = /\\/\\//g; el.innerHTML = r;") == ["innerHTML"]
    assert sinks_in("x.js", "const t = `//`; el['innerHTML'] = t;") == ["innerHTML"]
    # and the console's legitimate code is not taken for a sink
    clean = (
        "h('button', {class: 'x', on: {click: go}}); el.addEventListener('x', f, {once: true}); setTimeout(run, 150);"
    )
    assert sinks_in("x.js", clean) == []


BROKEN_TEXT = {
    "createTextNode": "row.append(document.createTextNode(record.subject_id));",
    "text written into an element": "title.textContent = `History of ${subject}`; x.innerText += holder;",
    "a string given to a DOM method": "cell.append(`held by ${holder}`); p.replaceChildren('Subject ', id);",
}


@pytest.mark.parametrize("sink", sorted(BROKEN_TEXT))
def test_the_text_check_finds_text_made_outside_dom_js(sink: str) -> None:
    code = BROKEN_TEXT[sink]
    assert sink in text_sinks_in("x.js", f"const a = 1;\n{code}\n"), code
    assert text_sinks_in("x.js", f"// {code}\n") == [], code
    record("console files", check_mutants=1)


def test_the_text_check_lets_nodes_and_reads_through() -> None:
    clean = "list.append(branch(x)); results.prepend(errorNote(e)); if (a.textContent === b) go(); n = el.textContent;"
    assert text_sinks_in("x.js", clean) == []


def test_the_bidi_class_check_reads_the_class_as_written() -> None:
    pattern = bidi_class_of("const BIDI = /[\\u0590-\\u08ff\\u202e\\u{10800}-\\u{10fff}]/u;")
    for inside in ("\u05d0", "\u202e", "\U00010900"):
        assert pattern.match(inside), f"U+{ord(inside):04X}"
    for outside in ("a", "\u202d"):
        assert not pattern.match(outside), f"U+{ord(outside):04X}"
    record("console files", check_mutants=1)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("x.js", "fetch('https://cdn.example.com/x.js')"),
        ("x.js", "import {x} from 'https://esm.sh/lib';"),
        ("x.html", "<link rel=stylesheet href='//fonts.example.com/a.css'>"),
        ("x.css", "body { background: url(//example.com/a.png); }"),
        ("x.css", "@import 'https://example.com/a.css';"),
        ("x.html", '<img src="http://example.com/a.png">'),
    ],
)
def test_the_origin_check_finds_another_origin(name: str, text: str) -> None:
    assert other_origins_in(name, text), text
    record("console files", check_mutants=1)


def test_the_origin_check_accepts_namespaces_and_this_origins_paths() -> None:
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>'
    assert other_origins_in("x.svg", svg) == []
    assert other_origins_in("x.js", "get('/v1/whoami'); h('a', {href: '/console/'});") == []


@pytest.mark.parametrize(
    "page",
    [
        '<button onclick="go()">x</button>',
        '<div style="color:red">x</div>',
        "<script>alert(1)</script>",
        "<style>p { color: red }</style>",
        '<a href="javascript:go()">x</a>',
        '<script src="/console/app.js"></script>',
        "<body onload=go()>",
    ],
)
def test_the_markup_check_finds_anything_inline(page: str) -> None:
    assert inline_in_markup(f"<!doctype html><html><head></head>{page}</html>"), page
    record("console files", check_mutants=1)


@pytest.mark.parametrize(
    ("script", "found", "computed"),
    [
        ("import {a} from './a.js';", ["./a.js"], []),
        ('import {a,\n  b} from "./b.js"', ["./b.js"], []),
        ("import './side.js';", ["./side.js"], []),
        ("export {x} from './x.js';", ["./x.js"], []),
        ("const m = await import('./view-x.js');", ["./view-x.js"], []),
        ("const m = await import(found.module);", [], ["found.module"]),
        ("import {lib} from 'lib';", ["lib"], []),
        ("// import {a} from './gone.js';", [], []),
    ],
)
def test_the_import_check_reads_every_kind_of_import(script: str, found: list[str], computed: list[str]) -> None:
    assert imports_of(script) == (found, computed)
    record("console files", check_mutants=1)


# The console's one library: MessagePack's browser build, committed verbatim after a line with its licence's notice
# (`make console-vendor` takes it from the npm tarball whose integrity the Makefile pins).
VENDORED = CONSOLE / "msgpack-3.1.3.min.js"
VENDORED_SHA256 = "3e7ae27410846ac09f94674bd7b91133d6e59bd3c02508080c4139c1386b359b"
"""SHA-256 of `package/dist.umd/msgpack.min.js` in @msgpack/msgpack 3.1.3's tarball."""


def test_the_vendored_library_is_the_published_build_byte_for_byte_with_its_notice() -> None:
    import hashlib

    notice, _, published = VENDORED.read_bytes().partition(b"\n")
    assert notice.startswith(b"/*! @msgpack/msgpack 3.1.3 | ISC License | Copyright 2019 The MessagePack Community")
    assert hashlib.sha256(published).hexdigest() == VENDORED_SHA256
    assert "ISC" in (CONSOLE / "msgpack-3.1.3.LICENSE.txt").read_text(encoding="utf-8") or "Permission to use" in (
        CONSOLE / "msgpack-3.1.3.LICENSE.txt"
    ).read_text(encoding="utf-8")
    makefile = (CONSOLE.parents[2] / "Makefile").read_text(encoding="utf-8")
    assert "MSGPACK_VERSION := 3.1.3" in makefile
