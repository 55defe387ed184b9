"""A thread's head: its generation, expiry and last delete; touched by a put once in a while (the container remembers
the heads it touched last), read by every read."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.errors import QuotaExceeded, Unavailable
from baton_checkpoints.domain.thread_puts import ThreadRef
from baton_checkpoints.store import dynamo, layout, schema
from baton_checkpoints.store.attributes import Item, names_in
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE
from baton_checkpoints.store.thread_names import (
    CREATED,
    DELETED,
    EXPIRES_MS,
    GENERATION,
    TTL_MS,
    TTL_S,
    UPDATED,
)
from baton_checkpoints.store.threads.items import (
    Head,
    head_of,
    live_head,
    refresh_slack_ms,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


MAX_DELETED_PROBES: Final = 4
"""Queries (of up to 1 MB of keys each) that look for a checkpoint put since a thread's delete."""


KNOWN_HEADS: Final = 1_024
"""Heads a container remembers (the threads it put to last), and checkpoints (what a child carries from them)."""


_TOUCH_LIVE: Final = f"attribute_not_exists(#{schema.PK}) OR #{EXPIRES_MS} > :now"
_TOUCH_EXISTING: Final = f"attribute_exists(#{schema.PK}) AND #{EXPIRES_MS} > :now AND attribute_not_exists(#{DELETED})"
"""A touch that may not start a thread (the tenant is at its quota): refused over a missing head, and over the head
of a deleted thread, as well."""


_TOUCH: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = :tms, #{TTL_S} = :tts, #{EXPIRES_MS} = :exp, "
    f"#{schema.TTL_ATTRIBUTE} = :ttl REMOVE #{DELETED}"
)


_TOUCH_KEEP_TTL: Final = (
    f"SET #{GENERATION} = if_not_exists(#{GENERATION}, :g), #{CREATED} = if_not_exists(#{CREATED}, :now), "
    f"#{UPDATED} = :now, #{TTL_MS} = if_not_exists(#{TTL_MS}, :tms), #{TTL_S} = if_not_exists(#{TTL_S}, :tts), "
    f"#{EXPIRES_MS} = if_not_exists(#{TTL_MS}, :tms) + :later, "
    f"#{schema.TTL_ATTRIBUTE} = if_not_exists(#{TTL_S}, :tts) + :later_s REMOVE #{DELETED}"
)


_SAME_HEAD: Final = f"#{GENERATION} = :old_g AND #{EXPIRES_MS} = :old_exp"


def pk_of(ref: ThreadRef) -> str:
    """The partition of a thread."""
    return layout.thread_pk(ref.tenant_id, ref.agent_id, ref.thread_id)


