"""Warm overhead of a save, and the bytes a checkpoint occupies in DynamoDB.

Warm overhead: what Baton itself spends on one save of a ~4 KB conversation state once the container is warm,
AWS calls stubbed. The budgeted figure is the domain path every save takes: the strict parse of the body
(`parse_strict`), the request model (`SaveCheckpointRequest`), and `plan_save` (canonical JSON, SHA-256, the
compression decision). It is reported as an absolute median and as a ratio to the least any JSON API does with
the same body, a bare `json.loads` + `hashlib.sha256`; the two are timed alternately in one loop so that machine
noise falls on both. For context, the whole api handler is also timed on the same body with its DynamoDB client
replaced by a stub (routing, powertools validation, the gate, the response): no budget, but it shows what the
domain figure leaves out, and the stub counts the DynamoDB calls of a warm save.

Item size: a 32 KB conversation state from `bench/states.py` (fixed seed) is turned into the item the store
writes (`build_next` then `to_record_item`), and the item's size is computed the way DynamoDB bills it.

Usage: `python bench/warm.py [--saves N]`.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

from baton.domain.canonical import canonicalize, parse_document, parse_strict
from baton.domain.checkpoints import SavePlan, build_next, encode_state, plan_save
from baton.domain.models import SaveCheckpointRequest
from baton.store import schema
from baton.store.attributes import Item, to_item
from baton.store.checkpoints import to_record_item
from states import conversation_state

REPO = Path(__file__).resolve().parent.parent
SAVE_EVENT = REPO / "events" / "save_checkpoint.json"

WARM_STATE_BYTES = 4_000
ITEM_STATE_BYTES = 32_000
SEED = 7
SAVES = 2_000
HANDLER_SAVES = 500
BUDGET_MEDIAN_MS = 1.0
BUDGET_ITEM_RATIO = 1 / 3

# A fixed clock and identity: the figures must not depend on when or by whom the benchmark runs.
NOW_MS = 1_785_412_084_652
TENANT = "acme"
AGENT = "support-bot"
REQUEST_ID = "bench-request-0001"
CHECKPOINT_ID = "ckpt_" + "0" * 32
TABLE = "baton-bench"
SECRET = "btn_bench_secret_0001"

# DynamoDB bills every item and index entry 100 bytes on top of its attributes (storage, not writes).
STORAGE_OVERHEAD_BYTES = 100
WRITE_UNIT_BYTES = 1024


def save_body(state_bytes: int = WARM_STATE_BYTES, seed: int = SEED) -> bytes:
    """A save request body as a client sends it (ordinary `json.dumps`, not canonical)."""
    body = {
        "subject_id": "user_4711",
        "kind": "conversation",
        "agent_id": AGENT,
        "state": conversation_state(target_bytes=state_bytes, seed=seed),
        "ttl_seconds": 86_400,
        "format": "openai.chat.v1",
        "source": {"host": "bench-host", "model": "claude-sonnet-4"},
    }
    return json.dumps(body).encode("utf-8")


def domain_save(body: bytes) -> SavePlan:
    """Baton's own work on a save body before the store: strict parse, request model, plan."""
    document = parse_document(body)
    request = SaveCheckpointRequest.model_validate(document.value)
    return plan_save(request, TENANT, request.agent_id or AGENT, REQUEST_ID, NOW_MS, document.plain)


def bare_save(body: bytes) -> str:
    """The least a JSON API does with a body it stores by hash: parse it and hash it."""
    json.loads(body)
    return hashlib.sha256(body).hexdigest()


def _time_us(fn: Callable[[], Any]) -> float:
    started = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - started) / 1000


def _median_us(fn: Callable[[], Any], runs: int) -> float:
    for _ in range(min(50, runs)):
        fn()
    return statistics.median(_time_us(fn) for _ in range(runs))


# -- the whole handler, DynamoDB stubbed --------------------------------------------------------------------------


class StubDynamoDB:
    """Stands in for the DynamoDB client on a save: keeps put items, answers GetItem and UpdateItem, counts calls.

    UpdateItem answers with a fixed item (the one the save would produce), as `ReturnValues=ALL_NEW` would.
    """

    def __init__(self, updated_item: Item) -> None:
        self.items: dict[tuple[str, str], Item] = {}
        self.updated_item = updated_item
        self.calls: Counter[str] = Counter()

    def put_item(self, **request: Any) -> dict[str, Any]:
        """Store the item."""
        self.calls["PutItem"] += 1
        item = request["Item"]
        self.items[(item[schema.PK]["S"], item[schema.SK]["S"])] = item
        return {}

    def get_item(self, **request: Any) -> dict[str, Any]:
        """The stored item at the key, if any."""
        self.calls["GetItem"] += 1
        key = request["Key"]
        found = self.items.get((key[schema.PK]["S"], key[schema.SK]["S"]))
        return {"Item": found} if found is not None else {}

    def update_item(self, **request: Any) -> dict[str, Any]:
        """The item after the update."""
        self.calls["UpdateItem"] += 1
        return {"Attributes": self.updated_item}


