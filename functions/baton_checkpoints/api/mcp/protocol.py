"""The JSON-RPC side of `POST /mcp`, on the protocol's published models (`mcp_types`): stateless, one message per
request, answered with `application/json` (never a stream, never a session).

- a request gets its response with HTTP 200, a JSON-RPC error included (unknown method -32601, wrong params
  -32602); a notification (any method) is accepted with 202 and no body;
- a body that is not JSON is -32700, and one that is no single JSON-RPC request or notification -32600, both with
  HTTP 400 and `id: null` (the streamable HTTP transport's answer to input it cannot accept);
- an `Accept` header that allows no `application/json` is 406, an `MCP-Protocol-Version` header naming a version
  this server does not speak 400, both with a JSON-RPC error too, so an MCP client shows them as errors;
- dual-era, as the official SDK serves it: a request whose `MCP-Protocol-Version` header is absent or a 2025
  revision takes the handshake path (`initialize`, `ping`, `tools/list`, `tools/call`); any other header value takes
  the 2026-07-28 path, where each request carries its own envelope (`params._meta`: protocol version and client
  capabilities), the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers must match the body (-32020), a
  version this server does not speak is -32022 naming those it does, `server/discover` says what the server is,
  results carry `resultType` (and lists `ttlMs` and `cacheScope`), and an error's HTTP status follows the code (400;
  404 for an unknown method).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as mcp
from msgspec import Struct
from msgspec.structs import replace
from pydantic import BaseModel
from pydantic import ValidationError as ModelError

from baton_checkpoints import __version__
from baton_checkpoints.api.encoding import LAMBDA_RESPONSE_LIMIT_BYTES, answer_bytes, fits_lambda, log_oversized
from baton_checkpoints.api.errors import INTERNAL_MESSAGE, error_fields, error_object
from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.mcp.tools import ToolSpec, catalogue
from baton_checkpoints.api.operations import Context
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.canonical import parse_document
from baton_checkpoints.domain.errors import BatonError, ResponseTooLarge, ValidationFailed, clip

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The handshake-era versions this server speaks, newest first; `initialize` answers the client's when it is one."""
MODERN_VERSIONS = ("2026-07-28",)
"""The per-request-envelope versions this server speaks (`server/discover` lists them)."""
LIST_TTL_MS = 3_600_000
"""How long a client may keep the tool list and the discovery result: they change only with a deployment."""
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
MODERN_STATUS = {
    mcp.PARSE_ERROR: 400,
    mcp.INVALID_REQUEST: 400,
    mcp.INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    mcp.METHOD_NOT_FOUND: 404,
}
"""The HTTP status of a JSON-RPC error on the 2026-07-28 path (the transport's table); others answer 200."""
NAMED_BY = {"tools/call": "name"}
"""The methods whose `Mcp-Name` header mirrors a body parameter (prompts and resources: Baton serves none)."""
SERVER_NAME = "baton"
MCP_ROUTE = "/mcp"
INSTRUCTIONS = (
    "Baton keeps checkpoints of unfinished work: save where a task got to (baton_checkpoint_save), and pick it up "
    "again later or elsewhere (baton_resume, baton_checkpoint_get). Lease a checkpoint while you work on it so that "
    "no one else writes it."
)
ENVELOPE_FIELDS = frozenset({"jsonrpc", "id", "method", "params"})
MAX_ID_CHARS = 200
"""Longest string id accepted: every answer echoes the id, and an answer must not grow with a hostile request (an id
of 3 MB beside a 3 MB checkpoint would not fit Lambda's answer). Integers are bounded by the contract's JSON rules."""


class Answer(Struct, frozen=True):
    """The HTTP answer: a status and a JSON-RPC message (None: no body)."""

    status: int
    message: dict[str, Any] | None


