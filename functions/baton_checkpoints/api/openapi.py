"""What the OpenAPI document says about responses, so every route documents the same envelope, and the finishing
touches that make the generated document say exactly what the API does."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache, partial
from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from msgspec import Struct

from baton_checkpoints.api.resolver import PUBLIC_EXTENSION, Documented
from baton_checkpoints.api.schemas import DataEnvelope, ErrorEnvelope, ListEnvelope
from baton_checkpoints.domain import limits

# The page cursor of every list route: checked by the store (bound to tenant and query), documented here.
CursorParameter = Annotated[
    str | None,
    Query(
        max_length=2048,
        description=(
            "Opaque: meta.next_cursor of the previous page of the same query, unchanged. It is bound to the tenant "
            "and the query; any other value answers 400 naming cursor."
        ),
    ),
]

_ERROR_TEXT = {
    400: "VALIDATION_ERROR: a field is missing, malformed, out of range or unknown",
    401: "UNAUTHENTICATED: no key, or an unknown, revoked, expired or not-yet-valid key",
    403: "FORBIDDEN: the key lacks the route's scope",
    404: "NOT_FOUND: missing, expired, or not visible to the caller",
    409: "REVISION_CONFLICT or CHECKPOINT_CLOSED",
    413: "PAYLOAD_TOO_LARGE: body or state over its limit",
    415: "UNSUPPORTED_MEDIA_TYPE: the body is not application/json",
    422: "IDEMPOTENCY_KEY_REUSED: the key was used before with a different request",
    429: "RATE_LIMITED: the tenant's requests for now are spent; nothing was done (Retry-After)",
    503: "UNAVAILABLE: a dependency is throttling or failing; nothing was written",
}

WRITE_403 = (
    "FORBIDDEN: the key lacks the route's scope; or QUOTA_EXCEEDED: the write would take the tenant past its "
    "storage_bytes or checkpoints quota (details.quota, details.limit, details.used); nothing was written"
)
"""The 403 of a route that stores bytes: its scope, or the tenant's quotas."""

