"""Opaque page cursors bound to their query, and DynamoDB attribute values to and from Python."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest

from baton.domain.errors import ValidationFailed
from baton.store.attributes import from_attr, from_item, names_in, to_attr, to_item
from baton.store.cursors import decode_cursor, encode_cursor, query_binding

BINDING = query_binding("subject", "tenant-1", "ticket-42", None, "task_state", None)
LAST_KEY = {"pk": {"S": "T#tenant-1#S#ticket-42"}, "sk": {"S": "2026-07-30T11:48:04.652Z#ckpt_1"}}
REQUIRED = {"pk": "T#tenant-1#S#ticket-42"}


def raw_cursor(payload: Any) -> str:
    """A cursor built by hand from any JSON payload, encoded the way Baton encodes its own."""
    text = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(text).decode("ascii").rstrip("=")


def assert_rejected_cursor(cursor: str | None, binding: str = BINDING, required: dict[str, str] = REQUIRED) -> None:
    """The cursor is refused as a validation error naming the `cursor` query parameter."""
    with pytest.raises(ValidationFailed) as exc:
        decode_cursor(cursor, binding, required)
    assert [(e.pointer, e.location) for e in exc.value.errors] == [("/cursor", "query")]
    assert "cursor" in exc.value.message
    assert exc.value.details() == {"errors": [{"pointer": "/cursor", "message": exc.value.message, "in": "query"}]}


# --- cursors ----------------------------------------------------------------------------------------------------


def test_a_cursor_round_trips_to_the_exclusive_start_key() -> None:
    # Given the last key of a page
    # When it becomes a cursor and comes back with the same query
    cursor = encode_cursor(LAST_KEY, BINDING)
    assert cursor is not None
    # Then the start key is exactly the last key
    assert decode_cursor(cursor, BINDING, REQUIRED) == LAST_KEY


def test_a_cursor_is_url_safe_and_unpadded() -> None:
    # Given a last key whose JSON encodes to base64 with `+`, `/` and padding in the standard alphabet
    last_key = {"pk": {"S": "T#t>?>?~~~"}, "sk": {"S": "é\u00ff?"}}
    # When it becomes a cursor
    cursor = encode_cursor(last_key, BINDING)
    # Then it is safe in a query string without escaping, and still decodes
    assert cursor is not None
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_cursor(cursor, BINDING, {}) == last_key


@pytest.mark.parametrize("last_key", [None, {}])
def test_the_last_page_has_no_cursor(last_key: dict[str, Any] | None) -> None:
    # Given no LastEvaluatedKey
    # When the next cursor is built
    # Then there is none
    assert encode_cursor(last_key, BINDING) is None


def test_no_cursor_means_the_first_page() -> None:
    # Given no cursor
    # When it is decoded
    # Then there is no start key
    assert decode_cursor(None, BINDING, REQUIRED) is None


@pytest.mark.parametrize(
    "other",
    [
        query_binding("subject", "tenant-2", "ticket-42", None, "task_state", None),
        query_binding("subject", "tenant-1", "ticket-43", None, "task_state", None),
        query_binding("subject", "tenant-1", "ticket-42", "agent-b", "task_state", None),
        query_binding("subject", "tenant-1", "ticket-42", None, "workflow", None),
        query_binding("subject", "tenant-1", "ticket-42", None, "task_state", "active"),
        query_binding("keys", "tenant-1", None),
    ],
)
def test_a_cursor_from_another_tenant_or_query_is_rejected(other: str) -> None:
    # Given a cursor produced by one query
    cursor = encode_cursor(LAST_KEY, BINDING)
    # When it is presented with another tenant, subject, filter or listing
    # Then it is refused naming cursor
    assert other != BINDING
    assert_rejected_cursor(cursor, binding=other)


def test_a_cursor_whose_key_lacks_the_required_attribute_value_is_rejected() -> None:
    # Given a cursor bound correctly but whose partition key is another tenant's
    cursor = encode_cursor({**LAST_KEY, "pk": {"S": "T#tenant-2#S#ticket-42"}}, BINDING)
    # When it is decoded with the partition key the query requires
    # Then it is refused
    assert_rejected_cursor(cursor)


def test_a_cursor_missing_a_required_attribute_is_rejected() -> None:
    # Given a cursor whose key has no partition key at all
    cursor = encode_cursor({"sk": {"S": "x"}}, BINDING)
    # When it is decoded
    # Then it is refused
    assert_rejected_cursor(cursor)


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "a",
        "!!!!",
        "é",
        "not a cursor",
        "eyJiIjoi",  # the first bytes of a real cursor: base64 of an unfinished JSON text
        raw_cursor([1, 2]),
        raw_cursor("text"),
        raw_cursor({"k": {"pk": "T#tenant-1#S#ticket-42"}}),  # no binding
        raw_cursor({"b": BINDING}),  # no key
        raw_cursor({"b": BINDING, "k": ["pk"]}),
        raw_cursor({"b": BINDING, "k": {"pk": "T#tenant-1#S#ticket-42", "n": 5}}),
        raw_cursor({"b": BINDING, "k": {"pk": {"S": "T#tenant-1#S#ticket-42"}}}),
        base64.urlsafe_b64encode(b"\xff\xfe\x00garbage").decode("ascii"),
    ],
)
def test_malformed_or_forged_cursors_are_rejected(cursor: str) -> None:
    # Given a cursor that is not base64 of the expected JSON shape
    # When it is decoded
    # Then it is refused naming cursor, never an unhandled error
    assert_rejected_cursor(cursor)


def test_a_cursor_with_one_character_changed_is_rejected() -> None:
    # Given a genuine cursor
    cursor = encode_cursor(LAST_KEY, BINDING)
    assert cursor is not None
    # When any character encoding its binding or its partition key is replaced
    plain = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    end_of_pk = plain.index(REQUIRED["pk"].encode()) + len(REQUIRED["pk"])
    covering = [i for i in range(len(cursor)) if (6 * i + 5) // 8 < end_of_pk]
    assert len(covering) > 90
    for position in covering:
        replacement = "A" if cursor[position] != "A" else "B"
        tampered = cursor[:position] + replacement + cursor[position + 1 :]
        # Then each tampered cursor is refused
        assert_rejected_cursor(tampered)


def test_query_binding_depends_on_every_part_and_on_their_order() -> None:
    # Given bindings of related queries
    # When they are compared
    # Then each part and its position matter; None and "" are the same absent part
    assert query_binding("a", "b") != query_binding("b", "a")
    assert query_binding("a", "b") != query_binding("a", "b", "c")
    assert query_binding("a", None) == query_binding("a", "")
    assert query_binding("a", "b") == query_binding("a", "b")
    assert len(query_binding("x")) == 32


# --- attributes -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "attr"),
    [
        ("text", {"S": "text"}),
        ("", {"S": ""}),
        (0, {"N": "0"}),
        (-42, {"N": "-42"}),
        (2**70, {"N": str(2**70)}),
        (Decimal("1785412084.652"), {"N": "1785412084.652"}),
        (b"\x00\xff", {"B": b"\x00\xff"}),
        (True, {"BOOL": True}),
        (False, {"BOOL": False}),
        (None, {"NULL": True}),
        ([1, "a"], {"L": [{"N": "1"}, {"S": "a"}]}),
        ((1, 2), {"L": [{"N": "1"}, {"N": "2"}]}),
        ({"a": {"b": None}}, {"M": {"a": {"M": {"b": {"NULL": True}}}}}),
        ({"b", "a"}, {"SS": ["a", "b"]}),
        (frozenset({"x"}), {"SS": ["x"]}),
    ],
)
def test_to_attr_writes_dynamodbs_typed_form(value: Any, attr: dict[str, Any]) -> None:
    # Given a Python value of a type Baton stores
    # When it becomes an attribute value
    # Then it has the DynamoDB type descriptor (booleans are BOOL, never N)
    assert to_attr(value) == attr


@pytest.mark.parametrize(
    "value",
    [
        "café ☕",
        0,
        -(2**53),
        12345678901234567890,
        Decimal("0.001"),
        Decimal("-1.5"),
        b"",
        b"\x00\x01\xfe",
        True,
        False,
        None,
        [],
        [1, [2, [3, None]], {"k": b"v"}],
        {},
        {"state": {"nested": [True, "x", Decimal("2.5")]}, "n": 7},
        {"scope:a", "scope:b"},
    ],
)
def test_attribute_values_round_trip(value: Any) -> None:
    # Given a value of any stored type
    # When it is written as an attribute and read back
    back = from_attr(to_attr(value))
    # Then it is equal, and of the same type (an int stays an int, a bool stays a bool)
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize(
    ("attr", "value"),
    [
        ({"N": "7"}, 7),
        ({"N": "1E+3"}, 1000),
        ({"N": "1.5"}, Decimal("1.5")),
        ({"N": "1.0"}, Decimal("1.0")),
        ({"N": "1785412084.652"}, Decimal("1785412084.652")),
        ({"B": bytearray(b"ab")}, b"ab"),
        ({"SS": ["a"]}, {"a"}),
    ],
)
def test_from_attr_reads_numbers_as_int_when_integral_else_decimal(attr: dict[str, Any], value: Any) -> None:
    # Given an attribute as DynamoDB returns it
    # When it is read
    result = from_attr(attr)
    # Then integral numbers written without a point are ints, others Decimals, binary is bytes
    assert result == value
    assert type(result) is type(value)


@pytest.mark.parametrize("value", [1.5, object(), complex(1, 2)])
def test_to_attr_refuses_types_dynamodb_cannot_hold_exactly(value: Any) -> None:
    # Given a float or another unsupported type
    # When it becomes an attribute value
    # Then it is refused (floats must be converted to Decimal on purpose)
    with pytest.raises(TypeError, match="cannot store"):
        to_attr(value)


def test_from_attr_refuses_an_unknown_type_descriptor() -> None:
    # Given an attribute of a type Baton never stores
    # When it is read
    # Then it is refused
    with pytest.raises(TypeError, match="unexpected attribute type NS"):
        from_attr({"NS": ["1"]})


def test_items_leave_out_none_and_round_trip() -> None:
    # Given a record with an absent optional value
    values = {"pk": "T#1", "revision": 3, "format": None, "tags": {"a"}}
    # When it becomes an item
    item = to_item(values)
    # Then None is left out (absent, not NULL), and the rest reads back
    assert "format" not in item
    assert from_item(item) == {"pk": "T#1", "revision": 3, "tags": {"a"}}


@pytest.mark.parametrize(
    ("expressions", "names"),
    [
        (("#state = :s",), {"#state": "state"}),
        (
            ("#status = :a AND #expires_at > :now", "SET #state = :s, #status = :b"),
            {"#status": "status", "#expires_at": "expires_at", "#state": "state"},
        ),
        (("attribute_not_exists(#pk)", "#pk = :pk"), {"#pk": "pk"}),
        (("#a1_b = :v",), {"#a1_b": "a1_b"}),
        (("revision = :r",), {}),
        ((), {}),
    ],
)
def test_names_in_aliases_every_hash_name_once(expressions: tuple[str, ...], names: dict[str, str]) -> None:
    # Given update and condition expressions
    # When the attribute names are collected
    # Then each #name maps to its attribute, once, across all expressions (values like :s are not names)
    assert names_in(*expressions) == names
