"""Blobs through the api handler against in-process moto: `POST /v1/blobs` declares one and hands out a presigned
upload, `GET /v1/blobs/{blob_id}` reads it back with a presigned download (api-v1.md, "Blobs").

The presigned URLs are exercised for real: moto's in-process mock answers `requests` too, so a test PUTs bytes to
the upload URL with the headers the answer gave and reads them back from the download URL.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests
import time_machine

from baton_checkpoints.api.resolver import wired
from baton_checkpoints.api.services import Services, build_services
from baton_checkpoints.domain.blobs import PENDING_DAYS, UPLOAD_SECONDS
from baton_checkpoints.domain.limits import MAX_BLOB_BYTES
from baton_checkpoints.settings import load_settings
from baton_checkpoints.store import items, layout
from baton_checkpoints.store.blobs import BLOB_ANSWER
from tests import proof_counts
from tests.builders import save, save_body
from tests.integration.conftest import (
    BUCKET,
    OPERATOR_SECRET,
    TABLE,
    aws_world,
    data_items,
    put_key,
    settings_environment,
)
from tests.integration.driver import ApiDriver, CallCounter, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

BYTES = b"the report, as uploaded\n"
SHA256 = hashlib.sha256(BYTES).hexdigest()
MEDIA_TYPE = "text/plain; charset=utf-8"
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
NOT_FOUND = {"code": "NOT_FOUND", "message": "Resource was not found."}

PLANNER_SECRET = "btn_test_blob_planner_000001"
"""Agent `planner` of tenant `acme`: declares and reads its own blobs, nothing more."""
CRITIC_SECRET = "btn_test_blob_critic_0000001"
"""Agent `critic` of tenant `acme`: reads checkpoints (another agent than the planner, no `*`)."""
WILDCARD_SECRET = "btn_test_blob_wildcard_00001"
"""Agent `lead` of tenant `acme` with `*`."""
STRANGER_SECRET = "btn_test_blob_stranger_00001"
"""Agent `planner` of tenant `globex`, with `*`: the same agent name in another tenant."""
WRITER_SECRET = "btn_test_blob_writer_0000001"
"""Agent `planner` of tenant `acme` with `checkpoints:write` only."""


def blob_body(**fields: Any) -> dict[str, Any]:
    """A valid declaration of `BYTES`, with `fields` set or replaced."""
    return {"sha256": SHA256, "size": len(BYTES), "media_type": MEDIA_TYPE, **fields}


def declare(api: ApiDriver, key: str | None = None, *, secret: str | None = None, **fields: Any) -> Result:
    """`POST /v1/blobs` with `blob_body(**fields)` and the Idempotency-Key `key` (None: none)."""
    return api.invoke("create_blob", body=blob_body(**fields), headers={"idempotency-key": key}, secret=secret)


def read(api: ApiDriver, blob_id: str, *, secret: str | None = None) -> Result:
    """`GET /v1/blobs/{blob_id}`."""
    return api.invoke("get_blob", path=f"/v1/blobs/{blob_id}", secret=secret)


@pytest.fixture(scope="module")
def aws(engine: str) -> Iterator[Any]:
    """One world for the module (per engine), with Baton's table and bucket, and the handler serving it as one warm
    container (a fresh world per test would cost more than the tests: every test here makes its own blobs and
    keys, and compares the table before and after)."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture
def callers(api: ApiDriver, services: Services) -> ApiDriver:
    """The operator's driver, with the keys of the other callers stored."""
    put_key(services, PLANNER_SECRET, "acme", "planner", {"blobs:write", "checkpoints:read"}, "key_" + "1" * 32)
    put_key(services, CRITIC_SECRET, "acme", "critic", {"blobs:write", "checkpoints:read"}, "key_" + "2" * 32)
    put_key(services, WILDCARD_SECRET, "acme", "lead", {"*"}, "key_" + "3" * 32)
    put_key(services, STRANGER_SECRET, "globex", "planner", {"*"}, "key_" + "4" * 32)
    put_key(services, WRITER_SECRET, "acme", "planner", {"checkpoints:write"}, "key_" + "5" * 32)
    return api


