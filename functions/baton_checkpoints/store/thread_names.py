"""The attribute names of thread items (`store/threads/` writes them, `store/thread_reaping.py` reads them), how
both read the write values an item references, and what a deleted checkpoint leaves: one vocabulary, importing only
the table's schema, so the reaper's cold start loads no domain model to learn them."""

from __future__ import annotations

from typing import Any, Final

from baton_checkpoints.store.layout import THREAD_CHECKPOINT, THREAD_HEAD_SK
from baton_checkpoints.store.schema import SK, TTL_ATTRIBUTE

# The head (`H`).
GENERATION: Final = "g"
"""The thread's life: on the head, and on each checkpoint item of that life."""
TTL_MS: Final = "tms"
TTL_S: Final = "tts"
EXPIRES_MS: Final = "exp"
FLOOR: Final = "fl"
"""When the thread was last deleted (ms): nothing put or written before it shows, whatever a writer still knows."""
DELETED: Final = "dl"
"""Set by a delete, removed by the next touch of the head (a put that starts the thread again): a head without it is a
live thread for the tenant's `checkpoints` quota (`store/metering.py`)."""
CREATED: Final = "ca"
UPDATED: Final = "ua"

# A checkpoint (`K#<ns>#<id>`).
DOCUMENT: Final = "cp"
PARENT: Final = "par"
INLINE: Final = "iv"
SIZES: Final = "vz"
WRITE_CALL: Final = "w:"
"""The prefix of a `put_writes` call's attribute (`w:<digest of the call>`): the call's task, task path, arrival
and writes, set at once by one UpdateItem, so a call is visible whole or not at all."""
DEAD: Final = "dead"
"""On a tombstone: the checkpoint of a deleted thread (when it was deleted, ms). Late writes to it are refused."""
TOMBSTONE_SECONDS: Final = 2_592_000
"""How long a deleted thread's checkpoints refuse late writes before DynamoDB's TTL removes their tombstones: thirty
days, as long as a thread may live."""
WRITE_BYTES: Final = "wb"
WRITE_INLINE: Final = "wi"
HELD: Final = "hv"
"""Large values new in a checkpoint that ride in its item (packed when that pays), by channel: `SIZES` names the
checkpoint that holds a version (its own id here; a child that keeps the version names its parent's)."""
NAMESPACE: Final = "ns"
"""The namespace in full, on a checkpoint item whose key holds the namespace's digest (a long one)."""

# A value (`V#...`), a write value (`W#...`), and the entries of `INLINE` and of `WRITE_CALL` attributes.
TYPE: Final = "t"
BYTES: Final = "b"
PACKED: Final = "z"
OBJECT: Final = "so"
SIZE: Final = "n"
VERSION: Final = "v"
CHANNEL: Final = "c"
TASK_PATH: Final = "p"
REFERENCE: Final = "r"
INDEX: Final = "i"
TASK: Final = "k"
ARRIVED: Final = "a"
LIST: Final = "l"


def write_references(item: dict[str, Any] | None) -> set[str]:
    """The sort keys of the write values an item's pending writes (its `WRITE_CALL` attributes) reference."""
    found: set[str] = set()
    for name, attr in (item or {}).items():
        if name.startswith(WRITE_CALL):
            for entry in attr["M"][LIST]["L"]:
                reference = entry["M"].get(REFERENCE, {}).get("S")
                if isinstance(reference, str):
                    found.add(reference)
    return found


def tombstone(key: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """What a deleted thread's checkpoint leaves (an item for `key`): when it was deleted, and a TTL."""
    return {
        **key,
        DEAD: {"N": str(now_ms)},
        TTL_ATTRIBUTE: {"N": str(now_ms // 1000 + 1 + TOMBSTONE_SECONDS)},
    }


def ended_by_delete(item: dict[str, Any], floor_ms: int) -> bool:
    """Whether a delete of the thread at `floor_ms` ends `item` (one of its partition's, with its sort key, `DEAD` and
    `UPDATED`): everything put before it, but the head (it records the delete) and tombstones (ended already)."""
    return item[SK]["S"] != THREAD_HEAD_SK and DEAD not in item and int(item.get(UPDATED, {}).get("N", "0")) <= floor_ms


def ending(key: dict[str, Any], floor_ms: int) -> dict[str, Any]:
    """The write that ends the item at `key` for a delete at `floor_ms` (a BatchWriteItem request): a checkpoint
    leaves a tombstone, a value or write value goes."""
    if key[SK]["S"].startswith(THREAD_CHECKPOINT):
        return {"PutRequest": {"Item": tombstone(key, floor_ms)}}
    return {"DeleteRequest": {"Key": key}}
