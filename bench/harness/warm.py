"""Baton's own CPU on a warm container, AWS stubbed: saves and lookups of 1, 4 and 32 KB against bare botocore calls,
refusing an oversized state, thread puts.

Runs in its own process (the repository's .venv), started by `run.py`. Baton is driven only through its public
entry point, `baton_checkpoints.handlers.api.handler`, with API Gateway events; DynamoDB is stubbed by replaying the
answers moto
gave to the same requests (`replay.py`), so botocore still serializes, signs and parses every call and nothing
leaves the process. Each save is the steady state: a second save over an existing checkpoint (the API key is cached
after the first request, as in a warm container).

* Warm overhead of a 4 KB save: median CPU time (`time.process_time`) of the whole handler, and its ratio to the
  least any JSON API does with the same body, a bare `json.loads` + `hashlib.sha256`, timed alternately.
* Own CPU of a 32 KB save: the same, and a cProfile of it grouped by package: where the time goes.
* A plain save against a bare botocore UpdateItem of the same item, at 1, 4 and 32 KB: alternating with each timed
  save, a bare `update_item` on botocore's own DynamoDB client configured as Baton's (`stock_client`; botocore's
  `_make_api_call`, as every operation of the client) that SETs every attribute of the item the save writes
  (`replay.bare_update`: the item as the recorded lookup read it back after the same save; no condition, nothing
  asked back), answered by the replay of moto's answer to that very UpdateItem. Budget: the save at most
  `BUDGET_SAVE_UPDATE_RATIO` times it.
* A lookup (`GET /v1/checkpoints?subject_id=...&kind=...`) against a bare botocore GetItem of the same key, at 1, 4
  and 32 KB: the whole handler alternating with a bare `get_item` of the key Baton's lookup reads (as consistent as
  Baton's), both answered by the replay of moto's answer to the recorded lookup's GetItem. Budget:
  `BUDGET_LOOKUP_RATIO` times.
* Refusing a 3 MB state (413) against refusing a body of the same size with an invalid `kind` (400): the state's
  size must be known without compressing it.
* Own CPU of a LangGraph thread put (`POST /v1/threads/{id}/checkpoints`) of a graph step at a 6 KB and a 34 KB
  conversation (`thread_put.py`), in its steady state (a child of the checkpoint this container put last, the
  thread's head touched moments ago), against a bare botocore PutItem, on a stock client, of one item holding
  everything the put wrote, timed alternately; every timed put's DynamoDB requests are counted (`before-call`) and
  must be `THREAD_PUT_REQUESTS`, else the run fails.

Usage: `python -m bench.harness.warm --recording FILE [--saves N] [--json OUT]`.
"""

from __future__ import annotations

import argparse
import base64
import copy
import cProfile
import functools
import hashlib
import json
import os
import pstats
import re
import statistics
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from bench.billing import capacity
from bench.harness import replay, thread_put
from bench.harness.clients import canonical as clients_canonical
from bench.harness.clients import lookup_event, save_event, states_for

SAVES = 600
MIN_SAVES = 60
SECONDS_PER_SIZE = 3.0
"""Fewer saves when each costs much (a slow save is its own finding): the run stays within minutes."""
PROFILED_SAVES = 100
WARM_SIZE = 4_000
CPU_SIZE = 32_000
SMALL_SIZE = 1_000
LOOKUP_SIZES = (1_000, 4_000, 32_000)
BUDGET_WARM_MS = 1.0
BUDGET_CPU_32_MS = 2.0
BUDGET_SAVE_UPDATE_RATIO = 2.0
"""A plain save's own CPU in the handler, at most this times a bare botocore UpdateItem of the same item."""
BUDGET_LOOKUP_RATIO = 1.5
"""A lookup's own CPU in the handler, at most this times a bare botocore GetItem of the same key."""
REFUSAL_RUNS = 11
BUDGET_REFUSAL_RATIO = 1.5
BUDGET_THREAD_PUT_RATIO = 2.0
"""A LangGraph thread put's own CPU in the handler, at most this times a bare botocore PutItem of the same item."""
THREAD_PUT_REQUESTS = {6_000: ("UpdateItem",), 34_000: ("BatchWriteItem", "UpdateItem")}
"""The DynamoDB requests of a graph step's put in a warm container (head touched, parent stored by it), asserted for
every timed put: at 6 KB the checkpoint's UpdateItem alone (the conversation rides in its item, up to 8 KB stored);
at 34 KB the value's own item first (BatchWriteItem), then the checkpoint's."""
KEY_READ = "GetItem of the API key"
"""How the request counter names a read of the API key (its 60-s cache lapsed), apart from the measured requests."""


def _cpu_us(fn: Callable[..., Any]) -> float:
    """CPU µs of `fn()` (`...`: a lambda binding a loop's variable as a default argument, called with none)."""
    started = time.process_time_ns()
    fn()
    return (time.process_time_ns() - started) / 1000


def _renewed(value: Any) -> Any:
    """`value` made anew, its strings and bytes too (`copy.deepcopy` shares those: they are immutable)."""
    if isinstance(value, dict):
        return {_renewed(key): _renewed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_renewed(item) for item in value)
    if isinstance(value, str) and len(value) > 1:
        return value[:1] + value[1:]  # (a new object: slicing and joining copy)
    if isinstance(value, bytes) and len(value) > 1:
        return value[:1] + value[1:]
    return copy.deepcopy(value)