_STRING = {"type": "string"}
ETAG_HEADER: dict[str, Any] = {
    "ETag": {
        "description": 'The weak entity tag of this revision: W/"<checkpoint_id>:<revision>".',
        "required": True,
        "schema": {"type": "string", "pattern": r'^W/"ckpt_[0-9a-f]{32}:[1-9][0-9]*"$'},
    }
}
REPLAYED_HEADER: dict[str, Any] = {
    "Idempotent-Replayed": {
        "description": "true when this is the stored answer of an earlier request with the same Idempotency-Key.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
# The request headers the checkpoint routes read, as patterns that accept exactly what the routes accept
# (tests/integration/test_openapi_committed.py checks them against the code). `parse_etag_list` splits a list at
# commas, strips each member as `str.strip()` does, skips empty members, and reads each other member as
# `"<anything but a comma>:<ASCII digits>"`, optionally after `W/`: so a list is tags separated by at least one
# comma, with whitespace and further commas anywhere around them.
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""The characters `str.strip()` removes (those of `str.isspace()`), for a character class."""
_ENTITY_TAG = r'(?:W/)?"[^,]*:[0-9]+"'
IF_MATCH_PATTERN = (
    rf"^(?:[{_SPACE}]*\*[{_SPACE}]*"
    rf"|[{_SPACE},]*{_ENTITY_TAG}(?:[{_SPACE}]*,[{_SPACE},]*{_ENTITY_TAG})*[{_SPACE},]*)$"
)
"""`*`, or one or more entity tags separated by commas: every other value is a 400."""

RATE_LIMIT_HEADER: dict[str, Any] = {
    "RateLimit": {
        "description": (
            "The caller's tenant's rate: \"tenant\";r=<requests left>;t=<seconds until the bucket is full, or, when "
            "r is 0, until the next request is allowed>. Left out when the rate limiter itself failed (503)."
        ),
        "required": False,
        "schema": {"type": "string", "pattern": '^"tenant";r=[0-9]+;t=[0-9]+$'},
    }
}
"""The `RateLimit` field every answer of an authenticated route carries once the caller is authenticated."""

_ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ['Bearer realm="baton"']}}},
    429: {
        "Retry-After": {
            "description": "Seconds until the tenant's next request is allowed.",
            "required": True,
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        },
        "RateLimit-Policy": {
            "description": 'The tenant\'s policy: "tenant";q=<requests_per_minute>;w=60.',
            "required": True,
            "schema": {"type": "string", "pattern": '^"tenant";q=[0-9]+;w=60$'},
        },
        "RateLimit": {
            "description": 'What is left: "tenant";r=0;t=<seconds>.',
            "required": True,
            "schema": {"type": "string", "pattern": '^"tenant";r=[0-9]+;t=[0-9]+$'},
        },
    },
    503: {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "required": True,
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
    },
}


def documented(
    success: dict[int, tuple[str, Any]],
    errors: tuple[int, ...],
    headers: dict[int, dict[str, Any]] | None = None,
    described: dict[int, str] | None = None,
) -> dict[int, OpenAPIResponse]:
    """`responses(...)` for a route's declaration: each status made when the OpenAPI document is (`Documented`: not
    by the router's import, nor analysed by the route's first request)."""

    @cache
    def made() -> dict[int, OpenAPIResponse]:
        return responses(success, errors, headers, described)

    lazy = {status: Documented(partial(_status_of, made, status)) for status in (*success, *errors)}
    return cast(dict[int, OpenAPIResponse], lazy)


def _status_of(made: Callable[[], dict[int, OpenAPIResponse]], status: int) -> OpenAPIResponse:
    return made()[status]


class Enveloped(Struct, frozen=True):
    """A success body of `responses`: Baton's envelope (`DataEnvelope`, `ListEnvelope`) of `model`, parametrized
    when the documentation is made (each `DataEnvelope[X]` is a model class made, the first one building the
    generic)."""

    envelope: Any
    model: Any

    def made(self) -> Any:
        """The envelope's model class."""
        return self.envelope[self.model]


def enveloped(model: Any) -> Enveloped:
    """The envelope `{data, meta}` of `model`, as a success body of `responses`."""
    return Enveloped(DataEnvelope, model)


def paged(model: Any) -> Enveloped:
    """The envelope of a page of `model`s, as a success body of `responses`."""
    return Enveloped(ListEnvelope, model)


def responses(
    success: dict[int, tuple[str, Any]],
    errors: tuple[int, ...],
    headers: dict[int, dict[str, Any]] | None = None,
    described: dict[int, str] | None = None,
) -> dict[int, OpenAPIResponse]:
    """Response documentation: the success bodies given (None: no body; `enveloped(X)`, `paged(X)`: Baton's envelopes),
    their `headers`, and the error envelope for each error status, described as `described` says when the route's
    cases are narrower than the code's."""
    documented: dict[int, dict[str, Any]] = {}
    for status, (description, body) in success.items():
        model = body.made() if isinstance(body, Enveloped) else body
        # An empty content map means "no body"; without one, powertools would describe the function's return type.
        content = {} if model is None else {"application/json": {"model": model}}
        documented[status] = {"description": description, "content": content}
    for status in errors:
        documented[status] = {
            "description": (described or {}).get(status, _ERROR_TEXT[status]),
            "content": {"application/json": {"model": ErrorEnvelope}},
        }
    for status, extra in {**_ERROR_HEADERS, **(headers or {})}.items():
        if status in documented:
            documented[status]["headers"] = extra
    if 401 in errors:
        # An authenticated route: every answer past authentication says what is left of the tenant's rate.
        for status, response in documented.items():
            if status not in (401, 429):
                response["headers"] = {**response.get("headers", {}), **RATE_LIMIT_HEADER}
    return cast(dict[int, OpenAPIResponse], documented)


AUTHENTICATED_ERRORS = (401, 403, 429, 503)

OAUTH_ERROR_REF = "#/components/schemas/OAuthError"
OAUTH_ERROR_SCHEMA: dict[str, Any] = {
    "title": "OAuthError",
    "description": "An OAuth error (RFC 6749 5.2, RFC 7591 3.2.2): its code, and a sentence naming the parameter and "
    "the rule.",
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "invalid_request, invalid_grant, invalid_redirect_uri, …"},
        "error_description": {"type": "string"},
    },
    "required": ["error", "error_description"],
}

# Canonical JSON (RFC 8785) carries an integer exactly only within ±(2^53-1), and every double beyond that range is
# an integer: so "every number within ±(2^53-1)" is the one rule JSON Schema can state (it cannot tell `1e300` from
# an integer literal).
_SAFE_NUMBER = {"type": "number", "minimum": -limits.MAX_SAFE_INTEGER, "maximum": limits.MAX_SAFE_INTEGER}
_JSON_VALUE_REF = {"$ref": "#/components/schemas/JsonValue"}
_NOT_NULL = [
    {"type": "boolean"},
    _STRING,
    _SAFE_NUMBER,
    {"type": "array", "items": _JSON_VALUE_REF},
    {"type": "object", "additionalProperties": _JSON_VALUE_REF},
]
STATE_SCHEMAS: dict[str, Any] = {
    "JsonValue": {
        "title": "JsonValue",
        "description": "Any JSON value whose numbers lie within ±(2^53-1), which canonical JSON (RFC 8785) carries.",
        "anyOf": [{"type": "null"}, *_NOT_NULL],
    },
    "State": {
        "title": "State",
        "description": (
            "Any JSON value except null, numbers within ±(2^53-1) (RFC 8785 canonical JSON), nested at most "
            f"{limits.MAX_JSON_DEPTH - 1} levels below the body, and at most {limits.MAX_STATE_BYTES:,} bytes "
            "of canonical JSON (413 beyond)."
        ),
        "anyOf": _NOT_NULL,
    },
}
"""`state` in JSON Schema. Pydantic cannot state it (a recursive schema of an `Any` field), so it is added here."""

