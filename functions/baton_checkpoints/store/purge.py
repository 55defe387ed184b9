"""Purge: remove everything a subject holds in a tenant (checkpoints, revisions, leases with them, and the idempotency
records of the writes made to it), for every agent, live or expired.

Idempotency records come first. Their keys name the tenant, the agent and the key, not the subject, but each record
of a checkpoint write (a save, a restore, a lease acquire) is entered in gsi1 under its subject
(`items.subject_entry`): the purge pages through that index entry (a Query of at most 25 keys, then one
BatchWriteItem deleting their records), following the Query's own cursor (the index is eventually consistent: an
entry whose record was just deleted may still be listed for a moment, and starting again at the front could meet it
again). Deleting a record that is already gone is harmless, so a repeat simply starts over. Records go before the
checkpoints they answered so that, whenever a purge stops, no record is left answering a checkpoint that is gone: a
retry of a purged write is a new request (a save creates the checkpoint anew), never a replay of what was purged.

Then the subject's items, which share one partition (`layout.checkpoint_pk`): the purge pages through it by key, one
consistent Query of at most 25 keys, then one BatchWriteItem deleting them (25 is BatchWriteItem's limit), page
after page. No Scan, and no read of the items themselves: the reaper (the table's stream consumer) removes the
blobs and spilled states of each checkpoint item once it is gone, so deleting the items is the whole job. Each page
starts a new Query at the front of the partition: what the earlier pages deleted is gone (the read is consistent),
so the front is always what is left, and a purge interrupted anywhere (a deadline, a failure) is continued by simply
purging again.

What the index cannot show yet (a record written within its propagation delay, typically well under a second,
before the purge read it) outlives the purge; a write that close to a purge races it anyway.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Final

from msgspec import Struct

from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.dynamo import delete_some, query
from baton_checkpoints.store.errors import TRANSIENT, UNAVAILABLE_MESSAGE, classify, may_have_landed, translated_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PAGE_KEYS: Final = 25
"""Keys read and deleted per page: DynamoDB's limit on the requests of one BatchWriteItem."""
MAX_WRITE_ROUNDS: Final = 3
"""A page's BatchWriteItem is sent this many times in all while DynamoDB leaves some of its deletes unprocessed
(throttling), backing off between rounds (`dynamo.write_some`); past that the purge stops where it got to."""

_KEY_CONDITION: Final = f"#{schema.PK} = :pk"
_RECORDS_CONDITION: Final = f"#{schema.GSI1_PK} = :gpk"
_KEYS_ONLY: Final = f"#{schema.PK}, #{schema.SK}"


class Purged(Struct, frozen=True):
    """What one purge call did.

    `deleted_checkpoints` counts the checkpoint items (sort key `C#...`) this call deleted for certain: a page whose
    answer was lost may have deleted more, which a repeat then no longer finds. `complete` is True once the
    partition was seen empty; False when the call stopped early (its deadline, or a transient failure after some
    progress), and purging again continues.
    """

    deleted_checkpoints: int
    complete: bool


