"""The committed OpenAPI document is the generated one, every route says who may call it, and the document states
the rules Baton applies."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from baton_checkpoints.domain.access import SCOPES
from tests.proof_counts import record
from tests.unit.hypothesis_profiles import examples

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
SCOPE = "x-baton-scope"
PUBLIC = "x-baton-public"
ANY_SCOPE = "x-baton-any-scope"
"""A route any valid key may call, whatever its scopes (GET /v1/whoami): it needs a key, so it is not public."""


def test_the_committed_openapi_document_equals_the_generated_one() -> None:
    # Given the document committed as docs/openapi.json
    from baton_checkpoints.api.openapi_export import render

    committed = COMMITTED.read_text(encoding="utf-8")
    # When the document is generated from the code
    generated = render()
    # Then they are identical, byte for byte
    assert committed == generated, "docs/openapi.json is stale: run `make openapi` and commit the result"


def test_the_committed_document_describes_every_route_except_its_own() -> None:
    # Given the committed document and the resolver's routes
    from baton_checkpoints.api.app import app

    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    app.include_deferred_routers()  # (every route, the thread routes included whatever ran before)
    routes = app._static_routes + app._dynamic_routes
    # When each route's path and method are looked up in the document
    missing = []
    for route in routes:
        path = re.sub(r"<(\w+)>", r"{\1}", route.path)
        if path == "/v1/openapi.json":
            continue  # the document does not describe itself
        if route.method.lower() not in document["paths"].get(path, {}):
            missing.append(f"{route.method} {path}")
    # Then every route is described
    assert not missing, f"routes missing from docs/openapi.json: {missing}; run `make openapi`"


def undeclared_routes(routes: list[Any]) -> dict[str, list[str]]:
    """The routes that do not say who may call them, by what is wrong: `undeclared` (neither public, nor a scope,
    nor any valid key), `ambiguous` (more than one of those), `unknown` (a scope the contract does not have),
    `malformed` (a marker that is not `true`)."""
    found: dict[str, list[str]] = {"undeclared": [], "ambiguous": [], "unknown": [], "malformed": []}
    for route in routes:
        extensions = route.openapi_extensions or {}
        name = f"{route.method} {route.path}"
        is_public = extensions.get(PUBLIC) is True
        any_scope = extensions.get(ANY_SCOPE) is True
        scope = extensions.get(SCOPE)
        if any(marker in extensions and extensions[marker] is not True for marker in (PUBLIC, ANY_SCOPE)):
            found["malformed"].append(name)
        declared = [is_public, any_scope, scope is not None]
        if sum(declared) == 0:
            found["undeclared"].append(name)
        elif sum(declared) > 1:
            found["ambiguous"].append(name)
        elif scope is not None and scope not in SCOPES:
            found["unknown"].append(f"{name}: {scope}")
    return found


def test_every_route_declares_a_known_scope_or_is_public() -> None:
    # Given every route of the resolver
    from baton_checkpoints.api.app import app

    app.include_deferred_routers()  # (every route, the thread routes included whatever ran before)
    routes = app._static_routes + app._dynamic_routes
    assert routes
    # When their OpenAPI extensions are read
    found = undeclared_routes(routes)
    # Then each route is public, or needs any valid key (whoami), or needs exactly one scope of the contract's list
    assert not found["undeclared"], f"routes with none of {SCOPE}, {PUBLIC}, {ANY_SCOPE}: {found['undeclared']}"
    assert not found["ambiguous"], f"routes declaring more than one of them: {found['ambiguous']}"
    assert not found["unknown"], f"routes naming a scope the contract does not have: {found['unknown']}"
    assert not found["malformed"], f"routes whose {PUBLIC} or {ANY_SCOPE} is not true: {found['malformed']}"
    # and the one route any key may call is the caller's own identity
    assert [f"{r.method} {r.path}" for r in routes if (r.openapi_extensions or {}).get(ANY_SCOPE)] == ["GET /v1/whoami"]


def test_the_declaration_check_fails_for_a_route_that_declares_nothing() -> None:
    # Given routes like the resolver's, one of them declaring nothing, or two things, or a false marker
    from types import SimpleNamespace

    def route(path: str, **extensions: Any) -> Any:
        return SimpleNamespace(method="GET", path=path, openapi_extensions=extensions)

    routes = [
        route("/v1/health", **{PUBLIC: True}),
        route("/v1/whoami", **{ANY_SCOPE: True}),
        route("/v1/keys", **{SCOPE: "keys:manage"}),
        route("/v1/new"),
        route("/v1/both", **{PUBLIC: True, ANY_SCOPE: True}),
        route("/v1/odd", **{SCOPE: "console:read"}),
        route("/v1/false", **{ANY_SCOPE: False}),
    ]
    # When the check reads them
    found = undeclared_routes(routes)
    # Then it names each offender, and only them
    assert found == {
        "undeclared": ["GET /v1/new", "GET /v1/false"],
        "ambiguous": ["GET /v1/both"],
        "unknown": ["GET /v1/odd: console:read"],
        "malformed": ["GET /v1/false"],
    }
    record("openapi route declarations", mutants=4)


CONSOLE_ROUTES = {("GET", "/console"), ("GET", "/console/"), ("GET", "/console/<asset>"), ("GET", "/")}
"""The console's page, its redirects (from a trailing slash, and from the API's address), and its files
(docs/console.md): they hold no data, the page signs in with a key itself."""
OAUTH_ROUTES = {
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-authorization-server"),
    ("POST", "/oauth/register"),
    ("GET", "/oauth/authorize"),
    ("POST", "/oauth/authorize"),
    ("POST", "/oauth/token"),
    ("POST", "/oauth/revoke"),
}
"""OAuth's discovery documents and endpoints (docs/oauth.md): a client reaches them before it holds any credential;
the consent form carries a key itself, and the token endpoint a code or refresh token."""


def test_only_the_documented_public_routes_are_public() -> None:
    # Given every route of the resolver
    from baton_checkpoints.api.app import app

    app.include_deferred_routers()  # (every route, the thread routes included whatever ran before)
    routes = app._static_routes + app._dynamic_routes
    # When the public ones are collected
    public = {(r.method, r.path) for r in routes if (r.openapi_extensions or {}).get(PUBLIC)}
    # Then they are the ones the contract exempts from a key (health, the OpenAPI document, schemas) and the
    # console's page and files
    allowed = {("GET", "/v1/health"), ("GET", "/v1/openapi.json"), *CONSOLE_ROUTES, *OAUTH_ROUTES}
    schemas = {(m, p) for m, p in public if m == "GET" and p.startswith("/v1/schemas/")}
    assert public - schemas == allowed
    # and whoami is not among them: it answers only a valid key
    assert ("GET", "/v1/whoami") not in public


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in document["paths"].items() for method, op in ops.items()]


def test_public_routes_need_no_key_and_every_other_route_needs_the_bearer_key() -> None:
    # Given the committed document, whose global security is the bearer key
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert document["security"] == [{"bearer": []}]
    # When each operation's own security is read
    for path, method, operation in _operations(document):
        # Then public operations override it with "no key", and no other operation overrides it
        if operation.get(PUBLIC):
            assert operation.get("security") == [], f"{method} {path}"
            # a public route never refuses for want of a key, but the consent form judges the key it carries
            refusals = {"401", "403"} & set(operation["responses"])
            assert not refusals or (method.upper(), path) == ("POST", "/oauth/authorize"), f"{method} {path}"
        elif operation.get(ANY_SCOPE):
            # any valid key: refused without one (401), never for a missing scope (403)
            assert "security" not in operation, f"{method} {path}"
            assert "401" in operation["responses"], f"{method} {path}"
            assert "403" not in operation["responses"], f"{method} {path}"
        else:
            assert "security" not in operation, f"{method} {path}"
            assert {"401", "403"} <= set(operation["responses"]), f"{method} {path}"


def test_no_operation_documents_an_answer_baton_never_gives() -> None:
    # Given the committed document
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    text = json.dumps(document)
    # Then it has no trace of powertools' own 422 validation answer (Baton answers 400 VALIDATION_ERROR)
    assert "HTTPValidationError" not in text
    assert 'ValidationError"' not in text.replace("RequestValidationError", "")
    for path, method, operation in _operations(document):
        for status, answer in operation["responses"].items():
            # and a 304 carries no body, every error is the envelope
            if status == "304":
                assert "content" not in answer, f"{method} {path}"
            elif (path, method, status) in JSON_RPC_ERRORS:
                # MCP answers a message it cannot take as JSON-RPC with a JSON-RPC error, as its clients read it
                assert "JsonRpcError" in json.dumps(answer), f"{method} {path} {status}"
            elif path.startswith("/oauth/") and "text/html" in answer.get("content", {}):
                # the consent page's refusals are the page again, for the person in front of it; a 400 may also be
                # the gate's envelope (a query whose encoding is broken, a form too large)
                assert set(answer["content"]) <= {"text/html", "application/json"}, f"{method} {path} {status}"
                envelope = answer["content"].get("application/json", {}).get("schema")
                assert envelope in (None, {"$ref": "#/components/schemas/ErrorEnvelope"}), f"{method} {path} {status}"
            elif path.startswith("/oauth/") and status == "400":
                # OAuth's own error object (RFC 6749 5.2), or the envelope for what the gate refuses first
                schema = answer["content"]["application/json"]["schema"]
                assert {"$ref": "#/components/schemas/OAuthError"} in schema["anyOf"], f"{method} {path} {status}"
                assert {"$ref": "#/components/schemas/ErrorEnvelope"} in schema["anyOf"], f"{method} {path} {status}"
            elif status.startswith(("4", "5")):
                schema = answer["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, f"{method} {path} {status}"


JSON_RPC_ERRORS = {("/mcp", "post", "400"), ("/mcp", "post", "404"), ("/mcp", "post", "406")}
"""The answers of `POST /mcp` that are JSON-RPC errors rather than the contract's envelope: a body that is not one
JSON-RPC message (400, which may also be the envelope for a body that is not UTF-8) and an Accept without JSON."""


_TWO_DIGITS = st.integers(0, 99).map(lambda n: f"{n:02d}")


@st.composite
def near_rfc3339(draw: st.DrawFn) -> str:
    """Strings shaped like RFC 3339 times: a valid one, with one part at a time likely out of range or malformed."""
    parts = {
        "year": f"{draw(st.integers(0, 9999)):04d}",
        "month": f"{draw(st.integers(1, 12)):02d}",
        "day": f"{draw(st.integers(1, 28)):02d}",
        "separator": draw(st.sampled_from(["T", "t", " "])),
        "hour": f"{draw(st.integers(0, 23)):02d}",
        "minute": f"{draw(st.integers(0, 59)):02d}",
        "second": f"{draw(st.integers(0, 59)):02d}",
        "fraction": draw(st.sampled_from(["", ".5", ".123", ".123456789"])),
        "zone": draw(st.sampled_from(["Z", "z", "+00:00", "-00:00", "+05:30", "-23:59"])),
    }
    broken = {
        "year": st.sampled_from(["0000", "1900", "2000", "2024", "2023", "9999", "10000", "999", "٢٠٢٦"]),
        "month": _TWO_DIGITS | st.just("1"),
        "day": _TWO_DIGITS,
        "separator": st.sampled_from(["_", "", "TT"]),
        "hour": _TWO_DIGITS,
        "minute": _TWO_DIGITS,
        "second": _TWO_DIGITS,
        "fraction": st.sampled_from([".", ".1234567890", ",5"]),
        "zone": st.sampled_from(["", "UTC", "+24:00", "+0000", "+1:00"])
        | st.builds(lambda sign, h, m: f"{sign}{h}:{m}", st.sampled_from("+-"), _TWO_DIGITS, _TWO_DIGITS),
    }
    for part in draw(st.lists(st.sampled_from(sorted(broken)), max_size=2, unique=True)):
        parts[part] = draw(broken[part])
    p = parts
    return (
        f"{p['year']}-{p['month']}-{p['day']}{p['separator']}{p['hour']}:{p['minute']}:{p['second']}"
        f"{p['fraction']}{p['zone']}"
    )


def _at_the_calendar_edges(text: str) -> bool:
    """0001-01-01 with a positive offset or 9999-12-31 with a negative one: whether it lies within years 0001-9999
    in UTC depends on the time of day, which the pattern does not compare (its description says so)."""
    return (text.startswith("0001-01-01") and "+" in text[10:]) or (text.startswith("9999-12-31") and "-" in text[10:])


@settings(max_examples=examples(2000), derandomize=True, database=None, deadline=None)
@given(near_rfc3339())
@example("2026-07-30T11:48:04.652Z")
@example("2000-02-29T00:00:00Z")  # a leap day (divisible by 400)
@example("1900-02-29T00:00:00Z")  # not one (divisible by 100)
@example("2026-07-30T23:59:60Z")  # a leap second: Python's datetime has none
@example("2026-07-30T11:48:04+23:59")
@example("2026-07-30T11:48:04+00:60")  # RFC 3339's time-minute is 00-59, in offsets too
def test_the_documented_time_pattern_accepts_exactly_the_times_baton_accepts(text: str) -> None:
    # Given a string shaped like an RFC 3339 time
    assume(not _at_the_calendar_edges(text))
    from baton_checkpoints.domain.clock import parse_time
    from baton_checkpoints.domain.models import RFC3339_PATTERN

    # When the document's pattern and Baton's parser each judge it
    try:
        parse_time(text)
        accepted = True
    except ValueError:
        accepted = False
    # Then they agree
    assert bool(re.match(RFC3339_PATTERN, text)) == accepted, text


# Request headers: declared where the routes read them, with patterns that accept exactly what the routes accept.

_HEADERS = {
    ("/v1/checkpoints", "get"): ("If-None-Match",),
    ("/v1/checkpoints/{checkpoint_id}", "get"): ("If-None-Match",),
    ("/v1/checkpoints/{checkpoint_id}", "delete"): ("If-Match", "Lease-Token"),
    ("/v1/checkpoints", "post"): ("Idempotency-Key",),
    ("/v1/blobs", "post"): ("Idempotency-Key",),
    ("/v1/checkpoints/{checkpoint_id}/restore", "post"): ("Idempotency-Key",),
    ("/v1/checkpoints/{checkpoint_id}/lease", "post"): ("Idempotency-Key",),
    ("/v1/checkpoints/{checkpoint_id}/lease", "delete"): ("Lease-Token",),
    ("/console", "get"): ("If-None-Match",),
    ("/console/{asset}", "get"): ("If-None-Match",),
}


_REQUIRED_HEADERS = {("/v1/checkpoints/{checkpoint_id}/lease", "delete", "Lease-Token")}
"""The one header a route cannot do without: a release names the lease it ends."""


def _header_schema(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    parameters = document["paths"][path][method].get("parameters", [])
    found = [p for p in parameters if p["in"] == "header" and p["name"].lower() == name.lower()]
    assert len(found) == 1, f"{method} {path} declares {name} {len(found)} times"
    assert found[0]["name"] == name, "header names are written as the contract writes them"
    assert found[0]["required"] is ((path, method, name) in _REQUIRED_HEADERS)
    assert found[0]["description"]
    schema: dict[str, Any] = found[0]["schema"]
    return schema


def _ecma(pattern: str) -> re.Pattern[str]:
    """A JSON Schema pattern as ECMA-262 reads it: `$` is the very end (Python's `$` also matches before a final
    newline)."""
    assert pattern.startswith("^"), pattern
    assert pattern.endswith("$"), pattern
    assert not pattern.endswith(r"\$"), pattern
    return re.compile(rf"\A(?:{pattern[1:-1]})\Z")


@cache
def _documented_pattern(name: str) -> re.Pattern[str]:
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    (path, method), _ = next(item for item in _HEADERS.items() if name in item[1])
    return _ecma(_header_schema(document, path, method, name)["pattern"])


def test_the_conditional_and_idempotency_headers_are_declared_where_they_are_read() -> None:
    # Given the committed document
    from baton_checkpoints.api.openapi import IF_MATCH_PATTERN
    from baton_checkpoints.api.operations.inputs import IDEMPOTENCY_KEY_PATTERN

    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    # Then If-None-Match is any string (a value that is not a current tag simply does not match), and If-Match and
    # Idempotency-Key carry the patterns of what the routes accept
    expected = {
        "If-None-Match": {"type": "string"},
        "If-Match": {"type": "string", "pattern": IF_MATCH_PATTERN},
        "Idempotency-Key": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
        # A delete's optional Lease-Token holds a token when sent (an empty one is a 400, not "no token")
        "Lease-Token": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"},
    }
    required_token = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"}
    for (path, method), names in _HEADERS.items():
        for name in names:
            wanted = required_token if (path, method, name) in _REQUIRED_HEADERS else expected[name]
            assert _header_schema(document, path, method, name) == wanted, f"{method} {path} {name}"
    # and no other operation declares them
    for path, method, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "header":
                assert parameter["name"] in _HEADERS.get((path, method), ()), f"{method} {path} {parameter['name']}"
    # and the answers they lead to are documented: 304 without a body but with the tag, 409 for a stale If-Match,
    # 422 for a reused key, and Idempotent-Replayed on a replay's status
    for path in ("/v1/checkpoints", "/v1/checkpoints/{checkpoint_id}"):
        not_modified = document["paths"][path]["get"]["responses"]["304"]
        assert "content" not in not_modified
        assert not_modified["headers"]["ETag"]["required"] is True
    stale = document["paths"]["/v1/checkpoints/{checkpoint_id}"]["delete"]["responses"]["409"]
    assert "If-Match" in stale["description"]
    save = document["paths"]["/v1/checkpoints"]["post"]["responses"]
    assert save["422"]["description"].startswith("IDEMPOTENCY_KEY_REUSED")
    for status in ("200", "201"):
        assert save[status]["headers"]["Idempotent-Replayed"]["schema"] == {"type": "string", "enum": ["true"]}
    declare = document["paths"]["/v1/blobs"]["post"]["responses"]
    assert declare["422"]["description"].startswith("IDEMPOTENCY_KEY_REUSED")
    assert declare["201"]["headers"]["Idempotent-Replayed"]["schema"] == {"type": "string", "enum": ["true"]}


_SPACES = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
_NEAR_SPACES = "\x00\x1b\x7f\u180e\u200b\u2060\ufeff"
"""Characters that look like whitespace but that `str.strip()` keeps."""
_CHECKPOINT = "ckpt_" + "0" * 32
_HEADER_PIECES = st.sampled_from(
    ["W/", '"', ":", ",", ", ", "*", "0", "7", "12", "9" * 17, "ckpt_", "a", "W", "/", "\\", "é", _CHECKPOINT]
)


@st.composite
def near_entity_tag_lists(draw: st.DrawFn) -> str:
    """Strings shaped like If-Match values: entity tags, `*`, commas and whitespace, in likely and unlikely orders."""
    pieces = st.one_of(
        _HEADER_PIECES,
        st.sampled_from(list(_SPACES + _NEAR_SPACES)),
        st.builds(
            lambda tag, revision: f'"{tag}:{revision}"',
            st.sampled_from(["", _CHECKPOINT, "x", 'a"b', "a:b", " "]),
            st.sampled_from(["", "0", "1", "42", "007", "1a", "٣", "9" * 16, "9" * 17]),  # ٣: a digit, not ASCII
        ),
        st.characters(),
    )
    return "".join(draw(st.lists(pieces, max_size=12)))


def _if_match_accepted(value: str) -> bool:
    """Whether DELETE's If-Match handling takes `value` (anything else is a 400 naming /If-Match)."""
    from baton_checkpoints.api.routers.checkpoints import _if_match_revisions
    from baton_checkpoints.domain.errors import ValidationFailed

    try:
        _if_match_revisions(value, _CHECKPOINT)
    except ValidationFailed:
        return False
    return True