def _fresh(call: functools.partial[Any]) -> functools.partial[Any]:
    """`call` (a botocore call: client, operation, parameters) with its parameters made anew (`_renewed`).

    Every timed call gets its input made just before it, outside the timer: Lambda's runtime hands a handler the
    event it has just parsed, and a caller hands botocore the parameters it has just built, so a real call finds its
    input in the processor's caches. Inputs made hundreds of calls ahead were read cold, and lookup answers kept
    until the end made each request write to memory no earlier one had freed: together they put about 0.05 ms on a
    32 KB lookup that no Lambda pays (its request's own reads and writes then evict the codec's dictionary, whose
    inflating of the state took 60 µs instead of 30)."""
    *head, params = call.args  # (the client, the operation, then its parameters)
    return functools.partial(call.func, *head, _renewed(params))


def _fresh_floor(call: functools.partial[Any]) -> functools.partial[Any]:
    """A thread put's floor (`thread_put_floor`) with its event and requests made anew (`_fresh`)."""
    return functools.partial(call.func, *_renewed(call.args))


def _all_of(calls: list[functools.partial[Any]]) -> Callable[[], list[Any]]:
    """One call making each of `calls` in turn."""
    return lambda: [call() for call in calls]


def bare_save(body: bytes) -> str:
    """The least a JSON API does with a body it stores by hash: parse it and hash it."""
    json.loads(body)
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class SaveFigures:
    """The handler's CPU time on a steady-state save of one state size, AWS stubbed."""

    state_bytes: int
    body_bytes: int
    saves: int
    median_ms: float
    p90_ms: float
    bare_median_ms: float
    calls_per_save: dict[str, float]
    call_median_ms: float
    """The save's own DynamoDB request made alone on Baton's client (botocore serializes, signs and parses it;
    replayed as everywhere here): the part of the save that is botocore's, whatever Baton does."""
    profile: list[tuple[str, float]]
    """(package or module, CPU ms per save) from cProfile, largest first (cProfile's own overhead inflates all)."""
    update_item_median_ms: float = 0.0
    """A bare UpdateItem of the item the save writes, on botocore's own client (`stock_client`), timed in the same
    alternation
    (`replay.bare_update`; 0.0 in figures written before it was measured)."""
    item_bytes: int = 0
    """That item, by DynamoDB's rules."""
    floor_ms: float = 0.0
    """The save's floor (`save_floor`), timed in the same alternation: what any save that keeps the contract and
    the stored form must spend, with none of Baton's pipeline (0.0 in figures written before it was measured)."""

    @property
    def floor_ratio(self) -> float:
        """The floor over the bare UpdateItem: the least ratio a save keeping the contract and the stored form
        reaches (0.0 when not measured)."""
        return self.floor_ms / self.update_item_median_ms if self.update_item_median_ms else 0.0

    @property
    def ratio(self) -> float:
        """The save over a bare parse + hash of the same body."""
        return self.median_ms / self.bare_median_ms

    @property
    def beside_call_ms(self) -> float:
        """What the save costs beyond its DynamoDB request: powertools, pydantic, Baton's parse, plan and codec."""
        return self.median_ms - self.call_median_ms

    @property
    def update_ratio(self) -> float:
        """The save over the bare UpdateItem of the same item (the judged figure; 0.0 when not measured)."""
        return self.median_ms / self.update_item_median_ms if self.update_item_median_ms else 0.0


@dataclass(frozen=True)
class LookupFigures:
    """The handler's CPU time on a lookup of the latest state of one size, AWS stubbed, against a bare botocore
    GetItem of the same key timed alternately."""

    state_bytes: int
    item_bytes: int
    """The item the lookup reads, by DynamoDB's rules."""
    body_bytes: int
    """The lookup's answer (its JSON body)."""
    lookups: int
    median_ms: float
    p90_ms: float
    get_item_median_ms: float
    """A bare GetItem of the same key on botocore's own client (`stock_client`; it serializes, signs and parses it;
    replayed)."""
    calls_per_lookup: dict[str, float]
    profile: list[tuple[str, float]]
    call_median_ms: float = 0.0
    """The lookup's own GetItem made alone on Baton's client (0.0 in figures written before it was measured)."""
    floor_ms: float = 0.0
    """The lookup's floor (`lookup_floor`), timed in the same alternation (0.0 in figures written before it was
    measured)."""

    @property
    def floor_ratio(self) -> float:
        """The floor over the bare GetItem: the least ratio a lookup of this design reaches (0.0 when not
        measured)."""
        return self.floor_ms / self.get_item_median_ms if self.floor_ms else 0.0

    @property
    def ratio(self) -> float:
        """The lookup over the bare GetItem."""
        return self.median_ms / self.get_item_median_ms

    @property
    def beside_get_ms(self) -> float:
        """What the lookup costs beyond its own GetItem (the bare one where that was not measured)."""
        return self.median_ms - (self.call_median_ms or self.get_item_median_ms)


@dataclass(frozen=True)
class ThreadPutFigures:
    """The handler's CPU time on a LangGraph graph step's put (`POST /v1/threads/{id}/checkpoints`) in its steady
    state, AWS stubbed, against a bare botocore PutItem of the same item timed alternately."""

    size: int
    """Bytes of the conversation (canonical JSON) at the step (`thread_put.SIZES`)."""
    messages_bytes: int
    """Bytes of its `messages` value as the saver sends it (msgpack, before base64)."""
    body_bytes: int
    item_bytes: int
    """The baseline's item, by DynamoDB's rules: everything the put wrote, in one item."""
    puts: int
    median_ms: float
    p90_ms: float
    put_item_median_ms: float
    """A bare PutItem of that item on botocore's own client (`stock_client`; it serializes, signs and parses it;
    replayed)."""
    requests: list[str]
    """The DynamoDB requests each timed put made (`before-call`), asserted equal to `THREAD_PUT_REQUESTS`."""
    key_reads: int
    """Timed puts that also read the API key (its 60-s cache lapsed), beside those requests."""
    requests_alone_ms: float
    """The put's own requests made again alone, one after the other, on Baton's client."""
    profile: list[tuple[str, float]]
    floor_ms: float = 0.0
    """The put's floor (`thread_put_floor`), timed in the same alternation: what any put that keeps the contract and
    Baton's stored form must spend, none of Baton's pipeline (0.0 in figures written before it was measured)."""

    @property
    def ratio(self) -> float:
        """The put over the bare PutItem."""
        return self.median_ms / self.put_item_median_ms

    @property
    def beside_requests_ms(self) -> float:
        """What the put costs beyond its own DynamoDB requests."""
        return self.median_ms - self.requests_alone_ms

    @property
    def floor_ratio(self) -> float:
        """The floor over the bare PutItem: the least ratio a put keeping the contract and the stored form reaches."""
        return self.floor_ms / self.put_item_median_ms


