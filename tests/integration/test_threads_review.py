"""A black-box review of the LangGraph threads resource (docs/api.md, "LangGraph threads"): each test proves a defect.

Every test here drives the api handler against in-process moto with the helpers of `test_threads.py`, and states
what the contract promises; a test that fails names a defect of the product (its docstring says which, and what the
contract says instead). The tests are plain (not xfail): they pass once the product keeps its contract.
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import time_machine

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import sizes
from tests.integration.conftest import OPERATOR_SECRET, aws_world, put_key
from tests.integration.driver import ApiDriver
from tests.integration.test_threads import (
    START,
    checkpoint_doc,
    get_tuple,
    ids_of,
    list_page,
    post,
    put,
    put_writes,
    thread_items,
    thread_path,
    typed,
    values_of,
    writes_of,
)
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024
"""Lambda's limit on a synchronous function's result (the whole result object, as API Gateway receives it)."""


@pytest.fixture(scope="module")
def world(engine: str) -> Iterator[tuple[Any, ApiDriver]]:
    """One world for the module, per engine, with the operator's key (`*`, tenant `acme`, agent `operator`); every
    test writes threads of its own."""
    with aws_world(engine) as client:
        from baton_checkpoints.api.app import app

        services: Services = app.services()
        put_key(services, OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
        yield client, ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def aws(world: tuple[Any, ApiDriver]) -> Any:
    """The module's DynamoDB client."""
    return world[0]


@pytest.fixture
def api(world: tuple[Any, ApiDriver]) -> ApiDriver:
    """The operator's driver."""
    return world[1]


@pytest.fixture
def clock() -> Iterator[Any]:
    """A stopped clock at `START`."""
    with time_machine.travel(START, tick=False) as traveller:
        yield traveller


@pytest.fixture(autouse=True)
def _count_case() -> Iterator[None]:
    """One case of the review per test, passed or failed (the proof suites' counts)."""
    yield
    record("threads review", cases=1)


def _random_text(size: int, seed: int) -> str:
    """Text that neither compresses much nor needs escaping in JSON."""
    generator = random.Random(seed)
    return "".join(generator.choices(string.ascii_letters + string.digits, k=size))


# -- a refused request writes nothing ------------------------------------------------------------------------


def test_a_put_refused_for_its_values_leaves_the_threads_time_to_live_as_it_was(api: ApiDriver, clock: Any) -> None:
    """DEFECT: a put refused with 413 (values) has already refreshed the thread's head with the ttl it asked for.

    `ThreadStore.put` calls `_touch` (one UpdateItem of the head: expiry and `ttl_seconds`) before it sums the
    values the checkpoint would hold in the table, so a put that answers `413 PAYLOAD_TOO_LARGE` naming `values`
    has changed the thread: here its ttl drops from the default day to 60 s, and the next put (which keeps the ttl)
    expires a minute later. The contract: a refused request writes nothing (docs/api.md, Rules: "nothing was
    written"; TTL: "each put may change it" - a put that is refused is not stored). Fix: check the values' size
    before `_touch` (the carried sizes need only the parent's item, which does not depend on the head's
    generation if read first, or touch after the check and re-check the generation).
    """
    # Given a thread whose first checkpoint holds 5 values of 340,000 bytes in the table (1.7 MB: within limits)
    large = {f"big{n}": typed(os.urandom(340_000)) for n in range(5)}
    first = put(api, "rv-ttl-413", "c1", dict.fromkeys(large, 1), large)
    assert first.status == 201, first.body
    assert first.data["expires_at"] == "2027-03-02T09:01:00.000Z"  # the default day (and the minute of slack)
    # When a child adds 3 more such values (2.72 MB held in the table: over 2.5 MB) and asks for a ttl of 60 s
    more = {f"more{n}": typed(os.urandom(340_000)) for n in range(3)}
    versions = {**dict.fromkeys(large, 1), **dict.fromkeys(more, 1)}
    refused = put(api, "rv-ttl-413", "c2", versions, more, parent="c1", ttl=60)
    assert refused.status == 413, refused.body
    assert refused.error["details"]["field"] == "values"
    # Then the thread's ttl is still the day it had: the next put (no ttl_seconds: "or as before") expires a day on
    # (past the slack of the first put's touch, so this put touches the head again)
    clock.shift(timedelta(seconds=61))
    after = put(api, "rv-ttl-413", "c3", dict.fromkeys(large, 1), parent="c1")
    assert after.status == 201, after.body
    assert after.data["expires_at"] == "2027-03-02T09:02:01.000Z", "the refused put changed the thread's ttl"


