"""Attaching blobs to a checkpoint: what a save checks of each blob its resources name, and the claim it writes.

A blob belongs to one checkpoint. A save that names blobs the checkpoint does not hold yet reads their records
with the checkpoint (the same consistent BatchGetItem), checks each (declared by this agent or the caller's, the
SHA-256, size and media type it was declared with, its upload landed with exactly those bytes: one HEAD each, made
only for blobs not held yet), and claims them in the same transaction as the checkpoint: each blob record's owner
is set to the checkpoint's table key, on the condition that it has none or has this one, with the save's request tag
(and 8 random bytes) as the claim. The reaper deletes a blob when its checkpoint lets go of it, so two checkpoints can
never hold the same blob.

Re-attaching races the reaper, which deletes a blob the checkpoint dropped: the reaper reads the blob's record
(its claim), reads the checkpoint, and, when the checkpoint no longer names the blob, deletes the record on the
condition that the claim is still the one it read, and only then the object. A save that attaches the blob again
writes a new claim in its transaction: whichever comes first, the other fails its condition (the save re-reads
and finds the blob gone: a 400; the reaper leaves the blob alone).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Final

from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import SavePlan
from baton_checkpoints.domain.errors import FieldError, ValidationFailed
from baton_checkpoints.store import items, layout, schema
from baton_checkpoints.store.attributes import Item, names_in, to_attr
from baton_checkpoints.store.objects import ObjectInfo

MAX_TRANSACTION_ITEMS: Final = 100
"""DynamoDB's limit on the items of one TransactWriteItems."""

_CLAIM_CONDITION: Final = (
    f"attribute_exists(#{schema.PK}) AND (attribute_not_exists(#{items.OWNER_PK}) "
    f"OR (#{items.OWNER_PK} = :owner_pk AND #{items.OWNER_SK} = :owner_sk))"
)
_CLAIM_UPDATE: Final = (
    f"SET #{items.OWNER_PK} = :owner_pk, #{items.OWNER_SK} = :owner_sk, #{items.CLAIM} = :claim "
    f"REMOVE #{schema.TTL_ATTRIBUTE}"
)


def blob_keys(plan: SavePlan) -> list[Item]:
    """The table keys of the blob records the save's resources name, in the resources' order."""
    return [layout.blob_key(plan.key.tenant_id, str(r["blob_id"])) for r in plan.resources]


def held_blobs(raw: Item | None) -> frozenset[str]:
    """The blobs a checkpoint item holds (its `rb` set), whatever its liveness: an expired checkpoint's blobs still
    belong to its table key until the reaper lets them go."""
    if raw is None or items.RESOURCE_BLOBS not in raw:
        return frozenset()
    return frozenset(raw[items.RESOURCE_BLOBS]["SS"])


def check(
    plan: SavePlan,
    records: dict[tuple[str, str], Item],
    held: frozenset[str],
    head: Callable[[str], ObjectInfo | None],
) -> list[str]:
    """Check every resource of `plan` against its blob's record (`records`, by table key) and, for the blobs not
    `held` yet, against its upload (`head` of its object key); the ids of the blobs to claim, in order. Raises
    `ValidationFailed` naming every resource that fails, each by the field that is wrong."""
    errors: list[FieldError] = []
    to_claim: list[str] = []
    for position, (resource, key) in enumerate(zip(plan.resources, blob_keys(plan), strict=True)):
        at = f"/resources/{position}"
        blob_id = str(resource["blob_id"])
        raw = records.get(layout.identity(key))
        blob = items.blob_from_item(raw) if raw is not None else None
        problem = _refusal(plan, at, blob_id, resource, blob)
        if problem is None and blob is not None and blob_id not in held and blob.owner != plan.key:
            problem = _upload_refusal(at, blob, head(layout.blob_object(blob.tenant_id, blob.blob_id)))
        if problem is not None:
            errors.append(problem)
        elif blob_id not in held:
            to_claim.append(blob_id)
    if errors:
        raise ValidationFailed(errors)
    return to_claim