@dataclass(frozen=True)
class RefusalFigures:
    """Refusing an oversized state (413) against refusing an invalid body of the same size (400)."""

    body_bytes: int
    runs: int
    oversized_ms: float
    invalid_ms: float

    @property
    def ratio(self) -> float:
        """Refusing the oversized state over refusing the invalid body."""
        return self.oversized_ms / self.invalid_ms


class Harness:
    """Baton's api handler in this process, every DynamoDB call answered by a replay of recorded answers."""

    def __init__(self, recording: replay.Recording) -> None:
        import botocore.handlers

        self.recording = recording
        self.secret: str = recording["secret"]
        requests = recording["requests"]
        # The first recorded request read the API key (GetItem): later ones find it cached.
        self.key_read = [c for c in requests[f"{replay.COLD_SIZE}/1"] if c["operation"] == "GetItem"][:1]
        self.stub = replay.Replay(answers=self.key_read)
        self.requests: list[str] = []
        """Every DynamoDB request Baton's client was asked to make (`before-call`), in order."""
        botocore.handlers.BUILTIN_HANDLERS.append(("before-call.dynamodb", self._count))
        botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", self.stub))
        os.environ["BATON_TABLE_NAME"] = recording["table"]
        os.environ.pop("BATON_AWS_ENDPOINT_URL", None)
        from baton_checkpoints.handlers.api import handler

        self.handler = handler
        self.count = 0

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        key_read = (
            model.name == "GetItem"
            and bool(self.key_read)
            and replay._text(params.get("body")) == self.key_read[0]["request"]
        )
        self.requests.append(KEY_READ if key_read else replay.named(model.name, params.get("body")))

    def answer_as_recorded(self, name: str) -> None:
        """Answer DynamoDB as it answered the recorded request `name` (the API key's read, as always)."""
        self.stub.answer(self.recording["requests"][name])

    def lookup(self, size: int) -> dict[str, Any]:
        """A fresh lookup event of the `size` state's subject (whose recorded lookup the replay answers with)."""
        self.count += 1
        return lookup_event(self.secret, replay.subject(size), f"warm-{self.count}")

    def stored(self, size: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """Baton's DynamoDB client, the parameters of its lookup's GetItem of the `size` state, and the item that
        GetItem reads (the item as the recorded second save of that size left it), in botocore's form."""
        import botocore.client

        # A take of the tenant's rate-limit share, when one falls on a lookup, is answered as the saves' are: by the
        # answer of an UpdateItem (the second save's), which reads as a full bucket.
        self.answer_as_recorded(f"{size}/2")
        self.answer_as_recorded(f"{size}/read")
        with replay.made_calls() as made:
            self.handle(self.lookup(size), (200,))
        client, _, params = next(call for call in reversed(made) if call[1] == "GetItem")
        original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]
        item: dict[str, Any] = original(client, "GetItem", copy.deepcopy(params))["Item"]
        return client, params, item

    def event(self, state: dict[str, Any], body: str | None = None, size: int = CPU_SIZE) -> dict[str, Any]:
        """A fresh save event (Lambda hands each invocation its own), to the subject of the recorded saves of
        `size`."""
        self.count += 1
        event = save_event(self.secret, replay.subject(size), state, f"warm-{self.count}")
        if body is not None:
            event["body"] = body
        return event

    def last_request(
        self, event: dict[str, Any], copies: int, operation: str | None = None
    ) -> list[functools.partial[Any]]:
        """Handle `event` once more, and return `copies` calls that each make its last DynamoDB request (of
        `operation`, when given) again, alone, on the same client (botocore's `_make_api_call` is where every
        operation of a client passes)."""
        import botocore.client

        seen: list[tuple[Any, str, dict[str, Any]]] = []
        original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

        def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
            seen.append((client, operation, params))
            return original(client, operation, params)

        botocore.client.BaseClient._make_api_call = spy  # type: ignore[attr-defined]
        try:
            self.handle(event, (200, 201))
        finally:
            botocore.client.BaseClient._make_api_call = original  # type: ignore[attr-defined]
        found = [call for call in seen if operation in (None, call[1])]
        if not found:
            raise RuntimeError(f"the request made no {operation or 'DynamoDB'} request: {[c[1] for c in seen]}")
        client, made, params = found[-1]
        return [functools.partial(original, client, made, copy.deepcopy(params)) for _ in range(copies)]

    def handle(self, event: dict[str, Any], expected: tuple[int, ...]) -> None:
        """Handle `event`; fail unless the status is expected."""
        answer = self.handler(event, None)
        if answer["statusCode"] not in expected:
            raise RuntimeError(f"warm request answered {answer['statusCode']}: {str(answer.get('body'))[:500]}")


