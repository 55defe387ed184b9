"""What the blob routes answer (`/v1/blobs`): imported by their router's first request, never by a save's cold
start."""

# No `from __future__ import annotations`, as in `schemas.py`: pydantic would evaluate every field's annotation
# from its string when each class is created. A method's annotation that names its own class is quoted.

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from baton_checkpoints.api.schemas import ResponseModel
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.models import MAX_MEDIA_TYPE_CHARS, Presigned, Sha256Hex, Time

BlobId = Annotated[str, StringConstraints(pattern=r"^blob_[0-9a-f]{32}$")]
BlobSize = Annotated[int, Field(ge=0, le=limits.MAX_BLOB_BYTES)]
MediaType = Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEDIA_TYPE_CHARS)]


class BlobUpload(ResponseModel):
    """How to upload a blob's bytes: a presigned PUT that S3 accepts only with these headers and these bytes."""

    url: Annotated[str, Field(description="A SigV4 presigned URL of the blob's object, valid 15 minutes.")]
    method: Literal["PUT"]
    headers: Annotated[
        dict[str, str],
        Field(
            description=(
                "Headers the PUT must carry exactly as given (they are signed): content-type, content-length, "
                "x-amz-checksum-sha256 (the SHA-256 as base64: S3 refuses other bytes), x-amz-sdk-checksum-algorithm "
                "and x-amz-tagging (the object stays pending until a checkpoint holds it)."
            )
        ),
    ]
    expires_at: Time


class BlobFacts(ResponseModel):
    """What a declared blob's bytes are (the fields every blob answer starts with)."""

    blob_id: BlobId
    sha256: Sha256Hex
    size: BlobSize
    media_type: MediaType
    created_at: Time

    @staticmethod
    def facts(blob: Blob) -> dict[str, Any]:
        """The fields of `blob`, for a subclass's builder."""
        return {
            "blob_id": blob.blob_id,
            "sha256": blob.sha256,
            "size": blob.size,
            "media_type": blob.media_type,
            "created_at": format_ms(blob.created_ms),
        }


class BlobInfo(BlobFacts):
    """A declared blob: what its bytes are, and a download URL valid 15 minutes."""

    download_url: Annotated[
        str,
        Field(description="A presigned GET of the blob's object, valid 15 minutes (404 from S3 until uploaded)."),
    ]
    download_expires_at: Time

    @classmethod
    def of(cls, blob: Blob, download: Presigned) -> "BlobInfo":
        """A blob and its download URL."""
        return cls.model_construct(
            **cls.facts(blob), download_url=download.url, download_expires_at=format_ms(download.expires_ms)
        )


class CreatedBlob(BlobFacts):
    """A blob just declared, and how to upload its bytes."""

    upload: BlobUpload

    @classmethod
    def of(cls, blob: Blob, upload: Presigned) -> "CreatedBlob":
        """A declared blob and its upload."""
        return cls.model_construct(
            **cls.facts(blob),
            upload=BlobUpload.model_construct(
                url=upload.url, method="PUT", headers=dict(upload.headers), expires_at=format_ms(upload.expires_ms)
            ),
        )
