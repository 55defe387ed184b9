"""Review of `POST /mcp` (issue 10): what a client can send that the tools answer differently from their routes, and
what they answer that the contract forbids. Through the api handler, against in-process moto.

Tests that FAIL today prove a defect (see the report of review 10); the others pin what was checked and found sound.
"""

from __future__ import annotations

import copy
import json
import random
import string
import uuid
from typing import Any

import pytest

from baton_checkpoints.domain import limits
from baton_checkpoints.local.gateway import MAX_RESPONSE_BYTES
from tests import proof_counts
from tests.builders import KIND, SUBJECT, save
from tests.integration.driver import ApiDriver, Result, body_text, load_event

SUITE = "mcp review"
NOISE_ALPHABET = "".join(c for c in string.printable if c not in '"\\\t\n\r\x0b\x0c')
"""Characters JSON writes as themselves, so a state of them is as long in canonical JSON as in characters."""


def state_of(canonical_bytes: int) -> dict[str, str]:
    """A state of random printable text (it barely compresses) whose canonical JSON is `canonical_bytes` long."""
    chooser = random.Random(10)
    return {"noise": "".join(chooser.choice(NOISE_ALPHABET) for _ in range(canonical_bytes - len('{"noise":""}')))}


def send(api: ApiDriver, raw: str, **headers: str | None) -> Result:
    """POST `raw` to /mcp as the driver's key."""
    return api.invoke("mcp_tools_call", raw_body=raw, headers=dict(headers))


def tool_call(name: str, arguments_json: str, id: int = 1) -> str:
    """The raw JSON-RPC body of a tools/call whose arguments are `arguments_json`, written as is (so that it may hold
    what `json.dumps` would not write: escapes of lone surrogates, duplicate keys, big numbers)."""
    return (
        f'{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments_json}}}}}'
    )


