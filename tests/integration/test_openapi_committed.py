"""The committed OpenAPI document is the generated one, and every route says who may call it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from baton.domain.access import SCOPES

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
SCOPE = "x-baton-scope"
PUBLIC = "x-baton-public"


def test_the_committed_openapi_document_equals_the_generated_one() -> None:
    # Given the document committed as docs/openapi.json
    from baton.api.openapi_export import render

    committed = COMMITTED.read_text(encoding="utf-8")
    # When the document is generated from the code
    generated = render()
    # Then they are identical, byte for byte
    assert committed == generated, "docs/openapi.json is stale: run `make openapi` and commit the result"


def test_the_committed_document_describes_every_route_except_its_own() -> None:
    # Given the committed document and the resolver's routes
    from baton.api.app import app

    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
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


def test_every_route_declares_a_known_scope_or_is_public() -> None:
    # Given every route of the resolver
    from baton.api.app import app

    routes = app._static_routes + app._dynamic_routes
    assert routes
    # When their OpenAPI extensions are read
    undeclared, both, unknown = [], [], []
    for route in routes:
        extensions = route.openapi_extensions or {}
        name = f"{route.method} {route.path}"
        is_public = extensions.get(PUBLIC) is True
        scope = extensions.get(SCOPE)
        if is_public and scope is not None:
            both.append(name)
        elif not is_public and scope is None:
            undeclared.append(name)
        elif scope is not None and scope not in SCOPES:
            unknown.append(f"{name}: {scope}")
    # Then each route is either public or needs exactly one scope of the contract's list
    assert not undeclared, f"routes with neither {SCOPE} nor {PUBLIC}: {undeclared}"
    assert not both, f"routes both public and scoped: {both}"
    assert not unknown, f"routes naming a scope the contract does not have: {unknown}"


def test_only_the_documented_public_routes_are_public() -> None:
    # Given every route of the resolver
    from baton.api.app import app

    routes = app._static_routes + app._dynamic_routes
    # When the public ones are collected
    public = {(r.method, r.path) for r in routes if (r.openapi_extensions or {}).get(PUBLIC)}
    # Then they are the ones the contract exempts from a key (health, the OpenAPI document, schemas)
    allowed = {("GET", "/v1/health"), ("GET", "/v1/openapi.json")}
    schemas = {(m, p) for m, p in public if m == "GET" and p.startswith("/v1/schemas/")}
    assert public - schemas == allowed
