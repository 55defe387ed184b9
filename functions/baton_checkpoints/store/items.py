"""Domain objects to items and back: one function each way per entity, and the names of their attributes.

Attribute names are short on purpose: DynamoDB bills a write by the item's size in 1 KB units, names included, and
a checkpoint is written on every step of an agent. What a key already says (tenant, subject, agent, kind,
checkpoint id) is not stored again; the state's hash is stored as its 32 bytes; times are epoch milliseconds.

| attribute      | holds                                                                        |
|----------------|------------------------------------------------------------------------------|
| `rev`          | revision                                                                     |
| `st`           | status                                                                       |
| `s` or `z`     | the state: canonical JSON text, or packed by `baton_checkpoints.store.codec` when that pays |
| `so`           | instead of `s`/`z`: the key of the object holding a state too large for the item |
| `rb`           | the ids of the blobs `res` names (a string set; absent without resources)     |
| `h`, `n`       | SHA-256 of the canonical state (32 bytes), its size in bytes                 |
| `f`, `src`, `res` | format, source, resources (absent when not set)                           |
| `tl`, `keep`   | ttl_seconds; keep_revisions (absent means 0)                                 |
| `c`, `u`       | created, updated (epoch ms)                                                  |
| `x`            | expires (epoch seconds with milliseconds: an update adds the ttl to it)      |
| `ttl`          | expiry in epoch seconds, rounded up, for DynamoDB's TTL                      |
| `r0`…`r7`      | request tags of the last eight writes, newest first (8 bytes each)          |
| `e1`…`e7`      | the expiry the 2nd…8th last writes set (`x` is the last one's)               |
| `lh`, `lc`, `lt`, `lx`, `lk` | the lease: holder, counter, random part of its token, expiry (epoch s, ms), key id |
|                | (`lt` is removed by a release: a released token matches nothing)              |
| `vf`           | the lowest revision number a kept revision may still be stored at            |

A kept revision's item (`revision_item`) holds the revision's own `rev`, `st`, state, `h`, `n`, `f`, `src`, `res`,
`rb`, `tl`, `keep`, `c`, `u`, `x` as its checkpoint held them, and a `ttl` from its own expiry.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from functools import lru_cache
from typing import Any, Final

from msgspec import Struct

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import (
    RECENT_REQUESTS,
    Checkpoint,
    CheckpointKey,
    IdempotencyClaim,
    Saved,
    SavePlan,
)
from baton_checkpoints.domain.clock import ms_to_seconds
from baton_checkpoints.domain.leases import Lease, LeaseGrant
from baton_checkpoints.store import codec, layout, schema
from baton_checkpoints.store.attributes import Item, from_attr, from_item, to_attr, to_item

REVISION: Final = "rev"
STATUS: Final = "st"
TEXT: Final = "s"
PACKED: Final = "z"
HASH: Final = "h"
SIZE: Final = "n"
FORMAT: Final = "f"
SOURCE: Final = "src"
RESOURCES: Final = "res"
TTL_SECONDS: Final = "tl"
KEEP: Final = "keep"
CREATED: Final = "c"
UPDATED: Final = "u"
EXPIRES: Final = "x"
RESOURCE_BLOBS: Final = "rb"
"""The ids of the blobs the resources name, as a string set: what a save's condition compares (a save whose blobs
are those the checkpoint already holds needs no claim on them) and what the reaper diffs."""
STATE_OBJECT: Final = "so"
"""The key of the object holding the state, when it was spilled to the bucket (then neither `s` nor `z`)."""
RECENT: Final = tuple(f"r{i}" for i in range(RECENT_REQUESTS))
"""Request tags of the latest writes, newest first: `r0` is the last write's."""
EARLIER_EXPIRIES: Final = tuple(f"e{i}" for i in range(1, RECENT_REQUESTS))
"""The expiry each earlier write set, beside `r1`…: `x` is the last write's, so the ring starts at `e1`."""
LEASE_HOLDER: Final = "lh"
LEASE_COUNTER: Final = "lc"
LEASE_SECRET: Final = "lt"
LEASE_EXPIRES: Final = "lx"
LEASE_KEY: Final = "lk"
LEASE: Final = (LEASE_HOLDER, LEASE_COUNTER, LEASE_SECRET, LEASE_EXPIRES, LEASE_KEY)
REVISIONS_FROM: Final = "vf"
REVISION_ATTRIBUTES: Final = (
    REVISION,
    STATUS,
    TEXT,
    PACKED,
    STATE_OBJECT,
    HASH,
    SIZE,
    FORMAT,
    SOURCE,
    RESOURCES,
    RESOURCE_BLOBS,
    TTL_SECONDS,
    KEEP,
    CREATED,
    UPDATED,
    EXPIRES,
)
"""What a kept revision's item copies of its checkpoint's item (all but the keys, the request ring and the lease)."""

