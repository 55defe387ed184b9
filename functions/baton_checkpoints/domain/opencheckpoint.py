"""OpenCheckpoint 0.1 documents: the rules Baton enforces, and what a resume lifts out of one.

The rules live in one place, the JSON Schema file `schemas/opencheckpoint-0.1.json` shipped in the package (and
served at `GET /v1/schemas/opencheckpoint-0.1.json`); this module validates against it and turns every violation
into a `FieldError` with an RFC 6901 pointer from the body's root. Text inside a document is data: nothing here acts
on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import cache
from itertools import islice
from typing import Any

from baton_checkpoints.domain.errors import MAX_REPORTED_ERRORS, FieldError, ValidationFailed, clip
from baton_checkpoints.domain.lifecycle import OPENCHECKPOINT_FORMAT

# jsonschema ships without type information: its validator and its errors are `Any` here.
_Validator = Any
_ValidationError = Any

FORMAT = OPENCHECKPOINT_FORMAT
"""The `format` value of a save whose state is an OpenCheckpoint 0.1 document."""
SCHEMA_NAME = "opencheckpoint-0.1"
"""The schema's name, served at `GET /v1/schemas/opencheckpoint-0.1.json`."""
SCHEMA_FILE = f"{SCHEMA_NAME}.json"
"""The schema file in `baton/domain/schemas/`: the single source of the rules."""

FINISHED_OPERATION_STATUSES = frozenset({"done", "completed", "cancelled", "failed"})
"""Statuses of an operation that needs nothing more; every other status is pending."""

POINTER_CHARS_IN_MESSAGE = 120
"""A longer pointer is cut in a message, so that the rule a message states is never what gets cut (a key can be as
long as the body, and `FieldError.as_detail` clips a message at 300 characters)."""

_Path = tuple[str | int, ...]


def pending_operations(document: Any) -> list[Any]:
    """The document's `operations` whose `status` is not a finished one, as they are (same objects, same order)."""
    operations = document.get("operations") if isinstance(document, dict) else None
    if not isinstance(operations, list):
        return []
    return [operation for operation in operations if isinstance(operation, dict) and not _finished(operation)]


def _finished(operation: dict[str, Any]) -> bool:
    # A status that is not a string (possible only in an unvalidated document) is never a finished one.
    status = operation.get("status")
    return isinstance(status, str) and status in FINISHED_OPERATION_STATUSES


def stop_conditions(document: Any) -> list[Any]:
    """The document's `continuation.stop_conditions` as they are, or [] when absent."""
    continuation = document.get("continuation") if isinstance(document, dict) else None
    conditions = continuation.get("stop_conditions") if isinstance(continuation, dict) else None
    return conditions if isinstance(conditions, list) else []


@cache
def schema_text() -> bytes:
    """The JSON Schema of OpenCheckpoint 0.1, byte for byte as the package ships it (read once)."""
    from importlib import resources  # ~15 ms on a cold import, paid only by the requests that need the file

    return resources.files("baton_checkpoints.domain").joinpath("schemas", SCHEMA_FILE).read_bytes()


@cache
def _schema() -> dict[str, Any]:
    """The schema as the validator and the counter read it: the file's, with its references inlined."""
    schema: dict[str, Any] = _inline_references(json.loads(schema_text()))
    _check_counted_keywords(schema)
    return schema


def embeddable_schema() -> dict[str, Any]:
    """The schema with its references inlined and without `$schema`, `$id` or `$defs`: what another document (the
    OpenAPI description) can embed as one of its own schemas."""
    return {key: value for key, value in _schema().items() if key not in ("$schema", "$id", "$defs")}


@cache
def _validator() -> _Validator:
    # jsonschema (and the referencing stack under it) takes tens of milliseconds to import: only a save that declares
    # this format pays for it, once per container.
    from jsonschema import Draft202012Validator

    validator: _Validator = Draft202012Validator(_schema())
    return validator