class Refused(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, status: int = 200, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.data = data


def answer(body: str | bytes, headers: Mapping[str, str], context: Context) -> Answer:
    """The answer to one POST of a JSON-RPC message (`headers` with lower-case names)."""
    request_id: str | int | None = None
    result: BaseModel
    modern = False
    try:
        if not accepts_json(headers.get("accept")):
            raise Refused(mcp.INVALID_REQUEST, "Not Acceptable: the Accept header must allow application/json.", 406)
        message, plain = _message(body)
        method: str = message["method"]
        if "id" not in message:
            return Answer(202, None)  # a notification: accepted, nothing to answer
        request_id = message["id"]
        header = headers.get("mcp-protocol-version")
        if header is None or header in PROTOCOL_VERSIONS:
            result = _respond(method, message.get("params") or {}, context, plain)
        else:
            modern = True
            _check_envelope(message, headers)
            result = _respond_modern(method, message.get("params") or {}, context, plain)
    except Refused as refused:
        status = MODERN_STATUS.get(refused.code, refused.status) if modern else refused.status
        error = mcp.ErrorData(code=refused.code, message=refused.message, data=refused.data)
        reply = mcp.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        return Answer(status, _dump(reply))
    except ArgumentsRefused as refused:
        result = _failed(refused.failed)
        return Answer(200, _dump(mcp.JSONRPCResponse(jsonrpc="2.0", id=refused.request_id, result=_dump(result))))
    answered_id: str | int = message["id"]
    return Answer(200, _dump(mcp.JSONRPCResponse(jsonrpc="2.0", id=answered_id, result=_dump(result))))


def accepts_json(accept: str | None) -> bool:
    """True when an `Accept` header allows `application/json` (absent, `*/*`, `application/*`, not with q=0)."""
    if accept is None or not accept.strip():
        return True
    for entry in accept.split(","):
        media_range, *parameters = (part.strip() for part in entry.split(";"))
        if media_range.lower() not in ("application/json", "application/*", "*/*"):
            continue
        weights = [p.partition("=")[2].strip() for p in parameters if p.partition("=")[0].strip().lower() == "q"]
        try:
            if not weights or float(weights[0]) > 0:
                return True
        except ValueError:
            continue
    return False


class ArgumentsRefused(Exception):
    """A tools/call whose arguments break the contract's JSON rules (a duplicate key, an unsafe number, nesting
    too deep): the tool's error, as its route would answer that body, not a JSON-RPC parse error."""

    def __init__(self, request_id: str | int, failed: ValidationFailed) -> None:
        super().__init__(failed.message)
        self.request_id = request_id
        self.failed = failed


ARGUMENTS = "/params/arguments"
ENVELOPE_DEPTH = 2
"""Levels a tool's arguments sit below the message's root (params, arguments): the route's body is that much
shallower, so the message may be that much deeper."""


def _message(body: str | bytes) -> tuple[dict[str, Any], bool]:
    """The one JSON-RPC request or notification in `body`, and whether its canonical form may take the fast path
    (`Document.plain`: then so may its arguments'), or `Refused` (HTTP 400) saying what is wrong."""
    try:
        document = parse_document(body, limits.MAX_JSON_DEPTH + ENVELOPE_DEPTH)
        value = document.value
    except ValidationFailed as failed:
        _refuse_arguments(body, failed)
        raise Refused(mcp.PARSE_ERROR, f"Parse error: {failed.message}", 400) from None
    if not isinstance(value, dict):
        raise Refused(mcp.INVALID_REQUEST, "Invalid request: the body must be one JSON-RPC message, an object.", 400)
    unknown = sorted(set(value) - ENVELOPE_FIELDS)
    problem = None
    if unknown:
        problem = f"unknown member {unknown[0]!r}; a request has only jsonrpc, id, method and params"
    elif value.get("jsonrpc") != "2.0":
        problem = 'jsonrpc must be "2.0"'
    elif not isinstance(value.get("method"), str) or not value["method"]:
        problem = "method must be a non-empty string"
    elif "id" in value and (isinstance(value["id"], bool) or not isinstance(value["id"], (str, int))):
        problem = "id must be a string or an integer"
    elif isinstance(value.get("id"), str) and len(value["id"]) > MAX_ID_CHARS:
        problem = f"id must be at most {MAX_ID_CHARS} characters"
    elif "params" in value and not isinstance(value["params"], dict):
        problem = "params must be an object"
    if problem is not None:
        raise Refused(mcp.INVALID_REQUEST, f"Invalid request: {problem}.", 400)
    return value, document.plain


def _refuse_arguments(body: str | bytes, failed: ValidationFailed) -> None:
    """Raise `ArgumentsRefused` when what broke the rules lies in a tools/call's arguments (the message read as
    plain JSON for its id and method); return otherwise (the message is the problem)."""
    where = failed.errors[0].pointer
    if not where.startswith(ARGUMENTS + "/"):
        return
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return
    request_id = value.get("id") if isinstance(value, dict) else None
    if value.get("method") != "tools/call" or isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return
    rebased = [
        replace(error, pointer=error.pointer.removeprefix(ARGUMENTS), message=error.message.replace(ARGUMENTS, ""))
        for error in failed.errors
    ]
    raise ArgumentsRefused(request_id, ValidationFailed(rebased, failed.more))


def _check_envelope(message: dict[str, Any], headers: Mapping[str, str]) -> None:
    """A 2026-07-28 request's own envelope, checked in the order the official SDK checks it: `params._meta` holds
    the protocol version and the client's capabilities (-32602); the `MCP-Protocol-Version`, `Mcp-Method` and
    `Mcp-Name` headers say what the body says (-32020); and the version is one this server speaks (-32022, with
    the versions it does)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise Refused(
            mcp.INVALID_PARAMS,
            f"Invalid params: /params/_meta must be an object carrying {mcp.PROTOCOL_VERSION_META_KEY!r} and "
            f"{mcp.CLIENT_CAPABILITIES_META_KEY!r} (a 2026-07-28 request carries its own envelope).",
        )
    missing = [k for k in (mcp.PROTOCOL_VERSION_META_KEY, mcp.CLIENT_CAPABILITIES_META_KEY) if k not in meta]
    if missing:
        raise Refused(mcp.INVALID_PARAMS, f"Invalid params: /params/_meta lacks {', '.join(missing)}.")
    if not isinstance(meta[mcp.CLIENT_CAPABILITIES_META_KEY], dict):
        raise Refused(
            mcp.INVALID_PARAMS, f"Invalid params: /params/_meta/{mcp.CLIENT_CAPABILITIES_META_KEY} must be an object."
        )
    version = meta[mcp.PROTOCOL_VERSION_META_KEY]
    if headers.get("mcp-protocol-version") != version:
        raise Refused(
            HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version differs from /params/_meta's protocol version."
        )
    method = message["method"]
    if headers.get("mcp-method") != method:
        raise Refused(HEADER_MISMATCH, "Header mismatch: Mcp-Method differs from the body's method.")
    named = NAMED_BY.get(method)
    body_name = params.get(named) if named is not None and isinstance(params, dict) else None
    if body_name is not None and header_value(headers.get("mcp-name")) != body_name:
        raise Refused(HEADER_MISMATCH, f"Header mismatch: Mcp-Name differs from the body's /params/{named}.")
    if not isinstance(version, str):
        raise Refused(mcp.INVALID_PARAMS, "Invalid params: the protocol version in /params/_meta must be a string.")
    if version not in MODERN_VERSIONS:
        raise Refused(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {version[:40]!r}; this server speaks {', '.join(MODERN_VERSIONS)} "
            f"(and {', '.join(PROTOCOL_VERSIONS)} through initialize).",
            data={"supported": [*MODERN_VERSIONS, *PROTOCOL_VERSIONS], "requested": version},
        )


def header_value(value: str | None) -> str | None:
    """An MCP header's value: as sent, or decoded from its `=?base64?…?=` form (how a value that is not plain
    printable ASCII travels); None for a malformed one, which then matches nothing."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    import base64
    import binascii

    payload = value[len("=?base64?") : -len("?=")]
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None  # not the one canonical form a sender writes
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _respond_modern(method: str, params: dict[str, Any], context: Context, plain: bool = False) -> BaseModel:
    """The 2026-07-28 methods: every result carries `resultType`, lists their caching directives."""
    if method == "server/discover":
        return _discover()
    if method == "ping":
        return mcp.EmptyResult(result_type="complete")
    if method == "tools/list":
        tools = [_tool(spec) for spec in catalogue().values()]
        # The same tools for every caller (a tool the key lacks the scope of answers isError when called).
        return mcp.ListToolsResult(tools=tools, ttl_ms=LIST_TTL_MS, cache_scope="public", result_type="complete")
    if method == "tools/call":
        called = _call(params, context, plain)
        return called.model_copy(update={"result_type": "complete"})
    raise Refused(mcp.METHOD_NOT_FOUND, f"Method not found: {method[:100]}.")