_STATE_FIELDS = (("SaveCheckpointRequest", "state"), ("CheckpointRecord", "state"))
_POWERTOOLS_ONLY = ("HTTPValidationError", "ResponseValidationError", "ValidationError")
"""Schemas powertools adds for its own 422 answers; Baton answers validation errors with 400 VALIDATION_ERROR."""


def _header_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of an optional header parameter without powertools' `null` branch, title or description (the
    parameter carries the description): a header is absent or a string, and a bare `{"type": "string"}` is what
    schemathesis recognises as a plain header, so it sends If-None-Match values shaped like entity tags."""
    rest = {key: value for key, value in schema.items() if key not in ("anyOf", "title", "description")}
    strings = [branch for branch in schema.get("anyOf", []) if branch != {"type": "null"}]
    if len(strings) == 1:
        return {**strings[0], **rest}
    return rest


def _state_of_a_format(schemas: dict[str, Any]) -> None:
    """A save whose `format` is `opencheckpoint/0.1` carries an OpenCheckpoint 0.1 document as its state: stated as
    an if/then on the save's schema, with the format's schema (served at /v1/schemas/) embedded as a component."""
    from baton_checkpoints.domain import opencheckpoint  # the document's generator only: never on a request's path

    save = schemas.get("SaveCheckpointRequest")
    if save is None:
        return
    schemas[_OPENCHECKPOINT_COMPONENT] = opencheckpoint.embeddable_schema()
    save["if"] = {"properties": {"format": {"const": opencheckpoint.FORMAT}}, "required": ["format"]}
    save["then"] = {"properties": {"state": {"$ref": f"#/components/schemas/{_OPENCHECKPOINT_COMPONENT}"}}}


_OPENCHECKPOINT_COMPONENT = "OpenCheckpoint01"


SERVERS: tuple[dict[str, Any], ...] = (
    {"url": "/", "description": "The origin this document was read from (every Baton serves it at /v1/openapi.json)"},
    {"url": "http://127.0.0.1:8787", "description": "make serve (baton serve) on this machine"},
    {
        "url": "https://{api_id}.execute-api.{region}.amazonaws.com",
        "description": "A deployed stack: its ApiUrl output",
        "variables": {
            "api_id": {"default": "abcdef1234", "description": "The HTTP API's id"},
            "region": {"default": "us-east-1", "description": "The stack's region"},
        },
    },
)
"""Where the API is served: the first, relative, is where a client read the document from."""


def finish(document: dict[str, Any]) -> dict[str, Any]:
    """The generated document, corrected where powertools cannot say what the API does:

    - no 422 "Validation Error" answers (validation errors are 400 `VALIDATION_ERROR`), nor their schemas;
    - responses without a body have no content;
    - public routes need no key (`security: []` overrides the document's global bearer requirement);
    - a header parameter is a string (or absent), never null, and is named as the contract writes it;
    - `state` is any JSON value but null, with integers canonical JSON carries, and an OpenCheckpoint 0.1 document
      when the save's `format` says so;
    - the servers are named: the origin the document was read from, `make serve`'s, and a deployed stack's;
    - the paths are in the order of their names, whatever order the routers were included in (some are included by
      their first request: `BatonResolver.include_router_when_asked`).
    """
    document["servers"] = [dict(server) for server in SERVERS]
    document["paths"] = dict(sorted(document.get("paths", {}).items()))
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            answers = operation.get("responses", {})
            powertools_422 = answers.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if powertools_422.get("$ref", "").endswith("/HTTPValidationError"):
                del answers["422"]
            for answer in answers.values():
                if answer.get("content") == {}:
                    del answer["content"]
            if operation.get(PUBLIC_EXTENSION):
                operation["security"] = []
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "header":
                    # powertools lower-cases header names (HTTP compares them case-insensitively); say them as
                    # the contract writes them
                    parameter["name"] = "-".join(word.capitalize() for word in parameter["name"].split("-"))
                    parameter["schema"] = _header_schema(parameter["schema"])
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(STATE_SCHEMAS)
    if f'"{OAUTH_ERROR_REF}"' in json.dumps(document):
        schemas["OAuthError"] = OAUTH_ERROR_SCHEMA
    for model, field in _STATE_FIELDS:
        properties = schemas.get(model, {}).get("properties", {})
        if field in properties:
            described = {k: v for k, v in properties[field].items() if k in ("description", "title")}
            properties[field] = {**described, "$ref": "#/components/schemas/State"}
    _state_of_a_format(schemas)
    for name in _POWERTOOLS_ONLY:  # in this order: the first two refer to the last
        if f'"#/components/schemas/{name}"' not in json.dumps(document):
            schemas.pop(name, None)
    return document
