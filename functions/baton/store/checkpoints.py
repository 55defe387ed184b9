"""The checkpoint repository: one conditional write per save, one read per lookup.

Every rule a write must pass is a condition of the write itself. When a condition fails, DynamoDB hands back the
item it found (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), and `baton.domain.checkpoints.check_write`
decides what that means: no second read to explain a failure.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, cast

from baton.domain import limits
from baton.domain.canonical import CanonicalState
from baton.domain.checkpoints import (
    RECENT_REQUESTS,
    Checkpoint,
    CheckpointKey,
    EncodedState,
    SavePlan,
    build_next,
    check_write,
    decode_state,
    encode_state,
    recognised_write,
)
from baton.domain.clock import format_ms, ms_to_seconds, parse_time
from baton.domain.errors import IdempotencyKeyReused, NotFound, RevisionConflict, Unavailable
from baton.domain.ids import new_checkpoint_id
from baton.domain.lifecycle import ACTIVE
from baton.store import schema
from baton.store.attributes import Item, from_item, names_in, to_attr, to_item
from baton.store.cursors import MAX_PAGE_READS, decode_cursor, encode_cursor, query_binding, refused_cursor
from baton.store.errors import (
    UNAVAILABLE_MESSAGE,
    Failure,
    classify,
    may_have_landed,
    reraise,
    translated_errors,
    was_retried,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A save retries from its read when another writer got in between; past this many rounds the caller gets 503.
MAX_WRITE_ATTEMPTS = 5
# Keys a BatchGetItem leaves unprocessed (throttling) are asked again this many times in all, backing off.
MAX_BATCH_ROUNDS = 3
BATCH_BACKOFF_SECONDS = 0.05


def checkpoint_pk(tenant_id: str, subject_id: str) -> str:
    """Partition key of a subject's checkpoints (the subject comes last, so any characters are safe)."""
    return f"C#{tenant_id}#{subject_id}"


def checkpoint_sk(agent_id: str, kind: str) -> str:
    """Sort key of one agent's checkpoint of one kind."""
    return f"C#{agent_id}#{kind}"


def checkpoint_index_pk(tenant_id: str, checkpoint_id: str) -> str:
    """gsi1 partition key that finds a checkpoint by id, only within its tenant."""
    return f"I#{tenant_id}#{checkpoint_id}"


def idempotency_pk(tenant_id: str, agent_id: str, key: str) -> str:
    """Partition key of an idempotency record: keys belong to (tenant, agent)."""
    return f"D#{tenant_id}#{agent_id}#{key}"


RECENT_ATTRIBUTES: Final = tuple(f"rq{i}" for i in range(RECENT_REQUESTS))
"""The attributes holding the request ids of a checkpoint's latest writes, newest first: `rq0` is the last."""
EXPIRY_ATTRIBUTES: Final = tuple(f"rx{i}" for i in range(RECENT_REQUESTS))
"""Beside them, the expiry each of those writes set (epoch seconds; 0 in slots not yet written)."""


def _key(pk: str, sk: str) -> Item:
    return {schema.PK: {"S": pk}, schema.SK: {"S": sk}}


