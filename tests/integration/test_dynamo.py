"""The store's shared DynamoDB plumbing (`baton_checkpoints.store.dynamo`) against in-process moto: Queries page by
page, and
batch writes that hand back what DynamoDB would not take.

The repositories that use them are tested through the handlers elsewhere (purge, the reapers, keys); these pin each
primitive's contract on its own, with DynamoDB's refusals made by the fault injector in front of moto (`faults.py`),
so that a case the handlers rarely meet (a resend that fails, a deadline between batches) is met here for certain.
"""

from __future__ import annotations

import itertools
import time
import types
from collections.abc import Iterator
from typing import Any

import botocore.endpoint
import pytest
from botocore.exceptions import ClientError

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.errors import Unavailable
from baton_checkpoints.store import dynamo, layout
from baton_checkpoints.store.errors import UNAVAILABLE_MESSAGE, UNCONFIRMED_MESSAGE
from tests.integration.conftest import TABLE
from tests.integration.driver import CallCounter
from tests.integration.faults import (
    INTERNAL_500,
    THROTTLING,
    UNPROCESSED_ITEMS,
    Duration,
    Fault,
    FaultInjector,
    Phase,
    injected,
)

PARTITION = "T#dynamo-tests"
EVERY, ONCE, BEFORE = Duration.EVERY, Duration.ONCE, Phase.BEFORE


@pytest.fixture
def client(services: Services) -> Any:
    """A container's DynamoDB client (the test's own, `aws`, is shared and takes no hooks)."""
    return services.dynamodb


@pytest.fixture
def calls(client: Any) -> Iterator[CallCounter]:
    """The client's requests by operation (botocore's retries not counted: only what the store asked for)."""
    counter = CallCounter()
    client.meta.events.register("before-call.dynamodb", counter)
    yield counter
    client.meta.events.unregister("before-call.dynamodb", counter)


@pytest.fixture(autouse=True)
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoffs between a batch's sends, recorded instead of slept (and botocore's own between its retries)."""
    slept: list[float] = []
    monkeypatch.setattr(dynamo, "time", types.SimpleNamespace(sleep=slept.append, monotonic=time.monotonic))
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))
    return slept


def key(n: int) -> dict[str, Any]:
    return layout.key(PARTITION, f"S#{n:03d}")


def puts(count: int) -> list[dict[str, Any]]:
    """Put requests of `count` small items of the test's partition, in key order."""
    return [{"PutRequest": {"Item": {**key(n), "n": {"N": str(n)}}}} for n in range(count)]


def stored(aws: Any) -> list[str]:
    """The sort keys in the test's partition, read with the test's own client."""
    return [item["sk"]["S"] for item in dynamo.query(aws, **partition_query())]


def partition_query(**extra: Any) -> dict[str, Any]:
    return {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": PARTITION}},
        "ConsistentRead": True,
        **extra,
    }


def sort_keys(items: list[dict[str, Any]] | None) -> list[str]:
    return [item["sk"]["S"] for item in items or []]


def armed(injector: FaultInjector, *faults: Fault) -> FaultInjector:
    """Arm `faults` in order: the injector strikes with the first that has attempts left."""
    for fault in faults:
        injector.arm(fault)
    return injector


# -- Queries, page by page ---------------------------------------------------------------------------------------


def test_next_page_reads_one_page_per_query_and_says_where_it_stands(aws: Any, client: Any, calls: CallCounter) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    pages = dynamo.query(client, **partition_query(Limit=3))
    # When the pages are taken one at a time
    first = pages.next_page()
    # Then each is one Query, and between pages the position is the key the next one starts after
    assert sort_keys(first) == ["S#000", "S#001", "S#002"]
    assert calls.calls["Query"] == 1
    assert not pages.finished
    assert pages.position == key(2)
    assert sort_keys(pages.next_page()) == ["S#003", "S#004", "S#005"]
    assert sort_keys(pages.next_page()) == ["S#006"]
    # And a page without a LastEvaluatedKey ends the Query: no further request, the position is its last item
    assert pages.finished
    assert pages.position is not None
    assert pages.position["sk"] == {"S": "S#006"}
    assert pages.next_page() is None
    assert calls.calls["Query"] == 3
    assert not pages.stopped


def test_next_page_takes_a_limit_for_that_page_alone(aws: Any, client: Any) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    pages = dynamo.query(client, **partition_query(Limit=1))
    # When pages are asked for with limits that grow, then without one (the request's own again)
    found = [sort_keys(pages.next_page(2)), sort_keys(pages.next_page(4)), sort_keys(pages.next_page())]
    # Then each page reads as many as its own limit says, each after the one before
    assert found == [["S#000", "S#001"], ["S#002", "S#003", "S#004", "S#005"], ["S#006"]]


