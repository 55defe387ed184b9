"""LangGraph threads through the api handler against in-process moto (docs/api.md, "LangGraph threads").

Every route is driven with a sample event reshaped for it; values are random or edge-sized bytes that must come back
byte for byte, from the checkpoint's item, from their own version item, or through a presigned URL of the bucket
(moto's in-process mock answers `requests` too). Rejections are checked to write nothing by scanning moto's table
before and after.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
import requests
import time_machine

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import layout, sizes
from tests.integration.conftest import OPERATOR_SECRET, aws_world, put_key, table_items
from tests.integration.driver import ApiDriver, Result
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

NO_IDEMPOTENCY: dict[str, str | None] = {"idempotency-key": None}
"""The save event carries an Idempotency-Key; thread routes take none, so requests leave it out."""
NOT_FOUND = {"code": "NOT_FOUND", "message": "Resource was not found."}
OWN_SCOPES = {"checkpoints:read", "checkpoints:write", "checkpoints:delete"}

BOB_SECRET = "btn_test_threads_bob_0000001"
"""Agent `bob` of tenant `acme`: reads and writes its own threads, no `*`."""
READER_SECRET = "btn_test_threads_reader_0001"
"""Agent `operator` of tenant `acme` holding only `checkpoints:read`."""
WRITER_SECRET = "btn_test_threads_writer_0001"
"""Agent `operator` of tenant `acme` holding `checkpoints:read` and `checkpoints:write`, not delete."""
STRANGER_SECRET = "btn_test_threads_stranger_01"
"""Agent `operator` of tenant `globex` with `*`: the operator's agent name in another tenant."""

START = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


# -- requests -------------------------------------------------------------------------------------------------


def typed(raw: bytes, type_tag: str = "msgpack") -> dict[str, str]:
    """A typed value as a request carries it."""
    return {"type": type_tag, "data": base64.b64encode(raw).decode("ascii")}


def thread_path(thread_id: str, rest: str = "") -> str:
    """`/v1/threads/<thread_id percent-encoded><rest>`."""
    return f"/v1/threads/{quote(thread_id, safe='')}{rest}"


