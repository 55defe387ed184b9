"""The reaper of `baton serve`: its table's DynamoDB stream, read as Lambda's event source reads it on AWS
(`infra/components/reaper.py`), handed to `baton_checkpoints.handlers.reaper.handler` in batches, in order.

One background thread does it all, for the life of the server. A thread rather than a process: the work is waiting
on the stream and on the AWS endpoint (the GIL is free meanwhile), the thread shares the environment `baton serve`
prepared (table, bucket, endpoint, credentials), which is exactly the reaper's on AWS, and it stops through an event
checked between calls, with no process to spawn, warm or kill. The serve process runs no other function code (its
API requests run in container processes), so the handler's per-container state (`reaper()`, its clients) is this
thread's alone, as a container's is on AWS.

What the deployed event source mapping does, this does too, with its settings (a unit test holds them equal):
records arrive in stream order, a shard at a time, filtered as the deployed filter filters them (`wanted`), each in
the event form Lambda gives a function (`lambda_record`), at most `BATCH_SIZE` per invocation. When the answer's
`batchItemFailures` names a record, the batch is tried again from that record (ReportBatchItemFailures); when the
invocation fails whole (the function raises, or answers what Lambda cannot read), the batch is split in two and each
half tried on its own (BisectBatchOnFunctionError). A batch is tried at most `MAX_TRIES` times (MaximumRetryAttempts
`RETRY_ATTEMPTS`, plus the first) and then skipped with one ERROR line naming its shard and sequence range (on AWS
that range goes to the failure queue). Each invocation has the deployed timeout: the handler's own deadline cuts a
long record short as it would on AWS.

What it does beyond, because locally the stream and the API share one endpoint, whose moto serves one call at a
time (`local/moto_server.py`): every read and every call of the handler is one short call, so API requests take
turns with it; each GetRecords asks for `read_limit` records, from 1 up to `BATCH_SIZE`, grown while reads are quick
and cut in proportion when one holds the endpoint longer than `READ_TARGET_SECONDS` (a record's images can be
hundreds of KB); reads are not retried by the SDK (a call that timed out is still being served: sending it again
doubles the work) and fail after `READ_TIMEOUT_SECONDS`; after a failure it waits `backoff`, growing, capped and
jittered, never at once. What it does not: no batching window (locally a record should be reaped at once), no
parallel shards, no record age limit (a local stream is read from its start at every start anyway).
"""

from __future__ import annotations

import base64
import datetime
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from baton_checkpoints.store.reaping import STREAM_EVENT_NAMES, STREAM_ITEM_PREFIXES

Record = dict[str, Any]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

BATCH_SIZE: Final = 100
"""Records per invocation at most (the deployed event source's BatchSize); also the most a read asks for."""
RETRY_ATTEMPTS: Final = 10
"""The deployed event source's MaximumRetryAttempts."""
MAX_TRIES: Final = 1 + RETRY_ATTEMPTS
"""Invocations of a batch (the first and its retries) before it is logged and skipped."""
BISECT_ON_FUNCTION_ERROR: Final = True
"""The deployed event source's BisectBatchOnFunctionError."""
FUNCTION_TIMEOUT_SECONDS: Final = 120.0
"""The deployed function's timeout: what each invocation's context says is left of it at its start."""
POLL_SECONDS: Final = 0.5
"""How long the worker waits before reading again when the stream had nothing new."""
IDLE_POLLS: Final = 60
"""Empty reads in a row (about half a minute) after which the worker reads less often, `IDLE_POLL_SECONDS`: moto
keeps every shard iterator it hands out (a GetRecords makes one), about 2 KB each, for the server's life."""
IDLE_POLL_SECONDS: Final = 2.0
READ_LIMIT_START: Final = 1
"""Records the first GetRecords asks for: nothing is known yet of how long a record takes to read."""
READ_TARGET_SECONDS: Final = 0.25
"""How long one read should hold the endpoint at most: a read that takes longer asks for fewer records next."""
SLOW_READ_SECONDS: Final = 2.0
"""A read that took longer is logged (WARNING), with what the next one asks for."""
READ_TIMEOUT_SECONDS: Final = 10.0
"""How long a read may take before it fails (and the next asks for one record)."""
BACKOFF_SECONDS: Final = 0.5
"""The first wait after a failure (a batch's, or a read's); it doubles with each failure in a row, up to
`BACKOFF_CAP_SECONDS`, and a random part of up to half of it is taken off (so retries do not fall into step)."""
BACKOFF_CAP_SECONDS: Final = 5.0
STOP_SECONDS: Final = 2.0
"""How long stopping waits for the worker (a batch in flight, a call in flight); then the worker, a daemon thread,
is left to end with the process. Reaping is idempotent: what it did not finish is read again at the next start."""
FUNCTION_NAME: Final = "baton-reaper-local"
"""What the reaper's log lines name as their function (on AWS it has its own log group; here it shares the output)."""
EVENT_NAMES: Final = STREAM_EVENT_NAMES
ITEM_PREFIXES: Final = STREAM_ITEM_PREFIXES
"""What the deployed event source's filter lets through (`store/reaping.py` names them for both)."""


