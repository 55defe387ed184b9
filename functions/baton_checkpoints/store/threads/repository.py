"""The thread repository: LangGraph checkpoints, their channel values and pending writes in one partition per thread
(the package's docstring says what its items are). `ThreadStore` is what the routes hold; each job is a module of its
own (`heads`, `writes`, `reads`, `upkeep`), and each request names its thread by one `ThreadRef`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from baton_checkpoints.domain.thread_puts import PutPlan, ThreadRef, WritesPlan
from baton_checkpoints.domain.threads import Page, PutResult, ThreadCheckpoint
from baton_checkpoints.store.threads.heads import Heads, pk_of
from baton_checkpoints.store.threads.items import Head
from baton_checkpoints.store.threads.reads import Reader
from baton_checkpoints.store.threads.upkeep import Pruned, Quota, Upkeep
from baton_checkpoints.store.threads.writes import Writer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.store.blobs import BlobStore
    from baton_checkpoints.store.objects import ObjectStore


class ThreadStore:
    """LangGraph threads in one DynamoDB table (and the bucket, for values too large for an item)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None, blobs: BlobStore | None = None
    ) -> None:
        self._heads = Heads(client, table_name)
        self._writer = Writer(client, table_name, objects, blobs, self._heads)
        self._reader = Reader(client, table_name, objects, self._heads)
        self._upkeep = Upkeep(client, table_name, objects, self._heads, self._reader)

    def put(self, plan: PutPlan) -> PutResult:
        """Store one checkpoint (`Writer.put`)."""
        return self._writer.put(plan)

    def put_writes(self, plan: WritesPlan) -> int:
        """Keep a task's pending writes on its checkpoint (`Writer.put_writes`); the count of writes kept."""
        return self._writer.put_writes(plan)

    def forget(self) -> None:
        """Forget what this container remembers of the checkpoints it stored, as another container would."""
        self._writer.forget()

    def head(self, ref: ThreadRef, now_ms: int) -> Head | None:
        """The thread's head when the thread is live, else None."""
        return self._heads.read(ref, now_ms)

    def get(self, ref: ThreadRef, namespace: str, checkpoint_id: str | None, now_ms: int) -> ThreadCheckpoint:
        """One checkpoint with its values and pending writes (`Reader.get`)."""
        return self._reader.get(ref, namespace, checkpoint_id, now_ms)

    def page(
        self,
        ref: ThreadRef,
        namespace: str | None,
        before: str | None,
        wanted: dict[str, Any] | None,
        limit: int,
        cursor: str | None,
        now_ms: int,
    ) -> Page:
        """A page of the thread's checkpoints, newest first, its work bounded (`Reader.page`)."""
        return self._reader.page(ref, namespace, before, wanted, limit, cursor, now_ms)

    def delete(self, ref: ThreadRef, now_ms: int, deadline: float) -> bool:
        """Delete a thread (`Upkeep.delete`); False when there was no live thread."""
        return self._upkeep.delete(ref, now_ms, deadline)

    def prune(
        self, refs: Iterable[ThreadRef], strategy: str, now_ms: int, deadline: float, deleted: list[str] | None = None
    ) -> Pruned:
        """Prune threads (`Upkeep.prune`); the ids of those it deleted are added to `deleted`."""
        return self._upkeep.prune(refs, strategy, now_ms, deadline, deleted)

    def copy(self, source: ThreadRef, target_id: str, now_ms: int, deadline: float, quota: Quota | None = None) -> int:
        """Copy a thread into its owner's thread `target_id` (`Upkeep.copy`); the checkpoints copied."""
        return self._upkeep.copy(source, target_id, now_ms, deadline, quota)

    def delete_for_runs(self, tenant_id: str, agent_id: str, run_ids: Iterable[str]) -> tuple[int, bool]:
        """Delete the checkpoints of an agent's runs (`Upkeep.delete_for_runs`): (the checkpoints deleted,
        complete)."""
        return self._upkeep.delete_for_runs(tenant_id, agent_id, run_ids)


__all__ = ["ThreadStore", "pk_of"]