@contextmanager
def stubbed_services(stub: StubDynamoDB) -> Iterator[None]:
    """The api handler's services wired to `stub`, with one API key that may write checkpoints."""
    from baton.api import services as wiring
    from baton.api.auth import Authenticator
    from baton.domain.access import KeyRecord, hash_secret
    from baton.store.checkpoints import CheckpointStore
    from baton.store.keys import KeyStore

    def build(config: Any) -> Any:
        keys = KeyStore(stub, TABLE)
        return wiring.Services(
            settings=config,
            dynamodb=stub,
            checkpoints=CheckpointStore(stub, TABLE),
            keys=keys,
            authenticator=Authenticator(keys),
        )

    # `services()` builds through this module global at first use: patching it swaps the client everywhere.
    with mock.patch.dict(os.environ, {"BATON_TABLE_NAME": TABLE}), mock.patch.object(wiring, "build_services", build):
        wiring.reset()
        try:
            key = KeyRecord("key_" + "b" * 32, hash_secret(SECRET), TENANT, AGENT, frozenset({"*"}), NOW_MS - 60_000)
            wiring.services().keys.put(key)
            yield
        finally:
            wiring.reset()


def _quiet_access_log() -> None:
    """Every request writes its access line (its cost belongs to the figures), into the void, not the console."""
    from baton.observability import logger

    sink = logger().registered_handler
    if isinstance(sink, logging.StreamHandler):
        sink.setStream(open(os.devnull, "w"))  # noqa: SIM115 (kept for the process's life, like Lambda's stdout)


def save_event(body: bytes) -> dict[str, Any]:
    """The sample save event with this body, our key, and no Idempotency-Key (the plain save path)."""
    event = json.loads(SAVE_EVENT.read_text(encoding="utf-8"))
    event["body"] = body.decode("utf-8")
    event["headers"]["authorization"] = f"Bearer {SECRET}"
    event["headers"].pop("idempotency-key", None)
    return event


@dataclass(frozen=True)
class HandlerFigures:
    """The whole handler on a warm container, DynamoDB stubbed."""

    median_us: float
    calls_per_save: dict[str, float]


def handler_save(body: bytes, runs: int = HANDLER_SAVES) -> HandlerFigures:
    """Median time of the api handler on a save of `body`, and the DynamoDB calls a warm save makes."""
    from baton.handlers.api import handler

    _quiet_access_log()
    item = to_item(to_record_item(build_next(None, domain_save(body), CHECKPOINT_ID)))
    stub = StubDynamoDB(item)
    event = save_event(body)
    with stubbed_services(stub):
        answer = handler(copy.deepcopy(event), None)  # the first request reads the key; later ones hit the cache
        if answer["statusCode"] != 201:
            raise RuntimeError(f"the stubbed save answered {answer['statusCode']}: {answer.get('body')}")
        stub.calls.clear()
        # A fresh copy per call, as Lambda hands each invocation its own event (copied outside the timing).
        events = [copy.deepcopy(event) for _ in range(runs)]
        times = [_time_us(lambda e=e: handler(e, None)) for e in events]
    return HandlerFigures(
        median_us=statistics.median(times),
        calls_per_save={name: count / runs for name, count in sorted(stub.calls.items())},
    )


# -- warm overhead ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WarmFigures:
    """Warm overhead of a save."""

    state_bytes: int
    body_bytes: int
    saves: int
    median_ms: float
    p90_ms: float
    bare_median_ms: float
    stages_us: dict[str, float]
    handler: HandlerFigures | None

    @property
    def ratio(self) -> float:
        """Baton's domain save over a bare parse + hash of the same body."""
        return self.median_ms / self.bare_median_ms

    @property
    def within_budget(self) -> bool:
        """True when the median is at most the budget."""
        return self.median_ms <= BUDGET_MEDIAN_MS


