"""`baton_checkpoints.langgraph`'s pure pieces: the body of a put and of put_writes, the decoding of a tuple, the
paging of a
list, the channel versions; and the saver's requests and retries on an httpx mock transport (what a live server
cannot be made to do: lose an answer). The saver against a real `baton serve` is tests/conformance and
tests/e2e/test_langgraph_graph.py."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pytest_socket import disable_socket, enable_socket

from baton_checkpoints.client import (
    BatonConnectionError,
    NotFoundError,
    RetryPolicy,
    UnexpectedResponseError,
    ValidationError,
)
from baton_checkpoints.langgraph import BatonSaver
from baton_checkpoints.langgraph import threads as wire

T = TypeVar("T")
URL = "https://baton.test"
SERDE = JsonPlusSerializer()


def checkpoint(**values: Any) -> Checkpoint:
    return {
        "v": 4,
        "id": "1f0c0000-0000-6000-8000-000000000002",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": dict.fromkeys(values, 1),
        "versions_seen": {"node": {"a": 1}},
        "updated_channels": None,
    }


def config(thread_id: str = "t-1", **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **extra}}


def run_loop(awaitable: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` with sockets allowed for the loop only: it opens a socketpair to wake itself (the saver's
    transport is a mock, so nothing reaches a network)."""
    enable_socket()
    try:
        return asyncio.run(awaitable)
    finally:
        disable_socket()


def typed(value: Any) -> dict[str, str]:
    tag, raw = SERDE.dumps_typed(value)
    return {"type": tag, "data": base64.b64encode(bytes(raw)).decode("ascii")}


# -- put body -------------------------------------------------------------------------------------------------------


def test_a_put_sends_only_the_new_versions_values_typed_and_the_checkpoint_without_its_values() -> None:
    stored = checkpoint(a="kept", b=[1, 2], c=b"\x00raw")
    stored["channel_versions"] = {"a": 1, "b": 2, "c": 3, "gone": 4}
    metadata: CheckpointMetadata = {"source": "loop", "step": 3, "parents": {}}

    body = wire.put_body(config(checkpoint_id="parent-1"), stored, metadata, {"b": 2, "c": 3, "gone": 4}, SERDE)

    assert body["values"] == {"b": typed([1, 2]), "c": typed(b"\x00raw"), "gone": {"type": "empty", "data": ""}}
    assert "channel_values" not in body["checkpoint"]
    assert body["checkpoint"]["channel_versions"] == {"a": 1, "b": 2, "c": 3, "gone": 4}
    assert body["checkpoint"]["versions_seen"] == {"node": {"a": 1}}
    assert body["parent_checkpoint_id"] == "parent-1"
    assert body["checkpoint_ns"] == ""
    assert "ttl_seconds" not in body
    assert stored["channel_values"] == {"a": "kept", "b": [1, 2], "c": b"\x00raw"}, "the caller's checkpoint is intact"
    json.dumps(body, allow_nan=False)  # the body is plain JSON


def test_a_put_takes_metadata_from_the_config_drops_writes_and_leaves_out_a_missing_parent() -> None:
    run_config: RunnableConfig = {
        "configurable": {"thread_id": "t", "checkpoint_ns": "child:1", "user": "ada", "__private": "x"},
        "metadata": {"score": 3, "nested": {"not": "primitive"}},
    }
    metadata: CheckpointMetadata = {"source": "input", "step": -1, "parents": {}}
    metadata_with_writes: Any = {**metadata, "writes": {"node": "big"}}

    body = wire.put_body(run_config, checkpoint(), metadata_with_writes, {}, SERDE, ttl_seconds=600)

    assert body["metadata"] == {"source": "input", "step": -1, "parents": {}, "user": "ada", "score": 3}
    assert "parent_checkpoint_id" not in body
    assert body["checkpoint_ns"] == "child:1"
    assert body["ttl_seconds"] == 600
    assert body["values"] == {}


def test_a_channel_of_new_versions_missing_from_channel_versions_is_not_sent() -> None:
    body = wire.put_body(config(), checkpoint(a=1), {}, {"a": 1, "stray": 7}, SERDE)
    assert list(body["values"]) == ["a"]


def test_put_writes_body_keeps_langgraphs_order_and_needs_a_checkpoint_id() -> None:
    body = wire.writes_body(
        config(checkpoint_id="c-1"), [("x", {"k": 1}), ("__interrupt__", None)], "task-1", "~a:b", SERDE
    )
    assert body == {
        "checkpoint_ns": "",
        "checkpoint_id": "c-1",
        "task_id": "task-1",
        "task_path": "~a:b",
        "writes": [{"channel": "x", **typed({"k": 1})}, {"channel": "__interrupt__", "type": "null", "data": ""}],
    }
    with pytest.raises(ValueError, match="checkpoint_id"):
        wire.writes_body(config(), [("x", 1)], "task-1", "", SERDE)


