"""OpenCheckpoint 0.1 over real HTTP against `baton serve`: the schema served without a key, an invalid document
refused with the pointer of every violation and nothing written, and the seed's document round-tripping
byte-for-byte in canonical form."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import rfc8785

from baton_checkpoints.domain import opencheckpoint
from tests.builders import SEED_DOCUMENT
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SCHEMA_FILE = Path(opencheckpoint.__file__).parent / "schemas" / "opencheckpoint-0.1.json"


def test_the_schema_is_served_as_the_file_without_a_key(baton: BatonServe) -> None:
    with httpx.Client(base_url=baton.url) as anonymous:
        served = anonymous.get("/v1/schemas/opencheckpoint-0.1.json")
        missing = anonymous.get("/v1/schemas/opencheckpoint-0.2.json")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/schema+json")
    assert served.content == SCHEMA_FILE.read_bytes()
    assert missing.status_code == 404
    assert missing.json()["error"] == {"code": "NOT_FOUND", "message": "Resource was not found."}
    record("opencheckpoint (e2e)", requests=2)


def test_an_invalid_document_is_refused_by_pointer_and_the_seed_round_trips(http: httpx.Client) -> None:
    subject = f"e2e-ocp-{uuid.uuid4().hex}"
    broken = json.loads(json.dumps(SEED_DOCUMENT))
    broken["statements"][0]["kind"] = "rumour"
    broken["statements"][1]["origin"]["type"] = "tool"
    del broken["task"]["title"]
    body = {"subject_id": subject, "kind": "task_state", "format": "opencheckpoint/0.1", "state": broken}
    refused = http.post("/v1/checkpoints", json=body)
    assert refused.status_code == 400, refused.text
    pointers = [e["pointer"] for e in refused.json()["error"]["details"]["errors"]]
    assert pointers == ["/state/statements/0/kind", "/state/statements/1/origin/type", "/state/task/title"]
    assert http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).status_code == 404
    saved = http.post("/v1/checkpoints", json={**body, "state": SEED_DOCUMENT})
    assert saved.status_code == 201, saved.text
    read = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    raw = read.content.decode("utf-8")
    state_text = raw[raw.index('"state":') + len('"state":') : raw.rindex('},"meta":')]
    assert state_text.encode("utf-8") == rfc8785.dumps(SEED_DOCUMENT)
    assert saved.json()["data"]["state_bytes"] == len(rfc8785.dumps(SEED_DOCUMENT))
    record("opencheckpoint (e2e)", requests=4, invalid=1)