def _discover() -> mcp.DiscoverResult:
    info = mcp.Implementation(name=SERVER_NAME, title="Baton", version=__version__)
    return mcp.DiscoverResult(
        supported_versions=[*MODERN_VERSIONS, *PROTOCOL_VERSIONS],
        capabilities=mcp.ServerCapabilities(tools=mcp.ToolsCapability(list_changed=False)),
        instructions=INSTRUCTIONS,
        ttl_ms=LIST_TTL_MS,
        cache_scope="public",
        result_type="complete",
        _meta={mcp.SERVER_INFO_META_KEY: info.model_dump(mode="json", by_alias=True, exclude_none=True)},
    )


def _respond(method: str, params: dict[str, Any], context: Context, plain: bool = False) -> BaseModel:
    if method == "initialize":
        return _initialize(params)
    if method == "ping":
        return mcp.EmptyResult()
    if method == "tools/list":
        return mcp.ListToolsResult(tools=[_tool(spec) for spec in catalogue().values()])
    if method == "tools/call":
        return _call(params, context, plain)
    raise Refused(mcp.METHOD_NOT_FOUND, f"Method not found: {method[:100]}.")


def _initialize(params: dict[str, Any]) -> mcp.InitializeResult:
    try:
        asked = mcp.InitializeRequestParams.model_validate(params)
    except ModelError as invalid:
        raise Refused(mcp.INVALID_PARAMS, f"Invalid params of initialize: {_first(invalid)}") from None
    version = asked.protocol_version if asked.protocol_version in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return mcp.InitializeResult(
        protocol_version=version,
        capabilities=mcp.ServerCapabilities(tools=mcp.ToolsCapability(list_changed=False)),
        server_info=mcp.Implementation(name=SERVER_NAME, title="Baton", version=__version__),
        instructions=INSTRUCTIONS,
    )