def stock_client(client: Any) -> Any:
    """botocore's own DynamoDB client, configured as `client` (Baton's) is, for the bare calls the budgets divide by:
    made by a session of botocore as anyone has it, without what Baton's sessions change (their data loader and
    `store/item_wire.py`'s serializer and parser), so that a bare call is botocore's cost, not Baton's. The replay
    answers it as it answers Baton's (its handlers are botocore's built-in ones, on every session)."""
    import botocore.session

    return botocore.session.get_session().create_client(
        "dynamodb",
        region_name=client.meta.region_name,
        endpoint_url=client.meta.endpoint_url,
        config=client.meta.config,
    )


def measure_save(harness: Harness, size: int, saves: int, profile: bool) -> SaveFigures:
    """Median CPU of `saves` steady-state saves of a `size` state, alternating with a bare parse + hash of the same
    body and a bare botocore UpdateItem of the item the save writes, on botocore's own client (`stock_client`,
    `replay.bare_update`)."""
    import botocore.client

    client, read, item = harness.stored(size)
    stock = stock_client(client)
    save_answers = harness.recording["requests"][f"{size}/2"]
    update_answers = harness.recording["requests"][f"{size}/update-item"]
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]
    update = replay.bare_update(harness.recording["table"], read["Key"], item)
    harness.stub.answer(update_answers)
    if "Attributes" in original(stock, "UpdateItem", copy.deepcopy(update)):
        raise RuntimeError(f"the bare UpdateItem of the {size}-byte item was not answered by its own recording")
    made: list[str] = []

    def ours(event: dict[str, Any]) -> float:
        harness.stub.answer(save_answers)
        before = len(harness.stub.calls)
        spent = _cpu_us(lambda: harness.handle(event, (200, 201)))
        made.extend(harness.stub.calls[before:])
        return spent

    def theirs(call: Callable[[], Any]) -> float:
        harness.stub.answer(update_answers)
        return _cpu_us(call)

    bare_update = functools.partial(original, stock, "UpdateItem", update)  # (each call made with `_fresh`)

    state = states_for(size)[1]
    template = harness.event(state, size=size)  # (the subject of the item the bare UpdateItem writes)
    body = template["body"].encode("utf-8")
    warm_up = [copy.deepcopy(template) for _ in range(30)]
    started = time.process_time()
    for event in warm_up:
        # warm caches (pydantic validators, the allocator, the key cache) before timing
        ours(event)
        bare_save(body)
        theirs(_fresh(bare_update))
    each = (time.process_time() - started) / len(warm_up)
    saves = max(MIN_SAVES, min(saves, int(SECONDS_PER_SIZE / each)))
    harness.stub.answer(save_answers)
    requests_alone = harness.last_request(copy.deepcopy(template), saves)
    made.clear()
    mine: list[float] = []
    bare: list[float] = []
    plain: list[float] = []
    alone: list[float] = []
    least: list[float] = []
    floor = save_floor()

    def own(request: Callable[[], Any]) -> float:
        harness.stub.answer(save_answers)
        return _cpu_us(request)

    for i in range(saves):
        # Alternate which goes first, so that neither always runs on caches the other just warmed; Baton's own
        # UpdateItem alone is timed in the same alternation as the bare one, so that both meet the same caches.
        # Each input is made just before its call (`_fresh`, `_renewed`).
        if i % 2:
            mine.append(ours(_renewed(template)))
            bare.append(_cpu_us(lambda: bare_save(body)))
            plain.append(theirs(_fresh(bare_update)))
            alone.append(own(_fresh(requests_alone[i])))
            least.append(own(functools.partial(floor, _renewed(template["body"]), _fresh(requests_alone[i]))))
        else:
            least.append(own(functools.partial(floor, _renewed(template["body"]), _fresh(requests_alone[i]))))
            alone.append(own(_fresh(requests_alone[i])))
            plain.append(theirs(_fresh(bare_update)))
            bare.append(_cpu_us(lambda: bare_save(body)))
            mine.append(ours(_renewed(template)))
    calls: dict[str, float] = defaultdict(float)
    for operation in made:
        calls[operation] += 1 / saves
    return SaveFigures(
        state_bytes=len(json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()),
        body_bytes=len(body),
        saves=saves,
        median_ms=statistics.median(mine) / 1000,
        p90_ms=statistics.quantiles(mine, n=10)[-1] / 1000,
        bare_median_ms=statistics.median(bare) / 1000,
        calls_per_save=dict(calls),
        call_median_ms=statistics.median(alone) / 1000,
        profile=profile_save(harness, template, max(20, min(PROFILED_SAVES, int(1.0 / each)))) if profile else [],
        update_item_median_ms=statistics.median(plain) / 1000,
        item_bytes=capacity.item_bytes(item),
        floor_ms=statistics.median(least) / 1000,
    )


