"""The rules of a blob declaration that need no AWS: the media type's documented pattern is exactly what the body
model accepts, and an upload's expiry is read from the URL S3 will judge it by."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from baton_checkpoints.domain.models import MAX_MEDIA_TYPE_CHARS, MEDIA_TYPE_PATTERN, CreateBlobRequest
from tests import proof_counts

DOCUMENTED = re.compile(MEDIA_TYPE_PATTERN.removeprefix("^").removesuffix("$"))
PIECES = st.sampled_from(
    ["text", "/", "plain", ";", " ", "=", "charset", "utf-8", '"', "a b", "\\", "\n", "\t", "é", "+", "x-", ".", ""]
)


def accepted(media_type: str) -> bool:
    try:
        CreateBlobRequest.model_validate({"sha256": "0" * 64, "size": 0, "media_type": media_type})
    except ValidationError:
        return False
    return True


@given(
    st.lists(PIECES, max_size=12).map("".join)
    | st.text(max_size=40)
    | st.from_regex(DOCUMENTED, fullmatch=True).filter(lambda text: len(text) <= 300)
)
@example("text/plain; charset=utf-8")
@example('multipart/form-data; boundary="a b"')
@example("text/plain\n")
@example("a/" + "b" * (MAX_MEDIA_TYPE_CHARS - 2))
@example("a/" + "b" * (MAX_MEDIA_TYPE_CHARS - 1))
def test_the_model_accepts_a_media_type_exactly_when_the_documented_pattern_matches_it(media_type: str) -> None:
    # JSON Schema's `$` ends the text (no trailing newline), as fullmatch does
    documented = DOCUMENTED.fullmatch(media_type) is not None and 1 <= len(media_type) <= MAX_MEDIA_TYPE_CHARS
    proof_counts.record("blob media types", cases=1, accepted=int(documented))
    assert accepted(media_type) is documented


@pytest.mark.parametrize(
    ("media_type", "ok"),
    [
        ("application/pdf", True),
        ("image/svg+xml", True),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", True),
        ("text/plain;charset=utf-8", True),
        ('text/plain; title="a report"', True),
        ("text", False),
        ("/plain", False),
        ("text/", False),
        ("text/plain;", False),
        ("text/plain; charset", False),
        ('text/plain; title="a "quoted" one"', False),
        ("text/plain\r\nx-amz-acl: public-read", False),
    ],
)
def test_media_types(media_type: str, ok: bool) -> None:
    assert accepted(media_type) is ok


def test_an_upload_expires_when_its_signature_does() -> None:
    from baton_checkpoints.store.objects import _expiry_ms

    url = (
        "https://bucket.s3.amazonaws.com/blobs/t/blob_x?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Date=20270201T083015Z&X-Amz-Expires=900&X-Amz-Signature=00"
    )
    # 2027-02-01T08:30:15Z + 900 s
    assert _expiry_ms(url) == 1_801_471_515_000