def _ttl_epoch(expires_ms: int) -> int:
    """DynamoDB TTL wants whole seconds; round up so TTL never removes an item before it expired."""
    return -(-expires_ms // 1000)


@dataclass(frozen=True)
class IdempotencyClaim:
    """An `Idempotency-Key`, the agent of the key that sent it (keys belong to the caller), and the fingerprint
    of the request that carries it."""

    key: str
    agent_id: str
    fingerprint: str


@dataclass(frozen=True)
class SaveOutcome:
    """What a save did: the result the contract answers, and whether it replays an earlier request."""

    result: dict[str, Any]
    replayed: bool = False

    @property
    def created(self) -> bool:
        """True when the save created the checkpoint (201), False when it updated one (200)."""
        return not self.result["updated"]


@dataclass(frozen=True)
class Page:
    """One page of a listing."""

    items: list[Checkpoint]
    next_cursor: str | None


def to_record_item(cp: Checkpoint, encoded: EncodedState | None = None) -> dict[str, Any]:
    """A checkpoint as the attributes of its item (`encoded`: its state already encoded, to avoid doing it twice)."""
    if cp.state_text is None:
        raise ValueError("cannot store a checkpoint without its state")
    if encoded is None or encoded.canonical.text != cp.state_text:
        encoded = encode_state(CanonicalState(text=cp.state_text, sha256=cp.state_hash))
    updated_at = format_ms(cp.updated_ms)
    return {
        schema.PK: checkpoint_pk(cp.tenant_id, cp.subject_id),
        schema.SK: checkpoint_sk(cp.agent_id, cp.kind),
        schema.GSI1_PK: checkpoint_index_pk(cp.tenant_id, cp.checkpoint_id),
        schema.GSI1_SK: "C",
        schema.LSI_UPDATED_SK: updated_at,
        schema.LSI_AGENT_UPDATED_SK: f"{cp.agent_id}#{updated_at}",
        "tenant_id": cp.tenant_id,
        "checkpoint_id": cp.checkpoint_id,
        "subject_id": cp.subject_id,
        "agent_id": cp.agent_id,
        "kind": cp.kind,
        "revision": cp.revision,
        "status": cp.status,
        "state": encoded.canonical.text.decode("utf-8") if encoded.compressed is None else None,
        "state_z": encoded.compressed,
        "state_hash": cp.state_hash,
        "state_bytes": cp.state_bytes,
        "format": cp.format,
        "resources": cp.resources,
        "source": cp.source,
        "ttl_seconds": cp.ttl_seconds,
        "keep_revisions": cp.keep_revisions,
        "created_at": format_ms(cp.created_ms),
        "updated_at": updated_at,
        "expires_at": ms_to_seconds(cp.expires_ms),
        schema.TTL_ATTRIBUTE: _ttl_epoch(cp.expires_ms),
        **dict(zip(RECENT_ATTRIBUTES, cp.recent_requests, strict=False)),
        **{name: ms_to_seconds(ms) for name, ms in zip(EXPIRY_ATTRIBUTES, cp.recent_expiries, strict=False)},
    }


def from_record_item(item: Item, with_state: bool = True) -> Checkpoint:
    """A checkpoint from its item (or from an index projection without the state); `with_state=False` leaves
    the state undecoded, for answers that do not show it."""
    values = from_item(item)
    has_state = with_state and ("state" in values or "state_z" in values)
    return Checkpoint(
        tenant_id=values["tenant_id"],
        checkpoint_id=values["checkpoint_id"],
        subject_id=values["subject_id"],
        agent_id=values["agent_id"],
        kind=values["kind"],
        revision=int(values["revision"]),
        status=values["status"],
        state_text=decode_state(values.get("state"), values.get("state_z")) if has_state else None,
        state_hash=values["state_hash"],
        state_bytes=int(values["state_bytes"]),
        ttl_seconds=int(values["ttl_seconds"]),
        keep_revisions=int(values.get("keep_revisions", 0)),
        created_ms=parse_time(values["created_at"]),
        updated_ms=parse_time(values["updated_at"]),
        expires_ms=int(Decimal(values["expires_at"]) * 1000),
        recent_requests=tuple(values[name] for name in RECENT_ATTRIBUTES if values.get(name)),
        recent_expiries=tuple(int(Decimal(values[name]) * 1000) for name in EXPIRY_ATTRIBUTES if values.get(name)),
        format=values.get("format"),
        resources=list(values.get("resources", [])),
        source=values.get("source"),
    )


class CheckpointStore:
    """Checkpoints in one DynamoDB table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    # -- save -----------------------------------------------------------------------------------------------

    def save(self, plan: SavePlan, claim: IdempotencyClaim | None = None) -> SaveOutcome:
        """Upsert the checkpoint of `plan`; with a claim, exactly once per idempotency key."""
        with translated_errors():
            if claim is not None:
                return self._save_idempotent(plan, claim)
            if plan.oversize is not None:
                # The contract ranks a closed checkpoint and a revision conflict before an oversized state.
                check_write(self._get_item(plan.key), plan.expected_revision, plan.now_ms)
                raise plan.oversize
            return self._save_plain(plan)

    def _save_plain(self, plan: SavePlan) -> SaveOutcome:
        for _ in range(MAX_WRITE_ATTEMPTS):
            request = self._upsert_request(plan)
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
                        return SaveOutcome(result=landed)
                if failure is not Failure.CONDITION_FAILED:
                    reraise(exc, failure)
                found = cast(Item | None, getattr(exc, "response", {}).get("Item"))
                old = from_record_item(found, with_state=False) if found else None
                if old is not None:
                    # Our own write landed and its answer was lost; the AWS SDK retried it (perhaps after other
                    # writes). Report what it wrote, never redo it.
                    mine = recognised_write(old, plan)
                    if mine is not None:
                        return SaveOutcome(result=mine)
                check_write(old, plan.expected_revision, plan.now_ms)
                if old is not None and not old.is_live(plan.now_ms):
                    outcome = self._replace_expired(plan, old)
                    if outcome is not None:
                        return outcome
                continue  # the item changed between the write and now: try again
            return SaveOutcome(result=from_record_item(response["Attributes"], with_state=False).save_result())
        raise Unavailable("Too many concurrent writers on this checkpoint; nothing was written. Retry shortly.")

    def _landed(self, plan: SavePlan) -> dict[str, Any] | None:
        """What `plan`'s write answered if the item shows it landed; None when it did not or cannot be known."""
        try:
            found = self._get_item(plan.key)
        except Exception:  # the store is still unreachable: the caller answers 503
            return None
        return recognised_write(found, plan) if found is not None else None

    def _upsert_request(self, plan: SavePlan) -> dict[str, Any]:
        """One UpdateItem that creates or updates the live checkpoint, with every rule as a condition."""
        now_iso = format_ms(plan.now_ms)
        new_id = new_checkpoint_id()
        values: dict[str, Any] = {
            ":new_id": new_id,
            ":new_gsi1pk": checkpoint_index_pk(plan.key.tenant_id, new_id),
            ":gsi1sk": "C",
            ":now_iso": now_iso,
            ":agent_now": f"{plan.key.agent_id}#{now_iso}",
            ":zero": 0,
            ":one": 1,
            ":tenant": plan.key.tenant_id,
            ":subject": plan.key.subject_id,
            ":agent": plan.key.agent_id,
            ":kind": plan.key.kind,
            ":status": plan.status,
            ":state_hash": plan.state.canonical.sha256,
            ":state_bytes": plan.state.canonical.size,
            ":resources": plan.resources,
            ":request_id": plan.request_id,
            ":now_s": ms_to_seconds(plan.now_ms),
            ":ttl_base": _ttl_epoch(plan.now_ms),
            ":active": ACTIVE,
            ":blank": "",
        }
        sets = [
            "#checkpoint_id = if_not_exists(#checkpoint_id, :new_id)",
            f"#{schema.GSI1_PK} = if_not_exists(#{schema.GSI1_PK}, :new_gsi1pk)",
            f"#{schema.GSI1_SK} = :gsi1sk",
            "#created_at = if_not_exists(#created_at, :now_iso)",
            "#revision = if_not_exists(#revision, :zero) + :one",
            "#tenant_id = :tenant",
            "#subject_id = :subject",
            "#agent_id = :agent",
            "#kind = :kind",
            "#status = :status",
            "#state_hash = :state_hash",
            "#state_bytes = :state_bytes",
            "#resources = :resources",
            "#updated_at = :now_iso",
            f"#{schema.LSI_UPDATED_SK} = :now_iso",
            f"#{schema.LSI_AGENT_UPDATED_SK} = :agent_now",
            # The request ids of the latest writes shift down one place; the oldest falls off.
            f"#{RECENT_ATTRIBUTES[0]} = :request_id",
            *(f"#{newer} = if_not_exists(#{older}, :blank)" for older, newer in itertools.pairwise(RECENT_ATTRIBUTES)),
        ]
        removes = []
        if plan.state.compressed is not None:
            sets.append("#state_z = :state")
            values[":state"] = plan.state.compressed
            removes.append("#state")
        else:
            sets.append("#state = :state")
            values[":state"] = plan.state.canonical.text.decode("utf-8")
            removes.append("#state_z")
        # ttl_seconds and keep_revisions keep their stored values unless this save sends them; the expiry is
        # computed by DynamoDB from whichever applies, so the save needs no read.
        if plan.ttl_seconds is not None:
            values[":ttl_seconds"] = plan.ttl_seconds
            ttl_operand = ":ttl_seconds"
        else:
            values[":default_ttl"] = limits.DEFAULT_TTL_SECONDS
            ttl_operand = "if_not_exists(#ttl_seconds, :default_ttl)"
        sets.append(f"#ttl_seconds = {ttl_operand}")
        sets.append(f"#expires_at = :now_s + {ttl_operand}")
        sets.append(f"#{schema.TTL_ATTRIBUTE} = :ttl_base + {ttl_operand}")
        sets.append(f"#{EXPIRY_ATTRIBUTES[0]} = :now_s + {ttl_operand}")
        sets.extend(
            f"#{newer} = if_not_exists(#{older}, :zero)" for older, newer in itertools.pairwise(EXPIRY_ATTRIBUTES)
        )
        if plan.keep_revisions is not None:
            values[":keep"] = plan.keep_revisions
            sets.append("#keep_revisions = :keep")
        else:
            sets.append("#keep_revisions = if_not_exists(#keep_revisions, :zero)")
        for attribute, value in (("format", plan.format), ("source", plan.source)):
            if value is None:
                removes.append(f"#{attribute}")
            else:
                values[f":{attribute}"] = value
                sets.append(f"#{attribute} = :{attribute}")

        # A missing attribute equals nothing, so slots not yet written never match.
        not_mine = "NOT (" + " OR ".join(f"#{name} = :request_id" for name in RECENT_ATTRIBUTES) + ")"
        live_and_writable = f"(#expires_at > :now_s AND #status = :active AND {not_mine})"
        if plan.expected_revision is None:
            condition = f"attribute_not_exists(#{schema.PK}) OR {live_and_writable}"
        elif plan.expected_revision == 0:
            condition = f"attribute_not_exists(#{schema.PK})"
        else:
            values[":expected"] = plan.expected_revision
            condition = f"{live_and_writable} AND #revision = :expected"
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        used = set(re.findall(r":\w+", update + " " + condition))
        return {
            "TableName": self._table,
            "Key": _key(
                checkpoint_pk(plan.key.tenant_id, plan.key.subject_id), checkpoint_sk(plan.key.agent_id, plan.key.kind)
            ),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names_in(update, condition),
            "ExpressionAttributeValues": {k: to_attr(v) for k, v in values.items() if k in used},
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _replace_expired(self, plan: SavePlan, expired: Checkpoint) -> SaveOutcome | None:
        """Replace an expired item that TTL has not removed yet with a new checkpoint; None if it changed."""
        fresh = build_next(None, plan, new_checkpoint_id())
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(to_record_item(fresh, plan.state)),
                ConditionExpression="#checkpoint_id = :old_id AND #revision = :old_revision",
                ExpressionAttributeNames=names_in("#checkpoint_id #revision"),
                ExpressionAttributeValues={
                    ":old_id": to_attr(expired.checkpoint_id),
                    ":old_revision": to_attr(expired.revision),
                },
            )
        except Exception as exc:
            failure = classify(exc)
            if failure in (Failure.CONDITION_FAILED, Failure.RACE):
                return None
            landed = self._landed(plan) if may_have_landed(exc) else None
            if landed is not None:
                return SaveOutcome(result=landed)
            reraise(exc, failure)
        return SaveOutcome(result=fresh.save_result())

    def _save_idempotent(self, plan: SavePlan, claim: IdempotencyClaim) -> SaveOutcome:
        """Read the checkpoint and the idempotency record together, then write both in one transaction."""
        record_key = _key(idempotency_pk(plan.key.tenant_id, claim.agent_id, claim.key), "D")
        checkpoint_key = _key(
            checkpoint_pk(plan.key.tenant_id, plan.key.subject_id), checkpoint_sk(plan.key.agent_id, plan.key.kind)
        )
        now_s = ms_to_seconds(plan.now_ms)
        ambiguous: Exception | None = None
        for _ in range(MAX_WRITE_ATTEMPTS):
            found = self._batch_get([checkpoint_key, record_key])
            record = found.get(_identity(record_key))
            if record is not None:
                stored = from_item(record)
                if Decimal(stored["expires_at"]) > now_s:
                    if stored["fingerprint"] != claim.fingerprint:
                        raise IdempotencyKeyReused()
                    return SaveOutcome(result=stored["result"], replayed=stored["request_id"] != plan.request_id)
            raw = found.get(_identity(checkpoint_key))
            old = from_record_item(raw, with_state=False) if raw is not None else None
            check_write(old, plan.expected_revision, plan.now_ms)
            if plan.oversize is not None:
                raise plan.oversize
            new = build_next(old, plan, new_checkpoint_id())
            result = new.save_result()
            if old is None:
                checkpoint_condition: dict[str, Any] = {"ConditionExpression": f"attribute_not_exists({schema.PK})"}
            else:
                checkpoint_condition = {
                    "ConditionExpression": "#checkpoint_id = :old_id AND #revision = :old_revision",
                    "ExpressionAttributeNames": names_in("#checkpoint_id #revision"),
                    "ExpressionAttributeValues": {
                        ":old_id": to_attr(old.checkpoint_id),
                        ":old_revision": to_attr(old.revision),
                    },
                }
            record_expiry_ms = plan.now_ms + limits.IDEMPOTENCY_TTL_SECONDS * 1000
            checkpoint_put: dict[str, Any] = {
                "TableName": self._table,
                "Item": to_item(to_record_item(new, plan.state)),
                **checkpoint_condition,
            }
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {"Put": checkpoint_put},  # type: ignore[typeddict-item]
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": to_item(
                                    {
                                        **{k: v["S"] for k, v in record_key.items()},
                                        "fingerprint": claim.fingerprint,
                                        "request_id": plan.request_id,
                                        "result": result,
                                        "expires_at": ms_to_seconds(record_expiry_ms),
                                        schema.TTL_ATTRIBUTE: _ttl_epoch(record_expiry_ms),
                                    }
                                ),
                                "ConditionExpression": "attribute_not_exists(#pk) OR #expires_at <= :now_s",
                                "ExpressionAttributeNames": names_in("#pk #expires_at"),
                                "ExpressionAttributeValues": {":now_s": to_attr(now_s)},
                            }
                        },
                    ]
                )
            except Exception as exc:
                failure = classify(exc)
                if failure in (Failure.CONDITION_FAILED, Failure.RACE):
                    continue  # another writer got in between (or our own retried write landed): read again
                if may_have_landed(exc):
                    ambiguous = exc
                    continue  # the next read finds our idempotency record if the transaction landed
                reraise(exc, failure)
            return SaveOutcome(result=result)
        if ambiguous is not None:
            reraise(ambiguous)
        raise Unavailable("Too many concurrent writers on this checkpoint; nothing was written. Retry shortly.")

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
            response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        item = response.get("Item")
        if item is None:
            raise NotFound()
        found = from_record_item(item)
        # The index is eventually consistent: the slot may hold a newer checkpoint than the one indexed.
        if found.checkpoint_id != checkpoint_id or not found.is_live(now_ms):
            raise NotFound()
        return found

    def _get_item(self, key: CheckpointKey) -> Checkpoint | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=_key(checkpoint_pk(key.tenant_id, key.subject_id), checkpoint_sk(key.agent_id, key.kind)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return from_record_item(item) if item is not None else None

    def _locate(self, tenant_id: str, checkpoint_id: str) -> Item | None:
        response = self._client.query(
            TableName=self._table,
            IndexName=schema.GSI1,
            KeyConditionExpression=f"{schema.GSI1_PK} = :id",
            ExpressionAttributeValues={":id": {"S": checkpoint_index_pk(tenant_id, checkpoint_id)}},
            Limit=1,
        )
        items = response.get("Items", [])
        if not items:
            return None
        return {schema.PK: items[0][schema.PK], schema.SK: items[0][schema.SK]}

    def _batch_get(self, keys: list[Item]) -> dict[tuple[str, str], Item]:
        """The items at `keys` (one consistent BatchGetItem; keys DynamoDB leaves unprocessed are asked again, a
        few times with a short backoff, then the caller gets a 503)."""
        found: dict[tuple[str, str], Item] = {}
        pending: list[Item] = keys
        for attempt in range(MAX_BATCH_ROUNDS):
            if attempt:
                time.sleep(BATCH_BACKOFF_SECONDS * 2 ** (attempt - 1))
            response = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": pending, "ConsistentRead": True}}
            )
            for item in response.get("Responses", {}).get(self._table, []):
                found[_identity(item)] = item
            unprocessed: Any = response.get("UnprocessedKeys") or {}
            pending = unprocessed.get(self._table, {}).get("Keys", [])
            if not pending:
                return found
        raise Unavailable(UNAVAILABLE_MESSAGE)

    # -- delete ---------------------------------------------------------------------------------------------

    def delete(
        self,
        tenant_id: str,
        checkpoint_id: str,
        now_ms: int,
        only_agent: str | None,
        if_match_revisions: tuple[int, ...] | None,
    ) -> None:
        """Delete the live checkpoint with this id; NotFound if it is not there or not the caller's to see.

        `if_match_revisions` (from `If-Match`) makes it conditional: the current revision must be one of them.
        """
        values: dict[str, Any] = {":id": checkpoint_id, ":now_s": ms_to_seconds(now_ms)}
        condition = "#checkpoint_id = :id AND #expires_at > :now_s"
        if only_agent is not None:
            values[":agent"] = only_agent
            condition += " AND #agent_id = :agent"
        if if_match_revisions is not None:
            wanted = sorted(set(if_match_revisions)) or [-1]  # -1: a revision no checkpoint has
            names = [f":revision{i}" for i in range(len(wanted))]
            values.update(zip(names, wanted, strict=True))
            condition += f" AND #revision IN ({', '.join(names)})"
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
                if may_have_landed(exc) and self._gone(key, checkpoint_id):
                    return  # an attempt whose answer was lost deleted it
                if classify(exc) is not Failure.CONDITION_FAILED:
                    raise
                found = cast(Item | None, getattr(exc, "response", {}).get("Item"))
                old = from_record_item(found, with_state=False) if found else None
                if old is None and was_retried(exc):
                    return  # the SDK's first attempt deleted it and its answer was lost; the retry found nothing
                if (
                    old is None
                    or old.checkpoint_id != checkpoint_id
                    or not old.is_live(now_ms)
                    or (only_agent is not None and old.agent_id != only_agent)
                ):
                    raise NotFound() from None
                raise RevisionConflict(expected=if_match_revisions, current=old.revision, field="If-Match") from None

    def _gone(self, key: Item, checkpoint_id: str) -> bool:
        """True when the slot at `key` no longer holds `checkpoint_id` (False when that cannot be read now)."""
        try:
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
        except Exception:
            return False
        return item is None or item.get("checkpoint_id", {}).get("S") != checkpoint_id

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
        """One page of a subject's live checkpoints, newest `updated_at` first (one Query)."""
        pk = checkpoint_pk(tenant_id, subject_id)
        binding = query_binding("subject", tenant_id, subject_id, agent_id, kind, status)
        agent_prefix = f"C#{agent_id}#" if agent_id is not None else "C#"
        bounds = {schema.SK: agent_prefix}
        if agent_id is not None:
            bounds[schema.LSI_AGENT_UPDATED_SK] = f"{agent_id}#"
        start = decode_cursor(cursor, binding, {schema.PK: pk}, bounds)
        values: dict[str, Any] = {":pk": pk, ":now_s": ms_to_seconds(now_ms)}
        if agent_id is None:
            index, key_condition = schema.LSI_UPDATED, f"#{schema.PK} = :pk"
        else:
            index = schema.LSI_AGENT_UPDATED
            key_condition = f"#{schema.PK} = :pk AND begins_with(#{schema.LSI_AGENT_UPDATED_SK}, :agent_prefix)"
            values[":agent_prefix"] = f"{agent_id}#"
        filters = ["#expires_at > :now_s"]
        if kind is not None:
            values[":kind"] = kind
            filters.append("#kind = :kind")
        if status is not None:
            values[":status"] = status
            filters.append("#status = :status")
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": key_condition,
            "FilterExpression": " AND ".join(filters),
            "ExpressionAttributeNames": names_in(key_condition, *filters),
            "ExpressionAttributeValues": {k: to_attr(v) for k, v in values.items()},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        index_sk = schema.LSI_UPDATED_SK if agent_id is None else schema.LSI_AGENT_UPDATED_SK
        shown, more = self._fill_page(request, start, limit)
        # The cursor is the position of the last item shown, never of an item the filter skipped.
        position = {k: shown[limit - 1][k] for k in (schema.PK, schema.SK, index_sk)} if more else None
        items = [from_record_item(item) for item in shown[:limit]]
        return Page(items=items, next_cursor=encode_cursor(position, binding))

    def _fill_page(self, request: dict[str, Any], start: Item | None, limit: int) -> tuple[list[Item], bool]:
        """Up to `limit` items that pass the query's filter, and whether more follow.

        One Query asks for one item more than the page, which is enough unless the filter drops items (expired or
        filtered out); then the next Query continues where DynamoDB stopped, reading twice as many items each round
        (DynamoDB's Limit counts items read, before the filter), so skipping N items costs about log2(N) Queries.
        The cursor is built from the last item shown, so reading past the page never shows or leaks more. A page is
        empty only at the end.
        """
        shown: list[Item] = []
        reads = limit + 1
        cursor_start = start  # only the client's start key can be its mistake; later ones are DynamoDB's own
        while True:
            page_request = {**request, "Limit": reads}
            if start is not None:
                page_request["ExclusiveStartKey"] = start
            with translated_errors(), refused_cursor(cursor_start):
                response = self._client.query(**page_request)
            cursor_start = None
            shown.extend(response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if len(shown) > limit:
                return shown[: limit + 1], True
            if not start:
                return shown, False
            reads = min(reads * 2, MAX_PAGE_READS)  # the filter drops items: read more per round (log2 rounds)


def _identity(item: Item) -> tuple[str, str]:
    return item[schema.PK]["S"], item[schema.SK]["S"]
