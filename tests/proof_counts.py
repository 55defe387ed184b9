"""Case counts of the proof suites (fuzzing, properties, fault injection, isolation, soak), printed at the end of
every run so that CI's log says how much each suite actually tried."""

from __future__ import annotations

from collections import defaultdict

COUNTS: dict[str, dict[str, int]] = defaultdict(dict)


def record(suite: str, **counts: int) -> None:
    """Add `counts` to what `suite` has tried in this run."""
    current = COUNTS[suite]
    for name, value in counts.items():
        current[name] = current.get(name, 0) + value
