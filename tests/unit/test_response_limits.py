"""Answers sized the way Lambda sizes them: the last guard before Lambda, and what an MCP result may carry.

No request can make an answer pass Lambda's limit (the routes' bounds and the MCP result's sizing see to that), so
the guard is tested here directly: handed an oversized result, it answers `500 RESPONSE_TOO_LARGE` and logs one
ERROR line an alarm can count, and the access line reports the status actually answered.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from baton_checkpoints.api import encoding
from baton_checkpoints.api.encoding import (
    LAMBDA_RESPONSE_LIMIT_BYTES,
    LARGE_RESPONSE_BYTES,
    answer_bytes,
    fit_for_lambda,
    fits_lambda,
    lambda_payload_bytes,
    oversized,
    within_lambda_limit,
)
from tests.conftest import Lines

EVENTS = Path(__file__).resolve().parents[2] / "events"


def result_of(body: str, base64_encoded: bool = False) -> dict[str, Any]:
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json", "ETag": 'W/"ckpt_x:1"'},
        "body": body,
        "isBase64Encoded": base64_encoded,
        "cookies": [],
    }


# --- how Lambda counts ----------------------------------------------------------------------------------------------


def test_lambda_counts_utf8_bytes_of_unescaped_characters_with_the_runtimes_separators() -> None:
    # the python3.13 runtime writes "€" as is (3 bytes), escapes quotes and control characters, U+2028 and U+2029
    # (simplejson), and puts a space after each colon and comma
    assert lambda_payload_bytes({"b": "€"}) == len('{"b": "€"}'.encode())
    assert lambda_payload_bytes({"b": "😀"}) == len('{"b": ""}') + 4
    assert lambda_payload_bytes({"b": '"'}) == len('{"b": "\\""}')
    assert lambda_payload_bytes({"b": "\x01"}) == len('{"b": "\\u0001"}')
    assert lambda_payload_bytes({"b": "\u2028\u2029"}) == len('{"b": "\\u2028\\u2029"}')
    assert lambda_payload_bytes({"a": 1, "b": True}) == len('{"a": 1, "b": true}')


def test_an_ordinary_answer_fits_without_an_exact_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[int] = []
    real = encoding.lambda_payload_bytes

    def counting(result: Any) -> int:
        size = real(result)
        measured.append(size)
        return size

    monkeypatch.setattr(encoding, "lambda_payload_bytes", counting)
    # a 900 KB body: six bytes per character of it (and of its headers) stays under the limit: nothing is serialized
    assert oversized(result_of("€" * 300_000)) is None
    assert measured == []
    # a body whose six bytes per character could reach the limit is measured exactly, once
    assert oversized(result_of("€" * 1_100_000)) is None
    assert len(measured) == 1


def test_near_the_limit_the_exact_measure_decides() -> None:
    # Given base64 bodies (ASCII, nothing escaped) just under and just over what the limit leaves them
    room = LAMBDA_RESPONSE_LIMIT_BYTES - lambda_payload_bytes(result_of("", base64_encoded=True))
    fits = result_of("A" * room, base64_encoded=True)
    over = result_of("A" * (room + 1), base64_encoded=True)
    # Then the first fits to the byte, the second is over by one
    assert lambda_payload_bytes(fits) == LAMBDA_RESPONSE_LIMIT_BYTES
    assert oversized(fits) is None
    assert oversized(over) == LAMBDA_RESPONSE_LIMIT_BYTES + 1


def test_characters_are_not_bytes_near_the_limit() -> None:
    # A body under the limit in characters but over it in bytes once the runtime writes it (U+2028 as six bytes)
    body = "\u2028" * 1_100_000
    result = result_of(body)
    assert len(json.dumps(result)) < LAMBDA_RESPONSE_LIMIT_BYTES * 2
    assert oversized(result) == lambda_payload_bytes(result) > LAMBDA_RESPONSE_LIMIT_BYTES


@pytest.mark.parametrize(
    ("body_bytes", "expected"),
    [
        (0, 0),
        (LARGE_RESPONSE_BYTES, 6 * LARGE_RESPONSE_BYTES),  # not base64: escaped in the result, six-fold at most
        (LARGE_RESPONSE_BYTES + 1, 4 * ((LARGE_RESPONSE_BYTES + 3) // 3)),  # base64: 4 bytes per 3, padded
        (3_000_000, 4_000_000),
    ],
)
def test_an_answers_largest_form_is_base64_past_one_megabyte(body_bytes: int, expected: int) -> None:
    assert answer_bytes(body_bytes) == expected


def test_fits_lambda_keeps_headroom_under_the_limit() -> None:
    largest = (LAMBDA_RESPONSE_LIMIT_BYTES - encoding.HEADROOM_BYTES) // 4 * 3
    assert fits_lambda(largest)
    assert not fits_lambda(largest + 3)
    # every body fit_for_lambda leaves as text fits, whatever it holds
    assert fits_lambda(LARGE_RESPONSE_BYTES)


# --- the guard ------------------------------------------------------------------------------------------------------


def test_an_answer_that_fits_passes_unchanged(logged: Lines) -> None:
    result = result_of('{"data":{}}')
    assert within_lambda_limit(result, "/v1/health", "req-1") is result
    assert logged() == []


def test_an_oversized_answer_becomes_response_too_large_with_one_error_line(logged: Lines) -> None:
    # Given a result whose base64 body passes Lambda's limit (a 5 MB answer, gzip not accepted)
    fitted = fit_for_lambda(result_of(json.dumps({"data": "x" * 5_000_000})), None)
    size = lambda_payload_bytes(fitted)
    assert size > LAMBDA_RESPONSE_LIMIT_BYTES
    # When it passes the guard
    answer = within_lambda_limit(fitted, "/v1/checkpoints/{checkpoint_id}", "req-2")
    # Then the answer is the contract's error envelope, 500 RESPONSE_TOO_LARGE, saying what to do and how large
    assert answer["statusCode"] == 500
    assert answer["headers"] == {"Content-Type": "application/json"}
    assert answer["isBase64Encoded"] is False
    body = json.loads(answer["body"])
    assert body["meta"] == {"request_id": "req-2"}
    assert body["error"]["code"] == "RESPONSE_TOO_LARGE"
    assert body["error"]["details"] == {"limit_bytes": LAMBDA_RESPONSE_LIMIT_BYTES, "actual_bytes": size}
    message = body["error"]["message"]
    assert f"{size:,} bytes" in message
    for advice in ("Accept-Encoding: gzip", "a smaller page with limit", "blobs", "request_id"):
        assert advice in message
    # and one ERROR line names the defect, the route's pattern, the size and the limit
    lines = logged()
    assert len(lines) == 1
    line = lines[0]
    assert line["level"] == "ERROR"
    assert line["message"] == "answer over Lambda's payload limit"
    assert line["defect"] == "response_too_large"
    assert line["route"] == "/v1/checkpoints/{checkpoint_id}"
    assert line["response_bytes"] == size
    assert line["limit_bytes"] == LAMBDA_RESPONSE_LIMIT_BYTES
    assert line["route_status"] == 200
    # and the replacement itself fits
    assert oversized(answer) is None


def test_the_handler_answers_and_logs_the_status_it_actually_sends(
    logged: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a route whose answer would pass the limit (health, enlarged past the resolver: no request can do it)
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

    from baton_checkpoints.handlers.api import handler

    served = APIGatewayHttpResolver.resolve

    def enlarged(self: Any, event: Any, context: Any) -> dict[str, Any]:
        result = served(self, event, context)
        return {**result, "body": json.dumps({"data": "x" * 5_000_000})}

    monkeypatch.setattr(APIGatewayHttpResolver, "resolve", enlarged)
    event = json.loads((EVENTS / "health.json").read_text())
    # When the api function handles it
    answer = handler(copy.deepcopy(event), None)
    # Then it answers 500 RESPONSE_TOO_LARGE, and its access line says 500, after the ERROR line
    assert answer["statusCode"] == 500
    assert json.loads(answer["body"])["error"]["code"] == "RESPONSE_TOO_LARGE"
    lines = logged()
    errors = [line for line in lines if line["level"] == "ERROR"]
    access = [line for line in lines if line["message"] == "request"]
    assert [(e["defect"], e["route"]) for e in errors] == [("response_too_large", "/v1/health")]
    assert [(a["status"], a["route"]) for a in access] == [(500, "/v1/health")]
    assert errors[0]["request_id"] == access[0]["request_id"] == event["requestContext"]["requestId"]


def test_an_answer_over_a_megabyte_goes_back_base64_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

    from baton_checkpoints.api.resolver import BatonResolver

    big = {"statusCode": 200, "headers": {}, "body": json.dumps({"data": "€" * 500_000})}
    monkeypatch.setattr(APIGatewayHttpResolver, "resolve", lambda self, event, context: dict(big))
    resolver = BatonResolver(lambda: None)  # type: ignore[arg-type,return-value]
    fitted = resolver.resolve({"headers": {}}, None)
    assert fitted["isBase64Encoded"] is True
    assert base64.b64decode(fitted["body"]).decode() == big["body"]


# --- what an MCP result carries --------------------------------------------------------------------------------------


def test_a_small_result_carries_its_text_copy() -> None:
    from baton_checkpoints.api.mcp.protocol import _result

    result = _result({"state": {"step": "€"}}, error=False)
    assert json.loads(result.content[0].text) == {"state": {"step": "€"}}  # type: ignore[union-attr]


def test_the_copy_is_left_out_when_both_copies_would_not_fit_counted_in_bytes() -> None:
    from baton_checkpoints.api.mcp.protocol import _result

    # 950,000 "€": under a million characters, 2.85 MB of JSON; twice that, base64, is 7.6 MB
    structured = {"state": {"t": "€" * 950_000}}
    result = _result(structured, error=False)
    note = result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is structured
    assert len(note.encode()) < 300
    assert "2,850," in note
    assert "structuredContent" in note


def test_quotes_count_twice_in_the_copy() -> None:
    from baton_checkpoints.api.mcp.protocol import _result

    # 1.4 MB of JSON (each quote written \"), whose copy doubles again: 4.2 MB together, 5.6 MB base64: it fits
    fits = {"q": '"' * 700_000}
    # 1.6 MB: counted without the copy's escapes it would seem to fit (3.2 MB, 4.3 MB base64); it is 6.4 MB base64
    over = {"q": '"' * 800_000}
    assert json.loads(_result(fits, error=False).content[0].text) == fits  # type: ignore[union-attr]
    assert "structuredContent" in _result(over, error=False).content[0].text  # type: ignore[union-attr]


def test_a_result_too_large_even_alone_is_the_tools_response_too_large_error(logged: Lines) -> None:
    from baton_checkpoints.api.mcp.protocol import _result

    # Given structured content that alone would pass Lambda's limit once base64-encoded
    result = _result({"state": "x" * 4_800_000}, error=False)
    # Then the tool answers isError with RESPONSE_TOO_LARGE (the contract's code, as its route would), logged
    assert result.is_error is True
    assert result.structured_content is not None
    assert result.structured_content["code"] == "RESPONSE_TOO_LARGE"
    assert json.loads(result.content[0].text)["code"] == "RESPONSE_TOO_LARGE"  # type: ignore[union-attr]
    [line] = logged()
    assert (line["level"], line["defect"], line["route"]) == ("ERROR", "response_too_large", "/mcp")
    assert line["response_bytes"] > LAMBDA_RESPONSE_LIMIT_BYTES


@pytest.mark.parametrize(("length", "accepted"), [(200, True), (201, False)])
def test_a_string_id_is_bounded_so_no_answer_grows_with_it(length: int, accepted: bool) -> None:
    from baton_checkpoints.api.mcp.protocol import answer
    from baton_checkpoints.api.operations import Context
    from baton_checkpoints.domain.access import Principal

    caller = Principal("acme", "agent", "key_1", frozenset({"mcp:call"}))
    no_services: Any = None  # ping needs none
    message = json.dumps({"jsonrpc": "2.0", "id": "€" * length, "method": "ping"}, ensure_ascii=False)
    answered = answer(message, {}, Context(caller, "req-3", 0, no_services))
    if accepted:
        assert (answered.status, answered.message) == (200, {"jsonrpc": "2.0", "id": "€" * length, "result": {}})
    else:
        assert answered.status == 400
        assert answered.message is not None
        assert answered.message["id"] is None
        assert answered.message["error"]["code"] == -32600
        assert "at most 200 characters" in answered.message["error"]["message"]


def test_the_sdk_raises_response_too_large_as_an_internal_error_it_does_not_retry() -> None:
    from baton_checkpoints.client.errors import InternalError, ResponseTooLargeError, error_from_answer

    details = {"limit_bytes": LAMBDA_RESPONSE_LIMIT_BYTES, "actual_bytes": 7_000_000}
    body = {"error": {"code": "RESPONSE_TOO_LARGE", "message": "m.", "details": details}, "meta": {"request_id": "r"}}
    error = error_from_answer(500, body, {}, "r")
    assert type(error) is ResponseTooLargeError
    assert isinstance(error, InternalError)
    assert error.gateway is False  # Baton's own answer: raised at once, never repeated
    assert dict(error.details) == details


@pytest.mark.parametrize(
    "result",
    [
        {},
        {"statusCode": 304, "headers": {"ETag": 'W/"c:1"'}, "body": "", "cookies": []},
        {"statusCode": 200, "headers": {"X": '\x01\u2028€😀"\\'}, "body": '\x01\u2028€😀"\\', "cookies": ["a=\x01"]},
        result_of('{"data":"€"}'),
    ],
)
def test_the_cheap_bound_is_never_below_the_exact_count(result: dict[str, Any]) -> None:
    bound = encoding._upper_bound(result)
    assert bound is not None
    assert bound >= lambda_payload_bytes(result)


def test_an_unusual_result_is_measured_exactly() -> None:
    assert encoding._upper_bound({"statusCode": 200, "multiValueHeaders": {"X": ["a"]}}) is None
    assert encoding._upper_bound({"statusCode": "200"}) is None
    assert oversized({"statusCode": 200, "multiValueHeaders": {"X": ["a" * 7_000_000]}}) is not None


def test_the_documented_id_bound_is_the_enforced_one() -> None:
    from baton_checkpoints.api.mcp.protocol import MAX_ID_CHARS
    from baton_checkpoints.api.routers.mcp import ID_MAX_CHARS

    assert ID_MAX_CHARS == MAX_ID_CHARS