def measure_lookup(harness: Harness, size: int, lookups: int, profile: bool) -> LookupFigures:
    """Median CPU of `lookups` lookups of the `size` state, alternating with a bare botocore GetItem of the same
    key on botocore's own client (`stock_client`); both answered by the replay of the recorded lookup's GetItem."""
    import botocore.client

    client, read, item = harness.stored(size)  # (also answers GetItem as the recorded lookup was answered)
    stock = stock_client(client)
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]
    get = {"TableName": read["TableName"], "Key": read["Key"], "ConsistentRead": bool(read.get("ConsistentRead"))}
    made: list[str] = []
    answers: list[dict[str, Any]] = []

    def ours(event: dict[str, Any]) -> float:
        answers.clear()  # the answer before goes first: Lambda's runtime lets each answer go once it is sent
        before = len(harness.stub.calls)
        started = time.process_time_ns()
        answer = harness.handler(event, None)
        spent = (time.process_time_ns() - started) / 1000
        made.extend(harness.stub.calls[before:])
        if answer["statusCode"] != 200:
            raise RuntimeError(f"warm lookup answered {answer['statusCode']}: {answer.get('body')!s:.500}")
        answers.append(answer)  # (only the last is read)
        return spent

    bare_get = functools.partial(original, stock, "GetItem", get)  # (each call made with `_fresh`)

    warm_up = [harness.lookup(size) for _ in range(30)]
    started = time.process_time()
    for event in warm_up:
        ours(event)
        _fresh(bare_get)()
    each = (time.process_time() - started) / len(warm_up)
    lookups = max(MIN_SAVES, min(lookups, int(SECONDS_PER_SIZE / each)))
    requests_alone = harness.last_request(harness.lookup(size), lookups, "GetItem")
    made.clear()
    answers.clear()
    mine: list[float] = []
    bare: list[float] = []
    alone: list[float] = []
    least: list[float] = []
    floor = lookup_floor()
    now = int(time.time() * 1000)
    for i in range(lookups):
        # Alternate which goes first, so that neither always runs on caches the other just warmed; Baton's own
        # GetItem alone is timed in the same alternation as the bare one. Each input is made just before its call
        # (`_fresh`, `_renewed`).
        if i % 2:
            mine.append(ours(_renewed(harness.lookup(size))))
            bare.append(_cpu_us(_fresh(bare_get)))
            alone.append(_cpu_us(_fresh(requests_alone[i])))
            least.append(_cpu_us(functools.partial(floor, _fresh(requests_alone[i]), now)))
        else:
            least.append(_cpu_us(functools.partial(floor, _fresh(requests_alone[i]), now)))
            alone.append(_cpu_us(_fresh(requests_alone[i])))
            bare.append(_cpu_us(_fresh(bare_get)))
            mine.append(ours(_renewed(harness.lookup(size))))
    calls: dict[str, float] = defaultdict(float)
    for operation in made:
        calls[operation] += 1 / lookups
    profiled: list[tuple[str, float]] = []
    if profile:
        count = max(20, min(PROFILED_SAVES, int(1.0 / each)))
        profiled = profile_requests(harness, [harness.lookup(size) for _ in range(count)], (200,))
    return LookupFigures(
        state_bytes=len(clients_canonical(states_for(size)[1])),
        item_bytes=capacity.item_bytes(item),
        body_bytes=len(str(answers[-1].get("body") or "").encode()),
        lookups=lookups,
        median_ms=statistics.median(mine) / 1000,
        p90_ms=statistics.quantiles(mine, n=10)[-1] / 1000,
        get_item_median_ms=statistics.median(bare) / 1000,
        calls_per_lookup=dict(calls),
        profile=profiled,
        call_median_ms=statistics.median(alone) / 1000,
        floor_ms=statistics.median(least) / 1000,
    )


_BUILTIN = re.compile(r"<(?:built-in method |method '[^']+' of ')([A-Za-z0-9_.]+)")


def _where(filename: str, function: str) -> str:
    """The package (or Baton layer) a profiled function belongs to."""
    if filename == "~":
        found = _BUILTIN.search(function)
        name = found.group(1) if found else "builtins"
        return "C: " + name.split(".")[0].lstrip("_")
    path = filename.replace("\\", "/")
    if "/functions/baton_checkpoints/" in path:
        part = path.split("/functions/baton_checkpoints/", 1)[1]
        return "baton_checkpoints." + part.split("/", 1)[0].removesuffix(".py")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/bench/" in path:
        return "bench harness"
    return "stdlib: " + Path(path).stem


def profile_save(harness: Harness, template: dict[str, Any], saves: int) -> list[tuple[str, float]]:
    """Where a save's CPU goes: cProfile's own time per function, summed by package, per save."""
    return profile_requests(harness, [copy.deepcopy(template) for _ in range(saves)], (200, 201))


