"""The blob bucket: the one place that calls S3. Keys come from `layout`; what an object holds is the caller's.

Every object is written tagged `pending` (`schema.PENDING_TAG`); the reaper retags it once a checkpoint references
it, and a lifecycle rule expires what stayed pending. The S3 client is created on the first call that needs it:
most requests never touch S3, and creating a client is a good part of a cold start.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from msgspec import Struct

from baton_checkpoints.domain.blobs import UPLOAD_SECONDS
from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.domain.models import Presigned
from baton_checkpoints.observability import logger
from baton_checkpoints.store import layout, schema, usage
from baton_checkpoints.store.errors import error_code

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STATE_MEDIA_TYPE = "application/octet-stream"

STATE_OBJECT_MISSING: Final = "state_object_missing"
"""The `defect` field of the ERROR line written when an item names a spilled state whose object is not there: a
stable value for a log metric filter or a query to count on."""
MISSING_STATE_MESSAGE: Final = (
    "The stored state of this checkpoint cannot be read right now; nothing was written. Retry later, and quote the "
    "request_id to the operator if it persists."
)
MISSING_STATE_RETRY_SECONDS: Final = 300
"""A missing object does not come back by itself (an operator restores it, or the checkpoint is written again): a
Retry-After longer than a client's patience (the SDK waits at most 30 s) makes it give up at once rather than
retry in a loop."""


class ObjectInfo(Struct, frozen=True):
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

    def drop_connections(self) -> None:
        """Close the client's pooled connections, if it was made (the next request opens new ones)."""
        if self._client is not None:
            self._client.close()

    def put_state(self, tenant_id: str, body: bytes) -> str:
        """Write one write's spilled state as a new object (pending until the reaper sees it referenced); its key."""
        key = layout.state_object(tenant_id, uuid.uuid4().hex)
        usage.s3_request(written=len(body))
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType=STATE_MEDIA_TYPE, Tagging=PENDING_TAGGING
        )
        return key

    def copy_state(self, tenant_id: str, source: str) -> str:
        """Copy a spilled state (or thread value) to a new object of the same tenant, pending like a new write (a
        copied thread's value must not share an object that the reaper deletes with the source's item); its key."""
        key = layout.state_object(tenant_id, uuid.uuid4().hex)
        usage.s3_request()
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
        was read, and the reaper deleted the object; or a defect, see `missing_state`). S3 answers a missing key 404
        rather than 403 only to a caller that may list the bucket: the api function's role may (`infra/`)."""
        usage.s3_request()
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        usage.s3_request(requests=0, read=len(body))  # (the request was counted as it was made)
        return body

    def delete(self, key: str) -> None:
        """Delete an object no item references (a refused save's spilled state)."""
        usage.s3_request()
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def head(self, key: str) -> ObjectInfo | None:
        """Size, SHA-256 and media type of an object (one HeadObject, checksum mode on); None when it is missing."""
        usage.s3_request()
        try:
            answer = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except Exception as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        checksum = answer.get("ChecksumSHA256")
        sha256 = base64.b64decode(checksum).hex() if checksum and "-" not in checksum else None
        return ObjectInfo(size=int(answer["ContentLength"]), sha256=sha256, media_type=answer.get("ContentType"))

    def missing_state(self, key: str, **context: str | int) -> Unavailable:
        """Log the defect of an item naming a spilled state whose object is missing (one ERROR line: `defect`, the
        object's key without its tenant, and `context`, e.g. the checkpoint id; never the state, never a secret), and
        return the 503 to raise.

        The object was deleted behind a live item: by hand, by a lifecycle rule, or by a defect of the reaper. The
        caller can do nothing about it but retry later; the operator learns of it from this line (the alarm on ERROR
        lines counts it) and restores the object from a backup, or has the checkpoint saved again
        (docs/operations.md)."""
        logger().error(
            "a spilled state's object is missing",
            extra={"defect": STATE_OBJECT_MISSING, "object": layout.tenant_free_object(key), **context},
        )
        return Unavailable(MISSING_STATE_MESSAGE, retry_after=MISSING_STATE_RETRY_SECONDS)

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
        usage.presigned(upload_bytes=size)
        headers = upload_headers(sha256_hex, size, media_type)
        return Presigned(url=url, method="PUT", headers=headers, expires_ms=_expiry_ms(url))

    def presign_get(self, key: str, filename: str | None = None, media_type: str | None = None) -> Presigned:
        """A SigV4 presigned GET of `key`, valid `blobs.UPLOAD_SECONDS` (no request is sent), that downloads as an
        attachment named `filename` (default: the key's last part) with the type `served_media_type(media_type)`.

        Both are S3's response overrides (`response-content-disposition`, `response-content-type`), signed into the
        URL: a client cannot change them, and whatever type the object was stored with, a browser opening the URL
        saves the bytes instead of rendering them on the bucket's origin. (`X-Content-Type-Options: nosniff` is not
        an override S3 offers; `application/octet-stream` and `attachment` are what keep a browser from sniffing.)
        """
        params = {
            "Bucket": self.bucket,
            "Key": key,
            "ResponseContentDisposition": content_disposition(filename or key.rpartition("/")[2]),
            "ResponseContentType": served_media_type(media_type),
        }
        url = self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=UPLOAD_SECONDS)
        usage.presigned()
        return Presigned(url=url, method="GET", headers=(), expires_ms=_expiry_ms(url))


