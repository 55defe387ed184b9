"""The log audit on traffic made to be caught (`tests/e2e/log_audit.py` says what it checks): secrets in headers,
queries and bodies, states full of markers, each kind of error. The session's `baton` fixture audits everything its
server printed when the session ends as well, so the audit covers every end-to-end test, whatever order or worker
runs them.
"""

from __future__ import annotations

import json
import uuid

import httpx

from tests.e2e.log_audit import audit_server
from tests.e2e.planted import plant_secret, plant_state_marker
from tests.e2e.server_process import BatonServe


def own_traffic(baton: BatonServe) -> dict[str, str]:
    """Requests that put secrets and states where a careless log would pick them up; returns facts to check."""
    run = uuid.uuid4().hex[:12]
    marker = plant_state_marker(f"log-audit-state-{run}")
    subject = f"log-audit-{run}"
    with httpx.Client(base_url=baton.url, timeout=30) as client:
        operator = {"Authorization": f"Bearer {baton.key}"}
        minted = client.post(
            "/v1/keys",
            json={"agent_id": f"audit-{run}", "scopes": ["*"], "description": f"log audit {run}"},
            headers=operator,
        )
        assert minted.status_code == 201, minted.text
        secret = plant_secret(minted.json()["data"]["secret"])
        key_id = minted.json()["data"]["key_id"]
        mine = {"Authorization": f"Bearer {secret}"}
        state = {"note": marker, "turns": [{"role": "user", "text": marker}]}
        saved = client.post(
            "/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": state}, headers=mine
        )
        assert saved.status_code == 201, saved.text
        checkpoint_id = saved.json()["data"]["checkpoint_id"]
        lookup = {"subject_id": subject, "kind": "task_state"}
        assert client.get("/v1/checkpoints", params=lookup, headers=mine).status_code == 200
        assert client.get(f"/v1/checkpoints/{checkpoint_id}", headers=mine).status_code == 200
        assert client.get(f"/v1/subjects/{subject}/checkpoints", params={"limit": 1}, headers=mine).status_code == 200
        # Errors, each with the state or a secret somewhere in the request
        unknown_field = {"subject_id": subject, "kind": "task_state", "state": state, "stray": marker}
        assert client.post("/v1/checkpoints", json=unknown_field, headers=mine).status_code == 400
        bad_kind = {"subject_id": subject, "kind": marker, "state": state}
        assert client.post("/v1/checkpoints", json=bad_kind, headers=mine).status_code == 400
        text_body = client.post(
            "/v1/checkpoints", content=json.dumps(state), headers={**mine, "Content-Type": "text/plain"}
        )
        assert text_body.status_code == 415
        assert (
            client.get("/v1/checkpoints", params=lookup, headers={"Authorization": f"Bearer {secret}x"}).status_code
            == 401
        )
        forged = plant_secret(f"btn_{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}")
        assert (
            client.get("/v1/checkpoints", params=lookup, headers={"Authorization": f"Bearer {forged}"}).status_code
            == 401
        )
        assert client.get("/v1/health", params={"api_key": secret}, headers={"X-Api-Key": secret}).status_code == 200
        assert client.get(f"/v1/checkpoints/ckpt_{uuid.uuid4().hex}", headers=mine).status_code == 404
        assert client.get(f"/v1/nothing/{run}", headers=mine).status_code == 404
        assert client.get("/v1/keys", params={"tenant_id": "someone-else"}, headers=mine).status_code == 403
        assert client.delete(f"/v1/checkpoints/{checkpoint_id}", headers=mine).status_code == 200
        assert client.delete(f"/v1/keys/{key_id}", headers=operator).status_code == 200
    return {"key_id": key_id}


def test_the_sessions_logs_hold_no_secret_no_state_and_always_the_request_id(baton: BatonServe) -> None:
    facts = own_traffic(baton)
    found = audit_server(baton, "log audit")
    # The access lines of this test's own key name its tenant and key: the audit looked at real lines.
    own = [r for records in found.access.values() for r in records if r.get("key_id") == facts["key_id"]]
    assert len(own) >= 8, own
    assert {r.get("tenant_id") for r in own} == {"dev"}
    assert {r.get("route") for r in own} >= {"/v1/checkpoints", "/v1/checkpoints/{checkpoint_id}"}
    assert not found.problems, "\n".join(found.problems[:50]) + f"\n({len(found.problems)} problems)"
