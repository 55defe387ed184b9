"""Large answers fitted to Lambda: no response may exceed Lambda's 6 MB payload, and a JSON body inside the
function's result is escaped again (a state of quotes would double). An answer over 1 MB is therefore sent as
base64 (`isBase64Encoded`, which API Gateway decodes), gzip-compressed first when the client accepts gzip."""

from __future__ import annotations

import base64
import gzip
from typing import Any, Final

LARGE_RESPONSE_BYTES: Final = 1_000_000
GZIP_LEVEL: Final = 6


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
    return {**result, "headers": headers, "body": base64.b64encode(raw).decode("ascii"), "isBase64Encoded": True}
