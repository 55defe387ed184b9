"""DynamoDB's documented sizing and capacity rules, applied to items in the wire format (`{"S": ...}`, `{"B": base64}`).

Nothing here talks to AWS or imports Baton: the benchmark's metered moto server (`meter.py`) feeds it the old and
new images of every item a request touched, and the table's shape from DescribeTable, and it answers what DynamoDB
would bill. The rules (Amazon DynamoDB Developer Guide, "Item sizes and formats", "Read/write capacity mode",
"Provisioned throughput considerations for global/local secondary indexes"):

* An item's size is the UTF-8 length of every attribute name plus its value: strings in UTF-8, binary raw, numbers
  one byte per two significant digits plus one, booleans and null one byte, lists and maps 3 bytes plus one byte per
  element (a map's keys count as names), sets the sum of their members.
* A write costs ceil(size / 1 KB) units, at least 1, where size is the larger of the item before and after (a delete
  costs the old item's size); transactional writes cost twice that.
* A secondary index entry is the item's projected attributes plus the table's and the index's key attributes, plus
  100 bytes. An entry created costs a put, one removed a delete, one whose index key changed a delete and a put, one
  whose projected attributes changed a put; an untouched entry costs nothing. An item without every key attribute
  of the index has no entry (sparse index).
* A strongly consistent read costs ceil(size / 4 KB) units, at least 1; eventually consistent half of that,
  transactional twice. A Query or Scan sums the sizes of every item it reads (before any filter) and rounds once;
  GetItem and each key of a BatchGetItem round per item.

Run `python -m bench.billing.capacity` for a self-check against the Developer Guide's worked examples.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Item = dict[str, dict[str, Any]]
"""An item as DynamoDB's JSON wire protocol carries it (binary as base64 text) or as the boto3 client returns it (binary
as bytes): attribute name -> typed value."""

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
INDEX_ENTRY_OVERHEAD_BYTES = 100


def number_bytes(text: str) -> int:
    """Size of a number: one byte per two significant digits (leading and trailing zeros trimmed), plus one."""
    digits = len(Decimal(text).normalize().as_tuple().digits)
    return math.ceil(digits / 2) + 1


def value_bytes(value: dict[str, Any]) -> int:
    """Size of one typed value, without the attribute's name."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return _binary_bytes(raw)
    if kind == "N":
        return number_bytes(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_bytes(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_bytes(v) for k, v in raw.items())
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in raw)
    if kind == "NS":
        return sum(number_bytes(v) for v in raw)
    if kind == "BS":
        return sum(_binary_bytes(v) for v in raw)
    raise ValueError(f"unknown attribute type {kind}")


def _binary_bytes(raw: str | bytes) -> int:
    """Bytes of a binary value: raw bytes as boto3 hands them, or base64 text as the wire carries them."""
    if isinstance(raw, bytes | bytearray):
        return len(raw)
    return len(base64.b64decode(raw, validate=True))


def item_bytes(item: Item | None) -> int:
    """Size of an item as DynamoDB bills it (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_bytes(value) for name, value in item.items())


def write_units(size: int) -> int:
    """Write units of writing `size` bytes: ceil(size / 1 KB), at least 1."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    """Read units of reading `size` bytes in one request: ceil(size / 4 KB), at least 1, halved if eventual."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class Index:
    """A secondary index as DescribeTable describes it."""

    name: str
    kind: str
    """"GSI" or "LSI"."""
    keys: tuple[str, ...]
    """Its key attributes: partition key, then the sort key if any."""
    projection: str
    """"ALL", "KEYS_ONLY" or "INCLUDE"."""
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    """What the capacity rules need of a table: its key attributes and its secondary indexes."""

    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...]

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> Table:
        """Read the shape from a DescribeTable answer's `Table`."""

        def key_names(schema: list[dict[str, str]]) -> tuple[str, ...]:
            ordered = sorted(schema, key=lambda k: 0 if k["KeyType"] == "HASH" else 1)
            return tuple(k["AttributeName"] for k in ordered)

        indexes = []
        for kind, field in (("GSI", "GlobalSecondaryIndexes"), ("LSI", "LocalSecondaryIndexes")):
            for index in description.get(field) or ():
                projection = index.get("Projection") or {}
                indexes.append(
                    Index(
                        name=index["IndexName"],
                        kind=kind,
                        keys=key_names(index["KeySchema"]),
                        projection=projection.get("ProjectionType", "ALL"),
                        non_key_attributes=tuple(projection.get("NonKeyAttributes") or ()),
                    )
                )
        return cls(name=description["TableName"], keys=key_names(description["KeySchema"]), indexes=tuple(indexes))

    def key_of(self, item: Item) -> tuple[str, ...]:
        """The item's primary key, as a hashable tuple of its wire values."""
        return tuple(repr(item[name]) for name in self.keys)

    def index(self, name: str) -> Index:
        """The secondary index called `name`."""
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(name)