# -- tuple decoding -------------------------------------------------------------------------------------------------


def answer_tuple(**overrides: Any) -> dict[str, Any]:
    stored = checkpoint()
    del stored["channel_values"]  # type: ignore[misc]
    stored["channel_versions"] = {"a": "00000000000000000000000000000001.5", "e": "x"}
    base: dict[str, Any] = {
        "thread_id": "t-1",
        "checkpoint_ns": "child:1",
        "checkpoint_id": stored["id"],
        "parent_checkpoint_id": "p-1",
        "checkpoint": stored,
        "metadata": {"source": "loop", "step": 2, "run_id": "r"},
        "channel_values": {"a": typed({"deep": [1, "two"]}), "e": {"type": "empty", "data": ""}},
        "pending_writes": [
            {"task_id": "t1", "channel": "x", "task_path": "", **typed("one")},
            {"task_id": "t2", "channel": "__error__", "task_path": "~p", "type": "null", "data": ""},
        ],
    }
    base.update(overrides)
    return base


def test_a_tuple_decodes_values_and_writes_through_the_serializer() -> None:
    found = wire.tuple_from(answer_tuple(), SERDE)

    assert found.config == {
        "configurable": {"thread_id": "t-1", "checkpoint_ns": "child:1", "checkpoint_id": found.checkpoint["id"]}
    }
    assert found.parent_config == {
        "configurable": {"thread_id": "t-1", "checkpoint_ns": "child:1", "checkpoint_id": "p-1"}
    }
    assert found.checkpoint["channel_values"] == {"a": {"deep": [1, "two"]}}, "an `empty` version has no value"
    assert found.checkpoint["versions_seen"] == {"node": {"a": 1}}
    assert found.metadata == {"source": "loop", "step": 2, "run_id": "r"}
    assert found.pending_writes == [("t1", "x", "one"), ("t2", "__error__", None)], "in the server's order"


def test_a_tuple_without_parent_has_no_parent_config() -> None:
    assert wire.tuple_from(answer_tuple(parent_checkpoint_id=None), SERDE).parent_config is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"checkpoint": None},
        {"channel_values": {"a": {"type": "msgpack", "data": "***"}}},
        {"channel_values": {"a": "not typed"}},
        {"pending_writes": ["nope"]},
    ],
)
def test_a_malformed_tuple_is_an_unexpected_response_not_a_crash_elsewhere(overrides: dict[str, Any]) -> None:
    with pytest.raises(UnexpectedResponseError):
        wire.tuple_from(answer_tuple(**overrides), SERDE)


# -- list paging, versions, chunks ----------------------------------------------------------------------------------


def test_a_listing_asks_pages_within_the_limit_and_stops_at_the_last_cursor() -> None:
    listing = wire.Listing("t", checkpoint_ns=None, before="b-9", filter={"step": 1}, limit=250)
    first = listing.next_call("agent-7")
    assert first is not None
    assert first.params == {
        "before": "b-9",
        "filter": '{"step":1}',
        "limit": 200,
        "agent_id": "agent-7",
    }
    page = [answer_tuple()] * 200
    assert len(listing.take((page, "cur-2"))) == 200
    second = listing.next_call(None)
    assert second is not None
    assert second.params == {
        "before": "b-9",
        "filter": '{"step":1}',
        "limit": 50,
        "cursor": "cur-2",
    }
    assert len(listing.take((page[:60], "cur-3"))) == 50, "never more than the caller's limit"
    assert listing.next_call(None) is None


def test_a_listing_without_limit_follows_cursors_until_none_and_limit_zero_asks_nothing() -> None:
    listing = wire.Listing("t", checkpoint_ns="", before=None, filter=None, limit=None)
    call = listing.next_call(None)
    assert call is not None
    assert call.params == {"checkpoint_ns": ""}
    listing.take(([], None))
    assert listing.next_call(None) is None
    assert wire.Listing("t", checkpoint_ns="", before=None, filter=None, limit=0).next_call(None) is None


def test_versions_increase_as_strings_and_two_branches_get_different_ones() -> None:
    saver = BatonSaver(URL, "k")
    first = saver.get_next_version(None, None)
    second = saver.get_next_version(first, None)
    assert first.startswith("0" * 31 + "1.")
    assert second.startswith("0" * 31 + "2.")
    assert first < second
    assert saver.get_next_version(first, None) != second, "a fork from the same version gets another version"
    assert saver.get_next_version(9, None).startswith("0" * 30 + "10.")  # type: ignore[arg-type]