def test_a_put_writes_refused_with_413_keeps_none_of_its_writes(api: ApiDriver) -> None:
    """DEFECT: a `put_writes` answered `413 PAYLOAD_TOO_LARGE` has stored the writes of its first chunks.

    `put_writes` sets its writes 40 per UpdateItem, each checking the checkpoint's budget (500,000 bytes of writes
    held in the table) for its own chunk only; when a later chunk passes the budget the call answers 413, but the
    earlier chunks stay stored. A reader then sees part of a task's writes (LangGraph applies them as if the task
    had written only those: the state of a resumed graph is wrong). The contract: a refused request writes
    nothing. Fix: check the whole call against the budget in the first chunk's condition (ADD the call's total to
    `wb` once, in the first UpdateItem, and none in the others), or undo the chunks already set when a later one
    is refused.
    """
    assert put(api, "rv-partial", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    # Given 400,000 bytes of writes stored by one task (4 values of 100,000 bytes, each in an item of its own)
    first = put_writes(api, "rv-partial", "c1", "task-a", [(f"ch{n}", os.urandom(100_000)) for n in range(4)])
    assert first.status == 200, first.body
    # When another task writes 41 values: 40 of 2,000 bytes (one chunk, 80,000 bytes) then one of 30,000 bytes:
    # 110,000 bytes, 10,000 more than the checkpoint has room for
    writes = [(f"w{n}", os.urandom(2_000)) for n in range(40)] + [("last", os.urandom(30_000))]
    refused = put_writes(api, "rv-partial", "c1", "task-b", writes)
    assert refused.status == 413, refused.body
    # Then none of task-b's writes is stored
    stored_tasks = {task for _, task, _, _ in writes_of(get_tuple(api, "rv-partial").data)}
    assert stored_tasks == {"task-a"}, "a put_writes refused with 413 left some of its writes stored"


# -- retries change nothing ----------------------------------------------------------------------------------


def test_retries_of_a_put_writes_do_not_use_up_the_checkpoints_room_for_writes(api: ApiDriver) -> None:
    """DEFECT: every retry of a `put_writes` adds its bytes to the checkpoint's write budget again.

    `_update_writes` sets each write with `if_not_exists` (a retry keeps the stored write) but ADDs the call's
    bytes to `wb` (and `wi`) unconditionally, so a retry that stores nothing still counts its bytes. The SDK
    retries `put_writes` on every lost answer or 503; after a few retries of a 100 KB write, the checkpoint holds
    100 KB of writes but counts 500 KB, and any other task's write to it is refused with 413. The contract: "A
    write whose (task_id, idx) is already stored is kept as it was (a retry changes nothing)"; the budget is 500,000
    bytes of pending writes held. Fix: count only the writes the UpdateItem actually adds (read `ALL_OLD`/
    `UPDATED_OLD` and correct, or condition each chunk on `attribute_not_exists` of its entries and treat a
    retry through the condition failure path only).
    """
    assert put(api, "rv-retry", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    # Given one task's write of 100,000 bytes, sent 6 times (a first try and 5 retries after lost answers)
    value = os.urandom(100_000)
    for _ in range(6):
        answer = put_writes(api, "rv-retry", "c1", "task-a", [("a", value)])
        assert answer.status == 200, answer.body
    assert len(get_tuple(api, "rv-retry").data["pending_writes"]) == 1
    # When another task writes one byte (100,001 bytes of writes in all: a fifth of the room)
    other = put_writes(api, "rv-retry", "c1", "task-b", [("b", b"x")])
    # Then it is stored
    assert other.status == 200, other.body


# -- prune keeps what the latest needs -----------------------------------------------------------------------


def test_prune_keep_latest_keeps_the_values_of_writes_that_came_before_their_checkpoint(api: ApiDriver) -> None:
    """DEFECT: `prune` `keep_latest` deletes the value items of pending writes whose checkpoint is not put yet.

    LangGraph puts each checkpoint in the background while the next step runs, so a task's writes often arrive
    before their checkpoint (docs/api.md: "they are kept for it in a writes-only item"). `_keep_latest` deletes
    every write-value item (`W#...`) that the latest checkpoints do not reference, including those a writes-only
    item references; when the checkpoint's put comes, its pending writes over 512 bytes are gone (the read skips a
    write whose item is missing), silently. The contract: "Reads never show writes without their checkpoint" and
    "a task's writes ... are kept for it"; prune keeps "the latest checkpoint of each namespace ... with its
    pending writes". Fix: in `_keep_latest`, also keep write values referenced by writes-only items (checkpoint
    items without a generation), or key them so prune can tell (they are under `W#<ns>#<checkpoint>#`: keep those
    whose checkpoint is not an older checkpoint of this life).
    """
    assert put(api, "rv-prune-early", "c1", {"a": 1}, {"a": typed(b"a")}).status == 201
    # Given a task's writes for c2 (one small, one of 2,000 bytes) that arrive before c2's put
    large = os.urandom(2_000)
    early = put_writes(api, "rv-prune-early", "c2", "task", [("a", b"small"), ("b", large)])
    assert early.status == 200, early.body
    # When the thread is pruned to its latest checkpoint (c1), and then c2 is put
    pruned = post(api, "/v1/threads:prune", {"thread_ids": ["rv-prune-early"], "strategy": "keep_latest"})
    assert pruned.status == 200, pruned.body
    assert put(api, "rv-prune-early", "c2", {"a": 2}, {"a": typed(b"a2")}, parent="c1").status == 201
    # Then c2 shows both of the task's writes
    assert writes_of(get_tuple(api, "rv-prune-early").data) == [("", "task", "a", b"small"), ("", "task", "b", large)]


# -- list ----------------------------------------------------------------------------------------------------


def test_a_list_of_every_namespace_gives_each_namespace_newest_first(api: ApiDriver) -> None:
    """Without `checkpoint_ns`, the list gives one namespace after another, each newest first (docs/api.md). The
    review found the doc said "newest first" across namespaces; the doc now states the grouping, which is what one
    Query of the thread's checkpoints reads (InMemorySaver groups by namespace too)."""
    # Given a subgraph checkpoint (namespace "sub"), then a newer root checkpoint (ids sort by time)
    assert put(api, "rv-order", "2027-001", {"a": 1}, {"a": typed(b"sub")}, ns="sub").status == 201
    assert put(api, "rv-order", "2027-003", {"a": 1}, {"a": typed(b"sub")}, ns="sub").status == 201
    assert put(api, "rv-order", "2027-002", {"a": 1}, {"a": typed(b"root")}).status == 201
    # Then the list of every namespace gives one namespace after the other (the subgraph's first), each newest
    # first
    assert ids_of(list_page(api, "rv-order")) == ["2027-003", "2027-001", "2027-002"]


def test_a_list_page_fits_lambdas_6_mb_answer(api: ApiDriver) -> None:
    """DEFECT: a list page can answer more than Lambda's 6 MB (a 500 from API Gateway / Lambda on AWS).

    A page stops early only on the bytes of its channel values and pending writes (3 MB); the checkpoint documents
    (up to 163,840 bytes each) and metadata (up to 32,768 bytes) are not counted, and a page holds up to 200
    tuples: 40 checkpoints of 160 KB answer 6.4 MB of JSON with no value at all (base64-encoded for API Gateway
    past 1 MB: 8.6 MB without gzip). The contract: "a page stops early (with a cursor) once the values it carries
    pass 3 MB" so that "every answer fits Lambda" (store docstring), and Lambda refuses a result over 6 MB. Fix:
    count each tuple's JSON size (document, metadata, values as base64, writes) towards the page's budget, and
    keep that budget under 6 MB after base64.
    """
    padding = _random_text(160_000, 1)
    for n in range(40):
        body = {
            "checkpoint": checkpoint_doc(f"c{n:03d}", {}, pad=padding),
            "metadata": {"step": n},
            "checkpoint_ns": "",
            "values": {},
        }
        answer = post(api, thread_path("rv-big-page", "/checkpoints"), body)
        assert answer.status == 201, answer.body
    # When the thread is listed with the default limit (50), as LangGraph's list does
    from baton_checkpoints.handlers.api import handler
    from tests.integration.driver import load_event

    event = load_event("list_subject_checkpoints")
    event["requestContext"]["requestId"] = "rv-big-page"
    event["headers"]["authorization"] = f"Bearer {OPERATOR_SECRET}"
    event["headers"].pop("accept-encoding", None)
    event["rawPath"] = event["requestContext"]["http"]["path"] = thread_path("rv-big-page", "/checkpoints")
    event["rawQueryString"] = ""
    event.pop("queryStringParameters", None)
    result = handler(event, None)
    # Then the function's result fits Lambda's payload limit
    assert result["statusCode"] == 200
    assert len(json.dumps(result).encode("utf-8")) <= LAMBDA_PAYLOAD_BYTES, "a list page passes Lambda's 6 MB"


# -- items over 400 KB ---------------------------------------------------------------------------------------


def test_long_channel_names_and_versions_never_make_an_item_over_400_kb_nor_a_500(api: ApiDriver, aws: Any) -> None:
    """DEFECT: a checkpoint whose channels have long names and versions makes its item pass 400 KB: writes get 500.

    Values of at most 512 bytes ride in the checkpoint's item (`iv`), within a budget of 32 KB of value bytes; the
    budget counts only the values' bytes, not the channel names and versions the map holds with each value, and the
    writes' room (`_ROOM_FOR_WRITES`: 128 KB held in the item) does not count the rest of the item either. 400
    channels of 200-character names and versions (a 163 KB checkpoint document, within its 163,840 bytes), whose
    serialized values are empty (LangGraph's `null` tag), and 32 KB of metadata make an item of about 312 KB: the
    pending writes the item then accepts take it past 400 KB (by the repo's own `sizes.item_bytes`, 442 KB here),
    and DynamoDB refuses the UpdateItem (ValidationException `Item size to update has exceeded the maximum allowed
    size`): `put_writes` answers 500 (moto refuses it too, a little later than AWS would). The contract: "No item
    ever exceeds 400 KB"; a request is answered 2xx or 4xx, never 5xx. Fix: budget what the item holds by its
    DynamoDB size (the inline map's names, versions and types, `vz`, the packed document: `sizes.value_bytes`),
    store the rest out of line, and give the writes' room what the checkpoint leaves of the 400 KB.
    """
    versions = {_random_text(200, 10 + n): _random_text(200, 1_000 + n) for n in range(400)}
    values = {channel: {"type": "null", "data": ""} for channel in versions}
    document = {"v": 4, "id": "c1", "ts": "2027-03-01T09:00:00+00:00", "channel_versions": versions}
    body = {"checkpoint": document, "metadata": {"pad": _random_text(32_000, 2)}, "checkpoint_ns": "", "values": values}
    stored = post(api, thread_path("rv-wide", "/checkpoints"), body)
    assert stored.status in (201, 413), stored.body
    if stored.status == 413:
        return  # refused whole: nothing more to prove
    # When tasks write 120 KB of small values to the checkpoint (within the 128 KB it holds itself)
    answers = [
        put_writes(api, "rv-wide", "c1", f"task-{t}", [(f"w{n}", os.urandom(500)) for n in range(40)]) for t in range(6)
    ]
    # Then no request failed with a 5xx, and no item of the thread passes 400 KB
    assert all(a.status < 500 for a in answers), [a.status for a in answers]
    largest = max(sizes.item_bytes(item) for item in thread_items(aws, "rv-wide"))
    assert largest <= sizes.MAX_ITEM_BYTES, largest


# -- keys within DynamoDB's limits ---------------------------------------------------------------------------


def test_a_long_run_id_in_metadata_never_makes_a_5xx(api: ApiDriver) -> None:
    """DEFECT: metadata whose `run_id` is longer than about 2,000 bytes makes an index key DynamoDB refuses: a 500.

    A put indexes its checkpoint under gsi1 `R#<tenant>#<agent>#<run_id>` with the run id as sent in metadata,
    which is only bounded by metadata's 32,768 bytes; DynamoDB caps a partition key (an index's too) at 2,048
    bytes. On AWS the put's UpdateItem is refused (ValidationException) and the route answers 500; moto checks
    index keys only on PutItem, so here the copy (BatchWriteItem of the checkpoint items) fails with a 500.
    The contract: metadata is "a JSON object, at most 32,768 bytes"; nothing a client sends makes a 5xx. Fix: index
    only run ids that fit (or index a digest of a long run id and compare it in full), or refuse a `run_id` over
    the limit with a 400 naming `/metadata/run_id`.
    """
    put_answer = put(api, "rv-run", "c1", {"a": 1}, {"a": typed(b"a")}, metadata={"run_id": "r" * 3_000})
    assert put_answer.status < 500, put_answer.body
    copied = post(api, thread_path("rv-run", "/copy"), {"target_thread_id": "rv-run-copy"})
    assert copied.status < 500, copied.body


# -- data round trips ----------------------------------------------------------------------------------------


def test_versions_of_every_json_number_form_round_trip(api: ApiDriver) -> None:
    """A control (passes): versions of int, float and str come back as put, each with its own value."""
    versions = {"i": 3, "f": 2.5, "s": "00000000000000000000000000000003.0123", "z": 0}
    values = {channel: typed(channel.encode() * 300) for channel in versions}
    assert put(api, "rv-versions", "c1", versions, values).status == 201
    found = get_tuple(api, "rv-versions").data
    assert found["checkpoint"]["channel_versions"] == versions
    assert values_of(found) == {channel: ("msgpack", channel.encode() * 300) for channel in versions}


def test_base64_data_is_strict(api: ApiDriver) -> None:
    """A control (passes): non-canonical base64 is refused naming the value, nothing stored."""
    data = base64.b64encode(b"ab").decode().replace("=", "")
    answer = put(api, "rv-b64", "c1", {"a": 1}, {"a": {"type": "msgpack", "data": data}})
    assert answer.status == 400


# -- values resolved through channel_versions ----------------------------------------------------------------


def test_a_channel_left_out_keeps_its_stored_value_whatever_its_size(api: ApiDriver) -> None:
    """DEFECT: a channel left out of `values` keeps its stored value only when it is large (or carried from the
    named parent): a small one is lost.

    Values over 512 bytes are stored under (thread, namespace, channel, version) and found by version from any
    checkpoint; values of at most 512 bytes live only in the items of the checkpoints that carry them, copied
    from the parent the put names. A put that keeps a channel's version but names no parent (or a parent that
    `delete-for-runs` or `prune` removed meanwhile) reads the large channel back and silently drops the small one.
    The contract (the `values` field, docs/api.md and openapi.json): "a channel of channel_versions left out keeps
    the value stored for its version". Fix: when a carried version is not found in the parent's item, look it up
    by version (keep a small value's (channel, version) findable: e.g. write its value item as well when it is
    first stored, or search the namespace's checkpoints), or refuse the put with a 400 naming the channel whose
    value is nowhere, rather than store a checkpoint that reads without it.
    """
    small, large = b"s" * 10, os.urandom(2_000)
    stored = put(api, "rv-carry", "c1", {"a": 1, "b": 1}, {"a": typed(small), "b": typed(large)})
    assert stored.status == 201, stored.body
    # When a checkpoint keeps both versions, adds c, and names no parent
    assert put(api, "rv-carry", "c2", {"a": 1, "b": 1, "c": 1}, {"c": typed(b"c")}).status == 201
    # Then it reads every channel's value, the small one too
    assert values_of(get_tuple(api, "rv-carry", "c2").data) == {
        "a": ("msgpack", small),
        "b": ("msgpack", large),
        "c": ("msgpack", b"c"),
    }


# -- the filter is strict JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"step":NaN}', '{"step":Infinity}', '{"step":1,"step":2}', '{"step":1e400}'])
def test_a_filter_that_is_not_strict_json_is_refused(api: ApiDriver, text: str) -> None:
    """DEFECT (low): the `filter` query parameter takes what strict JSON refuses, and matches nothing.

    `parse_filter` uses `json.loads` as it is, so `NaN`, `Infinity`, duplicate keys and numbers that overflow a
    double are accepted: the list answers 200 with no checkpoint (no stored metadata can hold them), where every
    body refuses them with a 400. The contract: "`filter` is a JSON object (URL-encoded)"; the rules: strict JSON,
    "no NaN/Infinity, no duplicate keys, no numbers that overflow a double", numbers beyond ±(2^53−1) are a 400
    naming them. Fix: parse the filter with the body's strict reader (`parse_constant` raising, `object_pairs_hook`
    refusing duplicates, the 2^53 bound), answering 400 naming `/filter` (in: query).
    """
    assert put(api, "rv-filter", "c1", {"a": 1}, {"a": typed(b"a")}, metadata={"step": 1}).status == 201
    answer = list_page(api, "rv-filter", filter=text)
    assert answer.status == 400, answer.body
    assert answer.error["details"]["errors"][0]["pointer"] == "/filter"


# -- BatonSaver's bodies against the handler -----------------------------------------------------------------


def test_the_savers_put_of_a_graph_configured_with_a_large_integer_is_stored(api: ApiDriver) -> None:
    """DEFECT (saver): a graph whose config holds an integer beyond 2^53 (a Discord/Twitter snowflake user id) cannot
    be checkpointed by BatonSaver: every put is a 400.

    LangGraph copies the config's `configurable` and `metadata` scalars into each checkpoint's metadata
    (`get_checkpoint_metadata`); `put_body` sends them as JSON numbers and the API refuses any number beyond
    ±(2^53−1) anywhere in a body, so the graph's first step raises `BatonError` (400) where LangGraph's in-memory,
    SQLite and Postgres savers store the checkpoint. The contract (issue 11): BatonSaver is a drop-in
    `BaseCheckpointSaver`. Fix: in `put_body`, carry metadata numbers the API cannot hold exactly in a form it can
    (e.g. as strings, noted so `tuple_from` restores the integer), or document the limitation in the saver and
    raise a clear `ValueError` before sending.
    """
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from baton_checkpoints.langgraph import threads as saver_threads

    checkpoint = empty_checkpoint()
    config = {"configurable": {"thread_id": "rv-snowflake", "checkpoint_ns": "", "user_id": 1_234_567_890_123_456_789}}
    metadata = {"source": "input", "step": -1, "parents": {}}
    body = saver_threads.put_body(config, checkpoint, metadata, {}, JsonPlusSerializer())  # type: ignore[arg-type]
    answer = post(api, thread_path("rv-snowflake", "/checkpoints"), body)
    assert answer.status == 201, answer.body


def test_the_savers_filter_for_one_checkpoint_matches_as_the_server_does(api: ApiDriver) -> None:
    """DEFECT (saver, low): `BatonSaver.list` addressed to one checkpoint id filters metadata with Python's `==`,
    the server type-exactly, so the same filter gives different answers with and without a `checkpoint_id`.

    With a `checkpoint_id` in the config the saver reads the tuple and applies the filter itself
    (`threads.metadata_matches`: `True == 1`, `{"a": 1} == {"a": True}`); without one the server applies
    `domain.threads.matches` (booleans equal only booleans). A filter `{"flag": true}` lists a checkpoint whose
    metadata holds `flag: 1` in one case and not in the other. The contract: the filter is "matched exactly
    against each checkpoint's metadata (every key equal, custom keys too), on the server". Fix: have
    `metadata_matches` use the server's rule (the same JSON equality as `domain.threads._same`), or send the
    one-checkpoint case to the server too.
    """
    from baton_checkpoints.langgraph import threads as saver_threads

    metadata = {"flag": 1, "source": "loop"}
    assert put(api, "rv-parity", "c1", {"a": 1}, {"a": typed(b"a")}, metadata=metadata).status == 201
    wanted = {"flag": True}
    on_server = ids_of(list_page(api, "rv-parity", filter=wanted)) == ["c1"]
    in_saver = saver_threads.metadata_matches(get_tuple(api, "rv-parity", "c1").data["metadata"], wanted)
    assert in_saver == on_server, f"server: {on_server}, saver: {in_saver}"
