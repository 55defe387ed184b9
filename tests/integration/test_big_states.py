"""Big states: where the store puts a state's bytes (the item, packed or not, or an object in the bucket), and that
the caller sees the same record whichever it is. Against in-process moto (DynamoDB and S3)."""

from __future__ import annotations

import base64
import gzip
import json
import random
import string
from collections.abc import Iterator
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import limits
from baton_checkpoints.store import items, schema
from baton_checkpoints.store.sizes import item_bytes as item_size
from tests.builders import KIND, SUBJECT, lookup, save
from tests.integration.conftest import BUCKET, TABLE, services_on, serving
from tests.integration.driver import ApiDriver, CallCounter

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

ITEM_LIMIT = 400 * 1024
"""DynamoDB's item size limit, counted its way (`baton_checkpoints.store.sizes.item_size`)."""
ALPHABET = "".join(c for c in string.printable if c not in '"\\\t\n\r\x0b\x0c')
"""Characters JSON writes as themselves: a state of them is as long in canonical JSON as in characters."""


def noise(length: int, seed: int = 7) -> str:
    """Text that barely compresses (random characters of `ALPHABET`), the same for a seed whatever the length."""
    chooser = random.Random(seed)
    return "".join(chooser.choice(ALPHABET) for _ in range(length))


def state_of(canonical_bytes: int, seed: int = 7) -> dict[str, str]:
    """A state whose canonical JSON is exactly `canonical_bytes` long, made of noise."""
    overhead = len('{"noise":""}')
    return {"noise": noise(canonical_bytes - overhead, seed)}


def canonical(state: Any) -> bytes:
    return json.dumps(state, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


def stored_length(state: Any) -> int:
    """How many bytes the state takes in its stored form (packed when that pays)."""
    return len(items.stored_bytes(items.pack_state(canonical(state))[1]))


def raw_item(aws: Any) -> dict[str, Any]:
    found = aws.scan(TableName=TABLE)["Items"]
    checkpoints = [i for i in found if i[schema.PK]["S"].startswith("C#")]
    assert len(checkpoints) == 1, checkpoints
    return checkpoints[0]


def objects(services: Services) -> dict[str, bytes]:
    """Every object in the bucket, by key."""
    assert services.objects is not None
    client = services.objects.client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


@pytest.fixture
def s3_counter(services: Services) -> Iterator[CallCounter]:
    """Counts the S3 operations the handler's object store makes."""
    assert services.objects is not None
    calls = CallCounter()
    services.objects.client.meta.events.register("before-call.s3", calls)
    yield calls
    services.objects.client.meta.events.unregister("before-call.s3", calls)


def test_a_state_just_under_the_spill_threshold_stays_in_the_item(api: ApiDriver, aws: Any, services: Services) -> None:
    # Given the largest noise state whose stored form is at most the threshold, and the next larger one
    low, high = 1_000, 40_000
    while low < high:
        middle = (low + high + 1) // 2
        if stored_length(state_of(middle)) <= items.SPILL_ABOVE_BYTES:
            low = middle
        else:
            high = middle - 1
    largest = low
    while stored_length(state_of(largest + 1)) <= items.SPILL_ABOVE_BYTES:  # the stored size is not strictly monotone
        largest += 1
    assert stored_length(state_of(largest)) <= items.SPILL_ABOVE_BYTES < stored_length(state_of(largest + 1))
    # When the largest is saved, it stays in the item and nothing goes to the bucket
    assert save(api, state=state_of(largest)).status == 201
    assert items.STATE_OBJECT not in raw_item(aws)
    assert objects(services) == {}
    # And when one byte more is saved over it, the state goes to the bucket
    assert save(api, state=state_of(largest + 1)).status == 200
    item = raw_item(aws)
    assert item[items.STATE_OBJECT]["S"] in objects(services)
    assert items.TEXT not in item
    assert items.PACKED not in item
    print(
        f"largest state kept inline: {largest:,} canonical bytes of noise, {stored_length(state_of(largest)):,} stored"
    )


def test_a_spilled_state_reads_back_the_same_at_the_cost_of_one_get_object(
    api: ApiDriver, aws: Any, services: Services, counter: CallCounter, s3_counter: CallCounter
) -> None:
    # Given a 1 MB state of noise, and a container that has its key cached
    state = state_of(1_000_000)
    assert lookup(api).status == 404
    counter.reset()
    # When it is saved
    saved = save(api, state=state)
    # Then the save cost one UpdateItem and one PutObject, and the item holds only the object's key
    assert saved.status == 201, saved.raw_body
    assert (dict(counter.calls), dict(s3_counter.calls)) == ({"UpdateItem": 1}, {"PutObject": 1})
    item = raw_item(aws)
    key = item[items.STATE_OBJECT]["S"]
    assert key.startswith(f"{schema.BLOB_PREFIX}acme/states/")
    assert item_size(item) < 2_000
    # And the object is tagged pending until the reaper sees it referenced
    assert services.objects is not None
    tags = services.objects.client.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    assert tags == [{"Key": schema.PENDING_TAG[0], "Value": schema.PENDING_TAG[1]}]
    counter.reset()
    s3_counter.reset()
    # When it is looked up, and read by id
    found = lookup(api)
    by_id = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{saved.data['checkpoint_id']}")
    # Then both answer the state as saved, with its hash and size: the caller cannot tell where it lived
    assert found.status == 200
    assert by_id.status == 200
    assert found.data["state"] == state == by_id.data["state"]
    assert found.data["state_bytes"] == len(canonical(state))
    assert (dict(counter.calls), dict(s3_counter.calls)) == ({"GetItem": 2, "Query": 1}, {"GetObject": 2})


def test_the_largest_state_is_accepted_and_answered_in_a_lambda_sized_response(api: ApiDriver, aws: Any) -> None:
    # Given a state of exactly 3,000,000 canonical bytes of noise
    state = state_of(limits.MAX_STATE_BYTES)
    assert len(canonical(state)) == 3_000_000
    # When it is saved and looked up, with and without gzip accepted
    assert save(api, state=state).status == 201
    plain = api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND})
    zipped_event = api.invoke(
        "lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND}, headers={"accept-encoding": "gzip, br"}
    )
    # Then both answers carry the state; neither exceeds Lambda's 6 MB; the gzip one says so
    assert plain.data["state"] == state == zipped_event.data["state"]
    assert zipped_event.header("content-encoding") == "gzip"
    assert plain.header("content-encoding") is None
    # And the stored item stays far under DynamoDB's limit
    assert item_size(raw_item(aws)) < ITEM_LIMIT