def test_the_documented_if_match_pattern_skips_exactly_the_whitespace_baton_strips() -> None:
    # Given every character str.strip() removes, and characters that look like whitespace but are kept
    pattern = _documented_pattern("If-Match")
    for character in _SPACES + _NEAR_SPACES:
        # When each stands around `*`, around a tag, and as a list's empty member
        for value in (f"{character}*{character}", f'{character}W/"a:1"{character}', f'W/"a:1",{character},"b:2"'):
            # Then the pattern and the route agree on it
            assert bool(pattern.match(value)) == _if_match_accepted(value), repr(value)


@settings(max_examples=examples(2000), derandomize=True, database=None, deadline=None)
@given(near_entity_tag_lists() | st.text())
@example("*")
@example(" * ")
@example("*,")
@example("")
@example(",")
@example('W/"ckpt_00000000000000000000000000000000:1"')
@example('"ckpt_00000000000000000000000000000000:1", , W/"x:9007199254740992",')
@example('W/"a:1"x')
@example('W/"a:"')
@example('W/ "a:1"')
@example('W/W/"a:1"')
@example('"":1"')
@example('"a:1" "b:2"')  # one member: its text between the outer quotes is `a:1" "b`, revision 2
@example('":1"\n')
@example("\u3000*\x1c")
@example('\ufeffW/"a:1"')
def test_the_documented_if_match_pattern_accepts_exactly_what_delete_accepts(value: str) -> None:
    # Given a string shaped like an If-Match value
    # When the document's pattern and the route's parser each judge it
    record("openapi header patterns", if_match=1)
    documented = bool(_documented_pattern("If-Match").match(value))
    # Then they agree (a list naming more than 50 revisions of the checkpoint is also a 400: no pattern can count
    # distinct revisions of the path's checkpoint; these lists name at most 12)
    assert documented == _if_match_accepted(value), repr(value)


