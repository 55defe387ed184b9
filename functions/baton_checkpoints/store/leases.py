"""The lease repository: acquire, renew and release a checkpoint's lease, each one conditional UpdateItem on the
checkpoint's own item (the lease is attributes of that item, so that every save checks it in its own write).

A new lease is written on the condition that no lease is live; DynamoDB counts the lease counter up itself, so the
token's counter is one past the last lease's whatever raced. When a live lease is found instead (the failed write
hands back the item), its holder decides: the same holder renews it (a second write, conditioned on the lease
being exactly the one read), any other gets `LeaseHeld`. Lease operations change neither the revision nor the
expiry of the checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint, IdempotencyClaim
from baton_checkpoints.domain.clock import format_ms, ms_to_seconds
from baton_checkpoints.domain.errors import IdempotencyKeyReused, LeaseHeld, LeaseLost, NotFound, Unavailable
from baton_checkpoints.domain.leases import Lease, LeaseGrant, decide_acquire, new_secret, parse_token
from baton_checkpoints.store import items, layout, schema
from baton_checkpoints.store.attributes import Item, names_in, to_attr, values_used
from baton_checkpoints.store.dynamo import refusal
from baton_checkpoints.store.errors import (
    UNAVAILABLE_MESSAGE,
    Failure,
    classify,
    may_have_landed,
    reraise,
    translated_errors,
)
from baton_checkpoints.store.index import locate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_ATTEMPTS: Final = 5
"""Rounds of a lease operation that keeps meeting a lease changed in between (then 503)."""

_FREE: Final = f"(attribute_not_exists(#{items.LEASE_EXPIRES}) OR #{items.LEASE_EXPIRES} <= :now_s)"
_NOT_TAKEN_OVER: Final = f"(attribute_not_exists(#{items.LEASE_SECRET}) OR #{items.LEASE_HOLDER} = :holder)"
"""No other holder's lapsed lease still holds its token (released leases spend theirs): the grant takes none over."""
_LAPSED_LEASE: Final = (
    f"#{items.LEASE_COUNTER} = :old_counter AND #{items.LEASE_SECRET} = :old_secret "
    f"AND #{items.LEASE_EXPIRES} <= :now_s"
)
"""The lapsed lease a take-over replaces, unchanged since it was read."""
_THIS_CHECKPOINT: Final = f"#{schema.GSI1_PK} = :index_pk AND #{items.EXPIRES} > :now_s"
_GRANT: Final = (
    f"SET #{items.LEASE_HOLDER} = :holder, #{items.LEASE_SECRET} = :secret, #{items.LEASE_EXPIRES} = :lease_expires, "
    f"#{items.LEASE_KEY} = :key, #{items.LEASE_COUNTER} = if_not_exists(#{items.LEASE_COUNTER}, :zero) + :one"
)
_SAME_LEASE: Final = (
    f"#{items.LEASE_COUNTER} = :counter AND #{items.LEASE_SECRET} = :secret AND #{items.LEASE_HOLDER} = :holder "
    f"AND #{items.LEASE_KEY} = :key"
)
_RENEW: Final = f"SET #{items.LEASE_EXPIRES} = :lease_expires"
_RELEASE: Final = f"SET #{items.LEASE_EXPIRES} = :now_s REMOVE #{items.LEASE_SECRET}"
"""A release ends the lease now and spends its token (the random part goes), and keeps the rest of what it was (its
counter above all: the fencing needs the last one)."""
_SPEND: Final = f"REMOVE #{items.LEASE_SECRET}"
"""Spend a lapsed lease's token: nothing else changes."""
_TOKEN_MATCHES: Final = f"#{items.LEASE_COUNTER} = :counter AND #{items.LEASE_SECRET} = :secret"


