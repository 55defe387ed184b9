"""The reaper: keeps the bucket in step with the table, one DynamoDB stream record at a time.

The table's stream carries each write's old and new images. What a checkpoint item references in the bucket is its
spilled state (`so`, an object key) and the blobs its resources name (`rb`, and each `res` map's `blob_id`). A record
asks for two things (`work_of`, pure):

- objects the new image references and the old did not are retagged `attached` (they were written `pending`, and a
  lifecycle rule expires what stays pending);
- objects the old image referenced and the new does not are deleted: a spilled state at once (every write spills to
  a new key, so no later write can name it again), a blob only once the checkpoint as it is NOW does not hold it
  again (`still_holds`): a later save may have attached it again before the record got here.

A blob's record and object go together, record first (`store/attachments.py` tells the save's side): the reaper reads
the blob's record (its owner and claim), then the checkpoint, and, when the checkpoint no longer holds the blob,
deletes the record on the condition that the owner and the claim are still those it read, and only then the object.
A save that attaches the blob again writes a new claim in the same transaction as the checkpoint, so either the
reaper read the checkpoint after that save (and keeps the blob), or its delete fails (and it keeps the blob), or it
deleted the record first (and the save, which needs the record, is refused). Deleting the object first could leave a
checkpoint holding a blob whose bytes are gone. A blob whose record is already gone (a retry, a duplicate) has its
object deleted: nothing can attach a blob without its record.

A blob record removed while unattached (an upload never attached, its record expired by TTL) has its object deleted;
an attached blob's record is removed by the reaper itself, which deleted the object already.

Kept revisions (items at `V#...` in the checkpoint's partition) reference objects too: a save that keeps a revision
copies the superseded item, its state's object (and blobs) included, to the revision's item before it writes the
checkpoint. So before a state or blob is let go, the checkpoint's kept revisions are read as well (one Query of its
slot, after the checkpoint: a revision only ever receives what its checkpoint held at that moment, and a restore
spills its state anew and claims its blobs again); a revision removed (pruned, expired, purged) lets go of what it
referenced the same way. The reaper is what prunes: a save only raises its checkpoint's `revisions_from` with the
window, and the record of that save deletes the revisions below it. When a checkpoint is removed (deleted, expired,
purged) or replaced by a new one after expiry, its revisions are deleted (their own removal then lets go of their
objects).

LangGraph threads (`H#...` partitions) have rules of their own, in `store/thread_reaping.py`: the records of a thread's
head, checkpoints, values and write values come here, which does their bucket work (the same retag and delete, the
same tenant guard) and hands their table work to it.

Every step is idempotent (a missing object is deleted or retagged as a no-op), so a record delivered twice does the
same and nothing more. Any other AWS failure raises, and the batch reports that record failed: Lambda retries it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Union

from msgspec import Struct, field

from baton_checkpoints.domain.ids import BLOB_ID_PATTERN
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, names_in, to_attr
from baton_checkpoints.store.dynamo import Refused, attempt, delete_all, query
from baton_checkpoints.store.errors import error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import TaggingTypeDef

    from baton_checkpoints.store.thread_reaping import ThreadChange

# The attributes the reaper reads, named as `store/items.py` names them (a unit test holds them equal). Not imported
# from there: `items` maps whole checkpoints and loads the domain's pydantic models, which would double the cold start
# of a function that needs five names.
STATE_OBJECT: Final = "so"
RESOURCES: Final = "res"
RESOURCE_BLOBS: Final = "rb"
OWNER_PK: Final = "op"
OWNER_SK: Final = "os"
CLAIM: Final = "cr"
REVISIONS_FROM: Final = "vf"
REVISION: Final = "rev"
KEEP: Final = "keep"
INDEX_PK: Final = "gpk"
REVISION_PAGE: Final = 25
"""Revisions deleted per BatchWriteItem (DynamoDB's limit)."""

INSERT: Final = "INSERT"
MODIFY: Final = "MODIFY"
REMOVE: Final = "REMOVE"
STREAM_EVENT_NAMES: Final = (INSERT, MODIFY, REMOVE)
STREAM_ITEM_PREFIXES: Final = (layout.CHECKPOINT_PK_PREFIX, layout.BLOB_PK_PREFIX, layout.THREAD_PK_PREFIX)
"""The stream records the reaper acts on (the deployed event source's filter, and `baton serve`'s): only checkpoint,
blob and thread records can reference objects or leave items behind (keys, idempotency records: never)."""

MISSING_OBJECT_CODES: Final = frozenset({"NoSuchKey", "404", "NotFound"})
"""What S3 answers a request on an object that is not there (a later write already dropped it)."""

ATTACHED_TAGGING: Final[TaggingTypeDef] = {"TagSet": [{"Key": schema.ATTACHED_TAG[0], "Value": schema.ATTACHED_TAG[1]}]}
"""The tag set of an object a checkpoint references: replaces the pending tag the object was written with."""

CURRENT_CHECKPOINT_ATTRIBUTES: Final = (RESOURCE_BLOBS, RESOURCES, STATE_OBJECT)
"""What the reaper reads of a checkpoint as it is now (`still_holds`, `state_of`): the blobs it holds and the key of its
spilled state, nothing of the state itself."""
_CURRENT_PROJECTION: Final = ", ".join(f"#{name}" for name in CURRENT_CHECKPOINT_ATTRIBUTES)
_BLOB_PROJECTION: Final = f"#{OWNER_PK}, #{OWNER_SK}, #{CLAIM}"
_STILL_CLAIMED: Final = f"#{OWNER_PK} = :owner_pk AND #{OWNER_SK} = :owner_sk AND #{CLAIM} = :claim"
_STILL_CLAIMED_UNTAGGED: Final = (
    f"#{OWNER_PK} = :owner_pk AND #{OWNER_SK} = :owner_sk AND attribute_not_exists(#{CLAIM})"
)


# -- the rules (pure) -------------------------------------------------------------------------------------------


class References(Struct, frozen=True):
    """What one checkpoint image references in the bucket."""

    states: frozenset[str] = frozenset()
    """Object keys of spilled states (at most one per image)."""
    blobs: frozenset[str] = frozenset()
    """Ids of the blobs its resources name."""


NOTHING: Final = References()


def references_of(image: Item | None, tenant_id: str) -> References:
    """The objects a checkpoint image (DynamoDB's typed form, as the stream carries it) references.

    Only what lies in the tenant's own prefix counts: a state key outside `blobs/<tenant>/states/` or a blob id that
    is not a blob id is ignored, so no record can make the reaper touch another tenant's objects (the store never
    writes such an item; this is the reaper's own guard).
    """
    if not image:
        return NOTHING
    states: set[str] = set()
    state = image.get(STATE_OBJECT, {}).get("S")
    if isinstance(state, str) and _is_state_object(state, tenant_id):
        states.add(state)
    return References(frozenset(states), frozenset(b for b in _named_blobs(image) if BLOB_ID_PATTERN.match(b)))


def _is_state_object(key: str, tenant_id: str) -> bool:
    """True when `key` names a spilled state of this tenant (one object directly in its states folder)."""
    folder = layout.state_object(tenant_id, "")
    name = key.removeprefix(folder)
    return key.startswith(folder) and bool(name) and "/" not in name


class CheckpointChange(Struct, frozen=True):
    """What a checkpoint record asks for: objects to retag attached, states and blobs to let go of."""

    tenant_id: str
    key: Item
    """The checkpoint's table key (typed), which the current item is read at and which owns its blobs."""
    attach: tuple[str, ...] = ()
    """Object keys (states and blobs) the new image references and the old did not."""
    drop_states: tuple[str, ...] = ()
    """Object keys of spilled states the old image referenced and the new does not: deleted at once."""
    drop_blobs: tuple[str, ...] = ()
    """Ids of blobs the old image held and the new does not: deleted unless the checkpoint holds them again."""
    revisions: str | None = None
    """The sort-key prefix of the slot's kept revisions, when they may hold what is dropped (None: none stored)."""
    orphaned: str | None = None
    """The sort-key prefix of revisions whose checkpoint is gone (removed, or replaced by a new id): deleted."""
    pruned: tuple[str, str] | None = None
    """The first and last sort keys of revisions that fell below the checkpoint's window (never readable again):
    deleted."""

    @property
    def owner(self) -> tuple[str, str]:
        """(pk, sk) of the checkpoint: what a blob record's owner (`op`, `os`) holds when it belongs to it."""
        return layout.identity(self.key)


class UnattachedBlobRemoved(Struct, frozen=True):
    """A blob record removed while no checkpoint held it (its upload expired unattached): its object goes too."""

    object_key: str


class Ignored(Struct, frozen=True):
    """A record that asks for nothing, and why (for the log)."""

    reason: str


# A string for the thread rules' class: `thread_reaping` is loaded by the first thread record, not at import.
Work = Union[CheckpointChange, UnattachedBlobRemoved, "ThreadChange", Ignored]


def work_of(record: Mapping[str, Any]) -> Work:
    """What one DynamoDB stream record (Lambda's event form, NEW_AND_OLD_IMAGES) asks the reaper to do."""
    event_name = record.get("eventName")
    change = record.get("dynamodb") or {}
    keys = change.get("Keys") or {}
    pk = keys.get(schema.PK, {}).get("S")
    sk = keys.get(schema.SK, {}).get("S")
    if event_name not in (INSERT, MODIFY, REMOVE):
        return Ignored(f"event {event_name!r}")
    if not isinstance(pk, str) or not isinstance(sk, str):
        return Ignored("no table key")
    old, new = change.get("OldImage"), change.get("NewImage")
    if pk.startswith(layout.CHECKPOINT_PK_PREFIX) and sk.startswith(layout.REVISION):
        return _revision_change(event_name, pk, sk, old)
    if pk.startswith(layout.CHECKPOINT_PK_PREFIX):
        return _checkpoint_change(pk, sk, old, new)
    if pk.startswith(layout.BLOB_PK_PREFIX):
        return _blob_record_change(event_name, pk, old)
    if pk.startswith(layout.THREAD_PK_PREFIX) and pk.count("#") >= 3:
        # Loaded by the first thread record: the cold start of a reaper that sees none stays what it was.
        from baton_checkpoints.store.thread_reaping import thread_work_of

        return thread_work_of(event_name, pk, sk, old, new) or Ignored("a thread record that asks for nothing")
    return Ignored("not a checkpoint, blob or thread record")


def _checkpoint_change(pk: str, sk: str, old: Item | None, new: Item | None) -> CheckpointChange:
    # An INSERT has no old image and a REMOVE no new one: the same difference serves all three events.
    tenant_id = layout.read_checkpoint_keys(pk, sk, "")[0]
    before, after = references_of(old, tenant_id), references_of(new, tenant_id)
    attach = sorted(after.states - before.states) + sorted(
        layout.blob_object(tenant_id, blob_id) for blob_id in after.blobs - before.blobs
    )
    agent_id, _, kind = sk.removeprefix(layout.CHECKPOINT).partition("#")
    kept = _may_hold_revisions(old) or _may_hold_revisions(new)
    old_id = (old or {}).get(INDEX_PK, {}).get("S")
    new_id = (new or {}).get(INDEX_PK, {}).get("S")
    gone = isinstance(old_id, str) and old_id != new_id and _may_hold_revisions(old)
    pruned = None
    if old is not None and new is not None and isinstance(old_id, str) and old_id == new_id:
        low = _window_low(new)
        if REVISIONS_FROM in old and low > _number(old, REVISIONS_FROM):
            checkpoint_id = old_id.rpartition("#")[2]
            pruned = (
                layout.revision_sk(agent_id, kind, checkpoint_id, 1),
                layout.revision_sk(agent_id, kind, checkpoint_id, low - 1),
            )
    return CheckpointChange(
        tenant_id=tenant_id,
        key=layout.key(pk, sk),
        attach=tuple(attach),
        drop_states=tuple(sorted(before.states - after.states)),
        drop_blobs=tuple(sorted(before.blobs - after.blobs)),
        revisions=layout.revisions_prefix(agent_id, kind) if kept else None,
        orphaned=layout.revisions_prefix(agent_id, kind, old_id.rpartition("#")[2]) if gone and old_id else None,
        pruned=pruned,
    )


def _may_hold_revisions(image: Item | None) -> bool:
    """True when revisions of this checkpoint may be stored: its image shows some kept (`vf`), or it keeps revisions
    (`keep` > 0), whose first save puts a copy before it sets `vf` (and a save that failed after its copy left it)."""
    if image is None:
        return False
    return REVISIONS_FROM in image or int(image.get(KEEP, {}).get("N", "0")) > 0


def _number(image: Item, name: str) -> int:
    return int(image[name]["N"])


def _window_low(image: Item) -> int:
    """The lowest revision number a checkpoint's image can still show: its `revisions_from`, or, with no revision
    kept, its own revision (a copy of it, made by a save that did not land, may still come to be kept)."""
    return _number(image, REVISIONS_FROM) if REVISIONS_FROM in image else _number(image, REVISION)


def _revision_change(event_name: str, pk: str, sk: str, old: Item | None) -> Work:
    """A kept revision written asks for nothing (what it references was attached as its checkpoint's); one removed
    lets go of what it referenced, unless its checkpoint or another kept revision still holds it."""
    if event_name != REMOVE:
        return Ignored("a kept revision written")
    if old is None:
        return Ignored("a kept revision removed without its old image")
    tenant_id = layout.read_checkpoint_keys(pk, "", "")[0]
    agent_id, kind, _, _ = layout.read_revision_sk(sk)
    before = references_of(old, tenant_id)
    return CheckpointChange(
        tenant_id=tenant_id,
        key=layout.key(pk, layout.checkpoint_sk(agent_id, kind)),
        drop_states=tuple(sorted(before.states)),
        drop_blobs=tuple(sorted(before.blobs)),
        revisions=layout.revisions_prefix(agent_id, kind),
    )


def _blob_record_change(event_name: str, pk: str, old: Item | None) -> Work:
    if event_name != REMOVE:
        return Ignored("a blob record written")
    if old is None:
        return Ignored("a blob record removed without its old image")  # its owner is unknown: touch nothing
    if OWNER_PK in old:
        return Ignored("an attached blob's record removed (its checkpoint's records drive the blob)")
    tenant_id, blob_id = layout.read_blob_key(pk)
    if not BLOB_ID_PATTERN.match(blob_id):
        return Ignored("not a blob id")
    return UnattachedBlobRemoved(layout.blob_object(tenant_id, blob_id))


def _named_blobs(item: Item) -> set[str]:
    """The blob ids a checkpoint item names: its `rb` set and each `res` map's `blob_id` (the same ids when the
    store wrote the item; both are read so that neither alone decides what gets deleted)."""
    named: set[str] = set(item.get(RESOURCE_BLOBS, {}).get("SS", ()))
    for resource in item.get(RESOURCES, {}).get("L", ()):
        blob_id = resource.get("M", {}).get("blob_id", {}).get("S")
        if isinstance(blob_id, str):
            named.add(blob_id)
    return named


def state_of(item: Item | None) -> str | None:
    """The key of the object holding a checkpoint item's spilled state, if any."""
    found = (item or {}).get(STATE_OBJECT, {}).get("S")
    return found if isinstance(found, str) else None


def holds(item: Item | None, blob_id: str) -> bool:
    """True when a checkpoint item (typed) names the blob among its resources."""
    return bool(item) and blob_id in _named_blobs(item or {})


def still_holds(current: Item | None, kept: References, blob_id: str) -> bool:
    """The one place that decides whether a checkpoint, as it is now, still holds a blob its old image named: its
    current item names it, or one of its kept revisions does (`kept`)."""
    return holds(current, blob_id) or blob_id in kept.blobs


# -- the work (S3 and DynamoDB) ---------------------------------------------------------------------------------


class Outcome(Struct):
    """What the reaper did for one record (for the log line and the tests)."""

    retagged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    """Object keys deleted (states and blobs; a delete of an object already gone counts: S3 cannot tell)."""
    missing: list[str] = field(default_factory=list)
    """Object keys to retag that were gone already (a later write dropped them)."""
    released: list[str] = field(default_factory=list)
    """Blob ids whose record was deleted (or found deleted) and whose object was deleted."""
    kept: list[str] = field(default_factory=list)
    """Blob ids the checkpoint holds again, or another claim holds: left alone."""
    revisions_deleted: int = 0
    """Kept revisions deleted because their checkpoint is gone or they fell below its window."""
    thread_items_deleted: int = 0
    """Items of threads deleted: a generation that ended, write values their checkpoint let go of."""


class Reaper:
    """Applies what stream records ask for to the bucket and the table.

    Each client is made by the first record that needs it: most checkpoint writes hold their state inline and name
    no blob, and a batch of those needs neither (creating the two clients costs more than the rest of a cold start).
    """

    def __init__(
        self,
        dynamodb: Callable[[], DynamoDBClient],
        s3: Callable[[], S3Client],
        table_name: str,
        bucket: str,
    ) -> None:
        self._make_dynamodb = dynamodb
        self._make_s3 = s3
        self._dynamodb_client: DynamoDBClient | None = None
        self._s3_client: S3Client | None = None
        self._table = table_name
        self._bucket = bucket

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client, created by the first call that needs it."""
        if self._dynamodb_client is None:
            self._dynamodb_client = self._make_dynamodb()
        return self._dynamodb_client

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table

    @property
    def s3(self) -> S3Client:
        """The S3 client, created by the first call that needs it."""
        if self._s3_client is None:
            self._s3_client = self._make_s3()
        return self._s3_client

    def reap(self, record: Mapping[str, Any], deadline: float | None = None) -> Outcome:
        """Do what one stream record asks; raises on an AWS failure (the record is then retried whole), and when
        its work passes `deadline` (`time.monotonic()`; None: no limit), `thread_reaping.Unfinished`."""
        work = work_of(record)
        outcome = Outcome()
        if isinstance(work, Ignored):
            pass
        elif isinstance(work, UnattachedBlobRemoved):
            self._delete_object(work.object_key, outcome)
        elif isinstance(work, CheckpointChange):
            for key in work.attach:
                self._retag(key, outcome)
            if work.drop_states or work.drop_blobs:
                # Every blob record is read before the checkpoint: a save that claims a blob again after its record
                # was read changes the claim (the delete below then fails); one that claimed it before also wrote
                # the checkpoint before it is read here. Then the checkpoint as it is now, then its kept revisions
                # (a revision only receives what its checkpoint held): read once, for the states and the blobs.
                claims = {blob_id: self._blob_record(work, blob_id) for blob_id in work.drop_blobs}
                needed = bool(work.drop_states) or any(record is not None for record in claims.values())
                current = self._current(work) if needed else None
                kept = self._kept(work) if needed else NOTHING
                # Normally a dropped state's key is never named again; but a save whose answer was lost and that was
                # retried after the checkpoint was deleted re-creates the item with the same key, and a save that
                # keeps a revision moves the key to the revision's item.
                for key in work.drop_states:
                    if state_of(current) == key or key in kept.states:
                        outcome.kept.append(key)
                    else:
                        self._delete_object(key, outcome)
                self._release_blobs(work, claims, current, kept, outcome)
            if work.orphaned is not None:
                self._delete_revisions(work, _starting(work.orphaned), outcome)
            if work.pruned is not None:
                self._delete_revisions(work, work.pruned, outcome)
        else:
            self._reap_thread(work, outcome, deadline)
        return outcome

    def _reap_thread(self, change: ThreadChange, outcome: Outcome, deadline: float | None) -> None:
        """A thread record: its objects here, its items by `thread_reaping.ThreadItems`."""
        from baton_checkpoints.store.thread_reaping import ThreadItems

        for key in change.attach:
            self._retag(key, outcome)
        for key in change.drop_objects:
            self._delete_object(key, outcome)  # each value item writes a new object: no other item names it
        if change.drop_writes or change.generation is not None or change.floor_ms is not None:
            items = ThreadItems(self.dynamodb, self._table, deadline)
            try:
                items.apply(change)
            finally:
                outcome.thread_items_deleted += items.deleted

    def _kept(self, change: CheckpointChange) -> References:
        """What the slot's kept revisions reference now (one consistent Query of their keys and references; none
        when no revision can be stored)."""
        if change.revisions is None:
            return NOTHING
        pk, _ = change.owner
        condition = "#pk = :pk AND begins_with(#sk, :prefix)"
        projection = f"#sk, #{STATE_OBJECT}, #{RESOURCE_BLOBS}, #{RESOURCES}"
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": {"#pk": schema.PK, **names_in(projection)},
            "ExpressionAttributeValues": {":pk": to_attr(pk), ":prefix": to_attr(change.revisions)},
            "ConsistentRead": True,
        }
        states: set[str] = set()
        blobs: set[str] = set()
        for item in query(self.dynamodb, **request):
            sk = item.get(schema.SK, {}).get("S", "")
            if change.orphaned is not None and sk.startswith(change.orphaned):
                continue  # a gone checkpoint's revision, which this record deletes: it holds nothing any more
            if change.pruned is not None and change.pruned[0] <= sk <= change.pruned[1]:
                continue  # below the window, which this record deletes: never readable again
            found = references_of(dict(item), change.tenant_id)
            states |= found.states
            blobs |= found.blobs
        return References(frozenset(states), frozenset(blobs))

    def _delete_revisions(self, change: CheckpointChange, between: tuple[str, str], outcome: Outcome) -> None:
        """Delete the revisions whose sort keys are `between` these two (of a checkpoint that is gone, or below its
        window), a page of keys at a time: one BatchWriteItem each (`delete_all`: what DynamoDB leaves unprocessed is
        sent again, then `Unavailable` is raised and the record retried)."""
        pk, _ = change.owner
        pages = query(
            self.dynamodb,
            TableName=self._table,
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :low AND :high",
            ProjectionExpression="#pk, #sk",
            ExpressionAttributeNames={"#pk": schema.PK, "#sk": schema.SK},
            ExpressionAttributeValues={":pk": to_attr(pk), ":low": to_attr(between[0]), ":high": to_attr(between[1])},
            ConsistentRead=True,
            Limit=REVISION_PAGE,
        )
        for keys in pages.pages():
            if keys:
                delete_all(self.dynamodb, self._table, keys)
                outcome.revisions_deleted += len(keys)

    def _retag(self, key: str, outcome: Outcome) -> None:
        try:
            self.s3.put_object_tagging(Bucket=self._bucket, Key=key, Tagging=ATTACHED_TAGGING)
        except Exception as exc:
            if error_code(exc) not in MISSING_OBJECT_CODES:
                raise
            outcome.missing.append(key)
            return
        outcome.retagged.append(key)

    def _delete_object(self, key: str, outcome: Outcome) -> None:
        self.s3.delete_object(Bucket=self._bucket, Key=key)  # S3 answers 204 for a key that is not there
        outcome.deleted.append(key)

    def _release_blobs(
        self,
        change: CheckpointChange,
        claims: dict[str, Item | None],
        current: Item | None,
        kept: References,
        outcome: Outcome,
    ) -> None:
        """Let go of the dropped blobs (`claims`: each one's record as read first) that neither the checkpoint as
        it is now (`current`) nor its kept revisions (`kept`) hold."""
        for blob_id, record in claims.items():
            if record is None:
                # Its record is gone (this record's earlier try, or a duplicate, deleted it): only the object is left.
                self._delete_blob_object(change, blob_id, outcome)
            elif not _owned_by(record, change) or still_holds(current, kept, blob_id):
                outcome.kept.append(blob_id)
            elif self._delete_blob_record(change, blob_id, record):
                self._delete_blob_object(change, blob_id, outcome)
            else:
                outcome.kept.append(blob_id)

    def _blob_record(self, change: CheckpointChange, blob_id: str) -> Item | None:
        """A blob's record, owner and claim only (consistent: it must see a claim written just before)."""
        found = self.dynamodb.get_item(
            TableName=self._table,
            Key=layout.blob_key(change.tenant_id, blob_id),
            ConsistentRead=True,
            ProjectionExpression=_BLOB_PROJECTION,
            ExpressionAttributeNames=names_in(_BLOB_PROJECTION),
        ).get("Item")
        return None if found is None else dict(found)

    def _current(self, change: CheckpointChange) -> Item | None:
        """The checkpoint as it is now (consistent), what `still_holds` needs of it only."""
        found = self.dynamodb.get_item(
            TableName=self._table,
            Key=change.key,
            ConsistentRead=True,
            ProjectionExpression=_CURRENT_PROJECTION,
            ExpressionAttributeNames=names_in(_CURRENT_PROJECTION),
        ).get("Item")
        return None if found is None else dict(found)

    def _delete_blob_record(self, change: CheckpointChange, blob_id: str, record: Item) -> bool:
        """Delete a blob's record while it still belongs to this checkpoint under the claim read. True when the record
        is gone (deleted now, or by another delivery meanwhile): its object is no one's; False when a save claimed
        the blob since."""
        owner_pk, owner_sk = change.owner
        claim = record.get(CLAIM)
        condition = _STILL_CLAIMED if claim is not None else _STILL_CLAIMED_UNTAGGED
        values = {":owner_pk": to_attr(owner_pk), ":owner_sk": to_attr(owner_sk)}
        if claim is not None:
            values[":claim"] = claim
        answer = attempt(
            self.dynamodb.delete_item,
            TableName=self._table,
            Key=layout.blob_key(change.tenant_id, blob_id),
            ConditionExpression=condition,
            ExpressionAttributeNames=names_in(condition),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(answer, Refused):
            # Gone since it was read (a concurrent duplicate): the object is no longer anyone's either.
            return not answer.found
        return True

    def _delete_blob_object(self, change: CheckpointChange, blob_id: str, outcome: Outcome) -> None:
        self._delete_object(layout.blob_object(change.tenant_id, blob_id), outcome)
        outcome.released.append(blob_id)


def _starting(prefix: str) -> tuple[str, str]:
    """The first and last sort keys of revisions at `prefix` (their numbers are digits)."""
    return prefix + "0" * layout.REVISION_DIGITS, prefix + "9" * layout.REVISION_DIGITS


def _owned_by(record: Item, change: CheckpointChange) -> bool:
    """True when a blob record's owner is the checkpoint of `change`."""
    owner = record.get(OWNER_PK, {}).get("S"), record.get(OWNER_SK, {}).get("S")
    return owner == change.owner
