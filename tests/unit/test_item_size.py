"""The stored size of a checkpoint, counted the way DynamoDB bills it (performance.md: a count, not a timing)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_32_kb_conversation_is_stored_in_at_most_a_third_of_its_canonical_size() -> None:
    # Given the benchmark's seeded 32 KB agent conversation (real text from the Python documentation)
    sys.path.insert(0, str(BENCH))
    try:
        import warm
    finally:
        sys.path.remove(str(BENCH))
    # When the item its first save writes is sized as DynamoDB bills it
    figures = warm.measure_item()
    # Then the whole item, keys and attributes included, is at most a third of the canonical JSON
    assert figures.canonical_bytes > 31_000
    assert figures.state_attribute == "state_z"
    assert figures.item_bytes * 3 <= figures.canonical_bytes, (figures.item_bytes, figures.canonical_bytes)
