"""The stored size of a checkpoint, counted the way DynamoDB bills it (performance.md: a count, not a timing)."""

from __future__ import annotations

from bench.studies import item_size


def test_a_32_kb_conversation_is_stored_in_at_most_a_third_of_its_canonical_size() -> None:
    # Given the benchmark's seeded 32 KB agent conversation (real text from the Python documentation), saved once
    # through the api handler on in-process moto in a child interpreter (no socket is opened)
    # When the items the save added are sized as DynamoDB bills them
    figures = item_size.measure_item()
    # Then the whole item, keys and attributes included, is at most a third of the canonical JSON, the state
    # stored compressed (binary)
    assert figures.canonical_bytes > 31_000
    assert figures.items >= 1
    assert figures.largest_attribute_type == "B", figures
    assert figures.item_bytes * 3 <= figures.canonical_bytes, (figures.item_bytes, figures.canonical_bytes)