def profile_requests(
    harness: Harness, events: list[dict[str, Any]], expected: tuple[int, ...]
) -> list[tuple[str, float]]:
    """Where a request's CPU goes: cProfile's own time per function over `events`, summed by package, per event."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for event in events:
        harness.handle(event, expected)
    profiler.disable()
    return by_package(profiler, len(events))


def by_package(profiler: cProfile.Profile, calls: int) -> list[tuple[str, float]]:
    """A finished cProfile's own time per function, summed by package (`_where`), in ms per one of the `calls`
    it profiled: the 14 largest, largest first."""
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, function), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        totals[_where(filename, function)] += row[2]  # own time
    ranked = sorted(totals.items(), key=lambda item: item[1], reverse=True)
    return [(name, seconds * 1000 / calls) for name, seconds in ranked[:14]]


def shifted(call: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """A recorded answer moved in time as DynamoDB would have moved it: every number of its `Attributes` that is a
    time near the request's `:now` (epoch milliseconds, or seconds for the TTL attribute) moved by `now_ms` less that
    `:now`. A thread head's answer says when the head expires: replayed as recorded, minutes later, it would be
    stale, and every put would touch the head again."""
    then = int(json.loads(call["request"])["ExpressionAttributeValues"][":now"]["N"])
    answer = json.loads(base64.b64decode(call["body"]))
    near = 30 * 86_400
    for value in answer.get("Attributes", {}).values():
        if "N" not in value:
            continue
        number = int(value["N"])
        if abs(number - then) < near * 1000:
            value["N"] = str(number + now_ms - then)
        elif abs(number - then // 1000) < near:
            value["N"] = str(number + (now_ms - then) // 1000)
    body = json.dumps(answer, separators=(",", ":")).encode()
    headers = {**call["headers"], "content-length": str(len(body))}
    if "x-amz-crc32" in headers:
        headers["x-amz-crc32"] = str(zlib.crc32(body))
    return {**call, "headers": headers, "body": base64.b64encode(body).decode("ascii")}


class ThreadPuts:
    """Graph-step puts of one size through the harness, each chain on a thread of its own (`thread_put.Chain`):
    the root answered by the recorded root's answers (its head's touch moved to now, `shifted`), the children by
    the recorded child's and the bare PutItem's."""

    def __init__(self, harness: Harness, size: int) -> None:
        self.harness = harness
        self.size = size
        self.step = thread_put.graph_step(size)
        self.expected = THREAD_PUT_REQUESTS[size]
        recorded = harness.recording["requests"]
        root = recorded[replay.thread_name(size, "root")]
        # The root's answers: its head's touch (the UpdateItem answered with Attributes) for every UpdateItem of it
        # (the checkpoint's write ignores what it is answered), its BatchWriteItem as recorded.
        self.touch = next(c for c in root if c["operation"] == "UpdateItem" and b"Attributes" in _body(c))
        self.root_answers = [c for c in root if c["operation"] != "UpdateItem"]
        self.step_answers = recorded[replay.thread_name(size, "step")] + recorded[replay.thread_name(size, "put-item")]
        self.chains = 0
        self.key_reads = 0
        self.takes = 0

    def chain(self) -> thread_put.Chain:
        """A new thread with its root put: its head touched now, the root stored for its first child to carry."""
        self.chains += 1
        chain = thread_put.Chain(self.harness.secret, self.step, f"warm-thread-{self.size}-{self.chains}")
        event = chain.root()
        self.harness.stub.answer([*self.root_answers, shifted(self.touch, int(time.time() * 1000))])
        self.harness.handle(event, (201,))
        self.harness.stub.answer(self.step_answers)
        return chain

    def put(self, event: dict[str, Any]) -> float:
        """Handle one child's put: its CPU time (µs); fails unless it made exactly the expected requests."""
        before = len(self.harness.requests)
        spent = _cpu_us(lambda: self.harness.handle(event, (201,)))
        made = self.harness.requests[before:]
        if KEY_READ in made:
            self.key_reads += 1
            made.remove(KEY_READ)
        if replay.TAKE in made:
            self.takes += 1  # the tenant's rate-limit share, once per 20 puts at most (judged with the saves)
            made.remove(replay.TAKE)
        if replay.USAGE in made:
            made.remove(replay.USAGE)  # the tenant's usage counts, once per 100 requests (judged with the saves)
        if tuple(made) != self.expected:
            raise RuntimeError(
                f"a {self.size // 1000} KB graph step's put made {made}, not {list(self.expected)}: Baton's steady "
                "state changed (update THREAD_PUT_REQUESTS and the report) or the harness left it"
            )
        return spent


def _body(call: dict[str, Any]) -> bytes:
    return base64.b64decode(call["body"])


def save_floor() -> Callable[[str, Callable[[], Any]], None]:
    """What any plain save of this design must do to keep Baton's contract and its stored form, with none of Baton's
    pipeline (routing, the key check, the rate limiter, planning, the answer, the log line): parse the body strictly
    (duplicate keys, depth, numbers: the contract's JSON), validate it with its pydantic model, write the state's
    canonical form and hash it, pack it as the save stores it, and make the save's own conditional UpdateItem on
    Baton's client (`request`, as the save made it). Its ratio to the bare UpdateItem is the least any
    implementation of this design reaches."""
    from baton_checkpoints.domain.canonical import canonicalize, parse_document
    from baton_checkpoints.domain.models import SaveCheckpointRequest
    from baton_checkpoints.store import items

    def floor(body: str, request: Callable[[], Any]) -> None:
        document = parse_document(body)
        SaveCheckpointRequest.model_validate(document.value)
        items.pack_state(canonicalize(document.value["state"], "/state", document.plain).text)
        request()

    return floor


def lookup_floor() -> Callable[[Callable[[], Any], int], None]:
    """What any lookup of this design must do, with none of Baton's pipeline (routing, the key check, the rate
    limiter, the usage count, validating the query, the log line): make the lookup's own GetItem on Baton's client
    (`request`, as the lookup made it), read the checkpoint from its item (the state unpacked), and write the answer
    as the lookup does (the record's JSON, the state spliced in; at `now_ms`)."""
    from baton_checkpoints.api.jsontext import record_json
    from baton_checkpoints.api.records import record_summary_json
    from baton_checkpoints.store import items

    def floor(request: Callable[[], Any], now_ms: int) -> None:
        found = items.checkpoint_from_item(request()["Item"])
        if found.state_text is None or found.resources:
            raise RuntimeError("the lookup's floor reads a checkpoint with its state and no resources")
        # (`services` signs a resource's download link: a checkpoint without resources needs none)
        record_json(record_summary_json(found, cast(Any, None), now_ms), found.state_text)

    return floor


def thread_put_floor(client: Any) -> Callable[[dict[str, Any], list[tuple[str, dict[str, Any]]]], None]:
    """What any put of a graph step must do to keep Baton's contract and its stored form, with none of Baton's
    pipeline (routing, the key check, planning, the answer, the log line): parse the body strictly (duplicate keys,
    depth, numbers: the contract's JSON), validate it with its pydantic model, decode the new values, pack them and
    the checkpoint as the put stores them, and make the put's own DynamoDB requests (`requests`: operations and
    parameters as the put made them) on Baton's client (`client`). Its ratio to the bare PutItem is the least any
    implementation of this design reaches."""
    import botocore.client

    from baton_checkpoints.domain.canonical import parse_document
    from baton_checkpoints.domain.threads import PutCheckpointRequest
    from baton_checkpoints.store import codec
    from baton_checkpoints.store.threads.items import packed_document

    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def floor(event: dict[str, Any], requests: list[tuple[str, dict[str, Any]]]) -> None:
        body = PutCheckpointRequest.model_validate(parse_document(event["body"]).value)
        for value in body.values.values():
            raw = value.raw()
            if isinstance(raw, bytes):
                codec.encode_value(raw)
        packed_document(body.checkpoint.compact_document(), body.metadata)
        for operation, params in requests:
            original(client, operation, params)

    return floor


