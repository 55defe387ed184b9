"""A tool call, served by its route: the HTTP API v2 event of the route's request is resolved by a second resolver on
the same services, so the call passes the same gate (key, scope, media type, size), validation, leases, idempotency
and errors as the route itself, and costs the same requests (the key is in the container's cache by then).

The second resolver is made once per container, at its first tool call: a nested `resolve` on the serving resolver
would replace the request it is serving.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

from baton_checkpoints.api.mcp.tools import RouteRequest
from baton_checkpoints.api.resolver import BatonResolver


@dataclass(frozen=True)
class RouteAnswer:
    """What the route answered: its status and its JSON body (None when it had none)."""

    status: int
    body: Any


def serve(resolver: BatonResolver, request: RouteRequest, authorization: str | None, request_id: str) -> RouteAnswer:
    """Resolve `request` through `resolver` (the serving resolver's twin: same routes, same services) as the route
    would an HTTP request with the caller's `Authorization` header."""
    event = _event(request, authorization, request_id)
    # Powertools keeps the event being served on its router class, shared by every resolver: the serving one's is
    # put back, so that its own answer is built for its own request.
    served_event, served_context = BaseRouter.current_event, BaseRouter.lambda_context
    try:
        # Not fitted for Lambda: the answer comes back here whole (never base64), and the MCP route sizes its own.
        result = resolver.resolve(event, None, for_lambda=False)
    finally:
        BaseRouter.current_event, BaseRouter.lambda_context = served_event, served_context
    body = result.get("body") or ""
    if result.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8")  # a route's own base64 (none of the tools' routes has one)
    return RouteAnswer(int(result.get("statusCode", 200)), json.loads(body) if body else None)


def _event(request: RouteRequest, authorization: str | None, request_id: str) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event of `request`."""
    headers = {"accept": "application/json", **request.headers}
    if authorization is not None:
        headers["authorization"] = authorization
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": request.path,
        "rawQueryString": urlencode(request.query),
        "headers": headers,
        "requestContext": {
            "http": {"method": request.method, "path": request.path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    if request.query:
        event["queryStringParameters"] = dict(request.query)
    if request.body is not None:
        headers["content-type"] = "application/json"
        event["body"] = _body_text(request.body)
    return event


def _body_text(body: Any) -> str:
    """The route's body as an HTTP client would send it: UTF-8 JSON; with the escapes of a string UTF-8 cannot
    carry (a lone surrogate) kept as escapes, so that the route judges them as it judges them over HTTP."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":"))
    return text
