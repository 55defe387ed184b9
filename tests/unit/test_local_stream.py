"""`baton serve`'s reaper worker (`baton.local.stream`), without AWS: GetRecords records turned into the event
form Lambda hands the reaper, the deployed filter, and the batches, retries and give-ups of ReportBatchItemFailures.

The records are shaped as botocore parses GetRecords (binary values as bytes, the time as a datetime); the handler
of the worker tests is a script of answers (which records fail), so what is tested is the worker's own schedule.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest

from baton.local import stream
from baton.store import layout, reaping
from tests.proof_counts import record

SUITE = "serve reaper (unit)"
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/baton-local/stream/2026-12-01T00:00:00.000"
PK, SK = layout.checkpoint_pk("acme", "ticket-1"), layout.checkpoint_sk("operator", "task_state")
CLAIM = b"\x11\x00\xff" * 3
STATE = "blobs/acme/states/9f0c4b6e2a7d4e1b8c3f5a6d7e8f9012"


def get_records_record(
    number: int, event: str = "MODIFY", pk: str = PK, sk: str = SK, new_state: str | None = None
) -> dict[str, Any]:
    """One record as botocore gives it from GetRecords: NEW_AND_OLD_IMAGES, a binary claim, a datetime."""
    old = {"pk": {"S": pk}, "sk": {"S": sk}, "so": {"S": STATE}, "cr": {"B": CLAIM}, "tags": {"BS": [b"\x00", b"a"]}}
    new = {"pk": {"S": pk}, "sk": {"S": sk}, "r0": {"B": CLAIM}, "n": {"N": "2"}}
    if new_state is not None:
        new["so"] = {"S": new_state}
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": datetime.datetime(2026, 12, 1, 14, 30, 5, tzinfo=datetime.UTC),
        "Keys": {"pk": {"S": pk}, "sk": {"S": sk}},
        "SequenceNumber": str(1100000000017454423009 + number),
        "SizeBytes": 120,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if event != "INSERT":
        change["OldImage"] = old
    if event != "REMOVE":
        change["NewImage"] = new
    return {
        "eventID": f"event-{number}",
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": change,
    }


# -- the event form ---------------------------------------------------------------------------------------------


def test_a_record_takes_lambdas_event_form_binary_as_base64_and_the_time_as_epoch_seconds() -> None:
    converted = stream.lambda_record(get_records_record(1), ARN)
    change = converted["dynamodb"]
    assert converted["eventSourceARN"] == ARN
    assert converted["eventName"] == "MODIFY"
    assert change["ApproximateCreationDateTime"] == 1796135405
    assert change["OldImage"]["cr"] == {"B": base64.b64encode(CLAIM).decode("ascii")}
    assert change["OldImage"]["tags"] == {"BS": ["AA==", "YQ=="]}
    assert change["NewImage"]["n"] == {"N": "2"}  # numbers stay the strings DynamoDB sends
    assert change["Keys"] == {"pk": {"S": PK}, "sk": {"S": SK}}
    assert change["SequenceNumber"] == "1100000000017454423010"
    record(SUITE, conversions=1)


def test_the_converted_record_is_what_the_reaper_and_powertools_read() -> None:
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBStreamEvent

    converted = stream.lambda_record(get_records_record(2, new_state=STATE.replace("9f", "a0")), ARN)
    # The reaper's own rules: the old spilled state is dropped, the new one attached
    work = reaping.work_of(converted)
    assert isinstance(work, reaping.CheckpointChange)
    assert work.drop_states == (STATE,)
    assert work.attach == (STATE.replace("9f", "a0"),)
    # powertools (the handler's BatchProcessor) reads the record and its sequence number (what failures name)
    (parsed,) = DynamoDBStreamEvent({"Records": [converted]}).records
    assert parsed.dynamodb is not None
    assert parsed.event_source_arn == ARN
    assert parsed.dynamodb.sequence_number == converted["dynamodb"]["SequenceNumber"]
    assert parsed.dynamodb.keys == {"pk": PK, "sk": SK}
    record(SUITE, conversions=1)


@pytest.mark.parametrize(
    ("event", "pk", "expected"),
    [
        ("MODIFY", PK, True),
        ("INSERT", PK, True),
        ("REMOVE", layout.blob_key("acme", "blob_" + "0" * 32)["pk"]["S"], True),
        ("REMOVE", "K#9ecee46dcb0f62ff1e83cbafd73dfeb8", False),  # a key record: nothing in the bucket
        ("INSERT", "I#acme#request", False),  # an idempotency record
        ("REMOVE", "", False),
    ],
)
def test_only_what_the_deployed_filter_lets_through_is_wanted(event: str, pk: str, expected: bool) -> None:
    assert stream.wanted(get_records_record(1, event=event, pk=pk)) is expected
    record(SUITE, filter_cases=1)


def test_an_unknown_event_name_is_not_wanted() -> None:
    unknown = get_records_record(1)
    unknown["eventName"] = "TTL"
    assert not stream.wanted(unknown)


# -- where a batch resumes --------------------------------------------------------------------------------------


BATCH = [stream.lambda_record(get_records_record(n), ARN) for n in range(4)]


def seq(index: int) -> str:
    number = stream.sequence_number(BATCH[index])
    assert number is not None
    return number


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"batchItemFailures": []}, None),
        ({"batchItemFailures": [{"itemIdentifier": seq(2)}]}, 2),
        ({"batchItemFailures": [{"itemIdentifier": seq(3)}, {"itemIdentifier": seq(1)}]}, 1),
        ({"batchItemFailures": [{"itemIdentifier": "999"}]}, 0),  # a record the batch does not hold
        ({"batchItemFailures": [{"itemIdentifier": None}]}, 0),
        ({"batchItemFailures": "all"}, 0),
        (None, 0),  # the function failed
        ({}, None),  # no report: the batch succeeded
    ],
)
def test_a_batch_resumes_from_the_earliest_failure_the_answer_names(answer: Any, expected: int | None) -> None:
    assert stream.first_failure(BATCH, answer) == expected
    record(SUITE, resume_cases=1)


def test_the_backoff_doubles_and_is_bounded() -> None:
    assert [stream.backoff(n) for n in (1, 2, 3, 4, 10)] == [0.5, 1.0, 2.0, 4.0, 5.0]


# -- the worker -------------------------------------------------------------------------------------------------


class Script:
    """What the handler was given and answers: `failing` maps a sequence number to how many more times it fails
    (-1: always); `raises` makes the next invocations raise."""

    def __init__(self, failing: dict[str, int] | None = None, raises: int = 0) -> None:
        self.failing = dict(failing or {})
        self.raises = raises
        self.batches: list[list[str]] = []
        self.done: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        numbers = [str(r["dynamodb"]["SequenceNumber"]) for r in event["Records"]]
        self.batches.append(numbers)
        if self.raises:
            self.raises -= 1
            raise RuntimeError("the function failed")
        failures = []
        for number in numbers:
            left = self.failing.get(number, 0)
            if left:
                self.failing[number] = left - 1 if left > 0 else left
                failures.append({"itemIdentifier": number})
            elif not failures:
                self.done.append(number)
        return {"batchItemFailures": failures}


def worker(pages: list[list[dict[str, Any]]], handler: Script) -> tuple[stream.StreamReaper, list[float]]:
    """A worker over `pages` (what successive reads answer, then nothing) and the waits it asked for."""
    left = list(pages)

    def read() -> list[dict[str, Any]]:
        return left.pop(0) if left else []

    backoffs: list[float] = []

    def backoff_of(tries: int) -> float:
        backoffs.append(stream.backoff(tries))
        return stream.backoff(tries)

    return stream.StreamReaper(read, ARN, handler=handler, poll_seconds=0.25, backoff_of=backoff_of), backoffs


def run_until_idle(reaper: stream.StreamReaper, limit: int = 50) -> list[float]:
    """Steps until the worker waits for the stream; the waits it asked for on the way."""
    waits: list[float] = []
    for _ in range(limit):
        waited = reaper.step()
        if waited == 0.25:
            return waits
        waits.append(waited)
    raise AssertionError("the worker never became idle")


def test_records_go_in_order_in_batches_and_unwanted_ones_never_reach_the_function() -> None:
    raw = [get_records_record(n) for n in range(5)]
    raw[1]["dynamodb"]["Keys"]["pk"]["S"] = "K#somekey"
    script = Script()
    reaper, backoffs = worker([raw[:3], raw[3:]], script)
    run_until_idle(reaper)
    wanted = [r["dynamodb"]["SequenceNumber"] for r in raw if r is not raw[1]]
    assert script.batches == [wanted[:2], wanted[2:]]
    assert script.done == wanted
    assert backoffs == []
    record(SUITE, worker_cases=1)


def test_a_failed_record_is_retried_from_itself_after_a_backoff_and_the_earlier_ones_are_not() -> None:
    raw = [get_records_record(n) for n in range(4)]
    numbers = [r["dynamodb"]["SequenceNumber"] for r in raw]
    script = Script(failing={numbers[2]: 2})
    reaper, backoffs = worker([raw], script)
    run_until_idle(reaper)
    assert script.batches == [numbers, numbers[2:], numbers[2:]]
    assert script.done == numbers
    assert backoffs == [0.5, 1.0]
    assert reaper.skipped == []
    record(SUITE, worker_cases=1)


def test_a_record_that_keeps_failing_is_skipped_after_the_last_try_and_the_rest_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = [get_records_record(n) for n in range(3)]
    numbers = [r["dynamodb"]["SequenceNumber"] for r in raw]
    script = Script(failing={numbers[1]: -1})
    reaper, backoffs = worker([raw], script)
    run_until_idle(reaper)
    assert script.batches == [numbers] + [numbers[1:]] * (stream.MAX_TRIES - 1) + [numbers[2:]]
    assert script.done == [numbers[0], numbers[2]]
    assert reaper.skipped == [numbers[1]]
    assert backoffs == [stream.backoff(n) for n in range(1, stream.MAX_TRIES)]
    (given_up,) = [r for r in caplog.records if "gave up" in r.getMessage()]
    assert f"after {stream.MAX_TRIES} tries" in given_up.getMessage()
    assert given_up.levelname == "ERROR"
    assert given_up.__dict__["sequence_number"] == numbers[1]
    record(SUITE, worker_cases=1)


def test_a_function_that_raises_fails_the_whole_batch_which_is_tried_again() -> None:
    raw = [get_records_record(n) for n in range(2)]
    numbers = [r["dynamodb"]["SequenceNumber"] for r in raw]
    script = Script(raises=1)
    reaper, backoffs = worker([raw], script)
    run_until_idle(reaper)
    assert script.batches == [numbers, numbers]
    assert script.done == numbers
    assert backoffs == [0.5]
    record(SUITE, worker_cases=1)


def test_a_stream_that_cannot_be_read_is_logged_once_and_read_again(caplog: pytest.LogCaptureFixture) -> None:
    answers: list[Any] = [ConnectionError("refused"), ConnectionError("refused"), [get_records_record(7)], []]

    def read() -> list[dict[str, Any]]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, list)
        return answer

    script = Script()
    reaper = stream.StreamReaper(read, ARN, handler=script, poll_seconds=0.25)
    assert reaper.step() == stream.BACKOFF_CAP_SECONDS
    assert reaper.step() == stream.BACKOFF_CAP_SECONDS
    assert reaper.step() == 0.0
    assert reaper.step() == 0.25
    assert len(script.done) == 1
    logged = [r.getMessage() for r in caplog.records]
    assert sum("cannot be read" in line for line in logged) == 1
    assert sum("can be read again" in line for line in logged) == 1
    record(SUITE, worker_cases=1)


def test_an_idle_stream_is_read_less_often_and_at_once_again_when_records_come() -> None:
    script = Script()
    pages: list[list[dict[str, Any]]] = [[] for _ in range(stream.IDLE_POLLS)] + [[get_records_record(1)], []]
    reaper, _ = worker(pages, script)
    waits = [reaper.step() for _ in range(stream.IDLE_POLLS + 3)]
    assert waits[: stream.IDLE_POLLS - 1] == [0.25] * (stream.IDLE_POLLS - 1)
    assert waits[stream.IDLE_POLLS - 1] == stream.IDLE_POLL_SECONDS
    assert waits[stream.IDLE_POLLS :] == [0.0, 0.25, 0.25]  # read and invoked, then the short poll again
    assert len(script.done) == 1
    record(SUITE, worker_cases=1)


def test_the_worker_thread_stops_promptly_when_asked() -> None:
    script = Script()
    reaper = stream.StreamReaper(list, ARN, handler=script, poll_seconds=30)
    reaper.start()
    assert reaper.stop(timeout=5)
    record(SUITE, worker_cases=1)