class LeaseStore:
    """Leases of checkpoints in one DynamoDB table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def acquire(
        self,
        tenant_id: str,
        checkpoint_id: str,
        holder: str,
        key_id: str,
        ttl_seconds: int,
        now_ms: int,
        only_agent: str | None,
        claim: IdempotencyClaim | None = None,
        request_id: str = "",
    ) -> tuple[LeaseGrant, bool]:
        """A new lease for `holder`, or its live one renewed, and whether this replays an earlier request with the
        same idempotency key; `LeaseHeld` when another holder's lease is live, NotFound when the checkpoint is
        missing, expired or not the caller's to see. One index Query, then one UpdateItem (two to renew, or to take over
        another holder's lapsed lease); with an idempotency claim, one consistent BatchGetItem and one
        TransactWriteItems instead of the UpdateItems."""
        expires_ms = now_ms + ttl_seconds * 1000
        with translated_errors():
            if claim is not None:
                return self._acquire_once(
                    tenant_id, checkpoint_id, holder, key_id, ttl_seconds, now_ms, only_agent, claim, request_id
                )
            return self._acquire(tenant_id, checkpoint_id, holder, key_id, expires_ms, now_ms, only_agent), False

    def _acquire(
        self,
        tenant_id: str,
        checkpoint_id: str,
        holder: str,
        key_id: str,
        expires_ms: int,
        now_ms: int,
        only_agent: str | None,
    ) -> LeaseGrant:
        key = self._find(tenant_id, checkpoint_id)
        # A take-over (a lapsed lease of another holder, never released) is a write of its own, fenced on that very
        # lease: the holder it replaces is known before the write, so a grant whose answer was lost still names it.
        taken: Lease | None = None
        for _ in range(MAX_ATTEMPTS):
            secret = new_secret()
            values: dict[str, Any] = {
                **self._base_values(tenant_id, checkpoint_id, now_ms, only_agent),
                ":holder": holder,
                ":key": key_id,
                ":secret": secret,
                ":lease_expires": ms_to_seconds(expires_ms),
                ":zero": 0,
                ":one": 1,
            }
            if taken is None:
                condition = f"{self._visible(only_agent)} AND {_FREE} AND {_NOT_TAKEN_OVER}"
            else:
                condition = f"{self._visible(only_agent)} AND {_LAPSED_LEASE}"
                values.update({":old_counter": taken.counter, ":old_secret": taken.secret})
            previous = taken.holder if taken is not None else None
            try:
                answer = self._update(key, _GRANT, condition, values, returned="UPDATED_NEW")
            except (_Refused, _Unknown) as failed:
                current = failed.checkpoint if isinstance(failed, _Refused) else self._current(key, failed.cause)
                if current is None or not current.is_visible_as(checkpoint_id, now_ms, only_agent):
                    raise NotFound() from None
                lease = current.lease
                if lease is not None and lease.secret == secret:
                    # Our own grant landed and its answer was lost (the AWS SDK retried it, or gave up).
                    return LeaseGrant(lease, created=True, taken_over_from=previous)
                if isinstance(failed, _Unknown):
                    reraise(failed.cause, Failure.UNAVAILABLE)
                taken = None
                if lease is None or not lease.is_live(now_ms):
                    if lease is not None and lease.secret and lease.holder != holder:
                        taken = lease  # never released: the next attempt takes it over
                    continue  # (or the lease ended in between: try again)
                if not lease.renewable_by(holder, key_id):
                    raise LeaseHeld(format_ms(lease.expires_ms), by_other_holder=True) from None
                renewed = self._renew(key, tenant_id, checkpoint_id, lease, expires_ms, now_ms, only_agent)
                if renewed is not None:
                    return LeaseGrant(renewed, created=False)
                continue  # the lease changed in between: read it again through a new attempt
            counter = int(answer[items.LEASE_COUNTER]["N"])
            lease = Lease(holder, counter, secret, expires_ms, key_id)
            return LeaseGrant(lease, created=True, taken_over_from=previous)
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def _acquire_once(
        self,
        tenant_id: str,
        checkpoint_id: str,
        holder: str,
        key_id: str,
        ttl_seconds: int,
        now_ms: int,
        only_agent: str | None,
        claim: IdempotencyClaim,
        request_id: str,
    ) -> tuple[LeaseGrant, bool]:
        """The acquire of an idempotent request: the checkpoint and the key's record read together, then the lease
        and the record written in one transaction conditioned on what was read (retried from the read)."""
        record_key = layout.idempotency_key(tenant_id, claim.agent_id, claim.key)
        key = locate(self._client, self._table, tenant_id, checkpoint_id)
        for _ in range(MAX_ATTEMPTS):
            found = self._read_both(record_key, key)
            raw_record = found.get(layout.identity(record_key))
            if raw_record is not None:
                # A replay is decided before the state checks (the checkpoint may be gone since).
                record = items.record_from_item(raw_record)
                if record.expires_ms > now_ms:
                    if record.fingerprint != claim.fingerprint or record.grant is None:
                        raise IdempotencyKeyReused()
                    return record.grant, record.request_id != request_id
            if key is None:
                raise NotFound()
            raw = found.get(layout.identity(key))
            current = items.checkpoint_from_item(raw, with_state=False) if raw else None
            if current is None or not current.is_visible_as(checkpoint_id, now_ms, only_agent):
                raise NotFound()
            last_counter = int(raw.get(items.LEASE_COUNTER, {}).get("N", "0")) if raw else 0
            grant = decide_acquire(current.lease, last_counter, holder, key_id, ttl_seconds, now_ms)
            values: dict[str, Any] = {
                **self._base_values(tenant_id, checkpoint_id, now_ms, only_agent),
                ":holder": grant.lease.holder,
                ":key": grant.lease.key_id,
                ":secret": grant.lease.secret,
                ":lease_expires": ms_to_seconds(grant.lease.expires_ms),
                ":counter": grant.lease.counter,
            }
            condition = f"{self._visible(only_agent)} AND {self._unchanged_lease(current, last_counter, values)}"
            update = (
                f"SET #{items.LEASE_HOLDER} = :holder, #{items.LEASE_KEY} = :key, #{items.LEASE_SECRET} = :secret, "
                f"#{items.LEASE_EXPIRES} = :lease_expires, #{items.LEASE_COUNTER} = :counter"
            )
            record_condition = f"attribute_not_exists(#{schema.PK}) OR #{items.EXPIRES} <= :now_s"
            record_expiry_ms = now_ms + limits.IDEMPOTENCY_TTL_SECONDS * 1000
            writes: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": key,
                        "UpdateExpression": update,
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": names_in(update, condition),
                        "ExpressionAttributeValues": {
                            k: to_attr(v) for k, v in values.items() if k in values_used(update, condition)
                        },
                    }
                },
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": items.grant_record_item(
                            tenant_id, claim, request_id, grant, record_expiry_ms, checkpoint_key=key
                        ),
                        "ConditionExpression": record_condition,
                        "ExpressionAttributeNames": names_in(record_condition),
                        "ExpressionAttributeValues": {":now_s": to_attr(ms_to_seconds(now_ms))},
                    }
                },
            ]
            try:
                self._client.transact_write_items(TransactItems=cast(Any, writes))
            except Exception as exc:
                failure = classify(exc)
                if failure in (Failure.CONDITION_FAILED, Failure.RACE) or may_have_landed(exc):
                    continue  # another writer got in between, or ours landed: the next read tells
                reraise(exc, failure)
            return grant, False
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def _read_both(self, record_key: Item, key: Item | None) -> dict[tuple[str, str], Item]:
        """The idempotency record (and the checkpoint, once located), consistently, in one BatchGetItem."""
        keys = [record_key, *([key] if key is not None else [])]
        if key is None:
            found = self._client.get_item(TableName=self._table, Key=record_key, ConsistentRead=True).get("Item")
            return {} if found is None else {layout.identity(record_key): cast(Item, found)}
        response = self._client.batch_get_item(RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}})
        if (response.get("UnprocessedKeys") or {}).get(self._table):
            raise Unavailable(UNAVAILABLE_MESSAGE)
        return {layout.identity(item): cast(Item, item) for item in response.get("Responses", {}).get(self._table, [])}

    @staticmethod
    def _unchanged_lease(current: Checkpoint, last_counter: int, values: dict[str, Any]) -> str:
        """A condition that holds while the lease is as it was read."""
        if last_counter:
            values[":old_counter"] = last_counter
            counter = f"#{items.LEASE_COUNTER} = :old_counter"
        else:
            counter = f"attribute_not_exists(#{items.LEASE_COUNTER})"
        if current.lease is None:
            return f"{counter} AND attribute_not_exists(#{items.LEASE_EXPIRES})"
        values[":old_expires"] = ms_to_seconds(current.lease.expires_ms)
        return f"{counter} AND #{items.LEASE_EXPIRES} = :old_expires"

    def _renew(
        self,
        key: Item,
        tenant_id: str,
        checkpoint_id: str,
        lease: Lease,
        expires_ms: int,
        now_ms: int,
        only_agent: str | None,
    ) -> Lease | None:
        """The lease with its new expiry, never earlier than its current one (a renewal never shortens a lease);
        None when it changed since it was read (a concurrent renewal that reached further among those changes)."""
        expires_ms = max(expires_ms, lease.expires_ms)
        condition = (
            f"{self._visible(only_agent)} AND {_SAME_LEASE} AND #{items.LEASE_EXPIRES} > :now_s "
            f"AND #{items.LEASE_EXPIRES} <= :lease_expires"
        )
        values: dict[str, Any] = {
            **self._base_values(tenant_id, checkpoint_id, now_ms, only_agent),
            ":holder": lease.holder,
            ":key": lease.key_id,
            ":counter": lease.counter,
            ":secret": lease.secret,
            ":lease_expires": ms_to_seconds(expires_ms),
        }
        try:
            self._update(key, _RENEW, condition, values)
        except _Refused:
            return None
        except _Unknown as unknown:
            current = self._current(key, unknown.cause)
            landed = current is not None and current.lease is not None and current.lease.expires_ms == expires_ms
            if not landed:
                reraise(unknown.cause, Failure.UNAVAILABLE)
        return Lease(lease.holder, lease.counter, lease.secret, expires_ms, lease.key_id)

    def release(self, tenant_id: str, checkpoint_id: str, token: str, now_ms: int, only_agent: str | None) -> None:
        """End the lease whose token is `token`, and spend the token (it writes nothing any more), live or lapsed.
        With no lease live and nothing of the caller's to spend, it does nothing (a repeat, a lease taken over that
        lapsed too). `LeaseLost` when another lease is live and `token` is one of ours (the caller's lease was taken
        over), `LeaseHeld` when it is no token of ours; NotFound as for `acquire`."""
        parsed = parse_token(token)
        with translated_errors():
            key = self._find(tenant_id, checkpoint_id)
            values = self._base_values(tenant_id, checkpoint_id, now_ms, only_agent)
            # A token that is not one of ours matches no lease: there is then nothing of the caller's to end.
            values[":counter"], values[":secret"] = parsed if parsed is not None else (-1, "-")
            condition = f"{self._visible(only_agent)} AND {_TOKEN_MATCHES} AND #{items.LEASE_EXPIRES} > :now_s"
            retried = False
            try:
                self._update(key, _RELEASE, condition, values)
                return
            except _Refused as refused:
                current, retried = refused.checkpoint, refused.retried
            except _Unknown as unknown:
                current = self._current(key, unknown.cause)
                lease = None if current is None else current.lease
                if lease is not None and lease.is_live(now_ms) and lease.admits(token):
                    reraise(unknown.cause, Failure.UNAVAILABLE)  # still ours and live: the release did not land
                retried = True
            if current is None or not current.is_visible_as(checkpoint_id, now_ms, only_agent):
                raise NotFound() from None
            lease = current.lease
            if lease is not None and lease.admits(token):
                # Lapsed while nobody took it over: the token would still write; the release spends it.
                self._spend(key, values, only_agent)
                return
            if lease is None or not lease.is_live(now_ms):
                return  # no lease is live (it lapsed, or was released: perhaps by this very request's first try)
            if parsed is None:
                raise LeaseHeld(format_ms(lease.expires_ms), by_other_holder=True) from None  # no token of ours
            if retried and parsed[0] < lease.counter:
                # This request's first try released the caller's lease and its answer was lost; a newer lease may be
                # live by now: the release landed, so it is not refused.
                return
            raise LeaseLost(format_ms(lease.expires_ms)) from None  # another lease is live: the caller lost its own

    def _spend(self, key: Item, values: dict[str, Any], only_agent: str | None) -> None:
        """Remove the random part of a lapsed lease whose token `values` hold (its expiry stays as it was)."""
        condition = f"{self._visible(only_agent)} AND {_TOKEN_MATCHES} AND #{items.LEASE_EXPIRES} <= :now_s"
        try:
            self._update(key, _SPEND, condition, values)
        except _Refused:
            return  # taken over, spent or gone since: the token writes nothing either way
        except _Unknown as unknown:
            current = self._current(key, unknown.cause)
            lease = None if current is None else current.lease
            if lease is not None and lease.secret and lease.secret == values[":secret"]:
                reraise(unknown.cause, Failure.UNAVAILABLE)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _find(self, tenant_id: str, checkpoint_id: str) -> Item:
        key = locate(self._client, self._table, tenant_id, checkpoint_id)
        if key is None:
            raise NotFound()
        return key

    @staticmethod
    def _visible(only_agent: str | None) -> str:
        """The checkpoint is this one (by id), live, and the caller's to see."""
        if only_agent is None:
            return _THIS_CHECKPOINT
        return f"{_THIS_CHECKPOINT} AND begins_with(#{schema.SK}, :agent)"

    @staticmethod
    def _base_values(tenant_id: str, checkpoint_id: str, now_ms: int, only_agent: str | None) -> dict[str, Any]:
        values: dict[str, Any] = {
            ":index_pk": layout.checkpoint_index_pk(tenant_id, checkpoint_id),
            ":now_s": ms_to_seconds(now_ms),
        }
        if only_agent is not None:
            values[":agent"] = layout.agent_checkpoints(only_agent)
        return values

    def _update(self, key: Item, update: str, condition: str, values: dict[str, Any], returned: str = "NONE") -> Item:
        """One conditional UpdateItem; `_Refused` (with the item found) when its condition fails."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names_in(update, condition),
            "ExpressionAttributeValues": {
                k: to_attr(v) for k, v in values.items() if k in values_used(update, condition)
            },
            "ReturnValues": returned,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            return cast(Item, self._client.update_item(**request).get("Attributes", {}))
        except Exception as exc:
            refused = refusal(exc)
            if refused is not None:
                checkpoint = items.checkpoint_from_item(refused.item, with_state=False) if refused.found else None
                raise _Refused(checkpoint, refused.retried) from None
            if may_have_landed(exc):
                raise _Unknown(exc) from exc
            reraise(exc)
            raise  # unreachable: reraise always raises

    def _current(self, key: Item, cause: Exception) -> Checkpoint | None:
        """The checkpoint as it is now (after a write whose outcome is unknown); the cause re-raised when it cannot
        be read either."""
        try:
            found = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
        except Exception:
            reraise(cause, Failure.UNAVAILABLE)
            raise
        return items.checkpoint_from_item(found, with_state=False) if found else None


class _Unknown(Exception):
    """A lease write got no answer (a timeout, a dropped connection, a 5xx): it may have landed."""

    def __init__(self, cause: Exception) -> None:
        super().__init__("outcome unknown")
        self.cause = cause


class _Refused(Exception):
    """A lease write's condition failed; `checkpoint` is the item found (None: there is none); `retried`: the AWS SDK
    had sent the request before (an earlier try may have landed)."""

    def __init__(self, checkpoint: Checkpoint | None, retried: bool = False) -> None:
        super().__init__("condition failed")
        self.checkpoint = checkpoint
        self.retried = retried