@pytest.fixture
def s3_requests(services: Services) -> Iterator[CallCounter]:
    """Counts the requests the handler's S3 client sends (presigning sends none)."""
    assert services.objects is not None
    calls = CallCounter()
    services.objects.client.meta.events.register("before-call.s3", calls)
    yield calls
    services.objects.client.meta.events.unregister("before-call.s3", calls)


def snapshot(aws: Any, services: Services) -> tuple[list[Any], list[str]]:
    """Every item of the table and every object key of the bucket (a test may scan; Baton never does)."""
    assert services.objects is not None
    scanned = data_items(aws.scan(TableName=TABLE, ConsistentRead=True)["Items"])
    table = sorted(scanned, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
    listed = services.objects.client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return table, sorted(o["Key"] for o in listed)


def without_figures(headers: dict[str, str]) -> dict[str, str]:
    """Headers with the `RateLimit` field's figures left out (each request spends one of the tenant's requests)."""
    return {name: re.sub(r"\d+", "N", value) if name == "RateLimit" else value for name, value in headers.items()}


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def signed_at_ms(url: str) -> int:
    signed = datetime.strptime(query_of(url)["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return int(signed.timestamp() * 1000)


def parse_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def object_key(url: str) -> str:
    """The object key a presigned URL addresses, path-style or virtual-hosted."""
    parts = urlsplit(url)
    path = unquote(parts.path).lstrip("/")
    if parts.netloc.startswith(f"{BUCKET}."):
        return path
    bucket, _, key = path.partition("/")
    assert bucket == BUCKET, url
    return key


def raw_record(aws: Any, tenant: str, blob_id: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = aws.get_item(TableName=TABLE, Key=layout.blob_key(tenant, blob_id)).get("Item")
    return found


# -- declaring ---------------------------------------------------------------------------------------------------


def test_a_declaration_answers_201_with_a_presigned_put_that_carries_every_rule_as_a_signed_header(
    callers: ApiDriver, aws: Any
) -> None:
    start = datetime(2027, 2, 1, 8, 30, 15, 250_000, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        created = declare(callers, secret=PLANNER_SECRET)
    assert created.status == 201, created.raw_body
    assert created.header("Idempotent-Replayed") is None
    data = created.data
    assert set(data) == {"blob_id", "sha256", "size", "media_type", "created_at", "upload"}
    assert (data["sha256"], data["size"], data["media_type"]) == (SHA256, len(BYTES), MEDIA_TYPE)
    assert data["created_at"] == "2027-02-01T08:30:15.250Z"
    upload = data["upload"]
    assert set(upload) == {"url", "method", "headers", "expires_at"}
    assert upload["method"] == "PUT"
    assert upload["headers"] == {
        "content-type": MEDIA_TYPE,
        "content-length": str(len(BYTES)),
        "x-amz-checksum-sha256": base64.b64encode(hashlib.sha256(BYTES).digest()).decode(),
        "x-amz-sdk-checksum-algorithm": "SHA256",
        "x-amz-tagging": "baton-state=pending",
    }
    # The URL is SigV4, for the blob's object under the tenant's prefix, and signs every header it asks for
    query = query_of(upload["url"])
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert int(query["X-Amz-Expires"]) == UPLOAD_SECONDS
    assert set(query["X-Amz-SignedHeaders"].split(";")) == {"host", *upload["headers"]}
    assert object_key(upload["url"]) == f"blobs/acme/{data['blob_id']}"
    # expires_at is when S3 stops taking it: the signing second plus 15 minutes, never later
    assert parse_ms(upload["expires_at"]) == signed_at_ms(upload["url"]) + UPLOAD_SECONDS * 1000
    assert upload["expires_at"] == "2027-02-01T08:45:15.000Z"
    # And the record holds the declaration for the caller's agent, pending for PENDING_DAYS
    record = raw_record(aws, "acme", data["blob_id"])
    assert record is not None
    blob = items.blob_from_item(record)
    assert (blob.agent_id, blob.sha256, blob.size, blob.media_type) == ("planner", SHA256, len(BYTES), MEDIA_TYPE)
    assert blob.owner is None
    assert blob.expires_ms == int(start.timestamp() * 1000) + PENDING_DAYS * 86_400_000 + 750  # rounded up to a second


def test_the_presigned_put_takes_the_declared_bytes_and_the_download_url_gives_them_back(
    callers: ApiDriver, services: Services
) -> None:
    assert services.objects is not None
    created = declare(callers, secret=PLANNER_SECRET)
    upload = created.data["upload"]
    # When the bytes are PUT to the upload URL with the headers given (moto's mock answers `requests`)
    put = requests.put(upload["url"], data=BYTES, headers=upload["headers"], timeout=10)
    assert put.status_code == 200, put.text
    # Then the object landed as declared: size, SHA-256 (checksum mode) and media type, tagged pending
    key = f"blobs/acme/{created.data['blob_id']}"
    info = services.objects.head(key)
    assert info is not None
    assert (info.size, info.sha256, info.media_type) == (len(BYTES), SHA256, MEDIA_TYPE)
    tags = services.objects.client.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    assert tags == [{"Key": "baton-state", "Value": "pending"}]
    # And the blob's download URL gives the same bytes back
    found = read(callers, created.data["blob_id"], secret=PLANNER_SECRET)
    assert found.status == 200, found.raw_body
    downloaded = requests.get(found.data["download_url"], timeout=10)
    assert downloaded.status_code == 200
    assert downloaded.content == BYTES


@pytest.mark.parametrize("size", [0, 1, MAX_BLOB_BYTES], ids=["empty", "one byte", "5 GiB"])
def test_every_size_from_0_to_5_gib_is_declared_and_signed_as_content_length(callers: ApiDriver, size: int) -> None:
    created = declare(callers, size=size, secret=PLANNER_SECRET)
    assert created.status == 201, created.raw_body
    assert created.data["size"] == size
    assert created.data["upload"]["headers"]["content-length"] == str(size)


def test_a_wildcard_key_declares_blobs_for_its_own_agent(callers: ApiDriver, aws: Any) -> None:
    created = declare(callers, secret=WILDCARD_SECRET)
    assert created.status == 201, created.raw_body
    record = raw_record(aws, "acme", created.data["blob_id"])
    assert record is not None
    assert items.blob_from_item(record).agent_id == "lead"


# -- reading -----------------------------------------------------------------------------------------------------


def test_a_blob_reads_back_as_declared_with_a_presigned_get(callers: ApiDriver) -> None:
    created = declare(callers, secret=PLANNER_SECRET)
    blob_id = created.data["blob_id"]
    found = read(callers, blob_id, secret=PLANNER_SECRET)
    assert found.status == 200, found.raw_body
    data = found.data
    assert set(data) == {"blob_id", "sha256", "size", "media_type", "created_at", "download_url", "download_expires_at"}
    assert {k: data[k] for k in ("blob_id", "sha256", "size", "media_type", "created_at")} == {
        k: created.data[k] for k in ("blob_id", "sha256", "size", "media_type", "created_at")
    }
    query = query_of(data["download_url"])
    assert query["X-Amz-SignedHeaders"] == "host"
    assert int(query["X-Amz-Expires"]) == UPLOAD_SECONDS
    assert object_key(data["download_url"]) == f"blobs/acme/{blob_id}"
    assert parse_ms(data["download_expires_at"]) == signed_at_ms(data["download_url"]) + UPLOAD_SECONDS * 1000


def test_the_download_url_of_a_blob_not_uploaded_yet_is_refused_by_s3(callers: ApiDriver) -> None:
    created = declare(callers, secret=PLANNER_SECRET)
    found = read(callers, created.data["blob_id"], secret=PLANNER_SECRET)
    refused = requests.get(found.data["download_url"], timeout=10)
    # S3 answers 404 NoSuchKey (the api role may list the bucket, see infra/). moto answers a presigned GET of a
    # missing key 403 SignatureDoesNotMatch when the URL carries response overrides (it compares them with request
    # headers, as for a PUT's metadata): refused either way, never the bytes of another object.
    assert refused.status_code in (403, 404), refused.text
    assert "<Error>" in refused.text or "<ErrorResponse>" in refused.text


@pytest.mark.parametrize(
    ("reader", "visible"),
    [
        (PLANNER_SECRET, True),
        (WILDCARD_SECRET, True),
        (OPERATOR_SECRET, True),
        (CRITIC_SECRET, False),
        (STRANGER_SECRET, False),
    ],
    ids=["own agent", "tenant's * key", "operator of the tenant (*)", "another agent", "same agent, other tenant"],
)
def test_a_blob_is_visible_to_its_agent_and_to_star_keys_of_its_tenant_only(
    callers: ApiDriver, reader: str, visible: bool
) -> None:
    blob_id = declare(callers, secret=PLANNER_SECRET).data["blob_id"]
    missing_id = "blob_" + "0" * 32
    found = read(callers, blob_id, secret=reader)
    missing = read(callers, missing_id, secret=reader)
    proof_counts.record("isolation", cases=2)
    if visible:
        assert found.status == 200, found.raw_body
        assert found.data["blob_id"] == blob_id
        return
    # The same 404 as a blob that does not exist, byte for byte but for the request id
    assert (found.status, found.error) == (404, NOT_FOUND)
    assert found.body["error"] == missing.body["error"]
    assert without_figures(found.headers) == without_figures(missing.headers)
    assert blob_id not in found.raw_body


@pytest.mark.parametrize(
    "blob_id",
    ["blob_", "blob_" + "A" * 32, "blob_" + "0" * 31, "blob_" + "0" * 33, "ckpt_" + "0" * 32, "blob_%2e%2e", "x" * 300],
)
def test_an_id_that_is_no_blob_id_answers_the_404_of_a_missing_blob_without_reading(
    callers: ApiDriver, counter: CallCounter, blob_id: str
) -> None:
    assert callers.invoke("list_keys").status == 200  # the key record is cached
    counter.reset()
    answer = read(callers, blob_id)
    assert (answer.status, answer.error) == (404, NOT_FOUND)
    assert counter.total == 0


def test_an_unattached_blob_is_gone_once_its_two_days_are_over(callers: ApiDriver) -> None:
    start = datetime(2027, 2, 1, 8, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        blob_id = declare(callers, secret=PLANNER_SECRET).data["blob_id"]
        clock.shift(timedelta(days=PENDING_DAYS) - timedelta(seconds=1))
        assert read(callers, blob_id, secret=PLANNER_SECRET).status == 200
        clock.shift(timedelta(seconds=1))
        gone = read(callers, blob_id, secret=PLANNER_SECRET)
    assert (gone.status, gone.error) == (404, NOT_FOUND)


# -- refusals ----------------------------------------------------------------------------------------------------

REFUSED_BODIES = [
    pytest.param({"sha256": SHA256.upper()}, "/sha256", "must match the pattern", id="sha256 uppercase"),
    pytest.param({"sha256": SHA256[:63]}, "/sha256", "must match the pattern", id="sha256 short"),
    pytest.param({"sha256": 12}, "/sha256", "must be a string", id="sha256 number"),
    pytest.param({"sha256": None}, "/sha256", "must be a string", id="sha256 null"),
    pytest.param({"size": -1}, "/size", "must be at least 0", id="size negative"),
    pytest.param({"size": MAX_BLOB_BYTES + 1}, "/size", f"must be at most {MAX_BLOB_BYTES}", id="size over 5 GiB"),
    pytest.param({"size": "5"}, "/size", "must be an integer", id="size string"),
    pytest.param({"size": 1.5}, "/size", "must be an integer", id="size fraction"),
    pytest.param({"size": True}, "/size", "must be an integer", id="size boolean"),
    pytest.param({"media_type": ""}, "/media_type", "at least 1 characters", id="media_type empty"),
    pytest.param({"media_type": "a/" + "b" * 199}, "/media_type", "at most 200 characters", id="media_type long"),
    pytest.param({"media_type": "text"}, "/media_type", "must be a MIME type", id="media_type no subtype"),
    pytest.param({"media_type": "text/plain\n"}, "/media_type", "must be a MIME type", id="media_type newline"),
    pytest.param({"media_type": "text/plain;"}, "/media_type", "must be a MIME type", id="media_type bare semicolon"),
    pytest.param({"media_type": "texte/été"}, "/media_type", "must be a MIME type", id="media_type not ascii"),
    pytest.param({"media_type": ["text/plain"]}, "/media_type", "must be a string", id="media_type array"),
    pytest.param({"owner": "someone"}, "/owner", "is not a known field", id="unknown field"),
    pytest.param({"agent_id": "planner"}, "/agent_id", "is not a known field", id="agent_id is no field"),
]


@pytest.mark.parametrize(("fields", "pointer", "rule"), REFUSED_BODIES)
def test_each_invalid_field_is_a_400_naming_it_and_writes_nothing(
    callers: ApiDriver, aws: Any, services: Services, fields: dict[str, Any], pointer: str, rule: str
) -> None:
    before = snapshot(aws, services)
    key = f"refused-{uuid.uuid4()}"
    answer = declare(callers, key, secret=PLANNER_SECRET, **fields)
    assert answer.status == 400, answer.raw_body
    assert answer.error["code"] == "VALIDATION_ERROR"
    assert pointer in answer.error["message"], answer.error["message"]
    assert rule in answer.error["message"], answer.error["message"]
    assert [e["pointer"] for e in answer.error["details"]["errors"]] == [pointer]
    assert snapshot(aws, services) == before
    # A rejected request consumes no key: the same key then declares a valid blob
    accepted = declare(callers, key, secret=PLANNER_SECRET)
    assert accepted.status == 201
    assert accepted.header("Idempotent-Replayed") is None


@pytest.mark.parametrize("missing", ["sha256", "size", "media_type"])
def test_a_missing_field_is_a_400_naming_it(callers: ApiDriver, missing: str) -> None:
    body = {k: v for k, v in blob_body().items() if k != missing}
    answer = callers.invoke("create_blob", body=body, headers={"idempotency-key": None})
    assert answer.status == 400, answer.raw_body
    assert answer.error["details"]["errors"] == [{"pointer": f"/{missing}", "message": f"/{missing} is required."}]


def test_every_violation_is_named_at_once(callers: ApiDriver) -> None:
    answer = declare(callers, sha256="x", size=-1, media_type="nope", extra=1)
    assert answer.status == 400
    assert sorted(e["pointer"] for e in answer.error["details"]["errors"]) == [
        "/extra",
        "/media_type",
        "/sha256",
        "/size",
    ]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("no key", (401, "UNAUTHENTICATED")),
        ("a key without blobs:write", (403, "FORBIDDEN")),
        ("text/plain body", (415, "UNSUPPORTED_MEDIA_TYPE")),
        ("body not an object", (400, "VALIDATION_ERROR")),
        ("body not JSON", (400, "VALIDATION_ERROR")),
        ("body over 3,100,000 bytes", (413, "PAYLOAD_TOO_LARGE")),
        ("a malformed Idempotency-Key", (400, "VALIDATION_ERROR")),
    ],
)
def test_requests_refused_before_validation_or_for_their_framing_write_nothing(
    callers: ApiDriver, aws: Any, services: Services, how: str, expected: tuple[int, str]
) -> None:
    before = snapshot(aws, services)
    body = json.dumps(blob_body())
    headers: dict[str, str | None] = {"idempotency-key": None}
    secret = PLANNER_SECRET
    if how == "no key":
        headers["authorization"] = None
    elif how == "a key without blobs:write":
        secret = WRITER_SECRET
    elif how == "text/plain body":
        headers["content-type"] = "text/plain"
    elif how == "body not an object":
        body = json.dumps([blob_body()])
    elif how == "body not JSON":
        body = "{sha256:"
    elif how == "body over 3,100,000 bytes":
        body = json.dumps(blob_body(padding="x" * 3_100_000))
    else:
        headers["idempotency-key"] = "tab\there"
    answer = callers.invoke("create_blob", raw_body=body, headers=headers, secret=secret)
    assert (answer.status, answer.error["code"]) == expected, answer.raw_body
    assert snapshot(aws, services) == before


def test_reading_needs_checkpoints_read(callers: ApiDriver) -> None:
    blob_id = declare(callers, secret=PLANNER_SECRET).data["blob_id"]
    answer = read(callers, blob_id, secret=WRITER_SECRET)
    assert (answer.status, answer.error["code"]) == (403, "FORBIDDEN")


# -- idempotency -------------------------------------------------------------------------------------------------


def test_a_replay_repeats_the_first_answer_with_idempotent_replayed(
    callers: ApiDriver, aws: Any, services: Services
) -> None:
    start = datetime(2027, 2, 1, 8, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        first = declare(callers, "upload-1", secret=PLANNER_SECRET)
        settled = snapshot(aws, services)
        clock.shift(timedelta(minutes=5))
        replay = declare(callers, "upload-1", secret=PLANNER_SECRET)
    assert first.status == replay.status == 201
    assert first.header("Idempotent-Replayed") is None
    assert replay.header("Idempotent-Replayed") == "true"
    # The first answer, its upload URL and expiry included, under the replay's own request id
    assert replay.data == first.data
    assert replay.body["meta"]["request_id"] != first.body["meta"]["request_id"]
    # And the replay wrote nothing: one blob was declared, not two
    assert snapshot(aws, services) == settled


def test_the_same_key_with_another_body_is_422_and_writes_nothing(
    callers: ApiDriver, aws: Any, services: Services
) -> None:
    assert declare(callers, "upload-2", secret=PLANNER_SECRET).status == 201
    before = snapshot(aws, services)
    reused = declare(callers, "upload-2", secret=PLANNER_SECRET, size=len(BYTES) + 1)
    assert (reused.status, reused.error["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert snapshot(aws, services) == before


def test_keys_belong_to_the_agent_so_another_agent_may_use_the_same_key(callers: ApiDriver) -> None:
    mine = declare(callers, "shared-name", secret=PLANNER_SECRET)
    theirs = declare(callers, "shared-name", secret=CRITIC_SECRET)
    assert mine.status == theirs.status == 201
    assert theirs.header("Idempotent-Replayed") is None
    assert mine.data["blob_id"] != theirs.data["blob_id"]


def test_a_key_first_used_to_save_a_checkpoint_is_422_on_a_declaration(callers: ApiDriver) -> None:
    assert save(callers, "used-for-a-save").status == 201
    reused = declare(callers, "used-for-a-save")
    assert (reused.status, reused.error["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")


def test_a_key_first_used_to_declare_a_blob_is_422_on_a_save(callers: ApiDriver) -> None:
    assert declare(callers, "used-for-a-blob").status == 201
    reused = callers.invoke("save_checkpoint", body=save_body(), headers={"idempotency-key": "used-for-a-blob"})
    assert (reused.status, reused.error["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")


def test_a_key_is_remembered_24_hours_then_declares_a_new_blob(callers: ApiDriver, aws: Any) -> None:
    start = datetime(2027, 2, 1, 8, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as clock:
        first = declare(callers, "daily", secret=PLANNER_SECRET)
        clock.shift(timedelta(hours=24))
        later = declare(callers, "daily", secret=PLANNER_SECRET)
        again = declare(callers, "daily", secret=PLANNER_SECRET)
    assert first.status == later.status == again.status == 201
    assert later.header("Idempotent-Replayed") is None
    assert later.data["blob_id"] != first.data["blob_id"]
    assert again.header("Idempotent-Replayed") == "true"
    assert again.data == later.data
    record = aws.get_item(TableName=TABLE, Key=layout.idempotency_key("acme", "planner", "daily"))["Item"]
    assert record[BLOB_ANSWER]["M"]["id"]["S"] == later.data["blob_id"]


# -- request counts ------------------------------------------------------------------------------------------------


def warm_up(api: ApiDriver, counter: CallCounter, s3_requests: CallCounter) -> None:
    """Authenticate once (the key record is then cached) and make the S3 client, then count from zero."""
    assert api.invoke("list_keys").status == 200
    counter.reset()
    s3_requests.reset()


def test_request_counts_per_blob_operation(callers: ApiDriver, counter: CallCounter, s3_requests: CallCounter) -> None:
    warm_up(callers, counter, s3_requests)
    measured: dict[str, dict[str, int]] = {}

    def measure(name: str, answer: Result, status: int) -> None:
        assert answer.status == status, answer.raw_body
        measured[name] = {**counter.calls, **{f"S3 {op}": n for op, n in s3_requests.calls.items()}}
        counter.reset()
        s3_requests.reset()

    plain = declare(callers)
    measure("declare", plain, 201)
    measure("declare with a key", declare(callers, "counted"), 201)
    measure("replay", declare(callers, "counted"), 201)
    measure("key reused", declare(callers, "counted", size=1), 422)
    measure("read", read(callers, plain.data["blob_id"]), 200)
    measure("read a missing blob", read(callers, "blob_" + "0" * 32), 404)
    proof_counts.record("blob request counts", operations=len(measured))
    assert measured == {
        "declare": {"PutItem": 1},
        "declare with a key": {"TransactWriteItems": 1},
        "replay": {"TransactWriteItems": 1},
        "key reused": {"TransactWriteItems": 1},
        "read": {"GetItem": 1},
        "read a missing blob": {"GetItem": 1},
    }


# -- a deployment without a bucket --------------------------------------------------------------------------------


@pytest.fixture
def bucketless(aws: Any) -> Iterator[ApiDriver]:
    """The handler serving a deployment that has no bucket (BATON_BUCKET_NAME unset), for one test."""
    from baton_checkpoints.api.app import app

    bare = build_services(load_settings(settings_environment(TABLE, bucket=None)))
    assert bare.objects is None
    module_services = app.dependency_overrides[wired]
    app.dependency_overrides[wired] = lambda: bare
    try:
        put_key(bare, OPERATOR_SECRET, "acme", "operator", {"*"}, "key_" + "a" * 32)
        yield ApiDriver(OPERATOR_SECRET)
    finally:
        app.dependency_overrides[wired] = module_services


def test_without_a_bucket_a_declaration_is_503_and_writes_nothing(bucketless: ApiDriver, aws: Any) -> None:
    before = data_items(aws.scan(TableName=TABLE)["Items"])
    answer = declare(bucketless, "no-bucket")
    assert (answer.status, answer.error["code"]) == (503, "UNAVAILABLE")
    assert "no bucket" in answer.error["message"]
    assert answer.header("Retry-After") == "3600"
    assert data_items(aws.scan(TableName=TABLE)["Items"]) == before
    # A blob that cannot exist is simply not found
    assert read(bucketless, "blob_" + "0" * 32).status == 404
