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
from typing import TYPE_CHECKING
from urllib.parse import urlencode

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

    def get(self, key: str) -> bytes:
        """An object's bytes (one GetObject)."""
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

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