PASSIVE_MEDIA_TYPES: Final = frozenset(
    {
        "text/plain",
        "text/csv",
        "text/markdown",
        "application/json",
        "application/x-ndjson",
        "application/octet-stream",
        "application/zip",
        "application/gzip",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "audio/mpeg",
        "audio/ogg",
        "audio/wav",
        "video/mp4",
        "video/webm",
    }
)
"""Media types a download keeps: a browser shows them as text, an image or a player, or saves them, and none of them
runs script or loads other content on the bucket's origin. A closed list rather than a list of dangerous types:
those are open-ended (`text/html`, `image/svg+xml`, any `+xml` or `+html`, `text/xsl`, `multipart/*`, PDF with its
scripts and forms, vendor types a plugin renders, whatever browsers learn next), and a type missing here only costs
a download served as `application/octet-stream`."""
MAX_FILENAME_CHARS: Final = 100
"""Longest name a download's `Content-Disposition` carries (a longer one keeps its end: the extension)."""
_CHARSET = re.compile(r"[A-Za-z0-9._-]{1,40}")
_ASCII_NAME = re.compile(r"[^A-Za-z0-9 ._()+,=@-]")
_ATTR_CHARS: Final = "!#$&+-.^_`|~"
"""RFC 8187 `attr-char` besides letters and digits: what `filename*` may carry without percent-encoding."""


def served_media_type(media_type: str | None) -> str:
    """The type a download is served as: the declared one (lowercased, with only a well-formed `charset` for text)
    when it is one of `PASSIVE_MEDIA_TYPES`, else `application/octet-stream` (None: not known, so the safe one)."""
    if media_type is None:
        return STATE_MEDIA_TYPE
    essence, _, parameters = media_type.partition(";")
    essence = essence.strip().lower()
    if essence not in PASSIVE_MEDIA_TYPES:
        return STATE_MEDIA_TYPE
    if essence.startswith("text/"):
        for parameter in parameters.split(";"):
            name, _, value = parameter.partition("=")
            value = value.strip().strip('"')
            if name.strip().lower() == "charset" and _CHARSET.fullmatch(value):
                return f"{essence}; charset={value.lower()}"
    return essence


def content_disposition(filename: str) -> str:
    """`attachment` with `filename` as RFC 6266 asks: a plain ASCII `filename` (every other character, quotes,
    backslashes and controls among them, as `_`) for old clients, and the name itself as RFC 8187 `filename*`
    (UTF-8, percent-encoded). No character of a stored name reaches the header unescaped, so no name can end the
    header or add a parameter. Only the last path segment is kept, at most `MAX_FILENAME_CHARS` characters."""
    # Format characters (bidi overrides and isolates, zero-width joiners) and controls go first: U+202E in a name
    # would show `evil\u202etxt.exe` as `evilexe.txt` in a save dialog.
    import unicodedata  # (its 1 MB table loads here, by a blob's download, not by every cold start)

    visible = "".join(c for c in filename if unicodedata.category(c) not in ("Cf", "Cc"))
    name = visible.replace("\\", "/").rpartition("/")[2].strip()[-MAX_FILENAME_CHARS:]
    if not name.strip("."):
        name = "download"  # nothing left, or a name of dots only (a path, not a file)
    plain = _ASCII_NAME.sub("_", name).strip() or "download"
    if plain == name:
        return f'attachment; filename="{plain}"'
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe=_ATTR_CHARS)}"


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
