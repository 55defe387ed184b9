"""MCP: `POST /mcp`, JSON-RPC over streamable HTTP (stateless, JSON answers). `GET` and `DELETE /mcp` answer 405 at
once through the resolver's not-found handler: no stream and no session to open or end.

The MCP package and the protocol's models are imported by the first MCP request, never at cold start.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Request, Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.openapi import responses
from baton_checkpoints.api.resolver import RAW_BODY_EXTENSION, CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.domain import limits

router = Router()

# Bodies are read as the contract reads every body (api-v1.md, Conventions): numbers within ±(2^53-1), no NaN,
# no duplicate keys, at most 64 levels deep; `JsonValue` (a component of the document) states the number rule.
_SAFE_INTEGER = {"type": "integer", "minimum": -limits.MAX_SAFE_INTEGER, "maximum": limits.MAX_SAFE_INTEGER}
ID_MAX_CHARS = 200
"""`protocol.MAX_ID_CHARS`, stated here without importing the MCP code (which stays off the cold start): every answer
echoes the id, so a longer one is refused (-32600) rather than let an answer grow with it."""
_STRING_OR_INTEGER: list[dict[str, Any]] = [{"type": "string", "maxLength": ID_MAX_CHARS}, _SAFE_INTEGER]
_ID = {"anyOf": _STRING_OR_INTEGER, "description": "The request's id (absent: a notification)."}
_REQUEST_SCHEMA: dict[str, Any] = {
    "title": "JsonRpcMessage",
    "description": (
        "One JSON-RPC 2.0 request (with id) or notification (without): initialize, ping, tools/list, tools/call, "
        "notifications/*. Batches are not accepted."
    ),
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": _ID,
        "method": {"type": "string", "minLength": 1},
        "params": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/JsonValue"}},
    },
    "required": ["jsonrpc", "method"],
    "additionalProperties": False,
}
_ERROR_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
    "required": ["code", "message"],
}
_JSONRPC_ERROR: dict[str, Any] = {
    "title": "JsonRpcError",
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"anyOf": [*_STRING_OR_INTEGER, {"type": "null"}]},
        "error": _ERROR_OBJECT,
    },
    "required": ["jsonrpc", "id", "error"],
}
_JSONRPC_ANSWER: dict[str, Any] = {
    "title": "JsonRpcResponse",
    "description": "The response to the request: a result, or a JSON-RPC error (-32601, -32602).",
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"anyOf": _STRING_OR_INTEGER},
        "result": {"type": "object"},
        "error": _ERROR_OBJECT,
    },
    "required": ["jsonrpc", "id"],
}


def _documented() -> dict[int, Any]:
    challenge = {
        "required": True,
        "description": (
            "Where OAuth's discovery starts (RFC 9728): resource_metadata names this origin's "
            "/.well-known/oauth-protected-resource/mcp; error says invalid_token (401, a credential was sent) or "
            "insufficient_scope (403), and scope what /mcp needs."
        ),
        "schema": {"type": "string", "pattern": '^Bearer resource_metadata="'},
    }
    documented = responses(
        {},
        (401, 403, 413, 415, 429, 503),
        headers={401: {"WWW-Authenticate": challenge}, 403: {"WWW-Authenticate": {**challenge, "required": False}}},
        described={
            401: "UNAUTHENTICATED: no key or access token, or one that does not work here (an access token is "
            "accepted only when bound to this origin's /mcp)",
            403: "FORBIDDEN: the key or token lacks mcp:call",
        },
    )
    documented[200] = {"description": "The JSON-RPC response", "content": {JSON: {"schema": _JSONRPC_ANSWER}}}
    documented[202] = {"description": "A notification, accepted: no body", "content": {}}
    documented[400] = {
        "description": (
            "A body that is not JSON (-32700), or not one JSON-RPC request or notification (-32600): a JSON-RPC "
            "error with id null; on the 2026-07-28 path also a missing or malformed _meta envelope or bad params "
            "(-32602), headers that differ from the body (-32020) and an unsupported version (-32022, data naming "
            "the supported ones), with the request's id. A body that is not UTF-8 is the contract's VALIDATION_ERROR"
        ),
        "content": {JSON: {"schema": {"anyOf": [_JSONRPC_ERROR, {"$ref": "#/components/schemas/ErrorEnvelope"}]}}},
    }
    documented[404] = {
        "description": "On the 2026-07-28 path, a method this server does not serve: a JSON-RPC error (-32601)",
        "content": {JSON: {"schema": _JSONRPC_ERROR}},
    }
    documented[406] = {
        "description": "The Accept header allows no application/json: a JSON-RPC error (-32600)",
        "content": {JSON: {"schema": _JSONRPC_ERROR}},
    }
    return documented


@router.post(
    "/mcp",
    summary="MCP (streamable HTTP, stateless, JSON answers)",
    description=(
        "The Model Context Protocol over streamable HTTP, dual-era: the 2026-07-28 revision (server/discover, the "
        "per-request _meta envelope, MCP-Protocol-Version, Mcp-Method and Mcp-Name headers checked against the body: "
        "-32020; an unsupported version -32022) when MCP-Protocol-Version names no 2025 revision, else the 2025 "
        "handshake (initialize); ping, tools/list and tools/call on both, answered with application/json; "
        "notifications answer 202. Credentials: a key, or an OAuth access token bound to this origin's /mcp. "
        "Tools: baton_checkpoint_save, baton_checkpoint_get, baton_checkpoint_list, baton_checkpoint_delete, "
        "baton_resume, baton_lease_acquire, baton_lease_release; "
        "each needs the scope of the route it stands for besides mcp:call, and a failing one answers isError with "
        "the route's {code, message}. No session (no Mcp-Session-Id): GET and DELETE /mcp answer 405. An "
        "Idempotency-Key header is not used (save and lease_acquire take an idempotency_key argument)."
    ),
    openapi_extensions={
        **needs("mcp:call"),
        RAW_BODY_EXTENSION: True,
        # Stated here rather than by a model: the body is read by the route, never validated by powertools.
        "requestBody": {"required": True, "content": {JSON: {"schema": _REQUEST_SCHEMA}}},
    },
    responses=_documented(),
    tags=["mcp"],
)
def mcp_endpoint(call: CurrentCall, services: Wired, request: Request) -> Response[str]:
    """Answer one JSON-RPC message: a tool call runs its operation with the caller `/mcp` authenticated."""
    from baton_checkpoints.api.mcp.protocol import answer

    event = request.resolved_event
    answered = answer(event.decoded_body or "", event.headers, context_of(call, services))
    if answered.message is None:
        return Response(status_code=answered.status, content_type=None, body="")
    return Response(status_code=answered.status, content_type=JSON, body=dumps(answered.message))
