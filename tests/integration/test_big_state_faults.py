"""Faults on the way of a big state: S3 or DynamoDB failing at each step of a spilled save and of its read.

Whatever fails, and however (an error answer, a timeout, an answer lost after the request landed), the outcome
must keep the invariants: a 503 `UNAVAILABLE` rather than a 500; no live item that names a missing object; a save
that answered success readable with the state it saved; a save refused with "nothing was written" leaving no item.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import items, schema
from tests import proof_counts
from tests.builders import lookup, save
from tests.integration.conftest import BUCKET, TABLE
from tests.integration.driver import ApiDriver
from tests.integration.faults import INTERNAL_500, READ_TIMEOUT, Duration, Fault, Phase, injected
from tests.integration.test_big_states import state_of

BIG = 120_000
"""Canonical bytes of noise: stored in the bucket."""


class _Body:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


@contextmanager
def s3_fault(services: Services, operation: str, how: str, times: int) -> Iterator[list[int]]:
    """Strike the handler's S3 `operation` `times` times (`how`: "503", "timeout", or "lost": the request lands,
    its answer is lost as a timeout); yields a one-element list counting the strikes."""
    assert services.objects is not None
    client = services.objects.client
    struck = [0]

    def strike(request: Any, event_name: str, **kwargs: Any) -> AWSResponse | None:
        if not event_name.endswith(f".{operation}") or struck[0] >= times:
            return None
        struck[0] += 1
        if how == "lost":
            from moto.core.models import botocore_stubber

            botocore_stubber(request=request, event_name=event_name, **kwargs)
        if how in ("timeout", "lost"):
            raise ReadTimeoutError(endpoint_url=request.url, error="Injected fault")
        body = b"<Error><Code>ServiceUnavailable</Code><Message>Injected fault</Message></Error>"
        return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, _Body(body))  # type: ignore[arg-type]

    client.meta.events.register_first("before-send.s3", strike)
    try:
        yield struck
    finally:
        client.meta.events.unregister("before-send.s3", strike)


def live_items_name_existing_objects(aws: Any, services: Services) -> None:
    """The invariant: every checkpoint item that names an object names one that exists."""
    assert services.objects is not None
    client = services.objects.client
    existing = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])}
    for item in aws.scan(TableName=TABLE)["Items"]:
        if item[schema.PK]["S"].startswith("C#") and items.STATE_OBJECT in item:
            assert item[items.STATE_OBJECT]["S"] in existing, item[items.STATE_OBJECT]


def checkpoints(aws: Any) -> list[dict[str, Any]]:
    return [i for i in aws.scan(TableName=TABLE)["Items"] if i[schema.PK]["S"].startswith("C#")]


@pytest.mark.parametrize("how", ["503", "timeout", "lost"])
@pytest.mark.parametrize("times", [1, 10], ids=["once", "every"])
def test_the_bucket_failing_on_a_spilled_save(
    api: ApiDriver, aws: Any, services: Services, how: str, times: int
) -> None:
    state = state_of(BIG)
    # When the PutObject of a big save fails once (botocore retries it) or on every attempt
    with s3_fault(services, "PutObject", how, times) as struck:
        answer = save(api, state=state)
    assert struck[0] >= 1
    proof_counts.record("big state faults", s3_put=1)
    # Then a single failure is retried away; a lasting one is a 503 that wrote no item
    if times == 1:
        assert answer.status == 201, answer.raw_body
        assert lookup(api).data["state"] == state
    else:
        assert answer.status == 503, answer.raw_body
        assert answer.error["code"] == "UNAVAILABLE"
        assert checkpoints(aws) == []
    live_items_name_existing_objects(aws, services)


@pytest.mark.parametrize(
    ("kind", "phase"), [(INTERNAL_500, Phase.BEFORE), (READ_TIMEOUT, Phase.BEFORE), (READ_TIMEOUT, Phase.AFTER)]
)
@pytest.mark.parametrize("duration", [Duration.ONCE, Duration.EVERY])
def test_dynamodb_failing_after_the_state_went_to_the_bucket(
    api: ApiDriver, aws: Any, services: Services, kind: Any, phase: Phase, duration: Duration
) -> None:
    state = state_of(BIG)
    assert lookup(api).status == 404  # the key is cached: the fault strikes the save's own write
    # When the UpdateItem that follows the PutObject fails (before or after it was applied, once or every time)
    with injected(services.dynamodb) as injector:
        injector.arm(Fault("UpdateItem", kind, phase, duration))
        answer = save(api, state=state)
    proof_counts.record("big state faults", dynamodb_after_put=1)
    # Then the answer is a success or a 503, never a 500; a success reads back; no item names a missing object
    assert answer.status in (201, 503), answer.raw_body
    if answer.status == 201:
        assert lookup(api).data["state"] == state
    elif "nothing was written" in answer.error["message"]:
        assert checkpoints(aws) == []
    live_items_name_existing_objects(aws, services)


@pytest.mark.parametrize("how", ["503", "timeout"])
def test_the_bucket_failing_on_a_read_of_a_spilled_state(
    api: ApiDriver, aws: Any, services: Services, how: str
) -> None:
    # Given a spilled checkpoint
    state = state_of(BIG)
    assert save(api, state=state).status == 201
    # When its object cannot be read
    with s3_fault(services, "GetObject", how, 10):
        answer = lookup(api)
    proof_counts.record("big state faults", s3_get=1)
    # Then the read is a 503 that says to retry, and afterwards the state reads back
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    assert answer.header("retry-after")
    assert lookup(api).data["state"] == state
