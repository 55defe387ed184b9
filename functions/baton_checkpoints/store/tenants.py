"""A tenant's own item (`L#<tenant>`): its limits, and its rate limit's bucket (`domain/tenancy.py`).

The bucket is one number, `tat`. A container takes a share of tokens in one UpdateItem conditioned on what it
believes the bucket holds: when the bucket is full (`tat` at or before now) it sets `tat` outright; when it is not,
it adds to `tat` while `tat` leaves room for the tokens. Either condition also names the limits' version the
container computed with, so a limit changed meanwhile is never applied with the old figures. A refused condition
answers the item as it is (`ALL_OLD`), from which the container decides again: a share costs one write, two when its
belief was stale. The answer of a granted take (`ALL_NEW`) carries the limits too, so a container never reads them
separately on the request path.
"""

from __future__ import annotations

import random
import secrets
import time
from typing import TYPE_CHECKING, Any, Final

from baton_checkpoints.domain.tenancy import SKEW_US, Bucket, Limits, Settings, Taken, skewed, take
from baton_checkpoints.domain.usage import Day, Usage
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, from_item, names_in, to_attr
from baton_checkpoints.store.dynamo import Refused, attempt
from baton_checkpoints.store.errors import Failure, classify, translated_errors
from baton_checkpoints.store.metering import CHECKPOINTS, STORED_BYTES, THREADS
from baton_checkpoints.store.usage import day_of_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TAT: Final = "tat"
LAST: Final = "last"
"""The token of the last take that landed (see `TenantStore.take`)."""
VERSION: Final = "lv"
SETTINGS: Final = {
    "requests_per_minute": "rpm",
    "burst": "burst",
    "storage_bytes": "storage_bytes",
    "checkpoints": "checkpoints",
}
"""Each setting's attribute (absent: the stage's default)."""
USAGE: Final = {"stored_bytes": STORED_BYTES, "checkpoints": CHECKPOINTS, "threads": THREADS}
"""What the stream consumer counts of the tenant (`store/metering.py` adds to them): in the same item, so that every
take's answer carries them to the container that enforces the quotas."""
MAX_TAKE_ATTEMPTS: Final = 4
"""Conditional writes one take may make: others' takes landing in between only refuse ours while they keep landing."""
RACE_BACKOFF_SECONDS: Final = 0.02
"""At most how long a take waits before trying again after a transaction held the tenant's item (a count lasts a few
milliseconds)."""


