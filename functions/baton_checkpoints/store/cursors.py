"""Opaque page cursors, bound to the tenant and the query that produced them.

A cursor carries the position of the last item a page showed (never another item's keys) and a digest of (tenant,
query); a cursor presented with another tenant or another query, or one that was tampered with, is refused as a
validation error naming `cursor`.

Sizes are bytes: a position is written as UTF-8 JSON (never `\\uXXXX` escapes, which would triple a non-ASCII sort key
and make the cursor of a page of wide thread ids longer than the 2,048 characters a route accepts), and a position
is at most `MAX_POSITION_BYTES` of UTF-8, DynamoDB's longest sort key: every position a store writes is one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from baton_checkpoints.domain.errors import ValidationFailed

MAX_PAGE_READS = 1000
"""Most items one Query of a filtered page reads (reads double from `limit + 1` while the filter drops items)."""
MAX_POSITION_BYTES = 1024
"""Longest position a cursor carries, in UTF-8 bytes: a position is a sort key (or shorter), which DynamoDB caps at
1,024 bytes. With JSON's escapes (`"` and `\\` double; no position holds a control character), base64 and the
binding, the cursor of a thread's widest sort key (about 620 bytes) stays near 1,000 characters."""

_INVALID = "The cursor is not one this query produced; pass meta.next_cursor from the previous page unchanged."


def invalid_cursor() -> ValidationFailed:
    """The refusal of a cursor this query did not produce (every cursor check answers with it)."""
    return ValidationFailed.single("/cursor", _INVALID, "query")


def query_binding(*parts: str | None) -> str:
    """A digest of what a cursor is bound to."""
    text = "\x1f".join("" if p is None else p for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def past(shown: str, read: str) -> str:
    """A position past `shown` at which a page that read every key up to `read` (a later sort key, of an item it did
    not show) resumes: the shortest prefix of `read` that sorts after `shown`. Every key up to it was read, and it
    tells of `read` only what it shares with `shown` and one character more (a read may skip another agent's keys,
    whose ids the caller must not learn). The next page reads again from there; each cursor lies past the last.
    `shown` need not have been shown: any key the page read before `read` will do, and the later it is, the less is
    read again."""
    if read <= shown:
        raise ValueError(f"{read!r} does not sort after {shown!r}")
    common = 0
    while common < len(shown) and shown[common] == read[common]:
        common += 1
    return read[: common + 1]


def encode_after(position: str | None, binding: str) -> str | None:
    """A cursor that carries only the sort key of the last item shown (never another item's keys)."""
    if position is None:
        return None
    document = {"a": position, "b": binding}
    raw = json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_after(cursor: str | None, binding: str) -> str | None:
    """The position of a cursor made by `encode_after`, checked against its binding."""
    if cursor is None:
        return None
    try:
        decoded: Any = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: not ours
        raise invalid_cursor() from None
    if not isinstance(decoded, dict) or decoded.get("b") != binding or not isinstance(decoded.get("a"), str):
        raise invalid_cursor()
    position = str(decoded["a"])
    try:
        size = len(position.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (`\ud800`): no key holds one, and no store could send it
        raise invalid_cursor() from None
    if size > MAX_POSITION_BYTES:
        raise invalid_cursor()
    return position
