"""The reaper of `baton serve`: its table's DynamoDB stream, read as Lambda's event source reads it on AWS
(`infra/components/reaper.py`), handed to `baton.handlers.reaper.handler` in batches, in order.

One background thread does it all, for the life of the server. A thread rather than a process: the work is waiting
on the stream and on the AWS endpoint (the GIL is free meanwhile), the thread shares the environment `baton serve`
prepared (table, bucket, endpoint, credentials), which is exactly the reaper's on AWS, and it stops within one poll
interval through an event, with no process to spawn, warm or kill. The serve process runs no other function code
(its API requests run in container processes), so the handler's per-container state (`reaper()`, its clients) is
this thread's alone, as a container's is on AWS.

What Lambda's event source mapping does and this does too: records arrive in stream order, a shard at a time, in
batches of at most `BATCH_SIZE`, filtered as the deployed filter filters them (`wanted`), each in the event form
Lambda gives a function (`lambda_record`). When the answer's `batchItemFailures` names a record, the batch is tried
again from that record (ReportBatchItemFailures), after a bounded backoff; a record that fails `MAX_TRIES` times is
logged and skipped (on AWS it would go to the failure queue). What it does not: no batching window (locally a
record should be reaped at once), no parallel shards.
"""

from __future__ import annotations

import base64
import datetime
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from baton.store.reaping import STREAM_EVENT_NAMES, STREAM_ITEM_PREFIXES

Record = dict[str, Any]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

BATCH_SIZE: Final = 100
"""Records per invocation at most (the deployed event source's batch size)."""
POLL_SECONDS: Final = 0.5
"""How long the worker waits before reading again when the stream had nothing new."""
IDLE_POLLS: Final = 60
"""Empty reads in a row (about half a minute) after which the worker reads less often, `IDLE_POLL_SECONDS`: moto
keeps every shard iterator it hands out (a GetRecords makes one), about 2 KB each, for the server's life."""
IDLE_POLL_SECONDS: Final = 2.0
MAX_TRIES: Final = 4
"""Invocations a record may fail before it is logged and skipped."""
BACKOFF_SECONDS: Final = 0.5
"""The first wait before a failed batch is tried again; it doubles with each try, up to `BACKOFF_CAP_SECONDS`."""
BACKOFF_CAP_SECONDS: Final = 5.0
STOP_SECONDS: Final = 15.0
"""How long stopping waits for a batch in flight (the AWS clients' own timeouts bound it)."""
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


def backoff(tries: int) -> float:
    """Seconds to wait after the `tries`-th failed invocation of the same record (1, 2, ...)."""
    return float(min(BACKOFF_SECONDS * 2 ** max(0, tries - 1), BACKOFF_CAP_SECONDS))


# -- reading the stream -----------------------------------------------------------------------------------------


class NoStream(Exception):
    """The table has no stream this endpoint serves (a table created without one, DynamoDB Local without streams)."""


def streams_client(endpoint_url: str | None) -> Any:
    """A DynamoDB Streams client on the endpoint, with the store's short timeouts."""
    import botocore.session
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=5)
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
        """The next records (GetRecords' form) of the first shard that has some; [] when none has."""
        if not self._iterators:
            self._discover()
        for shard_id in list(self._iterators):
            records = self._read_shard(shard_id, limit)
            if records:
                return records
        return []

    def _read_shard(self, shard_id: str, limit: int) -> list[Record]:
        from baton.store.errors import error_code

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


class StreamReaper:
    """The background worker: reads (`read`: the next raw records, [] when there are none), filters, converts and
    hands batches to `handler`, retrying a failed record from where the answer says, until `stop`."""

    def __init__(
        self,
        read: Callable[[], list[Record]],
        stream_arn: str,
        handler: Handler | None = None,
        poll_seconds: float = POLL_SECONDS,
        backoff_of: Callable[[int], float] = backoff,
    ) -> None:
        self._read = read
        self._stream_arn = stream_arn
        self._handler = handler
        self._poll_seconds = poll_seconds
        self._backoff_of = backoff_of
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reaper", daemon=True)
        self._pending: list[Record] = []
        self._tries = 0
        self._read_failing = False
        self._empty_reads = 0
        self.invocations = 0
        """Batches handed to the handler so far (retries included)."""
        self.skipped: list[str] = []
        """Sequence numbers of the records given up on."""

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Ask the worker to stop after the batch in flight and wait for it; True when it stopped in time."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        from baton.observability import logger

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
        """One round: read when nothing is pending, else invoke the handler on what is; returns how long to wait
        before the next round (0: at once)."""
        if not self._pending:
            fetched = self._fetch()
            if fetched is None:
                return BACKOFF_CAP_SECONDS
            if not fetched:
                self._empty_reads += 1
                return (
                    self._poll_seconds if self._empty_reads < IDLE_POLLS else max(self._poll_seconds, IDLE_POLL_SECONDS)
                )
            self._empty_reads = 0
            self._pending = [lambda_record(r, self._stream_arn) for r in fetched if wanted(r)]
            self._tries = 0
            if not self._pending:
                return 0.0
        return self._invoke()

    def _fetch(self) -> list[Record] | None:
        """The next records, or None when reading failed (logged on the first failure of a run of them)."""
        from baton.observability import logger

        try:
            records = self._read()
        except Exception as exc:
            if not self._read_failing:
                logger().warning(
                    "the table's stream cannot be read; the reaper tries again every few seconds",
                    extra={"error": type(exc).__name__, "detail": str(exc)[:300]},
                )
            self._read_failing = True
            return None
        if self._read_failing:
            logger().info("the table's stream can be read again")
            self._read_failing = False
        return records

    def _invoke(self) -> float:
        from baton.observability import logger

        batch = self._pending
        self.invocations += 1
        # Each invocation has its own request id, as on Lambda, so a batch's lines can be told from the next's.
        logger().thread_safe_append_keys(lambda_request_id=str(uuid.uuid4()))
        try:
            answer: Any = self._handler_function()({"Records": batch}, None)
        except Exception:
            logger().exception("the reaper function failed on a batch", extra={"records": len(batch)})
            answer = None
        finally:
            logger().thread_safe_remove_keys(["lambda_request_id"])
        failed = first_failure(batch, answer)
        if failed is None:
            self._pending, self._tries = [], 0
            return 0.0
        if failed > 0:
            self._tries = 0  # the earlier records are done: the count starts again for the one that failed
        self._pending = batch[failed:]
        self._tries += 1
        if self._tries < MAX_TRIES:
            return self._backoff_of(self._tries)
        given_up = self._pending[0]
        number = sequence_number(given_up) or "?"
        logger().error(
            f"the reaper gave up on a stream record after {MAX_TRIES} tries and skips it; objects it names may be "
            "left behind",
            extra={"sequence_number": number, "event_name": given_up.get("eventName")},
        )
        self.skipped.append(number)
        self._pending, self._tries = self._pending[1:], 0
        return 0.0

    def _handler_function(self) -> Handler:
        if self._handler is None:
            from baton.handlers.reaper import handler

            self._handler = handler
        return self._handler


def start_reaper(dynamodb: Any, endpoint_url: str | None, table: str) -> StreamReaper:
    """Start reaping the table's stream with `baton.handlers.reaper.handler` (whose table and bucket come from the
    environment, as on AWS); `NoStream` when the endpoint has none for it."""
    client = streams_client(endpoint_url)
    arn = stream_of(dynamodb, client, table)
    reader = ShardReader(client, arn)
    worker = StreamReaper(reader.read, arn)
    worker.start()
    return worker