def test_pages_and_items_read_the_same_query_alike(aws: Any, client: Any, calls: CallCounter) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    # When one Query is read page by page and the same Query item by item
    by_page = [sort_keys(page) for page in dynamo.query(client, **partition_query(Limit=3)).pages()]
    by_item = [item["sk"]["S"] for item in dynamo.query(client, **partition_query(Limit=3))]
    # Then both read the same items in the same order, with the same requests (three each)
    assert by_page == [["S#000", "S#001", "S#002"], ["S#003", "S#004", "S#005"], ["S#006"]]
    assert by_item == [sk for page in by_page for sk in page]
    assert calls.calls["Query"] == 6


def test_items_read_by_a_caller_that_stops_mid_page_leave_the_position_at_the_last_one(aws: Any, client: Any) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    pages = dynamo.query(client, **partition_query(Limit=3))
    # When a caller takes items until it has four (one into the second page), then stops
    taken = list(itertools.islice(pages, 4))
    # Then the position is the last item it took: a cursor resumes right after it
    assert [item["sk"]["S"] for item in taken] == ["S#000", "S#001", "S#002", "S#003"]
    assert pages.position is not None
    assert pages.position["sk"] == {"S": "S#003"}


def test_a_spent_read_budget_stops_before_the_next_query(aws: Any, client: Any, calls: CallCounter) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    reads = dynamo.Reads(max_bytes=1)
    pages = dynamo.query(client, reads, **partition_query(Limit=3))
    # When the first page spends the budget
    assert sort_keys(pages.next_page()) == ["S#000", "S#001", "S#002"]
    # Then no next page is read: the Query stopped where it stood, not finished
    assert pages.next_page() is None
    assert pages.stopped
    assert not pages.finished
    assert pages.position == key(2)
    assert reads.requests == calls.calls["Query"] == 1


def test_items_read_to_a_spent_budget_leave_the_position_at_the_key_the_next_page_starts_after(
    aws: Any, client: Any
) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    pages = dynamo.query(client, dynamo.Reads(max_bytes=1), **partition_query(Limit=3))
    # When the items are read until the budget stops the Query (after its first page)
    assert [item["sk"]["S"] for item in pages] == ["S#000", "S#001", "S#002"]
    # Then it stopped, and its position is DynamoDB's LastEvaluatedKey (the key alone), where the next page starts
    assert pages.stopped
    assert pages.position == key(2)


def test_count_adds_up_what_the_filter_keeps_and_says_whether_it_counted_them_all(aws: Any, client: Any) -> None:
    dynamo.write_all(aws, TABLE, puts(7))
    # Given a Query of two items a page whose filter keeps the odd ones (1, 3, 5: one on each of three pages)
    odd = partition_query(Limit=2, FilterExpression="#n IN (:one, :three, :five)", ExpressionAttributeNames={"#n": "n"})
    odd["ExpressionAttributeValues"].update({":one": {"N": "1"}, ":three": {"N": "3"}, ":five": {"N": "5"}})
    # When every page is counted, then only the first two Queries, then until one is found
    assert dynamo.count(client, **odd) == (3, True)
    assert dynamo.count(client, None, 2, **odd) == (2, False)
    assert dynamo.count(client, 1, **odd) == (1, False)


# -- batch writes that hand back what is left --------------------------------------------------------------------


def test_write_some_writes_25_per_batch_and_hands_back_nothing(aws: Any, client: Any, calls: CallCounter) -> None:
    # When 30 puts are written
    left = dynamo.write_some(client, TABLE, puts(30))
    # Then two BatchWriteItems wrote them all
    assert left == dynamo.Unwritten()
    assert calls.calls["BatchWriteItem"] == 2
    assert len(stored(aws)) == 30


def test_what_dynamodb_leaves_unprocessed_once_is_sent_again_after_a_backoff(
    aws: Any, client: Any, calls: CallCounter, backoffs: list[float]
) -> None:
    # Given DynamoDB leaving the first batch unprocessed once
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, ONCE))
        left = dynamo.write_some(client, TABLE, puts(30))
    # Then the batch is sent again after a backoff, and everything is written
    assert left.requests == []
    assert calls.calls["BatchWriteItem"] == 3
    assert backoffs == [dynamo.WRITE_BACKOFF_SECONDS]
    assert len(stored(aws)) == 30