def checkpoint_doc(checkpoint_id: str, versions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A LangGraph checkpoint without channel_values (the fields the saver sends)."""
    return {
        "v": 4,
        "id": checkpoint_id,
        "ts": "2027-03-01T09:00:00+00:00",
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": sorted(versions),
        **extra,
    }


def put_body(
    checkpoint_id: str,
    versions: dict[str, Any],
    values: dict[str, dict[str, str]] | None = None,
    *,
    parent: str | None = None,
    metadata: dict[str, Any] | None = None,
    ns: str = "",
    ttl: int | None = None,
) -> dict[str, Any]:
    """The body of a put."""
    body: dict[str, Any] = {
        "checkpoint": checkpoint_doc(checkpoint_id, versions),
        "metadata": metadata if metadata is not None else {"source": "loop", "step": 0},
        "checkpoint_ns": ns,
        "values": values or {},
    }
    if parent is not None:
        body["parent_checkpoint_id"] = parent
    if ttl is not None:
        body["ttl_seconds"] = ttl
    return body


def _query(agent: str | None, **params: str | None) -> dict[str, str]:
    query = {k: v for k, v in params.items() if v is not None}
    if agent is not None:
        query["agent_id"] = agent
    return query


def post(api: ApiDriver, path: str, body: Any, *, secret: str | None = None, agent: str | None = None) -> Result:
    """A POST with a JSON body."""
    return api.invoke(
        "save_checkpoint", path=path, body=body, headers=NO_IDEMPOTENCY, secret=secret, query=_query(agent)
    )


def put(
    api: ApiDriver,
    thread: str,
    checkpoint_id: str,
    versions: dict[str, Any],
    values: dict[str, dict[str, str]] | None = None,
    *,
    secret: str | None = None,
    agent: str | None = None,
    **fields: Any,
) -> Result:
    """LangGraph's put."""
    body = put_body(checkpoint_id, versions, values, **fields)
    return post(api, thread_path(thread, "/checkpoints"), body, secret=secret, agent=agent)


def put_writes(
    api: ApiDriver,
    thread: str,
    checkpoint_id: str,
    task_id: str,
    writes: list[tuple[str, bytes]],
    *,
    task_path: str = "",
    ns: str = "",
    secret: str | None = None,
    agent: str | None = None,
) -> Result:
    """LangGraph's put_writes, each write as (channel, bytes) tagged msgpack."""
    body = {
        "checkpoint_id": checkpoint_id,
        "checkpoint_ns": ns,
        "task_id": task_id,
        "task_path": task_path,
        "writes": [{"channel": channel, **typed(raw)} for channel, raw in writes],
    }
    return post(api, thread_path(thread, "/writes"), body, secret=secret, agent=agent)


def get_tuple(
    api: ApiDriver,
    thread: str,
    checkpoint_id: str | None = None,
    *,
    ns: str | None = None,
    secret: str | None = None,
    agent: str | None = None,
) -> Result:
    """LangGraph's get_tuple (the latest without an id)."""
    query = _query(agent, checkpoint_id=checkpoint_id, checkpoint_ns=ns)
    return api.invoke("get_checkpoint", path=thread_path(thread, "/checkpoint"), query=query, secret=secret)


def list_page(
    api: ApiDriver, thread: str, *, secret: str | None = None, agent: str | None = None, **params: Any
) -> Result:
    """LangGraph's list: one page (`filter` given as an object is sent as JSON)."""
    if isinstance(params.get("filter"), dict):
        params["filter"] = json.dumps(params["filter"])
    query = _query(agent, **{k: None if v is None else str(v) for k, v in params.items()})
    return api.invoke("list_subject_checkpoints", path=thread_path(thread, "/checkpoints"), query=query, secret=secret)


def delete_thread(api: ApiDriver, thread: str, *, secret: str | None = None, agent: str | None = None) -> Result:
    """LangGraph's delete_thread."""
    return api.invoke("purge_subject", path=thread_path(thread), query=_query(agent), secret=secret)


def raw_of(value: dict[str, Any]) -> bytes:
    """The bytes of a typed value of an answer: its base64, or what its presigned URL serves."""
    if "data" in value:
        assert "url" not in value
        return base64.b64decode(value["data"], validate=True)
    fetched = requests.get(value["url"], timeout=30)
    assert fetched.status_code == 200, fetched.text[:200]
    return fetched.content


def values_of(tuple_: dict[str, Any]) -> dict[str, tuple[str, bytes]]:
    """A tuple's channel values as {channel: (type, bytes)}."""
    return {channel: (value["type"], raw_of(value)) for channel, value in tuple_["channel_values"].items()}


def writes_of(tuple_: dict[str, Any]) -> list[tuple[str, str, str, bytes]]:
    """A tuple's pending writes as (task_path, task_id, channel, bytes), in the answer's order."""
    return [(w["task_path"], w["task_id"], w["channel"], raw_of(w)) for w in tuple_["pending_writes"]]


def ids_of(page: Result) -> list[str]:
    """The checkpoint ids of a list page."""
    assert page.status == 200, page.body
    return [t["checkpoint_id"] for t in page.data]


def assert_not_found(answer: Result) -> None:
    """The non-disclosing 404: the same body, byte for byte but for request_id."""
    assert answer.status == 404, answer.body
    assert answer.body == {"error": NOT_FOUND, "meta": {"request_id": answer.body["meta"]["request_id"]}}


def field_errors(answer: Result) -> list[str]:
    """The pointers a 400 names."""
    assert answer.status == 400, answer.body
    assert answer.error["code"] == "VALIDATION_ERROR"
    return [e["pointer"] for e in answer.error["details"]["errors"]]


@pytest.fixture(scope="module")
def world(engine: str) -> Iterator[tuple[Any, ApiDriver]]:
    """One world for the module, per engine (a world costs about a second to build): the operator's, bob's and the
    stranger's keys stored. Every test uses threads of its own, so they do not see each other."""
    with aws_world(engine) as client:
        from baton_checkpoints.api.app import app

        services: Services = app.services()
        put_key(services, OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
        put_key(services, BOB_SECRET, "acme", "bob", OWN_SCOPES, "key_" + "b" * 32)
        put_key(services, STRANGER_SECRET, "globex", "operator", {"*"}, "key_" + "c" * 32)
        put_key(services, READER_SECRET, "acme", "operator", {"checkpoints:read"}, "key_" + "d" * 32)
        put_key(
            services, WRITER_SECRET, "acme", "operator", {"checkpoints:read", "checkpoints:write"}, "key_" + "e" * 32
        )
        yield client, ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def aws(world: tuple[Any, ApiDriver]) -> Any:
    """The module's DynamoDB client."""
    return world[0]


@pytest.fixture
def api(world: tuple[Any, ApiDriver]) -> ApiDriver:
    """The operator's driver (a `*` key of tenant `acme`, agent `operator`)."""
    return world[1]


@pytest.fixture
def callers(api: ApiDriver) -> ApiDriver:
    """The operator's driver, in a world that also holds bob's and the stranger's keys."""
    return api


TOMBSTONE = {"pk", "sk", "dead", "ttl"}
"""The attributes of what a deleted thread's checkpoint leaves."""


def thread_items(aws: Any, *threads: str, tenant: str = "acme", agent: str = "operator") -> list[dict[str, Any]]:
    """The items of some threads' partitions (the module's table holds every test's threads)."""
    partitions = {layout.thread_pk(tenant, agent, thread) for thread in threads}
    return [item for item in table_items(aws) if item["pk"]["S"] in partitions]


# -- every route, happy path ----------------------------------------------------------------------------------


def test_every_route_answers_its_documented_shape(api: ApiDriver) -> None:
    # A put of a first checkpoint, then a child, writes on the child, a read, a list, a copy, a prune, a run delete,
    # a thread delete: each answer carries exactly the documented fields
    first = put(api, "t-shape", "c1", {"a": 1}, {"a": typed(b"one")}, metadata={"run_id": "run-1"})
    assert first.status == 201, first.body
    assert set(first.data) == {"thread_id", "checkpoint_ns", "checkpoint_id", "expires_at"}
    assert first.data["thread_id"] == "t-shape"
    assert first.data["checkpoint_id"] == "c1"
    assert first.data["checkpoint_ns"] == ""
    second = put(api, "t-shape", "c2", {"a": 1, "b": 1}, {"b": typed(b"two")}, parent="c1")
    assert second.status == 201
    written = put_writes(api, "t-shape", "c2", "task-1", [("a", b"w0"), ("b", b"w1")])
    assert written.status == 200, written.body
    assert written.data == {"thread_id": "t-shape", "checkpoint_ns": "", "checkpoint_id": "c2", "task_id": "task-1",
                            "writes": 2}  # fmt: skip
    found = get_tuple(api, "t-shape")
    assert found.status == 200
    assert set(found.data) == {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint",
                               "metadata", "channel_values", "pending_writes"}  # fmt: skip
    assert found.data["checkpoint"] == checkpoint_doc("c2", {"a": 1, "b": 1})
    assert found.data["parent_checkpoint_id"] == "c1"
    assert found.data["pending_writes"][0] == {
        "task_id": "task-1",
        "idx": 0,
        "channel": "a",
        "task_path": "",
        **typed(b"w0"),
    }
    assert values_of(found.data) == {"a": ("msgpack", b"one"), "b": ("msgpack", b"two")}
    listed = list_page(api, "t-shape")
    assert ids_of(listed) == ["c2", "c1"]
    assert listed.body["meta"]["next_cursor"] is None
    assert listed.data[0] == found.data
    copied = post(api, thread_path("t-shape", "/copy"), {"target_thread_id": "t-shape-copy"})
    assert copied.status == 200, copied.body
    assert copied.data == {"thread_id": "t-shape", "target_thread_id": "t-shape-copy", "copied_checkpoints": 2}
    assert ids_of(list_page(api, "t-shape-copy")) == ["c2", "c1"]
    assert get_tuple(api, "t-shape-copy").data["pending_writes"] == found.data["pending_writes"]
    pruned = post(api, "/v1/threads:prune", {"thread_ids": ["t-shape-copy", "nobody"], "strategy": "keep_latest"})
    assert pruned.status == 200, pruned.body
    assert pruned.data == {"pruned_threads": 1, "deleted_checkpoints": 1, "complete": True}
    assert ids_of(list_page(api, "t-shape-copy")) == ["c2"]
    assert values_of(get_tuple(api, "t-shape-copy").data) == {"a": ("msgpack", b"one"), "b": ("msgpack", b"two")}
    runs = post(api, "/v1/threads:delete-for-runs", {"run_ids": ["run-1"]})
    assert runs.status == 200, runs.body
    assert runs.data == {"deleted_checkpoints": 1, "complete": True}
    assert ids_of(list_page(api, "t-shape")) == ["c2"]
    deleted = delete_thread(api, "t-shape")
    assert deleted.status == 200
    assert deleted.data == {"thread_id": "t-shape", "deleted": True}
    assert_not_found(get_tuple(api, "t-shape"))
    assert_not_found(delete_thread(api, "t-shape"))


def test_prune_delete_strategy_removes_the_named_threads_and_every_item(api: ApiDriver, aws: Any) -> None:
    # Given two threads with a large value each
    for thread in ("p-1", "p-2"):
        assert put(api, thread, "c1", {"a": 1}, {"a": typed(os.urandom(4000))}).status == 201
        assert put(api, thread, "c2", {"a": 2}, {"a": typed(os.urandom(4000))}, parent="c1").status == 201
    # When one is pruned with strategy delete
    pruned = post(api, "/v1/threads:prune", {"thread_ids": ["p-1"], "strategy": "delete"})
    assert pruned.data == {"pruned_threads": 1, "deleted_checkpoints": 2, "complete": True}
    # Then it is gone with every item of its partition, the other is untouched
    assert_not_found(get_tuple(api, "p-1"))
    assert ids_of(list_page(api, "p-2")) == ["c2", "c1"]
    # (each checkpoint leaves a tombstone: its key, when it was deleted and a TTL, which refuses late writes; the
    # head stays, saying when the thread was deleted)
    assert [i["sk"]["S"] for i in thread_items(aws, "p-1") if set(i) != TOMBSTONE] == ["H"]


def test_a_copy_reads_every_value_after_its_source_is_deleted(api: ApiDriver) -> None:
    # Given a thread with inline, item-held and bucket-held values and a large pending write
    small, held, spilled = os.urandom(100), os.urandom(5_000), os.urandom(500_000)
    values = {"s": typed(small), "h": typed(held), "b": typed(spilled)}
    assert put(api, "t-src", "c1", {"s": 1, "h": 1, "b": 1}, values).status == 201
    assert put(api, "t-src", "c2", {"s": 2, "h": 1, "b": 1}, {"s": typed(b"s2")}, parent="c1").status == 201
    big_write = os.urandom(3_000)
    assert put_writes(api, "t-src", "c2", "task", [("h", big_write), ("s", b"w")]).status == 200
    # When it is copied and the source deleted
    copied = post(api, thread_path("t-src", "/copy"), {"target_thread_id": "t-dst"})
    assert copied.data["copied_checkpoints"] == 2
    assert delete_thread(api, "t-src").status == 200
    # Then the copy reads every value and write of both checkpoints
    latest = get_tuple(api, "t-dst").data
    assert values_of(latest) == {"s": ("msgpack", b"s2"), "h": ("msgpack", held), "b": ("msgpack", spilled)}
    assert [(w[2], w[3]) for w in writes_of(latest)] == [("h", big_write), ("s", b"w")]
    first = get_tuple(api, "t-dst", "c1").data
    assert values_of(first) == {"s": ("msgpack", small), "h": ("msgpack", held), "b": ("msgpack", spilled)}
    # And the copy lives on its own: a new put on it carries from its own items
    assert put(api, "t-dst", "c3", {"s": 3, "h": 1, "b": 1}, {"s": typed(b"s3")}, parent="c2").status == 201
    assert values_of(get_tuple(api, "t-dst").data)["h"] == ("msgpack", held)


def test_a_delete_for_runs_past_what_one_request_reads_deletes_what_it_read_and_says_to_go_on(
    api: ApiDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given run r7 wrote six checkpoints of 3 KB values in two threads, and a delete that reads about two a request
    from baton_checkpoints.store.threads import upkeep

    for thread in ("t-run-a", "t-run-b"):
        parent = None
        for n in range(1, 4):
            values = {"v": typed(os.urandom(3_000))}
            created = put(api, thread, f"c{n}", {"v": n}, values, parent=parent, metadata={"run_id": "r7"})
            assert created.status == 201
            parent = f"c{n}"
    monkeypatch.setattr(upkeep, "MAX_RUNS_READ_BYTES", 5_000)
    monkeypatch.setattr(upkeep, "RUNS_PAGE_ITEMS", 1)
    # When the run is deleted, request after request, while the answer says it is not complete
    answers = []
    while len(answers) < 20:
        answers.append(post(api, "/v1/threads:delete-for-runs", {"run_ids": ["r7"]}).data)
        if answers[-1]["complete"]:
            break
    # Then each answer but the last was not complete and deleted what it read, and together they deleted all six
    assert len(answers) >= 3
    assert [a["complete"] for a in answers] == [False] * (len(answers) - 1) + [True]
    assert sum(a["deleted_checkpoints"] for a in answers) == 6
    for thread in ("t-run-a", "t-run-b"):
        assert_not_found(get_tuple(api, thread))


def test_deleting_a_run_keeps_the_values_later_checkpoints_share(api: ApiDriver) -> None:
    # Given run r1 wrote c1 (a large and a small value), and run r2 wrote c2 keeping both versions
    large = os.urandom(2_000)
    values = {"l": typed(large), "s": typed(b"small")}
    assert put(api, "t-runs", "c1", {"l": 1, "s": 1}, values, metadata={"run_id": "r1"}).status == 201
    assert put(api, "t-runs", "c2", {"l": 1, "s": 1, "n": 1}, {"n": typed(b"n")}, parent="c1",
               metadata={"run_id": "r2"}).status == 201  # fmt: skip
    # When r1's checkpoints are deleted
    assert post(api, "/v1/threads:delete-for-runs", {"run_ids": ["r1", "unknown"]}).data == {
        "deleted_checkpoints": 1,
        "complete": True,
    }
    # Then c2 reads every value it had, and c1 is gone
    assert ids_of(list_page(api, "t-runs")) == ["c2"]
    assert values_of(get_tuple(api, "t-runs").data) == {
        "l": ("msgpack", large),
        "s": ("msgpack", b"small"),
        "n": ("msgpack", b"n"),
    }
    # And a repeat deletes nothing more
    assert post(api, "/v1/threads:delete-for-runs", {"run_ids": ["r1"]}).data == {
        "deleted_checkpoints": 0,
        "complete": True,
    }


def test_prune_keep_latest_keeps_what_the_latest_of_each_namespace_needs(api: ApiDriver, aws: Any) -> None:
    # Given a root line c1 -> c2 -> c3 where c3 keeps c1's large version of x, and a subgraph namespace of two
    x1, y = os.urandom(3_000), os.urandom(3_000)
    assert put(api, "t-keep", "c1", {"x": 1, "y": 1}, {"x": typed(x1), "y": typed(os.urandom(3_000))}).status == 201
    assert put(api, "t-keep", "c2", {"x": 1, "y": 2}, {"y": typed(os.urandom(3_000))}, parent="c1").status == 201
    assert put(api, "t-keep", "c3", {"x": 1, "y": 3}, {"y": typed(y)}, parent="c2").status == 201
    assert put_writes(api, "t-keep", "c3", "task", [("y", os.urandom(5_000))]).status == 200
    assert put(api, "t-keep", "s1", {"z": 1}, {"z": typed(b"z1")}, ns="sub").status == 201
    assert put(api, "t-keep", "s2", {"z": 2}, {"z": typed(b"z2")}, ns="sub", parent="s1").status == 201
    kept_writes = writes_of(get_tuple(api, "t-keep").data)
    # When pruned to the latest
    pruned = post(api, "/v1/threads:prune", {"thread_ids": ["t-keep", "t-keep"], "strategy": "keep_latest"})
    assert pruned.data == {"pruned_threads": 1, "deleted_checkpoints": 3, "complete": True}
    # Then the latest of each namespace reads whole, and only the value items it needs are left
    assert sorted(ids_of(list_page(api, "t-keep"))) == ["c3", "s2"]
    latest = get_tuple(api, "t-keep").data
    assert values_of(latest) == {"x": ("msgpack", x1), "y": ("msgpack", y)}
    assert writes_of(latest) == kept_writes
    assert values_of(get_tuple(api, "t-keep", ns="sub").data) == {"z": ("msgpack", b"z2")}
    # (x@1 rode in c1, which went: its value item was written first; y@3 rides in c3; the write's value has one)
    value_items = [i for i in thread_items(aws, "t-keep") if i["sk"]["S"].startswith(("V#", "W#"))]
    assert len(value_items) == 2
    # And pruning again changes nothing
    again = post(api, "/v1/threads:prune", {"thread_ids": ["t-keep"], "strategy": "keep_latest"})
    assert again.data == {"pruned_threads": 1, "deleted_checkpoints": 0, "complete": True}


def test_a_prune_past_what_one_request_reads_prunes_what_it_read_and_says_to_go_on(
    api: ApiDriver, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a line of eight checkpoints whose first holds a large version of x that the last keeps, and a prune that
    # reads about three checkpoints a request
    from baton_checkpoints.store.threads import upkeep

    x1 = os.urandom(3_000)
    assert put(api, "t-long", "c1", {"x": 1, "y": 1}, {"x": typed(x1), "y": typed(os.urandom(3_000))}).status == 201
    for n in range(2, 9):
        assert put(api, "t-long", f"c{n}", {"x": 1, "y": n}, {"y": typed(os.urandom(3_000))}, parent=f"c{n - 1}")
    last = values_of(get_tuple(api, "t-long").data)
    monkeypatch.setattr(upkeep, "MAX_PRUNE_READ_BYTES", 8_000)
    monkeypatch.setattr(upkeep, "PRUNE_PAGE_ITEMS", 2)
    # When it is pruned to the latest, request after request, while the answer says it is not complete
    answers = []
    while len(answers) < 20:
        answers.append(post(api, "/v1/threads:prune", {"thread_ids": ["t-long"], "strategy": "keep_latest"}).data)
        if answers[-1]["complete"]:
            break
    # Then the first answers were not complete, each pruned what it read, and together they deleted the seven older
    assert [a["complete"] for a in answers[:-1]] == [False] * (len(answers) - 1)
    assert answers[-1]["complete"] is True
    assert len(answers) >= 3
    assert all(a["deleted_checkpoints"] > 0 for a in answers[:-1])
    assert sum(a["deleted_checkpoints"] for a in answers) == 7
    # And the latest reads whole, its kept version of x included (moved out of c1 before c1 went)
    assert ids_of(list_page(api, "t-long")) == ["c8"]
    assert values_of(get_tuple(api, "t-long").data) == last
    assert last["x"] == ("msgpack", x1)


# -- values round-trip byte for byte --------------------------------------------------------------------------


EDGE_VALUES: dict[str, tuple[str, bytes]] = {
    "empty_bytes": ("bytes", b""),
    "null": ("null", b""),
    "zero_json": ("json", b"0"),
    "nul_bytes": ("bytes", b"\x00\x00\xff"),
    "v511": ("msgpack", os.urandom(511)),
    "v512": ("msgpack", os.urandom(512)),
    "v513": ("msgpack", os.urandom(513)),
    "encrypted": ("msgpack+aes", os.urandom(40)),
}


def test_edge_values_round_trip_byte_exact_and_ride_in_the_checkpoint_item(api: ApiDriver, aws: Any) -> None:
    # Given a first checkpoint with empty data, a null type, 0-byte values and values at the inline boundary
    versions = dict.fromkeys(EDGE_VALUES, 1)
    values = {channel: typed(raw, tag) for channel, (tag, raw) in EDGE_VALUES.items()}
    assert put(api, "t-edge", "c1", versions, values, metadata={}).status == 201
    # Then it reads back exactly, by id and as the latest, with empty metadata
    for found in (get_tuple(api, "t-edge", "c1"), get_tuple(api, "t-edge")):
        assert found.status == 200
        assert values_of(found.data) == EDGE_VALUES
        assert found.data["metadata"] == {}
        assert found.data["pending_writes"] == []
        assert found.data["parent_checkpoint_id"] is None
    # And none has an item of its own: at most 512 bytes ride with the channel's version, and the 513-byte value
    # rides in the checkpoint's item as a large value it holds (32 KB of them at most)
    assert [i["sk"]["S"] for i in thread_items(aws, "t-edge") if i["sk"]["S"].startswith("V#")] == []
    (item,) = [i for i in thread_items(aws, "t-edge") if i["sk"]["S"].startswith("K#")]
    assert list(item["hv"]["M"]) == ["v513"]
    record("threads", round_trip_values=len(EDGE_VALUES))


def test_a_checkpoint_with_no_channels_and_no_values_round_trips(api: ApiDriver) -> None:
    assert put(api, "t-bare", "c0", {}, metadata={}).status == 201
    found = get_tuple(api, "t-bare")
    assert found.data["channel_values"] == {}
    assert found.data["checkpoint"]["channel_versions"] == {}


def test_a_1_mb_random_value_spills_to_the_bucket_and_its_url_serves_the_bytes(api: ApiDriver, aws: Any) -> None:
    big = os.urandom(1_000_000)
    assert put(api, "t-big", "c1", {"blob": 1, "small": 1}, {"blob": typed(big), "small": typed(b"s")}).status == 201
    found = get_tuple(api, "t-big")
    value = found.data["channel_values"]["blob"]
    # The answer gives a URL instead of data, and the URL serves exactly the bytes put
    assert set(value) == {"type", "url"}
    assert raw_of(value) == big
    assert found.data["channel_values"]["small"] == typed(b"s")
    # A child that keeps the version reads the same bytes through its parent's value
    assert put(api, "t-big", "c2", {"blob": 1, "small": 2}, {"small": typed(b"t")}, parent="c1").status == 201
    assert values_of(get_tuple(api, "t-big").data) == {"blob": ("msgpack", big), "small": ("msgpack", b"t")}
    # No item holds the bytes: the value item keeps the object's key
    assert max(len(json.dumps(i, default=str)) for i in thread_items(aws, "t-big")) < 10_000


def test_a_large_compressible_value_spilled_to_the_bucket_serves_the_bytes_put(api: ApiDriver) -> None:
    # Given a value that packs (hex text packs to about half) but still past 350,000 stored bytes: it spills packed
    text = os.urandom(600_000).hex().encode("ascii")
    assert put(api, "t-packed", "c1", {"doc": 1}, {"doc": typed(text, "json")}).status == 201
    value = get_tuple(api, "t-packed").data["channel_values"]["doc"]
    # Then the value the answer points at is the bytes put, not their packed form
    assert raw_of(value) == text


def test_small_values_are_carried_to_children_and_large_ones_read_from_the_checkpoint_that_holds_them(
    api: ApiDriver, aws: Any
) -> None:
    small = {f"s{n}": os.urandom(n * 50) for n in range(1, 5)}
    large = {f"l{n}": os.urandom(2_000 + n) for n in range(1, 3)}
    versions = dict.fromkeys([*small, *large], "00001.0")
    values = {c: typed(v) for c, v in {**small, **large}.items()}
    assert put(api, "t-carry", "c1", versions, values).status == 201
    # A chain of children, each changing one small channel
    expected = {c: ("msgpack", v) for c, v in {**small, **large}.items()}
    parent = "c1"
    for step in range(2, 6):
        versions = {**versions, "s1": f"{step:05d}.0"}
        changed = os.urandom(10)
        expected["s1"] = ("msgpack", changed)
        assert put(api, "t-carry", f"c{step}", versions, {"s1": typed(changed)}, parent=parent).status == 201
        parent = f"c{step}"
        assert values_of(get_tuple(api, "t-carry").data) == expected
    # Each large version is stored once, in the checkpoint that brought it (c1), however many checkpoints share it
    assert [i for i in thread_items(aws, "t-carry") if i["sk"]["S"].startswith("V#")] == []
    holders = [i["sk"]["S"] for i in thread_items(aws, "t-carry") if i.get("hv", {}).get("M")]
    assert holders == [layout.thread_checkpoint_sk("", "c1")]


def test_a_fork_from_an_older_checkpoint_reads_the_versions_of_its_own_line(api: ApiDriver) -> None:
    # Given a line c1 -> c2 -> c3 where channel x (large) and y (small) change at each step
    line = {n: (os.urandom(1_000 + n), os.urandom(n)) for n in range(1, 4)}
    parent = None
    for n, (x, y) in line.items():
        answer = put(api, "t-fork", f"c{n}", {"x": n, "y": n}, {"x": typed(x), "y": typed(y)}, parent=parent)
        assert answer.status == 201
        parent = f"c{n}"
    # When a fork c4 takes c1 as parent and changes only y
    fork_y = b"forked"
    assert put(api, "t-fork", "c4", {"x": 1, "y": 4}, {"y": typed(fork_y)}, parent="c1").status == 201
    # Then c4 reads x as of c1 (not c3's), and every older checkpoint still reads its own
    assert values_of(get_tuple(api, "t-fork", "c4").data) == {"x": ("msgpack", line[1][0]), "y": ("msgpack", fork_y)}
    for n, (x, y) in line.items():
        assert values_of(get_tuple(api, "t-fork", f"c{n}").data) == {"x": ("msgpack", x), "y": ("msgpack", y)}


def test_a_channel_whose_new_version_is_empty_is_absent(api: ApiDriver) -> None:
    # Given a channel with a value, then a child where its new version is `empty` (small and large both)
    versions = {"small": 1, "large": 1, "kept": 1}
    values = {"small": typed(b"s"), "large": typed(os.urandom(2_000)), "kept": typed(b"k")}
    assert put(api, "t-empty", "c1", versions, values).status == 201
    emptied = {"small": typed(b"", "empty"), "large": typed(b"", "empty")}
    assert put(api, "t-empty", "c2", {"small": 2, "large": 2, "kept": 1}, emptied, parent="c1").status == 201
    # Then the child shows neither, and the parent still shows both
    assert values_of(get_tuple(api, "t-empty").data) == {"kept": ("msgpack", b"k")}
    assert set(get_tuple(api, "t-empty", "c1").data["channel_values"]) == {"small", "large", "kept"}


def test_a_version_never_stored_is_absent(api: ApiDriver) -> None:
    # A put naming a version whose value was never sent (no parent carries it): the channel is left out
    assert put(api, "t-never", "c1", {"ghost": 7, "real": 1}, {"real": typed(b"r")}).status == 201
    assert set(get_tuple(api, "t-never").data["channel_values"]) == {"real"}


def test_versions_of_different_json_types_never_share_a_value(api: ApiDriver) -> None:
    # Versions 1, "1" and 1.5 of the same channel are three versions (large values: one item each)
    values = {1: os.urandom(700), "1": os.urandom(701), 1.5: os.urandom(702)}
    parent = None
    for n, (version, raw) in enumerate(values.items(), start=1):
        assert put(api, "t-vtypes", f"c{n}", {"ch": version}, {"ch": typed(raw)}, parent=parent).status == 201
        parent = f"c{n}"
    for n, raw in enumerate(values.values(), start=1):
        assert values_of(get_tuple(api, "t-vtypes", f"c{n}").data) == {"ch": ("msgpack", raw)}


def test_namespaces_keep_their_own_checkpoints(api: ApiDriver) -> None:
    assert put(api, "t-ns", "c1", {"a": 1}, {"a": typed(b"root")}).status == 201
    assert put(api, "t-ns", "c2", {"a": 1}, {"a": typed(b"child")}, ns="inner:task").status == 201
    assert values_of(get_tuple(api, "t-ns", ns="").data) == {"a": ("msgpack", b"root")}
    inner = get_tuple(api, "t-ns", ns="inner:task")
    assert inner.data["checkpoint_ns"] == "inner:task"
    assert values_of(inner.data) == {"a": ("msgpack", b"child")}
    assert_not_found(get_tuple(api, "t-ns", "c2"))  # c2 is not in the root namespace


def test_a_put_of_an_existing_id_replaces_it_and_keeps_its_writes(api: ApiDriver) -> None:
    assert put(api, "t-again", "c1", {"a": 1}, {"a": typed(b"first")}).status == 201
    assert put_writes(api, "t-again", "c1", "task", [("a", b"w")]).status == 200
    assert put(api, "t-again", "c1", {"a": 2}, {"a": typed(b"second")}, metadata={"n": 2}).status == 201
    found = get_tuple(api, "t-again")
    assert values_of(found.data) == {"a": ("msgpack", b"second")}
    assert found.data["metadata"] == {"n": 2}
    assert writes_of(found.data) == [("", "task", "a", b"w")]


# -- pending writes -------------------------------------------------------------------------------------------


def test_writes_are_insert_if_absent_per_task_and_index_and_special_channels_overwrite(api: ApiDriver) -> None:
    assert put(api, "t-w", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    first = [("a", b"first-0"), ("b", b"first-1"), ("__error__", b"err-1"), ("__interrupt__", b"int-1")]
    assert put_writes(api, "t-w", "c1", "task", first).status == 200
    # A retry with other bytes at the same (task_id, idx): the first of each regular write stays, specials change
    again = [("a", b"second-0"), ("b", b"second-1"), ("__error__", b"err-2"), ("__interrupt__", b"int-2")]
    assert put_writes(api, "t-w", "c1", "task", again).status == 200
    # A longer retry adds the positions not stored yet
    longer = [("a", b"third-0"), ("b", b"third-1"), ("c", b"third-2"), ("d", b"third-3"), ("e", b"third-4")]
    assert put_writes(api, "t-w", "c1", "task", longer).status == 200
    found = {(w[1], w[2]): w[3] for w in writes_of(get_tuple(api, "t-w").data)}
    assert found == {
        ("task", "a"): b"first-0",
        ("task", "b"): b"first-1",
        ("task", "e"): b"third-4",  # positions 2 and 3 were the specials' (which have fixed indexes), so 4 is new
        ("task", "c"): b"third-2",
        ("task", "d"): b"third-3",
        ("task", "__error__"): b"err-2",
        ("task", "__interrupt__"): b"int-2",
    }


def test_a_retried_put_writes_answers_the_same(api: ApiDriver) -> None:
    # Given a task's writes of 400,000 bytes (the limit is 500,000 per checkpoint), kept
    assert put(api, "t-retry", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    writes = [("a", os.urandom(200_000)), ("b", os.urandom(200_000))]
    first = put_writes(api, "t-retry", "c1", "task", writes)
    assert first.status == 200
    # When the saver retries the same call (its answer was lost): docs/api.md, "a retry writes the same items again
    # and answers the same"
    retry = put_writes(api, "t-retry", "c1", "task", writes)
    # Then it answers the same, and the checkpoint still holds the first writes only
    assert retry.status == 200, retry.body
    assert retry.data == first.data
    assert [(w[2], w[3]) for w in writes_of(get_tuple(api, "t-retry").data)] == writes


def test_a_retried_put_writes_leaves_no_unreferenced_items(api: ApiDriver, aws: Any) -> None:
    assert put(api, "t-orphans", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    writes = [("a", os.urandom(5_000)), ("b", os.urandom(5_000))]
    for _ in range(3):
        assert put_writes(api, "t-orphans", "c1", "task", writes).status == 200
    assert len([i for i in thread_items(aws, "t-orphans") if i["sk"]["S"].startswith("W#")]) == len(writes)


def test_writes_come_back_sorted_by_task_path_task_id_and_index(api: ApiDriver) -> None:
    assert put(api, "t-order", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    # Sent in an order that is none of the sorted ones
    calls = [
        ("~z", "task-a", [("x", b"z-a-0")]),
        ("", "task-b", [("x", b"-b-0"), ("y", b"-b-1")]),
        ("~a", "task-c", [("x", b"a-c-0"), ("__resume__", b"a-c-r"), ("x", b"a-c-2")]),
        ("", "task-0", [("x", b"-0-0")]),
    ]
    for task_path, task_id, writes in calls:
        assert put_writes(api, "t-order", "c1", task_id, writes, task_path=task_path).status == 200
    found = writes_of(get_tuple(api, "t-order").data)
    assert [w[3] for w in found] == [b"-0-0", b"-b-0", b"-b-1", b"a-c-r", b"a-c-0", b"a-c-2", b"z-a-0"]
    assert [w[0] for w in found] == ["", "", "", "~a", "~a", "~a", "~z"]
    # The list carries the same writes inline, in the same order
    assert writes_of(list_page(api, "t-order").data[0]) == found


def test_large_write_values_round_trip(api: ApiDriver, aws: Any) -> None:
    assert put(api, "t-wbig", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    writes = [
        ("small", os.urandom(512)),
        ("big", os.urandom(513)),
        ("packed", b"a message of text " * 300),
        ("bigger", os.urandom(200_000)),
        ("large", os.urandom(5_000)),
    ]
    assert put_writes(api, "t-wbig", "c1", "task", writes).status == 200
    assert [(w[2], w[3]) for w in writes_of(get_tuple(api, "t-wbig").data)] == writes
    # Values over 512 bytes ride in the call while they come to 4 KB (packed when that pays: the 5,400 bytes of
    # text pack far under it), the others have items of their own
    assert len([i for i in thread_items(aws, "t-wbig") if i["sk"]["S"].startswith("W#")]) == 2


def test_the_most_writes_a_call_takes_fit_dynamodbs_expression_limits(api: ApiDriver) -> None:
    from baton_checkpoints.api.app import app

    # Given a checkpoint, and the UpdateExpressions the handler sends, recorded as built
    assert put(api, "t-many", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    expressions: list[int] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        expressions.append(len(params.get("UpdateExpression", "")))

    client = app.services().dynamodb
    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", seen)
    try:
        # When a task writes the most a call takes (1,000 writes, docs/api.md), each 1 byte
        answer = put_writes(api, "t-many", "c1", "task", [(f"ch{n}", b"x") for n in range(1_000)])
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", seen)
    # Then no expression passes DynamoDB's 4,096-byte limit, and every write is kept
    assert max(expressions, default=0) <= 4_096, expressions
    assert answer.status == 200, answer.body
    assert len(get_tuple(api, "t-many").data["pending_writes"]) == 1_000


def test_many_small_channels_never_make_an_item_over_400_kb(api: ApiDriver, aws: Any) -> None:
    # Given a put within every documented limit: 900 channels of 512 bytes (461 KB of values, a 640 KB body)
    values = {f"ch{n:03d}": typed(os.urandom(512)) for n in range(900)}
    answer = put(api, "t-wide", "c1", dict.fromkeys(values, 1), values)
    # Then it is stored with every item under 400 KB, or refused naming values with nothing written
    items = thread_items(aws, "t-wide")
    if answer.status == 413:
        assert answer.error["details"]["field"] in ("values", "checkpoint")
        assert items == []
    else:
        assert answer.status == 201, answer.body
        assert max(sizes.item_bytes(item) for item in items) <= sizes.MAX_ITEM_BYTES
        assert len(get_tuple(api, "t-wide").data["channel_values"]) == 900


def test_writes_that_come_before_their_checkpoint_show_once_it_is_put(api: ApiDriver) -> None:
    # Given a thread at c1, and a task's writes for c2 arriving before c2's put (LangGraph puts checkpoints in the
    # background), small and large
    assert put(api, "t-early", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    large = os.urandom(2_000)
    early = put_writes(api, "t-early", "c2", "task", [("a", b"early"), ("b", large)])
    assert early.status == 200
    assert early.data["writes"] == 2
    # Then no read shows them while c2 is missing
    assert_not_found(get_tuple(api, "t-early", "c2"))
    assert ids_of(list_page(api, "t-early")) == ["c1"]
    assert get_tuple(api, "t-early").data["pending_writes"] == []
    # When c2 is put, then another task's writes arrive
    assert put(api, "t-early", "c2", {"a": 2}, {"a": typed(b"a2")}, parent="c1").status == 201
    assert put_writes(api, "t-early", "c2", "other", [("a", b"after")]).status == 200
    # Then c2 shows every write, the early ones included
    assert writes_of(get_tuple(api, "t-early").data) == [
        ("", "other", "a", b"after"),
        ("", "task", "a", b"early"),
        ("", "task", "b", large),
    ]


def test_a_late_put_writes_after_delete_leaves_the_thread_deleted(api: ApiDriver, aws: Any) -> None:
    # Given a thread with a checkpoint, deleted
    assert put(api, "t-late", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    assert delete_thread(api, "t-late").status == 200
    # When a task's writes (small and large) arrive late
    late = put_writes(api, "t-late", "c1", "task", [("a", b"small"), ("b", os.urandom(4_000))])
    # Then, whatever they are answered, the thread stays deleted: every read is the missing thread's 404, and no
    # checkpoint (an item with a document) is left in its partition
    assert late.status in (200, 404)
    assert_not_found(get_tuple(api, "t-late"))
    assert_not_found(get_tuple(api, "t-late", "c1"))
    assert_not_found(list_page(api, "t-late"))
    assert not [i for i in thread_items(aws, "t-late") if "cp" in i]
    # (its head stays, saying when it was deleted: nothing put before then shows)
    assert [int(i["fl"]["N"]) > 0 for i in thread_items(aws, "t-late") if i["sk"]["S"] == "H"] == [True]


def test_late_writes_to_a_deleted_thread_never_show_in_its_next_life(api: ApiDriver) -> None:
    """Review finding 4 (and a strict expected failure before): a late put_writes to a deleted thread left a
    writes-only item, and a put of the same checkpoint id in the thread's next life adopted its writes. A deleted
    thread's checkpoints leave tombstones, which refuse late writes (404)."""
    # Given a deleted thread, and a task's writes that arrive after the delete (whatever they are answered)
    assert put(api, "t-after", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    assert delete_thread(api, "t-after").status == 200
    late = put_writes(api, "t-after", "c1", "task", [("a", b"late"), ("b", os.urandom(4_000))])
    assert_not_found(late)
    # When the thread is written again, even with the same checkpoint id
    assert put(api, "t-after", "c1", {"a": 1}, {"a": typed(b"b")}).status == 201
    # Then the new thread shows none of the late writes
    found = get_tuple(api, "t-after")
    assert values_of(found.data) == {"a": ("msgpack", b"b")}
    assert found.data["pending_writes"] == []


# -- time to live ---------------------------------------------------------------------------------------------


@pytest.fixture
def clock() -> Iterator[Any]:
    """A stopped clock at START (time_machine, as test_expiry.py)."""
    with time_machine.travel(START, tick=False) as traveller:
        yield traveller


def test_an_expired_thread_is_404_on_every_read_and_a_put_starts_a_new_generation(api: ApiDriver, clock: Any) -> None:
    # Given a thread of two checkpoints (a large value, pending writes) with a ttl of 60 s
    assert put(api, "t-ttl", "c1", {"a": 1}, {"a": typed(os.urandom(2_000))}, ttl=60).status == 201
    answer = put(api, "t-ttl", "c2", {"a": 1, "b": 1}, {"b": typed(b"b")}, parent="c1")
    assert answer.status == 201
    # The ttl is kept, and the expiry carries a tenth of it more: a container's puts within that slack touch no head
    assert answer.data["expires_at"] == "2027-03-01T09:01:06.000Z"
    assert put_writes(api, "t-ttl", "c2", "task", [("a", b"w")]).status == 200
    # One millisecond before expiry it reads
    clock.shift(timedelta(seconds=66) - timedelta(milliseconds=1))
    assert get_tuple(api, "t-ttl").status == 200
    # When the head expires
    clock.shift(timedelta(milliseconds=1))
    # Then every read is the same 404, and so are writes against its checkpoints and a copy
    assert_not_found(get_tuple(api, "t-ttl"))
    assert_not_found(get_tuple(api, "t-ttl", "c1"))
    assert_not_found(list_page(api, "t-ttl"))
    assert_not_found(list_page(api, "t-ttl", checkpoint_ns=""))
    assert_not_found(post(api, thread_path("t-ttl", "/copy"), {"target_thread_id": "t-ttl-copy"}))
    assert_not_found(delete_thread(api, "t-ttl"))
    # When a put comes after expiry
    again = put(api, "t-ttl", "c3", {"a": 2}, {"a": typed(b"new")}, parent="c2")
    assert again.status == 201
    assert (
        again.data["expires_at"] == "2027-03-02T09:02:06.000Z"
    )  # the default ttl again (and its minute): a new thread
    # Then none of the old checkpoints shows, nor the old value through the stale parent
    assert ids_of(list_page(api, "t-ttl")) == ["c3"]
    assert_not_found(get_tuple(api, "t-ttl", "c2"))
    assert values_of(get_tuple(api, "t-ttl").data) == {"a": ("msgpack", b"new")}


def test_writes_to_an_expired_thread_never_show_in_its_next_life(api: ApiDriver, clock: Any) -> None:
    # Given a thread whose head expired (its items are still in the table: the reaper has not run)
    assert put(api, "t-exp-w", "c1", {"a": 1}, {"a": typed(b"a")}, ttl=60).status == 201
    assert put_writes(api, "t-exp-w", "c1", "task", [("a", b"before")]).status == 200
    clock.shift(timedelta(seconds=66))
    # When a task's writes against its checkpoint arrive, and then a put of the same checkpoint id
    late = put_writes(api, "t-exp-w", "c1", "task-late", [("a", b"late")])
    assert put(api, "t-exp-w", "c1", {"a": 1}, {"a": typed(b"again")}).status == 201
    # Then the new life shows no pending write of the former one, late or not
    found = get_tuple(api, "t-exp-w")
    assert values_of(found.data) == {"a": ("msgpack", b"again")}
    assert found.data["pending_writes"] == []
    assert late.status in (200, 404)


def test_a_new_life_with_smaller_ids_hides_every_checkpoint_of_the_former(api: ApiDriver, clock: Any) -> None:
    # Given an expired thread whose checkpoints' ids sort after those its next life writes (items not reaped yet)
    for n in (7, 8, 9):
        assert put(api, "t-life", f"c{n}", {"a": n}, {"a": typed(os.urandom(1_000))}, ttl=60).status == 201
    clock.shift(timedelta(seconds=67))
    # When the next life writes c1 and c2
    assert put(api, "t-life", "c1", {"a": 1}, {"a": typed(b"one")}).status == 201
    assert put(api, "t-life", "c2", {"a": 2}, {"a": typed(b"two")}, parent="c1").status == 201
    # Then the latest is c2, the list shows only this life, page by page too, and the former ids are 404
    assert get_tuple(api, "t-life").data["checkpoint_id"] == "c2"
    assert ids_of(list_page(api, "t-life")) == ["c2", "c1"]
    first = list_page(api, "t-life", limit=1)
    assert ids_of(first) == ["c2"]
    assert ids_of(list_page(api, "t-life", limit=1, cursor=first.body["meta"]["next_cursor"])) == ["c1"]
    assert ids_of(list_page(api, "t-life", before="c9")) == ["c2", "c1"]
    assert_not_found(get_tuple(api, "t-life", "c9"))


def test_a_put_refreshes_the_ttl(api: ApiDriver, clock: Any) -> None:
    assert put(api, "t-refresh", "c1", {}, ttl=60).status == 201
    # Within the slack of that put's touch (a tenth of the ttl), a put touches nothing: the expiry is a ttl away
    clock.shift(timedelta(seconds=5))
    assert put(api, "t-refresh", "c2", {}, parent="c1").data["expires_at"] == "2027-03-01T09:01:06.000Z"
    clock.shift(timedelta(seconds=45))
    assert put(api, "t-refresh", "c3", {}, parent="c2").data["expires_at"] == "2027-03-01T09:01:56.000Z"
    clock.shift(timedelta(seconds=60))
    assert ids_of(list_page(api, "t-refresh")) == ["c3", "c2", "c1"]
    clock.shift(timedelta(seconds=6))
    assert_not_found(list_page(api, "t-refresh"))


# -- list -----------------------------------------------------------------------------------------------------


def _history(api: ApiDriver, thread: str, count: int, ns: str = "") -> list[str]:
    ids = []
    parent = None
    for n in range(count):
        checkpoint_id = f"{ns or 'root'}-{n:03d}"
        metadata = {"step": n, "source": "loop", "even": n % 2 == 0}
        assert put(api, thread, checkpoint_id, {"a": n}, {"a": typed(b"%d" % n)}, parent=parent, ns=ns,
                   metadata=metadata).status == 201  # fmt: skip
        ids.append(checkpoint_id)
        parent = checkpoint_id
    return ids


def test_list_is_newest_first_per_namespace_or_across_all_and_before_keeps_older(api: ApiDriver) -> None:
    root = _history(api, "t-list", 4)
    inner = _history(api, "t-list", 3, ns="sub")
    assert ids_of(list_page(api, "t-list", checkpoint_ns="")) == root[::-1]
    assert ids_of(list_page(api, "t-list", checkpoint_ns="sub")) == inner[::-1]
    # Every namespace when absent: each namespace's own newest-first order is kept
    every = ids_of(list_page(api, "t-list"))
    assert sorted(every) == sorted(root + inner)
    assert [i for i in every if i.startswith("root")] == root[::-1]
    assert ids_of(list_page(api, "t-list", checkpoint_ns="", before=root[2])) == [root[1], root[0]]
    assert ids_of(list_page(api, "t-list", checkpoint_ns="", before=root[0])) == []
    assert ids_of(list_page(api, "t-list", checkpoint_ns="nowhere")) == []


def test_limit_and_cursor_page_through_the_query_and_a_cursor_is_bound_to_it(api: ApiDriver) -> None:
    ids = _history(api, "t-pages", 7)
    _history(api, "t-other", 3)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = list_page(api, "t-pages", limit=3, cursor=cursor, filter={"source": "loop"})
        seen += ids_of(page)
        pages += 1
        cursor = page.body["meta"]["next_cursor"]
        if cursor is None:
            break
        assert len(page.data) == 3  # a page is full unless it is the last
    assert seen == ids[::-1]
    assert pages == 3
    # Pages of a query with before and a namespace stop at the same places
    older: list[str] = []
    cursor = None
    while True:
        page = list_page(api, "t-pages", limit=2, cursor=cursor, before=ids[5], checkpoint_ns="")
        older += ids_of(page)
        cursor = page.body["meta"]["next_cursor"]
        if cursor is None:
            break
    assert older == ids[:5][::-1]
    # The cursor of one query is refused by another thread's, and by another filter on the same thread
    first = list_page(api, "t-pages", limit=3, filter={"source": "loop"})
    stolen = first.body["meta"]["next_cursor"]
    for answer in (
        list_page(api, "t-other", limit=3, cursor=stolen, filter={"source": "loop"}),
        list_page(api, "t-pages", limit=3, cursor=stolen, filter={"source": "input"}),
        list_page(api, "t-pages", limit=3, cursor="garbage"),
    ):
        assert field_errors(answer) == ["/cursor"]


def test_the_metadata_filter_is_exact_and_type_exact(api: ApiDriver) -> None:
    metadata = [
        {"flag": 1, "run_id": "r1", "custom": {"k": [1, 2]}},
        {"flag": True, "run_id": "r1"},
        {"flag": "1", "run_id": "r2"},
        {"flag": 1.0, "nested": {"a": None}},
        {"other": 1},
    ]
    for n, meta in enumerate(metadata):
        assert put(api, "t-filter", f"c{n}", {}, metadata=meta).status == 201

    def matching(wanted: dict[str, Any]) -> list[str]:
        return sorted(ids_of(list_page(api, "t-filter", filter=wanted)))

    assert matching({"flag": 1}) == ["c0", "c3"]  # 1 and 1.0 are one JSON number
    assert matching({"flag": True}) == ["c1"]
    assert matching({"flag": "1"}) == ["c2"]
    assert matching({"flag": 1, "run_id": "r1"}) == ["c0"]
    assert matching({"custom": {"k": [1, 2]}}) == ["c0"]
    assert matching({"custom": {"k": [2, 1]}}) == []
    assert matching({"nested": {"a": None}}) == ["c3"]
    assert matching({"flag": None}) == []  # a key that is absent does not match null
    assert matching({}) == ["c0", "c1", "c2", "c3", "c4"]
    record("threads", metadata_filters=9)


def test_a_page_stops_early_before_3_mb_of_values(api: ApiDriver) -> None:
    # Given four checkpoints each carrying 900,000 bytes of values kept in DynamoDB (random, so stored as is, and
    # under 350,000 bytes each, so not in the bucket: a value in the bucket adds only its URL to a page)
    blobs = {n: [os.urandom(300_000) for _ in range(3)] for n in range(4)}
    for n, raws in blobs.items():
        values = {f"x{i}": typed(raw) for i, raw in enumerate(raws)}
        assert put(api, "t-heavy", f"c{n}", dict.fromkeys(values, n), values).status == 201
    # When listed with room for all four
    first = list_page(api, "t-heavy", limit=10)
    # Then the page stops at 2.7 MB, before 3 MB of values, with a cursor, and the next page carries the rest
    assert ids_of(first) == ["c3", "c2", "c1"]
    assert all("data" in v for t in first.data for v in t["channel_values"].values())
    cursor = first.body["meta"]["next_cursor"]
    assert cursor is not None
    rest = list_page(api, "t-heavy", limit=10, cursor=cursor)
    assert ids_of(rest) == ["c0"]
    assert rest.body["meta"]["next_cursor"] is None
    assert [raw_of(v) for v in rest.data[0]["channel_values"].values()] == blobs[0]


# -- isolation ------------------------------------------------------------------------------------------------


def _every_route(api: ApiDriver, thread: str, *, secret: str, agent: str | None = None) -> dict[str, Result]:
    return {
        "get latest": get_tuple(api, thread, secret=secret, agent=agent),
        "get by id": get_tuple(api, thread, "c1", secret=secret, agent=agent),
        "list": list_page(api, thread, secret=secret, agent=agent),
        "copy": post(api, thread_path(thread, "/copy"), {"target_thread_id": "stolen"}, secret=secret, agent=agent),
        "delete": delete_thread(api, thread, secret=secret, agent=agent),
    }


def _same_answer(one: Result, other: Result, thread: str, other_thread: str) -> bool:
    """Byte-identical answers but for meta.request_id and the thread id each names."""

    def bare(answer: Result, name: str) -> str:
        text = answer.raw_body.replace(answer.body["meta"]["request_id"], "")
        return text.replace(json.dumps(name), '"<thread>"')

    return one.status == other.status and bare(one, thread) == bare(other, other_thread)


def test_another_agents_key_gets_the_missing_threads_404_on_every_route(callers: ApiDriver, aws: Any) -> None:
    # Given the operator's thread, with a run id
    assert put(callers, "t-mine", "c1", {"a": 1}, {"a": typed(b"secret")}, metadata={"run_id": "run-x"}).status == 201
    before = thread_items(aws, "t-mine")
    # Pending writes from bob against it answer as they do for a thread nobody has
    foreign = put_writes(callers, "t-mine", "c1", "task", [("a", b"x")], secret=BOB_SECRET)
    absent = put_writes(callers, "t-nobody-2", "c1", "task", [("a", b"x")], secret=BOB_SECRET)
    assert _same_answer(foreign, absent, "t-mine", "t-nobody-2"), (foreign.raw_body, absent.raw_body)
    # When bob (no *) addresses it by its id, and also names the operator with agent_id on the read routes
    as_bob = _every_route(callers, "t-mine", secret=BOB_SECRET)
    missing = _every_route(callers, "t-nobody", secret=BOB_SECRET)
    reads = {
        "named get": get_tuple(callers, "t-mine", secret=BOB_SECRET, agent="operator"),
        "named list": list_page(callers, "t-mine", secret=BOB_SECRET, agent="operator"),
        "named delete": delete_thread(callers, "t-mine", secret=BOB_SECRET, agent="operator"),
    }
    # Then every answer is the missing thread's 404, byte for byte but for request_id
    for name, answer in {**as_bob, **missing, **reads}.items():
        assert answer.status == 404, name
        assert_not_found(answer)
    # And prune and delete-for-runs act on bob's own threads only
    pruned = post(callers, "/v1/threads:prune", {"thread_ids": ["t-mine"], "strategy": "delete"}, secret=BOB_SECRET)
    assert pruned.data == {"pruned_threads": 0, "deleted_checkpoints": 0, "complete": True}
    runs = post(callers, "/v1/threads:delete-for-runs", {"run_ids": ["run-x"]}, secret=BOB_SECRET)
    assert runs.data == {"deleted_checkpoints": 0, "complete": True}
    # A write naming the operator is refused as a write for someone else
    named = put(callers, "t-mine", "c9", {}, secret=BOB_SECRET, agent="operator")
    assert named.status == 403
    # Nothing of the operator's changed, and bob's own put of the same id makes bob's own thread
    assert thread_items(aws, "t-mine") == before
    assert put(callers, "t-mine", "c1", {"a": 1}, {"a": typed(b"bob's")}, secret=BOB_SECRET).status == 201
    assert values_of(get_tuple(callers, "t-mine").data) == {"a": ("msgpack", b"secret")}
    assert values_of(get_tuple(callers, "t-mine", secret=BOB_SECRET).data) == {"a": ("msgpack", b"bob's")}
    record("threads", isolation_requests=len(as_bob) + len(missing) + len(reads) + 5)


def test_a_wildcard_key_reaches_another_agents_thread_with_agent_id(callers: ApiDriver) -> None:
    assert put(callers, "t-bob", "c1", {"a": 1}, {"a": typed(b"bob")}, secret=BOB_SECRET).status == 201
    assert put_writes(callers, "t-bob", "c1", "task", [("a", b"w")], agent="bob").status == 200
    found = get_tuple(callers, "t-bob", agent="bob")
    assert values_of(found.data) == {"a": ("msgpack", b"bob")}
    assert writes_of(found.data) == [("", "task", "a", b"w")]
    assert ids_of(list_page(callers, "t-bob", agent="bob")) == ["c1"]
    assert put(callers, "t-bob", "c2", {"a": 1}, parent="c1", agent="bob").status == 201
    assert ids_of(list_page(callers, "t-bob", secret=BOB_SECRET)) == ["c2", "c1"]
    copied = post(callers, thread_path("t-bob", "/copy"), {"target_thread_id": "t-bob-2"}, agent="bob")
    assert copied.data["copied_checkpoints"] == 2
    assert ids_of(list_page(callers, "t-bob-2", secret=BOB_SECRET)) == ["c2", "c1"]
    assert_not_found(get_tuple(callers, "t-bob"))  # without agent_id, the operator's own (missing) thread
    assert delete_thread(callers, "t-bob", agent="bob").status == 200
    assert_not_found(get_tuple(callers, "t-bob", secret=BOB_SECRET))


def test_another_tenant_sees_nothing(callers: ApiDriver, aws: Any) -> None:
    assert put(callers, "t-acme", "c1", {"a": 1}, {"a": typed(b"acme")}, metadata={"run_id": "r"}).status == 201
    before = thread_items(aws, "t-acme")
    # The stranger has * and the same agent name, in another tenant: its writes answer as for a thread nobody has
    foreign = put_writes(callers, "t-acme", "c1", "task", [("a", b"x")], secret=STRANGER_SECRET)
    absent = put_writes(callers, "t-absent", "c1", "task", [("a", b"x")], secret=STRANGER_SECRET)
    assert _same_answer(foreign, absent, "t-acme", "t-absent"), (foreign.raw_body, absent.raw_body)
    for name, answer in _every_route(callers, "t-acme", secret=STRANGER_SECRET).items():
        assert answer.status == 404, name
        assert_not_found(answer)
    assert_not_found(get_tuple(callers, "t-acme", secret=STRANGER_SECRET, agent="operator"))
    runs = post(callers, "/v1/threads:delete-for-runs", {"run_ids": ["r"]}, secret=STRANGER_SECRET)
    assert runs.data == {"deleted_checkpoints": 0, "complete": True}
    prune = post(callers, "/v1/threads:prune", {"thread_ids": ["t-acme"]}, secret=STRANGER_SECRET)
    assert prune.data == {"pruned_threads": 0, "deleted_checkpoints": 0, "complete": True}
    assert thread_items(aws, "t-acme") == before
    assert values_of(get_tuple(callers, "t-acme").data) == {"a": ("msgpack", b"acme")}


def test_each_route_needs_its_scope_and_a_refusal_writes_nothing(callers: ApiDriver, aws: Any) -> None:
    assert put(callers, "t-scope", "c1", {"a": 1}, {"a": typed(b"a")}, metadata={"run_id": "rs"}).status == 201
    before = table_items(aws)
    # A read-only key of the same agent reads, and every write is a 403
    assert get_tuple(callers, "t-scope", secret=READER_SECRET).status == 200
    assert ids_of(list_page(callers, "t-scope", secret=READER_SECRET)) == ["c1"]
    refused = {
        "put": put(callers, "t-scope", "c2", {"a": 1}, parent="c1", secret=READER_SECRET),
        "writes": put_writes(callers, "t-scope", "c1", "task", [("a", b"x")], secret=READER_SECRET),
        "copy": post(callers, thread_path("t-scope", "/copy"), {"target_thread_id": "x"}, secret=READER_SECRET),
        "delete": delete_thread(callers, "t-scope", secret=READER_SECRET),
        "prune": post(callers, "/v1/threads:prune", {"thread_ids": ["t-scope"]}, secret=READER_SECRET),
        "runs": post(callers, "/v1/threads:delete-for-runs", {"run_ids": ["rs"]}, secret=READER_SECRET),
        # checkpoints:write is not checkpoints:delete
        "delete by writer": delete_thread(callers, "t-scope", secret=WRITER_SECRET),
        "prune by writer": post(callers, "/v1/threads:prune", {"thread_ids": ["t-scope"]}, secret=WRITER_SECRET),
        "runs by writer": post(callers, "/v1/threads:delete-for-runs", {"run_ids": ["rs"]}, secret=WRITER_SECRET),
    }
    assert {name: answer.status for name, answer in refused.items()} == dict.fromkeys(refused, 403)
    assert table_items(aws) == before
    record("threads", scope_refusals=len(refused))


def test_a_copy_merges_into_an_existing_target(api: ApiDriver) -> None:
    # Given a target thread with checkpoints of its own, and a source; versions are unique, as LangGraph's are (a
    # counter and a random fraction: docs/api.md, "a version names one value")
    own = {1: os.urandom(1_000), 2: os.urandom(1_000)}
    assert put(api, "t-into", "t1", {"a": "1.7a"}, {"a": typed(own[1])}).status == 201
    assert put(api, "t-into", "t2", {"a": "2.7a"}, {"a": typed(own[2])}, parent="t1").status == 201
    theirs = os.urandom(1_000)
    assert put(api, "t-from", "s1", {"a": "1.3f"}, {"a": typed(theirs)}).status == 201
    # When the source is copied into it
    assert post(api, thread_path("t-from", "/copy"), {"target_thread_id": "t-into"}).data["copied_checkpoints"] == 1
    # Then the target holds all three, each reading its own value
    assert ids_of(list_page(api, "t-into")) == ["t2", "t1", "s1"]
    assert values_of(get_tuple(api, "t-into", "s1").data) == {"a": ("msgpack", theirs)}
    assert values_of(get_tuple(api, "t-into", "t1").data) == {"a": ("msgpack", own[1])}
    assert values_of(get_tuple(api, "t-into", "t2").data) == {"a": ("msgpack", own[2])}


def test_a_copy_of_a_thread_over_its_read_budget_is_refused_before_anything_is_written(
    api: ApiDriver, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a thread of four checkpoints whose values of 300 KB have items of their own, and a copy budget of 8 KB
    from baton_checkpoints.store.threads import upkeep

    monkeypatch.setattr(upkeep, "MAX_COPY_READ_BYTES", 8_000)
    parent = None
    for n in range(1, 5):
        assert put(api, "t-big", f"c{n}", {"a": n}, {"a": typed(os.urandom(300_000))}, parent=parent).status == 201
        parent = f"c{n}"
    # When it is copied into another thread
    copied = post(api, thread_path("t-big", "/copy"), {"target_thread_id": "t-big-copy"})
    # Then the copy is refused, naming the thread and the budget
    assert copied.status == 413, copied.raw_body
    assert copied.error["details"]["field"] == "thread_id"
    assert copied.error["details"]["limit_bytes"] == 8_000
    assert copied.error["details"]["actual_bytes"] > 8_000
    # And nothing was written: the target does not exist, and the source is whole
    assert thread_items(aws, "t-big-copy") == []
    assert ids_of(list_page(api, "t-big")) == ["c4", "c3", "c2", "c1"]
    # And a copy onto itself, which only counts the checkpoints (their items alone, a Query of at most 1 MB each,
    # no more Queries than the budget's megabytes and one), still answers
    assert post(api, thread_path("t-big", "/copy"), {"target_thread_id": "t-big"}).data["copied_checkpoints"] == 4


# -- validation -----------------------------------------------------------------------------------------------


def _rejections(api: ApiDriver) -> list[tuple[Result, str]]:
    """Requests each invalid in one field, with the pointer their 400 must name."""
    good = put_body("c2", {"a": 2}, {"a": typed(b"x")}, parent="c1")
    big_metadata = {"blob": "x" * 65_536}

    def with_(**changes: Any) -> dict[str, Any]:
        return {**good, **changes}

    checkpoints = thread_path("t-valid", "/checkpoints")
    bad_checkpoint = {**good["checkpoint"], "channel_values": {"a": 1}}
    writes = {"checkpoint_id": "c1", "task_id": "task", "writes": [{"channel": "a", **typed(b"x")}]}
    return [
        (post(api, checkpoints, with_(values={"a": {"type": "msgpack", "data": "not base64!"}})), "/values/a/data"),
        (post(api, checkpoints, with_(values={"a": {"type": "Msg Pack", "data": ""}})), "/values/a/type"),
        (post(api, checkpoints, with_(values={"a": {"type": "m" * 41, "data": ""}})), "/values/a/type"),
        (post(api, checkpoints, with_(checkpoint=bad_checkpoint)), "/checkpoint"),
        (post(api, checkpoints, with_(values={"b": typed(b"x")})), ""),
        (post(api, checkpoints, with_(metadata=big_metadata)), ""),
        (post(api, checkpoints, with_(ttl_seconds=59)), "/ttl_seconds"),
        (post(api, checkpoints, with_(checkpoint_ns="a\nb")), "/checkpoint_ns"),
        (post(api, thread_path("t\x01bad", "/checkpoints"), good), "/thread_id"),
        (post(api, thread_path("x" * 201, "/checkpoints"), good), "/thread_id"),
        (post(api, thread_path("t-valid", "/writes"), {**writes, "writes": []}), "/writes"),
        (post(api, thread_path("t-valid", "/writes"), {**writes, "task_id": "bad\ttask"}), "/task_id"),
        (post(api, "/v1/threads:prune", {"thread_ids": [f"t{n}" for n in range(101)]}), "/thread_ids"),
        (post(api, "/v1/threads:prune", {"thread_ids": ["t"], "strategy": "all"}), "/strategy"),
        (post(api, "/v1/threads:delete-for-runs", {"run_ids": []}), "/run_ids"),
        (post(api, thread_path("t-valid", "/copy"), {"target_thread_id": "a\x7fb"}), "/target_thread_id"),
        (list_page(api, "t-valid", limit=0), "/limit"),
        (list_page(api, "t-valid", limit=201), "/limit"),
        (list_page(api, "t-valid", filter="{bad json"), "/filter"),
        (list_page(api, "t-valid", filter="[1]"), "/filter"),
        (get_tuple(api, "t-valid", checkpoint_id="c\x00"), "/checkpoint_id"),
    ]


@pytest.mark.parametrize("data", ["QUJD=", "QUJD====", "QR=="])
def test_non_canonical_base64_is_refused(api: ApiDriver, data: str) -> None:
    # "strict: padding and alphabet checked" (decode_data): "QUJD=" and "QUJD====" carry padding past a full group,
    # "QR==" has pad bits set (canonical "QQ=="), so two different texts would store the same bytes
    answer = put(api, "t-b64", "c1", {"a": 1}, {"a": {"type": "bytes", "data": data}})
    assert field_errors(answer) == ["/values/a/data"]


@pytest.mark.parametrize(
    ("changes", "pointer"),
    [
        ({"values": {"a": typed(b"x"), "b": typed(b"y")}}, "/values"),
        ({"metadata": {"note": "m" * 40_000}}, "/metadata"),
        ({"checkpoint": checkpoint_doc("c2", {"a": 2}, padding="p" * 170_000)}, "/checkpoint"),
    ],
    ids=["values-without-version", "metadata-too-large", "checkpoint-too-large"],
)
def test_cross_field_rejections_point_at_their_field(api: ApiDriver, changes: dict[str, Any], pointer: str) -> None:
    # docs/api.md, Envelope: "pointer is the RFC 6901 pointer into the body"
    body = {**put_body("c2", {"a": 2}, {"a": typed(b"x")}), **changes}
    assert field_errors(post(api, thread_path("t-pointer", "/checkpoints"), body)) == [pointer]


def test_every_rejection_names_its_field_and_writes_nothing(api: ApiDriver, aws: Any) -> None:
    assert put(api, "t-valid", "c1", {"a": 1}, {"a": typed(b"x")}).status == 201
    before = table_items(aws)
    rejected = _rejections(api)
    wrong = []
    for n, (answer, pointer) in enumerate(rejected):
        if answer.status != 400 or (pointer and pointer not in field_errors(answer)):
            wrong.append((n, pointer, answer.status, answer.body))
    assert not wrong, wrong
    # The rules that look across fields name the field they are about in their sentence
    messages = [answer.error["message"] for answer, pointer in rejected if not pointer]
    assert "/values" in messages[0]
    assert "/metadata" in messages[1]
    assert table_items(aws) == before
    assert values_of(get_tuple(api, "t-valid").data) == {"a": ("msgpack", b"x")}
    record("threads", rejections=len(rejected))


def upload_value(api: ApiDriver, raw: bytes, *, secret: str | None = None) -> str:
    """Declare a blob of `raw` and PUT it to its presigned URL (how a value too large for a body travels)."""
    declared = post(
        api,
        "/v1/blobs",
        {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw), "media_type": "application/octet-stream"},
        secret=secret,
    )
    assert declared.status == 201, declared.body
    upload = declared.data["upload"]
    assert requests.put(upload["url"], data=raw, headers=upload["headers"], timeout=30).status_code == 200
    return str(declared.data["blob_id"])


def test_a_value_at_the_state_limit_travels_as_a_blob_and_reads_back_byte_exact(api: ApiDriver, aws: Any) -> None:
    # Given a value of 3,000,000 bytes (the contract's state limit: its base64 does not fit a 3.1 MB body),
    # uploaded as a blob, and a pending write of the same size
    big = os.urandom(3_000_000)
    blob_id = upload_value(api, big)
    body = put_body("c1", {"huge": 1, "small": 1}, {"huge": {"type": "msgpack", "blob_id": blob_id}})
    body["values"]["small"] = typed(b"s")
    assert post(api, thread_path("t-blob-value", "/checkpoints"), body).status == 201
    write_blob = upload_value(api, big[::-1])
    write = {"channel": "huge", "type": "msgpack", "blob_id": write_blob}
    writes = {"checkpoint_id": "c1", "task_id": "task", "writes": [write]}
    assert post(api, thread_path("t-blob-value", "/writes"), writes).status == 200
    # Then the tuple gives both back byte for byte (by URL), and no item holds their bytes
    found = get_tuple(api, "t-blob-value").data
    assert values_of(found) == {"huge": ("msgpack", big), "small": ("msgpack", b"s")}
    assert [(w[2], w[3]) for w in writes_of(found)] == [("huge", big[::-1])]
    assert max(len(json.dumps(i, default=str)) for i in thread_items(aws, "t-blob-value")) < 10_000


def test_a_blob_value_must_be_the_callers_uploaded_and_unattached_blob(api: ApiDriver, aws: Any) -> None:
    raw = os.urandom(1_000)
    # A blob declared but never uploaded, one of another tenant, one of another agent than the thread's, and one
    # that is no blob at all are each refused naming the value's blob_id, and nothing is written
    declared = post(
        api, "/v1/blobs", {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw), "media_type": "text/plain"}
    )
    not_uploaded = str(declared.data["blob_id"])
    of_globex = upload_value(api, raw, secret=STRANGER_SECRET)
    of_operator = upload_value(api, raw)
    before = table_items(aws)
    for blob_id, agent in ((not_uploaded, None), (of_globex, None), (of_operator, "bob"), ("blob_" + "0" * 32, None)):
        body = put_body("c1", {"v": 1}, {"v": {"type": "msgpack", "blob_id": blob_id}})
        answer = post(api, thread_path("t-blob-refused", "/checkpoints"), body, agent=agent)
        assert field_errors(answer) == ["/values/v/blob_id"], answer.body
    # Both data and blob_id, or neither, is refused too
    both = put_body("c1", {"v": 1}, {"v": {**typed(raw), "blob_id": of_operator}})
    assert post(api, thread_path("t-blob-refused", "/checkpoints"), both).status == 400
    assert table_items(aws) == before
