"""Purge, `DELETE /v1/subjects/{subject_id}`, driven through the api handler against in-process moto.

What must hold (api-v1.md, "purge", and issue 9): every item of the subject's partition goes (checkpoints of every
agent, live or expired, revisions, anything else there), nothing of another subject or tenant does; page by page,
one Query and one BatchWriteItem each, never a Scan; a purge that runs out of time or meets a failure after some
progress answers `complete: false` and a repeat finishes it; a failure before any progress is a 503 that deleted
nothing; an empty subject is `complete: true`, never 404; the route needs `subjects:purge`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.retries.quota import RetryQuota

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import limits
from baton_checkpoints.store import items, layout, purge, schema
from tests import proof_counts
from tests.builders import lookup, save
from tests.integration.conftest import (
    BUCKET,
    DYNAMODB_LOCAL,
    TABLE,
    aws_world,
    put_key,
    reaper_environment,
    services_on,
    serving,
)
from tests.integration.driver import ApiDriver, CallCounter, Result
from tests.integration.faults import (
    CONNECTION_DROPPED,
    INTERNAL_500,
    READ_TIMEOUT,
    THROTTLING,
    Duration,
    Fault,
    FaultInjector,
    FaultKind,
    Phase,
    _answer,
    injected,
)

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

SUITE = "purge (integration)"
TENANT = "acme"
KINDS = ("task_state", "conversation", "workflow", "cursor")
AGENTS = tuple(f"agent-{n:02d}" for n in range(15))
"""15 agents x 4 kinds: 60 checkpoints, two full pages of 25 and one of 10."""
SUBJECT_KEYS = 60
SAVED_THROUGH_THE_HANDLER = 8
"""Of the 60, these are saved through the handler; the others are copies of a saved item under other agents and
kinds (a save costs moto ~0.2 s, a copied item almost nothing)."""
OTHER_TENANT = "globex"
OTHER_TENANT_SECRET = "btn_test_globex_purger_secret_01"


@pytest.fixture(scope="module")
def aws(engine: str) -> Iterator[Any]:
    """One world for the module per engine, with Baton's table and bucket (a fresh one costs ~0.6 s, more than most
    tests here): every test purges subjects of its own (`subject`)."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture(scope="module")