SUMMARY: Final = (
    schema.PK,
    schema.SK,
    schema.GSI1_PK,
    REVISION,
    STATUS,
    HASH,
    SIZE,
    FORMAT,
    SOURCE,
    RESOURCES,
    TTL_SECONDS,
    KEEP,
    CREATED,
    UPDATED,
    EXPIRES,
    *LEASE,
    REVISIONS_FROM,
)
"""What a listing reads of each checkpoint: everything but the state and the request ring."""
REVISION_SUMMARY: Final = tuple(name for name in (schema.SK, *REVISION_ATTRIBUTES) if name not in (TEXT, PACKED))
"""What a revision listing reads of each revision: everything but an inline state (a spilled one's key is small)."""


def seconds_to_ms(value: Any) -> int:
    """Epoch milliseconds from a stored time in seconds (an int or a Decimal with up to three decimals)."""
    return int(Decimal(value) * 1000)


def ttl_epoch(expires_ms: int) -> int:
    """DynamoDB TTL wants whole seconds; round up so TTL never removes an item before it expired."""
    return -(-expires_ms // 1000)


SPILL_ABOVE_BYTES: Final = 16 * 1024
"""A state whose stored form (packed when that pays) is larger than this goes to the bucket, its key in the item.

Chosen on cost (on-demand prices, us-east-1): a save pays a write unit per KB of item, $0.625 a million; a spilled
state pays an S3 PUT and, when the reaper marks it attached, a second PUT-class request, $5 a million each: as
much as 16 write units. Below 16 KB in the item the state stays there (one request, no S3 latency on the save or
the read); above it, every KB more would cost a write unit on every save. A 32 KB agent conversation packs to
about 10 KB and stays inline; a 64 KB one packs to about 19 KB and is spilled (`bench/studies/spill_study.py` prints the
figures for the benchmark's states)."""
INLINE_LIMIT_BYTES: Final = 350_000
"""Without a bucket (a deployment that has none), the most a state may take in an item: DynamoDB's 400 KB
item limit, less room for the rest of the item (resources, names, the request ring)."""


class Placement(Struct, frozen=True):
    """Where a state's stored form goes: the attribute that holds it and its value (the text, the packed bytes, or
    the key of the object holding the packed bytes)."""

    attribute: str
    value: Any


def pack_state(text: bytes) -> tuple[str, bytes | str]:
    """(attribute, value) of a canonical state stored in the item: packed when the codec says that pays, else the
    text."""
    packed = codec.encode(text)
    return (TEXT, text.decode("utf-8")) if packed is None else (PACKED, packed)


def stored_bytes(value: bytes | str) -> bytes:
    """A stored form as bytes (what goes in an object when it is spilled)."""
    return value if isinstance(value, bytes) else value.encode("utf-8")


def unstored(body: bytes) -> bytes:
    """The canonical UTF-8 bytes back from a stored form: packed bytes start with a codec byte, text never does."""
    if codec.is_packed(body):
        return codec.decode(body, limit=limits.MAX_STATE_BYTES)
    return body


def unpack_state(values: dict[str, Any], spilled: bytes | None = None) -> bytes:
    """The canonical UTF-8 bytes back from an item's state attribute (`spilled`: the object's bytes, when the item
    holds only the key of one)."""
    if PACKED in values:
        return codec.decode(values[PACKED], limit=limits.MAX_STATE_BYTES)
    if TEXT in values:
        return str(values[TEXT]).encode("utf-8")
    if STATE_OBJECT in values:
        if spilled is None:
            raise ValueError(f"the state is in the object {values[STATE_OBJECT]!r}, which was not read")
        return unstored(spilled)
    raise ValueError("item holds no state")


def state_object_of(item: Item) -> str | None:
    """The key of the object holding an item's state, if it was spilled (read before mapping the item)."""
    attribute = item.get(STATE_OBJECT)
    return None if attribute is None else str(attribute["S"])


# -- checkpoints ------------------------------------------------------------------------------------------------


def checkpoint_item(cp: Checkpoint, placement: Placement | None = None) -> Item:
    """A checkpoint as its whole item (the transactional save writes it with a Put; the plain save's UpdateItem,
    `save_update`, leaves the same attributes). `placement`: where the store put the state (default: in the item,
    packed when that pays)."""
    if placement is None:
        if cp.state_text is None:
            raise ValueError("cannot store a checkpoint without its state")
        placement = Placement(*pack_state(cp.state_text))
    state_attribute, state_value = placement.attribute, placement.value
    recent = (*cp.recent_requests, *(b"",) * RECENT_REQUESTS)[:RECENT_REQUESTS]
    expiries = (*(ms_to_seconds(ms) for ms in cp.recent_expiries[1:]), *(0,) * RECENT_REQUESTS)[: RECENT_REQUESTS - 1]
    return to_item(
        {
            schema.PK: layout.checkpoint_pk(cp.tenant_id, cp.subject_id),
            schema.SK: layout.checkpoint_sk(cp.agent_id, cp.kind),
            schema.GSI1_PK: layout.checkpoint_index_pk(cp.tenant_id, cp.checkpoint_id),
            schema.GSI1_SK: layout.CHECKPOINT_INDEX_SK,
            REVISION: cp.revision,
            STATUS: cp.status,
            state_attribute: state_value,
            HASH: bytes.fromhex(cp.state_hash),
            SIZE: cp.state_bytes,
            FORMAT: cp.format,
            SOURCE: cp.source,
            RESOURCES: cp.resources or None,
            RESOURCE_BLOBS: frozenset(str(r["blob_id"]) for r in cp.resources) or None,
            TTL_SECONDS: cp.ttl_seconds,
            KEEP: cp.keep_revisions or None,
            CREATED: cp.created_ms,
            UPDATED: cp.updated_ms,
            EXPIRES: ms_to_seconds(cp.expires_ms),
            schema.TTL_ATTRIBUTE: ttl_epoch(cp.expires_ms),
            **dict(zip(RECENT, recent, strict=True)),
            **dict(zip(EARLIER_EXPIRIES, expiries, strict=True)),
            **lease_values(cp.lease),
            REVISIONS_FROM: cp.revisions_from,
        }
    )


def lease_values(lease: Lease | None) -> dict[str, Any]:
    """A lease as the checkpoint item's attributes (all None without one: `to_item` leaves them out)."""
    if lease is None:
        return dict.fromkeys(LEASE)
    return {
        LEASE_HOLDER: lease.holder,
        LEASE_COUNTER: lease.counter,
        LEASE_SECRET: lease.secret or None,  # a released lease keeps none
        LEASE_EXPIRES: ms_to_seconds(lease.expires_ms),
        LEASE_KEY: lease.key_id or None,
    }


def lease_of(values: dict[str, Any]) -> Lease | None:
    """The lease a checkpoint item's attributes (`from_item`) hold, if any."""
    if LEASE_EXPIRES not in values:
        return None
    return Lease(
        holder=values[LEASE_HOLDER],
        counter=int(values[LEASE_COUNTER]),
        secret=values.get(LEASE_SECRET, ""),  # gone once released
        expires_ms=seconds_to_ms(values[LEASE_EXPIRES]),
        key_id=values.get(LEASE_KEY, ""),
    )


def checkpoint_from_item(item: Item, with_state: bool = True, spilled: bytes | None = None) -> Checkpoint:
    """A checkpoint from its item (or from a listing's projection without the state); `with_state=False` leaves
    the state unread, for answers that do not show it. `spilled`: the bytes of the object holding the state, when
    the item holds only its key (`state_object_of`)."""
    values = from_item(item)
    tenant_id, subject_id, agent_id, kind, checkpoint_id = layout.read_checkpoint_keys(
        values[schema.PK], values[schema.SK], values[schema.GSI1_PK]
    )
    expires_ms = seconds_to_ms(values[EXPIRES])
    recent = tuple(tag for name in RECENT if (tag := values.get(name)))
    earlier = tuple(seconds_to_ms(values.get(name) or 0) for name in EARLIER_EXPIRIES)
    return Checkpoint(
        tenant_id=tenant_id,
        checkpoint_id=checkpoint_id,
        subject_id=subject_id,
        agent_id=agent_id,
        kind=kind,
        **_revision_fields(values, with_state, spilled),
        recent_requests=recent,
        recent_expiries=(expires_ms, *earlier)[: len(recent)],
        lease=lease_of(values),
        revisions_from=int(values[REVISIONS_FROM]) if REVISIONS_FROM in values else None,
    )


def _revision_fields(values: dict[str, Any], with_state: bool, spilled: bytes | None) -> dict[str, Any]:
    """What a checkpoint's item and a kept revision's item both hold: the revision as it was written."""
    return {
        "revision": int(values[REVISION]),
        "status": values[STATUS],
        "state_text": unpack_state(values, spilled) if with_state else None,
        "state_hash": bytes(values[HASH]).hex(),
        "state_bytes": int(values[SIZE]),
        "ttl_seconds": int(values[TTL_SECONDS]),
        "keep_revisions": int(values.get(KEEP, 0)),
        "created_ms": int(values[CREATED]),
        "updated_ms": int(values[UPDATED]),
        "expires_ms": seconds_to_ms(values[EXPIRES]),
        "format": values.get(FORMAT),
        "resources": list(values.get(RESOURCES, [])),
        "source": values.get(SOURCE),
    }


# -- kept revisions ---------------------------------------------------------------------------------------------


def revision_item(checkpoint_raw: Item, superseded: Checkpoint) -> Item:
    """The item that keeps `superseded` (read as `checkpoint_raw`) as a revision: its attributes copied as stored
    (the state stays packed, or in its object, which the revision now references), keyed by its number."""
    copied: Item = {name: checkpoint_raw[name] for name in REVISION_ATTRIBUTES if name in checkpoint_raw}
    return {
        **layout.key(
            checkpoint_raw[schema.PK]["S"],
            layout.revision_sk(superseded.agent_id, superseded.kind, superseded.checkpoint_id, superseded.revision),
        ),
        **copied,
        schema.TTL_ATTRIBUTE: to_attr(ttl_epoch(superseded.expires_ms)),
    }


def revision_key(checkpoint: Checkpoint, revision: int) -> Item:
    """The table key of a checkpoint's kept revision."""
    return layout.key(
        layout.checkpoint_pk(checkpoint.tenant_id, checkpoint.subject_id),
        layout.revision_sk(checkpoint.agent_id, checkpoint.kind, checkpoint.checkpoint_id, revision),
    )


def revision_from_item(
    item: Item, checkpoint: Checkpoint, with_state: bool = True, spilled: bytes | None = None
) -> Checkpoint:
    """A kept revision of `checkpoint` from its item, as a checkpoint at that revision (no lease, no request ring)."""
    return Checkpoint(
        tenant_id=checkpoint.tenant_id,
        checkpoint_id=checkpoint.checkpoint_id,
        subject_id=checkpoint.subject_id,
        agent_id=checkpoint.agent_id,
        kind=checkpoint.kind,
        **_revision_fields(from_item(item), with_state, spilled),
    )


class Update(Struct, frozen=True):
    """An UpdateExpression and the values it uses (names are all `#name`, resolved by the caller)."""

    expression: str
    values: dict[str, Any]


def save_update(plan: SavePlan, new_id: str, placement: Placement | None = None) -> Update:
    """The UpdateItem actions that turn whatever the item holds into `plan`'s next revision, computed by DynamoDB
    from the stored item so that the save needs no read: the revision counts up, the id, creation time, ttl and
    keep stay as stored unless this save sends them, and the request ring shifts by one. `placement`: where the
    store put the state (default: in the item)."""
    if placement is None:
        placement = Placement(*pack_state(plan.state.text))
    state_attribute, state_value = placement.attribute, placement.value
    values: dict[str, Any] = {
        ":new_index_pk": layout.checkpoint_index_pk(plan.key.tenant_id, new_id),
        ":index_sk": layout.CHECKPOINT_INDEX_SK,
        ":zero": 0,
        ":one": 1,
        ":status": plan.status,
        ":state": state_value,
        ":hash": bytes.fromhex(plan.state.sha256),
        ":size": plan.state.size,
        ":now_ms": plan.now_ms,
        ":ttl": plan.ttl_when_new,
        ":now_s": ms_to_seconds(plan.now_ms),
        ":ttl_base": ttl_epoch(plan.now_ms),
        ":tag": plan.tag,
        ":blank": b"",
    }
    optional = ((FORMAT, plan.format), (SOURCE, plan.source), (RESOURCES, plan.resources or None))
    for attribute, value in optional:
        if value is not None:
            values[f":{attribute}"] = value
    if plan.resources:
        values[f":{RESOURCE_BLOBS}"] = plan.blob_ids
    if plan.keep_revisions:
        values[":keep"] = plan.keep_revisions
    keep = None if plan.keep_revisions is None else bool(plan.keep_revisions)
    expression = _save_expression(
        state_attribute, plan.ttl_seconds is not None, tuple(value is not None for _, value in optional), keep
    )
    return Update(expression, values)


@lru_cache(maxsize=64)
def _save_expression(state_attribute: str, ttl_sent: bool, sent: tuple[bool, ...], keep: bool | None) -> str:
    """The update expression of a save of this shape (which state attribute, which optional fields are sent):
    a few dozen shapes in all, each built once per container."""
    ttl = ":ttl" if ttl_sent else f"if_not_exists(#{TTL_SECONDS}, :ttl)"
    sets = [
        f"#{schema.GSI1_PK} = if_not_exists(#{schema.GSI1_PK}, :new_index_pk)",
        f"#{schema.GSI1_SK} = :index_sk",
        f"#{REVISION} = if_not_exists(#{REVISION}, :zero) + :one",
        f"#{STATUS} = :status",
        f"#{state_attribute} = :state",
        f"#{HASH} = :hash",
        f"#{SIZE} = :size",
        f"#{CREATED} = if_not_exists(#{CREATED}, :now_ms)",
        f"#{UPDATED} = :now_ms",
        f"#{TTL_SECONDS} = {ttl}",
        f"#{EXPIRES} = :now_s + {ttl}",
        f"#{schema.TTL_ATTRIBUTE} = :ttl_base + {ttl}",
        # The last writes' request tags and expiries shift down one place; the oldest falls off.
        f"#{RECENT[0]} = :tag",
        *(f"#{newer} = if_not_exists(#{older}, :blank)" for older, newer in itertools.pairwise(RECENT)),
        f"#{EARLIER_EXPIRIES[0]} = if_not_exists(#{EXPIRES}, :zero)",
        *(f"#{newer} = if_not_exists(#{older}, :zero)" for older, newer in itertools.pairwise(EARLIER_EXPIRIES)),
    ]
    removes = [f"#{other}" for other in (TEXT, PACKED, STATE_OBJECT) if other != state_attribute]
    for attribute, is_sent in zip((FORMAT, SOURCE, RESOURCES), sent, strict=True):
        if is_sent:
            sets.append(f"#{attribute} = :{attribute}")
        else:
            removes.append(f"#{attribute}")
    if sent[2]:
        sets.append(f"#{RESOURCE_BLOBS} = :{RESOURCE_BLOBS}")
    else:
        removes.append(f"#{RESOURCE_BLOBS}")
    if keep is True:
        sets.append(f"#{KEEP} = :keep")
    elif keep is False:
        removes.append(f"#{KEEP}")  # absent means none kept
    return "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)


def saved_from_update(plan: SavePlan, attributes: Item) -> Saved:
    """What a plain save wrote, from the item its UpdateItem returned (only what the answer needs is read: the item
    holds the state too)."""
    values = {name: from_attr(attributes[name]) for name in (schema.GSI1_PK, REVISION, EXPIRES)}
    return Saved(
        checkpoint_id=layout.read_checkpoint_keys("", "", values[schema.GSI1_PK])[4],
        subject_id=plan.key.subject_id,
        agent_id=plan.key.agent_id,
        kind=plan.key.kind,
        revision=int(values[REVISION]),
        status=plan.status,
        state_hash=plan.state.sha256,
        state_bytes=plan.state.size,
        expires_ms=seconds_to_ms(values[EXPIRES]),
    )


# -- idempotency records ----------------------------------------------------------------------------------------

FINGERPRINT: Final = "fp"
REQUEST: Final = "rid"
ANSWER: Final = "a"


GRANT: Final = "lg"
"""The lease an idempotent lease request granted (instead of a save's answer `a`)."""


class IdempotencyRecord(Struct, frozen=True):
    """The first answer to an idempotency key: the request it answered and what it wrote."""

    fingerprint: str
    request_id: str
    saved: Saved | None
    """None when the key answered another route (a blob's declaration): its fingerprint then differs anyway."""
    expires_ms: int
    grant: LeaseGrant | None = None
    """What a lease request answered, when the key answered one."""


def grant_record_item(
    tenant_id: str,
    claim: IdempotencyClaim,
    request_id: str,
    grant: LeaseGrant,
    expires_ms: int,
    checkpoint_key: Item | None = None,
) -> Item:
    """The idempotency record of a lease request: the lease it granted or renewed. `checkpoint_key`: the table key
    of the leased checkpoint, whose subject enters the record in gsi1 for a purge to find (`subject_entry`)."""
    subject_id = (
        None if checkpoint_key is None else layout.read_checkpoint_keys(*layout.identity(checkpoint_key), "")[1]
    )
    return {
        **layout.idempotency_key(tenant_id, claim.agent_id, claim.key),
        **to_item(
            {
                FINGERPRINT: bytes.fromhex(claim.fingerprint),
                REQUEST: request_id,
                GRANT: {
                    "new": grant.created,
                    **lease_values(grant.lease),
                    # The holder it took over from, for the audit event of a retry that finds its grant landed.
                    **({"from": grant.taken_over_from} if grant.taken_over_from is not None else {}),
                },
                EXPIRES: ms_to_seconds(expires_ms),
                schema.TTL_ATTRIBUTE: ttl_epoch(expires_ms),
                **subject_entry(tenant_id, subject_id),
            }
        ),
    }


def subject_entry(tenant_id: str, subject_id: str | None) -> dict[str, str | None]:
    """The gsi1 keys that enter an idempotency record under the subject its write was about, so that a purge of the
    subject finds and deletes it (`store/purge.py`); none without a subject. The sort key is the same for every
    record (gsi1 keys need not be unique): the shortest entry, which a purge pages through by the table's keys."""
    if subject_id is None:
        return {schema.GSI1_PK: None, schema.GSI1_SK: None}
    return {schema.GSI1_PK: layout.subject_records_pk(tenant_id, subject_id), schema.GSI1_SK: layout.IDEMPOTENCY_SK}


def record_item(tenant_id: str, claim: IdempotencyClaim, request_id: str, saved: Saved, expires_ms: int) -> Item:
    """An idempotency record of a checkpoint write (a save, a restore) as its item, entered in gsi1 under the
    checkpoint's subject (`subject_entry`)."""
    return {
        **layout.idempotency_key(tenant_id, claim.agent_id, claim.key),
        **to_item(
            {
                FINGERPRINT: bytes.fromhex(claim.fingerprint),
                REQUEST: request_id,
                ANSWER: {
                    "id": saved.checkpoint_id,
                    "sub": saved.subject_id,
                    "ag": saved.agent_id,
                    "k": saved.kind,
                    REVISION: saved.revision,
                    STATUS: saved.status,
                    HASH: bytes.fromhex(saved.state_hash),
                    SIZE: saved.state_bytes,
                    EXPIRES: ms_to_seconds(saved.expires_ms),
                },
                EXPIRES: ms_to_seconds(expires_ms),
                schema.TTL_ATTRIBUTE: ttl_epoch(expires_ms),
                **subject_entry(tenant_id, saved.subject_id),
            }
        ),
    }


def record_from_item(item: Item) -> IdempotencyRecord:
    """An idempotency record from its item (of a save, or of another route that keeps its answer elsewhere)."""
    values = from_item(item)
    answer = values.get(ANSWER)
    saved = None
    if answer is not None:
        saved = Saved(
            checkpoint_id=answer["id"],
            subject_id=answer["sub"],
            agent_id=answer["ag"],
            kind=answer["k"],
            revision=int(answer[REVISION]),
            status=answer[STATUS],
            state_hash=bytes(answer[HASH]).hex(),
            state_bytes=int(answer[SIZE]),
            expires_ms=seconds_to_ms(answer[EXPIRES]),
        )
    granted = values.get(GRANT)
    lease = lease_of(granted) if granted is not None else None
    return IdempotencyRecord(
        fingerprint=bytes(values[FINGERPRINT]).hex(),
        request_id=values[REQUEST],
        saved=saved,
        expires_ms=seconds_to_ms(values[EXPIRES]),
        grant=(
            LeaseGrant(lease, created=bool(granted["new"]), taken_over_from=granted.get("from"))
            if lease is not None and granted is not None
            else None
        ),
    )


# -- blobs ------------------------------------------------------------------------------------------------------

AGENT: Final = "ag"
MEDIA_TYPE: Final = "mt"
OWNER_PK: Final = "op"
OWNER_SK: Final = "os"
"""The table key of the checkpoint holding a blob (absent until a save attaches it)."""
CLAIM: Final = "cr"
"""The request tag of the save that last claimed the blob: the reaper deletes a blob's record only while it is
still the claim it read, so a save that attaches the blob again in between wins (see `store/attachments.py`)."""


def blob_item(blob: Blob) -> Item:
    """A blob's record as its item: `h`, `n`, `mt`, `ag`, `c` as a checkpoint's; `ttl` while unattached; the
    owner's table key once attached."""
    owner = blob.owner
    return {
        **layout.blob_key(blob.tenant_id, blob.blob_id),
        **to_item(
            {
                AGENT: blob.agent_id,
                HASH: bytes.fromhex(blob.sha256),
                SIZE: blob.size,
                MEDIA_TYPE: blob.media_type,
                CREATED: blob.created_ms,
                schema.TTL_ATTRIBUTE: None if blob.expires_ms is None else ttl_epoch(blob.expires_ms),
                OWNER_PK: None if owner is None else layout.checkpoint_pk(owner.tenant_id, owner.subject_id),
                OWNER_SK: None if owner is None else layout.checkpoint_sk(owner.agent_id, owner.kind),
            }
        ),
    }


def blob_from_item(item: Item) -> Blob:
    """A blob from its record."""
    values = from_item(item)
    tenant_id, blob_id = layout.read_blob_key(values[schema.PK])
    owner = None
    if OWNER_PK in values:
        owner_tenant, subject_id, agent_id, kind, _ = layout.read_checkpoint_keys(
            values[OWNER_PK], values[OWNER_SK], ""
        )
        owner = CheckpointKey(owner_tenant, subject_id, agent_id, kind)
    ttl = values.get(schema.TTL_ATTRIBUTE)
    return Blob(
        tenant_id=tenant_id,
        blob_id=blob_id,
        agent_id=values[AGENT],
        sha256=bytes(values[HASH]).hex(),
        size=int(values[SIZE]),
        media_type=values[MEDIA_TYPE],
        created_ms=int(values[CREATED]),
        expires_ms=None if ttl is None else int(ttl) * 1000,
        owner=owner,
    )
