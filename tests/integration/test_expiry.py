"""Expiry: a checkpoint lives until `expires_at` (last write + ttl_seconds), then counts as absent everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from baton_checkpoints.domain.clock import parse_time
from baton_checkpoints.store import items as store_items
from tests.builders import SUBJECT, lookup, save
from tests.integration.conftest import table_items
from tests.integration.driver import ApiDriver, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

START = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)


def get_by_id(api: ApiDriver, checkpoint_id: str) -> Result:
    return api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}")


def listed_ids(api: ApiDriver) -> list[str]:
    page = api.invoke("list_subject_checkpoints", path=f"/v1/subjects/{SUBJECT}/checkpoints", query={})
    assert page.status == 200
    return [item["checkpoint_id"] for item in page.data]


@pytest.mark.parametrize("idempotency_key", [None, "expiring"], ids=["plain", "idempotent"])
def test_a_checkpoint_is_readable_until_expires_at_and_absent_from_then_on(
    api: ApiDriver, idempotency_key: str | None
) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a checkpoint saved with a ttl of 60 s
        saved = save(api, idempotency_key, ttl_seconds=60)
        assert saved.status == 201
        checkpoint_id = saved.data["checkpoint_id"]
        assert parse_time(saved.data["expires_at"]) == START_MS + 60_000
        # When the clock stands one millisecond before expires_at
        traveller.shift(timedelta(seconds=60) - timedelta(milliseconds=1))
        # Then lookup, get by id and list all still see it
        assert lookup(api).status == 200
        assert get_by_id(api, checkpoint_id).status == 200
        assert listed_ids(api) == [checkpoint_id]
        # When the clock reaches expires_at
        traveller.shift(timedelta(milliseconds=1))
        # Then it is absent everywhere, with the same 404 as a missing one
        for answer in (lookup(api), get_by_id(api, checkpoint_id)):
            assert answer.status == 404
            assert answer.error == {"code": "NOT_FOUND", "message": "Resource was not found."}
        assert listed_ids(api) == []


def test_an_expired_checkpoint_cannot_be_deleted(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a checkpoint that has expired
        checkpoint_id = save(api, ttl_seconds=60).data["checkpoint_id"]
        traveller.shift(timedelta(seconds=61))
        deleted = api.invoke("delete_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}", headers={"if-match": None})
        assert deleted.status == 404


@pytest.mark.parametrize("idempotency_key", [None, "over-expired"], ids=["plain", "idempotent"])
def test_a_save_over_an_expired_checkpoint_creates_a_new_one(api: ApiDriver, idempotency_key: str | None) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a checkpoint updated to revision 2, then left to expire
        first = save(api, ttl_seconds=60, keep_revisions=3)
        assert save(api, state={"step": 2}).data["revision"] == 2
        traveller.shift(timedelta(seconds=60))
        # When it is saved over, without ttl_seconds or keep_revisions
        again = save(api, idempotency_key, state={"step": 3})
        # Then a new checkpoint is created: new id, revision 1, 201, updated false, and the defaults apply again
        assert again.status == 201
        assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
        assert again.data["revision"] == 1
        assert again.data["updated"] is False
        record = lookup(api).data
        assert record["checkpoint_id"] == again.data["checkpoint_id"]
        assert record["state"] == {"step": 3}
        assert record["ttl_seconds"] == 86_400
        assert record["keep_revisions"] == 0
        assert parse_time(record["created_at"]) == START_MS + 60_000
        # And the old id is gone
        assert get_by_id(api, first.data["checkpoint_id"]).status == 404


@pytest.mark.parametrize("idempotency_key", [None, "settings"], ids=["plain", "idempotent"])
def test_ttl_seconds_and_keep_revisions_persist_when_omitted_and_change_when_sent(
    api: ApiDriver, idempotency_key: str | None
) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a checkpoint created with ttl_seconds 120 and keep_revisions 3
        assert save(api, ttl_seconds=120, keep_revisions=3).status == 201
        # When a later save omits both
        traveller.shift(timedelta(seconds=10))
        kept = save(api, idempotency_key and idempotency_key + "-1", state={"step": 2})
        # Then both keep their values, and the expiry counts the kept ttl from this write
        record = lookup(api).data
        assert (record["ttl_seconds"], record["keep_revisions"]) == (120, 3)
        assert parse_time(kept.data["expires_at"]) == START_MS + 10_000 + 120_000
        # When a later save sends them, they change
        traveller.shift(timedelta(seconds=10))
        changed = save(
            api, idempotency_key and idempotency_key + "-2", state={"step": 3}, ttl_seconds=600, keep_revisions=0
        )
        record = lookup(api).data
        assert (record["ttl_seconds"], record["keep_revisions"]) == (600, 0)
        assert parse_time(changed.data["expires_at"]) == START_MS + 20_000 + 600_000


def test_a_checkpoint_created_without_settings_gets_the_defaults(api: ApiDriver) -> None:
    with time_machine.travel(START, tick=False):
        saved = save(api)
        # The defaults: one day, no kept revisions
        record = lookup(api).data
        assert (record["ttl_seconds"], record["keep_revisions"]) == (86_400, 0)
        assert parse_time(saved.data["expires_at"]) == START_MS + 86_400_000


@pytest.mark.parametrize("idempotency_key", [None, "moves"], ids=["plain", "idempotent"])
def test_expires_at_moves_on_every_save(api: ApiDriver, idempotency_key: str | None) -> None:
    with time_machine.travel(START, tick=False) as traveller:
        # Given a checkpoint with a ttl of 60 s
        first = save(api, ttl_seconds=60)
        expiries = [first.data["expires_at"]]
        # When it is saved again every 45 s, each time before it expires
        for step in range(1, 4):
            traveller.shift(timedelta(seconds=45))
            key = f"{idempotency_key}-{step}" if idempotency_key else None
            saved = save(api, key, state={"step": step})
            assert saved.status == 200
            expiries.append(saved.data["expires_at"])
        # Then every save moved expires_at to its own time + ttl, and the checkpoint is still alive after 135 s
        assert [parse_time(e) for e in expiries] == [START_MS + 60_000 + n * 45_000 for n in range(4)]
        assert lookup(api).data["expires_at"] == expiries[-1]
        assert lookup(api).data["revision"] == 4


def _number(attribute: dict[str, str]) -> Decimal:
    assert set(attribute) == {"N"}, attribute
    return Decimal(attribute["N"])


def test_every_checkpoint_and_idempotency_item_carries_a_whole_second_ttl_and_key_records_none(
    api: ApiDriver, services: Any
) -> None:
    start = START + timedelta(milliseconds=345)
    with time_machine.travel(start, tick=False) as traveller:
        # Given items written by every path: plain create and update, idempotent create and update, a key
        # created through the API, and a replacement of an expired checkpoint
        assert save(api, ttl_seconds=60).status == 201
        assert save(api, state={"step": 2}).status == 200
        assert save(api, "i1", kind="cursor").status == 201
        assert save(api, "i2", kind="cursor", state=2).status == 200
        assert api.invoke("create_key").status == 201
        traveller.shift(timedelta(seconds=61, milliseconds=7))
        assert save(api, state={"step": 3}).status == 201
        items = table_items(services.dynamodb)
    checkpoints = [i for i in items if i["pk"]["S"].startswith("C#")]
    records = [i for i in items if i["pk"]["S"].startswith("D#")]
    keys = [i for i in items if i["pk"]["S"].startswith("K#")]
    # Then every checkpoint and idempotency item has `ttl` in whole seconds, at or after its expiry, by under 1 s
    assert len(checkpoints) == 2
    assert len(records) == 2
    for item in checkpoints + records:
        ttl = _number(item["ttl"])
        expires_at = _number(item[store_items.EXPIRES])
        assert ttl == ttl.to_integral_value(), item["ttl"]
        assert "." not in item["ttl"]["N"]
        assert expires_at <= ttl < expires_at + 1
    # And the key records (the operator's and the new one) carry no ttl at all
    assert len(keys) == 2
    assert all("ttl" not in key for key in keys)


def test_idempotency_records_expire_24_hours_after_their_write(api: ApiDriver, services: Any) -> None:
    with time_machine.travel(START, tick=False):
        assert save(api, "day-long").status == 201
        records = [i for i in table_items(services.dynamodb) if i["pk"]["S"].startswith("D#")]
    # Then it expires exactly 24 hours after the write, and DynamoDB's TTL is set to that second
    assert len(records) == 1
    assert _number(records[0][store_items.EXPIRES]) == Decimal(START_MS) / 1000 + 86_400
    assert _number(records[0]["ttl"]) == Decimal(START_MS // 1000 + 86_400)