def _refusal(plan: SavePlan, at: str, blob_id: str, resource: dict[str, Any], blob: Blob | None) -> FieldError | None:
    """Why a resource may not name this blob, if it may not (the record alone decides)."""
    if blob is not None and blob.owner == plan.key:
        pass  # held by this checkpoint already: whoever declared it, this checkpoint may keep it
    elif blob is None or not plan.may_attach(blob.agent_id) or (blob.owner is None and _expired(blob, plan.now_ms)):
        # Another agent's blob is as absent as a missing one: nothing is disclosed.
        return FieldError(f"{at}/blob_id", f"{at}/blob_id names the blob {blob_id!r}, which was not found.")
    if blob.owner is not None and blob.owner != plan.key:
        return FieldError(
            f"{at}/blob_id",
            f"{at}/blob_id names the blob {blob_id!r}, which another checkpoint holds; a blob belongs to one "
            "checkpoint (upload the bytes again as a new blob).",
        )
    for field_name, declared in (("sha256", blob.sha256), ("size", blob.size), ("media_type", blob.media_type)):
        if resource[field_name] != declared:
            return FieldError(
                f"{at}/{field_name}",
                f"{at}/{field_name} is {resource[field_name]!r}, but the blob {blob_id!r} was declared with "
                f"{declared!r}.",
            )
    return None


def _expired(blob: Blob, now_ms: int) -> bool:
    return blob.expires_ms is not None and blob.expires_ms <= now_ms


def _upload_refusal(at: str, blob: Blob, found: ObjectInfo | None) -> FieldError | None:
    """Why the blob's upload cannot be attached yet, if it cannot."""
    if found is None:
        return FieldError(
            f"{at}/blob_id",
            f"{at}/blob_id names the blob {blob.blob_id!r}, whose upload has not landed; PUT its bytes to the upload "
            "URL first.",
        )
    if found.size != blob.size or found.sha256 != blob.sha256:
        return FieldError(
            f"{at}/blob_id",
            f"{at}/blob_id names the blob {blob.blob_id!r}, whose uploaded bytes do not match the SHA-256 and size "
            f"it was declared with ({found.size} bytes uploaded, {blob.size} declared).",
        )
    return None


def too_many(plan: SavePlan, to_claim: list[str], other_items: int) -> ValidationFailed | None:
    """The refusal of a save that would claim more blobs than one transaction holds beside its `other_items`."""
    room = MAX_TRANSACTION_ITEMS - other_items
    if len(to_claim) <= room:
        return None
    return ValidationFailed.single(
        "/resources",
        f"/resources attaches {len(to_claim)} blobs the checkpoint does not hold yet; one save attaches at most "
        f"{room}: save again with the rest added.",
    )


def new_claim(plan: SavePlan) -> bytes:
    """The claim of one transaction attempt: the save's request tag and 8 random bytes. A retry after an unknown
    outcome claims anew, so a reaper that read the claim of an attempt whose checkpoint was deleted since cannot
    mistake the retry's claim for it."""
    return plan.tag + secrets.token_bytes(8)


def claim(table: str, plan: SavePlan, blob_id: str, token: bytes) -> dict[str, Any]:
    """The transaction item that makes the checkpoint of `plan` the owner of a blob (and ends its pending expiry),
    under the claim `token` (`new_claim`)."""
    return {
        "Update": {
            "TableName": table,
            "Key": layout.blob_key(plan.key.tenant_id, blob_id),
            "UpdateExpression": _CLAIM_UPDATE,
            "ConditionExpression": _CLAIM_CONDITION,
            "ExpressionAttributeNames": names_in(_CLAIM_UPDATE, _CLAIM_CONDITION),
            "ExpressionAttributeValues": {
                ":owner_pk": to_attr(layout.checkpoint_pk(plan.key.tenant_id, plan.key.subject_id)),
                ":owner_sk": to_attr(layout.checkpoint_sk(plan.key.agent_id, plan.key.kind)),
                ":claim": to_attr(token),
            },
        }
    }
