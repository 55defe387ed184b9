"""The audit trail over real HTTP against `baton serve`: each management action of a tenant appears in its trail
(`GET /v1/audit`), `baton audit verify` finds the chain whole, and finds it broken once an event is removed from the
table behind Baton's back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.builders import thread_put_body
from tests.e2e.oauth_flow import OAuthFlow
from tests.e2e.server_process import REPO, BatonServe, serve_table
from tests.e2e.test_checkpoints import client_for
from tests.proof_counts import record

SUITE = "audit (e2e)"
BATON = Path(sys.executable).with_name("baton")


@pytest.fixture(scope="module")
def served(moto_endpoint: str) -> Iterator[tuple[BatonServe, str]]:
    """`baton serve` on a table of its own (the test reaches into it), and the table's name."""
    name = f"baton-e2e-audit-{uuid.uuid4().hex[:8]}"
    server = serve_table(moto_endpoint, name)
    yield server, name
    server.stop()


def verify(server: BatonServe, secret: str, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BATON_URL": server.url, "BATON_API_KEY": secret}
    return subprocess.run(
        [str(BATON), "audit", "verify", *options],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def thread_put(client: httpx.Client, thread: str) -> httpx.Response:
    body = thread_put_body("1ef00000-0000-6000-8000-000000000001", b"hi")
    return client.post(f"/v1/threads/{thread}/checkpoints", json=body)


def test_audit_events_appear_for_each_action_and_verify_finds_a_removed_one(
    served: tuple[BatonServe, str], moto_endpoint: str
) -> None:
    server, table = served
    tenant = f"audit-{uuid.uuid4().hex[:10]}"
    operator = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=30)
    created = operator.post("/v1/keys", json={"tenant_id": tenant, "agent_id": "admin", "scopes": ["*"]})
    assert created.status_code == 201, created.text
    admin_secret = created.json()["data"]["secret"]
    with client_for(server, admin_secret) as admin:
        # Given a tenant's admin who issues and revokes a key, purges a subject, deletes a thread and takes over a
        # lapsed lease, whose limits the operator changes, and who approves and revokes an OAuth grant
        helper = admin.post("/v1/keys", json={"agent_id": "helper", "scopes": ["checkpoints:read"]})
        assert helper.status_code == 201, helper.text
        assert admin.delete(f"/v1/keys/{helper.json()['data']['key_id']}").status_code == 200
        saved = admin.post("/v1/checkpoints", json={"subject_id": "s", "kind": "task_state", "state": {"n": 1}})
        assert saved.status_code == 201, saved.text
        assert admin.delete("/v1/subjects/s").status_code == 200
        assert thread_put(admin, "t-1").status_code == 201
        assert admin.delete("/v1/threads/t-1").status_code == 200
        leased = admin.post("/v1/checkpoints", json={"subject_id": "l", "kind": "task_state", "state": {"n": 1}})
        lease = f"/v1/checkpoints/{leased.json()['data']['checkpoint_id']}/lease"
        assert admin.post(lease, json={"holder": "first", "ttl_seconds": 10}).status_code == 201
        time.sleep(10.5)
        assert admin.post(lease, json={"holder": "second", "ttl_seconds": 10}).status_code == 201
        assert operator.put(f"/v1/tenants/{tenant}/limits", json={"burst": 500}).status_code == 200
        flow = OAuthFlow(httpx.Client(base_url=server.url, timeout=30))
        flow.register()
        flow.grant(admin_secret)
        grants = admin.get("/v1/oauth/grants").json()["data"]
        (grant,) = [g for g in grants if g["client_id"] == flow.client_id]
        assert admin.delete(f"/v1/oauth/grants/{grant['grant_id']}").status_code == 200
        # When its trail is read
        answer = admin.get("/v1/audit", params={"limit": 100})
        assert answer.status_code == 200, answer.text
        events: list[dict[str, Any]] = answer.json()["data"]
    operator.close()
    # Then every action is there, newest first, each once
    assert [e["action"] for e in events] == [
        "grant.revoked",
        "grant.approved",
        "limits.changed",
        "lease.taken_over",
        "thread.deleted",
        "subject.purged",
        "key.revoked",
        "key.issued",
        "key.issued",
    ]
    assert events[-1]["actor"]["agent_id"] == "operator"  # the admin's own key, issued by the operator
    assert events[1]["target"] == {"type": "oauth_client", "id": flow.client_id}
    assert events[0]["details"] == {"how": "api"}
    # And `baton audit verify` finds the chain whole
    whole = verify(server, admin_secret)
    assert whole.returncode == 0, whole.stderr
    assert f"The audit trail of {tenant} is whole: events 1 to 9" in whole.stdout
    # When an event is removed from the table behind Baton's back
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    found = dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": f"E#{tenant}"}, ":events": {"S": "E#"}},
    )["Items"]
    fourth = next(item for item in found if item["sk"]["S"] == "E#000000000004")
    dynamodb.delete_item(TableName=table, Key={"pk": fourth["pk"], "sk": fourth["sk"]})
    # Then `baton audit verify` says so, and fails; so does the operator's check of that customer's trail
    broken = verify(server, admin_secret)
    assert broken.returncode == 5, (broken.stdout, broken.stderr)
    assert "events 4 to 4 are missing" in broken.stderr
    by_operator = verify(server, server.key, "--tenant", tenant)
    assert by_operator.returncode == 5, (by_operator.stdout, by_operator.stderr)
    assert f"baton: audit trail of {tenant}: events 4 to 4 are missing" in by_operator.stderr
    record(SUITE, actions=len(events), verifications=3)
