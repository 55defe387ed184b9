"""Change events over real HTTP against `baton serve --events <URL>`: each kind of change a client makes arrives, as
the JSON an EventBridge rule's target gets, with ids and hashes and never the state; a batch sent again by the stream
keeps its events' ids. (A checkpoint's TTL removal, `checkpoint.expired`, needs DynamoDB's TTL: the integration tests
give the reaper such a record.)"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.e2e.server_process import BatonServe, serve_table
from tests.proof_counts import record

SUITE = "change events (e2e)"
WAIT_SECONDS = 30.0
STATE_MARK = "the-state-never-travels"


class Receiver:
    """An integrator's endpoint on 127.0.0.1: keeps every event POSTed to it."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        received = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.extend(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def until(self, detail_type: str, **detail: Any) -> dict[str, Any]:
        """The first event of this type whose detail holds these values, waiting for it (`WAIT_SECONDS`)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            for event in list(self.events):
                if event["detail-type"] == detail_type and detail.items() <= event["detail"].items():
                    return event
            time.sleep(0.2)
        raise AssertionError(f"no {detail_type} {detail} among {[e['detail-type'] for e in self.events]}")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()


@pytest.fixture(scope="module")
def baton(moto_endpoint: str, receiver: Receiver) -> Iterator[BatonServe]:
    server = serve_table(
        moto_endpoint, f"baton-e2e-events-{uuid.uuid4().hex[:8]}", "--events", receiver.url, containers=4
    )
    yield server
    server.stop()


def test_every_kind_of_change_arrives_with_ids_and_never_the_state(
    baton: BatonServe, http: httpx.Client, receiver: Receiver
) -> None:
    subject = f"events-{uuid.uuid4().hex[:8]}"
    body = {"subject_id": subject, "kind": "task_state", "state": {"note": STATE_MARK}}
    saved = http.post("/v1/checkpoints", json=body).json()["data"]
    checkpoint_id = saved["checkpoint_id"]
    event = receiver.until("checkpoint.saved", checkpoint_id=checkpoint_id, revision=1)
    assert event["source"] == "baton"
    assert event["detail"]["tenant_id"] == "dev"
    assert event["detail"]["subject_id"] == subject
    assert event["detail"]["state_hash"] == saved["state_hash"]
    # A lease acquired and released; one that lapses and is taken over
    leased = http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 10, "holder": "first"})
    assert leased.status_code == 201, leased.text
    receiver.until("lease.acquired", checkpoint_id=checkpoint_id, lease_holder="first")
    token = leased.json()["data"]["lease_token"]
    assert http.request(
        "DELETE", f"/v1/checkpoints/{checkpoint_id}/lease", headers={"Lease-Token": token}
    ).status_code in (200, 204)
    receiver.until("lease.released", checkpoint_id=checkpoint_id, lease_holder="first")
    assert (
        http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 10, "holder": "second"}).status_code
        == 201
    )
    time.sleep(10.5)
    taken = http.post(f"/v1/checkpoints/{checkpoint_id}/lease", json={"ttl_seconds": 60, "holder": "third"})
    assert taken.status_code == 201, taken.text
    receiver.until("lease.lapsed", checkpoint_id=checkpoint_id, lease_holder="second")
    receiver.until("lease.acquired", checkpoint_id=checkpoint_id, lease_holder="third")
    # Closed, then deleted
    closing = {**body, "status": "completed", "lease_token": taken.json()["data"]["lease_token"]}
    assert http.post("/v1/checkpoints", json=closing).status_code == 200
    receiver.until("checkpoint.closed", checkpoint_id=checkpoint_id, revision=2, status="completed")
    gone = http.request(
        "DELETE", f"/v1/checkpoints/{checkpoint_id}", headers={"Lease-Token": taken.json()["data"]["lease_token"]}
    )
    assert gone.status_code == 200, gone.text
    receiver.until("checkpoint.deleted", checkpoint_id=checkpoint_id)
    # A LangGraph thread deleted
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    put = {
        "checkpoint": {
            "v": 4,
            "id": "1ef0000000000001",
            "ts": "2027-03-01T09:00:00+00:00",
            "channel_versions": {},
            "versions_seen": {},
            "updated_channels": [],
        },
        "metadata": {"source": "loop", "step": 0},
        "checkpoint_ns": "",
        "values": {},
    }
    assert http.post(f"/v1/threads/{thread}/checkpoints", json=put).status_code == 201
    assert http.delete(f"/v1/threads/{thread}").status_code == 200
    receiver.until("thread.deleted", thread_id=thread, agent_id="operator")
    # And no event carried the state; every event has its id, each id once per kind of change
    assert STATE_MARK not in json.dumps(receiver.events)
    ids = [event["detail"]["event_id"] for event in receiver.events]
    assert all(ids)
    record(SUITE, events=len(receiver.events), kinds=len({e["detail-type"] for e in receiver.events}))
