"""Every MCP tool's answer, measured as Lambda measures it: through the api handler against in-process moto, gzip not
accepted (an answer's largest form), with a state of 950,000 "€" (2.85 MB of canonical JSON, under a million
characters: where counting characters and counting bytes part ways)."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from baton_checkpoints.api.encoding import LAMBDA_RESPONSE_LIMIT_BYTES, lambda_payload_bytes
from tests import proof_counts
from tests.integration.driver import ApiDriver, body_text, load_event

SUITE = "mcp sizes"


def lambda_result(api: ApiDriver, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The api handler's own result for one tools/call, gzip not accepted: what Lambda must return."""
    from baton_checkpoints.handlers.api import handler

    event = copy.deepcopy(load_event("mcp_tools_call"))
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    event["headers"].pop("accept-encoding", None)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    event["body"] = json.dumps(message, ensure_ascii=False)
    result: dict[str, Any] = handler(event, None)
    return result


def test_every_tools_answer_fits_lambda_and_carries_its_copy_when_it_can(api: ApiDriver) -> None:
    state = {"t": "€" * 950_000}
    subject = f"sizes-{uuid.uuid4().hex}"
    answers: dict[str, dict[str, Any]] = {}

    def call(label: str, name: str, **arguments: Any) -> dict[str, Any]:
        result = lambda_result(api, name, arguments)
        answers[label] = result
        proof_counts.record(SUITE, tool_answers=1)
        body = json.loads(body_text(result))
        assert "result" in body, (label, body)
        tool: dict[str, Any] = body["result"]
        return tool

    # When every tool is called on a checkpoint of that state
    saved = call("save", "baton_checkpoint_save", subject_id=subject, kind="task_state", state=state)
    checkpoint_id = saved["structuredContent"]["checkpoint_id"]
    reads = {
        "get by id": call("get by id", "baton_checkpoint_get", checkpoint_id=checkpoint_id),
        "get by subject": call("get by subject", "baton_checkpoint_get", subject_id=subject, kind="task_state"),
        "resume": call("resume", "baton_resume", subject_id=subject),
    }
    small = {
        "save": saved,
        "list": call("list", "baton_checkpoint_list", subject_id=subject),
        "lease": call("lease", "baton_lease_acquire", checkpoint_id=checkpoint_id, ttl_seconds=60),
    }
    token = small["lease"]["structuredContent"]["lease_token"]
    small["release"] = call("release", "baton_lease_release", checkpoint_id=checkpoint_id, lease_token=token)
    small["delete"] = call("delete", "baton_checkpoint_delete", checkpoint_id=checkpoint_id)
    # Then every answer is 200 and within Lambda's limit, counted in bytes as the runtime writes it
    sizes = {label: lambda_payload_bytes(result) for label, result in answers.items()}
    assert {label: result["statusCode"] for label, result in answers.items()} == dict.fromkeys(answers, 200)
    assert all(size <= LAMBDA_RESPONSE_LIMIT_BYTES for size in sizes.values()), sizes
    # the reads carry the state once, whole, with a note for text; the small answers carry their copy
    for label, read in reads.items():
        record = read["structuredContent"]["checkpoint"] if label == "resume" else read["structuredContent"]
        assert record["state"] == state, label
        assert "structuredContent" in read["content"][0]["text"], label
    for label, answer in small.items():
        assert answer["isError"] is False, (label, answer["structuredContent"])
        assert json.loads(answer["content"][0]["text"]) == answer["structuredContent"], label
        assert sizes[label] < 10_000, (label, sizes[label])


def test_a_resume_of_numbers_python_writes_longer_fits_or_is_omitted_never_too_large(api: ApiDriver) -> None:
    """The tool's result is the route's data parsed and written again, and Python writes 1e-7 as 1e-07: a ready
    OpenCheckpoint document of 440,000 such numbers (2.2 MB canonical, its operation repeated as pending: 4.4 MB of
    data) grew to 7 MB and answered RESPONSE_TOO_LARGE with an ERROR line. Through MCP it is omitted, with the bytes
    it needs; the record itself still reads whole through the tool."""
    subject = f"floats-{uuid.uuid4().hex}"
    state = {
        "opencheckpoint": "0.1",
        "task": {"title": "t", "status": "s"},
        "operations": [{"kind": "k", "status": "pending", "description": "d", "x": [1e-7] * 440_000}],
    }
    saved = lambda_result(
        api,
        "baton_checkpoint_save",
        {"subject_id": subject, "kind": "task_state", "state": state, "format": "opencheckpoint/0.1"},
    )
    assert saved["statusCode"] == 200
    for arguments in ({"subject_id": subject}, {"subject_id": subject, "budget_bytes": 6_000_000}):
        result = lambda_result(api, "baton_resume", arguments)
        assert lambda_payload_bytes(result) <= LAMBDA_RESPONSE_LIMIT_BYTES
        tool = json.loads(body_text(result))["result"]
        assert tool["isError"] is False, tool["structuredContent"]
        assert tool["structuredContent"]["status"] == "omitted"
        assert tool["structuredContent"]["required_bytes"] > 4_000_000
    small = lambda_result(api, "baton_resume", {"subject_id": subject, "budget_bytes": 2048})
    assert json.loads(body_text(small))["result"]["structuredContent"]["status"] == "omitted"
    whole = lambda_result(api, "baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"})
    assert lambda_payload_bytes(whole) <= LAMBDA_RESPONSE_LIMIT_BYTES
    record = json.loads(body_text(whole))["result"]["structuredContent"]
    assert record["state"]["operations"][0]["x"][-1] == 1e-7
    proof_counts.record(SUITE, tool_answers=5)
