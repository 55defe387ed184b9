"""DynamoDB's typed attribute values, to and from Python, without importing boto3 at module load.

Only the types Baton stores: strings, numbers (int or Decimal), bytes, booleans, null, lists, maps and string
sets. Numbers come back as int when integral, else Decimal.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

AttributeValue = dict[str, Any]
Item = dict[str, Any]
"""An item in DynamoDB's typed form (kept loose: boto3's TypedDicts add nothing at this boundary)."""


def to_attr(value: Any) -> AttributeValue:
    """One Python value as a DynamoDB attribute value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | Decimal):
        return {"N": str(value)}
    if isinstance(value, bytes):
        return {"B": value}
    if isinstance(value, frozenset | set):
        return {"SS": sorted(value)}
    if isinstance(value, list | tuple):
        return {"L": [to_attr(v) for v in value]}
    if isinstance(value, dict):
        return {"M": {k: to_attr(v) for k, v in value.items()}}
    raise TypeError(f"cannot store {type(value).__name__} in DynamoDB")


def to_item(values: dict[str, Any]) -> Item:
    """A Python dict as an item, leaving out None values (absent, not NULL)."""
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def from_attr(attr: AttributeValue) -> Any:
    """One attribute value as Python."""
    ((kind, raw),) = attr.items()
    if kind == "S":
        return raw
    if kind == "N":
        if raw.isdecimal():  # most of Baton's numbers (revisions, sizes, times): no Decimal needed
            return int(raw)
        number = Decimal(raw)
        return int(number) if number == number.to_integral_value() and "." not in raw else number
    if kind == "B":
        return raw if type(raw) is bytes else bytes(raw)
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "L":
        return [from_attr(v) for v in raw]
    if kind == "M":
        return {k: from_attr(v) for k, v in raw.items()}
    if kind == "SS":
        return set(raw)
    raise TypeError(f"unexpected attribute type {kind}")


def from_item(item: Item) -> dict[str, Any]:
    """An item as a Python dict."""
    return {k: from_attr(v) for k, v in item.items()}


def names_in(*expressions: str) -> dict[str, str]:
    """`ExpressionAttributeNames` for every `#name` in the expressions: attributes are always aliased, so
    DynamoDB's long list of reserved words (`state`, `status`, `source`, ...) never bites."""
    return dict(_names_in(expressions))


@lru_cache(maxsize=256)
def _names_in(expressions: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # A store writes a handful of distinct expressions: each is scanned once per container, not once per request.
    return tuple((f"#{name}", name) for expr in expressions for name in re.findall(r"#(\w+)", expr))


@lru_cache(maxsize=256)
def values_used(*expressions: str) -> frozenset[str]:
    """The `:value` placeholders the expressions use (scanned once per distinct expression)."""
    return frozenset(re.findall(r":\w+", " ".join(expressions)))
