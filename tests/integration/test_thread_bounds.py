"""Every thread request's work is bounded (api-v1.md, "Pagination"; docs/api.md, "LangGraph threads"): a list page
stops by the bytes it encodes, by the bytes it reads, and `before` is a key bound. Each test here is a regression
test for a black-box review's finding, and failed on the code before the fix.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from baton_checkpoints.domain.threads import LIST_READ_BYTES, MAX_BLOB_COPY_BYTES, MAX_REQUEST_BLOBS
from baton_checkpoints.store import sizes
from tests.integration.conftest import OPERATOR_SECRET
from tests.integration.driver import ApiDriver, CallCounter, load_event
from tests.integration.test_threads import (  # noqa: F401 (world, aws and api are fixtures used by name)
    api,
    aws,
    checkpoint_doc,
    field_errors,
    get_tuple,
    list_page,
    post,
    put,
    put_body,
    put_writes,
    thread_items,
    thread_path,
    typed,
    upload_value,
    values_of,
    world,
    writes_of,
)
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024
"""Lambda's limit on a synchronous function's result (the whole result object, as API Gateway receives it)."""
QUERY_PAGE_BYTES = 1024 * 1024
"""The most one Query reads (DynamoDB's page): a read budget is checked before each request."""
EMOJI = "\N{GRINNING FACE}"
"""Four bytes of UTF-8, one character."""


class ReadMeter:
    """The items DynamoDB hands back to the handler's client, by DynamoDB's sizes (`sizes.item_bytes`): what a
    request read, the same on both engines."""

    def __init__(self) -> None:
        self.items = 0
        self.bytes = 0
        self.requests = 0

    def __call__(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        found: list[dict[str, Any]] = []
        if model.name == "Query":
            found = parsed.get("Items", [])
        elif model.name == "GetItem" and parsed.get("Item"):
            found = [parsed["Item"]]
        elif model.name == "BatchGetItem":
            found = [item for items in parsed.get("Responses", {}).values() for item in items]
        else:
            return
        self.requests += 1
        self.items += len(found)
        self.bytes += sum(sizes.item_bytes(item) for item in found)


@pytest.fixture
def reads(world: tuple[Any, ApiDriver]) -> Iterator[ReadMeter]:  # noqa: F811
    """A read meter on the module world's DynamoDB client, reset after the operator's key is cached."""
    from baton_checkpoints.api.app import app

    client = app.services().dynamodb
    assert world[1].invoke("list_keys").status == 200
    meter = ReadMeter()
    client.meta.events.register("after-call.dynamodb", meter)
    yield meter
    client.meta.events.unregister("after-call.dynamodb", meter)


def raw_list(thread: str, query: str) -> dict[str, Any]:
    """The api handler's whole result for a list without `Accept-Encoding` (what Lambda hands API Gateway)."""
    from baton_checkpoints.handlers.api import handler

    event = load_event("list_subject_checkpoints")
    event["requestContext"]["requestId"] = f"bounds-{thread}"
    event["headers"]["authorization"] = f"Bearer {OPERATOR_SECRET}"
    event["headers"].pop("accept-encoding", None)
    event["rawPath"] = event["requestContext"]["http"]["path"] = thread_path(thread, "/checkpoints")
    event["rawQueryString"] = query
    event.pop("queryStringParameters", None)
    result: dict[str, Any] = handler(event, None)
    return result


def answer_of(result: dict[str, Any]) -> dict[str, Any]:
    body = result["body"]
    text = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def every_page(api: ApiDriver, thread: str, **params: Any) -> list[dict[str, Any]]:  # noqa: F811
    """Every page of a list, following `next_cursor` (at most 50 pages)."""
    pages = []
    cursor = None
    for _ in range(50):
        answer = list_page(api, thread, **params, **({"cursor": cursor} if cursor else {}))
        assert answer.status == 200, answer.body
        pages.append(answer.body)
        cursor = answer.body["meta"]["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("a list did not end in 50 pages")


def test_a_list_page_stops_by_the_bytes_it_encodes_not_by_characters(api: ApiDriver) -> None:  # noqa: F811
    """Review finding 1: 45 checkpoints with 22 pending writes each, whose task id, task path and channels are
    emoji (within every documented limit), listed with `limit=200` without gzip, answered 500: the page budget counted
    characters, and left channels out. 5.6 MB of JSON, base64-encoded towards API Gateway, passed Lambda's 6 MB."""
    task_id, task_path = EMOJI * 200, EMOJI * 1_000
    writes = [(EMOJI * 199 + chr(0x4E00 + n), os.urandom(100)) for n in range(22)]
    for n in range(45):
        assert put(api, "b-emoji", f"c{n:03d}", {"a": 1}, {"a": typed(b"a")}).status == 201
        assert put_writes(api, "b-emoji", f"c{n:03d}", task_id, writes, task_path=task_path).status == 200
    # When the thread is listed at the largest limit, by a client that does not take gzip
    result = raw_list("b-emoji", "limit=200")
    # Then the function's result fits Lambda's payload, and the page stops early with a cursor
    assert result["statusCode"] == 200
    assert len(json.dumps(result).encode("utf-8")) <= LAMBDA_PAYLOAD_BYTES
    first = answer_of(result)
    assert 0 < len(first["data"]) < 45
    assert first["meta"]["next_cursor"] is not None
    # And following the cursors shows each checkpoint once, newest first, with all its writes
    pages = every_page(api, "b-emoji", limit=200)
    shown = [t["checkpoint_id"] for page in pages for t in page["data"]]
    assert shown == [f"c{n:03d}" for n in reversed(range(45))]
    assert all(len(t["pending_writes"]) == 22 for page in pages for t in page["data"])
    record("thread bounds", page_bytes_pages=len(pages))


def test_a_filter_that_matches_nothing_reads_at_most_the_list_budget(api: ApiDriver, reads: ReadMeter) -> None:  # noqa: F811
    """Review finding 3: a metadata filter that matches nothing on 300 checkpoints of 150 KB made 151 Queries and read
    about 45 MB for a 100-byte GET (a 503 after 30 s at 500). Every request's reads are bounded: a page comes back
    empty with a cursor once it has read `LIST_READ_BYTES` (the last Query may read up to 1 MB more)."""
    padding = base64.b64encode(os.urandom(120_000)).decode("ascii")  # 160 KB of JSON that packs to about 120 KB
    for n in range(60):
        body = {"checkpoint": checkpoint_doc(f"c{n:03d}", {}, pad=padding), "metadata": {"step": n}, "values": {}}
        assert post(api, thread_path("b-filter", "/checkpoints"), body).status == 201
    # When the thread is listed with a filter that matches none of them
    reads.__init__()
    first = list_page(api, "b-filter", filter={"step": -1})
    # Then the first page reads within the budget and comes back empty, with a cursor
    assert first.status == 200, first.body
    assert reads.bytes <= LIST_READ_BYTES + QUERY_PAGE_BYTES, reads.bytes
    assert first.body["data"] == []
    assert first.body["meta"]["next_cursor"] is not None
    # And following the cursors ends, every page within the budget, having shown nothing
    total = 0
    pages = 0
    cursor = first.body["meta"]["next_cursor"]
    while cursor is not None:
        reads.__init__()
        page = list_page(api, "b-filter", filter={"step": -1}, cursor=cursor)
        assert page.status == 200, page.body
        assert reads.bytes <= LIST_READ_BYTES + QUERY_PAGE_BYTES, reads.bytes
        assert page.body["data"] == []
        total += reads.bytes
        pages += 1
        assert pages < 20
        cursor = page.body["meta"]["next_cursor"]
    # And a filter that matches one old checkpoint finds it by following the cursors
    found = every_page(api, "b-filter", filter={"step": 3})
    assert [t["checkpoint_id"] for page in found for t in page["data"]] == ["c003"]
    record("thread bounds", filtered_pages=pages + 1)


def test_before_without_a_namespace_is_a_key_bound_in_each_namespace(api: ApiDriver, reads: ReadMeter) -> None:  # noqa: F811
    """Review finding 3: `before` without a namespace skipped newer checkpoints one by one, reading the whole thread.
    It is a key bound in each namespace: the first checkpoint read at or after `before` moves the read below it."""
    for namespace in ("", "child:1", "child:2"):
        for n in range(40):
            answer = put(api, "b-before", f"c{n:03d}", {"a": 1}, {"a": typed(b"a")}, ns=namespace)
            assert answer.status == 201, answer.body
    # When the thread is listed, every namespace, before its fifth checkpoint
    reads.__init__()
    page = list_page(api, "b-before", before="c005")
    # Then each namespace's five older checkpoints come, newest first
    assert page.status == 200, page.body
    shown = [(t["checkpoint_ns"], t["checkpoint_id"]) for t in page.body["data"]]
    older = [f"c{n:03d}" for n in reversed(range(5))]
    assert sorted({ns for ns, _ in shown}) == ["", "child:1", "child:2"]
    assert all([c for ns, c in shown if ns == namespace] == older for namespace in ("", "child:1", "child:2"))
    assert len(shown) == 15
    # And the page read them, and per namespace a probe of two items and the `before` checkpoint, and the head
    assert reads.items <= len(shown) + 3 * 3 + 1, reads.items
    record("thread bounds", before_items_read=reads.items)


# -- blobs: one check per distinct blob, no copy per reference ----------------------------------------------


@pytest.fixture
def calls(world: tuple[Any, ApiDriver]) -> Iterator[tuple[CallCounter, CallCounter]]:  # noqa: F811
    """(DynamoDB, S3) request counters on the module world's clients."""
    from baton_checkpoints.api.app import app

    services = app.services()
    assert services.objects is not None
    dynamodb, s3 = CallCounter(), CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", dynamodb)
    services.objects.client.meta.events.register("before-call.s3", s3)
    yield dynamodb, s3
    services.dynamodb.meta.events.unregister("before-call.dynamodb", dynamodb)
    services.objects.client.meta.events.unregister("before-call.s3", s3)


def test_one_small_blob_named_by_many_writes_is_checked_once_and_never_copied(
    api: ApiDriver,  # noqa: F811
    aws: Any,  # noqa: F811
    calls: tuple[CallCounter, CallCounter],
) -> None:
    """Review finding 2: one small uploaded blob named by N writes cost N GetItem, N HeadObject and N full S3 copies
    (a 17 KB request made 600 AWS calls and copied 20 MB; at N = 1,000 a 503 after 30 s, the work going on after).
    One check per distinct blob per request: its record, and its bytes read once; each write holds them like any
    value of a body, counted in the writes' budget; writes of the same value share one item."""
    raw = os.urandom(17_000)
    blob_id = upload_value(api, raw)
    assert put(api, "b-blob", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    dynamodb, s3 = calls
    dynamodb.reset()
    s3.reset()
    # When one put_writes names the blob 25 times
    writes = [{"channel": f"ch{n}", "type": "msgpack", "blob_id": blob_id} for n in range(25)]
    body = {"checkpoint_ns": "", "checkpoint_id": "c1", "task_id": "task", "writes": writes}
    answer = post(api, thread_path("b-blob", "/writes"), body)
    # Then it is kept, having read the blob's record and bytes once and copied nothing
    assert answer.status == 200, answer.body
    assert dynamodb.calls["GetItem"] == 1, dict(dynamodb.calls)
    assert dict(s3.calls) == {"GetObject": 1}
    assert dynamodb.total <= 3, dict(dynamodb.calls)  # the record, the shared write value, the checkpoint's writes
    assert [value for *_, value in writes_of(get_tuple(api, "b-blob").data)] == [raw] * 25
    # And naming it so often that its bytes pass the writes' budget is refused, writing nothing
    before = thread_items(aws, "b-blob")
    many = [{"channel": f"ch{n}", "type": "msgpack", "blob_id": blob_id} for n in range(40)]
    refused = post(api, thread_path("b-blob", "/writes"), {**body, "task_id": "task-2", "writes": many})
    assert refused.status == 413, refused.body
    assert refused.error["details"]["field"] == "writes"
    assert thread_items(aws, "b-blob") == before


def test_one_small_blob_named_by_many_channels_is_checked_once_and_never_copied(
    api: ApiDriver,  # noqa: F811
    calls: tuple[CallCounter, CallCounter],
) -> None:
    """Review finding 2, for a put's channels."""
    raw = os.urandom(17_000)
    blob_id = upload_value(api, raw)
    dynamodb, s3 = calls
    dynamodb.reset()
    s3.reset()
    versions = {f"ch{n}": 1 for n in range(30)}
    values = {channel: {"type": "msgpack", "blob_id": blob_id} for channel in versions}
    answer = post(api, thread_path("b-blob-put", "/checkpoints"), put_body("c1", versions, values))
    assert answer.status == 201, answer.body
    assert dynamodb.calls["GetItem"] == 1, dict(dynamodb.calls)
    assert dict(s3.calls) == {"GetObject": 1}
    assert values_of(get_tuple(api, "b-blob-put").data) == dict.fromkeys(versions, ("msgpack", raw))


def test_a_request_names_a_bounded_number_of_distinct_blobs(api: ApiDriver, aws: Any) -> None:  # noqa: F811
    """At most `MAX_REQUEST_BLOBS` distinct blobs per request: one more is a 400 naming it, and nothing is written."""
    blob_ids = [upload_value(api, os.urandom(100 + n)) for n in range(MAX_REQUEST_BLOBS + 1)]
    versions = {f"ch{n:02d}": 1 for n in range(len(blob_ids))}
    values = {c: {"type": "msgpack", "blob_id": b} for c, b in zip(versions, blob_ids, strict=True)}
    answer = post(api, thread_path("b-blob-many", "/checkpoints"), put_body("c1", versions, values))
    assert field_errors(answer) == [f"/values/ch{MAX_REQUEST_BLOBS:02d}/blob_id"]
    assert str(MAX_REQUEST_BLOBS) in answer.error["message"]
    assert thread_items(aws, "b-blob-many") == []
    # And ten are taken
    del values[f"ch{MAX_REQUEST_BLOBS:02d}"]
    del versions[f"ch{MAX_REQUEST_BLOBS:02d}"]
    assert post(api, thread_path("b-blob-many", "/checkpoints"), put_body("c1", versions, values)).status == 201


def test_a_large_blob_named_again_and_again_stops_at_the_copy_budget(
    api: ApiDriver,  # noqa: F811
    aws: Any,  # noqa: F811
    calls: tuple[CallCounter, CallCounter],
) -> None:
    """A blob over 350,000 bytes is copied into the thread's storage once per value naming it, at most
    `MAX_BLOB_COPY_BYTES` per request: past it, 413 and nothing written, nothing copied."""
    raw = os.urandom(2_000_000)
    blob_id = upload_value(api, raw)
    times = MAX_BLOB_COPY_BYTES // len(raw) + 1
    versions = {f"ch{n}": 1 for n in range(times)}
    values = {channel: {"type": "msgpack", "blob_id": blob_id} for channel in versions}
    _dynamodb, s3 = calls
    s3.reset()
    answer = post(api, thread_path("b-blob-copies", "/checkpoints"), put_body("c1", versions, values))
    assert answer.status == 413, answer.body
    assert answer.error["details"]["limit_bytes"] == MAX_BLOB_COPY_BYTES
    assert "CopyObject" not in s3.calls
    assert thread_items(aws, "b-blob-copies") == []
    # And as many as fit are taken
    del values[f"ch{times - 1}"]
    del versions[f"ch{times - 1}"]
    assert post(api, thread_path("b-blob-copies", "/checkpoints"), put_body("c1", versions, values)).status == 201
    assert values_of(get_tuple(api, "b-blob-copies").data)["ch0"] == ("msgpack", raw)
