"""DynamoDB items on the wire: botocore's JSON-protocol serializer and parser, with a direct path for item values.

botocore turns every request's parameters into JSON, and every answer's JSON into its parsed form, by walking the
operation's model node by node. An item's values are `AttributeValue` structures of ten members of which exactly one
is set, and for each value botocore's parser asks for all ten, through a method looked up by name for each node:
parsing the item a 4 KB save gets back took ~78 µs of CPU, where `json.loads` of the same body took 4 µs, and
serializing the save's request ~54 µs. Every request pays this, a save, a lookup, a page of a list and a thread's
put alike.

`ItemParser` and `ItemSerializer` are botocore's own classes for the JSON protocol with one change: a value holding
one known member is converted directly (the blobs decoded or encoded as botocore does, maps and lists recursively),
and a map of item values, or of strings, is walked without the per-node lookup. Anything else (a value with no
member, several, or one the model does not know, a structure of another shape) takes botocore's own path, so that
what they produce, and every error they raise, stays botocore's: property tests hold their output equal to
botocore's on generated items and requests, malformed ones included.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from botocore import parsers, serialize

ATTRIBUTE_VALUE: Final = "AttributeValue"
SCALARS: Final = frozenset(("S", "N", "BOOL", "NULL"))
"""Members botocore passes through as they are (strings and booleans)."""
MEMBERS: Final = frozenset(("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"))
_b64encode = base64.b64encode
# botocore's classes, typed as what they are to their subclasses here: its stubs leave out the methods overridden.
_JSONParser: Any = parsers.JSONParser
_ResponseParserFactory: Any = parsers.ResponseParserFactory
_JSONSerializer: Any = serialize.JSONSerializer


_ANSWER: Final = "_baton_item_value"
"""The attribute under which `is_item_value` keeps its answer on each shape object: a client's models hold a few
dozen value shapes, each asked once per value of every request (kept on the shape, it goes with the shape's model)."""


def is_item_value(shape: Any) -> bool:
    """True when `shape` is DynamoDB's `AttributeValue`: a structure of exactly `MEMBERS`, none renamed on the
    wire (a renamed or added member would take botocore's own path)."""
    answer = shape.__dict__.get(_ANSWER)
    if answer is None:
        answer = False
        if shape.name == ATTRIBUTE_VALUE and shape.type_name == "structure":
            members = shape.members
            answer = members.keys() == MEMBERS and not any("name" in members[m].serialization for m in members)
        shape.__dict__[_ANSWER] = answer
    return bool(answer)


_NOT_DIRECT: Final = object()


def _parsed(value: Any, blob: Any) -> Any:
    """An item value from its wire form as botocore's parser makes it (`blob`: its blob parser), or
    `_NOT_DIRECT`."""
    if type(value) is not dict or len(value) != 1:
        return _NOT_DIRECT
    ((tag, inner),) = value.items()
    if inner is None:
        return _NOT_DIRECT
    if tag in SCALARS:
        return {tag: inner}
    if tag == "M" and type(inner) is dict:
        parsed_map = {}
        for key, item in inner.items():
            parsed = None if item is None else _parsed(item, blob)
            if parsed is _NOT_DIRECT:
                return _NOT_DIRECT
            parsed_map[key] = parsed
        return {"M": parsed_map}
    if tag == "L" and type(inner) is list:
        parsed_list = []
        for item in inner:
            parsed = None if item is None else _parsed(item, blob)
            if parsed is _NOT_DIRECT:
                return _NOT_DIRECT
            parsed_list.append(parsed)
        return {"L": parsed_list}
    if tag == "B":
        return {"B": blob(inner)}
    if type(inner) is not list:
        return _NOT_DIRECT
    if tag == "SS" or tag == "NS":
        return {tag: list(inner)}
    if tag == "BS":
        return {"BS": [None if item is None else blob(item) for item in inner]}
    return _NOT_DIRECT


def _serialized(value: Any) -> Any:
    """An item value in its wire form as botocore's serializer writes it, or `_NOT_DIRECT`."""
    if type(value) is not dict or len(value) != 1:
        return _NOT_DIRECT
    ((tag, inner),) = value.items()
    if tag in SCALARS:
        return {tag: inner}
    if tag == "M" and type(inner) is dict:
        wire_map = {}
        for key, item in inner.items():
            wire = _serialized(item)
            if wire is _NOT_DIRECT:
                return _NOT_DIRECT
            wire_map[key] = wire
        return {"M": wire_map}
    if tag == "L" and type(inner) is list:
        wire_list = []
        for item in inner:
            wire = _serialized(item)
            if wire is _NOT_DIRECT:
                return _NOT_DIRECT
            wire_list.append(wire)
        return {"L": wire_list}
    if tag == "B" and type(inner) is bytes:
        return {"B": _b64encode(inner).decode("utf-8")}
    if (tag == "SS" or tag == "NS") and type(inner) is list:
        return {tag: list(inner)}
    if tag == "BS" and type(inner) is list and all(type(blob) is bytes for blob in inner):
        return {"BS": [_b64encode(blob).decode("utf-8") for blob in inner]}
    return _NOT_DIRECT


class ItemParser(_JSONParser):  # type: ignore[misc]
    """botocore's parser for the JSON protocol, item values parsed directly."""

    def _handle_structure(self, shape: Any, value: Any) -> Any:
        if shape.name == ATTRIBUTE_VALUE and is_item_value(shape):
            parsed = _parsed(value, self._blob_parser)
            if parsed is not _NOT_DIRECT:
                return parsed
        return super()._handle_structure(shape, value)

    def _handle_map(self, shape: Any, value: Any) -> Any:
        values = shape.value
        if values.name == ATTRIBUTE_VALUE and shape.key.type_name == "string" and is_item_value(values):
            blob = self._blob_parser
            parsed_map = {}
            for key, item in value.items():
                parsed = _parsed(item, blob)
                parsed_map[key] = super()._handle_structure(values, item) if parsed is _NOT_DIRECT else parsed
            return parsed_map
        return super()._handle_map(shape, value)


class ItemParserFactory(_ResponseParserFactory):  # type: ignore[misc]
    """botocore's parser factory, handing out `ItemParser` for the JSON protocol."""

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "json":
            return ItemParser(**self._defaults)
        return super().create_parser(protocol_name)


class ItemSerializer(_JSONSerializer):  # type: ignore[misc]
    """botocore's serializer for the JSON protocol, item values written directly."""

    def _serialize_type_structure(self, serialized: Any, value: Any, shape: Any, key: Any) -> None:
        if key is not None and shape.name == ATTRIBUTE_VALUE and is_item_value(shape):
            wire = _serialized(value)
            if wire is not _NOT_DIRECT:
                serialized[key] = wire
                return
        super()._serialize_type_structure(serialized, value, shape, key)

    def _serialize_type_map(self, serialized: Any, value: Any, shape: Any, key: Any) -> None:
        values = shape.value
        if values.name == ATTRIBUTE_VALUE and is_item_value(values):
            wire_map: dict[Any, Any] = {}
            serialized[key] = wire_map
            for sub_key, sub_value in value.items():
                wire = _serialized(sub_value)
                if wire is _NOT_DIRECT:
                    super()._serialize_type_structure(wire_map, sub_value, values, sub_key)
                else:
                    wire_map[sub_key] = wire
            return
        if values.type_name == "string" and type(value) is dict:
            # (a map of strings, such as the names of an expression: botocore writes each value as it is)
            serialized[key] = dict(value)
            return
        super()._serialize_type_map(serialized, value, shape, key)
