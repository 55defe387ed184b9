"""Item sizes and write units, by DynamoDB's documented rules.

The store uses these to keep items under DynamoDB's limit; tests and the benchmark use them to assert what a save
costs (moto's ConsumedCapacity is not realistic). Rules, from DynamoDB's developer guide:

- an item's size is the sum of its attributes' UTF-8 names and values; a string is its UTF-8 bytes, a binary its
  bytes, a number one byte per two significant digits plus one, a boolean or null one byte, a list or map 3 bytes
  plus one per element plus the elements (a map's keys count like names);
- a write costs one unit per started 1 KB of the larger of the item before and after it;
- an index entry is its projected attributes plus the table's and the index's keys plus 100 bytes; a write that
  creates an entry costs a put, removes one a delete, changes an entry's index key a delete and a put, and changes
  only its projected attributes a put (each by the entry's size in 1 KB units); an entry the write leaves as it
  was costs nothing.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Final

from baton_checkpoints.store import schema
from baton_checkpoints.store.attributes import Item

WRITE_UNIT_BYTES: Final = 1024
READ_UNIT_BYTES: Final = 4096
INDEX_ENTRY_OVERHEAD_BYTES: Final = 100
MAX_ITEM_BYTES: Final = 400 * 1024


def number_bytes(text: str) -> int:
    """DynamoDB's size of a number: one byte per two significant digits, plus one."""
    digits = len(Decimal(text).normalize().as_tuple().digits)
    return math.ceil(digits / 2) + 1


def value_bytes(value: dict[str, Any]) -> int:
    """Size of one typed attribute value, without the attribute's name."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
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
        return sum(len(v) for v in raw)
    raise ValueError(f"unknown attribute type {kind}")


def item_bytes(item: Item) -> int:
    """Size of a typed item: each attribute's UTF-8 name plus its value."""
    return sum(len(name.encode("utf-8")) + value_bytes(value) for name, value in item.items())


def units(size: int, unit: int = WRITE_UNIT_BYTES) -> int:
    """Capacity units of `size` bytes (at least one)."""
    return max(1, math.ceil(size / unit))


def index_entry(item: Item | None, index: schema.Index, table: schema.TableSchema = schema.TABLE) -> Item | None:
    """The item's entry in a secondary index (its keys and projected attributes), None when it has none."""
    if item is None or index.partition_key not in item or index.sort_key not in item:
        return None  # a sparse index: an item without the index's keys has no entry
    names = {table.partition_key, table.sort_key, index.partition_key, index.sort_key, *index.non_key_attributes}
    return {k: v for k, v in item.items() if k in names}


def index_write_units(old: Item | None, new: Item | None, index: schema.Index) -> int:
    """Write units a write from `old` to `new` costs in one index."""
    before, after = index_entry(old, index), index_entry(new, index)
    if before == after:
        return 0
    cost = 0
    keys = (index.partition_key, index.sort_key)
    if before is not None and (after is None or any(before[k] != after[k] for k in keys)):
        cost += units(item_bytes(before) + INDEX_ENTRY_OVERHEAD_BYTES)  # the old entry is deleted
    if after is not None:
        cost += units(item_bytes(after) + INDEX_ENTRY_OVERHEAD_BYTES)  # the new entry is put
    return cost


def write_units(old: Item | None, new: Item | None, table: schema.TableSchema = schema.TABLE) -> int:
    """Write units a write from `old` to `new` costs, index maintenance included."""
    own = units(max(item_bytes(old or {}), item_bytes(new or {})))
    return own + sum(index_write_units(old, new, i) for i in (*table.global_indexes, *table.local_indexes))