def test_a_batch_left_unprocessed_past_its_rounds_is_handed_back_with_everything_after_it(
    aws: Any, client: Any, calls: CallCounter, backoffs: list[float]
) -> None:
    requests = puts(30)
    # Given DynamoDB leaving every batch unprocessed
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, EVERY))
        left = dynamo.write_some(client, TABLE, requests, rounds=3)
    # Then the first batch is sent three times in all, backing off, and no later batch is sent
    assert calls.calls["BatchWriteItem"] == 3
    assert backoffs == [dynamo.WRITE_BACKOFF_SECONDS, 2 * dynamo.WRITE_BACKOFF_SECONDS]
    # And every request comes back, in order, with no failure: DynamoDB answered each send
    assert left == dynamo.Unwritten(requests)
    assert stored(aws) == []


def test_a_resend_that_fails_transiently_hands_back_what_it_carried(aws: Any, client: Any) -> None:
    requests = puts(30)
    # Given the first batch's first send answered with all of it unprocessed, and its resend throttled
    with injected(client) as injector:
        armed(
            injector,
            Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, ONCE),
            Fault("BatchWriteItem", THROTTLING, BEFORE, EVERY),
        )
        left = dynamo.write_some(client, TABLE, requests)
    # Then nothing is raised: every request comes back, with the throttling that ended the writing
    assert left.requests == requests
    assert isinstance(left.failure, ClientError)
    assert left.failure.response["Error"]["Code"] == "ThrottlingException"
    # And write_all answers that with the 503 the failure itself makes
    with injected(client) as injector:
        armed(
            injector,
            Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, ONCE),
            Fault("BatchWriteItem", INTERNAL_500, BEFORE, EVERY),
        )
        with pytest.raises(Unavailable) as raised:
            dynamo.write_all(client, TABLE, requests)
    assert raised.value.message == UNCONFIRMED_MESSAGE
    assert stored(aws) == []


def test_a_first_send_that_fails_is_raised_as_it_came(aws: Any, client: Any) -> None:
    # Given every BatchWriteItem throttled (botocore's own retries give up)
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", THROTTLING, BEFORE, EVERY))
        with pytest.raises(ClientError) as raised:
            dynamo.write_some(client, TABLE, puts(3))
    # Then the failure is the caller's to classify: nothing was handed back because nothing was answered
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"


def test_a_passed_deadline_sends_no_batch_and_hands_back_the_rest(aws: Any, client: Any, calls: CallCounter) -> None:
    requests = puts(30)
    # When the deadline has passed before the first batch
    left = dynamo.write_some(client, TABLE, requests, deadline=time.monotonic() - 1)
    # Then nothing is sent, and everything comes back
    assert left == dynamo.Unwritten(requests)
    assert calls.calls["BatchWriteItem"] == 0


def test_delete_some_answers_the_keys_it_did_not_delete(aws: Any, client: Any) -> None:
    dynamo.write_all(aws, TABLE, puts(30))
    keys = [key(n) for n in range(30)]
    # Given DynamoDB leaving the second batch unprocessed on every send
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, EVERY, skip=1))
        left = dynamo.delete_some(client, TABLE, keys, rounds=2)
    # Then the first 25 are gone and the last 5 are the keys handed back
    assert left == keys[25:]
    assert stored(aws) == [f"S#{n:03d}" for n in range(25, 30)]


def test_write_all_answers_503_when_dynamodb_keeps_leaving_requests_unprocessed(aws: Any, client: Any) -> None:
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, EVERY))
        with pytest.raises(Unavailable) as raised:
            dynamo.delete_all(client, TABLE, [key(0)])
    assert raised.value.message == UNAVAILABLE_MESSAGE


def test_write_until_stops_at_its_deadline_and_answers_503_only_when_dynamodb_will_not_take_the_writes(
    aws: Any, client: Any, calls: CallCounter
) -> None:
    # A deadline ahead: everything is written
    assert dynamo.write_until(client, TABLE, puts(30), time.monotonic() + 60) is True
    assert len(stored(aws)) == 30
    # A deadline passed: nothing is sent, and the caller is told to leave the rest to a later pass
    sent = calls.calls["BatchWriteItem"]
    assert dynamo.write_until(client, TABLE, puts(3), time.monotonic() - 1) is False
    assert calls.calls["BatchWriteItem"] == sent
    # DynamoDB leaving the writes unprocessed on every send, well before the deadline: 503, not a quiet stop
    with injected(client) as injector:
        armed(injector, Fault("BatchWriteItem", UNPROCESSED_ITEMS, BEFORE, EVERY))
        with pytest.raises(Unavailable) as raised:
            dynamo.write_until(client, TABLE, [{"DeleteRequest": {"Key": key(0)}}], time.monotonic() + 60)
    assert raised.value.message == UNAVAILABLE_MESSAGE
    assert "S#000" in stored(aws)