def measure_thread_put(harness: Harness, size: int, puts: int, profile: bool) -> ThreadPutFigures:
    """Median CPU of `puts` steady-state graph-step puts of a `size` conversation, alternating with a bare botocore
    PutItem of one item holding everything the put wrote, on botocore's own client (`stock_client`)."""
    import botocore.client

    runs = ThreadPuts(harness, size)
    chain = runs.chain()
    warm_up = [chain.child() for _ in range(30)]
    started = time.process_time()
    for event in warm_up:  # warm caches (pydantic validators, the allocator, the codec) before timing
        runs.put(event)
    each = (time.process_time() - started) / len(warm_up)
    puts = max(MIN_SAVES, min(puts, int(SECONDS_PER_SIZE / each)))
    # A fresh thread for the timed puts (its head's touch a moment ago), whose first child shows what a put sends.
    chain = runs.chain()
    with replay.made_calls() as made:
        runs.put(chain.child())
    client = made[-1][0]
    item = thread_put.one_item([(operation, params) for _, operation, params in made])
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]
    stock = stock_client(client)
    # (each call made with `_fresh`)
    put_item = functools.partial(original, stock, "PutItem", {"TableName": harness.recording["table"], "Item": item})
    alone = [functools.partial(original, client, operation, params) for _, operation, params in made]
    events = [chain.child() for _ in range(puts)]
    body_bytes = len(events[0]["body"].encode())
    floor = thread_put_floor(client)
    requests = [(operation, params) for _, operation, params in made]
    ours: list[float] = []
    bare: list[float] = []
    least: list[float] = []
    for i, event in enumerate(events):
        # Alternate which goes first, so that neither always runs on caches the other just warmed. Each input is
        # made just before its call (`_fresh`, `_renewed`: the children are made ahead, in order, and made anew here).
        if i % 2:
            ours.append(runs.put(_renewed(event)))
            bare.append(_cpu_us(_fresh(put_item)))
            least.append(_cpu_us(_fresh_floor(functools.partial(floor, event, requests))))
        else:
            least.append(_cpu_us(_fresh_floor(functools.partial(floor, event, requests))))
            bare.append(_cpu_us(_fresh(put_item)))
            ours.append(runs.put(_renewed(event)))
    requests_alone = [_cpu_us(_all_of([_fresh(call) for call in alone])) for _ in range(puts)]
    profiled: list[tuple[str, float]] = []
    if profile:
        chain = runs.chain()
        profiled = profile_requests(harness, [chain.child() for _ in range(max(20, min(100, int(1.0 / each))))], (201,))
    return ThreadPutFigures(
        size=size,
        messages_bytes=runs.step.messages_bytes,
        body_bytes=body_bytes,
        item_bytes=capacity.item_bytes(item),
        puts=puts,
        median_ms=statistics.median(ours) / 1000,
        p90_ms=statistics.quantiles(ours, n=10)[-1] / 1000,
        put_item_median_ms=statistics.median(bare) / 1000,
        requests=list(runs.expected),
        key_reads=runs.key_reads,
        requests_alone_ms=statistics.median(requests_alone) / 1000,
        profile=profiled,
        floor_ms=statistics.median(least) / 1000,
    )


def measure_refusal(harness: Harness, runs: int = REFUSAL_RUNS) -> RefusalFigures:
    """Median handler CPU time of the two refusals, alternating."""
    texts = replay.refusal_bodies()
    harness.answer_as_recorded("oversized")
    oversized = texts["oversized"]
    bodies = {"oversized": (oversized, (413,)), "invalid": (texts["invalid"], (400,))}
    for body, expected in bodies.values():
        harness.handle(harness.event({}, body), expected)
    times: dict[str, list[float]] = {"oversized": [], "invalid": []}
    for i in range(runs):
        for name in ("oversized", "invalid") if i % 2 else ("invalid", "oversized"):
            body, expected = bodies[name]
            event = harness.event({}, body)
            times[name].append(_cpu_us(lambda e=event, x=expected: harness.handle(e, x)))
    return RefusalFigures(
        body_bytes=len(oversized),
        runs=runs,
        oversized_ms=statistics.median(times["oversized"]) / 1000,
        invalid_ms=statistics.median(times["invalid"]) / 1000,
    )


@dataclass(frozen=True)
class WarmFigures:
    """Everything this module measures."""

    warm: SaveFigures
    cpu: SaveFigures
    refusal: RefusalFigures
    threads: list[ThreadPutFigures]
    small: SaveFigures | None = None
    """The save of a 1 KB state (None in figures written before it was measured)."""
    lookups: list[LookupFigures] = field(default_factory=list)

    @property
    def saves(self) -> list[SaveFigures]:
        """Every measured save, smallest state first."""
        return [save for save in (self.small, self.warm, self.cpu) if save is not None]


def measure(recording: replay.Recording, saves: int = SAVES) -> WarmFigures:
    """Measure every figure in this process."""
    sys.stdout = sys.stderr  # Baton's access log is written (its cost counts) but not into our answer
    harness = Harness(recording)
    return WarmFigures(
        warm=measure_save(harness, WARM_SIZE, saves, profile=True),
        cpu=measure_save(harness, CPU_SIZE, saves, profile=True),
        refusal=measure_refusal(harness),
        threads=[measure_thread_put(harness, size, saves, profile=True) for size in thread_put.SIZES],
        small=measure_save(harness, SMALL_SIZE, saves, profile=True),
        lookups=[measure_lookup(harness, size, saves, profile=True) for size in LOOKUP_SIZES],
    )


