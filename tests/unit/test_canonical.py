"""Strict JSON in, RFC 8785 canonical JSON out, and RFC 6901 pointers to name what failed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from baton_checkpoints.domain.canonical import (
    CanonicalState,
    canonical_json,
    canonicalize,
    check_document,
    escape_pointer_token,
    parse_strict,
    pointer,
)
from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.limits import MAX_JSON_DEPTH

MAX_SAFE_INT = 2**53 - 1


def nested_lists(levels: int) -> str:
    """A JSON document of `levels` arrays, one inside the other (the root is level 1)."""
    return "[" * levels + "]" * levels


def nested_objects(levels: int) -> Any:
    """A Python value of `levels` objects, one inside the other."""
    value: Any = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def only_error(exc: pytest.ExceptionInfo[ValidationFailed]) -> tuple[str, str]:
    """The (pointer, message) of a failure that must carry exactly one violation."""
    assert len(exc.value.errors) == 1
    found = exc.value.errors[0]
    return found.pointer, found.message


# --- pointers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "escaped"),
    [
        ("kind", "kind"),
        ("a/b", "a~1b"),
        ("a~b", "a~0b"),
        ("~1", "~01"),  # `~` is escaped first, so a literal "~1" never turns into "/"
        ("/~", "~1~0"),
        ("", ""),
        (0, "0"),
        (17, "17"),
    ],
)
def test_escape_pointer_token_escapes_tilde_and_slash_as_rfc6901_says(token: str | int, escaped: str) -> None:
    # Given a reference token
    # When it is escaped
    # Then `~` becomes `~0` and `/` becomes `~1`, and nothing else changes
    assert escape_pointer_token(token) == escaped


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ((), ""),
        (("kind",), "/kind"),
        (("state", "statements", 0, "kind"), "/state/statements/0/kind"),
        (("a/b", "c~d"), "/a~1b/c~0d"),
        (("",), "/"),
    ],
)
def test_pointer_joins_escaped_tokens_from_the_root(tokens: tuple[str | int, ...], expected: str) -> None:
    # Given the tokens of a path from the body's root
    # When a pointer is built
    # Then each token is escaped and prefixed with `/` (the empty path is the root, "")
    assert pointer(*tokens) == expected


# --- parse_strict: what it accepts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "b": [true, null, "x"]}', {"a": 1, "b": [True, None, "x"]}),
        (b'{"a": 1.5}', {"a": 1.5}),
        ("9007199254740991", 2**53 - 1),
        ("-9.007199254740991e15", -9007199254740991.0),
        ("-0", 0),
        ('"caf\\u00e9"', "café"),
        ('"\u00e9\u6f22"'.encode(), "é漢"),
        ("[]", []),
        ('{"a": {}, "b": {"a": 2}}', {"a": {}, "b": {"a": 2}}),  # the same key in different objects is fine
    ],
)
def test_parse_strict_accepts_ordinary_json(text: str | bytes, expected: Any) -> None:
    # Given a well-formed JSON document (text or UTF-8 bytes)
    # When it is parsed strictly
    # Then it parses to the same value as Python's json would
    assert parse_strict(text) == expected


def test_parse_strict_accepts_exactly_the_depth_limit() -> None:
    # Given a document nested exactly MAX_JSON_DEPTH levels (the root counts as one)
    text = nested_lists(MAX_JSON_DEPTH)
    # When it is parsed
    value = parse_strict(text)
    # Then it is accepted unchanged
    assert json.dumps(value, separators=(",", ":")) == text


# --- parse_strict: what it rejects ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "named", "at"),
    [
        ("1e308", "1e308", ""),
        ('{"a": [1, 1e20]}', "1e20", "/a/1"),
        ('{"a": 100000000000000000000}', "100000000000000000000", "/a"),
        ("-9007199254740992", "-9007199254740992", ""),
        ("9007199254740991.5", "9007199254740991.5", ""),
    ],
)
def test_parse_strict_rejects_numbers_past_the_exact_integer_range(text: str, named: str, at: str) -> None:
    # A number past ±(2^53-1), however written, is one canonical JSON cannot carry exactly: what Baton serves must
    # save back, and RFC 8785 writes the double 1e20 as 100000000000000000000, an integer it then refuses.
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    where, message = only_error(exc)
    assert where == at
    assert named in message
    assert "2^53-1" in message


@pytest.mark.parametrize(
    ("text", "named", "at"),
    [
        ("NaN", "NaN", ""),
        ("[NaN]", "NaN", "/0"),
        ('{"x": Infinity}', "Infinity", "/x"),
        ("-Infinity", "-Infinity", ""),
        ("1e400", "1e400", ""),
        ("[-1e400]", "-1e400", "/0"),
        ('{"a": {"b": 1.7976931348623159e308}}', "1.7976931348623159e308", "/a/b"),
    ],
)
def test_parse_strict_rejects_numbers_json_cannot_carry(text: str, named: str, at: str) -> None:
    # Given a document with NaN, an infinity, or a number that overflows a double
    # When it is parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    # Then it is a validation failure that names the offending number and where it is
    where, message = only_error(exc)
    assert where == at
    assert named in message
    assert "finite" in message


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ('{"a": 1, "a": 2}', "/a"),
        ('{"a": 1, "a": 1}', "/a"),
        ('{"outer": {"k": 1, "x": 0, "k": 2}}', "/outer/k"),
        ('[{"ok": 1}, {"dup": 1, "dup": null}]', "/1/dup"),
    ],
)
def test_parse_strict_rejects_duplicate_keys_naming_the_key(text: str, at: str) -> None:
    # Given an object with the same key twice, at any depth, even with equal values
    # When it is parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    # Then the failure names the repeated key by its pointer
    where, message = only_error(exc)
    assert where == at
    assert at in message
    assert "twice" in message


def test_parse_strict_rejects_one_level_beyond_the_limit_naming_where() -> None:
    # Given a document nested MAX_JSON_DEPTH + 1 levels
    text = nested_lists(MAX_JSON_DEPTH + 1)
    # When it is parsed
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    # Then the failure points at the first container that is too deep and states the limit
    where, message = only_error(exc)
    assert where == "/0" * MAX_JSON_DEPTH
    assert f"deeper than {MAX_JSON_DEPTH} levels" in message


def test_parse_strict_rejects_nesting_deep_enough_to_exhaust_the_recursion_limit() -> None:
    # Given a document nested far deeper than Python's parser can recurse
    text = nested_lists(100_000)
    # When it is parsed
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    # Then it is a validation failure about depth, not a RecursionError
    _, message = only_error(exc)
    assert f"deeper than {MAX_JSON_DEPTH} levels" in message


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"a": 1,}',
        "[1 2]",
        "{'a': 1}",
        '{"a": 1} trailing',
        "undefined",
        "01",
    ],
)
def test_parse_strict_rejects_malformed_json_as_a_validation_failure(text: str) -> None:
    # Given text that is not JSON
    # When it is parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(text)
    # Then the failure says the body is not valid JSON, and where
    where, message = only_error(exc)
    assert where == ""
    assert message.startswith("The body is not valid JSON at line ")


def test_parse_strict_rejects_an_integer_longer_than_python_converts() -> None:
    # Given an integer literal beyond Python's digit limit for int conversion
    # When it is parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict("9" * 5000)
    # Then it is a validation failure, not a bare ValueError
    _, message = only_error(exc)
    assert message.startswith("The body is not valid JSON")


@pytest.mark.parametrize("raw", [b"\xff", b'{"a": "\xff"}', b'"\xc3\x28"', b'"\xc0\xaf"'])
def test_parse_strict_rejects_bytes_that_are_not_utf8(raw: bytes) -> None:
    # Given a body whose bytes are not valid UTF-8 (a stray byte, a broken sequence, an encoded surrogate)
    # When it is parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(raw)
    # Then the failure says so
    _, message = only_error(exc)
    assert message == "The body is not valid UTF-8."


def test_parse_strict_rejects_a_utf8_encoded_surrogate_as_not_utf8() -> None:
    # Given bytes that encode the surrogate U+D800 the way CESU-8 would (RFC 3629 forbids this in UTF-8)
    raw = b'["\xed\xa0\x80"]'
    # When they are parsed strictly
    with pytest.raises(ValidationFailed) as exc:
        parse_strict(raw)
    # Then they are rejected as invalid UTF-8, like any other ill-formed sequence
    _, message = only_error(exc)
    assert message == "The body is not valid UTF-8."


def test_validation_failed_raised_by_the_parser_is_the_contracts_validation_error() -> None:
    # Given any rejected document
    # When it is parsed
    with pytest.raises(ValidationFailed) as exc:
        parse_strict("NaN")
    # Then it carries the contract's code and its details list the violation with pointer and message
    assert exc.value.code == "VALIDATION_ERROR"
    assert exc.value.details() == {"errors": [{"pointer": "", "message": exc.value.message}]}


# --- check_document ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, "x", None, [], {}, [1, [2, [3]]], nested_objects(MAX_JSON_DEPTH)])
def test_check_document_accepts_values_within_the_limit(value: Any) -> None:
    # Given a value nested at most MAX_JSON_DEPTH levels
    # When its depth is checked
    # Then nothing is raised
    check_document(value)


def test_check_document_names_the_first_container_beyond_the_limit_with_escaped_tokens() -> None:
    # Given objects three levels deep under a key that needs escaping
    value = {"a/b": {"c~d": {"e": 1}}}
    # When the depth is checked against a limit of two
    with pytest.raises(ValidationFailed) as exc:
        check_document(value, limit=2)
    # Then the third container is named by its escaped pointer
    where, message = only_error(exc)
    assert where == "/a~1b/c~0d"
    assert message == "/a~1b/c~0d is nested deeper than 2 levels."


def test_check_document_counts_scalars_as_no_level() -> None:
    # Given a list two levels deep holding scalars only
    value = [[1, "two", None, True]]
    # When the depth is checked against a limit of two
    # Then it passes: only containers count as levels
    check_document(value, limit=2)
    # And with a limit of one it fails at the inner list
    with pytest.raises(ValidationFailed) as exc:
        check_document(value, limit=1)
    assert only_error(exc)[0] == "/0"


def test_check_document_of_objects_beyond_the_default_limit_fails() -> None:
    # Given objects nested one level beyond the contract's limit
    value = nested_objects(MAX_JSON_DEPTH + 1)
    # When the depth is checked
    # Then it fails at the innermost object
    with pytest.raises(ValidationFailed) as exc:
        check_document(value)
    assert only_error(exc)[0] == "/a" * MAX_JSON_DEPTH


# --- canonical_json (RFC 8785) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": 2}, b'{"a":2,"b":1}'),
        ({"a": [1, {"z": None, "y": True}]}, b'{"a":[1,{"y":true,"z":null}]}'),
        ([3, 2, 1], b"[3,2,1]"),  # arrays keep their order
        (1.0, b"1"),
        (-0.0, b"0"),
        (0.1, b"0.1"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (123456789012345680000.0, b"123456789012345680000"),
        ("é€😀", '"é€😀"'.encode()),
        ("\u2028\u2029", '"\u2028\u2029"'.encode()),
        ('quote" back\\ nl\n tab\t ctl\x01', b'"quote\\" back\\\\ nl\\n tab\\t ctl\\u0001"'),
        (MAX_SAFE_INT, b"9007199254740991"),
        (-MAX_SAFE_INT, b"-9007199254740991"),
        (
            # RFC 8785 section 3.2.3: keys sort by their UTF-16 code units, so U+1F600 (D83D DE00) sorts before U+FB33
            {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "\u00f6": 7},
            '{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\U0001f600":5,"\ufb33":3}'.encode(),
        ),
    ],
)
def test_canonical_json_follows_rfc8785(value: Any, expected: bytes) -> None:
    # Given a JSON value
    # When it is canonicalized
    text = canonical_json(value)
    # Then the output is RFC 8785: sorted keys, no whitespace, ES6 number formatting, minimal escaping
    assert text == expected


def test_canonical_json_is_the_same_whatever_the_key_order_or_whitespace_of_the_source() -> None:
    # Given the same document written two ways
    first = parse_strict('{"b": [1, 2], "a": {"y": 1, "x": 2}}')
    second = parse_strict('{\n  "a": {"x": 2, "y": 1},\n  "b": [1,2]\n}')
    # When both are canonicalized
    # Then the bytes are identical
    assert canonical_json(first) == canonical_json(second)


@pytest.mark.parametrize("value", [MAX_SAFE_INT + 1, -(MAX_SAFE_INT + 1), 2**64, {"deep": [10**20]}])
def test_canonical_json_rejects_integers_outside_the_exact_double_range(value: Any) -> None:
    # Given an integer beyond ±(2^53-1)
    # When it is canonicalized at /state
    with pytest.raises(ValidationFailed) as exc:
        canonical_json(value, at="/state")
    # Then the failure names the field and the rule
    where, message = only_error(exc)
    assert where == "/state"
    assert message.startswith("/state ")
    assert "2^53-1" in message


@pytest.mark.parametrize("value", ["\ud800", {"k": "x\udfff"}, {"\udc00": 1}, ["ok", "\ud83d"]])
def test_canonical_json_rejects_lone_surrogates(value: Any) -> None:
    # Given a string holding an unpaired UTF-16 surrogate (JSON's "\ud800" escape parses to one)
    # When it is canonicalized at /state
    with pytest.raises(ValidationFailed) as exc:
        canonical_json(value, at="/state")
    # Then it is rejected, naming the field
    where, message = only_error(exc)
    assert where == "/state"
    assert message.startswith("/state ")


def test_a_lone_surrogate_escape_passes_the_parser_but_not_canonicalization() -> None:
    # Given a body whose JSON escape decodes to a lone surrogate
    value = parse_strict('{"s": "\\ud800"}')
    # When it is canonicalized
    # Then it is rejected there
    with pytest.raises(ValidationFailed):
        canonical_json(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")], {1: "non-string key"}])
def test_canonical_json_rejects_python_values_json_cannot_carry(value: Any) -> None:
    # Given a Python value no JSON text can express
    # When it is canonicalized
    with pytest.raises(ValidationFailed) as exc:
        canonical_json(value)
    # Then it is a validation failure naming the body
    where, message = only_error(exc)
    assert where == ""
    assert message.startswith("The body ")


# --- canonicalize ---------------------------------------------------------------------------------------------


def test_canonicalize_reports_sha256_and_size_of_the_canonical_utf8_bytes() -> None:
    # Given a state with non-ASCII text and unsorted keys
    value = {"z": "é", "a": [1.0, 2]}
    # When it is canonicalized
    state = canonicalize(value)
    # Then text, digest and size all describe the canonical bytes
    assert isinstance(state, CanonicalState)
    assert state.text == '{"a":[1,2],"z":"é"}'.encode()
    assert state.sha256 == hashlib.sha256(state.text).hexdigest()
    assert state.size == len(state.text) == 20  # "é" is two bytes in UTF-8


def test_canonicalize_gives_equal_hashes_for_equal_states_and_different_ones_otherwise() -> None:
    # Given two equal states in different key order, and a third that differs
    # When each is canonicalized
    a = canonicalize({"x": 1, "y": 2})
    b = canonicalize({"y": 2, "x": 1})
    c = canonicalize({"x": 1, "y": 3})
    # Then equal states hash alike and a different one does not
    assert a.sha256 == b.sha256
    assert a.sha256 != c.sha256


def test_canonicalize_names_the_given_pointer_when_it_fails() -> None:
    # Given an integer beyond the exact range, canonicalized at a named place
    # When it is canonicalized
    with pytest.raises(ValidationFailed) as exc:
        canonicalize({"n": 2**60}, at="/state")
    # Then the failure names that place
    assert only_error(exc)[0] == "/state"