# -- the event form (pure) --------------------------------------------------------------------------------------


def event_form(value: Any) -> Any:
    """A stream record as botocore parses it (binary values as bytes, `ApproximateCreationDateTime` as a datetime)
    in the JSON form Lambda hands a function: binary as base64 text, the time as epoch seconds."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    if isinstance(value, Mapping):
        return {key: event_form(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [event_form(item) for item in value]
    return value


def lambda_record(record: Mapping[str, Any], stream_arn: str) -> Record:
    """One record of a DynamoDB Streams event, as Lambda builds it from a GetRecords record (which lacks only the
    stream's ARN)."""
    converted: Record = event_form(record)
    converted["eventSourceARN"] = stream_arn
    return converted


def wanted(record: Mapping[str, Any]) -> bool:
    """True when the deployed event source's filter lets the record reach the reaper: an INSERT, MODIFY or REMOVE of
    a checkpoint (its revisions included) or of a blob record."""
    if record.get("eventName") not in EVENT_NAMES:
        return False
    pk = ((record.get("dynamodb") or {}).get("Keys") or {}).get("pk", {}).get("S")
    return isinstance(pk, str) and pk.startswith(ITEM_PREFIXES)


def sequence_number(record: Mapping[str, Any]) -> str | None:
    """The record's sequence number (what `batchItemFailures` names it by)."""
    found = (record.get("dynamodb") or {}).get("SequenceNumber")
    return found if isinstance(found, str) else None


def first_failure(batch: Sequence[Mapping[str, Any]], answer: Any) -> int | None:
    """Where Lambda resumes a batch after the handler's answer: the index of the earliest record the answer names in
    `batchItemFailures` (None: the whole batch succeeded). An answer Lambda cannot read, or one naming a record
    the batch does not hold, fails the whole batch (index 0), as Lambda treats it."""
    if not isinstance(answer, Mapping):
        return 0
    failures = answer.get("batchItemFailures")
    if failures is None:
        return None
    if not isinstance(failures, list):
        return 0
    positions = {sequence_number(record): index for index, record in enumerate(batch)}
    found: list[int] = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
        if not isinstance(identifier, str) or identifier not in positions:
            return 0
        found.append(positions[identifier])
    return min(found) if found else None


def function_error(batch: Sequence[Mapping[str, Any]], answer: Any) -> bool:
    """True when Lambda counts the answer as the function's error, failing the whole batch (and bisecting it): an
    answer it cannot read, whose `batchItemFailures` is not a list or names a record the batch does not hold. A
    readable answer naming the batch's first record fails the whole batch too, but is no function error."""
    if not isinstance(answer, Mapping):
        return True
    failures = answer.get("batchItemFailures")
    if failures is None:
        return False
    if not isinstance(failures, list):
        return True
    held = {number for number in map(sequence_number, batch) if number is not None}
    return any(not isinstance(f, Mapping) or f.get("itemIdentifier") not in held for f in failures)


def backoff(tries: int, jitter: Callable[[], float] = random.random) -> float:
    """Seconds to wait after the `tries`-th failure in a row (1, 2, ...): `BACKOFF_SECONDS` doubling per failure up
    to `BACKOFF_CAP_SECONDS`, less a random part of up to half of it (`jitter()` is in [0, 1))."""
    ceiling = min(BACKOFF_SECONDS * 2 ** max(0, tries - 1), BACKOFF_CAP_SECONDS)
    return float(ceiling * (1 - jitter() / 2))


def next_read_limit(limit: int, returned: int, seconds: float) -> int:
    """How many records the next GetRecords asks for, after one that asked for `limit`, got `returned` and took
    `seconds`: cut in proportion (at least halved, at least 1) when it took longer than `READ_TARGET_SECONDS`,
    doubled (up to `BATCH_SIZE`) when it came back full in under half of it. An empty read says nothing of what
    records cost (its time was waiting for the endpoint): the limit stays."""
    if returned <= 0:
        return limit
    if seconds > READ_TARGET_SECONDS:
        affordable = int(READ_TARGET_SECONDS * returned / seconds)
        return max(1, min(limit // 2, affordable))
    if returned >= limit and seconds <= READ_TARGET_SECONDS / 2:
        return min(BATCH_SIZE, limit * 2)
    return limit


# -- reading the stream -----------------------------------------------------------------------------------------


class NoStream(Exception):
    """The table has no stream this endpoint serves (a table created without one, DynamoDB Local without streams)."""


def streams_client(endpoint_url: str | None) -> Any:
    """A DynamoDB Streams client on the endpoint that never sends a call twice: a read that timed out is still being
    served (on a serialized moto, ahead of every API request), so the worker, not the SDK, tries again, later."""
    import botocore.session
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 1}, connect_timeout=2, read_timeout=READ_TIMEOUT_SECONDS
    )
    # No stubs of this client are installed (mypy_boto3_dynamodbstreams): it is typed Any.
    return botocore.session.get_session().create_client("dynamodbstreams", endpoint_url=endpoint_url, config=config)


def stream_of(dynamodb: Any, streams: Any, table: str) -> str:
    """The ARN of the table's stream, once the endpoint has shown it can describe it; else `NoStream`."""
    try:
        described = dynamodb.describe_table(TableName=table)["Table"]
        arn = described.get("LatestStreamArn")
        enabled = (described.get("StreamSpecification") or {}).get("StreamEnabled", arn is not None)
        if not arn or not enabled:
            raise NoStream(f"the table {table} has no stream")
        streams.describe_stream(StreamArn=arn, Limit=1)
    except NoStream:
        raise
    except Exception as exc:
        raise NoStream(f"its stream cannot be read ({type(exc).__name__}: {exc})") from exc
    return str(arn)


@dataclass(frozen=True)
class Page:
    """What one read found: the next records (GetRecords' form) of one shard; none when no shard had any."""

    shard_id: str
    records: list[Record] = field(default_factory=list)


class ShardReader:
    """Reads a stream's records in order: every shard from its start (TRIM_HORIZON, as the deployed event source
    starts), a parent shard to its end before its children; each `read` answers the next records of one shard."""

    def __init__(self, client: Any, stream_arn: str) -> None:
        self._client = client
        self.stream_arn = stream_arn
        self._iterators: dict[str, str] = {}
        """Open shards being read, parents first, and the iterator of each one's next records."""
        self._finished: set[str] = set()
        self._last: dict[str, str] = {}
        """Per shard, the sequence number of the last record read (where an expired iterator resumes)."""

    def read(self, limit: int = BATCH_SIZE) -> list[Record]:
        """The next records (GetRecords' form, at most `limit`) of the first shard that has some; [] when none has."""
        return self.read_page(limit).records

    def read_page(self, limit: int = BATCH_SIZE) -> Page:
        """The next records (at most `limit`) of the first shard that has some, with the shard's id; a page without
        records when none has."""
        if not self._iterators:
            self._discover()
        for shard_id in list(self._iterators):
            records = self._read_shard(shard_id, limit)
            if records:
                return Page(shard_id, records)
        return Page("")

    def _read_shard(self, shard_id: str, limit: int) -> list[Record]:
        from baton_checkpoints.store.errors import error_code

        try:
            answer = self._client.get_records(ShardIterator=self._iterators[shard_id], Limit=limit)
        except Exception as exc:
            if error_code(exc) not in ("ExpiredIteratorException", "TrimmedDataAccessException"):
                raise
            # Iterators expire after 15 minutes on AWS; start again after the last record read (or from the start).
            last = self._last.get(shard_id) if error_code(exc) == "ExpiredIteratorException" else None
            self._iterators[shard_id] = self._iterator(shard_id, last)
            return []
        records = [dict(record) for record in answer.get("Records", [])]
        if records:
            last = sequence_number(records[-1])
            if last is not None:
                self._last[shard_id] = last
        following = answer.get("NextShardIterator")
        if following:
            self._iterators[shard_id] = following
        else:
            # A closed shard read to its end: its children may be read now.
            del self._iterators[shard_id]
            self._finished.add(shard_id)
        return records

    def _discover(self) -> None:
        """Open every shard not read yet whose parent is read to its end (or is no longer listed: trimmed)."""
        shards: list[Mapping[str, Any]] = []
        request: dict[str, Any] = {"StreamArn": self.stream_arn}
        while True:
            described = self._client.describe_stream(**request)["StreamDescription"]
            shards.extend(described.get("Shards", []))
            start = described.get("LastEvaluatedShardId")
            if not start:
                break
            request["ExclusiveStartShardId"] = start
        listed = {str(shard["ShardId"]) for shard in shards}
        for shard in shards:
            shard_id, parent = str(shard["ShardId"]), shard.get("ParentShardId")
            if shard_id in self._finished or shard_id in self._iterators:
                continue
            if parent is None or parent in self._finished or parent not in listed:
                self._iterators[shard_id] = self._iterator(shard_id, None)

    def _iterator(self, shard_id: str, after: str | None) -> str:
        if after is None:
            answer = self._client.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )
        else:
            answer = self._client.get_shard_iterator(
                StreamArn=self.stream_arn,
                ShardId=shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=after,
            )
        return str(answer["ShardIterator"])


