"""Blobs over real HTTP: `baton serve` hands out presigned URLs of its embedded moto, and any client on the machine
(httpx here) uploads and downloads with them.

moto verifies no signature and no checksum of a presigned PUT; `baton serve`'s embedded moto (`ChecksumVerified` in
`local/moto_server.py`) refuses a body whose SHA-256 is not the signed `x-amz-checksum-sha256`, as S3 does, so an
upload of other bytes is refused here too. What the save-time check reads back (HEAD: size, SHA-256, media type)
is what moto recorded.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

from tests import proof_counts
from tests.e2e.conftest import table_snapshot
from tests.e2e.server_process import BatonServe

DEFAULT_BUCKET = "baton-local"


def declared(http: httpx.Client, content: bytes, media_type: str = "application/octet-stream") -> dict[str, Any]:
    """Declare `content` as a blob; the answer's data."""
    body = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": media_type}
    answer = http.post("/v1/blobs", json=body)
    assert answer.status_code == 201, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def object_key(url: str) -> tuple[str, str]:
    """(bucket, key) of a path-style presigned URL (the local endpoint is addressed by path)."""
    bucket, _, key = unquote(urlsplit(url).path).lstrip("/").partition("/")
    return bucket, key


def s3(moto_endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")


def test_bytes_put_to_the_upload_url_come_back_from_the_download_url(
    baton: BatonServe, http: httpx.Client, moto_endpoint: str
) -> None:
    content = f"a screenshot, say {uuid.uuid4()}\n".encode() * 1000
    data = declared(http, content, "image/png")
    upload = data["upload"]
    # The URL reaches the same loopback endpoint the server uses, and its key stays inside the tenant's prefix
    assert upload["url"].startswith(moto_endpoint + "/")
    bucket, key = object_key(upload["url"])
    tenant = http.get("/v1/keys", params={"limit": 1}).json()["data"][0]["tenant_id"]
    assert (bucket, key) == (DEFAULT_BUCKET, f"blobs/{tenant}/{data['blob_id']}")
    # When another process-independent client PUTs the bytes with the given headers
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(upload["url"], content=content, headers=upload["headers"])
        assert put.status_code == 200, put.text
        # And reads the blob back through the API, then downloads it
        found = http.get(f"/v1/blobs/{data['blob_id']}")
        assert found.status_code == 200, found.text
        assert {k: found.json()["data"][k] for k in ("blob_id", "sha256", "size", "media_type")} == {
            k: data[k] for k in ("blob_id", "sha256", "size", "media_type")
        }
        downloaded = outsider.get(found.json()["data"]["download_url"])
    proof_counts.record("blobs e2e", uploads=1, downloads=1)
    # Then the bytes are identical, and S3 recorded what the save-time check reads: size, SHA-256, media type, tag
    assert downloaded.status_code == 200
    assert downloaded.content == content
    head = s3(moto_endpoint).head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert head["ContentLength"] == len(content)
    assert head["ContentType"] == "image/png"
    assert head["ChecksumSHA256"] == upload["headers"]["x-amz-checksum-sha256"]
    tags = s3(moto_endpoint).get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    assert tags == [{"Key": "baton-state", "Value": "pending"}]


def test_the_presigned_urls_sign_every_header_and_last_15_minutes(http: httpx.Client) -> None:
    data = declared(http, b"signed")
    upload = data["upload"]
    query = {name: values[0] for name, values in parse_qs(urlsplit(upload["url"]).query).items()}
    assert query["X-Amz-Expires"] == "900"
    assert set(query["X-Amz-SignedHeaders"].split(";")) == {"host", *upload["headers"]}
    assert upload["headers"]["content-length"] == "6"


def test_a_put_of_other_bytes_with_the_same_length_is_refused(http: httpx.Client) -> None:
    data = declared(http, b"the declared bytes")
    upload = data["upload"]
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(upload["url"], content=b"other bytes, same!", headers=upload["headers"])
    assert put.status_code == 400, put.text


def test_what_moto_records_of_a_put_of_other_bytes_still_exposes_a_wrong_size(
    http: httpx.Client, moto_endpoint: str
) -> None:
    # Given a blob declared as 18 bytes, and a client that PUTs 11 other bytes with the given headers but its own
    # content-length (S3 refuses: content-length is signed; moto verifies no signature)
    data = declared(http, b"the declared bytes")
    upload = data["upload"]
    headers = {**upload["headers"], "content-length": "11"}
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(upload["url"], content=b"other bytes", headers=headers)
    # Then whatever the local S3 accepted, a HEAD shows the real size, which the save-time check compares
    if put.status_code == 200:
        bucket, key = object_key(upload["url"])
        head = s3(moto_endpoint).head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert head["ContentLength"] == 11 != data["size"]
    else:
        assert put.status_code in (400, 403), put.text


def test_a_blob_of_another_tenant_is_404_and_a_refused_declaration_writes_nothing(
    baton: BatonServe, http: httpx.Client, table: Any, moto_endpoint: str
) -> None:
    data = declared(http, b"the operator's")
    stranger = http.post(
        "/v1/keys",
        json={"tenant_id": f"t{uuid.uuid4().hex[:12]}", "agent_id": "stranger", "scopes": ["*"]},
    )
    assert stranger.status_code == 201, stranger.text
    secret = stranger.json()["data"]["secret"]
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as other:
        foreign = other.get(f"/v1/blobs/{data['blob_id']}")
        missing = other.get(f"/v1/blobs/blob_{uuid.uuid4().hex}")
        before = table_snapshot(table), _objects(moto_endpoint)
        refused = other.post("/v1/blobs", json={"sha256": "0" * 63, "size": 1, "media_type": "text/plain"})
        after = table_snapshot(table), _objects(moto_endpoint)
    assert foreign.status_code == missing.status_code == 404
    not_found = {"code": "NOT_FOUND", "message": "Resource was not found."}
    assert foreign.json()["error"] == missing.json()["error"] == not_found
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["errors"][0]["pointer"] == "/sha256"
    assert after == before


def _objects(moto_endpoint: str) -> list[str]:
    listed = s3(moto_endpoint).list_objects_v2(Bucket=DEFAULT_BUCKET).get("Contents", [])
    return sorted(o["Key"] for o in listed)


def test_an_uploaded_blob_attached_to_a_checkpoint_downloads_back_identical(http: httpx.Client) -> None:
    # Given a blob declared and uploaded through its presigned URL
    content = f"tool output {uuid.uuid4()}\n".encode() * 500
    data = declared(http, content, "text/plain")
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(data["upload"]["url"], content=content, headers=data["upload"]["headers"])
    assert put.status_code == 200, put.text
    resource = {key: data[key] for key in ("blob_id", "sha256", "size", "media_type")} | {"name": "output.txt"}
    subject = f"e2e-attach-{uuid.uuid4().hex}"
    # When a checkpoint is saved with it, and read back
    saved = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"step": 1}, "resources": [resource]},
    )
    assert saved.status_code == 201, saved.text
    found = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"})
    assert found.status_code == 200, found.text
    (shown,) = found.json()["data"]["resources"]
    # Then the record names it with a download URL that any client can fetch the same bytes from
    assert {key: shown[key] for key in resource} == resource
    with httpx.Client(timeout=30) as outsider:
        downloaded = outsider.get(shown["download_url"])
    assert downloaded.status_code == 200
    assert downloaded.content == content
    proof_counts.record("blobs e2e", attached=1)


def test_a_blob_whose_upload_has_not_landed_is_refused_naming_it(http: httpx.Client, table: Any) -> None:
    # Given a blob declared but never uploaded
    content = b"never sent"
    data = declared(http, content)
    resource = {key: data[key] for key in ("blob_id", "sha256", "size", "media_type")} | {"name": "pending"}
    before = table_snapshot(table)
    # When a save names it
    answer = http.post(
        "/v1/checkpoints",
        json={
            "subject_id": f"e2e-attach-{uuid.uuid4().hex}",
            "kind": "task_state",
            "state": {},
            "resources": [resource],
        },
    )
    # Then it is a 400 naming the resource and the blob, and nothing was written
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["details"]["errors"][0]["pointer"] == "/resources/0/blob_id"
    assert data["blob_id"] in error["message"]
    assert "has not landed" in error["message"]
    assert table_snapshot(table) == before
