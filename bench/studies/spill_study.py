"""Where a big state should live: in the item (packed) or in the bucket, by what each costs a save.

For the benchmark's seeded conversation and task states (`bench/harness/states.py`, seed 7) from 8 KB to 3 MB it prints
the canonical bytes, the stored form (packed by `baton_checkpoints.store.codec` when that pays), the write units a save
would
pay with the state in the item, and the cost of one save either way at on-demand prices (us-east-1): in the item,
a write unit per KB ($0.625 a million); in the bucket, one write unit for the item that keeps the key, one S3 PUT
for the object and one PUT-class request when the reaper tags it attached ($5 a million each, as much as 8 write
units each). A read pays 4 KB read units ($0.125 a million, consistent) in the item, or one read unit and one S3
GET ($0.4 a million). `baton_checkpoints.store.items.SPILL_ABOVE_BYTES` is where the two meet.

Usage: `python -m bench.studies.spill_study`.
"""

from __future__ import annotations

import json
import math
import sys

from baton_checkpoints.store import items
from bench.harness.states import conversation_state, task_state

WRITE_UNIT = 0.625e-6
READ_UNIT = 0.125e-6
S3_PUT = 5e-6
S3_GET = 0.4e-6
ITEM_REST_BYTES = 400
"""What an item holds besides the state (keys, names, times, the request ring): about 400 bytes."""
SIZES = (8_000, 16_000, 32_000, 48_000, 64_000, 128_000, 256_000, 1_000_000, 2_000_000, 3_000_000)


def row(kind: str, size: int) -> str:
    state = (conversation_state if kind == "conversation" else task_state)(target_bytes=size, seed=7)
    text = json.dumps(state, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")
    stored = len(items.stored_bytes(items.pack_state(text)[1]))
    inline_units = math.ceil((stored + ITEM_REST_BYTES) / 1024)
    inline = inline_units * WRITE_UNIT
    spilled = math.ceil((ITEM_REST_BYTES + 120) / 1024) * WRITE_UNIT + 2 * S3_PUT
    read_inline = math.ceil((stored + ITEM_REST_BYTES) / 4096) * READ_UNIT
    read_spilled = READ_UNIT + S3_GET
    where = "bucket" if stored > items.SPILL_ABOVE_BYTES else "item"
    return (
        f"| {kind} | {len(text):,} | {stored:,} ({stored / len(text):.3f}) | {inline_units} | "
        f"${inline * 1e6:.2f} | ${spilled * 1e6:.2f} | ${read_inline * 1e6:.3f} | ${read_spilled * 1e6:.3f} | {where} |"
    )


def main() -> int:
    print(f"Spill threshold: stored form over {items.SPILL_ABOVE_BYTES:,} bytes. Costs per million saves or reads.")
    print()
    print(
        "| state | canonical B | stored B (ratio) | write units in the item | save, item | save, bucket |"
        " read, item | read, bucket | stored in |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in ("conversation", "task"):
        for size in SIZES:
            print(row(kind, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
