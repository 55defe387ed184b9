"""The README's curl session, over real HTTP."""

from __future__ import annotations

import httpx


def test_save_then_save_again_keeps_the_id(http: httpx.Client) -> None:
    # Given a fresh subject
    body = {"subject_id": "e2e-smoke", "kind": "task_state", "state": {"step": 1}}
    # When it is saved twice
    first = http.post("/v1/checkpoints", json=body)
    second = http.post("/v1/checkpoints", json={**body, "state": {"step": 2}})
    # Then the first creates and the second updates the same checkpoint
    assert first.status_code == 201, first.text
    assert second.status_code == 200, second.text
    assert second.json()["data"]["checkpoint_id"] == first.json()["data"]["checkpoint_id"]
    assert second.json()["data"]["updated"] is True
