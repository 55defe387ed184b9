"""What a save costs, counted by DynamoDB's rules on the items the engine holds (deterministic, not timed), and, on
DynamoDB Local, what DynamoDB itself says the save consumed (`ReturnConsumedCapacity`): the two must agree.

A plain save costs at most the item's own write units + 1, index maintenance included: a save over an existing
checkpoint moves no index entry, and the first save of a checkpoint adds only its id entry in gsi1. The plain
save (one UpdateItem) and the idempotent save (a Put in a transaction) leave the same attributes.
"""

from __future__ import annotations

from typing import Any

import pytest
from bench.harness.states import conversation_state
from msgspec.structs import asdict

from baton_checkpoints.domain.checkpoints import (
    CheckpointKey,
    IdempotencyClaim,
    SavePlan,
    plan_save,
    request_fingerprint,
)
from baton_checkpoints.domain.models import SaveCheckpointRequest
from baton_checkpoints.store import items, layout, schema, sizes
from tests.integration.conftest import TABLE, measured
from tests.integration.driver import CallCounter, CapacityMeter
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

NOW_MS = 1_785_412_084_652
STATE_SIZES = (1_000, 4_000, 32_000)


def _plan(state: Any, request_id: str, subject: str = "cost", now_ms: int = NOW_MS, **fields: Any) -> SavePlan:
    request = SaveCheckpointRequest.model_validate(
        {"subject_id": subject, "kind": "conversation", "state": state, **fields}
    )
    return plan_save(request, "acme", "operator", request_id, now_ms)


def _raw(aws: Any, subject: str = "cost") -> dict[str, Any] | None:
    item: dict[str, Any] | None = aws.get_item(
        TableName=TABLE, Key=layout.checkpoint_key("acme", subject, "operator", "conversation"), ConsistentRead=True
    ).get("Item")
    return item


@pytest.mark.parametrize("size", STATE_SIZES)
def test_a_plain_save_costs_at_most_the_items_own_units_plus_one(
    aws: Any, services: Any, capacity: CapacityMeter, engine: str, size: int
) -> None:
    # Given a realistic conversation state of the size
    first, second = conversation_state(size, seed=11), conversation_state(size, seed=12)
    # When it is saved once (create) and again over itself (the steady state of an agent)
    services.checkpoints.save(_plan(first, "req-1"))
    created, create_consumed = _raw(aws), capacity.write_units
    capacity.reset()
    services.checkpoints.save(_plan(second, "req-2", now_ms=NOW_MS + 1000))
    updated, update_consumed = _raw(aws), capacity.write_units
    assert created is not None
    assert updated is not None
    # Then the create costs the item + its one gsi1 entry, and the update the item alone
    create_units = sizes.write_units(None, created)
    update_units = sizes.write_units(created, updated)
    assert create_units <= sizes.units(sizes.item_bytes(created)) + 1
    assert update_units == sizes.units(max(sizes.item_bytes(created), sizes.item_bytes(updated)))
    assert all(sizes.index_write_units(created, updated, index) == 0 for index in schema.TABLE.global_indexes)
    if measured(engine):
        # And DynamoDB bills exactly that: the create's gsi1 entry included, the update's none
        assert (create_consumed, update_consumed) == (create_units, update_units)
        assert capacity.index_units(schema.GSI1) == 0


def test_a_small_state_fits_one_write_unit(aws: Any, services: Any, capacity: CapacityMeter, engine: str) -> None:
    # Given a 1 KB conversation state (what an agent's first steps save)
    services.checkpoints.save(_plan(conversation_state(1_000, seed=11), "req-1"))
    capacity.reset()
    services.checkpoints.save(_plan(conversation_state(1_000, seed=12), "req-2", now_ms=NOW_MS + 1000))
    # Then its item, request ring and all, is under 1 KB: a save over it costs one write unit
    item = _raw(aws)
    assert item is not None
    assert sizes.item_bytes(item) <= sizes.WRITE_UNIT_BYTES
    if measured(engine):
        assert capacity.write_units == 1