def test_ids_go_in_chunks_of_100() -> None:
    assert [len(chunk) for chunk in wire.chunks([f"r{i}" for i in range(250)])] == [100, 100, 50]
    assert wire.chunks([]) == []


async def first_of(items: AsyncIterator[T]) -> T:
    return await anext(items)


def test_a_list_across_threads_is_refused_with_a_sentence_saying_so() -> None:
    saver = BatonSaver(URL, "k")
    with pytest.raises(ValueError, match="one thread at a time"):
        saver.list(None)
    with pytest.raises(ValueError, match="one thread at a time"):
        run_loop(first_of(saver.alist(None)))


def test_the_key_stays_out_of_the_repr() -> None:
    assert "secret" not in repr(BatonSaver(URL, "btn_secret"))


# -- requests on a mock transport -----------------------------------------------------------------------------------


class Recorder:
    """An httpx handler answering from a script and keeping each request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(data: Any, status: int = 200, next_cursor: str | None = None) -> httpx.Response:
    return httpx.Response(status, json={"data": data, "meta": {"request_id": "r", "next_cursor": next_cursor}})


def not_found() -> httpx.Response:
    body = {"error": {"code": "NOT_FOUND", "message": "Resource was not found."}, "meta": {"request_id": "r"}}
    return httpx.Response(404, json=body)


def saver_on(recorder: Recorder, **options: Any) -> BatonSaver:
    return BatonSaver(
        URL,
        "btn_k",
        transport=httpx.MockTransport(recorder),
        async_transport=httpx.MockTransport(recorder),
        retry=RetryPolicy(backoff_base=0.0),
        **options,
    )


def test_a_put_whose_answer_is_lost_is_sent_again_as_is_without_an_idempotency_key() -> None:
    answer = {"thread_id": "t/1", "checkpoint_ns": "", "checkpoint_id": "c", "expires_at": "2026-12-02T00:00:00.000Z"}
    recorder = Recorder(httpx.ReadError("broken"), ok(answer, 201))
    saver = saver_on(recorder, agent_id="helper", ttl_seconds=120)

    stored = saver.put(config("t/1"), checkpoint(a=1), {"step": 0}, {"a": 1})

    assert stored == {"configurable": {"thread_id": "t/1", "checkpoint_ns": "", "checkpoint_id": checkpoint()["id"]}}
    first, second = recorder.requests
    assert first.url == second.url == httpx.URL(f"{URL}/v1/threads/t%2F1/checkpoints?agent_id=helper")
    assert first.content == second.content
    assert "idempotency-key" not in first.headers
    assert first.headers["authorization"] == "Bearer btn_k"
    assert json.loads(first.content)["ttl_seconds"] == 120


@pytest.mark.parametrize("route", ["writes", "copy", "prune", "delete-for-runs"])
def test_every_threads_post_is_repeated_after_a_gateway_failure(route: str) -> None:
    recorder = Recorder(httpx.Response(502, json={"message": "Internal server error"}), ok({}))
    saver = saver_on(recorder)
    if route == "writes":
        saver.put_writes(config(checkpoint_id="c"), [("x", 1)], "task")
    elif route == "copy":
        saver.copy_thread("a", "b")
    elif route == "prune":
        saver.prune(["a"], strategy="delete")
    else:
        saver.delete_for_runs(["r"])
    assert len(recorder.requests) == 2
    assert recorder.requests[0].url.path.endswith(route)


def test_a_prune_not_complete_is_asked_again_until_it_is_or_can_go_no_further() -> None:
    def pruned(deleted: int, complete: bool) -> httpx.Response:
        return ok({"pruned_threads": 1, "deleted_checkpoints": deleted, "complete": complete})

    # A prune that stops at its read budget twice, then completes: three requests, the same each time
    recorder = Recorder(pruned(5, False), pruned(4, False), pruned(1, True))
    saver_on(recorder).prune(["t"])
    assert len(recorder.requests) == 3
    assert len({request.content for request in recorder.requests}) == 1
    # One that stops without deleting anything would only stop there again: asked once; an answer without
    # `complete` (an older server) is complete
    for answers in ((pruned(0, False),), (ok({"pruned_threads": 1, "deleted_checkpoints": 2}),)):
        recorder = Recorder(*answers)
        run_loop(saver_on(recorder).aprune(["t"]))
        assert len(recorder.requests) == 1
    # A delete for runs the same way
    recorder = Recorder(
        ok({"deleted_checkpoints": 3, "complete": False}), ok({"deleted_checkpoints": 1, "complete": True})
    )
    saver_on(recorder).delete_for_runs(["r"])
    assert len(recorder.requests) == 2


def test_missing_things_are_none_or_nothing_where_langgraph_expects_it() -> None:
    recorder = Recorder(not_found(), not_found(), not_found(), not_found())
    saver = saver_on(recorder)
    assert saver.get_tuple(config(checkpoint_id="c")) is None
    assert list(saver.list(config())) == []
    saver.delete_thread("t")
    saver.copy_thread("t", "u")
    assert [request.method for request in recorder.requests] == ["GET", "GET", "DELETE", "POST"]


def test_other_errors_are_the_sdks_typed_exceptions_and_a_write_to_a_deleted_thread_raises() -> None:
    invalid = httpx.Response(
        400, json={"error": {"code": "VALIDATION_ERROR", "message": "/strategy is bad."}, "meta": {"request_id": "r"}}
    )
    saver = saver_on(Recorder(invalid, not_found()))
    with pytest.raises(ValidationError):
        saver.prune(["t"], strategy="sometimes")
    with pytest.raises(NotFoundError):
        saver.put_writes(config(checkpoint_id="c"), [("x", 1)], "task")


def test_empty_batches_send_nothing_and_large_ones_go_in_chunks() -> None:
    recorder = Recorder(ok({}), ok({}), ok({}))
    saver = saver_on(recorder)
    saver.prune([])
    saver.delete_for_runs([])
    saver.put_writes(config(checkpoint_id="c"), [], "task")
    assert recorder.requests == []
    saver.delete_for_runs([f"run-{i}" for i in range(201)])
    assert [len(json.loads(request.content)["run_ids"]) for request in recorder.requests] == [100, 100, 1]


def test_async_list_follows_cursors_and_get_tuple_decodes() -> None:
    recorder = Recorder(
        ok([answer_tuple(checkpoint_id="c2")], next_cursor="next"),
        ok([answer_tuple(checkpoint_id="c1")]),
        ok(answer_tuple()),
    )
    saver = saver_on(recorder)

    async def run() -> tuple[list[str], Any]:
        async with saver:
            listed = [item.config["configurable"]["checkpoint_id"] async for item in saver.alist(config())]
            return listed, await saver.aget_tuple(config(checkpoint_id="c"))

    listed, found = run_loop(run())
    assert listed == ["c2", "c1"]
    assert found.checkpoint["channel_values"] == {"a": {"deep": [1, "two"]}}
    assert recorder.requests[1].url.params["cursor"] == "next"
    assert recorder.requests[2].url.params["checkpoint_id"] == "c"


def test_one_saver_serves_two_event_loops_one_after_the_other() -> None:
    recorder = Recorder(not_found(), not_found())
    saver = saver_on(recorder)
    assert run_loop(saver.aget_tuple(config())) is None
    assert run_loop(saver.aget_tuple(config())) is None, "the second loop gets a client of its own"


def test_values_kept_in_the_bucket_are_downloaded_without_the_baton_key_sync_and_async() -> None:
    big = "x" * 1000
    tag, raw = SERDE.dumps_typed(big)
    presigned = "https://bucket.test/v/1?X-Amz-Signature=abc"
    tuple_with_url = answer_tuple(channel_values={"a": {"type": tag, "url": presigned}})

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "bucket.test":
            return httpx.Response(200, content=bytes(raw))
        return ok(tuple_with_url)

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    saver = BatonSaver(
        URL, "btn_k", transport=httpx.MockTransport(handler), async_transport=httpx.MockTransport(handler)
    )
    found = saver.get_tuple(config())
    assert found is not None
    assert found.checkpoint["channel_values"] == {"a": big}
    async_found = run_loop(saver.aget_tuple(config()))
    assert async_found is not None
    assert async_found.checkpoint["channel_values"] == {"a": big}
    downloads = [request for request in seen if request.url.host == "bucket.test"]
    assert len(downloads) == 2
    assert all("authorization" not in request.headers for request in downloads)


def test_a_failed_download_names_no_url() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "bucket.test":
            raise httpx.ConnectError("refused")
        return ok(answer_tuple(channel_values={"a": {"type": "msgpack", "url": "https://bucket.test/?sig=secret"}}))

    saver = BatonSaver(URL, "btn_k", transport=httpx.MockTransport(handler))
    with pytest.raises(BatonConnectionError) as raised:
        saver.get_tuple(config())
    assert "secret" not in str(raised.value)