class SubjectPurger:
    """Deletes the idempotency records of a subject's writes, then every item of its partition, page by page."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def purge(self, tenant_id: str, subject_id: str, deadline: float) -> Purged:
        """Delete the idempotency records of the subject's writes, then every item of its partition, until both are
        done or `deadline` (a `time.monotonic()` value) has passed, checked before each page.

        A transient failure (throttling, a 5xx, no answer) answers 503 `Unavailable` when this call deleted nothing
        yet, and `complete=False` once it made progress: what was deleted stays deleted, and a repeat continues.
        Any other failure is a defect and is raised as it is.
        """
        records_done, progressed = self._purge_records(tenant_id, subject_id, deadline)
        if not records_done:
            return Purged(0, complete=False)
        return self._purge_partition(tenant_id, subject_id, deadline, progressed)

    def _purge_partition(self, tenant_id: str, subject_id: str, deadline: float, progressed: bool) -> Purged:
        """Delete the subject's partition page by page (see `purge`). `progressed`: the call deleted records already,
        so a transient failure answers `complete: false` rather than 503."""
        partition = layout.checkpoint_pk(tenant_id, subject_id)
        deleted_checkpoints = 0
        with translated_errors():
            while monotonic() < deadline:
                keys: list[Item] = []
                try:
                    keys, more = self._page(partition)
                    done = self._delete(keys) if keys else []
                except Exception as exc:
                    if keys and may_have_landed(exc):
                        # The deletes may have landed with their answer lost: what is gone now was deleted (a 503
                        # would claim nothing was).
                        gone = self._gone(partition, keys)
                        deleted_checkpoints += sum(1 for key in gone if _is_checkpoint(key))
                        progressed = progressed or bool(gone)
                    if progressed and classify(exc) in TRANSIENT:
                        return Purged(deleted_checkpoints, complete=False)
                    raise
                deleted_checkpoints += sum(1 for key in done if _is_checkpoint(key))
                progressed = progressed or bool(done)
                if len(done) < len(keys):
                    # DynamoDB kept refusing some deletes (throttling): stop here rather than press on.
                    if not progressed:
                        raise Unavailable(UNAVAILABLE_MESSAGE)
                    return Purged(deleted_checkpoints, complete=False)
                if not more:
                    return Purged(deleted_checkpoints, complete=True)
        return Purged(deleted_checkpoints, complete=False)

    def _purge_records(self, tenant_id: str, subject_id: str, deadline: float) -> tuple[bool, bool]:
        """Delete the idempotency records gsi1 lists under the subject, a page of the index at a time (see the
        module's docstring): (whether the index was read to its end, whether anything may have been deleted). A
        transient failure before any progress raises 503 `Unavailable`."""
        progressed = False
        pages = query(
            self._client,
            TableName=self._table,
            IndexName=schema.GSI1,
            KeyConditionExpression=_RECORDS_CONDITION,
            ProjectionExpression=_KEYS_ONLY,
            ExpressionAttributeNames=names_in(_RECORDS_CONDITION, _KEYS_ONLY),
            ExpressionAttributeValues={":gpk": {"S": layout.subject_records_pk(tenant_id, subject_id)}},
            Limit=PAGE_KEYS,
        )
        with translated_errors():
            while monotonic() < deadline:
                found: list[Item] = []
                keys: list[Item] = []
                try:
                    found = pages.next_page() or []
                    keys = [
                        layout.key(*layout.identity(item))
                        for item in found
                        if layout.identity(item)[1] == layout.IDEMPOTENCY_SK  # only records are entered there
                    ]
                    done = self._delete(keys) if keys else []
                except Exception as exc:
                    # Deleting records counts no checkpoint: whatever landed of a page whose answer was lost, a
                    # repeat deletes again (harmlessly), so nothing is read back here.
                    if (progressed or (keys and may_have_landed(exc))) and classify(exc) in TRANSIENT:
                        return False, True
                    raise
                progressed = progressed or bool(done)
                if len(done) < len(keys):
                    if not progressed:
                        raise Unavailable(UNAVAILABLE_MESSAGE)
                    return False, True
                # An empty page ends the index entry even if DynamoDB hands back a LastEvaluatedKey with it.
                if pages.finished or not found:
                    return True, progressed
        return False, progressed

    def _page(self, partition: str) -> tuple[list[Item], bool]:
        """The keys of the partition's first items (at most `PAGE_KEYS`, one consistent Query of the keys only),
        and whether more may follow them."""
        pages = query(
            self._client,
            TableName=self._table,
            KeyConditionExpression=_KEY_CONDITION,
            ProjectionExpression=_KEYS_ONLY,
            ExpressionAttributeNames=names_in(_KEY_CONDITION, _KEYS_ONLY),
            ExpressionAttributeValues={":pk": {"S": partition}},
            ConsistentRead=True,
            Limit=PAGE_KEYS,
        )
        keys = [layout.key(*layout.identity(item)) for item in pages.next_page() or []]
        # An empty page ends the partition even if DynamoDB hands back a LastEvaluatedKey with it.
        return keys, bool(keys) and not pages.finished

    def _gone(self, partition: str, keys: list[Item]) -> list[Item]:
        """Which of `keys` (the partition's first page) are no longer there: one consistent Query of the first
        page again; none when that cannot be read either."""
        try:
            still, _ = self._page(partition)
        except Exception:
            return []
        present = {layout.identity(key) for key in still}
        return [key for key in keys if layout.identity(key) not in present]

    def _delete(self, keys: list[Item]) -> list[Item]:
        """Delete `keys` with one BatchWriteItem, sending what DynamoDB leaves unprocessed again (`MAX_WRITE_ROUNDS`
        in all, backing off): the keys deleted, which are all of them unless some stayed unprocessed (or a resend
        failed transiently: what the earlier rounds deleted is reported, the rest left for a repeat)."""
        left = {layout.identity(key) for key in delete_some(self._client, self._table, keys, MAX_WRITE_ROUNDS)}
        return [key for key in keys if layout.identity(key) not in left]


def _is_checkpoint(key: Item) -> bool:
    """True for a checkpoint's key (revisions and anything else in the partition are not counted)."""
    return layout.identity(key)[1].startswith(layout.CHECKPOINT)
