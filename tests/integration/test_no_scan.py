"""No Scan anywhere: every read is a GetItem, a BatchGetItem or a Query on a key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
# `client.scan(`, `table.scan(`, an operation named "Scan", a paginator or waiter of "scan".
SCAN_CALL = re.compile(r"""\bscan\s*\(|["']Scan["']|get_paginator\s*\(\s*["']scan["']""")


def _sources() -> list[Path]:
    return sorted(p for p in FUNCTIONS.rglob("*.py") if "egg-info" not in p.parts[-2])


@pytest.mark.parametrize(
    "line",
    [
        "response = self._client.scan(TableName=name)",
        "items = table.scan (FilterExpression=f)",
        'calls["Scan"] += 1',
        "paginator = client.get_paginator('scan')",
    ],
)
def test_the_pattern_recognises_a_scan(line: str) -> None:
    # Given a line that calls Scan in one of its spellings
    # Then the pattern finds it (so the test below can fail)
    assert SCAN_CALL.search(line)


@pytest.mark.parametrize("line", ['"ScanIndexForward": False', "# a scan of the table would be slow"])
def test_the_pattern_ignores_what_is_not_a_scan(line: str) -> None:
    # Given a line that mentions scanning without calling Scan
    # Then the pattern leaves it alone
    assert not SCAN_CALL.search(line)


def test_no_source_under_functions_calls_scan() -> None:
    # Given every Python source under functions/
    sources = _sources()
    assert sources
    # When each is searched for a Scan call
    found = [
        f"{path.relative_to(FUNCTIONS)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SCAN_CALL.search(line)
    ]
    # Then there is none
    assert not found, "Scan is not allowed (performance.md): " + "; ".join(found)
