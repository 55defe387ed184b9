"""Blob transfers: what the upload and download helpers of both clients share.

The protocol (docs/api.md, "Blobs"): declare `{sha256, size, media_type}` with `POST /v1/blobs`, then `PUT` the
bytes to the presigned URL with exactly the `headers` of the answer (they are signed: the SHA-256 as base64 in
`x-amz-checksum-sha256`, `content-length`, `content-type`, the pending tag). Files are streamed in chunks, never read
whole: once to hash them, once to send them. Downloads stream to `<file>.part`, check the declared SHA-256 on the
way, and only then take the file's name.

Presigned URLs are S3's, not Baton's: they go through a client that never carries the Baton bearer key.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from baton_checkpoints.client._core import Answer, Call
from baton_checkpoints.client.errors import BatonError, ChecksumMismatchError, FileChangedError
from baton_checkpoints.client.models import BlobUpload

Progress = Callable[[int, int], None]
"""A progress callback: `(done_bytes, total_bytes)`, called after each chunk."""

CHUNK_SIZE = 1024 * 1024
DEFAULT_MEDIA_TYPE = "application/octet-stream"


def file_sha256(path: Path, chunk_size: int = CHUNK_SIZE) -> str:
    """The SHA-256 hex of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def media_type_of(path: Path) -> str:
    """The media type a file's name suggests, else `application/octet-stream`."""
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or DEFAULT_MEDIA_TYPE


FILE_CHANGED = "the file changed during the upload (its size or content is no longer the declared one): upload it again"


def file_chunks(path: Path, total: int, progress: Progress | None, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Exactly the file's `total` declared bytes in chunks, reporting progress after each one is handed over.

    A file that another process writes to (a running build's log) cannot be uploaded as declared: sending more
    bytes than the signed `content-length` is a protocol error, fewer leaves S3 waiting. So the file must still
    have `total` bytes when opened, hold all of them, and not have been written to (size and mtime) by the end;
    otherwise a `FileChangedError`. A rewrite of the same size before it is opened is caught by S3 (`BadDigest`).
    """
    done = 0
    with path.open("rb") as source:
        opened = os.fstat(source.fileno())
        if opened.st_size != total:
            raise FileChangedError(FILE_CHANGED)
        while done < total:
            chunk = source.read(min(chunk_size, total - done))
            if not chunk:
                raise FileChangedError(FILE_CHANGED)  # it shrank while being read
            done += len(chunk)
            if done == total:
                # Checked before the last chunk leaves, so a changed file is never completed on S3's side.
                ended = os.fstat(source.fileno())
                if ended.st_size != total or ended.st_mtime_ns != opened.st_mtime_ns:
                    raise FileChangedError(FILE_CHANGED)
            yield chunk
            if progress is not None:
                progress(done, total)


def _bad_digest(error: BatonError, text: str) -> BatonError:
    """S3's `BadDigest` (the bytes sent do not have the signed SHA-256) as the `FileChangedError` it means: the
    SDK hashed the same file just before. Any other answer keeps its error."""
    if error.status == 400 and "<Code>BadDigest</Code>" in text:
        return FileChangedError(FILE_CHANGED, status=400, headers=error.headers)
    return error


def upload_call(upload: BlobUpload, size: int, stream: Callable[[], Any]) -> Call[None]:
    """The presigned PUT: its signed headers exactly as given, a fresh stream of the file on every attempt. S3 is
    safe to repeat it (the same bytes to the same key), so broken connections and 5xx are retried."""
    headers = dict(upload.headers)
    if not any(name.lower() == "content-length" for name in headers):
        headers["Content-Length"] = str(size)  # a length, never chunked encoding: a presigned PUT needs one

    def parse(answer: Answer) -> None:
        return None

    return Call(
        method=upload.method or "PUT",
        path=upload.url,
        headers=headers,
        repeatable=True,
        parse=parse,
        stream=stream,
        needs_key=False,  # a presigned URL: its query is the credential
        translate_error=_bad_digest,
    )


class DownloadSink:
    """Where a download goes: `<dest>.part` while it runs, hashed on the way, renamed to `dest` when verified."""

    def __init__(self, dest: Path, expected_sha256: str | None, total: int, progress: Progress | None) -> None:
        self.dest = dest
        self.part = dest.with_name(dest.name + ".part")
        self.expected = expected_sha256
        self.total = total
        self.progress = progress
        self.done = 0
        self._digest = hashlib.sha256()
        self._file = self.part.open("wb")

    def write(self, chunk: bytes) -> None:
        """Write a chunk and report progress."""
        self._file.write(chunk)
        self._digest.update(chunk)
        self.done += len(chunk)
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))

    def finish(self) -> None:
        """Close, check the SHA-256, and give the file its name (the partial file is removed on a mismatch)."""
        self._file.close()
        actual = self._digest.hexdigest()
        if self.expected is not None and actual != self.expected:
            self.part.unlink(missing_ok=True)
            raise ChecksumMismatchError(
                f"The downloaded bytes have SHA-256 {actual}, not the declared {self.expected}; {self.dest} was not "
                "written."
            )
        os.replace(self.part, self.dest)

    def abort(self) -> None:
        """Close and remove the partial file."""
        self._file.close()
        self.part.unlink(missing_ok=True)
