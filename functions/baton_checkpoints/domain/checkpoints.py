"""Checkpoints: the entity, how a save is planned, and the rules a write must pass.

The store expresses the same rules as DynamoDB conditions; when a condition fails it hands the item it found
back here (`check_write`) so that the answer is decided in one place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from msgspec import Struct, field

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.canonical import CanonicalState, canonical_json
from baton_checkpoints.domain.errors import (
    CheckpointClosed,
    FieldError,
    LeaseLost,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    RevisionConflict,
    ValidationFailed,
)
from baton_checkpoints.domain.leases import Lease, check_lease
from baton_checkpoints.domain.lifecycle import ACTIVE, OPENCHECKPOINT_FORMAT, is_terminal
from baton_checkpoints.domain.models import SaveCheckpointRequest

RECENT_REQUESTS = 8
"""How many writes' request ids a checkpoint remembers: a retry of a lost write is recognised while at most
seven other writes landed after it."""


def request_tag(request_id: str) -> bytes:
    """The 8 bytes a checkpoint remembers of a write's request id (a BLAKE2b digest: fixed size whatever the id,
    so the last eight cost the item under 100 bytes; two ids collide with probability 2^-64)."""
    return hashlib.blake2b(request_id.encode("utf-8"), digest_size=8).digest()


class CheckpointKey(Struct, frozen=True):
    """What a checkpoint is upserted on: (tenant, subject, agent, kind)."""

    tenant_id: str
    subject_id: str
    agent_id: str
    kind: str


class IdempotencyClaim(Struct, frozen=True):
    """An `Idempotency-Key`, the agent of the key that sent it (keys belong to the caller), and the fingerprint
    of the request that carries it."""

    key: str
    agent_id: str
    fingerprint: str


class SavePlan(Struct, frozen=True):
    """A validated save, ready for the store: everything computed that does not depend on the stored item."""

    key: CheckpointKey
    state: CanonicalState
    status: str
    ttl_seconds: int | None
    """As sent; None keeps the stored value (a new checkpoint gets `ttl_when_new`)."""
    keep_revisions: int | None
    """As sent; None keeps the stored value (a new checkpoint keeps none)."""
    expected_revision: int | None
    format: str | None
    resources: list[dict[str, Any]]
    source: dict[str, str] | None
    request_id: str
    now_ms: int
    oversize: PayloadTooLarge | None = None
    """Set when the state is over its limit: the store still checks what the contract ranks before a 413."""
    caller_agent_id: str | None = None
    """The agent of the key that sent the save (a `*` key may save for another agent): blobs it declared may be
    attached too, beside the checkpoint's own agent's."""
    lease_token: str | None = None
    """The lease token the write presents (needed while the checkpoint is leased)."""
    only_checkpoint: str | None = None
    """For a write addressed by id (a restore): the one checkpoint it may write, never a new one in its place."""
    over_quota: QuotaExceeded | None = None
    """Set when the state's bytes would take the tenant past its `storage_bytes` quota: the store raises it once an
    idempotent retry is ruled out (a retry replays its first answer), before anything is written."""
    create_refused: QuotaExceeded | None = None
    """Set when the tenant is at its `checkpoints` quota: the save may update a checkpoint, never create one."""

    def may_attach(self, blob_agent_id: str) -> bool:
        """True when a blob declared by `blob_agent_id` may be attached by this save."""
        return blob_agent_id in (self.key.agent_id, self.caller_agent_id)

    @property
    def ttl_when_new(self) -> int:
        """The ttl a save gives a checkpoint it creates: the one sent, else the default. The one place the default
        applies: `build_next` and the store's update expression both take it from here."""
        return self.ttl_seconds if self.ttl_seconds is not None else limits.DEFAULT_TTL_SECONDS

    @property
    def keep_when_new(self) -> int:
        """The number of revisions a save keeps on a checkpoint it creates: the one sent, else none."""
        return self.keep_revisions if self.keep_revisions is not None else 0

    @property
    def tag(self) -> bytes:
        """This write's request tag, as the checkpoint remembers it."""
        return request_tag(self.request_id)

    @property
    def blob_ids(self) -> frozenset[str]:
        """The blobs this save's resources name."""
        return frozenset(str(resource["blob_id"]) for resource in self.resources)


def _check_unique(resources: list[dict[str, Any]]) -> None:
    """Each resource names its own blob under its own name: a blob belongs to one checkpoint, once."""
    errors: list[FieldError] = []
    for field_name in ("name", "blob_id"):
        seen: dict[Any, int] = {}
        for position, resource in enumerate(resources):
            value = resource[field_name]
            if value in seen:
                errors.append(
                    FieldError(
                        f"/resources/{position}/{field_name}",
                        f"/resources/{position}/{field_name} repeats /resources/{seen[value]}/{field_name}; each "
                        f"resource needs its own {field_name}.",
                    )
                )
            else:
                seen[value] = position
    if errors:
        raise ValidationFailed(errors)


