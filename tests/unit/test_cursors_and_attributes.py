"""Opaque page cursors bound to their query, and DynamoDB attribute values to and from Python."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.store.attributes import from_attr, from_item, names_in, to_attr, to_item
from baton_checkpoints.store.checkpoints import read_position, write_position
from baton_checkpoints.store.cursors import decode_after, encode_after, past, query_binding

BINDING = query_binding("subject", "tenant-1", "ticket-42", None, "task_state", None)
POSITION = "1785412084652#agent-a#task_state"


def raw_cursor(payload: Any) -> str:
    """A cursor built by hand from any JSON payload, encoded the way Baton encodes its own."""
    text = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(text).decode("ascii").rstrip("=")


def assert_rejected_cursor(cursor: str | None, binding: str = BINDING) -> None:
    """The cursor is refused as a validation error naming the `cursor` query parameter."""
    with pytest.raises(ValidationFailed) as exc:
        decode_after(cursor, binding)
    assert [(e.pointer, e.location) for e in exc.value.errors] == [("/cursor", "query")]
    assert "cursor" in exc.value.message
    assert exc.value.details() == {"errors": [{"pointer": "/cursor", "message": exc.value.message, "in": "query"}]}


# --- cursors ----------------------------------------------------------------------------------------------------


def test_a_cursor_round_trips_to_the_position_of_the_last_item_shown() -> None:
    cursor = encode_after(POSITION, BINDING)
    assert cursor is not None
    assert decode_after(cursor, BINDING) == POSITION


def test_a_cursor_is_url_safe_and_unpadded() -> None:
    # A position whose JSON encodes to base64 with `+`, `/` and padding in the standard alphabet
    position = "t>?>?~~~#é\u00ff?"
    cursor = encode_after(position, BINDING)
    assert cursor is not None
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_after(cursor, BINDING) == position


def test_the_last_page_has_no_cursor() -> None:
    assert encode_after(None, BINDING) is None


def test_no_cursor_means_the_first_page() -> None:
    assert decode_after(None, BINDING) is None


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
    cursor = encode_after(POSITION, BINDING)
    assert other != BINDING
    assert_rejected_cursor(cursor, binding=other)


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
        raw_cursor({"a": POSITION}),  # no binding
        raw_cursor({"b": BINDING}),  # no position
        raw_cursor({"a": ["x"], "b": BINDING}),
        raw_cursor({"a": 5, "b": BINDING}),
        raw_cursor({"b": BINDING, "k": {"pk": "T#tenant-1#S#ticket-42"}}),  # the old shape, a DynamoDB key
        base64.urlsafe_b64encode(b"\xff\xfe\x00garbage").decode("ascii"),
    ],
)
def test_malformed_or_forged_cursors_are_rejected(cursor: str) -> None:
    assert_rejected_cursor(cursor)


def test_a_cursor_with_one_character_changed_in_its_binding_is_rejected() -> None:
    cursor = encode_after(POSITION, BINDING)
    assert cursor is not None
    plain = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    start = plain.index(BINDING.encode())
    covering = [i for i in range(len(cursor)) if start <= (6 * i) // 8 and (6 * i + 5) // 8 < start + len(BINDING)]
    assert len(covering) > 30
    for index in covering:
        replacement = "A" if cursor[index] != "A" else "B"
        assert_rejected_cursor(cursor[:index] + replacement + cursor[index + 1 :])


@pytest.mark.parametrize(
    "position",
    ["someone", "x#a#k", "-5#a#k", "5##k", "5#a#", "9" * 17 + "#a#k", "٣#a#k"],
)
def test_a_listing_position_baton_never_writes_is_refused(position: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        read_position(position)
    assert [(e.pointer, e.location) for e in exc.value.errors] == [("/cursor", "query")]


def test_a_listing_position_round_trips() -> None:
    assert read_position(write_position((-1785412084652, "agent-a", "task_state"))) == (
        -1785412084652,
        "agent-a",
        "task_state",
    )


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


@given(
    st.text(alphabet="0123456789abcdef_key", max_size=12),
    st.text(alphabet="0123456789abcdef_key", min_size=1, max_size=12),
)
def test_a_position_past_a_read_key_lies_after_what_was_shown_and_no_later_than_what_was_read(
    shown: str, read: str
) -> None:
    # Given a key a page showed last (or none) and a later key it read without showing it
    assume(read > shown)
    # When the page's cursor resumes past what it read
    position = past(shown, read)
    # Then it lies after what was shown (progress), no later than what was read (nothing unread is skipped), and is
    # what the two share and one character of the key read, no more
    assert shown < position <= read
    assert read.startswith(position)
    shared = len(position) - 1
    assert position[:shared] == shown[:shared]


def test_a_position_past_a_key_not_read_after_what_was_shown_is_a_defect() -> None:
    with pytest.raises(ValueError, match="does not sort after"):
        past("key_b", "key_a")
