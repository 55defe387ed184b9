"""`baton serve`'s reaper worker (`baton_checkpoints.local.stream`), without AWS: GetRecords records turned into the
event
form Lambda hands the reaper, the deployed filter, the batches, retries, bisections and give-ups of the deployed event
source's settings (held equal to infra/components/reaper.py), the bounded, adaptive reads and the jittered backoff,
the worker's thread stopping between tries and without waiting on a stuck call; and two parts of the embedded moto it
reads: the lock granted in arrival order, and GetRecords written fast with the body moto's serializer writes.

The records are shaped as botocore parses GetRecords (binary values as bytes, the time as a datetime); the handler
of the worker tests is a script of answers (which records fail), so what is tested is the worker's own schedule.
"""

from __future__ import annotations

import ast
import base64
import datetime
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from baton_checkpoints.local import moto_server, stream
from baton_checkpoints.store import layout, reaping
from tests.proof_counts import record

SUITE = "serve reaper (unit)"
REPO = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"batchItemFailures": []}, False),
        ({}, False),
        ({"batchItemFailures": [{"itemIdentifier": seq(0)}]}, False),  # the first record failed: no function error
        ({"batchItemFailures": [{"itemIdentifier": "999"}]}, True),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, True),
        ({"batchItemFailures": ["x"]}, True),
        ({"batchItemFailures": "all"}, True),
        (None, True),
        ("ok", True),
    ],
)
def test_only_an_answer_lambda_cannot_read_is_a_function_error(answer: Any, expected: bool) -> None:
    assert stream.function_error(BATCH, answer) is expected
    record(SUITE, resume_cases=1)


# -- waits and read sizes (pure) --------------------------------------------------------------------------------


