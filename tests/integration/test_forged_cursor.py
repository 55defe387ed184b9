"""A cursor is opaque but not secret: one forged to start outside the query's range is a 400, never a 500."""

from __future__ import annotations

import base64
import json

import pytest

from baton_checkpoints.store.cursors import query_binding
from tests.integration.driver import ApiDriver


def _forged(binding: str, position: object) -> str:
    raw = json.dumps({"a": position, "b": binding}, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "position",
    ["someone", "9" * 40 + "#someone#task_state", "-5#someone#task_state", "5##task_state", "5#someone#", 7],
)
def test_a_cursor_forged_with_a_position_baton_never_writes_is_a_validation_error(
    api: ApiDriver, position: object
) -> None:
    # Given a cursor with the right binding but a position no page of this query ends at
    binding = query_binding("subject", "acme", "s-1", "operator", None, None)
    # When the list route is asked for that page
    result = api.invoke(
        "list_subject_checkpoints",
        path="/v1/subjects/s-1/checkpoints",
        query={"agent_id": "operator", "cursor": _forged(binding, position)},
    )
    # Then it answers 400 naming the cursor
    assert result.status == 400, result.raw_body
    assert result.error["details"]["errors"][0]["pointer"] == "/cursor"
