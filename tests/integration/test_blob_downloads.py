"""Downloads never render on the bucket's origin (issue 20, defect 5): every presigned GET of a blob says
`attachment` with a safe filename, and serves an active media type (HTML, SVG, XML, PDF...) as
`application/octet-stream`. Both are S3 response overrides signed into the URL (`response-content-disposition`,
`response-content-type`); moto honours them, so the download itself is checked too. Against in-process moto.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import objects
from tests import proof_counts
from tests.builders import lookup, save
from tests.integration.driver import ApiDriver, Result
from tests.integration.test_resources import declare as declare_uploaded

SUITE = "blob downloads"
HTML = b"<!doctype html><script>fetch('/?steal=' + document.cookie)</script>"
OCTET = "application/octet-stream"

# (declared media type, the type the download is served as)
SERVED = [
    ("text/html", OCTET),
    ("text/html; charset=utf-8", OCTET),
    ("image/svg+xml", OCTET),
    ("application/xhtml+xml", OCTET),
    ("text/xml", OCTET),
    ("application/xml", OCTET),
    ("application/rss+xml", OCTET),
    ("text/javascript", OCTET),
    ("application/pdf", OCTET),
    ("multipart/x-mixed-replace; boundary=x", OCTET),
    ("TEXT/HTML", OCTET),
    ("text/plain", "text/plain"),
    ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
    ('text/plain; charset="UTF-8"', "text/plain; charset=utf-8"),
    ("application/json", "application/json"),
    ("image/png", "image/png"),
    ("IMAGE/PNG", "image/png"),
]


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def declared(api: ApiDriver, media_type: str, content: bytes = HTML) -> Result:
    body = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": media_type}
    answer = api.invoke("create_blob", body=body, headers={"idempotency-key": None})
    assert answer.status == 201, answer.raw_body
    return answer


@pytest.mark.parametrize(("media_type", "served"), SERVED, ids=[m for m, _ in SERVED])
def test_a_blobs_download_url_is_an_attachment_served_as_a_passive_type(
    api: ApiDriver, aws: Any, media_type: str, served: str
) -> None:
    # Given a declared blob of this media type, uploaded with its presigned PUT
    created = declared(api, media_type)
    upload = created.data["upload"]
    assert requests.put(upload["url"], data=HTML, headers=upload["headers"], timeout=10).status_code == 200
    blob_id = created.data["blob_id"]
    # When its download URL is read
    found = api.invoke("get_blob", path=f"/v1/blobs/{blob_id}")
    assert found.status == 200, found.raw_body
    assert found.data["media_type"] == media_type  # the record says what was declared
    query = query_of(found.data["download_url"])
    # Then the URL makes S3 answer an attachment named by the blob id, as the passive type or as octet-stream
    assert query["response-content-disposition"] == f'attachment; filename="{blob_id}"'
    assert query["response-content-type"] == served
    # And the download says so (moto honours the overrides, as S3 does)
    downloaded = requests.get(found.data["download_url"], timeout=10)
    assert downloaded.status_code == 200
    assert downloaded.content == HTML
    assert downloaded.headers["Content-Disposition"] == f'attachment; filename="{blob_id}"'
    assert downloaded.headers["Content-Type"] == served
    proof_counts.record(SUITE, media_types=1)


def test_a_checkpoints_resources_download_as_attachments_never_as_html(api: ApiDriver, services: Services) -> None:
    # Given a checkpoint holding an HTML blob and an SVG one, whose names try to inject header parameters
    html = declare_uploaded(services, HTML, media_type="text/html")
    svg = declare_uploaded(services, b"<svg onload='alert(1)'/>", media_type="image/svg+xml")
    html["name"] = 'report.html"; filename="evil.html'
    svg["name"] = "chart.svg\r\nContent-Type: text/html"
    assert save(api, resources=[html, svg]).status == 201
    # When the checkpoint is read
    found = lookup(api)
    assert found.status == 200, found.raw_body
    # Then every resource's download is an attachment served as octet-stream, and carries no injected parameter
    for resource in found.data["resources"]:
        query = query_of(resource["download_url"])
        disposition = query["response-content-disposition"]
        assert disposition.startswith('attachment; filename="'), disposition
        assert "\r" not in disposition
        assert "\n" not in disposition
        assert 'filename="evil.html"' not in disposition
        assert query["response-content-type"] == OCTET
        downloaded = requests.get(resource["download_url"], timeout=10)
        assert downloaded.status_code == 200
        assert downloaded.headers["Content-Type"] == OCTET
        assert downloaded.headers["Content-Disposition"] == disposition
    proof_counts.record(SUITE, resources=2)


def test_a_resource_download_is_named_after_the_resource_and_keeps_a_passive_type(services: Services) -> None:
    # The store's presigning, given what a checkpoint's resource says of its blob (name and media type)
    link = services.blobs.download_of("acme", "blob_" + "0" * 32, name="notes for Zoë.png", media_type="image/png")
    query = query_of(link.url)
    assert query["response-content-disposition"] == (
        "attachment; filename=\"notes for Zo_.png\"; filename*=UTF-8''notes%20for%20Zo%C3%AB.png"
    )
    assert query["response-content-type"] == "image/png"
    active = query_of(services.blobs.download_of("acme", "blob_" + "0" * 32, name="x.html", media_type="text/html").url)
    assert active["response-content-type"] == OCTET
    assert active["response-content-disposition"] == 'attachment; filename="x.html"'


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("report.pdf", 'attachment; filename="report.pdf"'),
        ('a"b.txt', "attachment; filename=\"a_b.txt\"; filename*=UTF-8''a%22b.txt"),
        ("a\\b\\c.txt", 'attachment; filename="c.txt"'),
        ("../../etc/passwd", 'attachment; filename="passwd"'),
        (
            "x\r\nSet-Cookie: a=b",
            "attachment; filename=\"xSet-Cookie_ a=b\"; filename*=UTF-8''xSet-Cookie%3A%20a%3Db",
        ),
        ("evil\u202etxt.exe", 'attachment; filename="eviltxt.exe"'),
        ("a\u2067b\u200d.png", 'attachment; filename="ab.png"'),
        (
            "x; filename=evil.html",
            "attachment; filename=\"x_ filename=evil.html\"; filename*=UTF-8''x%3B%20filename%3Devil.html",
        ),
        ("..", 'attachment; filename="download"'),
        ("", 'attachment; filename="download"'),
        ("日本.txt", "attachment; filename=\"__.txt\"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.txt"),
        ("a" * 150 + ".txt", f'attachment; filename="{"a" * 96}.txt"'),
    ],
)
def test_a_content_disposition_never_lets_a_stored_name_end_the_header_or_add_a_parameter(
    name: str, expected: str
) -> None:
    assert objects.content_disposition(name) == expected
