"""A tenant's usage by day (`domain/usage.py`), kept in its day items `L#<tenant>` / `U#<YYYY-MM-DD>`.

**What a container counts.** While it serves an admitted request, the request's `Counts` is the current one (a
context variable): the store's DynamoDB client asks DynamoDB for the capacity each request consumed
(`ReturnConsumedCapacity`, the units DynamoDB bills by) and adds it, and `store/objects.py` adds each S3 request,
its bytes, and the presigned URLs it hands out. The rate limit's takes and the counts' own writes are made outside
any request's counting, so they are not the tenant's.

**When it is written.** Never once per request: the container holds a tenant's counts of a day and adds them to the
day's item in one UpdateItem (`ADD`) once they hold `flush_requests` requests or their oldest is `flush_seconds`
old, at the end of whichever request finds them due (at most `MAX_FLUSHES` per request). A write that fails keeps
the counts, not tried again for `flush_seconds`. What a container holds when Lambda reclaims it is lost:
`flush_requests` requests or `flush_seconds` of them per tenant, more after failed writes.

**What the stream adds.** The consumer adds each day's change of what the tenant stores (`db`, `dc`, `dt`) to the
same day item, in the transaction that adds it to the tenant's totals (`store/metering.py`); a read takes the
totals and the days in one Query of the tenant's partition.
"""

from __future__ import annotations

import calendar
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from msgspec import Struct, field

from baton_checkpoints.domain.usage import RETENTION_DAYS, Counts, Day, Usage
from baton_checkpoints.observability import logger
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item
from baton_checkpoints.store.errors import Failure, classify

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import UpdateTypeDef

REQUESTS_PREFIX: Final = "r_"
"""A day item's count of requests of one route family: `r_<family>`."""
COUNTS: Final = {
    "read_units": "ru",
    "write_units": "wu",
    "s3_requests": "sq",
    "s3_bytes_written": "sw",
    "s3_bytes_read": "sr",
    "presigned_urls": "pu",
    "presigned_upload_bytes": "pb",
}
"""Each of `Counts`' other figures, by its attribute in a day item."""
STORED: Final = {"stored_bytes": "db", "checkpoints": "dc", "threads": "dt"}
"""The day's change of what the tenant stores (`Usage`'s fields), by its attribute: the stream consumer's."""
LAST: Final = "last"
"""The token of the last container write that landed on a day item (see `UsageMeter._write`)."""
MAX_FLUSHES: Final = 4
WRITE_ATTEMPTS: Final = 3
"""Tries of one write that meets the stream consumer's transaction on the same day item."""
RACE_BACKOFF_SECONDS: Final = 0.02
"""Most day items one request's end writes (others due wait for the next request)."""
RETENTION_SECONDS: Final = RETENTION_DAYS * 86_400

READS: Final = frozenset({"GetItem", "Query", "BatchGetItem", "TransactGetItems"})
"""The read operations the store makes (it never scans)."""
WRITES: Final = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_METERED: Final = READS | WRITES
"""The operations asked for their consumed capacity (built once: the hook runs before every request)."""

_current: ContextVar[Counts | None] = ContextVar("baton_usage", default=None)


def _ttl(day: str) -> int:
    """The day item's expiry: `RETENTION_DAYS` after the day began (UTC), in epoch seconds."""
    return calendar.timegm(time.strptime(day, "%Y-%m-%d")) + RETENTION_SECONDS


