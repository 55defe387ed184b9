"""Kept revisions: list a checkpoint's window of them, read one, and restore one as the checkpoint's next revision.

A save copies the revision it supersedes before it writes the checkpoint (`store/checkpoints.py`, with
`domain/history.py` saying what), and the reaper deletes what falls below the window; this repository reads them.
A revision is readable while its checkpoint is live, is the caller's to see, and holds the revision in its window
(`domain.history.window`); each read checks the checkpoint first, so a deleted or re-created checkpoint's revisions
are never shown, whatever the reaper has not removed yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, IdempotencyClaim, Page, SaveOutcome, SavePlan
from baton_checkpoints.domain.errors import IdempotencyKeyReused, NotFound, RevisionNotKept
from baton_checkpoints.domain.history import in_window, window
from baton_checkpoints.store import items, layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.batch import batch_get
from baton_checkpoints.store.checkpoints import CheckpointStore
from baton_checkpoints.store.cursors import decode_after, encode_after, invalid_cursor, query_binding
from baton_checkpoints.store.dynamo import query
from baton_checkpoints.store.errors import translated_errors
from baton_checkpoints.store.index import locate
from baton_checkpoints.store.objects import ObjectStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class HistoryStore:
    """Kept revisions of the checkpoints of one table (restores save through `checkpoints`)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        objects: ObjectStore | None,
        checkpoints: CheckpointStore,
    ) -> None:
        self._client = client
        self._table = table_name
        self._objects = objects
        self._checkpoints = checkpoints

    def get_revision(
        self, tenant_id: str, checkpoint_id: str, revision: int, now_ms: int, only_agent: str | None
    ) -> Checkpoint:
        """Kept revision `revision` of the live checkpoint with this id, with its state (one index Query, one
        consistent BatchGetItem of the checkpoint and the revision, and a GetObject when its state was spilled);
        NotFound when either is missing, expired, outside the window of kept revisions or not the caller's."""
        with translated_errors():
            current, raw, _ = self._checkpoint_and_revision(tenant_id, checkpoint_id, revision, now_ms, only_agent, [])
            return self._revision(raw, current, now_ms, only_agent)

    def _checkpoint_and_revision(
        self,
        tenant_id: str,
        checkpoint_id: str,
        revision: int,
        now_ms: int,
        only_agent: str | None,
        also: list[Item],
    ) -> tuple[Checkpoint, Item, dict[tuple[str, str], Item]]:
        """The live checkpoint with this id, the item of its kept revision `revision`, and what else was found: read
        together, with the items at `also`, in one consistent BatchGetItem."""
        key = locate(self._client, self._table, tenant_id, checkpoint_id)
        if key is None or not 1 <= revision <= limits.MAX_SAFE_INTEGER:
            raise NotFound()
        pk, sk = layout.identity(key)
        _, _, agent_id, kind, _ = layout.read_checkpoint_keys(pk, sk, "")
        revision_key = layout.key(pk, layout.revision_sk(agent_id, kind, checkpoint_id, revision))
        found = batch_get(self._client, self._table, [key, revision_key, *also])
        raw_checkpoint = found.get(layout.identity(key))
        current = items.checkpoint_from_item(raw_checkpoint, with_state=False) if raw_checkpoint else None
        if current is None or not current.is_visible_as(checkpoint_id, now_ms, only_agent):
            raise NotFound()
        raw_revision = found.get(layout.identity(revision_key))
        if (
            raw_revision is None
            or not in_window(current, revision)
            or not items.revision_from_item(raw_revision, current, with_state=False).is_live(now_ms)
        ):
            # The checkpoint is the caller's to see, and so is the list of its kept revisions: say which they are.
            raise RevisionNotKept(revision, window(current), current.revision)
        return current, raw_revision, found

    def _revision(self, raw: Item, current: Checkpoint, now_ms: int, only_agent: str | None) -> Checkpoint:
        """A kept revision with its state, read from the bucket when it was spilled (one GetObject).

        A missing object means that the revision was pruned since it was read (a later save moved the window past
        it, and the reaper deleted its state before its item): a 404, once a second read shows it out of the window.
        A revision still kept whose object is missing is a defect (the object was deleted behind its item): a 503 and
        one ERROR line (`ObjectStore.missing_state`), never a 500."""
        key = items.state_object_of(raw)
        if key is None:
            return items.revision_from_item(raw, current)
        if self._objects is None:
            raise RuntimeError(f"the state of this revision is in the object {key!r}, and no bucket is configured")
        spilled = self._objects.get(key)
        if spilled is not None:
            return items.revision_from_item(raw, current, spilled=spilled)
        number = int(raw[items.REVISION]["N"])
        if self._still_kept(current, number, key, now_ms, only_agent):
            raise self._objects.missing_state(key, checkpoint_id=current.checkpoint_id, revision=number)
        raise NotFound()

    def _still_kept(self, current: Checkpoint, number: int, key: str, now_ms: int, only_agent: str | None) -> bool:
        """True when revision `number` of `current` is still readable and still names the object `key` (one
        consistent BatchGetItem of the checkpoint and the revision)."""
        checkpoint_key = layout.checkpoint_key(current.tenant_id, current.subject_id, current.agent_id, current.kind)
        revision_key = items.revision_key(current, number)
        found = batch_get(self._client, self._table, [checkpoint_key, revision_key])
        raw_checkpoint = found.get(layout.identity(checkpoint_key))
        now = items.checkpoint_from_item(raw_checkpoint, with_state=False) if raw_checkpoint else None
        if (
            now is None
            or not now.is_visible_as(current.checkpoint_id, now_ms, only_agent)
            or not in_window(now, number)
        ):
            return False
        raw_revision = found.get(layout.identity(revision_key))
        return raw_revision is not None and items.state_object_of(raw_revision) == key

    def list_revisions(
        self,
        tenant_id: str,
        checkpoint_id: str,
        now_ms: int,
        only_agent: str | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        """One page of the live checkpoint's kept revisions as summaries, newest first: one index Query, one
        consistent GetItem of the checkpoint (no state), and one Query of the window of kept revisions (more only
        while expired revisions leave the page short)."""
        binding = query_binding("revisions", tenant_id, checkpoint_id)
        after = decode_after(cursor, binding)
        if after is not None and not (after.isascii() and after.isdigit() and len(after) <= layout.REVISION_DIGITS):
            raise invalid_cursor()
        with translated_errors():
            key = locate(self._client, self._table, tenant_id, checkpoint_id)
            if key is None:
                raise NotFound()
            projection = ", ".join(f"#{name}" for name in items.SUMMARY)
            raw = self._client.get_item(
                TableName=self._table,
                Key=key,
                ConsistentRead=True,
                ProjectionExpression=projection,
                ExpressionAttributeNames=names_in(projection),
            ).get("Item")
            current = items.checkpoint_from_item(raw, with_state=False) if raw else None
            if current is None or not current.is_visible_as(checkpoint_id, now_ms, only_agent):
                raise NotFound()
            readable = window(current)
            high = readable.stop - 1 if after is None else min(readable.stop - 1, int(after) - 1)
            shown: list[Checkpoint] = []
            more = False
            if readable and high >= readable.start:
                shown, more = self._revisions_between(current, readable.start, high, now_ms, limit)

        def cursor_after(cp: Checkpoint) -> str | None:
            return encode_after(str(cp.revision), binding)

        next_cursor = cursor_after(shown[-1]) if more and shown else None
        return Page(items=shown, next_cursor=next_cursor, cursor_after=cursor_after)

    def _revisions_between(
        self, current: Checkpoint, low: int, high: int, now_ms: int, limit: int
    ) -> tuple[list[Checkpoint], bool]:
        """Up to `limit` live kept revisions numbered `low`..`high`, newest first, and whether more follow."""
        pk = layout.checkpoint_pk(current.tenant_id, current.subject_id)
        condition = f"#{schema.PK} = :pk AND #{schema.SK} BETWEEN :low AND :high"
        projection = ", ".join(f"#{name}" for name in items.REVISION_SUMMARY)
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": names_in(condition, projection),
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":low": {"S": layout.revision_sk(current.agent_id, current.kind, current.checkpoint_id, low)},
                ":high": {"S": layout.revision_sk(current.agent_id, current.kind, current.checkpoint_id, high)},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit + 1,
        }
        shown: list[Checkpoint] = []
        for item in query(self._client, **request):
            revision = items.revision_from_item(item, current, with_state=False)
            if revision.is_live(now_ms):
                if len(shown) == limit:
                    return shown, True  # no further Query: one live revision past the page is all it needs
                shown.append(revision)
        return shown, False

    def restore(
        self,
        tenant_id: str,
        checkpoint_id: str,
        revision: int,
        plan_of: Callable[[Checkpoint, Checkpoint], SavePlan],
        now_ms: int,
        only_agent: str | None,
        claim: IdempotencyClaim | None = None,
    ) -> SaveOutcome:
        """Write kept revision `revision`'s state as the checkpoint's next revision (never a rewind). `plan_of`
        turns (the checkpoint, the revision with its state) into the save's plan. One index Query, one consistent
        BatchGetItem (the checkpoint, the revision, the idempotency record), then the history save's transaction,
        conditioned on that same read (a second BatchGetItem only when the revision names blobs, or on a retry)."""
        with translated_errors():
            record_key = None if claim is None else layout.idempotency_key(tenant_id, claim.agent_id, claim.key)
            try:
                current, raw, found = self._checkpoint_and_revision(
                    tenant_id, checkpoint_id, revision, now_ms, only_agent, [record_key] if record_key else []
                )
            except NotFound:
                if record_key is not None and claim is not None:
                    # A replay is decided before the state checks: the first restore may have pruned this revision.
                    replay = self._replay(record_key, claim, now_ms)
                    if replay is not None:
                        return replay
                raise
            plan = plan_of(current, self._revision(raw, current, now_ms, only_agent))
        # The save's transaction replays the key's first answer from `found`, where the record was read.
        return self._checkpoints.save_restored(plan, claim, found)

    def _replay(self, record_key: Item, claim: IdempotencyClaim, now_ms: int) -> SaveOutcome | None:
        """The first answer to `claim`'s key if its record is there and still remembered (one consistent GetItem)."""
        raw = self._client.get_item(TableName=self._table, Key=record_key, ConsistentRead=True).get("Item")
        if raw is None:
            return None
        record = items.record_from_item(cast(Item, raw))
        if record.expires_ms <= now_ms:
            return None
        if record.fingerprint != claim.fingerprint or record.saved is None:
            raise IdempotencyKeyReused()
        return SaveOutcome(record.saved, replayed=True)