def plan_save(
    request: SaveCheckpointRequest,
    tenant_id: str,
    agent_id: str,
    request_id: str,
    now_ms: int,
    plain: bool = False,
    caller_agent_id: str | None = None,
) -> SavePlan:
    """Turn a validated request into a plan: canonical state, size and hash, and where the bytes go.

    The size is known from the canonical bytes, so an oversized state is refused before any compression: refusing
    it costs no more than canonicalizing it. `plain` is the body's `Document.plain` (the fast canonical path).
    """
    if request.format == OPENCHECKPOINT_FORMAT:
        from baton_checkpoints.domain import (
            opencheckpoint,
        )  # imported by the saves that need it: not a cold start's cost

        opencheckpoint.check_document(request.state)  # every violation, by its pointer, before anything is stored
    text = canonical_json(request.state, at="/state", plain=plain)
    oversize = None
    if len(text) > limits.MAX_STATE_BYTES:
        oversize = PayloadTooLarge(
            field="/state",
            limit_bytes=limits.MAX_STATE_BYTES,
            actual_bytes=len(text),
            what="/state in canonical JSON",
        )
        # Refused whatever else holds: neither hashed nor compressed (the store only ranks it after 404/409s).
        canonical = CanonicalState(text=text, sha256="")
    else:
        canonical = CanonicalState(text=text, sha256=hashlib.sha256(text).hexdigest())
    # Their fields as they are (scalars each: what `model_dump()` gives), read without building the models'
    # serializers, which nothing else uses (`RequestModel` builds them on first use).
    resources = [dict(ref) for ref in request.resources]
    _check_unique(resources)
    source = None
    if request.source is not None:
        source = {k: v for k, v in request.source if v is not None} or None
    return SavePlan(
        key=CheckpointKey(tenant_id, request.subject_id, agent_id, request.kind),
        state=canonical,
        status=request.status or ACTIVE,
        ttl_seconds=request.ttl_seconds,
        keep_revisions=request.keep_revisions,
        expected_revision=request.expected_revision,
        format=request.format,
        resources=resources,
        source=source,
        request_id=request_id,
        now_ms=now_ms,
        oversize=oversize,
        caller_agent_id=caller_agent_id,
        lease_token=request.lease_token,
    )


class Saved(Struct, frozen=True):
    """What a save wrote, as its answer reports it."""

    checkpoint_id: str
    subject_id: str
    agent_id: str
    kind: str
    revision: int
    status: str
    state_hash: str
    state_bytes: int
    expires_ms: int

    @property
    def updated(self) -> bool:
        """True when the save updated an existing checkpoint (200), False when it created one (201)."""
        return self.revision > 1

    @property
    def etag(self) -> str:
        """The weak entity tag of the revision written."""
        return etag_for(self.checkpoint_id, self.revision)


class SaveOutcome(Struct, frozen=True):
    """What a save did, and whether it replays an earlier request (an idempotency key seen before)."""

    saved: Saved
    replayed: bool = False

    @property
    def created(self) -> bool:
        """True when the save created the checkpoint (201), False when it updated one (200)."""
        return not self.saved.updated


class Checkpoint(Struct, frozen=True):
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
    recent_requests: tuple[bytes, ...] = ()
    """Request tags (`request_tag`) of the latest writes, newest first (at most `RECENT_REQUESTS`): a write whose
    answer was lost and that the AWS SDK retried is recognised by its tag even when other writes landed since."""
    recent_expiries: tuple[int, ...] = ()
    """The expiry (ms) each of those writes set, in the same order."""
    format: str | None = None
    resources: list[dict[str, Any]] = field(default_factory=list)
    source: dict[str, str] | None = None
    lease: Lease | None = None
    """The lease as stored, live or lapsed (`live_lease` says which)."""
    revisions_from: int | None = None
    """The lowest revision number a kept revision of this checkpoint may still be stored at (None: none is)."""

    @property
    def etag_is_whole(self) -> bool:
        """True when the entity tag (id and revision) tells this record apart from every other: no lease has been
        live since the revision was written. A lease shows in the record and changes it without a new revision,
        so while one is live, or after one that outlived the write, a `304` could hide who holds the work."""
        return self.lease is None or self.lease.expires_ms <= self.updated_ms

    def live_lease(self, now_ms: int) -> Lease | None:
        """The lease while it is live, else None."""
        return self.lease if self.lease is not None and self.lease.is_live(now_ms) else None

    def is_live(self, now_ms: int) -> bool:
        """True until `expires_at`; after it the checkpoint is treated as absent."""
        return now_ms < self.expires_ms

    def is_visible_as(self, checkpoint_id: str, now_ms: int, only_agent: str | None) -> bool:
        """True when this checkpoint, read at the key the id index gave for `checkpoint_id`, is that checkpoint
        (the index is eventually consistent: the slot may hold a newer one), live, and the caller's to see (any
        agent's with `only_agent` None)."""
        return (
            self.checkpoint_id == checkpoint_id
            and self.is_live(now_ms)
            and (only_agent is None or self.agent_id == only_agent)
        )

    @property
    def etag(self) -> str:
        """The weak entity tag of this revision."""
        return etag_for(self.checkpoint_id, self.revision)

    def saved(self) -> Saved:
        """This revision as a save answers it."""
        return Saved(
            checkpoint_id=self.checkpoint_id,
            subject_id=self.subject_id,
            agent_id=self.agent_id,
            kind=self.kind,
            revision=self.revision,
            status=self.status,
            state_hash=self.state_hash,
            state_bytes=self.state_bytes,
            expires_ms=self.expires_ms,
        )