def tool_result(answer: Result) -> dict[str, Any]:
    """The result of a tools/call answered as one (HTTP 200, a JSON-RPC result), checked for its text copy."""
    assert answer.status == 200, answer.raw_body[:500]
    result: dict[str, Any] = answer.body["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result


# -- Defect 1: a lone surrogate in an argument ---------------------------------------------------------------------

LONE_SURROGATE_ARGUMENTS = [
    ("list subject_id", "baton_checkpoint_list", '{"subject_id":"a\\ud800b"}', "/subject_id"),
    ("get checkpoint_id", "baton_checkpoint_get", '{"checkpoint_id":"ckpt_\\udfff"}', "/checkpoint_id"),
    ("delete checkpoint_id", "baton_checkpoint_delete", '{"checkpoint_id":"ckpt_\\udfff"}', "/checkpoint_id"),
    ("release checkpoint_id", "baton_lease_release", '{"checkpoint_id":"ckpt_\\udfff","lease_token":"1.a"}',
     "/checkpoint_id"),
    ("acquire checkpoint_id", "baton_lease_acquire", '{"checkpoint_id":"ckpt_\\udfff","ttl_seconds":60}',
     "/checkpoint_id"),
    ("lookup subject_id", "baton_checkpoint_get", '{"subject_id":"a\\ud800","kind":"task_state"}', "/subject_id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "tool", "arguments", "pointer"), LONE_SURROGATE_ARGUMENTS, ids=[a[0] for a in LONE_SURROGATE_ARGUMENTS]
)
def test_a_lone_surrogate_in_a_path_or_query_argument_is_a_tool_error_never_a_500(
    api: ApiDriver, label: str, tool: str, arguments: str, pointer: str
) -> None:
    """FAILS today for path arguments: `tools._segment` percent-encodes with `quote`, which raises
    UnicodeEncodeError on a lone surrogate (valid JSON: `"\\ud800"`), outside the `ValidationFailed` that
    `protocol._call` catches: POST /mcp answers HTTP 500 INTERNAL, not even a JSON-RPC message."""
    answer = send(api, tool_call(tool, arguments))
    proof_counts.record(SUITE, surrogate_cases=1)
    assert answer.status == 200, (label, answer.status, answer.raw_body[:300])
    result = tool_result(answer)
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "VALIDATION_ERROR", result
    assert pointer in result["structuredContent"]["message"]


def test_a_lone_surrogate_in_a_saved_state_is_the_routes_validation_error(api: ApiDriver) -> None:
    """FAILS today: the route answers 400 VALIDATION_ERROR (`/state cannot be canonicalized`); the tool answers
    INTERNAL. `dispatch._event` re-serializes the arguments with `ensure_ascii=False`, which turns the escape into a
    raw lone surrogate, and the twin's gate (`BatonResolver._raw_body`, `raw.encode("utf-8")`, outside its try)
    raises UnicodeEncodeError: a 500 of the route, logged as a defect."""
    state = '{"note":"a\\ud800b"}'
    by_route = api.invoke(
        "save_checkpoint",
        raw_body=f'{{"subject_id":"surrogate","kind":"{KIND}","state":{state}}}',
        headers={"idempotency-key": None},
    )
    assert by_route.status == 400
    assert by_route.error["code"] == "VALIDATION_ERROR"
    result = tool_result(
        send(api, tool_call("baton_checkpoint_save", f'{{"subject_id":"surrogate","kind":"{KIND}","state":{state}}}'))
    )
    assert result["isError"] is True
    assert {k: result["structuredContent"][k] for k in ("code", "message")} == {
        k: by_route.error[k] for k in ("code", "message")
    }


# -- Defect 2: the envelope's strict parse judges the arguments -----------------------------------------------------


def nested_lists(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_state_the_route_accepts_is_accepted_by_the_save_tool(api: ApiDriver) -> None:
    """FAILS today: a state nested 63 deep is saved by the route (its body is 64 deep, the contract's limit); the
    tool's message wraps it in params/arguments, two levels more, and `protocol._message` refuses the whole message
    as -32700 Parse error with id null (HTTP 400): the client never learns which call failed, and cannot save it."""
    depth = 63
    by_route = api.invoke(
        "save_checkpoint",
        raw_body=f'{{"subject_id":"deep-route","kind":"{KIND}","state":{nested_lists(depth)}}}',
        headers={"idempotency-key": None},
    )
    assert by_route.status == 201, by_route.raw_body[:300]
    answer = send(
        api,
        tool_call(
            "baton_checkpoint_save", f'{{"subject_id":"deep-tool","kind":"{KIND}","state":{nested_lists(depth)}}}'
        ),
    )
    assert answer.status == 200, answer.raw_body[:300]
    result = tool_result(answer)
    assert result["isError"] is False, result
    assert result["structuredContent"]["state_hash"] == by_route.data["state_hash"]


REFUSED_BY_THE_ROUTE = [
    ("a number past 2^53", '{"n":9007199254740993}', "/state/n"),
    ("a duplicate key", '{"n":1,"n":2}', "/state/n"),
]


@pytest.mark.parametrize(("label", "state", "pointer"), REFUSED_BY_THE_ROUTE, ids=[r[0] for r in REFUSED_BY_THE_ROUTE])
def test_a_state_the_route_refuses_is_a_tool_error_with_the_routes_code(
    api: ApiDriver, label: str, state: str, pointer: str
) -> None:
    """FAILS today: the route answers VALIDATION_ERROR naming the field; the tool call is answered as a malformed
    message (-32700, id null, HTTP 400), which an MCP client raises as a protocol failure rather than showing the
    model a tool error it can fix (the issue: a failing tool returns isError with the contract's {code, message})."""
    by_route = api.invoke(
        "save_checkpoint",
        raw_body=f'{{"subject_id":"refused","kind":"{KIND}","state":{state}}}',
        headers={"idempotency-key": None},
    )
    assert (by_route.status, by_route.error["details"]["errors"][0]["pointer"]) == (400, pointer)
    answer = send(
        api, tool_call("baton_checkpoint_save", f'{{"subject_id":"refused","kind":"{KIND}","state":{state}}}')
    )
    proof_counts.record(SUITE, refused_state_cases=1)
    assert answer.status == 200, (label, answer.raw_body[:300])
    result = tool_result(answer)
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "VALIDATION_ERROR"
    assert result["structuredContent"]["details"]["errors"][0]["pointer"] == pointer


# -- Defect 3: a large state read through a tool does not fit Lambda's payload -------------------------------------


def lambda_result(api: ApiDriver, message: dict[str, Any], accept_encoding: str | None) -> dict[str, Any]:
    """The api handler's own result for one /mcp message: what Lambda must return (at most 6 MB serialized)."""
    from baton_checkpoints.handlers.api import handler

    event = copy.deepcopy(load_event("mcp_tools_call"))
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    if accept_encoding is not None:
        event["headers"]["accept-encoding"] = accept_encoding
    event["body"] = json.dumps(message)
    result: dict[str, Any] = handler(event, None)
    return result


def test_reading_the_largest_state_through_a_tool_fits_lambdas_payload(api: ApiDriver) -> None:
    """FAILS today: a state of 3,000,000 bytes (the contract's limit, saved and read by the routes in answers of
    about 4 MB) comes back from baton_checkpoint_get and baton_resume as 8.0 MB (6.6 MB with gzip) of Lambda
    payload: `protocol._result` sends the data twice (structuredContent and its JSON text copy), then base64.
    Lambda refuses it (API Gateway 500/502; `baton serve` answers 500 "Internal Server Error"): any state over
    about 2.4 MB cannot be read through MCP."""
    state = state_of(limits.MAX_STATE_BYTES)
    arguments = {"subject_id": SUBJECT, "kind": KIND, "state": state}
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "baton_checkpoint_save", "arguments": arguments},
    }
    saved = lambda_result(api, message, None)
    assert json.loads(body_text(saved))["result"]["isError"] is False
    sizes: dict[str, int] = {}
    for tool, read_arguments in (
        ("baton_checkpoint_get", {"subject_id": SUBJECT, "kind": KIND}),
        ("baton_resume", {"subject_id": SUBJECT}),
    ):
        for accept_encoding in (None, "gzip"):
            message = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": tool, "arguments": read_arguments},
            }
            result = lambda_result(api, message, accept_encoding)
            sizes[f"{tool} gzip={accept_encoding is not None}"] = len(json.dumps(result))
            proof_counts.record(SUITE, large_reads=1)
    assert all(size <= MAX_RESPONSE_BYTES for size in sizes.values()), sizes


