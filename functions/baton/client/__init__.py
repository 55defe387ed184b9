"""`baton.client`: the Python SDK of the Baton API (`pip install baton[client]`).

    from baton.client import Baton

    with Baton() as baton:  # BATON_URL, BATON_API_KEY
        saved = baton.save("ticket-42", "task_state", {"step": 3})
        record = baton.get(saved.checkpoint_id)

It imports only the standard library and httpx.
"""

from baton.client._core import ENV_API_KEY, ENV_URL, RetryPolicy
from baton.client._routes import etag_for
from baton.client.aio import AsyncBaton
from baton.client.blobs import Progress
from baton.client.errors import (
    BatonConnectionError,
    BatonError,
    CheckpointClosedError,
    ChecksumMismatchError,
    ConflictError,
    FileChangedError,
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    InternalError,
    LeaseHeldError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RevisionConflictError,
    UnauthenticatedError,
    UnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from baton.client.models import (
    BlobInfo,
    BlobUpload,
    CheckpointRecord,
    CheckpointSummary,
    CreatedBlob,
    CreatedKey,
    DeleteResult,
    Health,
    KeyDeleted,
    KeyInfo,
    Lease,
    LeaseGranted,
    LeaseReleased,
    Page,
    PurgeResult,
    RawResponse,
    Resource,
    ResourceRef,
    ResponseMeta,
    ResumeResult,
    SaveResult,
    Source,
)
from baton.client.sync import Baton

__all__ = [
    "ENV_API_KEY",
    "ENV_URL",
    "AsyncBaton",
    "Baton",
    "BatonConnectionError",
    "BatonError",
    "BlobInfo",
    "BlobUpload",
    "CheckpointClosedError",
    "CheckpointRecord",
    "CheckpointSummary",
    "ChecksumMismatchError",
    "ConflictError",
    "CreatedBlob",
    "CreatedKey",
    "DeleteResult",
    "FileChangedError",
    "ForbiddenError",
    "Health",
    "IdempotencyInProgressError",
    "IdempotencyKeyReusedError",
    "InternalError",
    "KeyDeleted",
    "KeyInfo",
    "Lease",
    "LeaseGranted",
    "LeaseHeldError",
    "LeaseReleased",
    "MethodNotAllowedError",
    "NotFoundError",
    "Page",
    "PayloadTooLargeError",
    "Progress",
    "PurgeResult",
    "RateLimitedError",
    "RawResponse",
    "Resource",
    "ResourceRef",
    "ResponseMeta",
    "ResumeResult",
    "RetryPolicy",
    "RevisionConflictError",
    "SaveResult",
    "Source",
    "UnauthenticatedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "etag_for",
]
