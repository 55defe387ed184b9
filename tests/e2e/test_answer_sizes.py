"""Answers and events sized the way AWS sizes them, over real HTTP against `baton serve`.

A state of multi-byte characters is where counting characters and counting bytes part ways: 950,000 × "€" is 2.85 MB
of canonical JSON, and a state of emoji escaped as `\\ud83d\\ude00` weighs three times its UTF-8 bytes. Both are valid
states; both must save and read back whole, through the routes and through MCP, without gzip.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from baton_checkpoints.domain import limits

IDENTITY = {"Accept-Encoding": "identity"}
"""No gzip: the answer goes back base64-encoded, its largest form."""


def canonical_size(state: object) -> int:
    return len(json.dumps(state, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8"))


def save(http: httpx.Client, subject: str, state: Any) -> httpx.Response:
    """POST /v1/checkpoints with the body as UTF-8 JSON (never ASCII-escaped: its bytes are the ones counted)."""
    body = json.dumps({"subject_id": subject, "kind": "task_state", "state": state}, ensure_ascii=False)
    return http.post("/v1/checkpoints", content=body.encode("utf-8"), headers={"Content-Type": "application/json"})


def tool_call(http: httpx.Client, name: str, arguments: dict[str, Any]) -> httpx.Response:
    """One tools/call over plain HTTP, gzip not accepted."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return http.post("/mcp", json=message, headers={"Accept": "application/json", **IDENTITY})


def euro_state() -> dict[str, str]:
    """950,000 three-byte characters: 2,850,008 bytes of canonical JSON, 950,000 characters."""
    return {"t": "€" * 950_000}


def test_a_state_of_three_byte_characters_reads_whole_through_every_mcp_read_without_gzip(
    http: httpx.Client,
) -> None:
    # Given a saved state of 950,000 "€" (2.85 MB of canonical JSON: both copies of it would not fit Lambda's answer)
    state = euro_state()
    assert canonical_size(state) == 2_850_008
    subject = f"e2e-euro-{uuid.uuid4().hex}"
    saved = save(http, subject, state)
    assert saved.status_code == 201, saved.text[:500]
    checkpoint_id = saved.json()["data"]["checkpoint_id"]
    # When it is read through MCP by id, by subject and by resume, without gzip
    reads = {
        "get by id": tool_call(http, "baton_checkpoint_get", {"checkpoint_id": checkpoint_id}),
        "get by subject": tool_call(http, "baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"}),
        "resume": tool_call(http, "baton_resume", {"subject_id": subject}),
    }
    # Then each is a JSON-RPC result carrying the whole state in its structured content, never a 500
    statuses = {read: (answer.status_code, answer.text[:100]) for read, answer in reads.items()}
    assert all(status == 200 for status, _ in statuses.values()), statuses
    for read, answer in reads.items():
        assert answer.headers.get("content-encoding") is None, read
        result = answer.json()["result"]
        assert result["isError"] is False, (read, result.get("structuredContent"))
        structured = result["structuredContent"]
        record = structured["checkpoint"] if read == "resume" else structured
        assert record["state"] == state, read
        # the text copy is left out (it would not fit), replaced by a short note naming the structured content
        assert len(result["content"]) == 1, read
        assert len(result["content"][0]["text"].encode("utf-8")) < 1_000, read
        assert "structuredContent" in result["content"][0]["text"], read


def test_a_small_result_still_carries_its_text_copy(http: httpx.Client) -> None:
    # Given a small state
    subject = f"e2e-small-{uuid.uuid4().hex}"
    assert save(http, subject, {"step": "€"}).status_code == 201
    # When it is read through MCP
    answer = tool_call(http, "baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"})
    # Then the text content is the structured content as JSON
    result = answer.json()["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def emoji_state(size: int) -> dict[str, str]:
    """A state of `size` canonical bytes, made of four-byte emoji (and ASCII to reach the exact size)."""
    room = size - len('{"e":""}')
    return {"e": "😀" * (room // 4) + "a" * (room % 4)}


def test_a_state_of_emoji_within_the_limits_saves_and_reads_back_whole(http: httpx.Client) -> None:
    # Given a 2,900,000-byte state of emoji (725,000 of them: 8.7 MB once each is escaped as \\ud83d\\ude00)
    state = emoji_state(2_900_000)
    assert canonical_size(state) == 2_900_000
    subject = f"e2e-emoji-{uuid.uuid4().hex}"
    body = json.dumps({"subject_id": subject, "kind": "task_state", "state": state}, ensure_ascii=False)
    assert len(body.encode("utf-8")) <= limits.MAX_BODY_BYTES
    # When it is saved, then read by id and by lookup without gzip, and through MCP without gzip
    saved = save(http, subject, state)
    assert saved.status_code == 201, (saved.status_code, saved.text[:500])
    checkpoint_id = saved.json()["data"]["checkpoint_id"]
    by_id = http.get(f"/v1/checkpoints/{checkpoint_id}", headers=IDENTITY)
    looked_up = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}, headers=IDENTITY)
    by_tool = tool_call(http, "baton_checkpoint_get", {"checkpoint_id": checkpoint_id})
    # Then every read answers 200 with the whole state
    assert saved.json()["data"]["state_bytes"] == 2_900_000
    for answer in (by_id, looked_up):
        assert answer.status_code == 200, answer.text[:300]
        assert answer.headers.get("content-encoding") is None
        assert answer.json()["data"]["state"] == state
    assert by_tool.status_code == 200, by_tool.text[:300]
    assert by_tool.json()["result"]["structuredContent"]["state"] == state


def test_a_body_over_lambdas_event_limit_is_still_api_gateways_413(http: httpx.Client) -> None:
    # Given bodies under API Gateway's 10 MB whose event would pass Lambda's 6 MB: 6.5 MB of ASCII, and 3.2 MB of
    # quotes (each escaped to two bytes inside the event's body string)
    for body in (b"a" * 6_500_000, b'"' * 3_200_000):
        # When posted
        answer = http.post("/v1/checkpoints", content=body, headers={"Content-Type": "application/json"})
        # Then API Gateway's own 413 answers, before the function
        assert answer.status_code == 413
        assert answer.json() == {"message": "Request Entity Too Large"}