def container(aws: Any) -> Iterator[tuple[Services, list[RetryQuota]]]:
    """One warm container for the module: the handler's services, serving, and its client's retry quota (botocore
    stops retrying once a run of faults has drained it)."""
    quotas: list[RetryQuota] = []
    original_init = RetryQuota.__init__

    def recorded_init(self: RetryQuota, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        quotas.append(self)

    with pytest.MonkeyPatch.context() as recording:
        recording.setattr(RetryQuota, "__init__", recorded_init)
        built = services_on(TABLE)
    with serving(lambda: built):
        yield built, quotas


@pytest.fixture
def services(container: tuple[Services, list[RetryQuota]]) -> Services:
    """The container's services, its retry quota full again: each test's faults are its own."""
    built, quotas = container
    assert len(quotas) == 1, "the handler's client should have one retry quota"
    for quota in quotas:
        quota._available_capacity = quota._max_capacity
    return built


@pytest.fixture
def subject() -> str:
    """A subject no other test uses."""
    return f"purge-{uuid.uuid4().hex[:12]}"


@pytest.fixture(autouse=True)
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore sleeps between its retries (`botocore.endpoint` calls `time.sleep`): record the delays instead."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=delays.append))
    return delays


# -- the world ---------------------------------------------------------------------------------------------------


def purge_request(api: ApiDriver, subject: str, *, secret: str | None = None) -> Result:
    """`DELETE /v1/subjects/<subject>` (percent-encoded), as the driver's key or `secret`'s."""
    answer = api.invoke("purge_subject", path=f"/v1/subjects/{quote(subject, safe='')}", secret=secret)
    proof_counts.record(SUITE, purge_requests=1)
    return answer


def partition(aws: Any, subject: str, tenant: str = TENANT) -> list[str]:
    """The sort keys left in a subject's partition, read with a client no test hook touches."""
    found: list[str] = []
    request: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": layout.checkpoint_pk(tenant, subject)}},
        "ConsistentRead": True,
    }
    while True:
        page = aws.query(**request)
        found.extend(item["sk"]["S"] for item in page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(found)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def fill_with_checkpoints(api: ApiDriver, aws: Any, subject: str, count: int = SUBJECT_KEYS) -> None:
    """`count` checkpoints of the subject for several agents and every kind: the first saved through the handler
    by the operator (`*`, naming each agent), the rest copies of the first one's item, each under its own agent,
    kind and checkpoint id."""
    slots = [(agent, kind) for agent in AGENTS for kind in KINDS][:count]
    for agent, kind in slots[:SAVED_THROUGH_THE_HANDLER]:
        answer = save(api, subject_id=subject, agent_id=agent, kind=kind, state={"agent": agent, "kind": kind})
        assert answer.status == 201, answer.raw_body
    pk = layout.checkpoint_pk(TENANT, subject)
    template = aws.get_item(TableName=TABLE, Key=layout.key(pk, layout.checkpoint_sk(*slots[0])))["Item"]
    copies = [
        {
            **template,
            **layout.key(pk, layout.checkpoint_sk(agent, kind)),
            schema.GSI1_PK: {"S": layout.checkpoint_index_pk(TENANT, f"ckpt_{uuid.uuid4().hex}")},
        }
        for agent, kind in slots[SAVED_THROUGH_THE_HANDLER:]
    ]
    put_items(aws, copies)


def put_items(aws: Any, items_to_put: list[dict[str, Any]]) -> None:
    """Write items straight to moto, 25 to a BatchWriteItem."""
    for start in range(0, len(items_to_put), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items_to_put[start : start + 25]]
        assert not aws.batch_write_item(RequestItems={TABLE: requests}).get("UnprocessedItems")


def put_raw_items(aws: Any, subject: str, sort_keys: list[str]) -> None:
    """Items of a subject's partition (keys only) written straight to moto: the purge removes items by key,
    whatever they hold."""
    put_items(aws, [layout.key(layout.checkpoint_pk(TENANT, subject), sk) for sk in sort_keys])


def checkpoint_keys(count: int) -> list[str]:
    return [layout.checkpoint_sk(f"agent-{n:03d}", "task_state") for n in range(count)]


def neighbours(subject: str) -> tuple[str, ...]:
    """Other subjects of the same tenant whose partition keys extend the purged one's or begin like it."""
    return (subject + "2", subject + "#x", subject[:-1])


@pytest.fixture
def bystanders(api: ApiDriver, services: Services, aws: Any, subject: str) -> Callable[[], dict[str, list[str]]]:
    """Checkpoints no purge of `subject` in `acme` may touch: the same subject in another tenant, and neighbouring
    subjects of `acme`. Returns a function reading them all back."""
    put_key(services, OTHER_TENANT_SECRET, OTHER_TENANT, "worker", {"*", "subjects:purge"}, "key_" + "b" * 32)
    assert save(api, subject_id=subject, secret=OTHER_TENANT_SECRET).status == 201
    put_raw_items(aws, subject + "2", checkpoint_keys(1))
    for neighbour in neighbours(subject)[1:]:
        put_raw_items(aws, neighbour, checkpoint_keys(1))

    def read_back() -> dict[str, list[str]]:
        held = {f"{OTHER_TENANT}/{subject}": partition(aws, subject, OTHER_TENANT)}
        held.update({f"{TENANT}/{neighbour}": partition(aws, neighbour) for neighbour in neighbours(subject)})
        return held

    assert all(len(sks) == 1 for sks in read_back().values())
    return read_back


def warm_up(api: ApiDriver, counter: CallCounter) -> None:
    """Authenticate once (the key record is then cached), then count from zero."""
    assert api.invoke("list_keys").status == 200
    counter.reset()


# -- what a purge removes and leaves ------------------------------------------------------------------------------


def test_a_purge_removes_every_item_of_the_subject_for_every_agent_and_nothing_else(
    api: ApiDriver,
    aws: Any,
    subject: str,
    bystanders: Callable[[], dict[str, list[str]]],
    counter: CallCounter,
) -> None:
    # Given 60 checkpoints of 15 agents and 4 kinds, one of them expired (TTL has not removed it yet), two revisions
    # and an item of a kind the purge does not know
    fill_with_checkpoints(api, aws, subject)
    pk = layout.checkpoint_pk(TENANT, subject)
    aws.update_item(
        TableName=TABLE,
        Key=layout.key(pk, layout.checkpoint_sk(AGENTS[0], "conversation")),
        UpdateExpression="SET #expires = :past",
        ExpressionAttributeNames={"#expires": items.EXPIRES},
        ExpressionAttributeValues={":past": {"N": "1000"}},
    )
    others = ["V#agent-00#task_state#00000001", "V#agent-00#task_state#00000002", "Z#unknown"]
    put_raw_items(aws, subject, others)
    assert len(partition(aws, subject)) == SUBJECT_KEYS + len(others)
    held_before = bystanders()
    warm_up(api, counter)

    purged = purge_request(api, subject)

    assert purged.status == 200, purged.raw_body
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": SUBJECT_KEYS, "complete": True}
    assert partition(aws, subject) == []
    assert bystanders() == held_before
    # 63 items: pages of 25, 25 and 13, each one Query and one BatchWriteItem; then one Query of gsi1 for the
    # subject's idempotency records (none: these checkpoints were saved without keys); nothing else, no Scan
    assert dict(counter.calls) == {"Query": 4, "BatchWriteItem": 3}
    # And the subject reads as empty
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{subject}/checkpoints", query={})
    assert (listed.status, listed.data) == (200, [])
    for agent, kind in ((AGENTS[0], "task_state"), (AGENTS[1], "task_state"), (AGENTS[14], "cursor")):
        assert lookup(api, subject_id=subject, agent_id=agent, kind=kind).status == 404
    proof_counts.record(SUITE, checkpoints_purged=SUBJECT_KEYS)


def test_a_purge_removes_the_blobs_and_stored_state_of_its_checkpoints_once_the_stream_is_reaped(
    api: ApiDriver, aws: Any, subject: str, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    import boto3

    from baton_checkpoints.handlers import reaper as reaper_function
    from tests.integration.test_reaper import Stream, reap

    reaper_environment(monkeypatch, engine)
    reaper_function.reaper.cache_clear()
    s3 = boto3.client("s3", region_name="us-east-1")
    stream = Stream(aws)
    while stream.read():
        pass  # what the module's other tests wrote is not this test's to reap
    objects_before = bucket_keys(s3)
    # Given a checkpoint whose state was spilled to the bucket and which holds an uploaded blob
    data = b"notes for the next agent\n"
    blob_id = upload_blob(api, s3, data)
    resource = {
        "name": "notes.txt",
        "blob_id": blob_id,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": "text/plain",
    }
    big_state = {"log": [hashlib.sha256(str(n).encode()).hexdigest() for n in range(1000)]}
    saved = save(api, subject_id=subject, state=big_state, resources=[resource])
    assert saved.status == 201, saved.raw_body
    try:
        assert reap(*stream.read()) == []
        assert len(bucket_keys(s3) - objects_before) == 2  # the blob and the spilled state
        # When the subject is purged and the stream's records are reaped (the reaper's own deletes too)
        assert purge_request(api, subject).data == {"subject_id": subject, "deleted_checkpoints": 1, "complete": True}
        for _ in range(3):
            assert reap(*stream.read()) == []
    finally:
        reaper_function.reaper.cache_clear()
    # Then the bucket holds nothing of it, and the blob's record is gone
    assert bucket_keys(s3) == objects_before
    record = aws.get_item(TableName=TABLE, Key=layout.blob_key(TENANT, blob_id), ConsistentRead=True)
    assert "Item" not in record


def upload_blob(api: ApiDriver, s3: Any, data: bytes) -> str:
    """Declare a blob and PUT its bytes as its presigned upload would (checksum, pending tag): its id."""
    digest = hashlib.sha256(data)
    declared = api.invoke(
        "create_blob",
        body={"sha256": digest.hexdigest(), "size": len(data), "media_type": "text/plain"},
        headers={"idempotency-key": None},
    )
    assert declared.status == 201, declared.raw_body
    blob_id = str(declared.data["blob_id"])
    s3.put_object(
        Bucket=BUCKET,
        Key=layout.blob_object(TENANT, blob_id),
        Body=data,
        ContentType="text/plain",
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=base64.b64encode(digest.digest()).decode("ascii"),
        Tagging=f"{schema.PENDING_TAG[0]}={schema.PENDING_TAG[1]}",
    )
    return blob_id


def bucket_keys(s3: Any) -> set[str]:
    return {str(o["Key"]) for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


@pytest.mark.parametrize("count", [0, 1, 24, 25, 26, 50, 51])
def test_each_page_costs_one_query_and_one_batch_write(
    api: ApiDriver, aws: Any, subject: str, counter: CallCounter, engine: str, count: int
) -> None:
    # Given a partition of `count` checkpoint items
    put_raw_items(aws, subject, checkpoint_keys(count))
    warm_up(api, counter)
    purged = purge_request(api, subject)
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": count, "complete": True}
    pages = -(-count // purge.PAGE_KEYS)
    assert set(counter.calls) <= {"Query", "BatchWriteItem"}
    assert counter.calls["BatchWriteItem"] == pages
    # A page ends at 25 keys; after a full last page DynamoDB hands back a LastEvaluatedKey and one more Query finds
    # the partition empty (moto leaves that key out, and the purge stops at once: test_engine_differences.py): never
    # more than one extra Query. Then one Query of gsi1 finds no idempotency record of the subject.
    full_last_page = count > 0 and count % purge.PAGE_KEYS == 0
    extra = 1 if full_last_page and engine == DYNAMODB_LOCAL else 0
    assert counter.calls["Query"] == max(pages, 1) + extra + 1
    assert partition(aws, subject) == []
    proof_counts.record(SUITE, page_count_cases=1)


def test_an_empty_subject_is_complete_and_a_repeat_of_a_finished_purge_deletes_nothing(
    api: ApiDriver, aws: Any, subject: str
) -> None:
    never_used = purge_request(api, subject + "-never-used")
    assert never_used.status == 200, never_used.raw_body  # never 404
    assert never_used.data == {"subject_id": subject + "-never-used", "deleted_checkpoints": 0, "complete": True}
    put_raw_items(aws, subject, checkpoint_keys(3))
    first, second = purge_request(api, subject), purge_request(api, subject)
    assert first.data == {"subject_id": subject, "deleted_checkpoints": 3, "complete": True}
    assert second.data == {"subject_id": subject, "deleted_checkpoints": 0, "complete": True}


def test_the_subject_is_percent_decoded_before_it_is_purged(api: ApiDriver, aws: Any, subject: str) -> None:
    odd = f"{subject} #42/é ü%"
    assert save(api, subject_id=odd).status == 201
    purged = purge_request(api, odd)
    assert purged.data == {"subject_id": odd, "deleted_checkpoints": 1, "complete": True}
    assert partition(aws, odd) == []


@pytest.mark.parametrize(
    "raw_subject", ["%00ticket", "ticket%7F", "ticket%C2%85", "a" * (limits.MAX_SUBJECT_ID_CHARS + 1)]
)
def test_a_bad_subject_path_is_400_naming_subject_id(api: ApiDriver, aws: Any, raw_subject: str) -> None:
    answer = api.invoke("purge_subject", path=f"/v1/subjects/{raw_subject}")
    assert answer.status == 400, answer.raw_body
    assert answer.error["code"] == "VALIDATION_ERROR"
    assert [e["pointer"] for e in answer.error["details"]["errors"]] == ["/subject_id"]
    proof_counts.record(SUITE, bad_paths=1)


# -- who may purge ------------------------------------------------------------------------------------------------


def test_a_key_without_subjects_purge_gets_403_and_nothing_is_deleted(
    api: ApiDriver, services: Services, aws: Any, subject: str
) -> None:
    secret = "btn_test_no_purge_scope_000001"
    scopes = {"checkpoints:read", "checkpoints:write", "checkpoints:delete", "keys:manage"}
    put_key(services, secret, TENANT, "operator", scopes, "key_" + "c" * 32)
    put_raw_items(aws, subject, checkpoint_keys(3))
    refused = purge_request(api, subject, secret=secret)
    assert refused.status == 403, refused.raw_body
    assert refused.error["code"] == "FORBIDDEN"
    assert len(partition(aws, subject)) == 3


def test_a_key_with_only_subjects_purge_purges_every_agents_checkpoints(
    api: ApiDriver, services: Services, aws: Any, subject: str
) -> None:
    # The contract: purge removes the subject "for every agent", whoever's key holds the scope
    secret = "btn_test_only_purge_scope_00001"
    put_key(services, secret, TENANT, "janitor", {"subjects:purge"}, "key_" + "d" * 32)
    fill_with_checkpoints(api, aws, subject, count=10)
    purged = purge_request(api, subject, secret=secret)
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": 10, "complete": True}
    assert partition(aws, subject) == []


def test_another_tenants_key_deletes_nothing_of_this_tenant(
    api: ApiDriver, aws: Any, subject: str, bystanders: Callable[[], dict[str, list[str]]]
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(30))
    held_before = bystanders()
    purged = purge_request(api, subject, secret=OTHER_TENANT_SECRET)
    # globex's own checkpoint of the subject goes; acme's thirty stay
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": 1, "complete": True}
    assert len(partition(aws, subject)) == 30
    assert bystanders() == {**held_before, f"{OTHER_TENANT}/{subject}": []}


# -- time runs out ------------------------------------------------------------------------------------------------


def test_a_purge_whose_deadline_has_passed_deletes_nothing_and_a_repeat_completes(
    api: ApiDriver, aws: Any, subject: str, counter: CallCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(SUBJECT_KEYS))
    warm_up(api, counter)
    with monkeypatch.context() as patched:
        patched.setattr(limits, "PURGE_SECONDS", 0)
        stopped = purge_request(api, subject)
    assert stopped.data == {"subject_id": subject, "deleted_checkpoints": 0, "complete": False}
    assert counter.total == 0
    assert len(partition(aws, subject)) == SUBJECT_KEYS
    again = purge_request(api, subject)
    assert again.data == {"subject_id": subject, "deleted_checkpoints": SUBJECT_KEYS, "complete": True}
    assert partition(aws, subject) == []


def test_a_purge_stops_at_the_first_page_boundary_past_its_deadline_and_a_repeat_continues(
    api: ApiDriver, aws: Any, subject: str, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(SUBJECT_KEYS))
    # Given a clock that jumps past any deadline once the first page's BatchWriteItem has answered
    jumped: list[bool] = []
    monkeypatch.setattr(purge, "monotonic", lambda: time.monotonic() + (3600.0 if jumped else 0.0))

    def jump(**_: Any) -> None:
        jumped.append(True)

    services.dynamodb.meta.events.register("after-call.dynamodb.BatchWriteItem", jump)
    try:
        stopped = purge_request(api, subject)
    finally:
        services.dynamodb.meta.events.unregister("after-call.dynamodb.BatchWriteItem", jump)
    assert stopped.data == {"subject_id": subject, "deleted_checkpoints": 25, "complete": False}
    assert len(partition(aws, subject)) == SUBJECT_KEYS - 25
    jumped.clear()
    again = purge_request(api, subject)
    assert again.data == {"subject_id": subject, "deleted_checkpoints": SUBJECT_KEYS - 25, "complete": True}
    assert partition(aws, subject) == []


# -- failures -----------------------------------------------------------------------------------------------------


class UnprocessedDeletes:
    """Stands between the fault injector and moto: once armed, answers `rounds` BatchWriteItem requests as DynamoDB
    does when it throttles a batch (200, every delete left in `UnprocessedItems`, nothing applied); every other
    request goes on to moto. (`faults.py` words an unprocessed answer for BatchGetItem only.)"""

    def __init__(self, moto: Callable[..., AWSResponse | None], rounds: int) -> None:
        self.moto = moto
        self.remaining = rounds
        self.armed = False
        self.struck = 0

    def __call__(self, request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> AWSResponse | None:
        if self.armed and self.remaining > 0 and event_name.endswith(".BatchWriteItem"):
            self.remaining -= 1
            self.struck += 1
            sent = json.loads(cast(bytes, request.body or b"{}"))
            return _answer(request, 200, {"UnprocessedItems": sent["RequestItems"]})
        return self.moto(event_name=event_name, request=request, **kwargs)


@dataclass(frozen=True)
class FailureCase:
    """One fault on one page of a 60-checkpoint purge, and what the first request and its repeat must answer."""

    operation: str
    kind: FaultKind | None
    """None: DynamoDB leaves the page's deletes unprocessed (`UnprocessedDeletes`)."""
    phase: Phase
    duration: Duration
    page: int
    """The page whose request is struck: 1 (nothing was deleted yet) or 2 (the first page's 25 were)."""
    status: int
    deleted: int
    """`deleted_checkpoints` of a 200; 0 for a 503."""
    left: int
    """Items left in the partition after the first request."""

    @property
    def name(self) -> str:
        kind = "unprocessed" if self.kind is None else self.kind.name
        return f"{self.operation}-{kind}-{self.phase.value}-{self.duration.value}-page{self.page}"


AFTER, BEFORE, EVERY, ONCE = Phase.AFTER, Phase.BEFORE, Duration.EVERY, Duration.ONCE
FAILURES = [
    # Nothing could be done: 503, and nothing was deleted
    FailureCase("BatchWriteItem", THROTTLING, BEFORE, EVERY, 1, 503, 0, 60),
    # Deletes that landed with their answers lost: found gone by a read of the page, counted, and a 200
    FailureCase("BatchWriteItem", INTERNAL_500, AFTER, EVERY, 1, 200, 25, 35),
    FailureCase("BatchWriteItem", None, BEFORE, EVERY, 1, 503, 0, 60),
    FailureCase("Query", THROTTLING, BEFORE, EVERY, 1, 503, 0, 60),
    FailureCase("Query", CONNECTION_DROPPED, BEFORE, EVERY, 1, 503, 0, 60),
    # Absorbed by a retry (botocore's, or the purge's own for unprocessed deletes)
    FailureCase("BatchWriteItem", None, BEFORE, ONCE, 1, 200, 60, 0),
    FailureCase("BatchWriteItem", CONNECTION_DROPPED, BEFORE, ONCE, 2, 200, 60, 0),
    FailureCase("BatchWriteItem", READ_TIMEOUT, AFTER, ONCE, 2, 200, 60, 0),
    # After some progress: 200 with complete false, and what was deleted stays deleted
    FailureCase("BatchWriteItem", THROTTLING, BEFORE, EVERY, 2, 200, 25, 35),
    FailureCase("BatchWriteItem", INTERNAL_500, AFTER, EVERY, 2, 200, 50, 10),
    FailureCase("BatchWriteItem", None, BEFORE, EVERY, 2, 200, 25, 35),
    FailureCase("Query", THROTTLING, BEFORE, EVERY, 2, 200, 25, 35),
    FailureCase("Query", READ_TIMEOUT, BEFORE, EVERY, 2, 200, 25, 35),
]


@pytest.mark.parametrize("case", FAILURES, ids=lambda case: case.name)
def test_a_failure_anywhere_leaves_a_purge_that_a_repeat_finishes(
    api: ApiDriver, aws: Any, subject: str, services: Services, case: FailureCase
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(SUBJECT_KEYS))
    warm_up_key(api)
    with injected(services.dynamodb) as injector, armed_on_page(services, injector, case) as struck:
        first = purge_request(api, subject)
    if case.status == 503:
        assert first.status == 503, first.raw_body
        assert first.error["code"] == "UNAVAILABLE"
        assert (first.header("Retry-After") or "").isdigit()
    else:
        assert first.status == 200, first.raw_body
        assert first.data == {"subject_id": subject, "deleted_checkpoints": case.deleted, "complete": case.left == 0}
    assert len(partition(aws, subject)) == case.left
    # The repeat, with DynamoDB well again, finishes and counts exactly what was left
    again = purge_request(api, subject)
    assert again.data == {"subject_id": subject, "deleted_checkpoints": case.left, "complete": True}
    assert partition(aws, subject) == []
    proof_counts.record(SUITE, failure_cases=1, faults_injected=struck())


def warm_up_key(api: ApiDriver) -> None:
    """Authenticate once, so that no fault strikes the key's lookup."""
    assert api.invoke("list_keys").status == 200


@contextmanager
def armed_on_page(services: Services, injector: FaultInjector, case: FailureCase) -> Iterator[Callable[[], int]]:
    """Arm `case`'s fault now (page 1) or once the first page's BatchWriteItem has answered (page 2). Yields a
    function telling how many requests the fault struck."""
    unprocessed = UnprocessedDeletes(injector.moto, purge.MAX_WRITE_ROUNDS if case.duration is EVERY else 1)
    injector.moto = unprocessed
    faults: list[Fault] = []

    def arm() -> None:
        if case.kind is None:
            unprocessed.armed = True
        else:
            faults.append(injector.arm(Fault(case.operation, case.kind, case.phase, case.duration)))

    def arm_after_first_page(**_: Any) -> None:
        if not unprocessed.armed and not faults:
            arm()

    events = services.dynamodb.meta.events
    if case.page == 1:
        arm()
    else:
        events.register("after-call.dynamodb.BatchWriteItem", arm_after_first_page)
    try:
        yield lambda: unprocessed.struck + sum(fault.struck for fault in faults)
    finally:
        events.unregister("after-call.dynamodb.BatchWriteItem", arm_after_first_page)


# -- idempotency records (issue 20) ---------------------------------------------------------------------------------


def record_of(aws: Any, key: str, agent: str = "operator", tenant: str = TENANT) -> dict[str, Any] | None:
    """The idempotency record of `key` (of the agent's keys), read consistently; None when there is none."""
    found = aws.get_item(TableName=TABLE, Key=layout.idempotency_key(tenant, agent, key), ConsistentRead=True)
    return cast(dict[str, Any] | None, found.get("Item"))


def put_records(aws: Any, subject: str, count: int, prefix: str = "key") -> list[str]:
    """`count` idempotency records of saves to `subject`, written straight to moto as a save writes them; their
    keys."""
    from baton_checkpoints.domain.checkpoints import IdempotencyClaim, Saved

    keys = [f"{prefix}-{subject}-{n:03d}" for n in range(count)]
    saved = Saved(f"ckpt_{uuid.uuid4().hex}", subject, "operator", "task_state", 1, "active", "0" * 64, 2, 10**13)
    put_items(
        aws,
        [
            items.record_item(TENANT, IdempotencyClaim(key, "operator", "ab" * 32), f"req-{key}", saved, 10**13)
            for key in keys
        ],
    )
    return keys


def test_a_retry_of_a_purged_save_is_a_new_request_that_creates_the_checkpoint_anew(
    api: ApiDriver, aws: Any, subject: str
) -> None:
    # Given a save made with an Idempotency-Key, whose retry replays it
    first = save(api, "purged-save-1", subject_id=subject, state={"step": 1})
    assert first.status == 201, first.raw_body
    replay = save(api, "purged-save-1", subject_id=subject, state={"step": 1})
    assert (replay.status, replay.header("Idempotent-Replayed")) == (201, "true")
    assert record_of(aws, "purged-save-1") is not None
    # When the subject is purged
    purged = purge_request(api, subject)
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": 1, "complete": True}
    # Then the key's record went with it (api-v1.md: a purge removes the subject's idempotency records)
    assert record_of(aws, "purged-save-1") is None
    # And the same request again is a new one: it creates the checkpoint anew rather than answering the purged one
    again = save(api, "purged-save-1", subject_id=subject, state={"step": 1})
    assert again.status == 201, again.raw_body
    assert again.header("Idempotent-Replayed") is None
    assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
    assert lookup(api, subject_id=subject).data["checkpoint_id"] == again.data["checkpoint_id"]
    # And its own retry replays it
    assert save(api, "purged-save-1", subject_id=subject, state={"step": 1}).header("Idempotent-Replayed") == "true"
    proof_counts.record(SUITE, records_purged=1)


def test_a_purge_removes_the_records_of_every_write_to_the_subject_and_no_others(
    api: ApiDriver, aws: Any, subject: str
) -> None:
    from baton_checkpoints.domain.checkpoints import IdempotencyClaim
    from baton_checkpoints.domain.leases import Lease, LeaseGrant

    # Given keyed writes to the subject: saves for two agents (a `*` key names them), and a restore
    for agent in ("agent-00", "agent-01"):
        answer = save(api, f"{subject}-{agent}", subject_id=subject, agent_id=agent, state={"a": 1}, keep_revisions=2)
        assert answer.status == 201, answer.raw_body
    checkpoint_id = save(api, None, subject_id=subject, agent_id="agent-00", state={"a": 2}).data["checkpoint_id"]
    restored = api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}/restore",
        body={"revision": 1},
        headers={"idempotency-key": f"{subject}-restore"},
    )
    assert restored.status == 200, restored.raw_body
    # And a lease acquire's record, as the lease store writes it when it names the leased checkpoint
    grant = LeaseGrant(Lease("worker", 1, "ab" * 16, 10**13, "key_x"), created=True)
    lease_record = items.grant_record_item(
        TENANT,
        IdempotencyClaim(f"{subject}-lease", "operator", "cd" * 32),
        "req-lease",
        grant,
        10**13,
        checkpoint_key=layout.checkpoint_key(TENANT, subject, "agent-00", "task_state"),
    )
    put_items(aws, [lease_record])
    # And writes that are not the subject's: another subject's keyed save, a keyed blob declaration
    other = f"{subject}-other"
    assert save(api, f"{subject}-bystander", subject_id=other).status == 201
    declared = api.invoke(
        "create_blob",
        body={"sha256": "0" * 64, "size": 1, "media_type": "text/plain"},
        headers={"idempotency-key": f"{subject}-blob"},
    )
    assert declared.status == 201, declared.raw_body
    mine = [f"{subject}-agent-00", f"{subject}-agent-01", f"{subject}-restore", f"{subject}-lease"]
    assert all(record_of(aws, key) is not None for key in mine)
    # When the subject is purged
    purged = purge_request(api, subject)
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": 2, "complete": True}
    # Then every record of its writes is gone, and the others stay
    assert [key for key in mine if record_of(aws, key) is not None] == []
    assert record_of(aws, f"{subject}-bystander") is not None
    assert record_of(aws, f"{subject}-blob") is not None
    assert len(partition(aws, other)) == 1
    proof_counts.record(SUITE, records_purged=len(mine))


@pytest.mark.parametrize("count", [1, 25, 60])
def test_records_are_deleted_a_page_of_the_index_at_a_time(
    api: ApiDriver, aws: Any, subject: str, counter: CallCounter, count: int
) -> None:
    # Given a checkpoint of the subject and `count` records of keyed saves to it
    put_raw_items(aws, subject, checkpoint_keys(1))
    keys = put_records(aws, subject, count)
    warm_up(api, counter)
    purged = purge_request(api, subject)
    assert purged.data == {"subject_id": subject, "deleted_checkpoints": 1, "complete": True}
    assert [key for key in keys if record_of(aws, key) is not None] == []
    assert partition(aws, subject) == []
    # Per page of 25 records one Query of gsi1 and one BatchWriteItem (after a full last page, one more Query may
    # find the end), then one Query and one BatchWriteItem for the partition; never a Scan
    pages = -(-count // purge.PAGE_KEYS)
    assert set(counter.calls) <= {"Query", "BatchWriteItem"}
    assert counter.calls["BatchWriteItem"] == pages + 1
    assert counter.calls["Query"] in {pages + 1, pages + 2}
    proof_counts.record(SUITE, records_purged=count)


def test_a_purge_that_runs_out_of_time_among_the_records_stops_before_the_checkpoints_and_a_repeat_finishes(
    api: ApiDriver, aws: Any, subject: str, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(3))
    keys = put_records(aws, subject, 30)
    # Given a clock that jumps past any deadline once the first page of records is deleted
    jumped: list[bool] = []
    monkeypatch.setattr(purge, "monotonic", lambda: time.monotonic() + (3600.0 if jumped else 0.0))

    def jump(**_: Any) -> None:
        jumped.append(True)

    services.dynamodb.meta.events.register("after-call.dynamodb.BatchWriteItem", jump)
    try:
        stopped = purge_request(api, subject)
    finally:
        services.dynamodb.meta.events.unregister("after-call.dynamodb.BatchWriteItem", jump)
    # Then it stopped with the checkpoints still there: no record is left answering a checkpoint that is gone
    assert stopped.data == {"subject_id": subject, "deleted_checkpoints": 0, "complete": False}
    assert len([key for key in keys if record_of(aws, key) is not None]) == 30 - purge.PAGE_KEYS
    assert len(partition(aws, subject)) == 3
    jumped.clear()
    again = purge_request(api, subject)
    assert again.data == {"subject_id": subject, "deleted_checkpoints": 3, "complete": True}
    assert [key for key in keys if record_of(aws, key) is not None] == []
    assert partition(aws, subject) == []


@dataclass(frozen=True)
class RecordFailure:
    """One fault among the records of a purge (30 of them: two pages of the index), and what the first request must
    answer. The subject's one checkpoint is deleted after the records: a failure there leaves it."""

    operation: str
    kind: FaultKind | None
    """None: DynamoDB leaves the records' deletes unprocessed."""
    phase: Phase
    duration: Duration
    page: int
    """The records' page whose request is struck: 1 (nothing deleted yet) or 2 (the first 25 records were)."""
    status: int
    records_left: int
    """Records left after the first request (the deletes of a page whose answers were lost landed)."""

    @property
    def name(self) -> str:
        kind = "unprocessed" if self.kind is None else self.kind.name
        return f"{self.operation}-{kind}-{self.phase.value}-{self.duration.value}-page{self.page}"


RECORDS = 30
RECORD_FAILURES = [
    # Nothing deleted yet: a 503 that deleted nothing
    RecordFailure("Query", THROTTLING, BEFORE, EVERY, 1, 503, RECORDS),
    RecordFailure("Query", CONNECTION_DROPPED, BEFORE, EVERY, 1, 503, RECORDS),
    RecordFailure("BatchWriteItem", THROTTLING, BEFORE, EVERY, 1, 503, RECORDS),
    RecordFailure("BatchWriteItem", None, BEFORE, EVERY, 1, 503, RECORDS),
    # Deletes that landed with their answers lost: 200, complete false (a repeat deletes again, harmlessly)
    RecordFailure("BatchWriteItem", INTERNAL_500, AFTER, EVERY, 1, 200, RECORDS - 25),
    # After the first page: 200, complete false, the rest left for the repeat
    RecordFailure("Query", THROTTLING, BEFORE, EVERY, 2, 200, RECORDS - 25),
    RecordFailure("Query", READ_TIMEOUT, BEFORE, EVERY, 2, 200, RECORDS - 25),
    RecordFailure("BatchWriteItem", THROTTLING, BEFORE, EVERY, 2, 200, RECORDS - 25),
    RecordFailure("BatchWriteItem", None, BEFORE, EVERY, 2, 200, RECORDS - 25),
    # Absorbed by a retry (botocore's, or the purge's own for unprocessed deletes): the purge completes
    RecordFailure("Query", CONNECTION_DROPPED, BEFORE, ONCE, 2, 200, 0),
    RecordFailure("BatchWriteItem", None, BEFORE, ONCE, 1, 200, 0),
    RecordFailure("BatchWriteItem", READ_TIMEOUT, AFTER, ONCE, 2, 200, 0),
]


@pytest.mark.parametrize("case", RECORD_FAILURES, ids=lambda case: case.name)
def test_a_failure_among_the_records_leaves_a_purge_that_a_repeat_finishes(
    api: ApiDriver, aws: Any, subject: str, services: Services, case: RecordFailure
) -> None:
    put_raw_items(aws, subject, checkpoint_keys(1))
    keys = put_records(aws, subject, RECORDS)
    warm_up_key(api)
    # The records come first: their Query and BatchWriteItem of page n are the purge's n-th of each
    skip = case.page - 1
    with injected(services.dynamodb) as injector:
        unprocessed = UnprocessedDeletes(injector.moto, purge.MAX_WRITE_ROUNDS if case.duration is EVERY else 1)
        writes = [0]

        def moto(request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> AWSResponse | None:
            if case.kind is None and event_name.endswith(".BatchWriteItem"):
                writes[0] += 1
                unprocessed.armed = unprocessed.armed or writes[0] > skip
            return unprocessed(request=request, event_name=event_name, **kwargs)

        injector.moto = moto
        faults = (
            []
            if case.kind is None
            else [injector.arm(Fault(case.operation, case.kind, case.phase, case.duration, skip=skip))]
        )
        first = purge_request(api, subject)
    struck = unprocessed.struck + sum(fault.struck for fault in faults)
    assert struck >= 1, "the fault never struck the records"
    left = [key for key in keys if record_of(aws, key) is not None]
    if case.status == 503:
        assert first.status == 503, first.raw_body
        assert first.error["code"] == "UNAVAILABLE"
    else:
        assert first.status == 200, first.raw_body
        complete = case.records_left == 0
        assert first.data == {"subject_id": subject, "deleted_checkpoints": int(complete), "complete": complete}
    assert len(left) == case.records_left
    # No record outlives the checkpoint it answered: the checkpoint goes only once every record is gone
    assert len(partition(aws, subject)) == (0 if case.records_left == 0 and case.status == 200 else 1)
    # The repeat, with DynamoDB well again, finishes
    again = purge_request(api, subject)
    assert again.data == {
        "subject_id": subject,
        "deleted_checkpoints": int(partition_left(first)),
        "complete": True,
    }
    assert [key for key in keys if record_of(aws, key) is not None] == []
    assert partition(aws, subject) == []
    proof_counts.record(SUITE, failure_cases=1, faults_injected=struck)


def partition_left(first: Result) -> bool:
    """True when the first purge left the subject's checkpoint (it did not complete)."""
    return not (first.status == 200 and first.data["complete"])
