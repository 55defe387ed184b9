"""The local API Gateway: HTTP requests become HTTP API payload 2.0 events, handler results become responses."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from baton_checkpoints.local.gateway import (
    MAX_EVENT_BYTES,
    MAX_RESPONSE_BYTES,
    FramingError,
    Gateway,
    build_event,
    chunk_size,
    content_length,
    event_bytes,
    framing_error,
    gateway_error,
    result_bytes,
    to_answer,
)

NOW = 1_785_412_084.652  # 2026-07-30T11:48:04.652Z


def event(
    target: str = "/v1/checkpoints",
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
    method: str = "GET",
) -> dict[str, Any]:
    """The event for one request, with a fixed request id, source and time."""
    return build_event(method, target, headers or [], body, "203.0.113.9", request_id="req-abc", now=NOW)


# --- build_event: envelope ------------------------------------------------------------------------------------


def test_the_event_is_an_http_api_v2_event_with_its_request_context() -> None:
    # Given a POST with a host and a user agent
    headers = [("Host", "api.example.com"), ("User-Agent", "sdk/1.0"), ("Content-Type", "application/json")]
    # When the event is built
    built = event("/v1/checkpoints", headers, b"{}", method="POST")
    # Then it has the payload 2.0 shape with method, path, source, request id and time
    assert built["version"] == "2.0"
    assert built["routeKey"] == "$default"
    context = built["requestContext"]
    assert context["http"] == {
        "method": "POST",
        "path": "/v1/checkpoints",
        "protocol": "HTTP/1.1",
        "sourceIp": "203.0.113.9",
        "userAgent": "sdk/1.0",
    }
    assert context["requestId"] == "req-abc"
    assert context["timeEpoch"] == 1_785_412_084_652
    assert context["time"] == "30/Jul/2026:11:48:04 +0000"
    assert context["domainName"] == "api.example.com"
    assert context["domainPrefix"] == "api"
    assert context["stage"] == "$default"


def test_a_request_id_is_made_up_when_none_is_given() -> None:
    # Given no request id
    # When two events are built
    first = build_event("GET", "/", [], b"", "127.0.0.1")
    second = build_event("GET", "/", [], b"", "127.0.0.1")
    # Then each has its own non-empty id
    assert first["requestContext"]["requestId"]
    assert first["requestContext"]["requestId"] != second["requestContext"]["requestId"]


@pytest.mark.parametrize(
    ("target", "raw_path", "raw_query"),
    [
        ("/v1/health", "/v1/health", ""),
        ("/v1/subjects/a%2Fb/checkpoints", "/v1/subjects/a%2Fb/checkpoints", ""),
        ("/v1/checkpoints?subject_id=a%20b&kind=cursor", "/v1/checkpoints", "subject_id=a%20b&kind=cursor"),
        ("/v1/x?", "/v1/x", ""),
        ("", "/", ""),
        ("/", "/", ""),
    ],
)
def test_raw_path_and_raw_query_string_are_kept_as_sent(target: str, raw_path: str, raw_query: str) -> None:
    # Given a request target, percent-encoded or not
    # When the event is built
    built = event(target)
    # Then rawPath and http.path are the path as sent, and rawQueryString the query as sent
    assert built["rawPath"] == raw_path
    assert built["requestContext"]["http"]["path"] == raw_path
    assert built["rawQueryString"] == raw_query


# --- build_event: headers and cookies -------------------------------------------------------------------------


def test_header_names_are_lowercased_and_repeats_joined_by_commas() -> None:
    # Given mixed-case headers, one of them sent twice under different cases
    headers = [("Authorization", "Bearer k"), ("X-Trace", "a"), ("x-trace", "b"), ("If-None-Match", 'W/"c:1"')]
    # When the event is built
    built = event(headers=headers)
    # Then names are lowercase and the repeated values are joined with commas, in order
    assert built["headers"] == {"authorization": "Bearer k", "x-trace": "a,b", "if-none-match": 'W/"c:1"'}


def test_cookies_are_split_out_of_the_headers() -> None:
    # Given two Cookie headers, one with several cookies and stray separators
    headers = [("Cookie", "a=1; b=2;"), ("cookie", " c=3 "), ("Accept", "*/*")]
    # When the event is built
    built = event(headers=headers)
    # Then each cookie is its own entry in `cookies`, and no cookie header remains
    assert built["cookies"] == ["a=1", "b=2", "c=3"]
    assert "cookie" not in built["headers"]
    assert built["headers"] == {"accept": "*/*"}


def test_no_cookies_means_no_cookies_field() -> None:
    # Given a request without cookies
    # When the event is built
    # Then the event has no cookies field (as API Gateway omits it)
    assert "cookies" not in event()


# --- build_event: query string --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "parameters"),
    [
        ("kind=cursor", {"kind": "cursor"}),
        ("a=1&a=2&b=x", {"a": "1,2", "b": "x"}),
        ("subject_id=a%2Fb%20c", {"subject_id": "a/b c"}),
        ("subject_id=caf%C3%A9", {"subject_id": "café"}),
        ("empty=&flag", {"empty": "", "flag": ""}),
        ("cursor=eyJiIjoiYiJ9", {"cursor": "eyJiIjoiYiJ9"}),
    ],
)
def test_query_parameters_are_decoded_and_repeats_joined_by_commas(query: str, parameters: dict[str, str]) -> None:
    # Given a query string
    # When the event is built
    built = event("/v1/checkpoints?" + query)
    # Then queryStringParameters holds the decoded values, repeated names joined by commas, blanks kept
    assert built["queryStringParameters"] == parameters
    assert built["rawQueryString"] == query


def test_no_query_string_means_no_parameters_field() -> None:
    # Given a request without a query string
    # When the event is built
    # Then there is no queryStringParameters field
    assert "queryStringParameters" not in event("/v1/health")


# --- build_event: bodies --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/problem+json",
        "text/plain",
    ],
)
def test_text_bodies_are_passed_as_text(content_type: str) -> None:
    # Given a UTF-8 body of a textual media type
    body = '{"subject_id": "café ☕"}'.encode()
    # When the event is built
    built = event(headers=[("Content-Type", content_type)], body=body, method="POST")
    # Then the body is the text itself, not base64
    assert built["body"] == '{"subject_id": "café ☕"}'
    assert built["isBase64Encoded"] is False


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/octet-stream", b"\x00\x01\xff"),
        ("image/png", b"\x89PNG\r\n"),
        (None, b'{"a": 1}'),
        ("application/json", b'{"a": "\xff"}'),  # declared JSON but not UTF-8
    ],
)
def test_binary_bodies_are_passed_as_base64(content_type: str | None, body: bytes) -> None:
    # Given a binary body, a body without a content type, or JSON that is not valid UTF-8
    headers = [] if content_type is None else [("Content-Type", content_type)]
    # When the event is built
    built = event(headers=headers, body=body, method="POST")
    # Then the body is base64 and flagged so, and decodes to the exact bytes
    assert built["isBase64Encoded"] is True
    assert base64.b64decode(built["body"]) == body


def test_an_empty_body_is_left_out() -> None:
    # Given a request without a body
    # When the event is built
    built = event(headers=[("Content-Type", "application/json")])
    # Then the event has no body and is not base64
    assert "body" not in built
    assert built["isBase64Encoded"] is False


def test_the_event_is_json_serializable() -> None:
    # Given a request with every feature
    built = event(
        "/v1/checkpoints?a=1&a=2",
        [("Cookie", "s=1"), ("Content-Type", "application/octet-stream")],
        b"\x00\xff",
        method="POST",
    )
    # When it is serialized as Lambda would
    # Then it survives the trip unchanged
    assert json.loads(json.dumps(built)) == built


# --- to_answer ------------------------------------------------------------------------------------------------


def test_a_text_result_becomes_the_response() -> None:
    # Given a handler result with a status, headers and a text body
    result = {"statusCode": 201, "headers": {"Content-Type": "application/json", "ETag": 'W/"c:1"'}, "body": '{"é":1}'}
    # When it becomes the response
    answer = to_answer(result)
    # Then status, headers and UTF-8 body carry over
    assert answer.status == 201
    assert answer.headers == [("Content-Type", "application/json"), ("ETag", 'W/"c:1"')]
    assert answer.body == '{"é":1}'.encode()


def test_a_base64_result_body_is_decoded() -> None:
    # Given a result whose body is base64 (a gzip-compressed answer, say)
    raw = b"\x1f\x8b\x08\x00binary\xff"
    result = {"statusCode": 200, "body": base64.b64encode(raw).decode("ascii"), "isBase64Encoded": True}
    # When it becomes the response
    # Then the client gets the raw bytes
    assert to_answer(result).body == raw


def test_result_cookies_become_set_cookie_headers() -> None:
    # Given a result with two cookies and multi-value headers
    result = {
        "statusCode": 200,
        "headers": {"X-One": "1"},
        "multiValueHeaders": {"X-Many": ["a", "b"]},
        "cookies": ["s=1; Path=/", "t=2; HttpOnly"],
        "body": "",
    }
    # When it becomes the response
    answer = to_answer(result)
    # Then each cookie is its own Set-Cookie header, and multi-value headers are repeated
    assert answer.headers == [
        ("X-One", "1"),
        ("X-Many", "a"),
        ("X-Many", "b"),
        ("Set-Cookie", "s=1; Path=/"),
        ("Set-Cookie", "t=2; HttpOnly"),
    ]


def test_a_bare_result_is_a_200_with_an_empty_body() -> None:
    # Given a result with neither status nor body
    # When it becomes the response
    answer = to_answer({})
    # Then it is 200 with nothing in it
    assert (answer.status, answer.headers, answer.body) == (200, [], b"")


def test_a_result_over_lambdas_response_limit_is_api_gateways_500() -> None:
    # Given a result larger than Lambda may return
    result = {"statusCode": 200, "body": "x" * (MAX_RESPONSE_BYTES + 1)}
    # When it becomes the response
    answer = to_answer(result)
    # Then the client sees API Gateway's own 500 body
    assert answer == gateway_error(500, "Internal Server Error")
    assert json.loads(answer.body) == {"message": "Internal Server Error"}
    assert answer.status == 500


# --- sizes as AWS counts them --------------------------------------------------------------------------------------


class Containers:
    """Stands for the gateway's process pool: records the events it is handed and answers each with `result`."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.events: list[dict[str, Any]] = []

    def submit(self, _function: Any, _target: str, event: dict[str, Any], _context: Any) -> Future[dict[str, Any]]:
        self.events.append(event)
        done: Future[dict[str, Any]] = Future()
        done.set_result(self.result)
        return done

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """Nothing runs."""


