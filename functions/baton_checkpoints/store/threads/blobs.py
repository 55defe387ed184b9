"""The blobs one thread write names, each checked once per request, within the request's budgets."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.errors import NotFound, PayloadTooLarge, ValidationFailed
from baton_checkpoints.domain.thread_puts import ITEM_VALUE_BYTES
from baton_checkpoints.domain.threads import (
    MAX_BLOB_COPY_BYTES,
    MAX_REQUEST_BLOBS,
    BlobRef,
)
from baton_checkpoints.store import layout
from baton_checkpoints.store.threads.items import Uploaded

if TYPE_CHECKING:
    from baton_checkpoints.store.blobs import BlobStore
    from baton_checkpoints.store.objects import ObjectStore


class RequestBlobs:
    """The blobs one request names, each checked once however many values name it: declared by the caller's agent,
    attached to no checkpoint, uploaded with its declared bytes, at most the state limit (else 400 naming the value's
    `blob_id`, or 413). A blob of at most `ITEM_VALUE_BYTES` is read once (one GetObject, its SHA-256 checked) and
    each value naming it holds its bytes like any other, counted in the request's budgets; a larger one is copied
    into the thread's storage once per value, at most `MAX_BLOB_COPY_BYTES` per request. At most
    `MAX_REQUEST_BLOBS` distinct blobs per request."""

    def __init__(
        self,
        blobs: BlobStore | None,
        bucket: Callable[[int], ObjectStore],
        tenant_id: str,
        agent_id: str,
        now_ms: int,
    ) -> None:
        self._blobs = blobs
        self._bucket = bucket
        self._tenant_id = tenant_id
        self._agent_id = agent_id
        self._now_ms = now_ms
        self._checked: dict[str, bytes | Uploaded | None] = {}
        self.copied = 0

    def value(self, ref: BlobRef, where: str) -> bytes | Uploaded:
        """The value a reference stands for: the blob's bytes (a small one) or the blob to copy (a large one)."""
        if ref.blob_id not in self._checked:
            if len(self._checked) == MAX_REQUEST_BLOBS:
                raise ValidationFailed.single(
                    where, f"A request may name at most {MAX_REQUEST_BLOBS} distinct blobs; {where} names one more."
                )
            self._checked[ref.blob_id] = self._check(ref, where)
        found = self._checked[ref.blob_id]
        if found is None:
            raise refused(where)
        if isinstance(found, Uploaded):
            self.copied += found.size
            if self.copied > MAX_BLOB_COPY_BYTES:
                raise PayloadTooLarge(
                    field=where.lstrip("/"),
                    limit_bytes=MAX_BLOB_COPY_BYTES,
                    actual_bytes=self.copied,
                    what=f"The blobs over {ITEM_VALUE_BYTES} bytes this request names, each time it names one,",
                )
        return found

    def _check(self, ref: BlobRef, where: str) -> bytes | Uploaded | None:
        """One GetItem of the blob's record, then one GetObject (a small blob) or one HeadObject; None when the
        blob is not one a value may name."""
        blobs = self._blobs
        if blobs is None:
            return None
        try:
            blob = blobs.get(self._tenant_id, ref.blob_id, self._now_ms)
        except NotFound:
            return None
        if blob.agent_id != self._agent_id or blob.owner is not None:
            return None
        if blob.size > limits.MAX_STATE_BYTES:
            raise PayloadTooLarge(
                field=where.lstrip("/"), limit_bytes=limits.MAX_STATE_BYTES, actual_bytes=blob.size, what="A value"
            )
        source = layout.blob_object(self._tenant_id, ref.blob_id)
        bucket = self._bucket(blob.size)
        if blob.size <= ITEM_VALUE_BYTES:
            raw = bucket.get(source)
            if raw is None or len(raw) != blob.size or hashlib.sha256(raw).hexdigest() != blob.sha256:
                return None
            return raw
        found = bucket.head(source)
        if found is None or found.size != blob.size or (found.sha256 is not None and found.sha256 != blob.sha256):
            return None
        return Uploaded(blob.size, blob.sha256, source)


def refused(where: str) -> ValidationFailed:
    return ValidationFailed.single(
        where,
        f"{where} must name a blob this agent declared (POST /v1/blobs), uploaded with its declared size and "
        "SHA-256, and attached to no checkpoint.",
    )