def test_the_backoff_doubles_up_to_its_cap_less_up_to_half_of_it_at_random() -> None:
    ceilings = [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    tries = range(1, len(ceilings) + 1)
    assert [stream.backoff(n, jitter=lambda: 0.0) for n in tries] == ceilings
    assert [stream.backoff(n, jitter=lambda: 0.5) for n in tries] == [c * 0.75 for c in ceilings]
    for n, ceiling in zip(tries, ceilings, strict=True):
        drawn = [stream.backoff(n) for _ in range(200)]
        assert all(ceiling / 2 < wait <= ceiling for wait in drawn)
        assert len(set(drawn)) > 1  # jittered: retries do not fall into step
    assert stream.backoff(1000) <= stream.BACKOFF_CAP_SECONDS
    record(SUITE, backoff_cases=len(ceilings))


def test_reads_grow_while_they_are_quick_and_full_up_to_the_batch_size() -> None:
    limit, asked = stream.READ_LIMIT_START, []
    for _ in range(12):
        asked.append(limit)
        limit = stream.next_read_limit(limit, returned=limit, seconds=0.01)
    assert asked[:8] == [1, 2, 4, 8, 16, 32, 64, 100]
    assert set(asked[7:]) == {stream.BATCH_SIZE}
    # A quick read that was not full (the stream had no more) says nothing of a bigger one: the limit stays
    assert stream.next_read_limit(16, returned=3, seconds=0.01) == 16
    record(SUITE, read_cases=1)


@pytest.mark.parametrize(
    ("limit", "returned", "seconds", "expected"),
    [
        (100, 100, 24.6, 1),  # the stall: 100 records of a growing checkpoint took moto 24.6 s
        (100, 26, 2.5, 2),  # in proportion: 26 records in 2.5 s, 2 fit in the target
        (100, 100, 0.5, 50),  # at least halved
        (8, 8, 0.3, 4),
        (1, 1, 30.0, 1),  # never below one record
        (64, 0, 9.0, 64),  # an empty read (its time was waiting for the endpoint) changes nothing
        (10, 10, 0.2, 10),  # within the target but not quick: stays
    ],
)
def test_a_read_that_held_the_endpoint_too_long_cuts_the_next_in_proportion(
    limit: int, returned: int, seconds: float, expected: int
) -> None:
    assert stream.next_read_limit(limit, returned, seconds) == expected
    record(SUITE, read_cases=1)


def test_the_local_reaper_mirrors_the_deployed_event_source_and_function() -> None:
    """The settings are read from infra/components/reaper.py's source (importing it needs the CDK)."""
    source = (REPO / "infra" / "components" / "reaper.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign | ast.Assign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and node.value is not None
    }
    assert ast.literal_eval(constants["BATCH_SIZE"]) == stream.BATCH_SIZE
    assert ast.literal_eval(constants["RETRY_ATTEMPTS"]) == stream.RETRY_ATTEMPTS == stream.MAX_TRIES - 1
    timeout = constants["TIMEOUT"]
    assert isinstance(timeout, ast.Call)
    assert isinstance(timeout.func, ast.Attribute)
    unit = {"seconds": 1, "minutes": 60}[timeout.func.attr]
    assert ast.literal_eval(timeout.args[0]) * unit == stream.FUNCTION_TIMEOUT_SECONDS
    (source_call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "DynamoEventSource"
    ]
    settings = {keyword.arg: keyword.value for keyword in source_call.keywords}
    assert ast.literal_eval(settings["bisect_batch_on_error"]) is stream.BISECT_ON_FUNCTION_ERROR
    assert ast.literal_eval(settings["report_batch_item_failures"]) is True
    assert "TRIM_HORIZON" in ast.unparse(settings["starting_position"])
    record(SUITE, mirrored_settings=5)


# -- the worker -------------------------------------------------------------------------------------------------


SHARD = "shardId-00000001541626099285-f35f62ef"


class Script:
    """What the handler was given and answers: `failing` maps a sequence number to how many more times it fails
    (-1: always); `raises` makes the next invocations raise; `poison` makes every invocation holding it raise."""

    def __init__(self, failing: dict[str, int] | None = None, raises: int = 0, poison: str | None = None) -> None:
        self.failing = dict(failing or {})
        self.raises = raises
        self.poison = poison
        self.batches: list[list[str]] = []
        self.contexts: list[Any] = []
        self.done: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        numbers = [str(r["dynamodb"]["SequenceNumber"]) for r in event["Records"]]
        self.batches.append(numbers)
        self.contexts.append(context)
        if self.raises:
            self.raises -= 1
            raise RuntimeError("the function failed")
        if self.poison in numbers:
            raise RuntimeError("the function failed on a poison record")
        failures = []
        for number in numbers:
            left = self.failing.get(number, 0)
            if left:
                self.failing[number] = left - 1 if left > 0 else left
                failures.append({"itemIdentifier": number})
            elif not failures:
                self.done.append(number)
        return {"batchItemFailures": failures}


class Reads:
    """The worker's `read`: successive pages (whatever the limit), then nothing; the limits it was asked for."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        self.pages = list(pages)
        self.limits: list[int] = []

    def __call__(self, limit: int) -> stream.Page:
        self.limits.append(limit)
        return stream.Page(SHARD, self.pages.pop(0) if self.pages else [])


def worker(pages: list[list[dict[str, Any]]], handler: Script) -> tuple[stream.StreamReaper, list[float]]:
    """A worker over `pages` and the waits it asked for after failures (the backoff's ceilings: no jitter)."""
    backoffs: list[float] = []

    def backoff_of(tries: int) -> float:
        backoffs.append(stream.backoff(tries, jitter=lambda: 0.0))
        return backoffs[-1]

    return stream.StreamReaper(Reads(pages), ARN, handler=handler, poll_seconds=0.25, backoff_of=backoff_of), backoffs


def run_until_idle(reaper: stream.StreamReaper, limit: int = 500) -> list[float]:
    """Steps until the worker waits for the stream; the waits it asked for on the way."""
    waits: list[float] = []
    for _ in range(limit):
        waited = reaper.step()
        if waited == 0.25:
            return waits
        waits.append(waited)
    raise AssertionError("the worker never became idle")


def numbers_of(raw: list[dict[str, Any]]) -> list[str]:
    return [str(r["dynamodb"]["SequenceNumber"]) for r in raw]


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


def test_each_invocation_has_its_own_context_with_the_deployed_timeout_left() -> None:
    script = Script()
    reaper, _ = worker([[get_records_record(1)], [get_records_record(2)]], script)
    run_until_idle(reaper)
    first, second = script.contexts
    assert first.function_name == stream.FUNCTION_NAME
    assert first.aws_request_id != second.aws_request_id
    left = first.get_remaining_time_in_millis()
    assert stream.FUNCTION_TIMEOUT_SECONDS * 1000 - 60_000 < left <= stream.FUNCTION_TIMEOUT_SECONDS * 1000
    record(SUITE, worker_cases=1)


def test_a_failed_record_is_retried_from_itself_after_a_backoff_and_the_earlier_ones_are_not() -> None:
    raw = [get_records_record(n) for n in range(4)]
    numbers = numbers_of(raw)
    script = Script(failing={numbers[2]: 2})
    reaper, backoffs = worker([raw], script)
    run_until_idle(reaper)
    assert script.batches == [numbers, numbers[2:], numbers[2:]]
    assert script.done == numbers
    assert backoffs == [0.5, 1.0]
    assert reaper.skipped == []
    record(SUITE, worker_cases=1)


def test_a_batch_that_always_fails_is_tried_max_tries_times_then_skipped_with_one_error_naming_its_range(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a batch whose first record the function reports failed every time, and records after it
    raw = [get_records_record(n) for n in range(4)]
    numbers = numbers_of(raw)
    script = Script(failing={numbers[0]: -1})
    later = get_records_record(9)
    reaper, backoffs = worker([raw, [later]], script)
    waits = run_until_idle(reaper)
    # Then the whole batch is tried MAX_TRIES times (the first and RETRY_ATTEMPTS retries), never bisected (the
    # function reported a record: it did not fail), with growing waits, capped
    assert script.batches == [numbers] * stream.MAX_TRIES + [numbers_of([later])]
    assert stream.MAX_TRIES == 11
    assert backoffs == [stream.backoff(n, jitter=lambda: 0.0) for n in range(1, stream.MAX_TRIES)]
    assert backoffs == sorted(backoffs)
    assert max(backoffs) == stream.BACKOFF_CAP_SECONDS
    assert waits[: stream.MAX_TRIES - 1] == backoffs
    # And it is skipped with one ERROR line naming the shard and the sequence range; the next records go on
    given_up = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(given_up) == 1
    line = given_up[0]
    assert line.__dict__["shard_id"] == SHARD
    assert (line.__dict__["first_sequence_number"], line.__dict__["last_sequence_number"]) == (numbers[0], numbers[-1])
    assert (line.__dict__["records"], line.__dict__["tries"]) == (4, stream.MAX_TRIES)
    assert SHARD in line.getMessage()
    assert f"{numbers[0]} to {numbers[-1]}" in line.getMessage()
    assert reaper.skipped == [stream.Skipped(SHARD, numbers[0], numbers[-1], 4, stream.MAX_TRIES)]
    assert script.done == numbers_of([later])
    record(SUITE, worker_cases=1)


def test_a_record_that_keeps_failing_takes_the_rest_of_its_batch_with_it_and_the_earlier_ones_are_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = [get_records_record(n) for n in range(4)]
    numbers = numbers_of(raw)
    script = Script(failing={numbers[1]: -1})
    reaper, _ = worker([raw], script)
    run_until_idle(reaper)
    # As the deployed event source does: done up to the failure, then the rest retried from it (the failure counts
    # as its first try), then given up on
    assert script.batches == [numbers] + [numbers[1:]] * (stream.MAX_TRIES - 1)
    assert script.done == numbers[:1]
    assert reaper.skipped == [stream.Skipped(SHARD, numbers[1], numbers[-1], 3, stream.MAX_TRIES)]
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    record(SUITE, worker_cases=1)


def test_a_function_that_raises_once_fails_the_whole_batch_which_is_bisected_and_retried() -> None:
    raw = [get_records_record(n) for n in range(4)]
    numbers = numbers_of(raw)
    script = Script(raises=1)
    reaper, backoffs = worker([raw], script)
    run_until_idle(reaper)
    assert script.batches == [numbers, numbers[:2], numbers[2:]]
    assert script.done == numbers
    assert backoffs == [0.5]
    record(SUITE, worker_cases=1)


def test_bisecting_isolates_a_record_the_function_always_fails_on_and_only_it_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = [get_records_record(n) for n in range(8)]
    numbers = numbers_of(raw)
    script = Script(poison=numbers[5])
    reaper, _ = worker([raw], script)
    run_until_idle(reaper)
    assert script.done == numbers[:5] + numbers[6:]
    assert reaper.skipped == [stream.Skipped(SHARD, numbers[5], numbers[5], 1, stream.MAX_TRIES)]
    assert sum(numbers[5] in batch for batch in script.batches) == stream.MAX_TRIES
    assert script.batches[:4] == [numbers, numbers[:4], numbers[4:], numbers[4:6]]
    assert len([r for r in caplog.records if "gave up" in r.getMessage()]) == 1
    record(SUITE, worker_cases=1)


def test_a_function_that_always_raises_tries_no_record_more_than_max_tries_and_skips_each_once() -> None:
    raw = [get_records_record(n) for n in range(5)]
    numbers = numbers_of(raw)
    script = Script(raises=10**6)
    reaper, _ = worker([raw], script)
    run_until_idle(reaper)
    assert all(sum(number in batch for batch in script.batches) <= stream.MAX_TRIES for number in numbers)
    skipped = [number for s in reaper.skipped for number in numbers if s.first <= number <= s.last]
    assert skipped == numbers  # in order, each once
    assert script.done == []
    record(SUITE, worker_cases=1)


def test_a_stream_that_cannot_be_read_is_logged_once_read_one_record_at_a_time_after_growing_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Any] = [ConnectionError("refused")] * 3 + [[get_records_record(7)], []]
    limits: list[int] = []

    def read(limit: int) -> stream.Page:
        limits.append(limit)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return stream.Page(SHARD, answer)

    script = Script()
    reaper = stream.StreamReaper(
        read, ARN, handler=script, poll_seconds=0.25, backoff_of=lambda n: stream.backoff(n, jitter=lambda: 0.0)
    )
    reaper.read_limit = 50
    assert [reaper.step() for _ in range(3)] == [0.5, 1.0, 2.0]
    assert reaper.step() == 0.0
    assert reaper.step() == 0.25
    assert limits == [50, 1, 1, 1, 2]  # one record at a time after a failure, growing again as reads are quick
    assert len(script.done) == 1
    logged = [r.getMessage() for r in caplog.records]
    assert sum("cannot be read" in line for line in logged) == 1
    assert sum("can be read again" in line for line in logged) == 1
    record(SUITE, worker_cases=1)


def test_the_worker_asks_for_fewer_records_after_a_slow_read_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    pages = [[get_records_record(n) for n in range(26)], [get_records_record(30)], []]
    limits: list[int] = []

    def read(limit: int) -> stream.Page:
        limits.append(limit)
        page = pages.pop(0)
        now[0] += 24.6 if len(page) > 1 else 0.01  # what moto took to write 26 records of a growing checkpoint
        return stream.Page(SHARD, page)

    reaper = stream.StreamReaper(read, ARN, handler=Script(), poll_seconds=0.25, clock=lambda: now[0])
    reaper.read_limit = stream.BATCH_SIZE
    run_until_idle(reaper)
    assert limits == [stream.BATCH_SIZE, 1, 2]
    (slow,) = [r for r in caplog.records if "held the AWS endpoint long" in r.getMessage()]
    assert slow.levelname == "WARNING"
    assert (slow.__dict__["records"], slow.__dict__["read_limit"]) == (26, 1)
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


# -- the worker's thread: every wait on an event, with a bound generous for a loaded runner ----------------------

BOUND = 30.0


def test_the_worker_thread_stops_promptly_when_asked() -> None:
    reaper = stream.StreamReaper(lambda limit: stream.Page(SHARD), ARN, handler=Script(), poll_seconds=30)
    reaper.start()
    assert reaper.stop(timeout=BOUND)
    record(SUITE, worker_cases=1)


def test_stop_is_honoured_between_tries_without_waiting_out_the_backoff() -> None:
    # Given a worker whose batch keeps failing, waiting a long backoff between its tries
    tried = threading.Event()

    class Failing(Script):
        def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
            super().__call__(event, context)
            tried.set()
            raise RuntimeError("the function failed")

    script = Failing()
    reaper = stream.StreamReaper(
        Reads([[get_records_record(n) for n in range(2)]]), ARN, handler=script, backoff_of=lambda tries: 3600.0
    )
    reaper.start()
    assert tried.wait(BOUND), "the batch was never tried"
    # When it is stopped during the wait
    started = time.monotonic()
    stopped = reaper.stop(timeout=BOUND)
    # Then it stops at once, and no other try starts
    assert stopped
    assert time.monotonic() - started < BOUND
    assert len(script.batches) == 1 == reaper.invocations
    record(SUITE, worker_cases=1)


def test_a_worker_stuck_in_a_call_does_not_hold_stop_and_hands_nothing_over_after_it() -> None:
    # Given a worker whose read is stuck in a call (an endpoint that does not answer)
    entered, released = threading.Event(), threading.Event()

    def read(limit: int) -> stream.Page:
        entered.set()
        released.wait(BOUND)
        return stream.Page(SHARD, [get_records_record(1)])

    script = Script()
    reaper = stream.StreamReaper(read, ARN, handler=script)
    reaper.start()
    assert entered.wait(BOUND), "the worker never read"
    # When it is stopped: the wait is bounded, and says it did not stop
    started = time.monotonic()
    assert not reaper.stop(timeout=0.2)
    assert time.monotonic() - started < BOUND
    # And once the call returns, what it read is not handed over: the worker ends
    released.set()
    assert reaper.stop(timeout=BOUND)
    assert script.batches == []
    record(SUITE, worker_cases=1)


# -- the embedded moto it reads (local/moto_server.py) ----------------------------------------------------------


def test_the_lock_into_moto_is_granted_in_arrival_order() -> None:
    lock = moto_server.FairLock()
    assert lock.acquire()
    order: list[str] = []

    def take(name: str) -> None:
        assert lock.acquire()
        order.append(name)
        lock.release()

    threads = []
    for count, name in enumerate("abcde", start=1):
        thread = threading.Thread(target=take, args=(name,), daemon=True)
        thread.start()
        threads.append(thread)
        assert lock.wait_for_waiting(count, BOUND)
    lock.release()
    for thread in threads:
        thread.join(BOUND)
    assert order == list("abcde")
    assert lock.acquire()  # free again
    record(SUITE, moto_cases=1)


def test_a_closed_lock_turns_its_waiters_away_at_once_and_every_later_caller() -> None:
    lock = moto_server.FairLock()
    assert lock.acquire()
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(lock.acquire()), daemon=True)
    waiter.start()
    assert lock.wait_for_waiting(1, BOUND)
    lock.close()
    waiter.join(BOUND)
    assert answers == [False]
    lock.release()
    assert not lock.acquire()
    record(SUITE, moto_cases=1)


def test_moto_answers_get_records_fast_with_the_body_its_serializer_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from botocore.config import Config
    from moto import mock_aws
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    from baton_checkpoints.store import schema

    # moto's own answer is restored after the test (the fast one is process-wide)
    monkeypatch.setattr(DynamoDBStreamsHandler, "get_records", DynamoDBStreamsHandler.get_records)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**schema.create_table_request("stream-body"))
        streams = boto3.client(
            "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
        )
        key: dict[str, Any] = {"pk": {"S": "H#acme#agent#thread"}, "sk": {"S": "K##c1"}}
        every_type: dict[str, Any] = {
            "b": {"B": b"\x00\xff\x10"},
            "bs": {"BS": [b"\x00", b"a"]},
            "n": {"N": "1.50"},
            "ns": {"NS": ["1", "2.5"]},
            "ss": {"SS": ["x", "y"]},
            "l": {"L": [{"B": b"\x01"}, {"NULL": True}, {"BOOL": False}, {"M": {"q": {"BS": [b"\x02"]}}}]},
            "bool": {"BOOL": True},
            "null": {"NULL": True},
            "w": {"M": {}},
        }
        dynamodb.put_item(TableName="stream-body", Item={**key, **every_type})
        for step in range(3):
            dynamodb.update_item(
                TableName="stream-body",
                Key=key,
                UpdateExpression="SET #w.#k = :v",
                ExpressionAttributeNames={"#w": "w", "#k": f'["t1", {step}]'},
                ExpressionAttributeValues={":v": {"M": {"c": {"S": "a"}, "b": {"B": bytes([step]) * 3}}}},
            )
        dynamodb.delete_item(TableName="stream-body", Key=key)
        arn = dynamodb.describe_table(TableName="stream-body")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

        def records(limit: int) -> list[dict[str, Any]]:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
            answer = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=limit)
            assert answer["NextShardIterator"]
            return list(answer["Records"])

        by_moto = records(100)
        moto_server.fast_stream_records()
        moto_server.fast_stream_records()  # idempotent
        assert getattr(DynamoDBStreamsHandler.get_records, "baton_fast", False)
        fast = records(100)
        limited = records(2)
    assert [r["eventName"] for r in by_moto] == ["INSERT", "MODIFY", "MODIFY", "MODIFY", "REMOVE"]
    assert fast == by_moto  # as botocore reads them: every type, the time truncated to milliseconds alike
    assert limited == by_moto[:2]
    assert [stream.lambda_record(r, arn) for r in fast] == [stream.lambda_record(r, arn) for r in by_moto]
    record(SUITE, moto_cases=1)
