"""MCP's 2026-07-28 revision beside the 2025 ones, through the api handler against moto: `server/discover`, the
per-request envelope (`params._meta`) and the headers that must say what the body says, `resultType` on every
result, caching directives on lists, and each refusal with its JSON-RPC code and HTTP status."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests import proof_counts
from tests.integration.driver import ApiDriver, Result

VERSION = "2026-07-28"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
PROTOCOL = "io.modelcontextprotocol/protocolVersion"
CLIENT = "io.modelcontextprotocol/clientInfo"
SUITE = "mcp 2026-07-28 (integration)"


def envelope(version: Any = VERSION) -> dict[str, Any]:
    return {PROTOCOL: version, CAPABILITIES: {}, CLIENT: {"name": "test", "version": "1"}}


def modern(
    api: ApiDriver,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    version: Any = VERSION,
    headers: dict[str, str | None] | None = None,
    meta: dict[str, Any] | None = None,
) -> Result:
    """One 2026-07-28 request: the envelope in `params._meta`, and the headers a conforming client sends."""
    body_params = {**(params or {}), "_meta": envelope(version) if meta is None else meta}
    sent: dict[str, str | None] = {"mcp-protocol-version": str(version), "mcp-method": method}
    if method == "tools/call" and params and isinstance(params.get("name"), str):
        sent["mcp-name"] = params["name"]
    sent.update(headers or {})
    return api.invoke(
        "mcp_tools_call", body={"jsonrpc": "2.0", "id": 7, "method": method, "params": body_params}, headers=sent
    )


def refused(answer: Result, status: int, code: int) -> dict[str, Any]:
    assert answer.status == status, answer.raw_body
    error: dict[str, Any] = answer.body["error"]
    assert error["code"] == code, error
    assert answer.body["id"] == 7
    proof_counts.record(SUITE, refusals=1)
    return error


def test_server_discover_says_what_the_server_is(api: ApiDriver) -> None:
    answer = modern(api, "server/discover")
    assert answer.status == 200, answer.raw_body
    result = answer.body["result"]
    assert result["supportedVersions"][0] == VERSION
    assert "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert result["ttlMs"] > 0
    assert result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "baton"
    assert "checkpoints" in result["instructions"]


def test_every_result_carries_its_type_and_lists_their_caching(api: ApiDriver) -> None:
    listed = modern(api, "tools/list")
    assert listed.status == 200, listed.raw_body
    assert listed.body["result"]["resultType"] == "complete"
    assert listed.body["result"]["cacheScope"] == "public"  # the same tools for every caller
    assert listed.body["result"]["ttlMs"] > 0
    assert len(listed.body["result"]["tools"]) == 7
    ping = modern(api, "ping")
    assert ping.body["result"] == {"resultType": "complete"}
    called = modern(
        api,
        "tools/call",
        {"name": "baton_checkpoint_save", "arguments": {"subject_id": "s", "kind": "cursor", "state": 1}},
    )
    assert called.status == 200, called.raw_body
    assert called.body["result"]["resultType"] == "complete"
    assert called.body["result"]["isError"] is False
    # A tool whose route refuses is still a complete result, with isError
    failed = modern(
        api, "tools/call", {"name": "baton_checkpoint_get", "arguments": {"checkpoint_id": "ckpt_" + "0" * 32}}
    )
    assert failed.body["result"]["isError"] is True
    assert failed.body["result"]["resultType"] == "complete"


def test_a_notification_is_accepted_with_202(api: ApiDriver) -> None:
    answer = api.invoke(
        "mcp_tools_call",
        body={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": envelope()}},
        headers={"mcp-protocol-version": VERSION, "mcp-method": "notifications/cancelled"},
    )
    assert answer.status == 202
    assert answer.raw_body == ""


@pytest.mark.parametrize(
    ("label", "headers"),
    [
        ("version header differs from the envelope", {"mcp-protocol-version": "2026-07-29"}),
        ("no Mcp-Method", {"mcp-method": None}),
        ("Mcp-Method differs", {"mcp-method": "tools/list"}),
        ("no Mcp-Name", {"mcp-name": None}),
        ("Mcp-Name differs", {"mcp-name": "baton_resume"}),
        ("Mcp-Name a malformed base64 form", {"mcp-name": "=?base64?!!!?="}),
    ],
)
def test_headers_that_disagree_with_the_body_are_32020(
    api: ApiDriver, label: str, headers: dict[str, str | None]
) -> None:
    answer = modern(
        api, "tools/call", {"name": "baton_checkpoint_list", "arguments": {"subject_id": "s"}}, headers=headers
    )
    error = refused(answer, 400, -32020)
    assert "Header mismatch" in error["message"], label


def test_a_name_sent_in_its_base64_form_matches() -> None:
    from baton_checkpoints.api.mcp.protocol import header_value

    encoded = "=?base64?" + base64.b64encode("tâche".encode()).decode() + "?="
    assert header_value(encoded) == "tâche"
    assert header_value("plain") == "plain"
    assert header_value("=?base64?dGFjaGU?=") is None  # not canonical (padding missing)


def test_an_unsupported_version_is_32022_naming_the_supported_ones(api: ApiDriver) -> None:
    answer = modern(api, "tools/list", version="2099-01-01")
    error = refused(answer, 400, -32022)
    assert error["data"]["requested"] == "2099-01-01"
    assert error["data"]["supported"][0] == VERSION


@pytest.mark.parametrize(
    ("label", "meta"),
    [
        ("no protocol version", {CAPABILITIES: {}}),
        ("no client capabilities", {PROTOCOL: VERSION}),
        ("capabilities not an object", {PROTOCOL: VERSION, CAPABILITIES: []}),
        ("version not a string", {PROTOCOL: 2026, CAPABILITIES: {}}),
    ],
)
def test_an_envelope_missing_its_parts_is_32602(api: ApiDriver, label: str, meta: dict[str, Any]) -> None:
    version = meta.get(PROTOCOL, VERSION)
    answer = modern(api, "tools/list", meta=meta, headers={"mcp-protocol-version": str(version)})
    if label == "version not a string":
        # the header (a string) cannot equal a number: the mismatch is found first, as the SDK finds it
        refused(answer, 400, -32020)
    else:
        refused(answer, 400, -32602)


def test_an_unknown_method_is_404_and_initialize_is_not_a_2026_method(api: ApiDriver) -> None:
    refused(modern(api, "resources/list"), 404, -32601)
    refused(modern(api, "initialize", {"protocolVersion": VERSION, "capabilities": {}}), 404, -32601)


def test_bad_tool_params_on_the_2026_path_are_400(api: ApiDriver) -> None:
    refused(modern(api, "tools/call", {"name": "rm_rf"}), 400, -32602)


def test_the_2025_handshake_path_is_unchanged(api: ApiDriver) -> None:
    answer = api.invoke(
        "mcp_tools_call",
        body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"mcp-protocol-version": "2025-06-18"},
    )
    assert answer.status == 200
    assert "resultType" not in answer.body["result"]
    assert "ttlMs" not in answer.body["result"]
    unknown = api.invoke("mcp_tools_call", body={"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, headers={})
    assert (unknown.status, unknown.body["error"]["code"]) == (200, -32601)