def index_entry(item: Item | None, table: Table, index: Index) -> Item | None:
    """The item's entry in `index` (its projected attributes and every key attribute), None if it has none."""
    if not item or any(name not in item for name in index.keys):
        return None
    if index.projection == "ALL":
        return dict(item)
    names = {*table.keys, *index.keys}
    if index.projection == "INCLUDE":
        names.update(index.non_key_attributes)
    return {name: value for name, value in item.items() if name in names}


def index_entry_bytes(entry: Item) -> int:
    """Size of an index entry: its attributes plus DynamoDB's 100 bytes of per-entry overhead."""
    return item_bytes(entry) + INDEX_ENTRY_OVERHEAD_BYTES


@dataclass(frozen=True)
class IndexWrite:
    """What one item write does to one secondary index."""

    index: str
    action: str
    """"none", "put", "delete" or "delete+put"."""
    units: int


@dataclass(frozen=True)
class ItemWrite:
    """The cost of one write of one item, index maintenance included."""

    old_bytes: int
    new_bytes: int
    item_units: int
    indexes: tuple[IndexWrite, ...]

    @property
    def index_units(self) -> int:
        """Write units spent on secondary indexes."""
        return sum(i.units for i in self.indexes)

    @property
    def units(self) -> int:
        """Write units of the item and its index entries."""
        return self.item_units + self.index_units


def index_write(old: Item | None, new: Item | None, table: Table, index: Index) -> IndexWrite:
    """The index maintenance of replacing `old` with `new` (either may be None)."""
    before = index_entry(old, table, index)
    after = index_entry(new, table, index)
    if before is None and after is None:
        return IndexWrite(index.name, "none", 0)
    if before is None:
        assert after is not None
        return IndexWrite(index.name, "put", write_units(index_entry_bytes(after)))
    if after is None:
        return IndexWrite(index.name, "delete", write_units(index_entry_bytes(before)))
    if any(before[name] != after[name] for name in index.keys):
        units = write_units(index_entry_bytes(before)) + write_units(index_entry_bytes(after))
        return IndexWrite(index.name, "delete+put", units)
    if before != after:
        return IndexWrite(index.name, "put", write_units(index_entry_bytes(after)))
    return IndexWrite(index.name, "none", 0)


def item_write(old: Item | None, new: Item | None, table: Table, transactional: bool = False) -> ItemWrite:
    """The cost of one write that turned `old` into `new` (None: no item before, or deleted).

    A transactional write costs twice, its index maintenance included.
    """
    old_bytes, new_bytes = item_bytes(old), item_bytes(new)
    factor = 2 if transactional else 1
    indexes = tuple(index_write(old, new, table, index) for index in table.indexes)
    if factor != 1:
        indexes = tuple(IndexWrite(i.index, i.action, i.units * factor) for i in indexes)
    return ItemWrite(old_bytes, new_bytes, write_units(max(old_bytes, new_bytes)) * factor, indexes)


def self_check() -> None:
    """The Developer Guide's examples, and the rules above on small cases."""
    # Numbers: 1 byte per two significant digits, plus 1.
    assert number_bytes("123") == 3
    assert number_bytes("1000") == 2
    assert number_bytes("0.001") == 2
    # "A list or map requires 3 bytes of overhead ... plus 1 byte per element".
    assert value_bytes({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_bytes({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    assert value_bytes({"B": base64.b64encode(b"\x00" * 10).decode()}) == 10
    assert value_bytes({"B": b"\x00" * 10}) == 10
    assert item_bytes({"name": {"S": "abc"}, "é": {"BOOL": True}}) == 4 + 3 + 2 + 1
    # Writes round up per KB; an update pays the larger image.
    assert [write_units(n) for n in (1, 1024, 1025)] == [1, 1, 2]
    assert [read_units(4096, True), read_units(4097, True), read_units(100, False)] == [1, 2, 0.5]
    table = Table(
        "t",
        ("pk", "sk"),
        (
            Index("by_time", "LSI", ("pk", "t"), "KEYS_ONLY"),
            Index("sparse", "GSI", ("g",), "INCLUDE", ("x",)),
        ),
    )
    old = {"pk": {"S": "a"}, "sk": {"S": "b"}, "t": {"S": "1"}, "x": {"S": "old"}, "g": {"S": "g"}}
    new = {**old, "t": {"S": "2"}, "x": {"S": "new"}}
    cost = item_write(old, new, table)
    assert [(i.index, i.action) for i in cost.indexes] == [("by_time", "delete+put"), ("sparse", "put")]
    assert cost.units == 1 + 2 + 1
    unchanged = item_write(old, dict(old), table)
    assert (unchanged.units, unchanged.index_units) == (1, 0)
    created = item_write(None, {"pk": {"S": "a"}, "sk": {"S": "b"}}, table)
    assert (created.units, {i.action for i in created.indexes}) == (1, {"none"})
    assert item_write(old, None, table).index_units == 2
    assert item_write(None, new, table, transactional=True).units == 2 * (1 + 1 + 1)


if __name__ == "__main__":
    self_check()
    print("capacity rules: self-check passed")