def principal() -> Any:
    """A caller for the header check (only its agent is read)."""
    from baton_checkpoints.domain.access import Principal

    return Principal(tenant_id="t1", agent_id="a1", key_id="key_" + "a" * 32, scopes=frozenset({"*"}))


@settings(max_examples=examples(2000), derandomize=True, database=None, deadline=None)
@given(
    st.text(st.characters(max_codepoint=0x7F), max_size=12)
    | st.text(max_size=12)
    | st.builds(
        lambda n, extra: "k" * n + extra,
        st.integers(190, 205),
        st.sampled_from(["", "\n", "\x7f", "\t", " ", "é", "~"]),
    )
)
@example("")
@example(" ")
@example("~")
@example("\x1f")
@example("a\n")
@example("k" * 200)
@example("k" * 201)
def test_the_documented_idempotency_key_pattern_accepts_exactly_what_save_accepts(value: str) -> None:
    # Given a string that may or may not be an Idempotency-Key
    from baton_checkpoints.api.idempotency import idempotency_claim
    from baton_checkpoints.api.resolver import Call
    from baton_checkpoints.domain.errors import ValidationFailed
    from tests.builders import NOW_MS

    # When the document's pattern and the routes' check (`idempotency_claim`, which every route that honours the
    # header calls) each judge it
    record("openapi header patterns", idempotency_key=1)
    documented = bool(_documented_pattern("Idempotency-Key").match(value))
    call = Call(request_id="r", principal=principal(), body={}, now_ms=NOW_MS)
    try:
        accepted = idempotency_claim(call, "POST", "/v1/checkpoints", value) is not None
    except ValidationFailed:
        accepted = False
    # Then they agree, and both say what the contract says: 1 to 200 printable ASCII characters
    assert documented == accepted, repr(value)
    assert accepted == (1 <= len(value) <= 200 and all(" " <= c <= "~" for c in value)), repr(value)
