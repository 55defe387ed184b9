"""Checkpoints: the entity, how a save is planned, and the rules a write must pass.

The store expresses the same rules as DynamoDB conditions; when a condition fails it hands the item it found
back here (`check_write`) so that the answer is decided in one place.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from baton.domain import limits
from baton.domain.canonical import CanonicalState, canonical_json
from baton.domain.clock import format_ms
from baton.domain.errors import CheckpointClosed, PayloadTooLarge, RevisionConflict, ValidationFailed
from baton.domain.lifecycle import ACTIVE, is_terminal
from baton.domain.models import SaveCheckpointRequest

# Compression is worth it only when it saves real space: small states rarely shrink, and every read pays to inflate.
COMPRESS_MIN_BYTES = 512
COMPRESS_MAX_RATIO = 0.9
# Brotli in text mode stores agent text smaller than zlib at the same speed (quality 6). From 16 KB a state is
# worth a slower, denser pass (quality 10: about 10 ms for 32 KB), because every stored kilobyte is paid again on
# every write and read of the item; below that, the write's latency matters more than the bytes.
DENSE_FROM_BYTES = 16_000
FAST_QUALITY = 6
DENSE_QUALITY = 10
RECENT_REQUESTS = 8
"""How many writes' request ids a checkpoint remembers: a retry of a lost write is recognised while at most
seven other writes landed after it."""
BROTLI = b"\x01"
"""First byte of a compressed state: the codec, so that the codec can change without a migration."""


@dataclass(frozen=True)
class CheckpointKey:
    """What a checkpoint is upserted on: (tenant, subject, agent, kind)."""

    tenant_id: str
    subject_id: str
    agent_id: str
    kind: str


@dataclass(frozen=True)
class EncodedState:
    """The canonical state as it is stored: either the UTF-8 text or its compressed form, whichever pays."""

    canonical: CanonicalState
    compressed: bytes | None

    @property
    def stored_bytes(self) -> int:
        """Bytes the state occupies in the item."""
        return len(self.compressed) if self.compressed is not None else self.canonical.size


def compress_state(text: bytes) -> bytes:
    """The codec byte and the Brotli stream of a canonical state."""
    import brotli  # only saves and reads of large states pay for the import

    quality = DENSE_QUALITY if len(text) >= DENSE_FROM_BYTES else FAST_QUALITY
    packed: bytes = brotli.compress(text, quality=quality, mode=brotli.MODE_TEXT)
    return BROTLI + packed


def encode_state(canonical: CanonicalState) -> EncodedState:
    """Compress the canonical state when that saves at least a tenth of its size."""
    if canonical.size >= COMPRESS_MIN_BYTES:
        packed = compress_state(canonical.text)
        if len(packed) <= canonical.size * COMPRESS_MAX_RATIO:
            return EncodedState(canonical=canonical, compressed=packed)
    return EncodedState(canonical=canonical, compressed=None)


def decode_state(text: str | None, compressed: bytes | None) -> bytes:
    """The canonical UTF-8 bytes back from what the item holds."""
    if compressed is not None:
        if compressed[:1] != BROTLI:
            raise ValueError(f"unknown state codec {compressed[:1]!r}")
        import brotli

        return bytes(brotli.decompress(compressed[1:]))
    if text is None:
        raise ValueError("item holds no state")
    return text.encode("utf-8")


@dataclass(frozen=True)
class SavePlan:
    """A validated save, ready for the store: everything computed that does not depend on the stored item."""

    key: CheckpointKey
    state: EncodedState
    status: str
    ttl_seconds: int | None
    keep_revisions: int | None
    expected_revision: int | None
    format: str | None
    resources: list[dict[str, Any]]
    source: dict[str, str] | None
    request_id: str
    now_ms: int
    oversize: PayloadTooLarge | None = None
    """Set when the state is over its limit: the store still checks what the contract ranks before a 413."""


def plan_save(
    request: SaveCheckpointRequest, tenant_id: str, agent_id: str, request_id: str, now_ms: int, plain: bool = False
) -> SavePlan:
    """Turn a validated request into a plan: canonical state, size and hash, and where the bytes go.

    The size is known from the canonical bytes, so an oversized state is refused before any compression: refusing
    it costs no more than canonicalizing it. `plain` is the body's `Document.plain` (the fast canonical path).
    """
    text = canonical_json(request.state, at="/state", plain=plain)
    oversize = None
    if len(text) > limits.MAX_INLINE_STATE_BYTES:
        oversize = PayloadTooLarge(
            field="/state",
            limit_bytes=limits.MAX_INLINE_STATE_BYTES,
            actual_bytes=len(text),
            what="/state in canonical JSON",
        )
        # Refused whatever else holds: neither hashed nor compressed (the store only ranks it after 404/409s).
        canonical = CanonicalState(text=text, sha256="")
    else:
        canonical = CanonicalState(text=text, sha256=hashlib.sha256(text).hexdigest())
    if request.resources:
        # Blobs arrive in a later release; until then no upload can have landed, so no reference can be valid.
        first = request.resources[0]
        raise ValidationFailed.single(
            "/resources/0/blob_id", f"/resources/0/blob_id names the blob {first.blob_id!r}, which was not found."
        )
    source = None
    if request.source is not None:
        source = {k: v for k, v in request.source.model_dump().items() if v is not None} or None
    return SavePlan(
        key=CheckpointKey(tenant_id, request.subject_id, agent_id, request.kind),
        state=EncodedState(canonical=canonical, compressed=None) if oversize else encode_state(canonical),
        status=request.status or ACTIVE,
        ttl_seconds=request.ttl_seconds,
        keep_revisions=request.keep_revisions,
        expected_revision=request.expected_revision,
        format=request.format,
        resources=[],
        source=source,
        request_id=request_id,
        now_ms=now_ms,
        oversize=oversize,
    )


@dataclass(frozen=True)
class Checkpoint:
    """A stored checkpoint, as the domain sees it."""

    tenant_id: str
    checkpoint_id: str
    subject_id: str
    agent_id: str
    kind: str
    revision: int
    status: str
    state_text: bytes | None
    state_hash: str
    state_bytes: int
    ttl_seconds: int
    keep_revisions: int
    created_ms: int
    updated_ms: int
    expires_ms: int
    recent_requests: tuple[str, ...] = ()
    """Request ids of the latest writes, newest first (at most `RECENT_REQUESTS`): a write whose answer was lost
    and that the AWS SDK retried is recognised by its id even when other writes landed in between."""
    recent_expiries: tuple[int, ...] = ()
    """The expiry (ms) each of those writes set, in the same order."""
    format: str | None = None
    resources: list[dict[str, Any]] = field(default_factory=list)
    source: dict[str, str] | None = None

    def is_live(self, now_ms: int) -> bool:
        """True until `expires_at`; after it the checkpoint is treated as absent."""
        return now_ms < self.expires_ms

    @property
    def etag(self) -> str:
        """The weak entity tag of this revision."""
        return etag_for(self.checkpoint_id, self.revision)

    def summary(self) -> dict[str, Any]:
        """The record without state, as the contract names it."""
        return {
            "checkpoint_id": self.checkpoint_id,
            "subject_id": self.subject_id,
            "agent_id": self.agent_id,
            "kind": self.kind,
            "revision": self.revision,
            "status": self.status,
            "state_hash": self.state_hash,
            "state_bytes": self.state_bytes,
            "format": self.format,
            "resources": list(self.resources),
            "source": self.source,
            "ttl_seconds": self.ttl_seconds,
            "keep_revisions": self.keep_revisions,
            "lease": None,
            "expires_at": format_ms(self.expires_ms),
            "created_at": format_ms(self.created_ms),
            "updated_at": format_ms(self.updated_ms),
        }

    def record(self) -> dict[str, Any]:
        """The full record, with the state parsed."""
        if self.state_text is None:
            raise ValueError("checkpoint was loaded without its state")
        return {**self.summary(), "state": json.loads(self.state_text)}

    def save_result(self) -> dict[str, Any]:
        """What a save answers."""
        return {
            "checkpoint_id": self.checkpoint_id,
            "subject_id": self.subject_id,
            "agent_id": self.agent_id,
            "kind": self.kind,
            "revision": self.revision,
            "status": self.status,
            "state_hash": self.state_hash,
            "state_bytes": self.state_bytes,
            "expires_at": format_ms(self.expires_ms),
            "updated": self.revision > 1,
        }


def recognised_write(existing: Checkpoint, plan: SavePlan) -> dict[str, Any] | None:
    """The answer of `plan`'s own earlier write when `existing` remembers its request id, else None.

    The ids are kept newest first, one per revision, so the position of ours says which revision it wrote.
    """
    if plan.request_id not in existing.recent_requests:
        return None
    position = existing.recent_requests.index(plan.request_id)
    if position == 0:
        return existing.save_result()  # ours is still the latest write: the item says exactly what it wrote
    revision = existing.revision - position
    # Later writes replaced ours; what it wrote is what this same plan writes (the SDK retries the same request),
    # and its expiry is remembered beside its request id (the ttl in force then may have changed since).
    if position < len(existing.recent_expiries):
        expires_ms = existing.recent_expiries[position]
    else:  # an item written before expiries were remembered beside request ids
        expires_ms = plan.now_ms + (plan.ttl_seconds or existing.ttl_seconds) * 1000
    return {
        "checkpoint_id": existing.checkpoint_id,
        "subject_id": plan.key.subject_id,
        "agent_id": plan.key.agent_id,
        "kind": plan.key.kind,
        "revision": revision,
        "status": plan.status,
        "state_hash": plan.state.canonical.sha256,
        "state_bytes": plan.state.canonical.size,
        "expires_at": format_ms(expires_ms),
        "updated": revision > 1,
    }


def etag_for(checkpoint_id: str, revision: int) -> str:
    """`W/"<checkpoint_id>:<revision>"`."""
    return f'W/"{checkpoint_id}:{revision}"'


def parse_etag(value: str) -> tuple[str, int] | None:
    """(checkpoint_id, revision) from an entity tag, weak or strong; None when it is not one of ours.

    A revision past 2^53-1 (the largest any checkpoint can reach) is read as -1, a revision no checkpoint has: such
    a tag is well formed but can never be current, and no unbounded number is ever parsed or sent to the store.
    """
    text = value.strip()
    if text.startswith("W/"):
        text = text[2:]
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return None
    checkpoint_id, sep, revision = text[1:-1].rpartition(":")
    if not sep or not revision or not (revision.isascii() and revision.isdigit()):
        return None
    digits = revision.lstrip("0") or "0"
    if len(digits) > len(str(limits.MAX_SAFE_INTEGER)) or int(digits) > limits.MAX_SAFE_INTEGER:
        return checkpoint_id, -1
    return checkpoint_id, int(digits)


def parse_etag_list(header: str) -> list[tuple[str, int]] | None:
    """Every entity tag of an `If-Match` / `If-None-Match` list (RFC 9110: comma-separated, and the gateway joins
    repeated headers with commas); None when any member is not an entity tag of ours."""
    tags: list[tuple[str, int]] = []
    for member in header.split(","):
        if not member.strip():
            continue  # RFC 9110 lists tolerate empty elements
        parsed = parse_etag(member)
        if parsed is None:
            return None
        tags.append(parsed)
    return tags or None


def check_write(existing: Checkpoint | None, expected_revision: int | None, now_ms: int) -> None:
    """Raise what the contract says when a write meets `existing` (None or expired counts as absent)."""
    live = existing is not None and existing.is_live(now_ms)
    if live and existing is not None and is_terminal(existing.status):
        raise CheckpointClosed(existing.status)
    current = existing.revision if live and existing is not None else 0
    if expected_revision is not None and expected_revision != current:
        raise RevisionConflict(expected=expected_revision, current=current)


def build_next(existing: Checkpoint | None, plan: SavePlan, new_id: str) -> Checkpoint:
    """The checkpoint a save produces over `existing` (already checked with `check_write`)."""
    live = existing if existing is not None and existing.is_live(plan.now_ms) else None
    ttl = plan.ttl_seconds or (live.ttl_seconds if live else limits.DEFAULT_TTL_SECONDS)
    keep = plan.keep_revisions if plan.keep_revisions is not None else (live.keep_revisions if live else 0)
    return Checkpoint(
        tenant_id=plan.key.tenant_id,
        checkpoint_id=live.checkpoint_id if live else new_id,
        subject_id=plan.key.subject_id,
        agent_id=plan.key.agent_id,
        kind=plan.key.kind,
        revision=live.revision + 1 if live else 1,
        status=plan.status,
        state_text=plan.state.canonical.text,
        state_hash=plan.state.canonical.sha256,
        state_bytes=plan.state.canonical.size,
        ttl_seconds=ttl,
        keep_revisions=keep,
        created_ms=live.created_ms if live else plan.now_ms,
        updated_ms=plan.now_ms,
        expires_ms=plan.now_ms + ttl * 1000,
        recent_requests=(plan.request_id, *(live.recent_requests[: RECENT_REQUESTS - 1] if live else ())),
        recent_expiries=(
            plan.now_ms + ttl * 1000,
            *(live.recent_expiries[: RECENT_REQUESTS - 1] if live else ()),
        ),
        format=plan.format,
        resources=plan.resources,
        source=plan.source,
    )


def request_fingerprint(method: str, path: str, body: Any, plain: bool = False) -> str:
    """What makes two requests "the same" for idempotency: method, path and canonical body."""
    digest = hashlib.sha256()
    digest.update(f"{method.upper()} {path}\n".encode())
    digest.update(canonical_json(body, plain=plain))
    return digest.hexdigest()
