"""Downloads over real HTTP (issue 20, defect 5): an agent's HTML uploaded as a blob comes back from `baton serve`'s
presigned download as an attachment of type `application/octet-stream`, so a browser following the console's
Download link saves it instead of rendering it on the bucket's origin. The bucket is `baton serve`'s embedded moto,
which honours S3's signed response overrides as S3 does.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import httpx

from tests import proof_counts
from tests.e2e.server_process import BatonServe

HTML = f"<!doctype html><title>{uuid.uuid4()}</title><script>alert(document.domain)</script>".encode()


def uploaded(http: httpx.Client, content: bytes, media_type: str) -> dict[str, Any]:
    """Declare `content` as a blob and PUT it with its presigned upload; the declaration's data."""
    body = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": media_type}
    answer = http.post("/v1/blobs", json=body)
    assert answer.status_code == 201, answer.text
    data: dict[str, Any] = answer.json()["data"]
    with httpx.Client(timeout=30) as outsider:
        put = outsider.put(data["upload"]["url"], content=content, headers=data["upload"]["headers"])
    assert put.status_code == 200, put.text
    return data


def test_an_uploaded_html_blob_downloads_as_an_octet_stream_attachment(baton: BatonServe, http: httpx.Client) -> None:
    # Given an HTML blob uploaded through baton serve's presigned PUT
    data = uploaded(http, HTML, "text/html; charset=utf-8")
    # When it is read back and downloaded from its download URL, as a browser would
    found = http.get(f"/v1/blobs/{data['blob_id']}")
    assert found.status_code == 200, found.text
    assert found.json()["data"]["media_type"] == "text/html; charset=utf-8"
    with httpx.Client(timeout=30) as browser:
        downloaded = browser.get(found.json()["data"]["download_url"])
    proof_counts.record("blobs e2e", downloads=1)
    # Then the bytes are the upload's, saved as an attachment and typed so that nothing renders them
    assert downloaded.status_code == 200, downloaded.text
    assert downloaded.content == HTML
    assert downloaded.headers["content-disposition"] == f'attachment; filename="{data["blob_id"]}"'
    assert downloaded.headers["content-type"] == "application/octet-stream"


def test_a_passive_blob_keeps_its_type_and_still_downloads_as_an_attachment(
    baton: BatonServe, http: httpx.Client
) -> None:
    content = b"\x89PNG\r\n\x1a\n" + uuid.uuid4().bytes
    data = uploaded(http, content, "image/png")
    found = http.get(f"/v1/blobs/{data['blob_id']}")
    with httpx.Client(timeout=30) as browser:
        downloaded = browser.get(found.json()["data"]["download_url"])
    assert downloaded.status_code == 200, downloaded.text
    assert downloaded.content == content
    assert downloaded.headers["content-disposition"] == f'attachment; filename="{data["blob_id"]}"'
    assert downloaded.headers["content-type"] == "image/png"
