"""The SDK's answers to failures on the client's side, against respx and real files: local transport errors (a key
that is no header value, a URL scheme httpx cannot speak) are raised at once and never quote the request, and a file
that changes during its upload is a `FileChangedError`, whether the SDK sees it or S3 does (`BadDigest`). No test
sleeps: the sleep is injected."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx

from baton_checkpoints.client import Baton, BatonConnectionError, BatonError, ForbiddenError
from baton_checkpoints.client.blobs import file_chunks
from baton_checkpoints.client.errors import FileChangedError
from tests.proof_counts import record
from tests.unit.conftest import Sleeps

SUITE = "sdk transfers (unit)"
URL = "https://baton.test"
SECRET = "btn_" + "s3cr3t" * 6
S3_PUT = "https://s3.test/bucket/blobs/blob_1"
SIGNATURE = "X-Amz-Signature=deadbeef"


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as mock:
        yield mock


@pytest.fixture
def client(sleeps: Sleeps) -> Iterator[Baton]:
    with Baton(URL, SECRET, sleep=sleeps, rng=random.Random(7)) as sdk:
        yield sdk


# -- local transport errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        httpx.LocalProtocolError(f"Illegal header value b'Bearer {SECRET}\\r'"),
        httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol 'ftp://' (Bearer {SECRET})"),
    ],
    ids=["bad-header-value", "unsupported-scheme"],
)
def test_a_local_transport_error_is_raised_at_once_without_its_text(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps, error: httpx.TransportError
) -> None:
    # Given a request httpx refuses before sending anything, with a text quoting the Authorization header
    route = router.get(f"{URL}/v1/blobs/blob_1").mock(side_effect=error)
    # When it is made (a GET: repeatable, so any other transport error would be retried)
    with pytest.raises(BatonConnectionError) as raised:
        client.get_blob("blob_1")
    record(SUITE, cases=1)
    # Then it is tried once, not waited on, and neither the message nor the chained cause carries the key
    assert route.call_count == 1
    assert sleeps == []
    assert SECRET not in str(raised.value) + repr(raised.value)
    assert raised.value.__cause__ is None
    assert type(error).__name__ in raised.value.message
    assert raised.value.outcome_unknown is False


def test_a_connect_error_is_still_retried_and_its_text_is_not_quoted(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps
) -> None:
    # Given a server that cannot be reached, with an error text that (unusually) quotes a header
    route = router.get(f"{URL}/v1/blobs/blob_1").mock(side_effect=httpx.ConnectError(f"refused: Bearer {SECRET}"))
    # When a blob is read
    with pytest.raises(BatonConnectionError) as raised:
        client.get_blob("blob_1")
    record(SUITE, cases=1)
    # Then every attempt is made, and the message names the type with a fixed sentence
    assert route.call_count == 4
    assert len(sleeps) == 3
    assert SECRET not in raised.value.message
    assert "ConnectError: could not connect" in raised.value.message


# -- files that change during their upload ---------------------------------------------------------------------


def test_file_chunks_reads_exactly_the_declared_bytes(tmp_path: Path) -> None:
    # Given a file of 10 000 bytes, read in chunks of 4096
    source = tmp_path / "data.bin"
    source.write_bytes(bytes(range(256)) * 39 + b"x" * 16)
    progress: list[tuple[int, int]] = []
    # When it is streamed as declared
    chunks = list(file_chunks(source, 10_000, lambda done, total: progress.append((done, total)), chunk_size=4096))
    record(SUITE, cases=1)
    # Then the chunks are its bytes, and progress ends at the total
    assert b"".join(chunks) == source.read_bytes()
    assert [len(chunk) for chunk in chunks] == [4096, 4096, 1808]
    assert progress[-1] == (10_000, 10_000)


@pytest.mark.parametrize("change", ["grew", "shrank"])
def test_a_file_whose_size_changed_since_it_was_hashed_is_refused(tmp_path: Path, change: str) -> None:
    # Given a file declared at 8192 bytes, which then grew or shrank before the upload opened it
    source = tmp_path / "data.bin"
    source.write_bytes(b"a" * (8192 + 1 if change == "grew" else 8192 - 1))
    # When it is streamed
    with pytest.raises(FileChangedError) as raised:
        list(file_chunks(source, 8192, None, chunk_size=4096))
    record(SUITE, cases=1)
    # Then nothing is sent: the error names the change
    assert raised.value.code == "FILE_CHANGED"
    assert "changed during the upload" in raised.value.message


def test_a_file_appended_to_while_it_is_read_fails_before_its_last_chunk(tmp_path: Path) -> None:
    # Given a file of 3 chunks, and a writer that appends to it once the first chunk has left
    source = tmp_path / "build.log"
    source.write_bytes(b"b" * 3 * 4096)
    stream = file_chunks(source, 3 * 4096, None, chunk_size=4096)
    sent = [next(stream)]
    with source.open("ab") as sink:
        sink.write(b"more")
    # When the rest is read
    with pytest.raises(FileChangedError):
        sent.extend(stream)
    record(SUITE, cases=1)
    # Then the last chunk never left (the upload cannot complete with bytes the hash does not cover)
    assert len(sent) < 3


def test_s3s_bad_digest_on_the_presigned_put_is_a_file_changed_error(
    router: respx.MockRouter, client: Baton, sleeps: Sleeps, tmp_path: Path
) -> None:
    # Given a file, its declaration, and S3 answering the PUT that the bytes do not have the signed SHA-256
    source = tmp_path / "note.txt"
    source.write_bytes(b"hello\n")
    digest = hashlib.sha256(b"hello\n").hexdigest()
    router.post(f"{URL}/v1/blobs").mock(return_value=_declared(digest, 6))
    bad_digest = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadDigest</Code><Message>The SHA256 you specified did '
        b"not match the calculated checksum.</Message></Error>"
    )
    put = router.put(S3_PUT).mock(return_value=httpx.Response(400, content=bad_digest))
    # When it is uploaded
    with pytest.raises(FileChangedError) as raised:
        client.upload_blob(source)
    record(SUITE, cases=1)
    # Then it is the typed error (not a VALIDATION_ERROR holding S3's XML), raised at once
    assert put.call_count == 1
    assert sleeps == []
    assert "<Code>" not in raised.value.message
    assert raised.value.status == 400


def test_another_s3_error_on_the_presigned_put_keeps_its_class(
    router: respx.MockRouter, client: Baton, tmp_path: Path
) -> None:
    # Given S3 refusing the PUT for another reason (an expired signature)
    source = tmp_path / "note.txt"
    source.write_bytes(b"hello\n")
    router.post(f"{URL}/v1/blobs").mock(return_value=_declared(hashlib.sha256(b"hello\n").hexdigest(), 6))
    denied = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
    router.put(S3_PUT).mock(return_value=httpx.Response(403, content=denied))
    # When it is uploaded, then the error is not read as a changed file
    with pytest.raises(BatonError) as raised:
        client.upload_blob(source)
    record(SUITE, cases=1)
    assert type(raised.value) is ForbiddenError
    assert raised.value.status == 403


def _declared(digest: str, size: int) -> httpx.Response:
    data = {
        "blob_id": "blob_1",
        "sha256": digest,
        "size": size,
        "media_type": "text/plain",
        "created_at": "2026-12-01T00:00:00.000Z",
        "upload": {
            "url": f"{S3_PUT}?{SIGNATURE}",
            "method": "PUT",
            "headers": {"content-type": "text/plain"},
            "expires_at": "2026-12-01T00:15:00.000Z",
        },
    }
    return httpx.Response(201, json={"data": data, "meta": {"request_id": "req-1"}})