def bucket_of(item: Item) -> Bucket:
    """A tenant item as a `Bucket` (an empty item: default settings, a full bucket)."""
    values = from_item(item)
    settings = Settings(**{name: _int(values.get(attribute)) for name, attribute in SETTINGS.items()})
    usage = Usage(**{name: max(0, _int(values.get(attribute)) or 0) for name, attribute in USAGE.items()})
    return Bucket(settings, _int(values.get(VERSION)) or 0, _int(values.get(TAT)), usage)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class TenantStore:
    """Tenants' items: limits read and written by the operator, buckets taken from by every container."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def settings(self, tenant_id: str) -> Bucket:
        """The tenant's settings (one consistent GetItem)."""
        with translated_errors():
            found = self._client.get_item(
                TableName=self._table, Key=layout.tenant_key(tenant_id), ConsistentRead=True
            ).get("Item")
        return bucket_of(found or {})

    def put_settings(self, tenant_id: str, settings: Settings) -> Bucket:
        """Replace the tenant's settings (a None one goes back to the stage's default) and start its bucket again,
        full; the version moves on, so that every container's next take uses them (one UpdateItem)."""
        given = {attribute: getattr(settings, name) for name, attribute in SETTINGS.items()}
        assignments = [f"#{attribute} = :{attribute}" for attribute, value in given.items() if value is not None]
        # The bucket starts again, full, under the new limits: its time was priced at the old rate.
        removals = [f"#{attribute}" for attribute, value in given.items() if value is None] + [f"#{TAT}"]
        expression = f"ADD #{VERSION} :one"
        if assignments:
            expression = f"SET {', '.join(assignments)} {expression}"
        if removals:
            expression += f" REMOVE {', '.join(removals)}"
        values = {":one": to_attr(1)}
        values.update({f":{attribute}": to_attr(value) for attribute, value in given.items() if value is not None})
        with translated_errors():
            answer = self._client.update_item(
                TableName=self._table,
                Key=layout.tenant_key(tenant_id),
                UpdateExpression=expression,
                ExpressionAttributeNames=names_in(expression),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        return bucket_of(answer.get("Attributes") or {})

    def usage(self, tenant_id: str, since: str) -> tuple[Usage, dict[str, Day]]:
        """What the tenant stores now (the running totals, as counted so far), and every day from `since`
        (`YYYY-MM-DD`) on that it has usage figures for: a GetItem of its own item and one Query of its day items
        from `since` (at most `RETENTION_DAYS` of them: DynamoDB's TTL removes older ones), so a read costs what
        its range holds, not the tenant's whole history."""
        days: dict[str, Day] = {}
        pk = layout.tenant_key(tenant_id)[schema.PK]
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND #sk >= :since",
            "ExpressionAttributeNames": {"#pk": schema.PK, "#sk": schema.SK},
            "ExpressionAttributeValues": {":pk": pk, ":since": {"S": f"{layout.USAGE_DAY_PREFIX}{since}"}},
        }
        with translated_errors():
            own = self._client.get_item(TableName=self._table, Key=layout.tenant_key(tenant_id)).get("Item")
            while True:
                answer = self._client.query(**request)
                for item in answer.get("Items", []):
                    day = day_of_item(item)
                    if day is not None:
                        days[day.day] = day
                if "LastEvaluatedKey" not in answer:
                    return (bucket_of(own).usage if own else Usage()), days
                request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def take(self, tenant_id: str, now_us: int, known: Bucket, defaults: Limits) -> Taken:
        """Take a share of the tenant's tokens (`Limits.share` of its limits as they are: a container that learns
        them from a refused condition asks for their share, not the defaults') at `now_us`, starting from what the
        container believes (`known`); a refused condition teaches it the item as it is.

        Each write carries a token of its own (`last`), refused once it is there: so the SDK's retry of a take that
        landed, its answer lost, never takes twice, and is recognised as landed by the token in the old image."""
        believed = known
        want: int | None = None
        read = False
        raced: Exception | None = None
        with translated_errors():
            for _ in range(MAX_TAKE_ATTEMPTS):
                limits = believed.settings.over(defaults)
                # After a refused condition near an empty bucket, ask for less: others are taking it too.
                want = limits.share if want is None else max(1, min(want // 2, limits.share))
                decided = take(believed.tat_us, now_us, want, limits)
                if decided.granted == 0 and not read and believed is known:
                    # A refusal decided from the container's memory: read the bucket once (its limits may have been
                    # raised, or other containers' takes have lapsed) before refusing.
                    believed, read = self.settings(tenant_id), True
                    want = None
                    continue
                if decided.granted == 0:
                    return Taken(0, believed, decided.retry_after_us)
                token = secrets.token_hex(8)
                request = self._take_request(tenant_id, believed, decided.granted, decided.tat_us, now_us, limits)
                request["UpdateExpression"] += f", #{LAST} = :token"
                request["ConditionExpression"] += f" AND (attribute_not_exists(#{LAST}) OR #{LAST} <> :token)"
                request["ExpressionAttributeNames"][f"#{LAST}"] = LAST
                request["ExpressionAttributeValues"][":token"] = to_attr(token)
                try:
                    answer = attempt(self._client.update_item, **request)
                except Exception as exc:
                    if classify(exc) is not Failure.RACE:
                        raise
                    # The stream consumer's count holds the item for a moment (`store/metering.py`): the same take
                    # again; a conflict that lasts is the table's failure (503), not the tenant's rate.
                    raced, want = exc, None
                    time.sleep(random.uniform(0, RACE_BACKOFF_SECONDS))
                    continue
                raced = None
                if isinstance(answer, Refused):
                    if answer.item.get(LAST, {}).get("S") == token:
                        return Taken(decided.granted, bucket_of(answer.item))  # ours, landed: its answer was lost
                    believed = bucket_of(answer.item)
                    continue
                return Taken(decided.granted, bucket_of(answer.get("Attributes") or {}))
            if raced is not None:
                raise raced
        # Other containers kept taking what was left between each read and write: the bucket is all but empty.
        return Taken(0, believed, 1_000_000)

    def _take_request(
        self, tenant_id: str, believed: Bucket, granted: int, new_tat_us: int, now_us: int, limits: Limits
    ) -> dict[str, Any]:
        version = f"attribute_not_exists(#{VERSION})" if believed.version == 0 else f"#{VERSION} = :version"
        values: dict[str, Any] = {":now": to_attr(now_us)}
        if believed.version:
            values[":version"] = to_attr(believed.version)
        if believed.tat_us is not None and skewed(believed.tat_us, now_us, limits):
            update = f"SET #{TAT} = :tat"
            condition = f"#{TAT} > :far AND {version}"
            values[":tat"] = to_attr(new_tat_us)
            values[":far"] = to_attr(now_us + limits.burst * limits.interval_us + SKEW_US)
            del values[":now"]
        elif believed.tat_us is None or believed.tat_us <= now_us:
            update = f"SET #{TAT} = :tat"
            condition = f"(attribute_not_exists(#{TAT}) OR #{TAT} <= :now) AND {version}"
            values[":tat"] = to_attr(new_tat_us)
        else:
            update = f"SET #{TAT} = #{TAT} + :add"
            condition = f"#{TAT} > :now AND #{TAT} <= :room AND {version}"
            values[":add"] = to_attr(granted * limits.interval_us)
            values[":room"] = to_attr(now_us + (limits.burst - granted) * limits.interval_us)
        return {
            "TableName": self._table,
            "Key": layout.tenant_key(tenant_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names_in(update, condition),
            "ExpressionAttributeValues": values,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
