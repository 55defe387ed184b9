"""A cursor is opaque but not secret: one forged to start outside the query's range is a 400, never a 500."""

from __future__ import annotations

import base64
import json

from baton.store.cursors import query_binding
from tests.integration.driver import ApiDriver


def _forged(binding: str, keys: dict[str, str]) -> str:
    raw = json.dumps({"b": binding, "k": keys}, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_cursor_forged_outside_the_agents_range_is_a_validation_error(api: ApiDriver) -> None:
    # Given a cursor with the right binding and partition but a start key outside the agent's index range
    binding = query_binding("subject", "acme", "s-1", "operator", None, None)
    cursor = _forged(
        binding,
        {"pk": "C#acme#s-1", "sk": "C#someone#task_state", "lsi2sk": "someone#2026-01-01T00:00:00.000Z"},
    )
    # When the list route is asked for that page
    result = api.invoke(
        "list_subject_checkpoints",
        path="/v1/subjects/s-1/checkpoints",
        query={"agent_id": "operator", "cursor": cursor},
    )
    # Then it answers 400 naming the cursor
    assert result.status == 400, result.raw_body
    assert result.error["details"]["errors"][0]["pointer"] == "/cursor"