def test_the_plain_and_the_idempotent_save_leave_the_same_attributes(aws: Any, services: Any) -> None:
    # Given the same two saves made once plainly and once with idempotency keys, on two subjects
    fingerprint = request_fingerprint("POST", "/v1/checkpoints", {"n": 1})
    for step, state in enumerate(({"n": 1, "text": "x" * 2000}, {"n": 2}), start=1):
        services.checkpoints.save(_plan(state, f"plain-{step}", "plain", NOW_MS + step, format="f/1", ttl_seconds=90))
        claim = IdempotencyClaim(key=f"k-{step}", agent_id="operator", fingerprint=fingerprint)
        services.checkpoints.save(
            _plan(state, f"idem-{step}", "idem", NOW_MS + step, format="f/1", ttl_seconds=90), claim
        )
        plain, idempotent = _raw(aws, "plain"), _raw(aws, "idem")
        assert plain is not None
        assert idempotent is not None
        # Then both items hold the same attributes, of the same types, and read back as the same checkpoint
        assert {k: next(iter(v)) for k, v in plain.items()} == {k: next(iter(v)) for k, v in idempotent.items()}
        a, b = items.checkpoint_from_item(plain), items.checkpoint_from_item(idempotent)
        differing = {"checkpoint_id", "subject_id", "recent_requests"}
        assert {k: v for k, v in asdict(a).items() if k not in differing} == {
            k: v for k, v in asdict(b).items() if k not in differing
        }
    key = CheckpointKey("acme", "plain", "operator", "conversation")
    assert services.checkpoints.get(key, NOW_MS + 10).revision == 2


def _revision_raw(aws: Any, checkpoint_id: str, revision: int) -> dict[str, Any] | None:
    key = layout.key(
        layout.checkpoint_pk("acme", "cost"), layout.revision_sk("operator", "conversation", checkpoint_id, revision)
    )
    item: dict[str, Any] | None = aws.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
    return item


HISTORY_SAVE_UNITS = {1_000: 2, 4_000: 4, 32_000: 20}
"""docs/api.md ("History"): a history save's write units for 1, 4 and 32 KB states."""


@pytest.mark.parametrize("size", STATE_SIZES)
def test_a_history_save_costs_the_plain_save_and_the_revision_it_keeps(
    aws: Any, services: Any, counter: CallCounter, capacity: CapacityMeter, engine: str, size: int
) -> None:
    # Given a checkpoint keeping 3 revisions, saved enough times that each save now keeps one and moves the window
    now = NOW_MS
    for step in range(1, 6):
        services.checkpoints.save(
            _plan(conversation_state(size, seed=step), f"req-{step}", now_ms=now, keep_revisions=3)
        )
        now += 1000
    before = _raw(aws)
    assert before is not None
    checkpoint_id = items.checkpoint_from_item(before, with_state=False).checkpoint_id
    assert _revision_raw(aws, checkpoint_id, 5) is None
    # When it is saved once more
    counter.reset()
    capacity.reset()
    services.checkpoints.save(_plan(conversation_state(size, seed=9), "req-9", now_ms=now))
    after, kept = _raw(aws), _revision_raw(aws, checkpoint_id, 5)
    assert after is not None
    assert kept is not None
    # Then it wrote exactly two items, each with a PutItem at DynamoDB's standard rate (no transaction, which bills
    # twice; no delete: the reaper deletes what left the window): the revision it keeps, a new item holding the
    # superseded item's attributes and not more, and the checkpoint, as a plain save would; no index entry moves
    assert dict(counter.calls) == {"BatchGetItem": 1, "PutItem": 2}
    checkpoint_units = sizes.write_units(before, after)
    assert checkpoint_units == sizes.units(max(sizes.item_bytes(before), sizes.item_bytes(after)))
    kept_units = sizes.write_units(None, kept)
    assert kept_units == sizes.units(sizes.item_bytes(kept))
    assert sizes.item_bytes(kept) < sizes.item_bytes(before)  # the revision drops the ring, the lease, the index key
    total = checkpoint_units + kept_units
    record(
        f"history save write units ({engine})",  # figures, not case counts: one line per engine
        **{
            f"state_{size}_total": total,
            f"state_{size}_plain_budget": sizes.units(sizes.item_bytes(after)) + 1,
            f"state_{size}_kept": kept_units,
        },
    )
    # And so within the plain save's budget (the item's own units + 1) plus the revision it keeps
    assert total <= (sizes.units(sizes.item_bytes(after)) + 1) + kept_units
    # And the figures docs/api.md gives, which DynamoDB bills exactly
    assert total == HISTORY_SAVE_UNITS[size]
    if measured(engine):
        assert capacity.write_units == total
