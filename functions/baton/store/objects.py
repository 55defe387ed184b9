"""The blob bucket: the one place that calls S3. Keys come from `layout`; what an object holds is the caller's.

Every object is written tagged `pending` (`schema.PENDING_TAG`); the reaper retags it once a checkpoint references
it, and a lifecycle rule expires what stayed pending. The S3 client is created on the first call that needs it:
most requests never touch S3, and creating a client is a good part of a cold start.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode, urlsplit

from baton.domain.blobs import UPLOAD_SECONDS
from baton.domain.models import Presigned
from baton.store import layout, schema
from baton.store.errors import error_code

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STATE_MEDIA_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class ObjectInfo:
    """What S3 says of a stored object (a HEAD with checksum mode on)."""

    size: int
    sha256: str | None
    """Hex; None when the object was stored without a SHA-256 checksum."""
    media_type: str | None


PENDING_TAGGING = urlencode([schema.PENDING_TAG])
"""The `x-amz-tagging` value of an object no checkpoint references yet."""


class ObjectStore:
    """Objects of one bucket, on a client made when first needed."""

    def __init__(self, client: Callable[[], S3Client], bucket: str) -> None:
        self._make_client = client
        self._client: S3Client | None = None
        self.bucket = bucket

    @property
    def client(self) -> S3Client:
        """The S3 client, created by the first call that needs it."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def put_state(self, tenant_id: str, body: bytes) -> str:
        """Write one write's spilled state as a new object (pending until the reaper sees it referenced); its key."""
        key = layout.state_object(tenant_id, uuid.uuid4().hex)
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType=STATE_MEDIA_TYPE, Tagging=PENDING_TAGGING
        )
        return key

    def copy_state(self, tenant_id: str, source: str) -> str:
        """Copy a spilled state (or thread value) to a new object of the same tenant, pending like a new write (a
        copied thread's value must not share an object that the reaper deletes with the source's item); its key."""
        key = layout.state_object(tenant_id, uuid.uuid4().hex)
        self.client.copy_object(
            Bucket=self.bucket,
            Key=key,
            CopySource={"Bucket": self.bucket, "Key": source},
            TaggingDirective="REPLACE",
            Tagging=PENDING_TAGGING,
        )
        return key

    def get(self, key: str) -> bytes | None:
        """An object's bytes (one GetObject); None when it is missing (the item that named it was replaced since it
        was read, and the reaper deleted the object)."""
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def delete(self, key: str) -> None:
        """Delete an object no item references (a refused save's spilled state)."""
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def head(self, key: str) -> ObjectInfo | None:
        """Size, SHA-256 and media type of an object (one HeadObject, checksum mode on); None when it is missing."""
        try:
            answer = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except Exception as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        checksum = answer.get("ChecksumSHA256")
        sha256 = base64.b64decode(checksum).hex() if checksum and "-" not in checksum else None
        return ObjectInfo(size=int(answer["ContentLength"]), sha256=sha256, media_type=answer.get("ContentType"))

    def presign_put(self, key: str, sha256_hex: str, size: int, media_type: str) -> Presigned:
        """A SigV4 presigned PUT of `key` (valid `blobs.UPLOAD_SECONDS`) that S3 accepts only with these bytes.

        Every header is signed, so a client can change none of them: `x-amz-checksum-sha256` makes S3 refuse a body
        with another SHA-256 and record the checksum (which `head` reads back), `content-length` refuses another
        size, `x-amz-tagging` writes the object pending (the lifecycle rule expires it unless a checkpoint comes to
        hold it). `x-amz-sdk-checksum-algorithm` names the checksum's algorithm, as the SDKs send it: S3 takes the
        checksum header alone, moto stores the checksum only with it. No request is sent: signing is local.
        """
        checksum = base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii")
        params = {
            "Bucket": self.bucket,
            "Key": key,
            "ContentType": media_type,
            "ContentLength": size,
            "ChecksumAlgorithm": "SHA256",
            "ChecksumSHA256": checksum,
            "Tagging": PENDING_TAGGING,
        }
        url = self.client.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=UPLOAD_SECONDS, HttpMethod="PUT"
        )
        headers = upload_headers(sha256_hex, size, media_type)
        return Presigned(url=url, method="PUT", headers=headers, expires_ms=_expiry_ms(url))

    def presign_get(self, key: str) -> Presigned:
        """A SigV4 presigned GET of `key`, valid `blobs.UPLOAD_SECONDS` (no request is sent)."""
        url = self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=UPLOAD_SECONDS
        )
        return Presigned(url=url, method="GET", headers=(), expires_ms=_expiry_ms(url))


def upload_headers(sha256_hex: str, size: int, media_type: str) -> tuple[tuple[str, str], ...]:
    """The headers a presigned upload of these bytes is signed with, which the client must send as they are."""
    return (
        ("content-type", media_type),
        ("content-length", str(size)),
        ("x-amz-checksum-sha256", base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii")),
        ("x-amz-sdk-checksum-algorithm", "SHA256"),
        ("x-amz-tagging", PENDING_TAGGING),
    )


def _expiry_ms(url: str) -> int:
    """When a presigned URL stops working: its signing time (`X-Amz-Date`, whole seconds) plus `X-Amz-Expires`.

    Read from the URL itself rather than from a clock of our own: the signature counts from a time truncated to
    the second, so `now + 15 minutes` could promise up to a second more than S3 grants."""
    query = parse_qs(urlsplit(url).query)
    signed = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return int(signed.timestamp()) * 1000 + int(query["X-Amz-Expires"][0]) * 1000