def _tool(spec: ToolSpec) -> mcp.Tool:
    return mcp.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        annotations=mcp.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.hints.read_only,
            destructive_hint=spec.hints.destructive,
            idempotent_hint=spec.hints.idempotent,
            open_world_hint=False,
        ),
    )


def _call(params: dict[str, Any], context: Context, plain: bool = False) -> mcp.CallToolResult:
    """Run a tool (`plain`: its arguments' canonical form may take the fast path, as a route's body may)."""
    try:
        asked = mcp.CallToolRequestParams.model_validate(params)
    except ModelError as invalid:
        raise Refused(mcp.INVALID_PARAMS, f"Invalid params of tools/call: {_first(invalid)}") from None
    spec = catalogue().get(asked.name)
    if spec is None:
        raise Refused(mcp.INVALID_PARAMS, f"Unknown tool: {asked.name[:100]}; see tools/list.")
    try:
        return _result(spec.run(context, dict(asked.arguments or {}), plain), error=False)
    except BatonError as refused:
        return _result(error_object(refused), error=True)
    except Exception:
        # A defect: the tool's opaque INTERNAL error, as the route answers one; the cause is logged with the
        # request id (the JSON-RPC request itself was served).
        from baton_checkpoints.observability import logger

        logger().exception("unhandled error", extra={"request_id": context.request_id, "tool": spec.name})
        return _result(error_fields("INTERNAL", INTERNAL_MESSAGE), error=True)


def _failed(failed: ValidationFailed) -> mcp.CallToolResult:
    """A tool's error for arguments its route would refuse with `failed` (pointers into the arguments)."""
    return _result(error_object(failed), error=True)


ENVELOPE_BYTES = 4_096
"""Room, in the answer's body, for what surrounds a tool's result: the JSON-RPC members, an id of at most
`MAX_ID_CHARS` characters (6 bytes each at most, escaped), the result's member names and the note."""


def _result(structured: dict[str, Any], error: bool) -> mcp.CallToolResult:
    """A tool's result: the structured content, and the same as compact JSON text for clients that read text.

    The answer is sized in bytes as it leaves the function (its body UTF-8 JSON, then base64 past 1 MB, gzip not
    assumed): the text copy goes along only when the whole answer, both copies, still fits Lambda's limit with
    room to spare; otherwise a short note takes its place (MCP asks the copy as a SHOULD). A result that would not
    fit even alone (a defect of the routes' bounds) is the tool's `RESPONSE_TOO_LARGE` error, logged at ERROR."""
    text = dumps(structured)
    structured_bytes = len(text.encode("utf-8", "surrogatepass"))
    # The copy is a JSON string of `text`: its quotes and backslashes are escaped once more (`text` holds no raw
    # control character: JSON escapes them all).
    copy_bytes = structured_bytes + text.count('"') + text.count("\\") + 2
    if fits_lambda(structured_bytes + copy_bytes + ENVELOPE_BYTES):
        note = text
    elif fits_lambda(structured_bytes + ENVELOPE_BYTES):
        note = (
            f"The result is {structured_bytes:,} bytes of JSON, too big to repeat as text within the answer's size "
            "limit: read it from this result's structuredContent."
        )
    else:
        size = answer_bytes(structured_bytes + ENVELOPE_BYTES)
        log_oversized(MCP_ROUTE, size, 200)
        too_large = ResponseTooLarge(size, LAMBDA_RESPONSE_LIMIT_BYTES)
        return _result(error_object(too_large), True)
    return mcp.CallToolResult(
        content=[mcp.TextContent(type="text", text=note)], structured_content=structured, is_error=error
    )


def _first(invalid: ModelError) -> str:
    """The first problem pydantic found, as `where: what`."""
    problem = invalid.errors()[0]
    where = "/".join(str(part) for part in problem["loc"])
    # A location can quote the request (a member's name): bounded like every other echo.
    return clip(f"/{where}: {problem['msg']}." if where else f"{problem['msg']}.")


def _dump(model: BaseModel) -> dict[str, Any]:
    """A protocol model as its wire JSON: the fields set, by their wire names (leaves out the 2026 revision's
    `resultType`, which older clients do not know)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped
