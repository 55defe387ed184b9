"""Domain errors: what went wrong, in the contract's terms, without HTTP.

Only `baton_checkpoints.api` turns these into status codes (one error map keyed on these classes); only
`baton_checkpoints.store`
turns AWS client errors into them.
"""

from __future__ import annotations

from msgspec import Struct

MAX_REPORTED_ERRORS = 50
"""At most this many violations are listed in `details.errors`; `details.more` counts the rest."""
MAX_ECHOED_CHARS = 300
"""Longest pointer or sentence an error repeats: a field name can be as long as the body, the answer cannot."""

MAX_MESSAGE_CHARS = 1000
"""Longest `message` of any error."""


def clip(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """`text`, cut to `limit` characters with an ellipsis when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FieldError(Struct, frozen=True):
    """One violation: where (an RFC 6901 pointer into the body, or a parameter's name) and the rule broken.

    `location` is `body` for body fields; for a query parameter, path parameter or header the pointer is
    `/<name>` and the location says which.
    """

    pointer: str
    message: str
    location: str = "body"

    def as_detail(self) -> dict[str, str]:
        """The entry in `details.errors`."""
        entry = {"pointer": clip(self.pointer), "message": clip(self.message)}
        if self.location != "body":
            entry["in"] = self.location
        return entry


class BatonError(Exception):
    """Base of every error the contract names."""

    code: str = "INTERNAL"

    def __init__(self, message: str) -> None:
        # Messages may quote what the client sent; a quote is bounded so that no answer grows with the request.
        message = clip(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, object] | None:
        """Extra machine-readable facts for the error envelope, or None when there is nothing to add."""
        return None


class ValidationFailed(BatonError):
    """A field is missing, malformed, out of range or unknown, or the body is not JSON."""

    code = "VALIDATION_ERROR"

    def __init__(self, errors: list[FieldError], more: int = 0) -> None:
        if not errors:
            raise ValueError("ValidationFailed needs at least one FieldError")
        # No answer grows with a hostile request: at most MAX_REPORTED_ERRORS violations are named, the rest counted.
        self.more = more + max(0, len(errors) - MAX_REPORTED_ERRORS)
        self.errors = errors[:MAX_REPORTED_ERRORS]
        first = clip(self.errors[0].message)
        others = len(self.errors) - 1 + self.more
        plural = "s" if others > 1 else ""
        message = first if others == 0 else f"{first} ({others} more error{plural} in details.errors)"
        super().__init__(message)

    @classmethod
    def single(cls, pointer: str, message: str, location: str = "body") -> ValidationFailed:
        """A validation failure with one violation."""
        return cls([FieldError(pointer, message, location)])

    def details(self) -> dict[str, object]:
        found: dict[str, object] = {"errors": [e.as_detail() for e in self.errors]}
        if self.more:
            found["more"] = self.more
        return found


class Unauthenticated(BatonError):
    """No key, or an unknown, revoked, expired or not-yet-valid key."""

    code = "UNAUTHENTICATED"
    challenge: str | None = None
    """The `WWW-Authenticate` value, where a route says more than Baton's realm (`/mcp`: OAuth's discovery)."""


class Forbidden(BatonError):
    """The key is valid but lacks what the operation needs."""

    code = "FORBIDDEN"
    challenge: str | None = None
    """The `WWW-Authenticate` value of a 403 that a token can get past (`/mcp`: `insufficient_scope`)."""


class NotFound(BatonError):
    """Missing, expired, or not visible to the caller: always the same message, so nothing is disclosed."""

    code = "NOT_FOUND"
    MESSAGE = "Resource was not found."

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class RevisionNotKept(NotFound):
    """A revision of a checkpoint the caller can see that is not kept (never written, pruned from the window, or
    expired): the caller may list the kept ones anyway, so the answer says which they are (the window: a revision in
    it may have expired on its own; `GET …/revisions` lists the live ones)."""

    def __init__(self, revision: int, kept: range, current: int) -> None:
        if kept:
            which = f"this checkpoint keeps revisions {kept.start} to {kept.stop - 1}, each until it expires"
        else:
            which = "this checkpoint keeps no earlier revision (a save with keep_revisions keeps some)"
        BatonError.__init__(self, f"Revision {revision} is not kept: {which}; its current revision is {current}.")
        self.kept = kept
        self.current_revision = current

    def details(self) -> dict[str, object]:
        return {"current_revision": self.current_revision, "kept_revisions": list(self.kept)}


class UnknownRoute(NotFound):
    """No route has this path: there is nothing to hide, so the answer says what was asked and where the routes
    are listed (what is asked is cut to `SHOWN` characters, control characters escaped)."""

    SHOWN = 200

    def __init__(self, method: str, path: str) -> None:
        asked = f"{method} {path}"
        shown = asked[: self.SHOWN].encode("unicode_escape").decode("ascii")
        more = "…" if len(asked) > self.SHOWN else ""
        BatonError.__init__(self, f"No route matches {shown}{more}; the routes are listed at /v1/openapi.json.")


class MethodNotAllowed(BatonError):
    """The path exists, but not with this method."""

    code = "METHOD_NOT_ALLOWED"

    def __init__(self, method: str, allowed: list[str]) -> None:
        super().__init__(f"Method {method} is not allowed here; use {', '.join(allowed)}.")
        self.allowed = allowed


class RevisionConflict(BatonError):
    """`expected_revision` (or `If-Match`) differs from the current revision."""

    code = "REVISION_CONFLICT"

    def __init__(self, expected: int | tuple[int, ...] | None, current: int, field: str = "/expected_revision") -> None:
        # A negative or missing expectation is a precondition naming another checkpoint altogether.
        wanted = [expected] if isinstance(expected, int) else list(expected or ())
        wanted = [w for w in wanted if w >= 0]
        if not wanted:
            stated = f"{field} names another checkpoint"
        elif len(wanted) == 1:
            stated = f"{field} is {wanted[0]}"
        else:
            stated = f"{field} names revisions {', '.join(str(w) for w in wanted)}"
        super().__init__(
            f"{stated} but the current revision is {current}; read the checkpoint again and retry with the current "
            "revision."
        )
        self.current_revision = current

    def details(self) -> dict[str, object]:
        return {"current_revision": self.current_revision}


class CheckpointClosed(BatonError):
    """A write to a checkpoint whose status is terminal."""

    code = "CHECKPOINT_CLOSED"

    def __init__(self, status: str) -> None:
        super().__init__(
            f"The checkpoint is {status} and takes no further writes; delete it or save under another kind or subject."
        )
        self.status = status

    def details(self) -> dict[str, object]:
        return {"status": self.status}


class LeaseHeld(BatonError):
    """Another holder has the checkpoint's lease, or a write lacks the current lease token."""

    code = "LEASE_HELD"

    def __init__(self, expires_at: str, by_other_holder: bool = False) -> None:
        if by_other_holder:
            message = (
                f"Another holder has the lease on this checkpoint until {expires_at}; wait for it to expire or be "
                "released."
            )
        else:
            message = (
                f"The checkpoint is leased until {expires_at}, and this request does not carry the current lease "
                "token; send it (lease_token in the body, or the Lease-Token header) or wait for the lease to end."
            )
        super().__init__(message)
        self.lease_expires_at = expires_at

    def details(self) -> dict[str, object]:
        return {"lease_expires_at": self.lease_expires_at}


class LeaseLost(BatonError):
    """A write carries a lease token whose lease is gone: it lapsed and another was granted, it was released, or its
    checkpoint was deleted or purged. Nothing was written, and nothing is created for it."""

    code = "LEASE_LOST"

    def __init__(self, live_until: str | None = None) -> None:
        message = (
            "The lease this lease_token names is gone (it lapsed and was taken over, was released, or its checkpoint "
            "was deleted or purged); nothing was written. Stop working on it: acquire a new lease and read the "
            "checkpoint again before writing."
        )
        super().__init__(message)
        self.lease_expires_at = live_until

    def details(self) -> dict[str, object] | None:
        return None if self.lease_expires_at is None else {"lease_expires_at": self.lease_expires_at}


class IdempotencyKeyReused(BatonError):
    """The idempotency key was used before with a different method, path or body."""

    code = "IDEMPOTENCY_KEY_REUSED"

    def __init__(self) -> None:
        super().__init__(
            "The Idempotency-Key header was used before with a different request; send a new key for a new request."
        )


class PayloadTooLarge(BatonError):
    """The body or the state is over its limit."""

    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, field: str, limit_bytes: int, actual_bytes: int, what: str) -> None:
        super().__init__(f"{what} is {actual_bytes} bytes, over the limit of {limit_bytes} bytes.")
        self.field = field
        self.limit_bytes = limit_bytes
        self.actual_bytes = actual_bytes

    def details(self) -> dict[str, object]:
        return {"field": self.field, "limit_bytes": self.limit_bytes, "actual_bytes": self.actual_bytes}


class UnsupportedMediaType(BatonError):
    """The body is not of the route's media type (`application/json`; a form at OAuth's endpoints)."""

    code = "UNSUPPORTED_MEDIA_TYPE"

    def __init__(self, content_type: str | None, expected: str = "application/json") -> None:
        shown = content_type if content_type else "none"
        super().__init__(f"Content-Type must be {expected} (got {shown}).")


class Unavailable(BatonError):
    """A dependency is throttling or failing; nothing was written; the caller may retry."""

    code = "UNAVAILABLE"

    def __init__(self, message: str = "The service is busy; retry after the Retry-After delay.", retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after


def _count(number: int, noun: str) -> str:
    """`1 request`, `2 requests`, `1,000 requests`."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


class RateLimited(BatonError):
    """The tenant has made its requests for now (its `requests_per_minute` and `burst`); nothing was done."""

    code = "RATE_LIMITED"

    def __init__(self, retry_after: int, policy: str, rate_limit: str, requests_per_minute: int, burst: int) -> None:
        super().__init__(
            f"This tenant may make {_count(requests_per_minute, 'request')} a minute ({burst:,} at once); retry "
            f"after {retry_after} s (Retry-After)."
        )
        self.retry_after = retry_after
        self.policy = policy
        self.rate_limit = rate_limit
        self.requests_per_minute = requests_per_minute
        self.burst = burst

    def details(self) -> dict[str, object]:
        return {
            "retry_after_seconds": self.retry_after,
            "requests_per_minute": self.requests_per_minute,
            "burst": self.burst,
        }


class QuotaExceeded(BatonError):
    """A write would take the tenant past one of its quotas (`storage_bytes`, `checkpoints`); nothing was written.
    Reads and deletes are never refused for quota, so a tenant can always make room."""

    code = "QUOTA_EXCEEDED"

    def __init__(self, quota: str, limit: int, used: int, adds: int) -> None:
        what = "bytes stored" if quota == "storage_bytes" else "live checkpoints and threads"
        super().__init__(
            f"This write would take the tenant past its {quota} quota: {used:,} {what} of {limit:,}, and the write "
            f"adds {adds:,}. Delete what is no longer needed (deletes are never refused), or ask the operator to "
            "raise the quota."
        )
        self.quota = quota
        self.limit = limit
        self.used = used

    def details(self) -> dict[str, object]:
        return {"quota": self.quota, "limit": self.limit, "used": self.used}


class ResponseTooLarge(BatonError):
    """An answer that would not fit Lambda's response payload once encoded. Baton's bounds keep every answer under it
    (no request can reach this); when one does not, the answer is this error instead of API Gateway's opaque 500.
    The request's effect, if it had one, took place: only its answer was too large to send."""

    code = "RESPONSE_TOO_LARGE"

    def __init__(self, actual_bytes: int, limit_bytes: int) -> None:
        super().__init__(
            f"The answer is {actual_bytes:,} bytes once encoded, over Lambda's limit of {limit_bytes:,} bytes, so it "
            "was not sent. Ask again over HTTP with Accept-Encoding: gzip, ask for a smaller page with limit, or keep "
            "large values in blobs; quote the request_id if you report it."
        )
        self.actual_bytes = actual_bytes
        self.limit_bytes = limit_bytes

    def details(self) -> dict[str, object]:
        return {"limit_bytes": self.limit_bytes, "actual_bytes": self.actual_bytes}