@pytest.fixture
def gateway() -> Iterator[tuple[Gateway, Containers]]:
    """A gateway whose containers answer 200 at once (no process is started)."""
    built = Gateway("baton_checkpoints.handlers.api:handler", containers=1)
    real = built._pool
    containers = Containers({"statusCode": 200, "body": "{}"})
    built._pool = containers  # type: ignore[assignment]
    yield built, containers
    real.shutdown()


def json_event(body: str) -> dict[str, Any]:
    return event("/v1/checkpoints", [("Content-Type", "application/json")], body.encode("utf-8"), method="POST")


def test_lambdas_limits_are_its_exact_figures() -> None:
    # 6 MiB for the event ("Request must be smaller than 6291456 bytes"); 100 bytes more for the result
    # ("Response payload size exceeded maximum allowed payload size (6291556 bytes)")
    assert MAX_EVENT_BYTES == 6_291_456
    assert MAX_RESPONSE_BYTES == 6_291_556


def test_an_event_counts_the_utf8_bytes_api_gateway_sends_not_escaped_characters() -> None:
    # Given the same request with a body of one character
    base = event_bytes(json_event("a"))
    # Then each character weighs its UTF-8 bytes in the event; only what JSON escapes grows
    for character, weight in (("a", 1), ("é", 2), ("€", 3), ("😀", 4), ('"', 2), ("\\", 2), ("\x01", 6)):
        assert event_bytes(json_event(character)) == base - 1 + weight, character
    # and the whole is the event's compact UTF-8 JSON
    built = json_event('{"t":"€😀"}')
    assert event_bytes(built) == len(json.dumps(built, ensure_ascii=False, separators=(",", ":")).encode())


