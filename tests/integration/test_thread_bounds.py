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

from baton.domain.threads import LIST_READ_BYTES
from baton.store import sizes
from tests.integration.driver import ApiDriver, load_event
from tests.integration.test_threads import (  # noqa: F401 (world, aws and api are fixtures used by name)
    api,
    aws,
    checkpoint_doc,
    list_page,
    post,
    put,
    put_writes,
    thread_path,
    typed,
    world,
)
from tests.integration.conftest import OPERATOR_SECRET
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
    from baton.api.app import app

    client = app.services().dynamodb
    assert world[1].invoke("list_keys").status == 200
    meter = ReadMeter()
    client.meta.events.register("after-call.dynamodb", meter)
    yield meter
    client.meta.events.unregister("after-call.dynamodb", meter)


def raw_list(thread: str, query: str) -> dict[str, Any]:
    """The api handler's whole result for a list without `Accept-Encoding` (what Lambda hands API Gateway)."""
    from baton.handlers.api import handler

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