def test_one_byte_over_the_limit_is_413_naming_the_limit_and_the_size(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    # Given a state of 3,000,001 canonical bytes
    state = state_of(limits.MAX_STATE_BYTES + 1)
    # When it is saved
    answer = save(api, state=state)
    # Then it is refused with the limit and the size, and nothing was written anywhere
    assert answer.status == 413, answer.raw_body
    assert answer.error["details"] == {"field": "/state", "limit_bytes": 3_000_000, "actual_bytes": 3_000_001}
    assert [i for i in aws.scan(TableName=TABLE)["Items"] if i[schema.PK]["S"].startswith("C#")] == []
    assert objects(services) == {}


def test_every_save_of_a_big_state_writes_a_new_object_and_a_small_one_lets_go_of_it(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    # Given a spilled state saved twice
    save(api, state=state_of(200_000, seed=1))
    first = raw_item(aws)[items.STATE_OBJECT]["S"]
    save(api, state=state_of(200_000, seed=2))
    second = raw_item(aws)[items.STATE_OBJECT]["S"]
    # Then each write has its own object (the reaper deletes the first; a key never names two states)
    assert first != second
    assert set(objects(services)) == {first, second}
    # When a small state is saved over it
    assert save(api, state={"step": 3}).status == 200
    # Then the item holds the state itself and no key any more
    item = raw_item(aws)
    assert items.STATE_OBJECT not in item
    assert lookup(api).data["state"] == {"step": 3}


def test_a_refused_save_leaves_no_object_behind(api: ApiDriver, services: Services) -> None:
    # Given a checkpoint at revision 1
    assert save(api).status == 201
    # When a big state is saved expecting another revision
    answer = save(api, state=state_of(300_000), expected_revision=7)
    # Then it is a conflict, and the object the save spilled before learning it was removed again
    assert answer.status == 409, answer.raw_body
    assert objects(services) == {}


def test_an_idempotent_save_of_a_big_state_replays_without_writing_again(
    api: ApiDriver, services: Services, s3_counter: CallCounter
) -> None:
    # Given a big state saved with an idempotency key
    state = state_of(500_000)
    first = save(api, "big-1", state=state)
    assert first.status == 201, first.raw_body
    s3_counter.reset()
    # When the same request is sent again
    again = save(api, "big-1", state=state)
    # Then it replays the first answer without touching the bucket, and the state reads back
    assert again.status == 201
    assert again.header("idempotent-replayed") == "true"
    assert again.data == first.data
    assert dict(s3_counter.calls) == {}
    assert len(objects(services)) == 1
    assert lookup(api).data["state"] == state


def test_the_bucket_failing_is_503_and_nothing_is_written(api: ApiDriver, aws: Any, services: Services) -> None:
    # Given S3 answering every request with 503 (botocore retries it, then gives up)
    assert services.objects is not None
    client = services.objects.client

    def unavailable(request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        class Raw:
            def stream(self, **_: Any) -> Iterator[bytes]:
                yield b"<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>"

        return AWSResponse(request.url, 503, {}, Raw())

    client.meta.events.register_first("before-send.s3", unavailable)
    try:
        answer = save(api, state=state_of(100_000))
    finally:
        client.meta.events.unregister("before-send.s3", unavailable)
    # Then the save is 503 UNAVAILABLE with Retry-After, and no item was written
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    assert answer.header("retry-after")
    assert [i for i in aws.scan(TableName=TABLE)["Items"] if i[schema.PK]["S"].startswith("C#")] == []


def test_without_a_bucket_a_state_that_fits_an_item_is_kept_and_a_larger_one_is_413(aws: Any) -> None:
    # Given a deployment without a bucket (DynamoDB Local, say)
    from baton_checkpoints.settings import load_settings
    from tests.integration.conftest import OPERATOR_SECRET, put_key

    bare = services_on(TABLE)
    bare = Services(
        settings=load_settings({"BATON_TABLE_NAME": TABLE}),
        dynamodb=bare.dynamodb,
        checkpoints=type(bare.checkpoints)(bare.dynamodb, TABLE, None),
        keys=bare.keys,
        authenticator=bare.authenticator,
        objects=None,
    )
    with serving(lambda: bare):
        put_key(bare, OPERATOR_SECRET, "acme", "operator", {"*"}, "key_" + "b" * 32)
        api = ApiDriver(OPERATOR_SECRET)
        # When a state that packs under the item's room and one that does not are saved
        kept = save(api, state=state_of(100_000))
        refused = save(api, subject_id="other", state=state_of(600_000))
    # Then the first stays in the item, the second is 413 naming the stored limit
    assert kept.status == 201, kept.raw_body
    assert items.PACKED in raw_item(aws) or items.TEXT in raw_item(aws)
    assert refused.status == 413, refused.raw_body
    assert refused.error["details"]["limit_bytes"] == items.INLINE_LIMIT_BYTES


def test_a_large_answer_is_base64_and_gzip_only_when_accepted() -> None:
    # Given a result over 1 MB
    from baton_checkpoints.api.encoding import fit_for_lambda

    body = json.dumps({"data": "x" * 1_200_000})
    result = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": body}
    # When fitted with and without gzip accepted (and with gzip refused by q=0)
    zipped = fit_for_lambda(dict(result), "deflate, gzip;q=0.5")
    plain = fit_for_lambda(dict(result), "gzip;q=0")
    small = fit_for_lambda({**result, "body": "{}"}, "gzip")
    # Then both are base64; only the accepted one is gzip; a small one is left alone
    assert gzip.decompress(base64.b64decode(zipped["body"])).decode() == body
    assert zipped["headers"]["Content-Encoding"] == "gzip"
    assert zipped["isBase64Encoded"]
    assert base64.b64decode(plain["body"]).decode() == body
    assert "Content-Encoding" not in plain["headers"]
    assert small["body"] == "{}"
    assert "isBase64Encoded" not in small


@pytest.mark.parametrize("size", [64_000, 64_001])
def test_the_old_limit_is_no_boundary_any_more(api: ApiDriver, aws: Any, size: int) -> None:
    # Given states of 64,000 and 64,001 canonical bytes (the limit before big states), of noise and of prose
    for subject, state in ((f"noise-{size}", state_of(size)), (f"prose-{size}", {"text": ("lorem ipsum " * 6000)})):
        if subject.startswith("prose"):
            state = {"text": state["text"][: size - len('{"text":""}')]}
        assert len(canonical(state)) == size
        # When saved
        answer = save(api, subject_id=subject, state=state)
        # Then accepted, and every item stays under DynamoDB's limit, counted its way
        assert answer.status == 201, answer.raw_body
        assert lookup(api, subject_id=subject).data["state"] == state
    assert all(item_size(item) < ITEM_LIMIT for item in aws.scan(TableName=TABLE)["Items"])
