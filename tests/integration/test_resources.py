"""Attaching blobs to checkpoints (`resources`): what a save checks, what it claims, and what it costs. Against
in-process moto and DynamoDB Local; the blobs are declared and uploaded here directly (their routes have their own
suite)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import CheckpointKey
from baton_checkpoints.domain.ids import new_blob_id
from baton_checkpoints.store import items, layout, schema
from tests.builders import KIND, SUBJECT, lookup, save
from tests.integration.conftest import BUCKET, TABLE, put_key
from tests.integration.driver import ApiDriver, CallCounter

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

NOW_MS = 1_785_412_084_652
WORKER_SECRET = "btn_test_worker_secret_00000001"


def declare(
    services: Services,
    data: bytes,
    *,
    tenant: str = "acme",
    agent: str = "operator",
    upload: bool = True,
    uploaded: bytes | None = None,
    media_type: str = "text/plain",
) -> dict[str, Any]:
    """Declare a blob (its record) and upload its bytes (or `uploaded` instead, or nothing); its resource ref."""
    blob_id = new_blob_id()
    sha256 = hashlib.sha256(data).hexdigest()
    blob = Blob(tenant, blob_id, agent, sha256, len(data), media_type, NOW_MS, NOW_MS + 10**12)
    services.dynamodb.put_item(TableName=TABLE, Item=items.blob_item(blob))
    if upload:
        body = data if uploaded is None else uploaded
        assert services.objects is not None
        services.objects.client.put_object(
            Bucket=BUCKET,
            Key=layout.blob_object(tenant, blob_id),
            Body=body,
            ContentType=media_type,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=base64.b64encode(hashlib.sha256(body).digest()).decode(),
        )
    return {
        "name": f"file-{blob_id[-12:]}",  # 4 digits collided among 100 blobs about once in 14 runs
        "blob_id": blob_id,
        "sha256": sha256,
        "size": len(data),
        "media_type": media_type,
    }


def blob_record(services: Services, blob_id: str, tenant: str = "acme") -> Blob | None:
    found = services.dynamodb.get_item(TableName=TABLE, Key=layout.blob_key(tenant, blob_id), ConsistentRead=True)
    return items.blob_from_item(found["Item"]) if "Item" in found else None


def checkpoint_items(aws: Any) -> list[dict[str, Any]]:
    return [i for i in aws.scan(TableName=TABLE)["Items"] if i[schema.PK]["S"].startswith("C#")]


OWNER = CheckpointKey("acme", SUBJECT, "operator", KIND)


def test_a_save_attaches_a_landed_blob_and_claims_it(
    api: ApiDriver, aws: Any, services: Services, counter: CallCounter, s3_calls: CallCounter
) -> None:
    # Given a declared and uploaded blob
    resource = declare(services, b"the report")
    assert lookup(api).status == 404  # the key is cached
    counter.reset()
    s3_calls.reset()
    # When a save names it
    answer = save(api, resources=[resource])
    # Then it is created: the plain write's condition (the checkpoint holds exactly these blobs) failed, so the save
    # read the checkpoint and the blob together, looked at the upload once, and wrote the checkpoint and the claim
    # in one transaction
    assert answer.status == 201, answer.raw_body
    assert dict(counter.calls) == {"UpdateItem": 1, "BatchGetItem": 1, "TransactWriteItems": 1}
    assert dict(s3_calls.calls) == {"HeadObject": 1}
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner == OWNER
    assert blob.expires_ms is None  # held: it no longer expires as a pending upload
    (item,) = checkpoint_items(aws)
    assert item[items.RESOURCE_BLOBS]["SS"] == [resource["blob_id"]]
    assert lookup(api).data["resources"][0]["blob_id"] == resource["blob_id"]


def test_saving_again_with_the_blobs_it_holds_costs_one_update_and_no_s3(
    api: ApiDriver, services: Services, counter: CallCounter, s3_calls: CallCounter
) -> None:
    # Given a checkpoint holding a blob
    resource = declare(services, b"kept")
    assert save(api, resources=[resource]).status == 201
    counter.reset()
    s3_calls.reset()
    # When the agent saves its next step naming the same blob
    answer = save(api, state={"step": 2}, resources=[resource])
    # Then it is one conditional UpdateItem, and S3 is not asked again
    assert answer.status == 200, answer.raw_body
    assert dict(counter.calls) == {"UpdateItem": 1}
    assert dict(s3_calls.calls) == {}


def test_dropping_a_blob_keeps_the_rest_and_lets_the_dropped_one_go(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    first, second = declare(services, b"one"), declare(services, b"two")
    assert save(api, resources=[first, second]).status == 201
    # When a save names only the second
    assert save(api, state={"step": 2}, resources=[second]).status == 200
    # Then the checkpoint holds the second only (the reaper deletes the first: its own suite)
    (item,) = checkpoint_items(aws)
    assert item[items.RESOURCE_BLOBS]["SS"] == [second["blob_id"]]
    assert [r["blob_id"] for r in lookup(api).data["resources"]] == [second["blob_id"]]
    # And a save without resources lets both go
    assert save(api, state={"step": 3}).status == 200
    (item,) = checkpoint_items(aws)
    assert items.RESOURCE_BLOBS not in item
    assert items.RESOURCES not in item


def refusal(answer: Any, pointer: str, *words: str) -> None:
    assert answer.status == 400, answer.raw_body
    assert answer.error["code"] == "VALIDATION_ERROR"
    entries = answer.error["details"]["errors"]
    assert entries[0]["pointer"] == pointer, entries
    for word in words:
        assert word in entries[0]["message"], entries[0]["message"]


@pytest.mark.parametrize(
    ("case", "pointer", "words"),
    [
        ("unknown", "/resources/0/blob_id", ("was not found",)),
        ("not uploaded", "/resources/0/blob_id", ("has not landed",)),
        ("other bytes", "/resources/0/blob_id", ("do not match",)),
        ("sha256", "/resources/0/sha256", ("declared with",)),
        ("size", "/resources/0/size", ("declared with",)),
        ("media type", "/resources/0/media_type", ("declared with",)),
        ("other agent", "/resources/0/blob_id", ("was not found",)),
        ("other tenant", "/resources/0/blob_id", ("was not found",)),
    ],
)
def test_a_blob_that_cannot_be_attached_is_refused_naming_it_and_nothing_is_written(
    api: ApiDriver, aws: Any, services: Services, case: str, pointer: str, words: tuple[str, ...]
) -> None:
    data = b"bytes of the blob"
    if case == "unknown":
        resource = {
            "name": "x",
            "blob_id": new_blob_id(),
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "media_type": "text/plain",
        }
    elif case == "not uploaded":
        resource = declare(services, data, upload=False)
    elif case == "other bytes":
        resource = declare(services, data, uploaded=b"something else")
    elif case in ("sha256", "size", "media type"):
        resource = declare(services, data)
        field = case.replace(" ", "_")
        resource[field] = {"sha256": "0" * 64, "size": 5, "media_type": "image/png"}[field]
    elif case == "other agent":
        resource = declare(services, data, agent="worker")
    else:
        resource = declare(services, data, tenant="globex")
    before = blob_record(services, resource["blob_id"], "globex" if case == "other tenant" else "acme")
    put_key(services, WORKER_SECRET, "acme", "worker", {"checkpoints:write", "checkpoints:read"}, "key_" + "c" * 32)
    if case == "other agent":
        # A key without `*` of another agent declared the blob; the operator's agent may not take it ...
        answer = save(api, resources=[resource])
        refusal(answer, pointer, *words)
        # ... and the worker's own save of it is fine (checked below, not here)
        resource_ok = declare(services, data, agent="worker")
        assert save(api, secret=WORKER_SECRET, subject_id="w", resources=[resource_ok]).status == 201
        return
    answer = save(api, resources=[resource])
    refusal(answer, pointer, *words)
    assert checkpoint_items(aws) == []
    assert blob_record(services, resource["blob_id"], "globex" if case == "other tenant" else "acme") == before


def test_a_blob_belongs_to_one_checkpoint(api: ApiDriver, aws: Any, services: Services) -> None:
    resource = declare(services, b"shared?")
    assert save(api, resources=[resource]).status == 201
    # When another checkpoint names the same blob
    answer = save(api, subject_id="someone-else", resources=[resource])
    # Then it is refused naming the blob, and the first keeps it
    refusal(answer, "/resources/0/blob_id", "another checkpoint holds")
    assert len(checkpoint_items(aws)) == 1
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner == OWNER


def test_names_and_blobs_are_unique_within_a_save(api: ApiDriver, services: Services) -> None:
    resource = declare(services, b"twice")
    answer = save(api, resources=[resource, dict(resource)])
    assert answer.status == 400, answer.raw_body
    pointers = [e["pointer"] for e in answer.error["details"]["errors"]]
    assert pointers == ["/resources/1/name", "/resources/1/blob_id"]


def test_an_idempotent_save_claims_its_blobs_with_its_record_and_replays(
    api: ApiDriver, services: Services, counter: CallCounter
) -> None:
    resource = declare(services, b"idempotent")
    assert lookup(api).status == 404
    counter.reset()
    first = save(api, "attach-1", resources=[resource])
    assert first.status == 201, first.raw_body
    assert dict(counter.calls) == {"BatchGetItem": 1, "TransactWriteItems": 1}
    again = save(api, "attach-1", resources=[resource])
    assert again.status == 201
    assert again.header("idempotent-replayed") == "true"
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner == OWNER


def test_a_create_only_save_with_resources_claims_them(api: ApiDriver, services: Services) -> None:
    resource = declare(services, b"new")
    assert save(api, expected_revision=0, resources=[resource]).status == 201
    assert save(api, expected_revision=0, resources=[resource]).status == 409
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner == OWNER


def test_an_expired_checkpoint_can_be_saved_again_with_its_blobs(api: ApiDriver, services: Services) -> None:
    resource = declare(services, b"survives")
    assert save(api, ttl_seconds=60, resources=[resource]).status == 201
    # When the checkpoint has expired (its item not yet removed by TTL) and a save names the same blob
    table = services.dynamodb
    key = layout.checkpoint_key("acme", SUBJECT, "operator", KIND)
    table.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET #x = :past",
        ExpressionAttributeNames={"#x": items.EXPIRES},
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    answer = save(api, state={"step": 9}, resources=[resource])
    # Then a new checkpoint holds it (the blob belongs to the checkpoint's key, not to its lost id)
    assert answer.status == 201, answer.raw_body
    assert lookup(api).data["resources"][0]["blob_id"] == resource["blob_id"]


def test_the_operator_may_attach_its_own_blobs_to_another_agents_checkpoint(api: ApiDriver, services: Services) -> None:
    resource = declare(services, b"from the operator")
    answer = save(api, agent_id="worker", resources=[resource])
    assert answer.status == 201, answer.raw_body
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner == CheckpointKey("acme", SUBJECT, "worker", KIND)


# -- faults on the way of an attach ------------------------------------------------------------------------------


def claims_hold(aws: Any, services: Services) -> None:
    """The invariant: every blob a checkpoint item names has a record that names that checkpoint as its owner."""
    for item in checkpoint_items(aws):
        owner_pk, owner_sk = item[schema.PK]["S"], item[schema.SK]["S"]
        tenant = owner_pk.split("#")[1]
        for blob_id in item.get(items.RESOURCE_BLOBS, {}).get("SS", []):
            record = services.dynamodb.get_item(TableName=TABLE, Key=layout.blob_key(tenant, blob_id))["Item"]
            assert (record[items.OWNER_PK]["S"], record[items.OWNER_SK]["S"]) == (owner_pk, owner_sk)


@pytest.mark.parametrize("operation", ["BatchGetItem", "TransactWriteItems"])
@pytest.mark.parametrize(
    ("kind_name", "phase_name", "duration_name"),
    [
        ("internal_500", "BEFORE", "EVERY"),
        ("read_timeout", "BEFORE", "ONCE"),
        ("read_timeout", "AFTER", "ONCE"),
        ("read_timeout", "AFTER", "EVERY"),
    ],
)
def test_dynamodb_failing_during_an_attach(
    api: ApiDriver,
    aws: Any,
    services: Services,
    operation: str,
    kind_name: str,
    phase_name: str,
    duration_name: str,
) -> None:
    from tests import proof_counts
    from tests.integration import faults

    kind = {"internal_500": faults.INTERNAL_500, "read_timeout": faults.READ_TIMEOUT}[kind_name]
    resource = declare(services, b"fault-tolerant")
    assert lookup(api).status == 404
    with faults.injected(services.dynamodb) as injector:
        injector.arm(faults.Fault(operation, kind, faults.Phase[phase_name], faults.Duration[duration_name]))
        answer = save(api, resources=[resource])
    proof_counts.record("attach faults", cases=1)
    assert answer.status in (201, 503), answer.raw_body
    if answer.status == 201:
        assert lookup(api).data["resources"][0]["blob_id"] == resource["blob_id"]
    elif "nothing was written" in answer.error["message"]:
        assert checkpoint_items(aws) == []
        blob = blob_record(services, resource["blob_id"])
        assert blob is not None
        assert blob.owner is None
    claims_hold(aws, services)


def test_the_bucket_failing_on_the_head_of_an_attach_writes_nothing(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    from botocore.awsrequest import AWSResponse

    resource = declare(services, b"head fails")
    assert services.objects is not None
    client = services.objects.client

    class Body:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b""

    def fail(request: Any, event_name: str, **_: Any) -> Any:
        return AWSResponse(request.url, 503, {}, Body()) if event_name.endswith("HeadObject") else None

    client.meta.events.register_first("before-send.s3", fail)
    try:
        answer = save(api, resources=[resource])
    finally:
        client.meta.events.unregister("before-send.s3", fail)
    assert answer.status == 503, answer.raw_body
    assert checkpoint_items(aws) == []
    blob = blob_record(services, resource["blob_id"])
    assert blob is not None
    assert blob.owner is None


def test_records_give_each_resource_a_download_url_and_summaries_do_not(
    api: ApiDriver, services: Services, counter: CallCounter, s3_calls: CallCounter
) -> None:
    from urllib.parse import parse_qs, urlsplit

    data = b"downloadable bytes"
    resource = declare(services, data)
    saved = save(api, resources=[resource])
    assert saved.status == 201
    counter.reset()
    s3_calls.reset()
    # When the record is read, by lookup and by id, and the subject is listed
    found = lookup(api)
    by_id = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{saved.data['checkpoint_id']}")
    listed = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints")
    # Then each record's resource has a presigned GET of the blob's own object, valid 15 minutes, signed without a
    # request; the summary has none
    for answer in (found, by_id):
        (shown,) = answer.data["resources"]
        url = urlsplit(shown["download_url"])
        assert url.path.endswith(layout.blob_object("acme", resource["blob_id"]))
        assert parse_qs(url.query)["X-Amz-Expires"] == ["900"]
        assert shown["download_expires_at"].endswith("Z")
    assert "download_url" not in listed.data[0]["resources"][0]
    assert dict(s3_calls.calls) == {}
    # And the URL serves the bytes
    assert services.objects is not None
    key = layout.blob_object("acme", resource["blob_id"])
    assert services.objects.client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data


# -- regressions of the review of issue 8 ---------------------------------------------------------------------------


def test_a_held_blob_named_with_other_metadata_is_refused_on_every_path(api: ApiDriver, services: Services) -> None:
    # Given a checkpoint holding a blob
    resource = declare(services, b"the report")
    assert save(api, resources=[resource]).status == 201
    wrong = {**resource, "sha256": "0" * 64}
    # When a save names it with a SHA-256 it was not declared with, plainly and with an Idempotency-Key
    plain = save(api, state={"step": 2}, resources=[wrong])
    keyed = save(api, "k-1", state={"step": 3}, resources=[wrong])
    # Then both are 400 naming the field, and the record keeps what was declared
    refusal(plain, "/resources/0/sha256", "declared with")
    refusal(keyed, "/resources/0/sha256", "declared with")
    assert lookup(api).data["resources"][0]["sha256"] == resource["sha256"]


def test_renaming_a_held_resource_is_accepted(api: ApiDriver, services: Services) -> None:
    resource = declare(services, b"renamed")
    assert save(api, resources=[resource]).status == 201
    answer = save(api, state={"step": 2}, resources=[{**resource, "name": "new-name"}])
    assert answer.status == 200, answer.raw_body
    assert lookup(api).data["resources"][0]["name"] == "new-name"


@pytest.mark.parametrize("key", [None, "many-1"], ids=["plain", "idempotent"])
def test_a_hundred_resources_are_read_in_two_batches_never_a_500(
    api: ApiDriver, services: Services, key: str | None
) -> None:
    resources = [declare(services, f"blob {i}".encode()) for i in range(100)]
    # When a save names 100 blobs the checkpoint does not hold: more than one transaction takes beside the checkpoint
    too_many = save(api, key, resources=resources)
    # Then it is a 400 naming /resources, not a 500
    assert too_many.status == 400, too_many.raw_body
    assert too_many.error["details"]["errors"][0]["pointer"] == "/resources"
    # And 98 first, then all 100 (two new), are accepted
    assert save(api, None if key is None else key + "-a", resources=resources[:98]).status == 201
    grown = save(api, None if key is None else key + "-b", state={"step": 2}, resources=resources)
    assert grown.status == 200, grown.raw_body


def test_a_checkpoint_keeps_a_blob_it_holds_whoever_declared_it(api: ApiDriver, services: Services) -> None:
    # Given a `*` key saved for the worker, attaching a blob the `*` key's own agent declared
    put_key(services, WORKER_SECRET, "acme", "worker", {"checkpoints:write", "checkpoints:read"}, "key_" + "d" * 32)
    resource = declare(services, b"the operator's report")
    assert save(api, agent_id="worker", resources=[resource]).status == 201
    other = declare(services, b"the worker's own", agent="worker")
    # When the worker's own key saves it again, plainly, with an Idempotency-Key, and with one more blob of its own
    plain = save(api, secret=WORKER_SECRET, state={"step": 2}, resources=[resource])
    keyed = save(api, "k-2", secret=WORKER_SECRET, state={"step": 3}, resources=[resource])
    grown = save(api, secret=WORKER_SECRET, state={"step": 4}, resources=[resource, other])
    # Then all are accepted: the checkpoint holds the blob
    assert (plain.status, keyed.status, grown.status) == (200, 200, 200), (plain.raw_body, keyed.raw_body)


def test_a_lost_answer_retried_after_a_delete_never_leaves_a_checkpoint_naming_reaped_objects(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    import os

    import boto3
    from botocore.exceptions import ReadTimeoutError

    from baton_checkpoints.store.reaping import Reaper

    # Given a save of a spilled state and a new blob whose transaction lands, whose answer is lost, and whose
    # checkpoint another client deletes before the save's next round
    resource = declare(services, b"the report")
    state = {"log": os.urandom(30_000).hex()}
    client = services.dynamodb
    real = client.transact_write_items
    outsider = aws  # another client of the world's DynamoDB (moto's, or DynamoDB Local's)
    s3 = boto3.client("s3", region_name="us-east-1")
    first_image: dict[str, Any] = {}
    rounds = [0]

    class ReaperTable:
        """The reaper's client; its conditional delete of the blob record runs after the save's next round."""

        def __init__(self, before_delete: Any) -> None:
            self.before_delete = before_delete

        def get_item(self, **kwargs: Any) -> Any:
            return outsider.get_item(**kwargs)

        def delete_item(self, **kwargs: Any) -> Any:
            if self.before_delete is not None:
                run, self.before_delete = self.before_delete, None
                run()
            return outsider.delete_item(**kwargs)

    def transact(**kwargs: Any) -> Any:
        rounds[0] += 1
        if rounds[0] == 1:
            real(**kwargs)
            put = next(i["Put"]["Item"] for i in kwargs["TransactItems"] if "Put" in i)
            key = {"pk": put["pk"], "sk": put["sk"]}
            first_image.update(outsider.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"])
            outsider.delete_item(TableName=TABLE, Key=key)
            raise ReadTimeoutError(endpoint_url="https://dynamodb")
        # The reaper handles the first item's REMOVE: it reads the blob's record and the (absent) checkpoint, this
        # round lands, then the reaper deletes
        landed: dict[str, Any] = {}
        record = {
            "eventName": "REMOVE",
            "dynamodb": {
                "Keys": {"pk": first_image["pk"], "sk": first_image["sk"]},
                "OldImage": first_image,
                "SequenceNumber": "1",
            },
        }
        Reaper(lambda: ReaperTable(lambda: landed.update(real(**kwargs))), lambda: s3, TABLE, BUCKET).reap(record)
        if not landed:
            landed.update(real(**kwargs))
        return landed

    client.transact_write_items = transact  # type: ignore[method-assign]
    try:
        answer = save(api, state=state, resources=[resource])
    finally:
        del client.transact_write_items
    # Then the save succeeded, and the checkpoint it left names a state object and a blob that both still exist
    assert answer.status == 201, answer.raw_body
    claims_hold(aws, services)
    found = lookup(api)
    assert found.status == 200, found.raw_body
    assert found.data["state"] == state
    key = layout.blob_object("acme", resource["blob_id"])
    assert s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == resource["size"]
