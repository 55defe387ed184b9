"""On-demand prices (us-east-1) the report turns counts into, and the price class of each S3 request.

DynamoDB on demand: $0.625 a million write request units, $0.125 a million read request units. S3 Standard:
PUT, COPY, POST and LIST requests $0.005 a thousand ($5 a million), GET, HEAD and every other request $0.0004 a
thousand ($0.4 a million), DELETE requests free. Storage (per GB-month, in either service) is left out: it depends
on how long a checkpoint lives, not on a save.

No dependencies: `bench.report.plot` imports it in the peers' environment.
"""

from __future__ import annotations

from collections.abc import Mapping

WRITE_UNIT = 0.625e-6
READ_UNIT = 0.125e-6
S3_PUT = 5e-6
S3_GET = 0.4e-6

S3_PUT_CLASS = frozenset(
    {
        "PutObject",
        "CopyObject",
        "PutObjectTagging",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "ListObjects",
        "CreateBucket",
        "PutBucketConfiguration",
    }
)
"""S3 requests billed at the PUT price (PUT, COPY, POST, LIST)."""
S3_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload", "DeleteBucket"})
"""S3 requests billed nothing (DELETE and CANCEL)."""


def s3_request_price(operation: str) -> float:
    """Dollars one S3 request of this operation costs."""
    if operation in S3_FREE:
        return 0.0
    return S3_PUT if operation in S3_PUT_CLASS else S3_GET


def cost(write_units: float, read_units: float, s3_requests: Mapping[str, int]) -> float:
    """Dollars one operation costs in requests: its DynamoDB units and its S3 requests."""
    s3 = sum(n * s3_request_price(operation) for operation, n in s3_requests.items())
    return write_units * WRITE_UNIT + read_units * READ_UNIT + s3


def per_million(write_units: float, read_units: float, s3_requests: Mapping[str, int]) -> float:
    """Dollars a million such operations cost."""
    return cost(write_units, read_units, s3_requests) * 1e6