def from_json(document: dict[str, Any]) -> WarmFigures:
    """Figures written by `main --json`."""

    def save(values: dict[str, Any]) -> SaveFigures:
        return SaveFigures(**{**values, "profile": [tuple(p) for p in values["profile"]]})

    def thread(values: dict[str, Any]) -> ThreadPutFigures:
        return ThreadPutFigures(**{**values, "profile": [tuple(p) for p in values["profile"]]})

    def lookup(values: dict[str, Any]) -> LookupFigures:
        return LookupFigures(**{**values, "profile": [tuple(p) for p in values["profile"]]})

    return WarmFigures(
        save(document["warm"]),
        save(document["cpu"]),
        RefusalFigures(**document["refusal"]),
        [thread(values) for values in document.get("threads", [])],
        save(document["small"]) if document.get("small") else None,
        [lookup(values) for values in document.get("lookups", [])],
    )


def summary(figures: WarmFigures) -> str:
    """The figures as plain text, for the terminal."""
    lines = []
    for what, save, budget in (("warm save", figures.warm, BUDGET_WARM_MS), ("own CPU", figures.cpu, BUDGET_CPU_32_MS)):
        calls = ", ".join(f"{n:g} {op}" for op, n in save.calls_per_save.items())
        verdict = "ok" if save.median_ms <= budget else "OVER BUDGET"
        lines.append(
            f"{what}: {save.state_bytes} B state, whole handler, AWS stubbed: median {save.median_ms:.3f} ms CPU "
            f"(p90 {save.p90_ms:.3f}), budget {budget:g} ms: {verdict}; {save.ratio:.1f}x a bare json.loads + "
            f"sha256 ({save.bare_median_ms * 1000:.0f} us); calls per save: {calls}; the DynamoDB request alone "
            f"{save.call_median_ms:.3f} ms, everything else {save.beside_call_ms:.3f} ms"
        )
        lines.extend(f"    {ms:7.3f} ms  {name}" for name, ms in save.profile[:8])
    for save in figures.saves:
        if not save.update_item_median_ms:
            continue
        verdict = "ok" if save.update_ratio <= BUDGET_SAVE_UPDATE_RATIO else "OVER BUDGET"
        lines.append(
            f"plain save of a {save.state_bytes} B state against a bare UpdateItem of the same item "
            f"({save.item_bytes} B): {save.median_ms:.3f} ms vs {save.update_item_median_ms:.3f} ms CPU, "
            f"{save.update_ratio:.2f}x, budget <= {BUDGET_SAVE_UPDATE_RATIO:g}x: {verdict}; its own UpdateItem alone "
            f"{save.call_median_ms:.3f} ms"
        )
    for lookup in figures.lookups:
        verdict = "ok" if lookup.ratio <= BUDGET_LOOKUP_RATIO else "OVER BUDGET"
        calls = ", ".join(f"{n:g} {op}" for op, n in lookup.calls_per_lookup.items())
        lines.append(
            f"lookup of a {lookup.state_bytes} B state against a bare GetItem of the same key ({lookup.item_bytes} B "
            f"item): {lookup.median_ms:.3f} ms vs {lookup.get_item_median_ms:.3f} ms CPU, {lookup.ratio:.2f}x, "
            f"budget <= {BUDGET_LOOKUP_RATIO:g}x: {verdict}; calls per lookup: {calls}; its own GetItem alone "
            f"{lookup.call_median_ms:.3f} ms"
        )
        lines.extend(f"    {ms:7.3f} ms  {name}" for name, ms in lookup.profile[:8])
    refusal = figures.refusal
    verdict = "ok" if refusal.ratio <= BUDGET_REFUSAL_RATIO else "OVER BUDGET"
    lines.append(
        f"refusing an oversized state: {refusal.oversized_ms:.1f} ms vs {refusal.invalid_ms:.1f} ms for an invalid "
        f"body of the same size, {refusal.ratio:.2f}x, budget <= {BUDGET_REFUSAL_RATIO:g}x: {verdict}"
    )
    for put in figures.threads:
        verdict = "ok" if put.ratio <= BUDGET_THREAD_PUT_RATIO else "OVER BUDGET"
        lines.append(
            f"LangGraph thread put, {put.size // 1000} KB conversation ({put.messages_bytes} B msgpack), whole "
            f"handler, AWS stubbed: median {put.median_ms:.3f} ms CPU (p90 {put.p90_ms:.3f}, {put.puts} puts), a bare "
            f"PutItem of the same item ({put.item_bytes} B) {put.put_item_median_ms:.3f} ms: {put.ratio:.2f}x, budget "
            f"<= {BUDGET_THREAD_PUT_RATIO:g}x: {verdict}; requests per put (asserted): {' + '.join(put.requests)}"
            f"{f' ({put.key_reads} also read the API key)' if put.key_reads else ''}; its requests alone "
            f"{put.requests_alone_ms:.3f} ms, everything else {put.beside_requests_ms:.3f} ms"
        )
        lines.extend(f"    {ms:7.3f} ms  {name}" for name, ms in put.profile[:8])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and write the figures as JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--recording", type=Path, required=True, help="answers recorded by run.py (replay.py)")
    parser.add_argument("--saves", type=int, default=SAVES, help=f"timed saves per size (default {SAVES})")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    out = sys.stdout
    figures = measure(replay.load(args.recording), args.saves)
    print(summary(figures), file=out)
    if args.json:
        args.json.write_text(json.dumps(asdict(figures)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
