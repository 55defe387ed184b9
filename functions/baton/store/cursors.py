"""Opaque page cursors, bound to the tenant and the query that produced them.

A cursor carries DynamoDB's LastEvaluatedKey and a digest of (tenant, query); a cursor presented with another
tenant or another query, or one that was tampered with, is rejected as a validation error naming `cursor`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from baton.domain.errors import ValidationFailed
from baton.store.attributes import Item
from baton.store.errors import error_code

MAX_PAGE_READS = 1000
"""Most items one Query of a filtered page reads (reads double from `limit + 1` while the filter drops items)."""

_INVALID = "The cursor is not one this query produced; pass meta.next_cursor from the previous page unchanged."


def query_binding(*parts: str | None) -> str:
    """A digest of what a cursor is bound to."""
    text = "\x1f".join("" if p is None else p for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def encode_cursor(last_key: Item | None, binding: str) -> str | None:
    """The cursor for the page after `last_key`, or None on the last page."""
    if not last_key:
        return None
    plain = {k: v["S"] for k, v in last_key.items()}
    raw = json.dumps({"b": binding, "k": plain}, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@contextmanager
def refused_cursor(start: Item | None) -> Iterator[None]:
    """A start key DynamoDB refuses (a forged cursor outside the query's range) is the caller's error, not ours."""
    try:
        yield
    except Exception as exc:
        if start is not None and error_code(exc) == "ValidationException":
            raise ValidationFailed.single("/cursor", _INVALID, "query") from None
        raise


def decode_cursor(
    cursor: str | None, binding: str, required: dict[str, str], prefixes: dict[str, str] | None = None
) -> Item | None:
    """The ExclusiveStartKey of a cursor, checked against its binding, the attributes it must hold, and the
    prefixes its other attributes must start with (so a forged cursor cannot start outside the query's range)."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded: Any = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: not ours
        raise ValidationFailed.single("/cursor", _INVALID, "query") from None
    if not isinstance(decoded, dict) or decoded.get("b") != binding or not isinstance(decoded.get("k"), dict):
        raise ValidationFailed.single("/cursor", _INVALID, "query")
    keys: dict[str, Any] = decoded["k"]
    if not all(isinstance(v, str) for v in keys.values()):
        raise ValidationFailed.single("/cursor", _INVALID, "query")
    for name, value in required.items():
        if keys.get(name) != value:
            raise ValidationFailed.single("/cursor", _INVALID, "query")
    for name, prefix in (prefixes or {}).items():
        if not str(keys.get(name, "")).startswith(prefix):
            raise ValidationFailed.single("/cursor", _INVALID, "query")
    return {k: {"S": v} for k, v in keys.items()}


def encode_after(position: str | None, binding: str) -> str | None:
    """A cursor that carries only the sort key of the last item shown (never another item's keys)."""
    if position is None:
        return None
    raw = json.dumps({"a": position, "b": binding}, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_after(cursor: str | None, binding: str) -> str | None:
    """The position of a cursor made by `encode_after`, checked against its binding."""
    if cursor is None:
        return None
    try:
        decoded: Any = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: not ours
        raise ValidationFailed.single("/cursor", _INVALID, "query") from None
    if not isinstance(decoded, dict) or decoded.get("b") != binding or not isinstance(decoded.get("a"), str):
        raise ValidationFailed.single("/cursor", _INVALID, "query")
    return str(decoded["a"])
