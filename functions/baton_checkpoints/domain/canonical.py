"""Strict JSON in, canonical JSON (RFC 8785) out.

Python's `json` accepts what the contract rejects (`NaN`, `Infinity`, duplicate keys, numbers that overflow a
double) and knows nothing of depth; `parse_strict` closes those gaps and names the offending place by its
RFC 6901 pointer. `canonical_json` is the one serialization that hashes and sizes are computed from.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import rfc8785
from msgspec import Struct

from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.limits import MAX_JSON_DEPTH, MAX_SAFE_INTEGER

JsonValue = Any  # JSON as Python: dict, list, str, int, float, bool, None


def escape_pointer_token(token: str | int) -> str:
    """Escape one reference token for an RFC 6901 pointer."""
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    """Build an RFC 6901 pointer from its tokens (`pointer("state", 0)` is `/state/0`)."""
    return "".join("/" + escape_pointer_token(t) for t in tokens)


class _NonFinite:
    """Stands in, while parsing, for a number JSON cannot carry (`NaN`, `Infinity`, `1e999`)."""

    def __init__(self, text: str) -> None:
        self.text = text


class _Unsafe:
    """Stands in, while parsing, for a number beyond ±(2^53-1): canonical JSON (I-JSON) cannot carry it exactly."""

    def __init__(self, text: str) -> None:
        self.text = text


class _DuplicatedKeys(dict[str, Any]):
    """An object that had a key twice; remembers the key, so the walk after parsing can name it."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.duplicate = key


class _Census(Struct):
    """What parsing saw that the fast canonical form cannot write the way RFC 8785 does."""

    plain: bool = True
    """No number with a fraction, and no object key outside the Basic Multilingual Plane."""
    marked: bool = False
    """A duplicated key, a non-finite number or an unsafe integer was marked: `check_document` names it."""


def _hooks(census: _Census, keys_in_bmp: bool) -> dict[str, Any]:
    """`json.loads` hooks that mark duplicate keys and non-finite numbers, and keep `census`. `keys_in_bmp`: the
    document cannot hold a character outside the Basic Multilingual Plane, so no key needs looking at."""

    def on_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(pairs)
        if len(value) != len(pairs):
            census.marked = True
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    return _DuplicatedKeys(pairs, key)
                seen.add(key)
        if not keys_in_bmp and census.plain:
            for key in value:
                if not key.isascii() and any(ord(c) > 0xFFFF for c in key):
                    census.plain = False  # RFC 8785 sorts keys by UTF-16 code units, Python by code points
                    break
        return value

    def on_float(text: str) -> int | float | _NonFinite | _Unsafe:
        value = float(text)
        if math.isinf(value):
            census.marked = True
            return _NonFinite(text)
        # Every double past 2^53 is an integer that RFC 8785 writes in full (1e20 as 100000000000000000000),
        # which would read back as an integer canonical JSON refuses: refuse it however it is written.
        if abs(value) > MAX_SAFE_INTEGER:
            census.marked = True
            return _Unsafe(text)
        if value.is_integer():
            # JSON has one number type: 3600.0 is the integer 3600 (canonical JSON writes both as 3600), so an
            # integer field takes it, and the document stays plain.
            return int(value)
        census.plain = False  # RFC 8785 writes fractions as ECMAScript does, not as Python's repr
        return value

    def on_integer(text: str) -> int | _Unsafe:
        value = int(text)
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        census.marked = True
        return _Unsafe(text)

    def on_constant(text: str) -> _NonFinite:
        census.marked = True
        return _NonFinite(text)

    return {
        "object_pairs_hook": on_object,
        "parse_float": on_float,
        "parse_int": on_integer,
        "parse_constant": on_constant,
    }


class Document(Struct, frozen=True):
    """A strictly parsed JSON document, and whether its canonical form may take the fast path."""

    value: JsonValue
    plain: bool
    """True when orjson writes exactly the RFC 8785 form of `value` and of any part of it (see `canonical_json`)."""


def parse_document(text: str | bytes, depth: int = MAX_JSON_DEPTH) -> Document:
    """Parse a JSON document as the contract demands, or raise `ValidationFailed` naming where and why.

    Duplicate keys and non-finite numbers are marked while parsing and reported afterwards with their pointer.
    `depth`: the deepest nesting accepted (an envelope around a body, like JSON-RPC's, adds its own levels).
    """
    census = _Census()
    try:
        # json.loads would decode bytes with surrogatepass; decode strictly first.
        document = text.decode("utf-8") if isinstance(text, bytes) else text
        value = json.loads(document, **_hooks(census, _within_bmp(document)))
    except RecursionError:
        raise ValidationFailed.single("", f"The body is nested deeper than {depth} levels.") from None
    except UnicodeDecodeError:
        raise ValidationFailed.single("", "The body is not valid UTF-8.") from None
    except ValueError as exc:  # json.JSONDecodeError and the interpreter's limit on integer digits
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "an integer has too many digits"
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ValidationFailed.single("", f"The body is not valid JSON{where}: {detail}.") from None
    if census.marked or _deeper_than(value, depth):
        check_document(value, depth)  # names the first offending place; it raises
    return Document(value=value, plain=census.plain)