# -- Checked and found sound -----------------------------------------------------------------------------------------


def test_ids_are_echoed_as_sent_and_notifications_get_nothing(api: ApiDriver) -> None:
    for id_json, echoed in (("0", 0), ('""', ""), ('"a-string"', "a-string"), ("-5", -5), ("1.0", 1)):
        answer = send(api, f'{{"jsonrpc":"2.0","id":{id_json},"method":"ping"}}')
        assert (answer.status, answer.body) == (200, {"jsonrpc": "2.0", "id": echoed, "result": {}}), id_json
    # a tools/call sent as a notification does nothing and answers nothing
    notification = '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"baton_checkpoint_save","arguments":' + (
        f'{{"subject_id":"notified","kind":"{KIND}","state":1}}}}}}'
    )
    assert (send(api, notification).status, send(api, notification).raw_body) == (202, "")
    assert api.invoke("lookup_checkpoint", query={"subject_id": "notified", "kind": KIND}).status == 404
    proof_counts.record(SUITE, id_cases=5)


def test_after_failing_tool_calls_the_next_one_answers_as_its_route(api: ApiDriver) -> None:
    """Nothing of a failed call (an operation's error, a refused state, a refused argument) stays behind: the next
    call answers what the route answers, body and all."""
    checkpoint_id = save(api, subject_id="after-errors", state={"step": 4}).data["checkpoint_id"]
    failing = [
        tool_call("baton_checkpoint_get", '{"checkpoint_id":"ckpt_' + "0" * 32 + '"}'),  # NOT_FOUND
        tool_call("baton_checkpoint_save", '{"subject_id":"x","kind":"diary","state":1}'),  # VALIDATION_ERROR
        tool_call("baton_checkpoint_save", f'{{"subject_id":"x","kind":"{KIND}","state":"\\udc00"}}'),  # the 500 above
        tool_call("baton_checkpoint_list", '{"subject_id":"\\udc00"}'),  # the outer 500 above
    ]
    for raw in failing:
        send(api, raw)
        result = tool_result(send(api, tool_call("baton_checkpoint_get", f'{{"checkpoint_id":"{checkpoint_id}"}}')))
        by_route = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")
        assert result["structuredContent"] == by_route.data
        proof_counts.record(SUITE, after_error_cases=1)


def test_the_tools_answer_the_same_data_as_their_routes(api: ApiDriver) -> None:
    checkpoint_id = save(api, subject_id="same-data", state={"step": 5}).data["checkpoint_id"]
    pairs: list[tuple[str, str, Result]] = [
        ("baton_checkpoint_get", f'{{"subject_id":"same-data","kind":"{KIND}"}}',
         api.invoke("lookup_checkpoint", query={"subject_id": "same-data", "kind": KIND})),
        ("baton_resume", '{"subject_id":"same-data"}', api.invoke("resume", body={"subject_id": "same-data"})),
        ("baton_checkpoint_list", '{"subject_id":"same-data"}',
         api.invoke("list_subject_checkpoints", path="/v1/subjects/same-data/checkpoints", query={})),
    ]  # fmt: skip
    for tool, arguments, by_route in pairs:
        result = tool_result(send(api, tool_call(tool, arguments)))
        structured = result["structuredContent"]
        expected = {"checkpoints": by_route.data, "next_cursor": None} if tool.endswith("list") else by_route.data
        assert structured == expected, tool
    deleted = tool_result(send(api, tool_call("baton_checkpoint_delete", f'{{"checkpoint_id":"{checkpoint_id}"}}')))
    assert deleted["structuredContent"] == {"checkpoint_id": checkpoint_id, "deleted": True}
    proof_counts.record(SUITE, same_data_pairs=4)
