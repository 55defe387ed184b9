"""The official MCP client (`mcp` 2.3) against `baton serve`, over HTTP with a bearer key, in its default mode (which
probes `server/discover` and then speaks 2026-07-28) and in its legacy mode (`initialize` first, 2025-11-25)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from tests import proof_counts
from tests.e2e.planted import plant_secret
from tests.e2e.server_process import BatonServe

TOOLS = {
    "baton_checkpoint_save",
    "baton_checkpoint_get",
    "baton_checkpoint_list",
    "baton_checkpoint_delete",
    "baton_resume",
    "baton_lease_acquire",
    "baton_lease_release",
}


def client(url: str, secret: str, mode: str) -> Any:
    """An MCP client session on `url`, authenticated with `secret`."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    http_client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http_client), mode=mode)


async def conversation(url: str, secret: str, mode: str) -> dict[str, Any]:
    """List the tools, then save, get, list, lease, resume, release and delete through them."""
    subject = f"mcp-{mode}-{uuid.uuid4().hex[:8]}"
    seen: dict[str, Any] = {}
    async with client(url, secret, mode) as session:
        seen["version"] = session.protocol_version
        seen["tools"] = {tool.name for tool in (await session.list_tools()).tools}

        async def call(name: str, **arguments: Any) -> Any:
            result = await session.call_tool(name, arguments)
            seen.setdefault("calls", []).append(name)
            return result

        saved = await call("baton_checkpoint_save", subject_id=subject, kind="task_state", state={"step": 1})
        checkpoint_id = saved.structured_content["checkpoint_id"]
        seen["saved"] = saved
        seen["again"] = await call("baton_checkpoint_save", subject_id=subject, kind="task_state", state={"step": 2})
        seen["got"] = await call("baton_checkpoint_get", subject_id=subject, kind="task_state")
        seen["listed"] = await call("baton_checkpoint_list", subject_id=subject)
        seen["leased"] = await call("baton_lease_acquire", checkpoint_id=checkpoint_id, ttl_seconds=60)
        token = seen["leased"].structured_content["lease_token"]
        seen["held"] = await call("baton_checkpoint_delete", checkpoint_id=checkpoint_id)
        seen["resumed"] = await call("baton_resume", subject_id=subject)
        seen["released"] = await call("baton_lease_release", checkpoint_id=checkpoint_id, lease_token=token)
        seen["deleted"] = await call("baton_checkpoint_delete", checkpoint_id=checkpoint_id, expected_revision=2)
        seen["gone"] = await call("baton_checkpoint_get", checkpoint_id=checkpoint_id)
        seen["checkpoint_id"] = checkpoint_id
    return seen


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_lists_and_calls_every_tool(baton: BatonServe, mode: str) -> None:
    seen = asyncio.run(conversation(baton.url, baton.key, mode))
    proof_counts.record("mcp e2e", tool_calls=len(seen["calls"]))
    assert seen["tools"] == TOOLS
    # The default mode probes server/discover and speaks the 2026-07-28 revision; the legacy one shakes hands.
    assert seen["version"] == {"auto": "2026-07-28", "legacy": "2025-11-25"}[mode]
    checkpoint_id = seen["checkpoint_id"]
    assert seen["saved"].is_error is False
    assert seen["saved"].structured_content["revision"] == 1
    assert seen["again"].structured_content["revision"] == 2
    assert seen["again"].structured_content["updated"]
    got = seen["got"].structured_content
    assert (got["checkpoint_id"], got["revision"], got["state"]) == (checkpoint_id, 2, {"step": 2})
    assert [c["checkpoint_id"] for c in seen["listed"].structured_content["checkpoints"]] == [checkpoint_id]
    assert seen["listed"].structured_content["next_cursor"] is None
    held = seen["held"]
    assert held.is_error is True
    assert held.structured_content["code"] == "LEASE_HELD"
    assert "LEASE_HELD" in held.content[0].text
    resumed = seen["resumed"].structured_content
    assert resumed["status"] == "ready"
    assert resumed["checkpoint"]["lease"]["holder"]
    assert seen["released"].structured_content == {"checkpoint_id": checkpoint_id, "released": True}
    assert seen["deleted"].structured_content == {"checkpoint_id": checkpoint_id, "deleted": True}
    assert seen["gone"].is_error is True
    assert seen["gone"].structured_content == {"code": "NOT_FOUND", "message": "Resource was not found."}


def test_a_key_without_mcp_call_is_refused(baton: BatonServe, http: httpx.Client) -> None:
    minted = http.post("/v1/keys", json={"agent_id": "no-mcp", "scopes": ["checkpoints:read", "checkpoints:write"]})
    assert minted.status_code == 201, minted.text
    secret = minted.json()["data"]["secret"]
    plant_secret(secret)

    async def connect() -> None:
        async with client(baton.url, secret, "legacy") as session:
            await session.list_tools()

    # the client cannot connect: its initialize is answered 403 (it raises the error the transport made of it)
    with pytest.raises(Exception, match=r"(?i)error"):
        asyncio.run(connect())
    direct = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert direct.status_code == 403
    assert direct.json()["error"]["code"] == "FORBIDDEN"


def test_get_and_delete_are_405_and_an_accept_without_json_is_406(http: httpx.Client) -> None:
    for method in ("GET", "DELETE"):
        answer = http.request(method, "/mcp", headers={"Accept": "text/event-stream"})
        assert answer.status_code == 405, answer.text
        assert answer.headers["allow"] == "POST"
        assert answer.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    refused = http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Accept": "text/event-stream"}
    )
    assert refused.status_code == 406, refused.text
    assert refused.json()["error"]["code"] == -32600