def measure_warm(saves: int = SAVES, with_handler: bool = True) -> WarmFigures:
    """Time `saves` domain saves and bare parses of the same ~4 KB body, alternately."""
    body = save_body()
    plan = domain_save(body)
    for _ in range(50):  # warm caches (pydantic validators, rfc8785, the allocator) before timing
        domain_save(body)
        bare_save(body)
    ours: list[float] = []
    bare: list[float] = []
    for i in range(saves):
        # Alternate which goes first, so that neither always runs on caches the other just warmed.
        if i % 2:
            ours.append(_time_us(lambda: domain_save(body)))
            bare.append(_time_us(lambda: bare_save(body)))
        else:
            bare.append(_time_us(lambda: bare_save(body)))
            ours.append(_time_us(lambda: domain_save(body)))
    parsed = parse_document(body)
    document = parsed.value
    request = SaveCheckpointRequest.model_validate(document)
    canonical = canonicalize(request.state, at="/state", plain=parsed.plain)
    stage_runs = max(200, saves // 4)
    stages = {
        "parse_strict": _median_us(lambda: parse_strict(body), stage_runs),
        "SaveCheckpointRequest": _median_us(lambda: SaveCheckpointRequest.model_validate(document), stage_runs),
        "canonical JSON + SHA-256": _median_us(
            lambda: canonicalize(request.state, at="/state", plain=parsed.plain), stage_runs
        ),
        "compression decision (brotli)": _median_us(lambda: encode_state(canonical), stage_runs),
    }
    return WarmFigures(
        state_bytes=plan.state.canonical.size,
        body_bytes=len(body),
        saves=saves,
        median_ms=statistics.median(ours) / 1000,
        p90_ms=statistics.quantiles(ours, n=10)[-1] / 1000,
        bare_median_ms=statistics.median(bare) / 1000,
        stages_us=stages,
        handler=handler_save(body) if with_handler else None,
    )


# -- refusing an oversized state ------------------------------------------------------------------------------------

REFUSAL_STATE_BYTES = 3_010_000
REFUSAL_RUNS = 11
BUDGET_REFUSAL_RATIO = 1.5


@dataclass(frozen=True)
class RefusalFigures:
    """The whole handler refusing an oversized state (413), against refusing a body of the same size whose `kind`
    is invalid (400): the state's size must be known without compressing it."""

    body_bytes: int
    runs: int
    oversized_ms: float
    invalid_ms: float

    @property
    def ratio(self) -> float:
        """Refusing the oversized state over refusing the invalid body."""
        return self.oversized_ms / self.invalid_ms

    @property
    def within_budget(self) -> bool:
        """True when the ratio is at most the budget."""
        return self.ratio <= BUDGET_REFUSAL_RATIO


def measure_refusal(runs: int = REFUSAL_RUNS) -> RefusalFigures:
    """Median handler time of the two refusals, alternating, DynamoDB stubbed."""
    from baton.handlers.api import handler

    _quiet_access_log()
    state = conversation_state(target_bytes=REFUSAL_STATE_BYTES, seed=SEED)
    oversized = json.dumps({"subject_id": "big", "kind": "conversation", "state": state}).encode("utf-8")
    invalid = json.dumps({"subject_id": "big", "kind": "conversatio", "state": state}).encode("utf-8")
    stub = StubDynamoDB({})
    with stubbed_services(stub):
        events = {name: save_event(body) for name, body in (("oversized", oversized), ("invalid", invalid))}
        for name, expected in (("oversized", 413), ("invalid", 400)):
            status = handler(copy.deepcopy(events[name]), None)["statusCode"]
            if status != expected:
                raise RuntimeError(f"the {name} body answered {status}, not {expected}")
        times: dict[str, list[float]] = {"oversized": [], "invalid": []}
        for i in range(runs):
            for name in ("oversized", "invalid") if i % 2 else ("invalid", "oversized"):
                event = copy.deepcopy(events[name])
                times[name].append(_time_us(lambda e=event: handler(e, None)))
    return RefusalFigures(
        body_bytes=len(oversized),
        runs=runs,
        oversized_ms=statistics.median(times["oversized"]) / 1000,
        invalid_ms=statistics.median(times["invalid"]) / 1000,
    )


# -- item size ----------------------------------------------------------------------------------------------------


def number_bytes(text: str) -> int:
    """DynamoDB's size of a number: one byte per two significant digits, plus one."""
    digits = len(Decimal(text).normalize().as_tuple().digits)
    return math.ceil(digits / 2) + 1


def attribute_bytes(value: dict[str, Any]) -> int:
    """Size of one typed attribute value, as DynamoDB bills it (without the attribute's name)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind == "N":
        return number_bytes(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + attribute_bytes(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + attribute_bytes(v) for k, v in raw.items())
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in raw)
    if kind == "NS":
        return sum(number_bytes(v) for v in raw)
    if kind == "BS":
        return sum(len(v) for v in raw)
    raise ValueError(f"unknown attribute type {kind}")


def item_bytes(item: Item) -> int:
    """Size of an item as DynamoDB bills it: each attribute's UTF-8 name plus its value."""
    return sum(len(name.encode("utf-8")) + attribute_bytes(value) for name, value in item.items())


def index_entry_bytes(item: Item, index: schema.Index) -> int | None:
    """Size of the item's entry in a secondary index (keys plus projected attributes), None if not in it."""
    if index.partition_key not in item or index.sort_key not in item:
        return None  # sparse index: an item without the index's keys has no entry
    names = {schema.PK, schema.SK, index.partition_key, index.sort_key, *index.non_key_attributes}
    return item_bytes({k: v for k, v in item.items() if k in names}) + STORAGE_OVERHEAD_BYTES


@dataclass(frozen=True)
class ItemFigures:
    """The stored size of a checkpoint of a 32 KB conversation state."""

    canonical_bytes: int
    item_bytes: int
    state_attribute: str
    state_attribute_bytes: int
    index_entries: dict[str, int]

    @property
    def ratio(self) -> float:
        """Item bytes over canonical JSON bytes."""
        return self.item_bytes / self.canonical_bytes

    @property
    def within_budget(self) -> bool:
        """True when the item is at most a third of the canonical JSON."""
        return self.ratio <= BUDGET_ITEM_RATIO

    @property
    def write_units(self) -> int:
        """Write units of writing the item itself (indexes come on top)."""
        return math.ceil(self.item_bytes / WRITE_UNIT_BYTES)


def measure_item(state_bytes: int = ITEM_STATE_BYTES, seed: int = SEED) -> ItemFigures:
    """Build the item a first save of the state writes and size it."""
    plan = domain_save(save_body(state_bytes, seed))
    item = to_item(to_record_item(build_next(None, plan, CHECKPOINT_ID)))
    state_attribute = "state_z" if "state_z" in item else "state"
    entries = {}
    for index in (*schema.TABLE.global_indexes, *schema.TABLE.local_indexes):
        size = index_entry_bytes(item, index)
        if size is not None:
            entries[index.name] = size
    return ItemFigures(
        canonical_bytes=plan.state.canonical.size,
        item_bytes=item_bytes(item),
        state_attribute=state_attribute,
        state_attribute_bytes=len(state_attribute) + attribute_bytes(item[state_attribute]),
        index_entries=entries,
    )


def summary(warm: WarmFigures, item: ItemFigures) -> str:
    """The figures as plain text, for the terminal."""
    lines = [
        f"warm save: {warm.state_bytes} B state in a {warm.body_bytes} B body, median of {warm.saves}",
        f"  parse_strict + SaveCheckpointRequest + plan_save: {warm.median_ms * 1000:.0f} us "
        f"(p90 {warm.p90_ms * 1000:.0f} us), budget {BUDGET_MEDIAN_MS * 1000:.0f} us: "
        f"{'ok' if warm.within_budget else 'OVER BUDGET'}",
        f"  bare json.loads + sha256: {warm.bare_median_ms * 1000:.0f} us; ratio {warm.ratio:.1f}x",
        *(f"    {stage:30} {us:6.0f} us" for stage, us in warm.stages_us.items()),
    ]
    if warm.handler is not None:
        calls = ", ".join(f"{n:g} {op}" for op, n in warm.handler.calls_per_save.items())
        lines.append(f"  whole api handler, DynamoDB stubbed: {warm.handler.median_us:.0f} us; calls per save: {calls}")
    lines += [
        f"item size: {item.canonical_bytes} B canonical state -> {item.item_bytes} B item "
        f"({item.state_attribute} {item.state_attribute_bytes} B), ratio {item.ratio:.3f}, budget <= 0.333: "
        f"{'ok' if item.within_budget else 'OVER BUDGET'}",
        f"  {item.write_units} write units for the item; index entries "
        + ", ".join(f"{name} {size} B" for name, size in item.index_entries.items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--saves", type=int, default=SAVES, help=f"timed saves (default {SAVES})")
    args = parser.parse_args(argv)
    print(summary(measure_warm(args.saves), measure_item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
