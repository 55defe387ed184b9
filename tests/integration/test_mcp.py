"""MCP through the api handler against moto: malformed JSON-RPC never answers 500, each tool checks its route's
scope, and a tool call costs exactly the DynamoDB requests of the route it stands for."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from tests import proof_counts
from tests.builders import KIND, SUBJECT, save
from tests.integration.conftest import put_key
from tests.integration.driver import ApiDriver, CallCounter, Result

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


def rpc(
    api: ApiDriver, method: str, params: Any = None, *, id: Any = 1, secret: str | None = None, **headers: str | None
) -> Result:
    """One JSON-RPC message to /mcp (a notification when `id` is None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return api.invoke("mcp_tools_call", body=message, secret=secret, headers=dict(headers))


def call_tool(api: ApiDriver, name: str, arguments: dict[str, Any], secret: str | None = None) -> dict[str, Any]:
    """A tools/call answered 200 with a result; the result."""
    answer = rpc(api, "tools/call", {"name": name, "arguments": arguments}, secret=secret)
    assert answer.status == 200, answer.raw_body
    result: dict[str, Any] = answer.body["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result


# (label, raw body, extra headers, expected HTTP status, expected JSON-RPC code or contract code)
MALFORMED: list[tuple[str, str, dict[str, str | None], int, int | str]] = [
    ("not JSON", "{bad", {}, 400, -32700),
    ("empty body", "", {}, 400, -32700),
    ("NaN", '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', {}, 400, -32700),
    ("duplicate keys", '{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', {}, 400, -32700),
    ("nested 70 deep", '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": ' + "[" * 70 + "]" * 70 + "}}",
     {}, 400, -32700),
    ("a batch", '[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', {}, 400, -32600),
    ("empty batch", "[]", {}, 400, -32600),
    ("a string", '"ping"', {}, 400, -32600),
    ("null", "null", {}, 400, -32600),
    ("empty object", "{}", {}, 400, -32600),
    ("jsonrpc 1.0", '{"jsonrpc": "1.0", "id": 1, "method": "ping"}', {}, 400, -32600),
    ("no method", '{"jsonrpc": "2.0", "id": 1}', {}, 400, -32600),
    ("method a number", '{"jsonrpc": "2.0", "id": 1, "method": 5}', {}, 400, -32600),
    ("method empty", '{"jsonrpc": "2.0", "id": 1, "method": ""}', {}, 400, -32600),
    ("id null", '{"jsonrpc": "2.0", "id": null, "method": "ping"}', {}, 400, -32600),
    ("id true", '{"jsonrpc": "2.0", "id": true, "method": "ping"}', {}, 400, -32600),
    ("id a fraction", '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', {}, 400, -32600),
    ("id an object", '{"jsonrpc": "2.0", "id": {}, "method": "ping"}', {}, 400, -32600),
    ("params a list", '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}', {}, 400, -32600),
    ("params null", '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": null}', {}, 400, -32600),
    ("a response", '{"jsonrpc": "2.0", "id": 1, "result": {}}', {}, 400, -32600),
    ("unknown member", '{"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": 1}', {}, 400, -32600),
    ("unknown method", '{"jsonrpc": "2.0", "id": 1, "method": "resources/list"}', {}, 200, -32601),
    ("server/discover without its envelope", '{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}',
     {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}, 400, -32602),
    ("initialize without params", '{"jsonrpc": "2.0", "id": 1, "method": "initialize"}', {}, 200, -32602),
    ("initialize, version a number",
     '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "capabilities": {}, '
     '"clientInfo": {"name": "x", "version": "1"}}}', {}, 200, -32602),
    ("tools/call without name", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}', {}, 200, -32602),
    ("tools/call name a number", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}}', {},
     200, -32602),
    ("tools/call arguments a list",
     '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "baton_resume", "arguments": []}}', {},
     200, -32602),
    ("unknown tool", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "rm_rf"}}', {}, 200,
     -32602),
    ("unknown protocol version, no envelope", '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
     {"mcp-protocol-version": "1999-01-01"}, 400, -32602),
    ("Accept: event stream only", '{"jsonrpc": "2.0", "id": 1, "method": "ping"}', {"accept": "text/event-stream"},
     406, -32600),
    ("Accept: json with q=0", '{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
     {"accept": "application/json;q=0, text/html"}, 406, -32600),
    ("Content-Type: text/plain", '{"jsonrpc": "2.0", "id": 1, "method": "ping"}', {"content-type": "text/plain"},
     415, "UNSUPPORTED_MEDIA_TYPE"),
    ("no Content-Type", '{"jsonrpc": "2.0", "id": 1, "method": "ping"}', {"content-type": None}, 415,
     "UNSUPPORTED_MEDIA_TYPE"),
]  # fmt: skip


