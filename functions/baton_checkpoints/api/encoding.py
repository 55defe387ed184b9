"""Answers fitted to Lambda, and measured the way Lambda measures them.

No response may exceed Lambda's synchronous response payload, and a JSON body inside the function's result is
escaped again (a state of quotes would double). An answer over 1 MB is therefore sent as base64 (`isBase64Encoded`,
which API Gateway decodes), gzip-compressed first when the client accepts gzip.

Sizes are bytes as Lambda counts them, never characters: the python3.13 runtime serializes the handler's result with
simplejson, `ensure_ascii=False` (Unicode characters travel unescaped since python3.12, so "€" costs its 3 UTF-8
bytes, not the 6 of `\\u20ac`), its default separators (`", "`, `": "`), and U+2028 and U+2029 escaped; then it
sends the UTF-8 bytes. Sources:
- https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html ("Invocation payload (request and
  response)": 6 MB each for synchronous invocations);
- https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html ("Response format": python3.12 and later return
  Unicode characters as they are; earlier runtimes returned escape sequences);
- https://github.com/aws/aws-lambda-python-runtime-interface-client/blob/main/awslambdaric/lambda_runtime_marshaller.py
  (the encoder: `ensure_ascii=False` for AWS_Lambda_python3.12 to 3.15) and `lambda_runtime_client.py` (UTF-8).

An answer that would still not fit (none should: Baton's bounds keep every answer under the limit) is replaced by
`500 RESPONSE_TOO_LARGE` and logged at ERROR, rather than left to fail in Lambda as an opaque 500 logged as a 200.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from typing import Any, Final

import pybase64

from baton_checkpoints.api.errors import status_of
from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.domain.errors import ResponseTooLarge
from baton_checkpoints.observability import logger

LARGE_RESPONSE_BYTES: Final = 1_000_000
"""Bodies over this many UTF-8 bytes go back base64-encoded: escaped again inside the result, one of at most this
size stays under 6,000,000 bytes (`MAX_ESCAPE_GROWTH`)."""
GZIP_LEVEL: Final = 6

LAMBDA_RESPONSE_LIMIT_BYTES: Final = 6_291_556
"""Lambda's limit on a synchronous response, in bytes of the serialized result: the quotas page's "6 MB" is 6 MiB +
100 bytes, the figure Lambda's own error names ("Response payload size exceeded maximum allowed payload size
(6291556 bytes)", `Function.ResponseSizeTooLarge`; measured in
https://zaccharles.medium.com/deep-dive-lambdas-response-payload-size-limit-8aedba9530ed)."""
HEADROOM_BYTES: Final = 65_536
"""Kept free under the limit, when deciding what an answer may carry, for what surrounds its body in the result
(status, headers, cookies)."""
MAX_ESCAPE_GROWTH: Final = 6
"""A character (or a byte) of a string takes at most six bytes in the runtime's JSON: `\\u0001`, `\\u2028`."""