class Heads:
    """The heads of the threads in one table, and the ones this container touched last."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self._known: OrderedDict[str, Head] = OrderedDict()
        """The heads this container touched last (`for_put`): a put within a slack of a touch touches none."""

    def for_put(
        self, pk: str, ttl_seconds: int | None, now_ms: int, create_refused: QuotaExceeded | None = None
    ) -> Head:
        """The head a put writes under: the one this container last touched while its expiry is still at least a
        time to live away (no request: the expiry a touch sets carries `refresh_slack_ms` more), else a touch.
        `create_refused`: raised rather than create a head (the tenant is at its `checkpoints` quota)."""
        known = self._known.get(pk)
        if (
            known is not None
            and create_refused is None  # at the quota, the head is asked: the thread may have been deleted since
            and (ttl_seconds is None or ttl_seconds * 1000 == known.ttl_ms)
            and known.expires_ms - now_ms >= known.ttl_ms
        ):
            self._known.move_to_end(pk)
            return known
        head = self.touch(pk, ttl_seconds, now_ms, create_refused)
        self._known[pk] = head
        while len(self._known) > KNOWN_HEADS:
            self._known.popitem(last=False)
        return head

    def forget(self, pk: str) -> None:
        """Drop what this container knows of a thread's head (it was just deleted: the next put touches it, which
        starts the thread again)."""
        self._known.pop(pk, None)

    def touch(self, pk: str, ttl_seconds: int | None, now_ms: int, create_refused: QuotaExceeded | None = None) -> Head:
        """Refresh a thread's head (creating it, or starting a new generation over an expired one): its generation
        and expiry, `refresh_slack_ms` beyond the time to live. One UpdateItem; over an expired head, one more write
        that replaces it. `create_refused`: raised where the head would be created (the write is conditioned on the
        head being there)."""
        known = self._known.get(pk)
        guess = (ttl_seconds * 1000) if ttl_seconds else known.ttl_ms if known else limits.DEFAULT_TTL_SECONDS * 1000
        later = now_ms + refresh_slack_ms(guess)
        ttl = ttl_seconds or limits.DEFAULT_TTL_SECONDS
        values: dict[str, Any] = {
            ":g": {"S": uuid.uuid4().hex[:12]},
            ":now": {"N": str(now_ms)},
            ":later": {"N": str(later)},
            ":later_s": {"N": str(later // 1000 + 1)},
            ":tms": {"N": str(ttl * 1000)},
            ":tts": {"N": str(ttl)},
        }
        update = _TOUCH_KEEP_TTL
        if ttl_seconds is not None:
            # DynamoDB adds an attribute and a value (`if_not_exists(...) + :later`), not two values: computed here.
            update = _TOUCH
            values[":exp"] = {"N": str(later + ttl * 1000)}
            values[":ttl"] = {"N": str(later // 1000 + 1 + ttl)}
            del values[":later"], values[":later_s"]
        condition = _TOUCH_LIVE if create_refused is None else _TOUCH_EXISTING
        answer = dynamo.attempt(
            self._client.update_item,
            TableName=self._table,
            Key=layout.key(pk, layout.THREAD_HEAD_SK),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names_in(update, condition),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(answer, dynamo.Refused):
            if create_refused is not None and (not answer.found or DELETED in answer.item):
                raise create_refused
            return self._restart(pk, answer.item, ttl_seconds, now_ms)
        return head_of(answer["Attributes"])

    def _restart(self, pk: str, old: Item, ttl_seconds: int | None, now_ms: int) -> Head:
        """A new generation over an expired head (its items are left to the reaper, which reads the change)."""
        ttl_ms = (ttl_seconds or limits.DEFAULT_TTL_SECONDS) * 1000
        head = Head(uuid.uuid4().hex[:12], ttl_ms, now_ms + refresh_slack_ms(ttl_ms) + ttl_ms)
        item = {
            **layout.key(pk, layout.THREAD_HEAD_SK),
            GENERATION: {"S": head.generation},
            CREATED: {"N": str(now_ms)},
            UPDATED: {"N": str(now_ms)},
            TTL_MS: {"N": str(ttl_ms)},
            TTL_S: {"N": str(ttl_ms // 1000)},
            EXPIRES_MS: {"N": str(head.expires_ms)},
            schema.TTL_ATTRIBUTE: {"N": str(head.expires_ms // 1000 + 1)},
        }
        answer = dynamo.attempt(
            self._client.put_item,
            TableName=self._table,
            Item=item,
            ConditionExpression=_SAME_HEAD,
            ExpressionAttributeNames=names_in(_SAME_HEAD),
            ExpressionAttributeValues={":old_g": old[GENERATION], ":old_exp": old[EXPIRES_MS]},
        )
        if isinstance(answer, dynamo.Refused):
            raise Unavailable(UNAVAILABLE_MESSAGE)  # another writer restarted it at the same moment
        return head

    def read(self, ref: ThreadRef, now_ms: int) -> Head | None:
        """The thread's head when the thread is live (one consistent GetItem), else None."""
        answer = self._client.get_item(
            TableName=self._table,
            Key=layout.key(pk_of(ref), layout.THREAD_HEAD_SK),
            ConsistentRead=True,
        )
        return live_head(answer.get("Item"), now_ms)

    def deleted(self, pk: str, head: Head) -> bool:
        """True when the thread was deleted and no checkpoint was put since (Queries that count, reading no item back,
        at most `MAX_DELETED_PROBES`: a deleted thread's partition holds tombstones; past them, False)."""
        if head.floor_ms == 0:
            return False
        found, whole = dynamo.count(self._client, 1, MAX_DELETED_PROBES, **self.life_request(pk, head))
        return whole and found == 0

    def life_request(self, pk: str, head: Head) -> dict[str, Any]:
        """A Query of the thread's checkpoints of the head's life (its generation, put since its last delete)."""
        condition = f"#{schema.PK} = :pk AND begins_with(#{schema.SK}, :prefix)"
        mine = f"#{GENERATION} = :g AND #{UPDATED} > :floor"
        return {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "FilterExpression": mine,
            "ExpressionAttributeNames": names_in(condition, mine),
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":prefix": {"S": layout.THREAD_CHECKPOINT},
                ":g": {"S": head.generation},
                ":floor": {"N": str(head.floor_ms)},
            },
            "ConsistentRead": True,
        }