@pytest.mark.parametrize(("label", "raw", "headers", "status", "code"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_json_rpc_gets_a_json_rpc_error_never_a_500(
    api: ApiDriver, label: str, raw: str, headers: dict[str, str | None], status: int, code: int | str
) -> None:
    answer = api.invoke("mcp_tools_call", raw_body=raw, headers=headers)
    proof_counts.record("mcp malformed", cases=1)
    assert answer.status == status, answer.raw_body
    body = answer.body
    if isinstance(code, str):
        assert body["error"]["code"] == code, body
        return
    assert body["jsonrpc"] == "2.0", body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert "result" not in body


def test_a_body_that_is_not_utf8_is_the_contracts_400(api: ApiDriver) -> None:
    from baton_checkpoints.handlers.api import handler
    from tests.integration.driver import load_event

    event = load_event("mcp_tools_call")
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    event["body"] = base64.b64encode(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}').decode()
    event["isBase64Encoded"] = True
    answer = handler(event, None)
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"]["code"] == "VALIDATION_ERROR"


def test_notifications_are_accepted_with_202_and_no_body(api: ApiDriver) -> None:
    for method in ("notifications/initialized", "notifications/cancelled", "notifications/whatever"):
        answer = rpc(api, method, id=None)
        assert (answer.status, answer.raw_body) == (202, ""), method


def test_initialize_answers_the_asked_version_when_spoken_else_the_latest(api: ApiDriver) -> None:
    for asked, answered in (("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"), ("2024-11-05", "2025-11-25")):
        result = rpc(api, "initialize", {**INITIALIZE, "protocolVersion": asked}).body["result"]
        assert result["protocolVersion"] == answered
        assert result["capabilities"] == {"tools": {"listChanged": False}}
        assert result["serverInfo"]["name"] == "baton"
    assert rpc(api, "ping", id="p-1").body == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


def test_tools_list_describes_every_tool_with_its_schema_and_hints(api: ApiDriver) -> None:
    tools = {tool["name"]: tool for tool in rpc(api, "tools/list").body["result"]["tools"]}
    assert set(tools) == {
        "baton_checkpoint_save",
        "baton_checkpoint_get",
        "baton_checkpoint_list",
        "baton_checkpoint_delete",
        "baton_resume",
        "baton_lease_acquire",
        "baton_lease_release",
    }
    save_schema = tools["baton_checkpoint_save"]["inputSchema"]
    assert save_schema["required"] == ["subject_id", "kind", "state"]
    assert save_schema["properties"]["kind"]["enum"] == ["task_state", "conversation", "workflow", "cursor"]
    assert save_schema["properties"]["ttl_seconds"]["minimum"] == 60
    assert save_schema["additionalProperties"] is False
    assert "$ref" not in json.dumps(tools)
    hints = {name: tool["annotations"] for name, tool in tools.items()}
    assert {n for n, h in hints.items() if h["readOnlyHint"]} == {
        "baton_checkpoint_get",
        "baton_checkpoint_list",
        "baton_resume",
    }
    assert {n for n, h in hints.items() if h["destructiveHint"]} == {"baton_checkpoint_save", "baton_checkpoint_delete"}
    for tool in tools.values():
        assert tool["description"]
        assert tool["inputSchema"]["type"] == "object"


def test_a_key_without_mcp_call_is_refused_before_anything_else(api: ApiDriver, services: Services) -> None:
    put_key(
        services, "btn_no_mcp_0001", "acme", "operator", {"checkpoints:read", "checkpoints:write"}, "key_" + "c" * 32
    )
    answer = rpc(api, "tools/list", secret="btn_no_mcp_0001")
    assert answer.status == 403
    assert answer.body["error"]["code"] == "FORBIDDEN"
    assert api.invoke("mcp_tools_call", raw_body="{bad", secret="btn_nobody").status == 401


TOOL_SCOPES = [
    ("baton_checkpoint_save", "checkpoints:write", {"subject_id": SUBJECT, "kind": KIND, "state": {"step": 2}}),
    ("baton_checkpoint_get", "checkpoints:read", {"subject_id": SUBJECT, "kind": KIND}),
    ("baton_checkpoint_list", "checkpoints:read", {"subject_id": SUBJECT}),
    ("baton_checkpoint_delete", "checkpoints:delete", {"checkpoint_id": "CHECKPOINT"}),
    ("baton_resume", "checkpoints:read", {"subject_id": SUBJECT}),
    ("baton_lease_acquire", "leases:write", {"checkpoint_id": "CHECKPOINT", "ttl_seconds": 60}),
    ("baton_lease_release", "leases:write", {"checkpoint_id": "CHECKPOINT", "lease_token": "1.abc"}),
]
ALL_SCOPES = {"checkpoints:read", "checkpoints:write", "checkpoints:delete", "leases:write"}


@pytest.mark.parametrize(("tool", "scope", "arguments"), TOOL_SCOPES, ids=[t[0] for t in TOOL_SCOPES])
def test_each_tool_checks_its_routes_scope(
    api: ApiDriver, services: Services, tool: str, scope: str, arguments: dict[str, Any]
) -> None:
    checkpoint_id = save(api).data["checkpoint_id"]
    arguments = {k: checkpoint_id if v == "CHECKPOINT" else v for k, v in arguments.items()}
    put_key(services, "btn_mcp_without", "acme", "operator", {"mcp:call"} | (ALL_SCOPES - {scope}), "key_" + "d" * 32)
    put_key(services, "btn_mcp_with", "acme", "operator", {"mcp:call", scope}, "key_" + "e" * 32)
    refused = call_tool(api, tool, arguments, secret="btn_mcp_without")
    assert refused["isError"] is True
    assert refused["structuredContent"]["code"] == "FORBIDDEN", refused
    allowed = call_tool(api, tool, arguments, secret="btn_mcp_with")
    assert allowed["structuredContent"].get("code") != "FORBIDDEN", allowed
    proof_counts.record("mcp scopes", tools=1)
    # nothing was written by the refused call: the checkpoint is still at revision 1, unleased
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}").status in (200, 404)


def test_a_failing_route_is_a_tool_error_with_the_contracts_code(api: ApiDriver) -> None:
    checkpoint_id = save(api).data["checkpoint_id"]
    lease = call_tool(api, "baton_lease_acquire", {"checkpoint_id": checkpoint_id, "ttl_seconds": 60})
    held = call_tool(api, "baton_checkpoint_delete", {"checkpoint_id": checkpoint_id})
    assert held["isError"] is True
    assert held["structuredContent"]["code"] == "LEASE_HELD"
    assert "lease_expires_at" in held["structuredContent"]["details"]
    stale = call_tool(
        api,
        "baton_checkpoint_delete",
        {
            "checkpoint_id": checkpoint_id,
            "expected_revision": 7,
            "lease_token": lease["structuredContent"]["lease_token"],
        },
    )
    assert stale["structuredContent"]["code"] == "REVISION_CONFLICT", stale
    invalid = call_tool(api, "baton_checkpoint_save", {"subject_id": SUBJECT, "kind": "diary", "state": 1, "x": 1})
    assert invalid["isError"] is True
    assert invalid["structuredContent"]["code"] == "VALIDATION_ERROR"
    pointers = {e["pointer"] for e in invalid["structuredContent"]["details"]["errors"]}
    assert pointers == {"/kind", "/x"}
    wrong_type = call_tool(api, "baton_checkpoint_get", {"checkpoint_id": 5})
    assert wrong_type["structuredContent"]["code"] == "VALIDATION_ERROR"
    # a value that would name another route stays one path segment
    sneaky = call_tool(api, "baton_checkpoint_get", {"checkpoint_id": f"{checkpoint_id}/revisions"})
    assert sneaky["isError"] is True
    assert sneaky["structuredContent"]["code"] in ("VALIDATION_ERROR", "NOT_FOUND")
    missing = call_tool(api, "baton_checkpoint_get", {"checkpoint_id": "ckpt_" + "0" * 32})
    assert missing["structuredContent"] == {"code": "NOT_FOUND", "message": "Resource was not found."}


def test_an_idempotency_key_argument_makes_a_retried_save_write_once(api: ApiDriver) -> None:
    arguments = {"subject_id": "idem", "kind": KIND, "state": {"n": 1}, "idempotency_key": "mcp-retry-1"}
    first = call_tool(api, "baton_checkpoint_save", arguments)
    again = call_tool(api, "baton_checkpoint_save", arguments)
    assert first["structuredContent"] == again["structuredContent"]
    assert first["structuredContent"]["revision"] == 1
    reused = call_tool(api, "baton_checkpoint_save", {**arguments, "state": {"n": 2}})
    assert reused["structuredContent"]["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_a_tool_call_costs_the_dynamodb_requests_of_its_route(api: ApiDriver, counter: CallCounter) -> None:
    checkpoint_id = save(api, subject_id="costs").data["checkpoint_id"]
    lease_ids = [save(api, subject_id=f"costs-{n}").data["checkpoint_id"] for n in range(2)]
    pairs: list[tuple[str, Any, str, dict[str, Any]]] = [
        ("save", lambda: save(api, subject_id="costs", state={"step": 9}), "baton_checkpoint_save",
         {"subject_id": "costs", "kind": KIND, "state": {"step": 10}}),
        ("get by id", lambda: api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}"),
         "baton_checkpoint_get", {"checkpoint_id": checkpoint_id}),
        ("lookup", lambda: api.invoke("lookup_checkpoint", query={"subject_id": "costs", "kind": KIND}),
         "baton_checkpoint_get", {"subject_id": "costs", "kind": KIND}),
        ("list", lambda: api.invoke("list_subject_checkpoints", path="/v1/subjects/costs/checkpoints", query={}),
         "baton_checkpoint_list", {"subject_id": "costs"}),
        ("resume", lambda: api.invoke("resume", body={"subject_id": "costs"}), "baton_resume", {"subject_id": "costs"}),
        ("acquire", lambda: api.invoke("acquire_lease", path=f"/v1/checkpoints/{lease_ids[0]}/lease",
                                       body={"ttl_seconds": 60}, headers={"idempotency-key": None}),
         "baton_lease_acquire", {"checkpoint_id": lease_ids[1], "ttl_seconds": 60}),
    ]  # fmt: skip
    rpc(api, "ping")  # the key is in the cache from here on, as for every warm request
    for label, route, tool, arguments in pairs:
        counter.reset()
        answered = route()
        assert answered.status < 300, (label, answered.raw_body)
        by_route = dict(counter.calls)
        counter.reset()
        result = call_tool(api, tool, arguments)
        assert result["isError"] is False, (label, result)
        assert dict(counter.calls) == by_route, label
        proof_counts.record("mcp request counts", pairs=1)