# -- the worker -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """Records of one shard handed to the function together, and how many times they were (`tries`)."""

    shard_id: str
    records: list[Record]
    tries: int = 0

    def range(self) -> tuple[str, str]:
        """The sequence numbers of its first and last records."""
        return sequence_number(self.records[0]) or "?", sequence_number(self.records[-1]) or "?"


@dataclass(frozen=True)
class Skipped:
    """A batch given up on: its shard, its sequence range, how many records and tries."""

    shard_id: str
    first: str
    last: str
    records: int
    tries: int


class StreamReaper:
    """The background worker: reads (`read(limit)`: a page of at most `limit` raw records), filters, converts and
    hands batches to `handler`, retrying, bisecting and skipping failed batches as the deployed event source does,
    until `stop`."""

    def __init__(
        self,
        read: Callable[[int], Page],
        stream_arn: str,
        handler: Handler | None = None,
        poll_seconds: float = POLL_SECONDS,
        backoff_of: Callable[[int], float] = backoff,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._stream_arn = stream_arn
        self._handler = handler
        self._poll_seconds = poll_seconds
        self._backoff_of = backoff_of
        self._clock = clock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reaper", daemon=True)
        self._batches: list[Batch] = []
        """Records read and not done yet, in stream order (a bisected batch is two)."""
        self._read_failures = 0
        self._empty_reads = 0
        self.read_limit = READ_LIMIT_START
        """How many records the next read asks for (`next_read_limit`)."""
        self.invocations = 0
        """Batches handed to the handler so far (retries included)."""
        self.skipped: list[Skipped] = []
        """The batches given up on."""

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the worker to stop: it does after the call in flight, before any other read, invocation or wait."""
        self._stopping.set()

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Ask the worker to stop and wait for it, at most `timeout` seconds; True when it stopped in time (else it
        is left to end with the process: it is a daemon thread)."""
        self.request_stop()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        from baton_checkpoints.observability import logger

        # Only this thread's lines carry the function's name: other threads of the process log nothing of it.
        logger().thread_safe_append_keys(function_name=FUNCTION_NAME)
        while not self._stopping.is_set():
            try:
                waited = self.step()
            except Exception:  # a defect here must not end the reaping for the server's whole life
                logger().exception("reaper worker failed; it carries on after a pause")
                waited = BACKOFF_CAP_SECONDS
            if waited:
                self._stopping.wait(waited)

    def step(self) -> float:
        """One round: read when nothing is pending, else invoke the handler on the first pending batch; returns how
        long to wait before the next round (0: at once)."""
        if not self._batches:
            page = self._fetch()
            if page is None:
                return self._backoff_of(self._read_failures)
            if not page.records:
                self._empty_reads += 1
                return (
                    self._poll_seconds if self._empty_reads < IDLE_POLLS else max(self._poll_seconds, IDLE_POLL_SECONDS)
                )
            self._empty_reads = 0
            records = [lambda_record(r, self._stream_arn) for r in page.records if wanted(r)]
            if not records:
                return 0.0
            self._batches.append(Batch(page.shard_id, records))
            if self._stopping.is_set():
                return 0.0  # read, not handed over: the next start reads it again
        return self._invoke()

    def _fetch(self) -> Page | None:
        """The next page, or None when reading failed (logged on the first failure of a run of them); the limit of
        the next read follows what this one cost."""
        from baton_checkpoints.observability import logger

        asked = self.read_limit
        started = self._clock()
        try:
            page = self._read(asked)
        except Exception as exc:
            self._read_failures += 1
            self.read_limit = 1
            if self._read_failures == 1:
                logger().warning(
                    "the table's stream cannot be read; the reaper tries again, one record at a time, after a "
                    "growing pause",
                    extra={"error": type(exc).__name__, "detail": str(exc)[:300]},
                )
            return None
        seconds = self._clock() - started
        if self._read_failures:
            logger().info("the table's stream can be read again")
            self._read_failures = 0
        self.read_limit = next_read_limit(asked, len(page.records), seconds)
        if seconds > SLOW_READ_SECONDS:
            logger().warning(
                "a stream read held the AWS endpoint long; the next reads ask for fewer records",
                extra={"seconds": round(seconds, 2), "records": len(page.records), "read_limit": self.read_limit},
            )
        return page

    def _invoke(self) -> float:
        from baton_checkpoints.observability import logger

        batch = self._batches[0]
        self.invocations += 1
        # Each invocation has its own request id, as on Lambda, so a batch's lines can be told from the next's.
        request_id = str(uuid.uuid4())
        logger().thread_safe_append_keys(lambda_request_id=request_id)
        errored = False
        try:
            answer: Any = self._handler_function()({"Records": batch.records}, invocation_context(request_id))
        except Exception:
            logger().exception("the reaper function failed on a batch", extra={"records": len(batch.records)})
            answer, errored = None, True
        finally:
            logger().thread_safe_remove_keys(["lambda_request_id"])
        failed = first_failure(batch.records, answer)
        if failed is None:
            self._batches.pop(0)
            return 0.0
        if failed > 0:
            # The records before it are done: the rest is a batch of its own, which has failed once.
            retry = Batch(batch.shard_id, batch.records[failed:], 1)
        else:
            retry = Batch(batch.shard_id, batch.records, batch.tries + 1)
            whole = errored or function_error(batch.records, answer)
            if whole and BISECT_ON_FUNCTION_ERROR and len(batch.records) > 1 and retry.tries < MAX_TRIES:
                # Each half keeps the count: no record is tried more than `MAX_TRIES` times.
                half = (len(batch.records) + 1) // 2
                self._batches[0:1] = [
                    Batch(batch.shard_id, batch.records[:half], retry.tries),
                    Batch(batch.shard_id, batch.records[half:], retry.tries),
                ]
                return self._backoff_of(retry.tries)
        if retry.tries >= MAX_TRIES:
            self._skip(retry)
            self._batches.pop(0)
            return 0.0
        self._batches[0] = retry
        return self._backoff_of(retry.tries)

    def _skip(self, batch: Batch) -> None:
        from baton_checkpoints.observability import logger

        first, last = batch.range()
        logger().error(
            f"the reaper gave up on {len(batch.records)} stream records of shard {batch.shard_id} ({first} to "
            f"{last}) after {batch.tries} tries and skips them; objects they name may be left behind",
            extra={
                "shard_id": batch.shard_id,
                "first_sequence_number": first,
                "last_sequence_number": last,
                "records": len(batch.records),
                "tries": batch.tries,
            },
        )
        self.skipped.append(Skipped(batch.shard_id, first, last, len(batch.records), batch.tries))

    def _handler_function(self) -> Handler:
        if self._handler is None:
            from baton_checkpoints.handlers.reaper import handler

            self._handler = handler
        return self._handler


def invocation_context(request_id: str) -> Any:
    """The context of one invocation, as Lambda gives it: the function's names and `FUNCTION_TIMEOUT_SECONDS` left."""
    from baton_checkpoints.local.gateway import LambdaContext

    return LambdaContext(
        aws_request_id=request_id,
        function_name=FUNCTION_NAME,
        invoked_function_arn=f"arn:aws:lambda:local:000000000000:function:{FUNCTION_NAME}",
        log_group_name=f"/aws/lambda/{FUNCTION_NAME}",
        deadline_ms=int(time.time() * 1000 + FUNCTION_TIMEOUT_SECONDS * 1000),
    )


def start_reaper(dynamodb: Any, endpoint_url: str | None, table: str) -> StreamReaper:
    """Start reaping the table's stream with `baton_checkpoints.handlers.reaper.handler` (whose table and bucket come
    from the
    environment, as on AWS); `NoStream` when the endpoint has none for it."""
    client = streams_client(endpoint_url)
    arn = stream_of(dynamodb, client, table)
    reader = ShardReader(client, arn)
    worker = StreamReaper(reader.read_page, arn)
    worker.start()
    return worker