def _inline_references(node: Any, definitions: dict[str, Any] | None = None) -> Any:
    """The schema with each `{"$ref": "#/$defs/<name>", ...}` replaced by that definition merged with its siblings.

    The file keeps its `$defs` for readers; the validator gets them inlined because jsonschema resolves a `$ref`
    anew at every value it checks, which doubles the time of a large document (4.3 s against 2.2 s for 30,000
    statements in 3.8 MB, measured 2026-12-01).
    """
    if definitions is None:
        definitions = node["$defs"]
    if isinstance(node, list):
        return [_inline_references(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    inlined = {key: _inline_references(value, definitions) for key, value in node.items() if key != "$ref"}
    reference = node.get("$ref")
    if reference is None:
        return inlined
    prefix = "#/$defs/"
    if not isinstance(reference, str) or not reference.startswith(prefix):
        raise ValueError(f"only references to $defs are supported, not {reference!r}")
    return {**_inline_references(definitions[reference.removeprefix(prefix)], definitions), **inlined}


def check_document(document: Any, at: str = "/state") -> None:
    """Check `document` against the OpenCheckpoint 0.1 schema; `at` is the document's pointer from the body's root.

    Raises `ValidationFailed` listing every violation in pointer order (array indexes in numeric order), each with
    its RFC 6901 pointer from the body's root and a sentence naming the rule. Past `MAX_REPORTED_ERRORS` violations
    it lists the first ones jsonschema finds and only counts the rest (`more`).
    """
    if count_violations(document) == 0:
        # The counter reads the same schema and agrees with jsonschema on every document the tests try; it is ~15
        # times faster (a valid 3 MB document: ~0.3 s instead of ~5 s), so jsonschema only words the violations.
        return
    found = list(islice(_violations(_validator().iter_errors(document)), MAX_REPORTED_ERRORS + 1))
    if not found:
        return
    more = 0
    if len(found) > MAX_REPORTED_ERRORS:
        # A hostile 3 MB document breaks the rules a million times, and jsonschema spends ~25 µs on each violation
        # (about 45 s in all, past Lambda's timeout): the rest are counted by `count_violations`, ~20 times faster.
        found = found[:MAX_REPORTED_ERRORS]
        more = max(count_violations(document) - MAX_REPORTED_ERRORS, 1)
    found.sort(key=_order)
    errors = []
    for path, error in found:
        pointer = pointer_to(at, path)
        errors.append(FieldError(pointer, _message(pointer, error)))
    raise ValidationFailed(errors, more=more)


def pointer_to(at: str, path: Iterable[str | int]) -> str:
    """The RFC 6901 pointer of `path` (keys and array indexes) below the pointer `at`: `~` is `~0`, `/` is `~1`."""
    return at + "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _violations(errors: Iterator[_ValidationError]) -> Iterator[tuple[_Path, _ValidationError]]:
    """Each error with the path of the value it is about; for a missing property, the property's own path."""
    # jsonschema yields one `required` error per missing property, in the order of the schema's list, and no
    # attribute names the property: the n-th such error at a place is about the n-th missing name there.
    missing_reported: dict[_Path, int] = {}
    for error in errors:
        path: _Path = tuple(error.absolute_path)
        if error.validator == "required":
            missing = [name for name in error.validator_value if name not in error.instance]
            index = missing_reported.get(path, 0)
            missing_reported[path] = index + 1
            path = (*path, missing[min(index, len(missing) - 1)])
        yield path, error


def _order(violation: tuple[_Path, _ValidationError]) -> tuple[tuple[bool, str | int], ...]:
    """Pointer order with array indexes compared as numbers (`/statements/2` before `/statements/10`)."""
    return tuple((isinstance(part, str), part) for part in violation[0])


def _message(pointer: str, error: _ValidationError) -> str:
    """One sentence naming the pointer and the rule; it never quotes the offending value."""
    where = clip(pointer, POINTER_CHARS_IN_MESSAGE)
    keyword = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if keyword == "required":
        return f"{where} is required."
    if keyword == "minLength" or (keyword == "type" and schema.get("minLength") == 1):
        return f"{where} must be a non-empty string."
    if keyword == "type" and error.validator_value == "array" and _is_non_empty_string(schema.get("items")):
        return f"{where} must be an array of non-empty strings."
    if keyword == "type":
        expected = str(error.validator_value)
        return f"{where} must be {_TYPE_WORDS.get(expected, 'of type ' + expected)}."
    if keyword == "enum":
        allowed = ", ".join(str(value) for value in error.validator_value)
        return f"{where} must be one of {allowed}."
    if keyword == "const" and "then" in error.absolute_schema_path:
        # The schema's only conditional rule: quoted outside content never passes for anything else.
        return f"{where} must be {_constant(error.validator_value)}, as the statement's kind is external."
    if keyword == "const":
        return f"{where} must be {_constant(error.validator_value)}."
    return f"{where} breaks the rule {keyword} of the OpenCheckpoint 0.1 schema."


def _is_non_empty_string(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "string" and schema.get("minLength") == 1


_TYPE_WORDS = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "boolean": "true or false",
}


def _constant(value: Any) -> str:
    return f"the string {json.dumps(value)}" if isinstance(value, str) else json.dumps(value)


# The counter: the schema's rules, read from the same file, for counting violations only. It knows exactly the
# keywords below and refuses a schema that uses any other (`_check_counted_keywords`), so it cannot silently drift
# from the file; tests/unit/test_opencheckpoint.py checks that it counts what jsonschema reports.
_COUNTED_KEYWORDS = frozenset({"type", "required", "properties", "items", "const", "enum", "minLength", "if", "then"})
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description"})
_PYTHON_TYPES: dict[str, type] = {"object": dict, "array": list, "string": str, "boolean": bool}


def count_violations(document: Any) -> int:
    """How many violations jsonschema would report for `document`, counted without building them."""
    return _count(document, _schema())


def _count(value: Any, schema: dict[str, Any]) -> int:
    # Every keyword applies to the value on its own, as in JSON Schema: a failed `type` does not stop `required`.
    count = 0
    expected = schema.get("type")
    if expected is not None and not isinstance(value, _PYTHON_TYPES[expected]):
        count += 1
    if isinstance(value, dict):
        count += sum(1 for name in schema.get("required", ()) if name not in value)
        for name, subschema in schema.get("properties", {}).items():
            if name in value:
                count += _count(value[name], subschema)
    elif isinstance(value, list):
        items = schema.get("items")
        if items is not None:
            count += sum(_count(item, items) for item in value)
    elif isinstance(value, str) and len(value) < schema.get("minLength", 0):
        count += 1
    # Constants and enumerations are strings only (checked when the schema is read): equality is plain `==`.
    if "const" in schema and not (isinstance(value, str) and value == schema["const"]):
        count += 1
    if "enum" in schema and not (isinstance(value, str) and value in schema["enum"]):
        count += 1
    if "if" in schema and "then" in schema and _count(value, schema["if"]) == 0:
        count += _count(value, schema["then"])
    return count


def _check_counted_keywords(schema: dict[str, Any]) -> None:
    """Refuse a schema the counter would misread: another keyword, a list of types, a non-string constant."""
    for keyword, argument in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        if keyword not in _COUNTED_KEYWORDS:
            raise ValueError(f"the violation counter does not know the keyword {keyword}")
        if keyword == "type" and not (isinstance(argument, str) and argument in _PYTHON_TYPES):
            raise ValueError(f"the violation counter does not know the type {argument}")
        if keyword in ("const", "enum") and not all(
            isinstance(v, str) for v in ([argument] if keyword == "const" else argument)
        ):
            raise ValueError(f"the violation counter compares strings only ({keyword})")
        if keyword == "properties":
            for subschema in argument.values():
                _check_counted_keywords(subschema)
        elif keyword in ("items", "if", "then"):
            _check_counted_keywords(argument)
