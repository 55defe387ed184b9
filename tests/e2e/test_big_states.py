"""Big states over real HTTP against `baton serve`: the largest state, made of the characters JSON escapes, still
fits Lambda's 6 MB event and response, and reads back as it was saved."""

from __future__ import annotations

import json
import random
import string
import uuid

import httpx

from baton_checkpoints.domain import limits


def canonical_size(state: object) -> int:
    return len(json.dumps(state, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8"))


def test_the_largest_state_of_escaped_characters_fits_lambda_both_ways(http: httpx.Client) -> None:
    # Given a 3,000,000-byte state made of quotes and backslashes (each written as two bytes in JSON, and escaped
    # again inside the event API Gateway hands to Lambda)
    characters = (limits.MAX_STATE_BYTES - len('{"q":""}')) // 2
    state = {"q": ('"\\' * characters)[:characters]}
    assert canonical_size(state) == limits.MAX_STATE_BYTES
    subject = f"e2e-big-{uuid.uuid4().hex}"
    # When it is saved and read back (the client accepting gzip, as httpx does)
    saved = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": state})
    found = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    # Then both succeed, and the state is the same
    assert saved.status_code == 201, saved.text[:500]
    assert saved.json()["data"]["state_bytes"] == limits.MAX_STATE_BYTES
    assert found.status_code == 200, found.text[:500]
    assert found.headers.get("content-encoding") == "gzip"
    assert found.json()["data"]["state"] == state


def test_a_spilled_state_reads_back_the_same_with_and_without_gzip(http: httpx.Client) -> None:
    # Given a 2 MB state that barely compresses (so it is stored in the bucket)
    chooser = random.Random(11)
    alphabet = string.ascii_letters + string.digits + " .,;:!?-_()[]{}<>/|@#$%^&*+="
    state = {"noise": "".join(chooser.choice(alphabet) for _ in range(2_000_000))}
    subject = f"e2e-big-{uuid.uuid4().hex}"
    saved = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "conversation", "state": state})
    assert saved.status_code == 201, saved.text[:500]
    # When it is read by id without gzip, and looked up with it
    checkpoint_id = saved.json()["data"]["checkpoint_id"]
    plain = http.get(f"/v1/checkpoints/{checkpoint_id}", headers={"Accept-Encoding": "identity"})
    zipped = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "conversation"})
    # Then both carry the state as saved
    assert plain.status_code == 200
    assert zipped.status_code == 200
    assert plain.headers.get("content-encoding") is None
    assert plain.json()["data"]["state"] == state == zipped.json()["data"]["state"]