def day_update(
    table: str, tenant_id: str, day: str, counts: Counts | None = None, stored: Usage | None = None
) -> UpdateTypeDef:
    """The update that adds `counts` (a container's) or `stored` (the stream's change) to the tenant's day item."""
    added: dict[str, int | float] = {}
    if counts is not None:
        added.update({f"{REQUESTS_PREFIX}{family}": n for family, n in counts.requests.items() if n})
        added.update({attribute: getattr(counts, name) for name, attribute in COUNTS.items() if getattr(counts, name)})
    if stored is not None:
        added.update({attribute: getattr(stored, name) for name, attribute in STORED.items() if getattr(stored, name)})
    names = {f"#a{n}": attribute for n, attribute in enumerate(added)}
    values: dict[str, Any] = {f":a{n}": {"N": _number(value)} for n, value in enumerate(added.values())}
    expression = f"SET #ttl = :ttl ADD {', '.join(f'#a{n} :a{n}' for n in range(len(added)))}"
    names["#ttl"] = schema.TTL_ATTRIBUTE
    values[":ttl"] = {"N": str(_ttl(day))}
    return {
        "TableName": table,
        "Key": layout.usage_day_key(tenant_id, day),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _number(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def day_of_item(item: Item) -> Day | None:
    """A day item read back (None for the partition's other items)."""
    sk = item.get(schema.SK, {}).get("S", "")
    if not sk.startswith(layout.USAGE_DAY_PREFIX):
        return None
    requests = {
        name.removeprefix(REQUESTS_PREFIX): int(value["N"])
        for name, value in item.items()
        if name.startswith(REQUESTS_PREFIX) and "N" in value
    }
    counts = Counts(requests)
    for name, attribute in COUNTS.items():
        if attribute in item:
            number = float(item[attribute]["N"])
            setattr(counts, name, number if isinstance(getattr(counts, name), float) else int(number))
    stored = Usage(**{name: int(item[attribute]["N"]) for name, attribute in STORED.items() if attribute in item})
    return Day(sk.removeprefix(layout.USAGE_DAY_PREFIX), counts, stored)


# -- counting, while a request is served ------------------------------------------------------------------------------


def s3_request(written: int = 0, read: int = 0, requests: int = 1) -> None:
    """Count an S3 request made for the current request (answered or not, S3 bills it), and the bytes of its body."""
    counts = _current.get()
    if counts is not None:
        counts.s3_requests += requests
        counts.s3_bytes_written += written
        counts.s3_bytes_read += read


def presigned(upload_bytes: int = 0) -> None:
    """Count one presigned URL handed to the current request's caller (an upload's, admitting `upload_bytes`)."""
    counts = _current.get()
    if counts is not None:
        counts.presigned_urls += 1
        counts.presigned_upload_bytes += upload_bytes


def _ask_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
    if _current.get() is not None and model.name in _METERED:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")


def _add_capacity(parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
    counts = _current.get()
    if counts is None:
        return
    consumed = parsed.get("ConsumedCapacity")
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    units = 0.0
    for entry in entries:
        value = entry.get("CapacityUnits") if isinstance(entry, dict) else None
        if isinstance(value, int | float):
            units += value
    if model.name in READS:
        counts.read_units += units
    elif model.name in WRITES:
        counts.write_units += units


def watch(client: DynamoDBClient) -> None:
    """Make `client`'s requests report and count the capacity they consume while a request is being counted."""
    events = client.meta.events
    events.register("before-parameter-build.dynamodb", _ask_capacity, unique_id="baton-usage-ask")
    events.register("after-call.dynamodb", _add_capacity, unique_id="baton-usage-add")


# -- the container's counts of its tenants ----------------------------------------------------------------------------


class _Held(Struct):
    counts: Counts = field(default_factory=Counts)
    requests: int = 0
    since: float = 0.0
    retry_at: float = 0.0
    """After a write of these counts failed: not before then (a throttled table is not asked again at once)."""


class Counting(Struct, frozen=True):
    """One request being counted (`UsageMeter.begin`)."""

    tenant_id: str
    day: str
    counts: Counts
    token: Any


class UsageMeter:
    """What one container counted of its tenants' usage and has not yet written."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        flush_requests: int,
        flush_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._table = table_name
        self._flush_requests = flush_requests
        self._flush_seconds = flush_seconds
        self._clock = clock
        self._held: dict[tuple[str, str], _Held] = {}
        self._lock = threading.Lock()

    def begin(self, tenant_id: str, family: str, day: str) -> Counting:
        """Count a request of `family` admitted for `tenant_id` on `day`, and what is done serving it, until `end`."""
        counts = Counts({family: 1})
        return Counting(tenant_id, day, counts, _current.set(counts))

    def end(self, counting: Counting) -> None:
        """Stop counting the request; add its counts to the container's, and write those that are due."""
        _current.reset(counting.token)
        now = self._clock()
        with self._lock:
            held = self._held.setdefault((counting.tenant_id, counting.day), _Held(since=now))
            held.counts.add(counting.counts)
            held.requests += 1
            due = [
                key
                for key, held in self._held.items()
                if now >= held.retry_at
                and (
                    key[1] != counting.day
                    or held.requests >= self._flush_requests
                    or now - held.since >= self._flush_seconds
                )
            ]
            # At most MAX_FLUSHES writes end one request; the others stay held for the next.
            writing = [(key, self._held.pop(key)) for key in due[:MAX_FLUSHES]]
        for (tenant_id, day), held in writing:
            self._write(tenant_id, day, held, now)

    @contextmanager
    def request(self, tenant_id: str, family: str, day: str) -> Iterator[Counts]:
        """`begin` and `end` around a block."""
        counting = self.begin(tenant_id, family, day)
        try:
            yield counting.counts
        finally:
            self.end(counting)

    def flush(self, deadline: float | None = None) -> int:
        """Write everything held now, one write after another until `deadline` (`time.monotonic()`; None: all):
        the tests', and the container's last act when Lambda shuts it down. The writes made (what was not written
        stays held). With a deadline it waits for the counts no longer than that (then TimeoutError): a signal
        handler runs in the thread it interrupted, which may hold them."""
        if not self._lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            raise TimeoutError("the usage counts are held by another thread until past the deadline")
        try:
            due, self._held = list(self._held.items()), {}
        finally:
            self._lock.release()
        written = 0
        for n, ((tenant_id, day), held) in enumerate(due):
            if deadline is not None and time.monotonic() >= deadline:
                with self._lock:
                    for key, left in due[n:]:
                        self._held.setdefault(key, left)
                break
            self._write(tenant_id, day, held)
            written += 1
        return written

    def _write(self, tenant_id: str, day: str, held: _Held, now: float | None = None) -> None:
        """Add `held` to the day's item: one UpdateItem carrying a token of its own, refused once the item holds it,
        so the SDK's retry of a write that landed (its answer lost) adds nothing twice, unless another container's
        write landed on the same item in between (within the retry's second: the residual double count, documented;
        a transaction's request token would close it, but moto copies the whole table for each transaction, which
        `baton serve` would pay on every request). A write that fails keeps the counts, not to be tried again before
        `flush_seconds` (at least a second) have passed."""
        token = secrets.token_hex(16)
        update: dict[str, Any] = dict(day_update(self._table, tenant_id, day, held.counts))
        update["UpdateExpression"] = update["UpdateExpression"].replace("SET ", f"SET #{LAST} = :token, ", 1)
        update["ConditionExpression"] = f"attribute_not_exists(#{LAST}) OR #{LAST} <> :token"
        update["ExpressionAttributeNames"] = {**update["ExpressionAttributeNames"], f"#{LAST}": LAST}
        update["ExpressionAttributeValues"] = {**update["ExpressionAttributeValues"], ":token": {"S": token}}
        try:
            for attempt in range(WRITE_ATTEMPTS):
                try:
                    self._client.update_item(**update)
                    break
                except Exception as exc:
                    failure = classify(exc)
                    if failure is Failure.CONDITION_FAILED:
                        break  # refused only where the item holds this very token: it landed, its answer lost
                    if failure is not Failure.RACE or attempt + 1 == WRITE_ATTEMPTS:
                        raise
                    # The stream consumer's count holds the day item for a moment: the same write again.
                    time.sleep(random.uniform(0, RACE_BACKOFF_SECONDS))
        except Exception:
            # Never the request's failure (its answer is made): the counts wait for a later write.
            logger().warning(
                "usage counts not written; kept for a later write",
                extra={"tenant_id": tenant_id, "day": day},
                exc_info=True,
            )
            moment = self._clock() if now is None else now
            with self._lock:
                kept = self._held.setdefault((tenant_id, day), _Held(since=held.since))
                kept.counts.add(held.counts)
                kept.requests += held.requests
                kept.retry_at = moment + max(1.0, self._flush_seconds)