def recognised_write(existing: Checkpoint, plan: SavePlan) -> Saved | None:
    """The answer of `plan`'s own earlier write when `existing` remembers its request tag, else None.

    The tags are kept newest first, one per revision, so the position of ours says which revision it wrote.
    """
    if plan.tag not in existing.recent_requests:
        return None
    position = existing.recent_requests.index(plan.tag)
    if position == 0:
        return existing.saved()  # ours is still the latest write: the item says exactly what it wrote
    # Later writes replaced ours; what it wrote is what this same plan writes (the SDK retries the same request),
    # and its expiry is remembered beside its tag (the ttl in force then may have changed since).
    if position < len(existing.recent_expiries):
        expires_ms = existing.recent_expiries[position]
    else:  # not remembered (an item written without expiries): the best estimate
        expires_ms = plan.now_ms + (plan.ttl_seconds or existing.ttl_seconds) * 1000
    return Saved(
        checkpoint_id=existing.checkpoint_id,
        subject_id=plan.key.subject_id,
        agent_id=plan.key.agent_id,
        kind=plan.key.kind,
        revision=existing.revision - position,
        status=plan.status,
        state_hash=plan.state.sha256,
        state_bytes=plan.state.size,
        expires_ms=expires_ms,
    )


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


def check_write(
    existing: Checkpoint | None,
    expected_revision: int | None,
    now_ms: int,
    lease_token: str | None = None,
    only_checkpoint: str | None = None,
) -> None:
    """Raise what the contract says when a write meets `existing` (None or expired counts as absent), in its order:
    a write addressed by id (`only_checkpoint`) whose checkpoint is gone (`NotFound`), a closed checkpoint, then a
    lease (a live one the write lacks the token of; a token whose lease is gone), then a revision conflict. A write
    that carries a lease token never creates a checkpoint: over an absent one it is `LeaseLost` (its lease went with
    a delete, a purge or the checkpoint's expiry)."""
    live = existing is not None and existing.is_live(now_ms)
    if only_checkpoint is not None and (not live or existing is None or existing.checkpoint_id != only_checkpoint):
        raise NotFound()  # a write addressed by id whose checkpoint is gone (or another one in its place)
    if live and existing is not None and is_terminal(existing.status):
        raise CheckpointClosed(existing.status)
    if live and existing is not None:
        check_lease(existing.lease, lease_token, now_ms)
    elif lease_token is not None:
        raise LeaseLost()
    current = existing.revision if live and existing is not None else 0
    if expected_revision is not None and expected_revision != current:
        raise RevisionConflict(expected=expected_revision, current=current)


def build_next(existing: Checkpoint | None, plan: SavePlan, new_id: str) -> Checkpoint:
    """The checkpoint a save produces over `existing` (already checked with `check_write`)."""
    live = existing if existing is not None and existing.is_live(plan.now_ms) else None
    ttl = live.ttl_seconds if live is not None and plan.ttl_seconds is None else plan.ttl_when_new
    keep = live.keep_revisions if live is not None and plan.keep_revisions is None else plan.keep_when_new
    return Checkpoint(
        tenant_id=plan.key.tenant_id,
        checkpoint_id=live.checkpoint_id if live else new_id,
        subject_id=plan.key.subject_id,
        agent_id=plan.key.agent_id,
        kind=plan.key.kind,
        revision=live.revision + 1 if live else 1,
        status=plan.status,
        state_text=plan.state.text,
        state_hash=plan.state.sha256,
        state_bytes=plan.state.size,
        ttl_seconds=ttl,
        keep_revisions=keep,
        created_ms=live.created_ms if live else plan.now_ms,
        updated_ms=plan.now_ms,
        expires_ms=plan.now_ms + ttl * 1000,
        recent_requests=(plan.tag, *(live.recent_requests[: RECENT_REQUESTS - 1] if live else ())),
        recent_expiries=(
            plan.now_ms + ttl * 1000,
            *(live.recent_expiries[: RECENT_REQUESTS - 1] if live else ()),
        ),
        format=plan.format,
        resources=plan.resources,
        source=plan.source,
        lease=live.lease if live else None,
        revisions_from=live.revisions_from if live else None,
    )


def request_fingerprint(method: str, path: str, body: Any, plain: bool = False) -> str:
    """What makes two requests "the same" for idempotency: method, path and canonical body."""
    digest = hashlib.sha256()
    digest.update(f"{method.upper()} {path}\n".encode())
    digest.update(canonical_json(body, plain=plain))
    return digest.hexdigest()


class Page(Struct, frozen=True):
    """One page of a listing."""

    items: list[Checkpoint]
    next_cursor: str | None
    cursor_after: Callable[[Checkpoint], str | None] | None = None
    """The cursor of the page that follows one of `items`: for a caller that shows fewer of them (an answer's byte
    budget), so that the next page starts right after the last one it showed."""
