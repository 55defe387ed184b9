"""`baton serve --dynamodb-endpoint`: the table, and the reaper's reads of its stream, on DynamoDB Local (AWS's own
engine, `tests/engines.py`), S3 on `baton serve`'s embedded moto. Over real HTTP: a checkpoint and a blob saved and
read back, the items found in DynamoDB Local (and not in moto), and the reaper acting on DynamoDB Local's stream.

The engine is this test process's (`make dynamodb-local` installs it; without it these tests fail, saying so).
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from baton_checkpoints.store import items, layout, schema
from tests.e2e.server_process import BatonServe
from tests.engines import DynamoDBLocal, engine_for_test

TABLE = "baton-e2e-dynamodb-local"
BUCKET = "baton-e2e-dynamodb-local"
DEV_KEY = "btn_e2e_dynamodb_local_key_0001"
TENANT, AGENT, KIND = "dev", "operator", "task_state"
REAP_SECONDS = 15.0
"""How long the reaper may take to act on a write (it polls the stream every half second)."""


@pytest.fixture(scope="module")
def engine() -> DynamoDBLocal:
    """This process's DynamoDB Local (the test fails, saying how to install it, when it is missing)."""
    return engine_for_test()


@pytest.fixture(scope="module")
def served(engine: DynamoDBLocal) -> Iterator[BatonServe]:
    """`baton serve --dynamodb-endpoint <DynamoDB Local>`, one container, S3 on its embedded moto, reaping."""
    client = engine.client()
    if TABLE in client.list_tables()["TableNames"]:
        client.delete_table(TableName=TABLE)  # another run of this module in the same process
    server = BatonServe(
        "--dynamodb-endpoint", engine.endpoint, "--table", TABLE, "--bucket", BUCKET, "--containers", "1",
        dev_key=DEV_KEY,
    )  # fmt: skip
    yield server
    assert server.stop() == 0, "\n".join(server.lines)


@pytest.fixture(scope="module")
def http(served: BatonServe) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def moto_s3(served: BatonServe) -> Any:
    """An S3 client on the server's embedded moto (the endpoint its banner names)."""
    import boto3

    endpoint = served.wait_for(r"AWS endpoint: (\S+) \(embedded moto\)")
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def moto_dynamodb(s3: Any) -> Any:
    """A DynamoDB client on the embedded moto that serves `s3`."""
    import boto3

    return boto3.client("dynamodb", endpoint_url=s3.meta.endpoint_url, region_name="us-east-1")


def tag(s3: Any, key: str) -> str | None:
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    return next((t["Value"] for t in tags if t["Key"] == schema.PENDING_TAG[0]), None)


def objects(s3: Any) -> set[str]:
    return {str(o["Key"]) for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def eventually(condition: Any, seconds: float = REAP_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_the_banner_names_dynamodb_local_for_the_table_and_moto_for_s3(
    served: BatonServe, engine: DynamoDBLocal
) -> None:
    served.wait_for(r"(Press Ctrl-C to stop)")
    banner = "\n".join(served.lines)
    assert re.search(r"AWS endpoint: http://127\.0\.0\.1:\d+ \(embedded moto\); table: " + TABLE, banner), banner
    assert f"DynamoDB endpoint: {engine.endpoint} (the table and its stream)" in banner
    assert "Reaper: on" in banner
    # DynamoDB Local's table outlives the server: the development key expires
    assert "; expires " in banner


def test_a_checkpoint_and_a_blob_are_saved_in_dynamodb_local_and_read_back(
    served: BatonServe, http: httpx.Client, engine: DynamoDBLocal, moto_s3: Any
) -> None:
    subject = f"ticket-{uuid.uuid4().hex[:8]}"
    # Given a blob declared and its bytes PUT to the presigned URL (embedded moto's S3)
    content = f"build log {uuid.uuid4()}\n".encode() * 200
    declared = http.post(
        "/v1/blobs",
        json={"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": "text/plain"},
    )
    assert declared.status_code == 201, declared.text
    blob_id = declared.json()["data"]["blob_id"]
    upload = declared.json()["data"]["upload"]
    with httpx.Client(timeout=30) as outsider:
        assert outsider.put(upload["url"], content=content, headers=upload["headers"]).status_code == 200
    bucket, _, key = unquote(urlsplit(upload["url"]).path).lstrip("/").partition("/")
    assert (bucket, key) == (BUCKET, layout.blob_object(TENANT, blob_id))
    # When a checkpoint holding it is saved, and saved again
    resource = {"name": "build.log", "blob_id": blob_id, "sha256": hashlib.sha256(content).hexdigest()}
    resource |= {"size": len(content), "media_type": "text/plain"}
    body = {"subject_id": subject, "kind": KIND, "state": {"step": 1}, "resources": [resource]}
    created = http.post("/v1/checkpoints", json=body)
    assert created.status_code == 201, created.text
    updated = http.post("/v1/checkpoints", json={**body, "state": {"step": 2}, "expected_revision": 1})
    assert updated.status_code == 200, updated.text
    # Then it reads back through the API, state and blob, and the blob's bytes download
    found = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": KIND})
    assert found.status_code == 200, found.text
    assert (found.json()["data"]["state"], found.json()["data"]["revision"]) == ({"step": 2}, 2)
    (attached,) = found.json()["data"]["resources"]
    with httpx.Client(timeout=30) as outsider:
        assert outsider.get(attached["download_url"]).content == content
    assert http.get(f"/v1/blobs/{blob_id}").json()["data"]["size"] == len(content)
    # And the items are DynamoDB Local's: the checkpoint (revision 2) and the blob's record
    client = engine.client()
    item = client.get_item(
        TableName=TABLE, Key=layout.checkpoint_key(TENANT, subject, AGENT, KIND), ConsistentRead=True
    ).get("Item")
    assert item is not None
    assert item[items.REVISION] == {"N": "2"}
    assert client.get_item(TableName=TABLE, Key=layout.blob_key(TENANT, blob_id), ConsistentRead=True).get("Item")
    # (embedded moto, which serves S3, holds no table of that name)
    assert TABLE not in moto_dynamodb(moto_s3).list_tables()["TableNames"]
    # And the reaper, reading DynamoDB Local's stream, tagged the blob's object attached
    assert eventually(lambda: tag(moto_s3, key) == schema.ATTACHED_TAG[1]), "\n".join(served.lines[-30:])
    # When the checkpoint is deleted
    deleted = http.delete(f"/v1/checkpoints/{created.json()['data']['checkpoint_id']}")
    assert deleted.status_code == 200, deleted.text
    # Then it is gone from DynamoDB Local, and the reaper lets the blob go: its record and its object
    assert "Item" not in client.get_item(
        TableName=TABLE, Key=layout.checkpoint_key(TENANT, subject, AGENT, KIND), ConsistentRead=True
    )
    assert eventually(lambda: key not in objects(moto_s3)), "\n".join(served.lines[-30:])
    assert "Item" not in client.get_item(TableName=TABLE, Key=layout.blob_key(TENANT, blob_id), ConsistentRead=True)