def _within_bmp(document: str) -> bool:
    """True when no character of the parsed document can lie outside the Basic Multilingual Plane: none is written
    as is (each would take two UTF-16 units) and no escape can spell a surrogate pair (`\\ud83d\\ude00`)."""
    if "\\u" in document and re.search(r"\\u[dD][89abAB]", document):
        return False
    return document.isascii() or len(document.encode("utf-16-le", "surrogatepass")) == 2 * len(document)


def _deeper_than(value: JsonValue, limit: int) -> bool:
    """True when a container of `value` lies deeper than `limit` (the root counts as 1). Only containers are
    visited and no path is kept: the common case, a document within the limit, costs one pass over its
    containers; `check_document` then finds the place to name only when there is one."""
    level: list[Any] = [value] if type(value) in (dict, list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                if type(child) in (dict, list):
                    below.append(child)
        level = below
    return False


def parse_strict(text: str | bytes, depth: int = MAX_JSON_DEPTH) -> JsonValue:
    """The value of `parse_document(text, depth)`."""
    return parse_document(text, depth).value


def check_document(value: JsonValue, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise `ValidationFailed` at the first place (in document order) that is nested deeper than `limit` (the
    root counts as 1), repeats a key, or holds a number JSON cannot carry."""
    stack: list[tuple[JsonValue, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _NonFinite):
            where = pointer(*path)
            raise ValidationFailed.single(
                where, f"{where or 'The body'} is the number {node.text}, which JSON cannot carry; use finite numbers."
            )
        if isinstance(node, _Unsafe):
            where = pointer(*path)
            shown = node.text if len(node.text) <= 40 else node.text[:37] + "..."
            raise ValidationFailed.single(
                where,
                f"{where or 'The body'} is the number {shown}, outside ±(2^53-1), which canonical JSON cannot carry "
                "exactly; send it as a string.",
            )
        if isinstance(node, dict):
            children: list[tuple[str | int, Any]] = list(node.items())
            if isinstance(node, _DuplicatedKeys):
                where = pointer(*path, node.duplicate)
                raise ValidationFailed.single(where, f"{where} appears twice in one object; keys must be unique.")
        elif isinstance(node, list):
            children = list(enumerate(node))
        else:
            continue
        if len(path) + 1 > limit:
            raise ValidationFailed.single(
                pointer(*path), f"{pointer(*path) or 'The body'} is nested deeper than {limit} levels."
            )
        stack.extend((child, (*path, key)) for key, child in reversed(children))


class CanonicalState(Struct, frozen=True):
    """A state in its canonical form, with the digest and size the contract reports."""

    text: bytes
    sha256: str

    @property
    def size(self) -> int:
        """Length in bytes of the canonical UTF-8 JSON."""
        return len(self.text)


def canonical_json(value: JsonValue, at: str = "", plain: bool = False) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of `value`; `at` is the pointer used to name a value JSON cannot carry.

    `plain` (from `Document.plain`) says the value holds no fraction and no key outside the Basic Multilingual Plane
    (and, parsed strictly, no integer past ±(2^53-1)): then orjson writes exactly the RFC 8785 form (UTF-8 as
    is, the same escapes and separators, keys in the same order), about six times faster than the standard
    library's encoder and far faster than rfc8785's pure Python.
    """
    try:
        if plain:
            import orjson  # loaded by the first save, not at cold start

            try:
                return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError:
                pass  # a lone surrogate: rfc8785 below refuses it with the reason
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        raise ValidationFailed.single(
            at, f"{at or 'The body'} contains an integer outside ±(2^53-1), which canonical JSON cannot carry exactly."
        ) from None
    except rfc8785.CanonicalizationError as exc:
        raise ValidationFailed.single(at, f"{at or 'The body'} cannot be canonicalized: {exc}.") from None
    except UnicodeEncodeError:
        raise ValidationFailed.single(
            at, f"{at or 'The body'} contains a lone surrogate, which is not valid Unicode."
        ) from None


def canonicalize(value: JsonValue, at: str = "", plain: bool = False) -> CanonicalState:
    """The canonical form of `value` with its SHA-256 (`plain`: see `canonical_json`)."""
    text = canonical_json(value, at, plain)
    return CanonicalState(text=text, sha256=hashlib.sha256(text).hexdigest())
