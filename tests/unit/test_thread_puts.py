"""LangGraph thread writes, planned without AWS: what a put stores, where each new value goes, what a put_writes
keeps where."""

from __future__ import annotations

import base64
import os
import zlib
from dataclasses import dataclass
from typing import Any

import pytest

from baton_checkpoints.domain.errors import PayloadTooLarge
from baton_checkpoints.domain.thread_puts import (
    HELD_VALUE_BYTES,
    INLINE_VALUE_BYTES,
    ITEM_ROOM_BYTES,
    ITEM_VALUE_BYTES,
    MAX_CHANNEL_INDEX_BYTES,
    MAX_INLINE_VALUE_BYTES,
    Carried,
    Place,
    PutPlan,
    ThreadRef,
    index_bytes,
    place,
    plan_put,
    plan_writes,
)
from baton_checkpoints.domain.threads import MAX_CHECKPOINT_VALUE_BYTES, BlobRef, PutCheckpointRequest, PutWritesRequest

REF = ThreadRef("acme", "operator", "main")
NOW = 1_785_412_084_652
BLOB = "blob_" + "a" * 32


def _data(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def put_request(values: dict[str, Any], versions: dict[str, Any] | None = None, **changes: Any) -> PutCheckpointRequest:
    """A validated put whose `values` (channel -> bytes, or a blob id) are new at version 2, beside `versions`."""
    sent = {
        channel: {"type": "bytes", "blob_id": raw} if isinstance(raw, str) else {"type": "bytes", "data": _data(raw)}
        for channel, raw in values.items()
    }
    body = {
        "checkpoint": {"id": "c2", "channel_versions": {**(versions or {}), **dict.fromkeys(values, 2)}, "ts": "x"},
        "values": sent,
        **changes,
    }
    return PutCheckpointRequest.model_validate(body)


def packs_by_half(raw: bytes) -> bytes | None:
    """A packer whose packing of a value is half its size (None, as a packer says it did not pay, below 64 bytes)."""
    return raw[: len(raw) // 2] if len(raw) >= 64 else None


@dataclass(frozen=True)
class InBucket:
    size: int


def placed(plan: PutPlan, given: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Where each new value of `plan` goes, by channel."""
    values = given or {value.channel: value.sent for value in plan.new}
    arguments: dict[str, Any] = {"carried": Carried(), "document_bytes": 200, "pack": packs_by_half, **kwargs}
    placement = place(plan, values, arguments["carried"], arguments["document_bytes"], arguments["pack"])
    return {p.value.channel: p for p in placement.placed}


def test_a_put_is_planned_from_its_request_alone() -> None:
    request = put_request(
        {"messages": b"hello", "big": BLOB},
        versions={"turn": 1, "ratio": 1.0, "label": "v.1"},
        metadata={"run_id": "run-7", "step": 3},
        parent_checkpoint_id="c1",
        checkpoint_ns="inner",
        ttl_seconds=600,
    )
    plan = plan_put(request, REF, NOW)
    assert (plan.ref, plan.namespace, plan.checkpoint_id, plan.parent_id) == (REF, "inner", "c2", "c1")
    assert plan.document == {"id": "c2", "channel_versions": request.checkpoint.channel_versions, "ts": "x"}
    # Versions as keys: an integer, a float that is an integer and a string never name the same value.
    assert plan.versions == {"turn": "1", "ratio": "1", "label": '"v.1"', "messages": "2", "big": "2"}
    assert [(v.channel, v.version, v.type_tag, v.sent) for v in plan.new] == [
        ("messages", "2", "bytes", b"hello"),
        ("big", "2", "bytes", BlobRef(BLOB)),
    ]
    assert plan.carried == ["turn", "ratio", "label"]
    assert (plan.run_id, plan.ttl_seconds, plan.now_ms) == ("run-7", 600, NOW)


@pytest.mark.parametrize("metadata", [{}, {"run_id": ""}, {"run_id": 7}])
def test_a_checkpoint_without_a_run_id_string_is_in_no_run(metadata: dict[str, Any]) -> None:
    assert plan_put(put_request({}, metadata=metadata), REF, NOW).run_id is None


def test_each_new_value_goes_where_its_size_says() -> None:
    values = {
        "small": b"s" * INLINE_VALUE_BYTES,
        "held": os.urandom(2 * HELD_VALUE_BYTES - 200),  # packs to just under the room of the item
        "own": os.urandom(2 * HELD_VALUE_BYTES),  # the room is taken: an item of its own
        "huge": os.urandom(ITEM_VALUE_BYTES + 1),
    }
    plan = plan_put(put_request(values), REF, NOW)
    where = placed(plan)
    assert {channel: p.place for channel, p in where.items()} == {
        "small": Place.INLINE,
        "held": Place.HELD,
        "own": Place.ITEM,
        "huge": Place.BUCKET,
    }
    assert where["small"].stored == values["small"]
    assert not where["small"].packed
    assert where["held"].stored == packs_by_half(values["held"])
    assert where["held"].packed
    assert where["own"].stored == packs_by_half(values["own"])
    assert where["own"].packed
    assert where["huge"].stored is None
    assert [p.size for p in where.values()] == [len(raw) for raw in values.values()]


def test_a_value_that_does_not_pack_is_kept_as_it_is() -> None:
    raw = os.urandom(1_000)
    plan = plan_put(put_request({"mid": raw}), REF, NOW)
    held = placed(plan, pack=lambda _raw: None)["mid"]
    assert (held.place, held.stored, held.packed) == (Place.HELD, raw, False)


def test_a_large_checkpoint_leaves_less_room_for_values_it_holds() -> None:
    raw = zlib.compress(os.urandom(3_000))  # does not pack again
    plan = plan_put(put_request({"mid": raw}), REF, NOW)
    assert placed(plan, pack=lambda _raw: None)["mid"].place is Place.HELD
    crowded = ITEM_ROOM_BYTES - MAX_CHANNEL_INDEX_BYTES - 1_000
    assert placed(plan, pack=lambda _raw: None, document_bytes=crowded)["mid"].place is Place.ITEM


def test_an_uploaded_blob_stays_in_the_bucket_and_counts_nothing_held() -> None:
    plan = plan_put(put_request({"big": BLOB}), REF, NOW)
    where = placed(plan, {"big": InBucket(100_000)})["big"]
    assert (where.place, where.size, where.stored) == (Place.BUCKET, 100_000, None)


def test_small_values_past_what_the_item_keeps_inline_go_on_as_larger_ones() -> None:
    values = {f"c{n:03d}": bytes([n % 256]) * INLINE_VALUE_BYTES for n in range(80)}
    plan = plan_put(put_request(values), REF, NOW)
    where = placed(plan)
    inline = [c for c, p in where.items() if p.place is Place.INLINE]
    assert 0 < len(inline) < len(values)
    assert sum(index_bytes(c, "2", "bytes", INLINE_VALUE_BYTES) for c in inline) <= MAX_INLINE_VALUE_BYTES
    assert {p.place for c, p in where.items() if c not in inline} <= {Place.HELD, Place.ITEM}


def test_values_held_in_the_table_past_the_checkpoint_budget_are_refused_with_their_field() -> None:
    values = {f"v{n}": os.urandom(ITEM_VALUE_BYTES) for n in range(MAX_CHECKPOINT_VALUE_BYTES // ITEM_VALUE_BYTES)}
    plan = plan_put(put_request(values), REF, NOW)
    placed(plan)  # exactly at the budget with what it carries
    with pytest.raises(PayloadTooLarge) as refused:
        placed(plan, carried=Carried(answered_bytes=MAX_CHECKPOINT_VALUE_BYTES))
    assert refused.value.field == "values"
    assert refused.value.actual_bytes == MAX_CHECKPOINT_VALUE_BYTES + len(values) * ITEM_VALUE_BYTES


def test_a_checkpoint_whose_channels_outgrow_its_item_is_refused_with_its_field() -> None:
    plan = plan_put(put_request({"tiny": b"t"}), REF, NOW)
    with pytest.raises(PayloadTooLarge) as refused:
        placed(plan, carried=Carried(index_bytes=MAX_CHANNEL_INDEX_BYTES))
    assert refused.value.field == "checkpoint"
    assert refused.value.limit_bytes == MAX_CHANNEL_INDEX_BYTES


def test_a_put_writes_keeps_each_write_at_its_index() -> None:
    request = PutWritesRequest.model_validate(
        {
            "checkpoint_id": "c2",
            "checkpoint_ns": "inner",
            "task_id": "task-1",
            "task_path": "~agent",
            "writes": [
                {"channel": "messages", "type": "bytes", "data": _data(b"m")},
                {"channel": "__interrupt__", "type": "bytes", "data": _data(b"i")},
                {"channel": "big", "type": "bytes", "blob_id": BLOB},
            ],
        }
    )
    plan = plan_writes(request, REF, NOW)
    assert (plan.ref, plan.namespace, plan.checkpoint_id, plan.task_id, plan.task_path, plan.now_ms) == (
        REF,
        "inner",
        "c2",
        "task-1",
        "~agent",
        NOW,
    )
    assert [(w.index, w.channel, w.sent, w.overwrites) for w in plan.writes] == [
        (0, "messages", b"m", False),
        (-3, "__interrupt__", b"i", True),
        (2, "big", BlobRef(BLOB), False),
    ]