def test_a_body_of_emoji_within_the_contracts_limits_reaches_the_function(
    gateway: tuple[Gateway, Containers],
) -> None:
    # Given a body of 749,996 emoji, 3 MB (9 MB if each were counted escaped, as \ud83d\ude00)
    body = '{"state":"' + "😀" * 749_996 + '"}'
    assert len(body.encode()) == 2_999_996
    served, containers = gateway
    # When API Gateway hands it on
    answer = served.invoke(json_event(body))
    # Then the function gets it (Lambda counts its 3 MB, not 9)
    assert answer.status == 200
    assert len(containers.events) == 1


def test_an_event_over_six_mebibytes_in_bytes_is_api_gateways_413(gateway: tuple[Gateway, Containers]) -> None:
    served, containers = gateway
    # Given bodies under 10 MB whose events are over 6,291,456 bytes: quotes (two bytes each in the event) and "€"
    for body in ('"' * 3_150_000, "€" * 2_100_000):
        answer = served.invoke(json_event(body))
        # Then API Gateway answers 413 itself, and the function never runs
        assert (answer.status, json.loads(answer.body)) == (413, {"message": "Request Entity Too Large"})
    assert containers.events == []


def test_the_largest_event_is_accepted_to_the_byte(gateway: tuple[Gateway, Containers]) -> None:
    served, containers = gateway
    empty = event_bytes(json_event("a"))
    exactly = json_event("€" * ((MAX_EVENT_BYTES - empty + 1) // 3) + "a" * ((MAX_EVENT_BYTES - empty + 1) % 3))
    assert event_bytes(exactly) == MAX_EVENT_BYTES
    assert served.invoke(exactly).status == 200
    one_more = json_event(exactly["body"] + "a")
    assert served.invoke(one_more).status == 413
    assert len(containers.events) == 1


def test_a_result_counts_as_the_python313_runtime_writes_it() -> None:
    # Given results under the limit in UTF-8 bytes, but over it once ASCII-escaped
    fits = {"statusCode": 200, "body": "€" * 2_000_000}
    assert result_bytes(fits) == len(json.dumps(fits, ensure_ascii=False).encode()) < MAX_RESPONSE_BYTES
    assert len(json.dumps(fits)) > MAX_RESPONSE_BYTES
    # Then Lambda returns them (the runtime writes "€" as its 3 bytes)
    assert to_answer(fits).status == 200
    # and a result over the limit only through what the runtime escapes (U+2028: six bytes, not three) is not
    escaped = {"statusCode": 200, "body": "\u2028" * 2_000_000}
    assert len(json.dumps(escaped, ensure_ascii=False).encode()) < MAX_RESPONSE_BYTES < result_bytes(escaped)
    assert to_answer(escaped).status == 500


def test_the_largest_result_is_returned_to_the_byte() -> None:
    body = "a" * (MAX_RESPONSE_BYTES - result_bytes({"statusCode": 200, "body": ""}))
    assert result_bytes({"statusCode": 200, "body": body}) == MAX_RESPONSE_BYTES
    assert to_answer({"statusCode": 200, "body": body}).status == 200
    assert to_answer({"statusCode": 200, "body": body + "a"}).status == 500


# --- request framing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "length"),
    [([], None), (["0"], 0), (["42"], 42), (["007"], 7), (["42", "42"], 42), (["42, 42"], 42), ([" 5 "], 5)],
)
def test_a_valid_content_length_is_read(values: list[str], length: int | None) -> None:
    # Given Content-Length fields that agree on one decimal length (or none at all)
    # When they are read
    # Then the length is that number
    assert content_length(values) == length


@pytest.mark.parametrize(
    "values",
    [["abc"], ["-1"], ["+5"], ["1.0"], ["0x10"], [""], ["1 2"], ["٣"], ["42", "43"], ["42, 43"], ["1_000"]],
)
def test_a_malformed_content_length_is_a_framing_error_naming_the_header(values: list[str]) -> None:
    # Given Content-Length fields that are not one non-negative decimal integer
    # When they are read
    with pytest.raises(FramingError) as raised:
        content_length(values)
    # Then the error names the header and the rule, and answers 400 in the contract's envelope
    assert raised.value.header == "Content-Length"
    answer = framing_error(raised.value, "req-1")
    assert answer.status == 400
    assert json.loads(answer.body) == {
        "error": {
            "code": "VALIDATION_ERROR",
            "message": raised.value.message,
            "details": {"errors": [{"pointer": "/Content-Length", "message": raised.value.message, "in": "header"}]},
        },
        "meta": {"request_id": "req-1"},
    }
    assert "Content-Length" in raised.value.message


@pytest.mark.parametrize(
    ("line", "size"),
    [
        (b"0\r\n", 0),
        (b"1a\r\n", 26),
        (b"1A\r\n", 26),
        (b"0010\r\n", 16),
        (b"5;name=value\r\n", 5),
        (b"5 ;ext\r\n", 5),
        (b"5\n", 5),
    ],
)
def test_a_chunk_size_line_is_read_as_hex(line: bytes, size: int) -> None:
    # Given a chunk-size line (hex digits, optional extensions, CRLF)
    # When it is read
    # Then the size is the hex number
    assert chunk_size(line) == size


@pytest.mark.parametrize(
    "line", [b"zz\r\n", b"0x5\r\n", b"-5\r\n", b"+5\r\n", b"\r\n", b" 5\r\n", b"5_0\r\n", b"5", b"", b"\xd9\xa3\r\n"]
)
def test_a_malformed_chunk_size_line_is_refused(line: bytes) -> None:
    # Given a line that is not `hex-digits [; extensions] CRLF`
    # When it is read
    # Then it is refused (where Python's int(..., 16) would take several of these)
    assert chunk_size(line) is None