OVERSIZED: Final = "answer over Lambda's payload limit"
"""The message of the ERROR line logged for an answer that would not fit (a CloudWatch metric filter counts it)."""
DEFECT: Final = "response_too_large"
"""The value of that line's `defect` field."""


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when `Accept-Encoding` accepts gzip (RFC 9110: listed, or `*`, with a non-zero q)."""
    for entry in (accept_encoding or "").split(","):
        coding, _, parameters = entry.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        name, _, value = parameters.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value) > 0
            except ValueError:
                return False
        return True
    return False


def fit_for_lambda(result: dict[str, Any], accept_encoding: str | None) -> dict[str, Any]:
    """`result` as is when its body is small; else its body base64-encoded, gzip-compressed when accepted."""
    body = result.get("body")
    # A character is at most 4 UTF-8 bytes: a body of at most a quarter of the threshold in characters is small.
    if result.get("isBase64Encoded") or not isinstance(body, str) or len(body) <= LARGE_RESPONSE_BYTES // 4:
        return result
    raw = body.encode("utf-8")
    if len(raw) <= LARGE_RESPONSE_BYTES:
        return result
    headers = dict(result.get("headers") or {})
    if accepts_gzip(accept_encoding):
        raw = gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)
        headers["Content-Encoding"] = "gzip"
    headers["Vary"] = "Accept-Encoding"
    return {**result, "headers": headers, "body": pybase64.b64encode(raw).decode("ascii"), "isBase64Encoded": True}


def lambda_payload_bytes(result: Mapping[str, Any]) -> int:
    """The bytes Lambda counts for the handler's `result`, serialized as the python3.13 runtime does (module
    docstring): the standard library writes what simplejson writes, but for U+2028 and U+2029, which simplejson
    escapes (3 bytes more each)."""
    text = json.dumps(result, ensure_ascii=False)
    extra = 3 * (text.count("\u2028") + text.count("\u2029"))
    return len(text.encode("utf-8", "surrogatepass")) + extra


_PLAIN_MEMBERS = frozenset({"statusCode", "headers", "body", "isBase64Encoded", "cookies"})
_PLAIN_ROOM = 128
"""More than the member names, punctuation, status and flag of a result with only `_PLAIN_MEMBERS` take."""


def _upper_bound(result: Mapping[str, Any]) -> int | None:
    """A cheap upper bound of Lambda's count of `result` (six bytes per character of its strings, at most), None
    when it is not a result of the usual shape (payload 2.0: status, string headers, body, flag, cookies)."""
    if not _PLAIN_MEMBERS.issuperset(result) or not isinstance(result.get("statusCode", 200), int):
        return None
    characters = 0
    for name, value in (result.get("headers") or {}).items():
        if not isinstance(value, str):
            return None
        characters += len(name) + len(value) + 2  # quotes, colon, comma and space: under six bytes per character
    for cookie in result.get("cookies") or ():
        if not isinstance(cookie, str):
            return None
        characters += len(cookie) + 1
    body = result.get("body")
    characters += len(body) if isinstance(body, str) else 0
    return MAX_ESCAPE_GROWTH * characters + _PLAIN_ROOM


def oversized(result: Mapping[str, Any]) -> int | None:
    """Lambda's count of `result` when it is over the limit, None when it fits. An ordinary answer costs a few
    lengths (`_upper_bound`); the exact measure is made only when six bytes per character could reach the limit."""
    bound = _upper_bound(result)
    if bound is not None and bound <= LAMBDA_RESPONSE_LIMIT_BYTES:
        return None
    size = lambda_payload_bytes(result)
    return size if size > LAMBDA_RESPONSE_LIMIT_BYTES else None


def answer_bytes(body_bytes: int) -> int:
    """What a JSON body of `body_bytes` UTF-8 bytes adds to the function's result when gzip is not accepted (its
    largest form): exactly 4 bytes per 3 once base64-encoded, else at most `MAX_ESCAPE_GROWTH` per byte."""
    if body_bytes > LARGE_RESPONSE_BYTES:
        return 4 * ((body_bytes + 2) // 3)
    return MAX_ESCAPE_GROWTH * body_bytes


def fits_lambda(body_bytes: int) -> bool:
    """Whether a JSON body of `body_bytes` UTF-8 bytes leaves the function within Lambda's limit, gzip or not, with
    `HEADROOM_BYTES` to spare."""
    return answer_bytes(body_bytes) <= LAMBDA_RESPONSE_LIMIT_BYTES - HEADROOM_BYTES


def log_oversized(route: str | None, size: int, route_status: object) -> None:
    """The one ERROR line of an answer that would not fit: `defect` is `response_too_large` (what the alarm counts),
    with the route's pattern, the answer's size and the limit, in bytes."""
    logger().error(
        OVERSIZED,
        extra={
            "defect": DEFECT,
            "route": route,
            "response_bytes": size,
            "limit_bytes": LAMBDA_RESPONSE_LIMIT_BYTES,
            "route_status": route_status,
        },
    )


def within_lambda_limit(result: dict[str, Any], route: str | None, request_id: str) -> dict[str, Any]:
    """`result` when Lambda can return it; else, logged at ERROR, the `RESPONSE_TOO_LARGE` error answer in its place
    (what the client gets and the access line reports, instead of Lambda's failure behind a 200)."""
    size = oversized(result)
    if size is None:
        return result
    log_oversized(route, size, result.get("statusCode"))
    error = ResponseTooLarge(size, LAMBDA_RESPONSE_LIMIT_BYTES)
    envelope = {
        "error": {"code": error.code, "message": error.message, "details": error.details()},
        "meta": {"request_id": request_id},
    }
    return {
        "statusCode": status_of(error),
        "headers": {"Content-Type": JSON},
        "body": dumps(envelope),
        "isBase64Encoded": False,
    }
