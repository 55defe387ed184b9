"""The checkpoint repository: one conditional write per save, one read per lookup.

Every rule a write must pass is a condition of the write itself. When a condition fails, DynamoDB hands back the
item it found (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), and `baton_checkpoints.domain.checkpoints.check_write`
decides what that means: no second read to explain a failure. Keys come from `layout`, items from `items`, and
AWS errors are sorted by `errors`: the methods here build a condition, make the call and map the answer.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, Final, cast

from cachetools import TTLCache
from msgspec.structs import replace

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import (
    Checkpoint,
    CheckpointKey,
    IdempotencyClaim,
    Page,
    Saved,
    SaveOutcome,
    SavePlan,
    build_next,
    check_write,
    recognised_write,
)
from baton_checkpoints.domain.clock import ms_to_seconds
from baton_checkpoints.domain.errors import (
    BatonError,
    IdempotencyKeyReused,
    NotFound,
    PayloadTooLarge,
    RevisionConflict,
    Unavailable,
)
from baton_checkpoints.domain.history import history_step
from baton_checkpoints.domain.ids import new_checkpoint_id
from baton_checkpoints.domain.leases import check_lease, parse_token
from baton_checkpoints.domain.lifecycle import ACTIVE
from baton_checkpoints.observability import logger
from baton_checkpoints.store import attachments, items, layout, schema
from baton_checkpoints.store.attributes import Item, names_in, to_attr, values_used
from baton_checkpoints.store.batch import batch_get
from baton_checkpoints.store.cursors import decode_after, encode_after, invalid_cursor, query_binding
from baton_checkpoints.store.dynamo import query, refusal
from baton_checkpoints.store.errors import (
    Failure,
    classify,
    may_have_landed,
    reraise,
    translated_errors,
)
from baton_checkpoints.store.index import locate
from baton_checkpoints.store.objects import ObjectInfo, ObjectStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A save retries from its read when another writer got in between; past this many rounds the caller gets 503.
MAX_WRITE_ATTEMPTS = 5
MAX_TRANSACTION_ROUNDS = 8
"""Rounds of read-then-transact a save makes while other writers keep getting in between (then 503)."""
MAX_UNKNOWN_ROUNDS = 4
"""Transactions a save sends while each fails without an answer (each is then checked by the next round's read)."""
CONTENTION_BACKOFF_SECONDS = 0.01
"""The base of the random pause before another round: writers that collided spread out instead of colliding again."""
HISTORY_HINTS: Final = 4096
HISTORY_HINT_SECONDS: Final = 600
BUSY_MESSAGE: Final = "Too many concurrent writers on this checkpoint; nothing was written. Retry shortly."

_NOT_MINE = "NOT (" + " OR ".join(f"#{name} = :tag" for name in items.RECENT) + ")"
"""True unless the item remembers this write's request tag (a slot not yet written equals nothing)."""
_LIVE_AND_WRITABLE = f"(#{items.EXPIRES} > :now_s AND #{items.STATUS} = :active AND {_NOT_MINE})"
_NO_HISTORY = f"attribute_not_exists(#{items.REVISIONS_FROM})"
"""No kept revision is stored: a save need not prune (with `keep_revisions` 0 it stays one request)."""
_KEEPS_NONE = f"attribute_not_exists(#{items.KEEP})"


def _values(values: dict[str, Any], *expressions: str) -> dict[str, Any]:
    """The typed `ExpressionAttributeValues` that the expressions use."""
    used = values_used(*expressions)
    return {k: to_attr(v) for k, v in values.items() if k in used}


def lease_allows(token: str | None, values: dict[str, Any]) -> str:
    """A condition that holds, without a token, while the item has no live lease; with `token`, only while the
    item's lease is the one the token names (live, or lapsed while nobody took it over; never a released one, whose
    random part is gone). Its values are added to `values` (`:now_s` must be there). `check_lease` decides what a
    failure means."""
    if token is None:
        return f"(attribute_not_exists(#{items.LEASE_EXPIRES}) OR #{items.LEASE_EXPIRES} <= :now_s)"
    # A token that is not one of ours names no lease: it matches nothing (no stored counter is negative).
    values[":lease_counter"], values[":lease_secret"] = parse_token(token) or (-1, "-")
    return f"(#{items.LEASE_COUNTER} = :lease_counter AND #{items.LEASE_SECRET} = :lease_secret)"


def _save_condition(plan: SavePlan) -> tuple[str, dict[str, Any]]:
    """The condition of a plain save: the contract's rules, and not a write this item already remembers; over an
    existing checkpoint, no live lease but the one whose token it carries, and no history to keep or prune (a save
    that must keep or prune revisions takes the transaction, `_save_transactional`)."""
    values: dict[str, Any] = {":now_s": ms_to_seconds(plan.now_ms), ":active": ACTIVE, ":tag": plan.tag}
    history = _NO_HISTORY if plan.keep_revisions is not None else f"{_NO_HISTORY} AND {_KEEPS_NONE}"
    writable = f"{_LIVE_AND_WRITABLE} AND {lease_allows(plan.lease_token, values)} AND {history}"
    if plan.resources:
        # Only over a live checkpoint whose resources are exactly these (blobs it holds, each as it was declared and
        # checked when attached): anything else takes the transaction that checks and claims (`_save_transactional`).
        values[f":{items.RESOURCES}"] = plan.resources
        held = f"{writable} AND #{items.RESOURCES} = :{items.RESOURCES}"
        if plan.expected_revision is None:
            return held, values
        values[":expected"] = plan.expected_revision
        return f"{held} AND #{items.REVISION} = :expected", values
    if plan.lease_token is None:
        if plan.expected_revision is None:
            return f"attribute_not_exists(#{schema.PK}) OR ({writable})", values
        if plan.expected_revision == 0:
            return f"attribute_not_exists(#{schema.PK})", values
    elif plan.expected_revision is None:
        # A write that carries a lease token acts only on the checkpoint holding that lease: it never creates one
        # (a zombie worker's save after a delete or a purge must not bring the work back). With `expected_revision`
        # 0 as well, the condition below can never hold, and `check_write` tells which rule the save broke.
        return writable, values
    values[":expected"] = plan.expected_revision
    return f"{writable} AND #{items.REVISION} = :expected", values


def _keeps_history(existing: Checkpoint, plan: SavePlan) -> bool:
    """True when a save of `plan` over the live `existing` must keep or prune revisions."""
    keep = existing.keep_revisions if plan.keep_revisions is None else plan.keep_revisions
    return keep > 0 or existing.revisions_from is not None


class CheckpointStore:
    """Checkpoints in one DynamoDB table."""

    def __init__(self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None = None) -> None:
        """`objects`: the bucket that holds states too large for an item (None: no state is spilled)."""
        self._client = client
        self._table = table_name
        self._objects = objects
        self._with_history: TTLCache[CheckpointKey, bool] = TTLCache(maxsize=HISTORY_HINTS, ttl=HISTORY_HINT_SECONDS)
        """Checkpoints this container saw keeping revisions: their next save goes straight to the transaction
        instead of first trying the plain write, which their stored `keep_revisions` would refuse. Only a hint:
        the plain write's condition decides."""

    # -- save -----------------------------------------------------------------------------------------------

    def save(self, plan: SavePlan, claim: IdempotencyClaim | None = None) -> SaveOutcome:
        """Upsert the checkpoint of `plan`; with a claim, exactly once per idempotency key."""
        with translated_errors():
            if (
                claim is not None
                or (plan.resources and plan.expected_revision == 0)
                or (plan.keep_revisions or 0) > 0
                or plan.key in self._with_history
            ):
                return self._save_transactional(plan, claim)
            refusal = plan.oversize or plan.over_quota
            if refusal is not None:
                # The contract ranks a closed checkpoint, a lease and a revision conflict before an oversized state
                # or a quota.
                check_write(
                    self._get_item(plan.key, with_state=False),
                    plan.expected_revision,
                    plan.now_ms,
                    plan.lease_token,
                    plan.only_checkpoint,
                )
                raise refusal
            return self._save_plain(plan)

    def _place(self, plan: SavePlan) -> items.Placement:
        """Where this save's state goes: in the item (packed when that pays) or, past `items.SPILL_ABOVE_BYTES`, in
        a new object of the bucket (one PutObject, before the write: the item never names a missing object)."""
        attribute, value = items.pack_state(plan.state.text)
        body = items.stored_bytes(value)
        if len(body) <= items.SPILL_ABOVE_BYTES:
            return items.Placement(attribute, value)
        if self._objects is None:
            if len(body) <= items.INLINE_LIMIT_BYTES:
                return items.Placement(attribute, value)
            raise PayloadTooLarge(
                field="/state",
                limit_bytes=items.INLINE_LIMIT_BYTES,
                actual_bytes=len(body),
                what="/state as stored (this deployment has no bucket for larger states)",
            )
        return items.Placement(items.STATE_OBJECT, self._objects.put_state(plan.key.tenant_id, body))

    def _discard(self, placement: items.Placement | None) -> None:
        """Remove a spilled state that no item came to reference (the save was refused): a refused request leaves
        nothing behind. Best effort: what stays is still tagged pending, and the lifecycle rule removes it."""
        if placement is None or placement.attribute != items.STATE_OBJECT or self._objects is None:
            return
        try:
            self._objects.delete(placement.value)
        except Exception:
            logger().warning("could not remove the spilled state of a refused save", extra={"key": placement.value})

    def _save_plain(self, plan: SavePlan) -> SaveOutcome:
        placement = self._place(plan)
        try:
            outcome = self._write_plain(plan, placement)
            if outcome is None:  # the save attaches blobs the checkpoint does not hold yet
                return self._save_transactional(plan, None, [placement])
            return outcome
        except BatonError as exc:
            # A refusal (409, 404...) wrote nothing; an Unavailable may have (its write's outcome is unknown): then
            # the object stays pending, and the reaper attaches it if the write landed.
            if not isinstance(exc, Unavailable):
                self._discard(placement)
            raise

    def _write_plain(self, plan: SavePlan, placement: items.Placement) -> SaveOutcome | None:
        """One conditional UpdateItem; None when the save must claim blobs or keep revisions (the transaction does
        that)."""
        key = layout.checkpoint_key(plan.key.tenant_id, plan.key.subject_id, plan.key.agent_id, plan.key.kind)
        update = items.save_update(plan, new_checkpoint_id(), placement)
        condition, condition_values = _save_condition(plan)
        if plan.create_refused is not None:
            condition = f"attribute_exists(#{schema.PK}) AND ({condition})"  # at the checkpoints quota: update only
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": update.expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names_in(update.expression, condition),
            "ExpressionAttributeValues": _values({**update.values, **condition_values}, update.expression, condition),
            # The answer needs the id, the revision and the expiry, which DynamoDB computes from the stored item.
            # A write's return has no projection: UPDATED_NEW is every attribute the update sets, the state among
            # them, so it saves only the keys and creation time over ALL_NEW (and moto, unlike DynamoDB, leaves
            # out the unchanged id). Knowing them without a return would cost a read first: a second request.
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        for _ in range(MAX_WRITE_ATTEMPTS):
            try:
                response = self._client.update_item(**request)
            except Exception as exc:
                failure = classify(exc)
                if failure is Failure.RACE:
                    continue  # an idempotent save's transaction holds the item for a moment: try again
                if may_have_landed(exc):
                    # No answer came back (a timeout, a dropped connection, a 5xx): the write may have landed. One
                    # read tells, so that a 503 keeps its promise that nothing was written.
                    landed = self._landed(plan)
                    if landed is not None:
                        return SaveOutcome(landed)
                refused = refusal(exc)
                if refused is None:
                    reraise(exc, failure)
                old = items.checkpoint_from_item(refused.item, with_state=False) if refused.found else None
                if old is not None:
                    # Our own write landed and its answer was lost; the AWS SDK retried it (perhaps after other
                    # writes). Report what it wrote, never redo it.
                    mine = recognised_write(old, plan)
                    if mine is not None:
                        return SaveOutcome(mine)
                check_write(old, plan.expected_revision, plan.now_ms, plan.lease_token, plan.only_checkpoint)
                if old is None and plan.create_refused is not None:
                    raise plan.create_refused from None
                if old is not None and old.is_live(plan.now_ms) and _keeps_history(old, plan):
                    self._with_history[plan.key] = True
                    return None  # the save keeps or prunes revisions: the transaction does that
                if plan.resources:
                    return None  # the resources differ (or the item changed): the transaction decides
                if old is not None and not old.is_live(plan.now_ms):
                    outcome = self._replace_expired(plan, old, placement)
                    if outcome is not None:
                        return outcome
                continue  # the item changed between the write and now: try again
            return SaveOutcome(items.saved_from_update(plan, response["Attributes"]))
        raise Unavailable(BUSY_MESSAGE)

    def _landed(self, plan: SavePlan) -> Saved | None:
        """What `plan`'s write answered if the item shows it landed; None when it did not or cannot be known."""
        try:
            found = self._get_item(plan.key, with_state=False)
        except Exception:  # the store is still unreachable: the caller answers 503
            return None
        return recognised_write(found, plan) if found is not None else None

    def _replace_expired(self, plan: SavePlan, expired: Checkpoint, placement: items.Placement) -> SaveOutcome | None:
        """Replace an expired item that TTL has not removed yet with a new checkpoint; None if it changed."""
        fresh = build_next(None, plan, new_checkpoint_id())
        try:
            self._client.put_item(
                TableName=self._table,
                Item=items.checkpoint_item(fresh, placement),
                **self._unchanged(expired),
            )
        except Exception as exc:
            failure = classify(exc)
            if failure in (Failure.CONDITION_FAILED, Failure.RACE):
                return None
            landed = self._landed(plan) if may_have_landed(exc) else None
            if landed is not None:
                return SaveOutcome(landed)
            reraise(exc, failure)
        return SaveOutcome(fresh.saved())

    @staticmethod
    def _unchanged(old: Checkpoint) -> dict[str, Any]:
        """A condition that holds while the item is still the revision `old` was read at, with the same lease (lease
        operations change neither the revision nor anything else a save writes, so they are compared apart)."""
        condition = f"#{schema.GSI1_PK} = :old_index_pk AND #{items.REVISION} = :old_revision"
        values = {
            ":old_index_pk": to_attr(layout.checkpoint_index_pk(old.tenant_id, old.checkpoint_id)),
            ":old_revision": to_attr(old.revision),
        }
        if old.lease is None:
            condition += f" AND attribute_not_exists(#{items.LEASE_EXPIRES})"
        else:
            condition += (
                f" AND #{items.LEASE_COUNTER} = :old_lease_counter AND #{items.LEASE_EXPIRES} = :old_lease_expires"
            )
            values[":old_lease_counter"] = to_attr(old.lease.counter)
            values[":old_lease_expires"] = to_attr(ms_to_seconds(old.lease.expires_ms))
        return {
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names_in(condition),
            "ExpressionAttributeValues": values,
        }

    def _save_transactional(
        self,
        plan: SavePlan,
        claim: IdempotencyClaim | None,
        placed: list[items.Placement] | None = None,
        read: dict[tuple[str, str], Item] | None = None,
    ) -> SaveOutcome:
        """Read what the write depends on (the checkpoint, the idempotency record, the blobs to attach) in one
        consistent BatchGetItem, then write it all in one transaction conditioned on what was read. `placed` holds
        the state's placement when the caller already made it; `read`, what the caller already read consistently
        of the checkpoint's and the record's keys (the first round's read, when the save names no blob)."""
        placed = [] if placed is None else placed
        try:
            return self._write_transactional(plan, claim, placed, read)
        except BatonError as exc:
            if not isinstance(exc, Unavailable) and placed:
                self._discard(placed[0])  # refused after its state was spilled: see `_save_plain`
            raise

    def _write_transactional(
        self,
        plan: SavePlan,
        claim: IdempotencyClaim | None,
        placed: list[items.Placement],
        read: dict[tuple[str, str], Item] | None = None,
    ) -> SaveOutcome:
        """The read-then-transact loop of `_save_transactional`; `placed` receives the state's placement once made
        (placed once, whatever the number of rounds), and each blob's upload is looked at once."""
        checkpoint_key = layout.checkpoint_key(
            plan.key.tenant_id, plan.key.subject_id, plan.key.agent_id, plan.key.kind
        )
        record_key = None if claim is None else layout.idempotency_key(plan.key.tenant_id, claim.agent_id, claim.key)
        keys = [checkpoint_key, *([record_key] if record_key is not None else []), *attachments.blob_keys(plan)]
        heads: dict[str, ObjectInfo | None] = {}
        ambiguous: Exception | None = None
        unsure = False  # the last attempt's outcome is unknown
        unknown_rounds = 0
        copied: tuple[str, Item] | None = None  # (checkpoint id, key) of the revision the last round copied
        for attempt in range(MAX_TRANSACTION_ROUNDS):
            if attempt:
                # Full jitter, growing with the rounds: concurrent writers of one checkpoint each read what the
                # last winner wrote instead of meeting again at once.
                time.sleep(random.uniform(0, CONTENTION_BACKOFF_SECONDS * 2 ** min(attempt, 4)))
            found = read if read is not None and not plan.resources else self._batch_get(keys)
            read = None  # a later round reads again
            if claim is not None and record_key is not None:
                raw_record = found.get(layout.identity(record_key))
                if raw_record is not None:
                    record = items.record_from_item(raw_record)
                    if record.expires_ms > plan.now_ms:
                        if record.fingerprint != claim.fingerprint or record.saved is None:
                            raise IdempotencyKeyReused()
                        return SaveOutcome(record.saved, replayed=record.request_id != plan.request_id)
            raw = found.get(layout.identity(checkpoint_key))
            old = items.checkpoint_from_item(raw, with_state=False) if raw is not None else None
            if copied is not None and (old is None or old.checkpoint_id != copied[0]):
                # The checkpoint whose revision the last round copied was deleted since: no save can supersede that
                # revision any more, and the reaper deleted its revisions before the copy arrived.
                self._forget_copy(copied[1])
                copied = None
            if old is not None and claim is None:
                mine = recognised_write(old, plan)  # our own transaction landed and its answer was lost
                if mine is not None:
                    return SaveOutcome(mine)
            if ambiguous is not None and unknown_rounds >= MAX_UNKNOWN_ROUNDS:
                # DynamoDB keeps failing without an answer, and the read shows none of those tries landed: give up
                # (rounds lost to other writers are retried longer, below; these are not contention).
                reraise(ambiguous)
            check_write(old, plan.expected_revision, plan.now_ms, plan.lease_token, plan.only_checkpoint)
            quota = plan.oversize or plan.over_quota or (plan.create_refused if old is None else None)
            if quota is not None:
                raise quota
            new = build_next(old, plan, new_checkpoint_id())
            superseded = old if old is not None and old.is_live(plan.now_ms) else None
            step = history_step(superseded, new.keep_revisions)
            new = replace(new, revisions_from=step.revisions_from)
            if new.keep_revisions or step.revisions_from is not None:
                self._with_history[plan.key] = True  # its next save keeps a revision too: straight here
            else:
                self._with_history.pop(plan.key, None)
            to_claim = attachments.check(plan, found, attachments.held_blobs(raw), lambda key: self._head(key, heads))
            refusal = attachments.too_many(plan, to_claim, 1 + (claim is not None))
            if refusal is not None:
                raise refusal
            saved = new.saved()
            if unsure and placed and placed[0].attribute == items.STATE_OBJECT:
                # The last attempt's outcome is unknown and the item does not show it: its checkpoint may have landed
                # and been deleted since, and the reaper deletes the object it named. This attempt spills anew.
                placed.clear()
            unsure = False
            if not placed:
                placed.append(self._place(plan))
            checkpoint_condition: dict[str, Any] = (
                {"ConditionExpression": f"attribute_not_exists({schema.PK})"} if old is None else self._unchanged(old)
            )
            checkpoint_put: dict[str, Any] = {
                "TableName": self._table,
                "Item": items.checkpoint_item(new, placed[0]),
                **checkpoint_condition,
            }
            if step.keep_superseded and superseded is not None and raw is not None:
                # The revision first, on its own: its content is revision r's, which never changes, so the copy is
                # right whether or not the checkpoint's write below lands (until the checkpoint moves past r it is
                # outside the window, unseen), and outside the transaction, which would bill it twice.
                copy = items.revision_item(raw, superseded)
                copy_key = layout.key(*layout.identity(copy))
                # A round lost to a change that left the revision as it was (a lease renewed, a transaction in the
                # way) finds its copy in place: nothing deletes a copy of a live checkpoint's own revision.
                if copied != (superseded.checkpoint_id, copy_key):
                    try:
                        self._client.put_item(TableName=self._table, Item=copy)
                    except Exception as exc:
                        failure = classify(exc)
                        if failure is Failure.RACE:
                            continue  # a transaction holds the item for a moment: read again
                        reraise(exc, failure)
                    copied = (superseded.checkpoint_id, copy_key)
            try:
                if claim is None and not to_claim:
                    # Nothing else must land with the checkpoint: one conditional PutItem at the standard rate.
                    self._client.put_item(**checkpoint_put)
                else:
                    self._client.transact_write_items(
                        TransactItems=cast(Any, [{"Put": checkpoint_put}, *self._riders(plan, claim, saved, to_claim)])
                    )
            except Exception as exc:
                failure = classify(exc)
                if failure in (Failure.CONDITION_FAILED, Failure.RACE):
                    continue  # another writer got in between (or our own retried write landed): read again
                if may_have_landed(exc):
                    ambiguous = exc
                    unsure = True
                    unknown_rounds += 1
                    continue  # the next read finds our record, or our request tag on the checkpoint, if it landed
                reraise(exc, failure)
            return SaveOutcome(saved)
        if ambiguous is not None:
            reraise(ambiguous)
        raise Unavailable(BUSY_MESSAGE)

    def _riders(
        self, plan: SavePlan, claim: IdempotencyClaim | None, saved: Saved, to_claim: list[str]
    ) -> list[dict[str, Any]]:
        """What must land in the same transaction as the checkpoint: the idempotency record of `claim` (its answer
        `saved`) and the claims of the blobs the save attaches."""
        riders: list[dict[str, Any]] = []
        if claim is not None:
            record_expiry_ms = plan.now_ms + limits.IDEMPOTENCY_TTL_SECONDS * 1000
            record_condition = f"attribute_not_exists(#{schema.PK}) OR #{items.EXPIRES} <= :now_s"
            riders.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": items.record_item(plan.key.tenant_id, claim, plan.request_id, saved, record_expiry_ms),
                        "ConditionExpression": record_condition,
                        "ExpressionAttributeNames": names_in(record_condition),
                        "ExpressionAttributeValues": {":now_s": to_attr(ms_to_seconds(plan.now_ms))},
                    }
                }
            )
        token = attachments.new_claim(plan)
        riders.extend(attachments.claim(self._table, plan, blob_id, token) for blob_id in to_claim)
        return riders

    def _forget_copy(self, key: Item) -> None:
        """Delete a revision copied for a checkpoint that is gone. Best effort: what stays is unseen (its
        checkpoint is gone) and expires with its own TTL."""
        try:
            self._client.delete_item(TableName=self._table, Key=key)
        except Exception:
            logger().warning("could not delete the revision copied for a deleted checkpoint", extra={"key": key})

    def _head(self, key: str, seen: dict[str, ObjectInfo | None]) -> ObjectInfo | None:
        """What the bucket holds at `key` (one HEAD per key and save, whatever the rounds)."""
        if key not in seen:
            if self._objects is None:
                seen[key] = None  # no bucket: no upload can have landed
            else:
                seen[key] = self._objects.head(key)
        return seen[key]

    # -- reads ----------------------------------------------------------------------------------------------

    def get(self, key: CheckpointKey, now_ms: int) -> Checkpoint:
        """The live checkpoint at `key` (one consistent GetItem), else NotFound."""
        with translated_errors():
            found = self._get_item(key)
        if found is None or not found.is_live(now_ms):
            raise NotFound()
        return found

    def get_by_id(self, tenant_id: str, checkpoint_id: str, now_ms: int) -> Checkpoint:
        """The live checkpoint with this id in this tenant (one index Query, one consistent GetItem)."""
        with translated_errors():
            key = self._locate(tenant_id, checkpoint_id)
            if key is None:
                raise NotFound()
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
            if item is None:
                raise NotFound()
            head = items.checkpoint_from_item(item, with_state=False)
            # The index is eventually consistent: the slot may hold a newer checkpoint than the one indexed.
            if not head.is_visible_as(checkpoint_id, now_ms, None):
                raise NotFound()
            return self._checkpoint(item)

    def _get_item(self, key: CheckpointKey, with_state: bool = True) -> Checkpoint | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=layout.checkpoint_key(key.tenant_id, key.subject_id, key.agent_id, key.kind),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return self._checkpoint(item, with_state) if item is not None else None

    def _checkpoint(self, item: Item, with_state: bool = True) -> Checkpoint:
        """A checkpoint from its item, its state read from the bucket when it was spilled (one GetObject).

        An object is deleted only once no item names it, so a missing one first means that a save replaced the state
        after the item was read (and the reaper was quick): the item is read again, and its new state with it; a
        checkpoint that keeps changing that fast is a 503, one that is gone or another one (a new id) a 404. An item
        read again that still names the missing object is a defect (the object was deleted behind it): a 503 and one
        ERROR line (`ObjectStore.missing_state`), never a 500."""
        key = items.state_object_of(item) if with_state else None
        if key is None:
            return items.checkpoint_from_item(item, with_state)
        if self._objects is None:
            raise RuntimeError(f"the state of this checkpoint is in the object {key!r}, and no bucket is configured")
        for _ in range(3):  # two saves racing this read are already rare; more rounds would only delay the 503
            spilled = self._objects.get(key)
            if spilled is not None:
                return items.checkpoint_from_item(item, with_state, spilled=spilled)
            again = self._client.get_item(
                TableName=self._table, Key=layout.key(*layout.identity(item)), ConsistentRead=True
            ).get("Item")
            if again is None or again.get(schema.GSI1_PK) != item.get(schema.GSI1_PK):
                raise NotFound()
            moved = items.state_object_of(again)
            if moved == key:
                head = items.checkpoint_from_item(again, with_state=False)
                raise self._objects.missing_state(key, checkpoint_id=head.checkpoint_id, revision=head.revision)
            item = again
            if moved is None:
                return items.checkpoint_from_item(item, with_state)
            key = moved
        raise Unavailable("The checkpoint changed while it was read; nothing was written. Retry shortly.")

    def _locate(self, tenant_id: str, checkpoint_id: str) -> Item | None:
        return locate(self._client, self._table, tenant_id, checkpoint_id)

    def _batch_get(self, keys: list[Item]) -> dict[tuple[str, str], Item]:
        return batch_get(self._client, self._table, keys)

    def save_restored(
        self, plan: SavePlan, claim: IdempotencyClaim | None, read: dict[tuple[str, str], Item]
    ) -> SaveOutcome:
        """Save a restored revision's plan: always the history save's transaction (a restore keeps the revision it
        supersedes), conditioned on `read`, the caller's consistent read of the checkpoint (and the idempotency
        record) when its first round can use it."""
        self._with_history[plan.key] = True
        with translated_errors():
            return self._save_transactional(plan, claim, read=read)

    # -- delete ---------------------------------------------------------------------------------------------

    def delete(
        self,
        tenant_id: str,
        checkpoint_id: str,
        now_ms: int,
        only_agent: str | None,
        if_match_revisions: tuple[int, ...] | None,
        lease_token: str | None = None,
    ) -> None:
        """Delete the live checkpoint with this id; NotFound if it is not there or not the caller's to see.

        `if_match_revisions` (from `If-Match`) makes it conditional: the current revision must be one of them. While
        the checkpoint is leased, `lease_token` must be the lease's token (`LeaseHeld` otherwise).
        """
        index_pk = layout.checkpoint_index_pk(tenant_id, checkpoint_id)
        values: dict[str, Any] = {":index_pk": index_pk, ":now_s": ms_to_seconds(now_ms)}
        condition = f"#{schema.GSI1_PK} = :index_pk AND #{items.EXPIRES} > :now_s"
        condition += f" AND {lease_allows(lease_token, values)}"
        if only_agent is not None:
            values[":agent"] = layout.agent_checkpoints(only_agent)
            condition += f" AND begins_with(#{schema.SK}, :agent)"
        if if_match_revisions is not None:
            wanted = sorted(set(if_match_revisions)) or [-1]  # -1: a revision no checkpoint has
            names = [f":revision{i}" for i in range(len(wanted))]
            values.update(zip(names, wanted, strict=True))
            condition += f" AND #{items.REVISION} IN ({', '.join(names)})"
        with translated_errors():
            key = self._locate(tenant_id, checkpoint_id)
            if key is None:
                raise NotFound()
            try:
                self._client.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names_in(condition),
                    ExpressionAttributeValues={k: to_attr(v) for k, v in values.items()},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except Exception as exc:
                if may_have_landed(exc) and self._gone(key, index_pk):
                    return  # an attempt whose answer was lost deleted it
                refused = refusal(exc)
                if refused is None:
                    raise
                old = items.checkpoint_from_item(refused.item, with_state=False) if refused.found else None
                if old is None and refused.retried:
                    return  # the SDK's first attempt deleted it and its answer was lost; the retry found nothing
                if old is None or not old.is_visible_as(checkpoint_id, now_ms, only_agent):
                    raise NotFound() from None
                check_lease(old.lease, lease_token, now_ms)
                raise RevisionConflict(expected=if_match_revisions, current=old.revision, field="If-Match") from None

    def _gone(self, key: Item, index_pk: str) -> bool:
        """True when the slot at `key` no longer holds the checkpoint of `index_pk` (False when that cannot be read
        now)."""
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key=key,
                ConsistentRead=True,
                ProjectionExpression=f"#{schema.GSI1_PK}",
                ExpressionAttributeNames=names_in(f"#{schema.GSI1_PK}"),
            ).get("Item")
        except Exception:
            return False
        return item is None or item.get(schema.GSI1_PK, {}).get("S") != index_pk

    # -- list -----------------------------------------------------------------------------------------------

    def list_subject(
        self,
        tenant_id: str,
        subject_id: str,
        now_ms: int,
        agent_id: str | None,
        kind: str | None,
        status: str | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        """One page of a subject's live checkpoints, newest `updated_at` first.

        A subject's checkpoints share a partition: one Query (more only past 1 MB of them) reads their summaries,
        never the states, and they are ordered here. No index orders them by time, because such an index would
        delete and re-put its entry on every save; a page costs reading the subject's items instead (figures in
        bench/report.md). The cursor is the (updated, agent, kind) position of the last item shown.
        """
        binding = query_binding("subject", tenant_id, subject_id, agent_id, kind, status)
        after = read_position(decode_after(cursor, binding))
        key_condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        projection = ", ".join(f"#{name}" for name in items.SUMMARY)
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": key_condition,
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": names_in(key_condition, projection),
            "ExpressionAttributeValues": {
                ":pk": {"S": layout.checkpoint_pk(tenant_id, subject_id)},
                ":prefix": {"S": layout.agent_checkpoints(agent_id)},
            },
            "ConsistentRead": True,
        }
        with translated_errors():
            found = [items.checkpoint_from_item(item, with_state=False) for item in query(self._client, **request)]
        shown = sorted(
            (
                cp
                for cp in found
                if cp.is_live(now_ms)
                and (kind is None or cp.kind == kind)
                and (status is None or cp.status == status)
                and (after is None or list_position(cp) > after)
            ),
            key=list_position,
        )
        more = len(shown) > limit

        def cursor_after(cp: Checkpoint) -> str | None:
            return encode_after(write_position(list_position(cp)), binding)

        next_cursor = cursor_after(shown[limit - 1]) if more else None
        return Page(items=shown[:limit], next_cursor=next_cursor, cursor_after=cursor_after)


Position = tuple[int, str, str]


def list_position(cp: Checkpoint) -> Position:
    """Where a checkpoint stands in a listing: newest first, then by agent and kind."""
    return -cp.updated_ms, cp.agent_id, cp.kind


def write_position(position: Position) -> str:
    """A listing position as the text its cursor carries: `<updated ms>#<agent>#<kind>`."""
    updated, agent_id, kind = position
    return f"{-updated}#{agent_id}#{kind}"


def read_position(text: str | None) -> Position | None:
    """A cursor's position; one that was not written by `write_position` is refused naming `cursor`."""
    if text is None:
        return None
    updated, _, rest = text.partition("#")
    agent_id, _, kind = rest.partition("#")
    if not (updated.isascii() and updated.isdigit() and len(updated) <= 16 and agent_id and kind):
        raise invalid_cursor()
    return -int(updated), agent_id, kind
