"""The reaper function: each batch of the table's stream, one record at a time (`baton_checkpoints.store.reaping`
decides and does the work), then what the batch stores counted for its tenants (`baton_checkpoints.store.metering`).
A record that fails is reported in `batchItemFailures` by its sequence number, so Lambda retries it (and the records
after it in its shard) without failing the others; nothing raises out of the handler.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any, Final

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from baton_checkpoints.observability import logger
from baton_checkpoints.settings import SettingsError, environment_name, load_settings
from baton_checkpoints.store.aws import dynamodb_client, events_client, s3_client
from baton_checkpoints.store.change_events import Publisher, PublishFailed, echo_of
from baton_checkpoints.store.errors import TRANSIENT, classify, error_code
from baton_checkpoints.store.metering import Meter
from baton_checkpoints.store.reaping import Outcome, Reaper

SPARE_SECONDS: Final = 30.0
"""What a batch's deadline leaves of the invocation, after a last call in flight: the batch's change events and its
count (each a few tries at most), the answer and its log line."""


@cache
def reaper() -> Reaper:
    """The container's reaper, on its settings (validated by the first invocation); its clients are made when a
    record first needs them."""
    settings = load_settings()
    if settings.bucket_name is None:
        raise SettingsError(f"invalid environment: {environment_name('bucket_name')}: is required by the reaper")
    endpoint, dynamodb_endpoint = settings.aws_endpoint_url, settings.dynamodb_endpoint
    return Reaper(
        lambda: dynamodb_client(dynamodb_endpoint),
        lambda: s3_client(endpoint),
        settings.table_name,
        settings.bucket_name,
    )


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Reap one batch of DynamoDB stream records; the answer lists the records that failed (`batchItemFailures`)."""
    started = time.perf_counter()
    if not event.get("Records"):
        return {"batchItemFailures": []}  # Lambda never sends one; powertools would raise on it
    work = reaper()
    done = Outcome()
    deadline = _deadline(context)

    def reap_record(record: Any) -> None:
        raw = record.raw_event
        try:
            outcome = work.reap(raw, deadline)
        except Exception as exc:
            # Neither the keys (they hold subject ids) nor the images (they hold states) are logged. An AWS answer
            # says enough by its code; anything else (a transport failure, a defect) gets its traceback.
            code = error_code(exc)
            logger().warning(
                "stream record failed",
                exc_info=code is None,
                extra={
                    "sequence_number": raw.get("dynamodb", {}).get("SequenceNumber"),
                    "event_name": raw.get("eventName"),
                    "error": type(exc).__name__,
                    "error_code": code,
                },
            )
            raise
        for name in ("retagged", "deleted", "missing", "released", "kept"):
            getattr(done, name).extend(getattr(outcome, name))
        done.revisions_deleted += outcome.revisions_deleted
        done.thread_items_deleted += outcome.thread_items_deleted

    processor = BatchProcessor(EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    answer: dict[str, Any] = dict(
        process_partial_response(event=event, record_handler=reap_record, processor=processor, context=context)
    )
    records = event["Records"]
    settled = _before_first_failure(records, answer)
    published = _publish(records, settled, answer, deadline)
    meter = Meter(lambda: work.dynamodb, work.table)
    counted = _count(meter, records, settled, answer) if published is not None else None
    logger().info(
        "stream batch",
        extra={
            "records": len(event.get("Records", [])),
            "failed": len(answer["batchItemFailures"]),
            "retagged": len(done.retagged),
            "deleted": len(done.deleted),
            "missing": len(done.missing),
            "released": len(done.released),
            "kept": len(done.kept),
            "revisions_deleted": done.revisions_deleted,
            "thread_items_deleted": done.thread_items_deleted,
            "events_published": published,
            "tenants_counted": counted,
            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return answer


def _before_first_failure(records: list[dict[str, Any]], answer: dict[str, Any]) -> int:
    """How many records come before the batch's first failed one: Lambda sends that one and those after it again."""
    failed = {failure["itemIdentifier"] for failure in answer["batchItemFailures"]}
    return next((i for i, record in enumerate(records) if _sequence(record) in failed), len(records))


def _sequence(record: Any) -> Any:
    """A record's sequence number (None when the record has none where Lambda puts it)."""
    change = record.get("dynamodb") if isinstance(record, dict) else None
    return change.get("SequenceNumber") if isinstance(change, dict) else None


def _publish(records: list[dict[str, Any]], done: int, answer: dict[str, Any], deadline: float | None) -> int | None:
    """Publish the change events of the records before the first failure (`store/change_events.py`); how many.
    When EventBridge does not take them all, the whole batch is reported failed (Lambda sends it all again, and its
    events go again: at least once) and nothing is counted (None). A failure that no retry can mend (no such bus,
    no permission) is logged as an error and the batch goes on: events never hold up the reaping."""
    settings = load_settings()
    echo = echo_of(settings.events_echo, _echo_failed)
    if settings.event_bus_name is None and echo is None:
        return 0
    endpoint = settings.aws_endpoint_url
    publisher = Publisher(lambda: _events_client(endpoint), settings.event_bus_name, echo, _events_dropped)
    try:
        # The count and the answer need the time SPARE_SECONDS leaves after the deadline: publishing gets some of it
        return publisher.publish(records[:done], None if deadline is None else deadline + SPARE_SECONDS / 2)
    except Exception as exc:
        return None if _failed_for_now(exc, "change events not published", records, answer) else 0


@cache
def _events_client(endpoint: str | None) -> Any:
    return events_client(endpoint)


def _events_dropped(codes: list[str]) -> None:
    logger().error("change events refused for good, dropped", extra={"events": len(codes), "error_codes": codes})


def _echo_failed(url: str, exc: Exception) -> None:
    logger().warning("change events not echoed", extra={"url": url, "error": type(exc).__name__})


def _count(meter: Meter, records: list[dict[str, Any]], done: int, answer: dict[str, Any]) -> int | None:
    """Count what the records before the batch's first failure store, for their tenants (`store/metering.py`); the
    tenants counted. When the count fails for a moment (throttling, a conflict), the whole batch is reported failed:
    Lambda sends it all again (reaping a record again does nothing more), and nothing of it was counted. Any other
    failure is logged and the batch goes on uncounted: counting never holds up the reaping (None)."""
    try:
        return len(meter.count(records[:done]))
    except Exception as exc:
        _failed_for_now(exc, "stream batch not counted", records, answer)
        return None


def _failed_for_now(exc: Exception, message: str, records: list[dict[str, Any]], answer: dict[str, Any]) -> bool:
    """Log a failure of the batch's events or count. One that may pass (throttling, a conflict, an answer lost)
    reports the whole batch failed, so that Lambda sends it all again (True); any other is an error line, and the
    batch goes on."""
    transient = isinstance(exc, PublishFailed) or classify(exc) in TRANSIENT
    (logger().warning if transient else logger().error)(
        message,
        exc_info=error_code(exc) is None and not isinstance(exc, PublishFailed),
        extra={"error": type(exc).__name__, "error_code": error_code(exc), "retried": transient},
    )
    if transient:
        answer["batchItemFailures"] = [{"itemIdentifier": _sequence(records[0])}]
    return transient


def _deadline(context: Any) -> float | None:
    """When the records' work must stop (`time.monotonic()`), leaving `SPARE_SECONDS` of the invocation to answer:
    a record cut short is reported failed and retried. None without a Lambda context (`baton serve`, tests)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return time.monotonic() + max(0.0, float(remaining()) / 1000 - SPARE_SECONDS)
