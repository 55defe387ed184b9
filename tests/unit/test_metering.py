"""What a stream record counts for its tenant (`store/metering.py`), without AWS: each item's footprint, a record's
difference, a batch's tally, and the request token that makes a batch sent again count once."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.store import items, metering, tenants, thread_names
from baton_checkpoints.store.metering import Footprint, change_of, footprint, request_token, tally, tenant_of
from baton_checkpoints.store.sizes import item_bytes
from tests import proof_counts
from tests.unit.hypothesis_profiles import examples

SUITE = "metering (unit)"
CHECKPOINT = ("C#acme#ticket-1", "C#worker#task_state")


def checkpoint(text: str = '{"step":1}', **more: Any) -> dict[str, Any]:
    pk, sk = CHECKPOINT
    return {"pk": {"S": pk}, "sk": {"S": sk}, "s": {"S": text}, "rev": {"N": "1"}, **more}


def record(old: dict[str, Any] | None, new: dict[str, Any] | None, keys: tuple[str, str] = CHECKPOINT) -> Any:
    change: dict[str, Any] = {"Keys": {"pk": {"S": keys[0]}, "sk": {"S": keys[1]}}, "SequenceNumber": "100"}
    if old is not None:
        change["OldImage"] = old
    if new is not None:
        change["NewImage"] = new
    name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return {"eventID": "e1", "eventName": name, "dynamodb": change}


def test_each_kind_of_item_stores_its_size_and_what_it_stands_for() -> None:
    item = checkpoint()
    assert footprint(*CHECKPOINT, item) == Footprint(item_bytes(item), checkpoints=1)
    spilled = checkpoint(so={"S": "blobs/acme/states/x"}, n={"N": "500000"})
    assert footprint(*CHECKPOINT, spilled).stored_bytes == item_bytes(spilled) + 500_000
    revision = checkpoint(so={"S": "blobs/acme/states/y"}, n={"N": "42"})
    assert footprint("C#acme#ticket-1", "V#worker#task_state#ckpt_1#0000000000000001", revision) == Footprint(
        item_bytes(revision) + 42
    )
    blob = {"pk": {"S": "B#acme#blob_1"}, "sk": {"S": "B"}, "n": {"N": "2048"}}
    assert footprint("B#acme#blob_1", "B", blob) == Footprint(item_bytes(blob) + 2048)
    head = {"pk": {"S": "H#acme#worker#t1"}, "sk": {"S": "H"}, "g": {"S": "abc"}}
    assert footprint("H#acme#worker#t1", "H", head) == Footprint(item_bytes(head), threads=1)
    deleted = {**head, "fl": {"N": "5"}, "dl": {"N": "5"}}
    assert footprint("H#acme#worker#t1", "H", deleted) == Footprint(item_bytes(deleted), threads=0)
    started_again = {**head, "fl": {"N": "5"}}  # a put after the delete touched the head: `dl` is gone
    assert footprint("H#acme#worker#t1", "H", started_again).threads == 1
    value = {"pk": {"S": "H#acme#worker#t1"}, "sk": {"S": "V#x"}, "so": {"S": "k"}, "n": {"N": "9"}}
    assert footprint("H#acme#worker#t1", "V#x", value).stored_bytes == item_bytes(value) + 9
    # An image of the keys alone is no item (moto announces an item an UpdateItem creates that way first)
    assert footprint(*CHECKPOINT, {"pk": {"S": CHECKPOINT[0]}, "sk": {"S": CHECKPOINT[1]}}) == metering.NONE


def test_binaries_count_their_bytes_not_their_base64_and_an_empty_map_counts_as_one() -> None:
    raw = bytes(range(200))
    as_read = checkpoint(h={"B": raw}, m={"M": {"inner": {"B": raw}}}, e={"M": {}})
    as_streamed = checkpoint(
        h={"B": base64.b64encode(raw).decode()}, m={"M": {"inner": {"B": base64.b64encode(raw).decode()}}}, e={}
    )
    assert footprint(*CHECKPOINT, as_streamed) == footprint(*CHECKPOINT, as_read)


def test_only_tenants_data_counts() -> None:
    assert tenant_of("C#acme#ticket-1") == tenant_of("B#acme#blob_1") == tenant_of("H#acme#worker#t1") == "acme"
    for pk in ("K#0123", "D#acme#worker#key", "L#acme", "A#client", "G#acme#grant", "C#", "C#acme"):
        assert tenant_of(pk) is None, pk
    key_item = record(None, {"pk": {"S": "K#0123"}, "sk": {"S": "K"}}, ("K#0123", "K"))
    assert change_of(key_item) is None


def test_a_record_adds_its_difference_and_a_malformed_one_cannot_stop_a_count() -> None:
    old, new = checkpoint("a"), checkpoint("a" * 11)
    assert change_of(record(old, new)) == ("acme", Footprint(10))
    assert change_of(record(None, new)) == ("acme", footprint(*CHECKPOINT, new))
    assert change_of(record(new, None)) == ("acme", metering.NONE - footprint(*CHECKPOINT, new))
    assert change_of(record(old, old)) is None
    broken = checkpoint(bad={"Z": "?"}, worse={"B": "not base64!"}, n={"N": "x"})
    assert change_of(record(None, broken)) is not None


def test_a_tally_sums_by_tenant_and_leaves_out_what_cancels() -> None:
    other = ("C#globex#t", "C#worker#task_state")
    made = checkpoint()
    records = [
        record(None, made),
        record(None, {**checkpoint(), "pk": {"S": other[0]}}, other),
        record(made, None),
    ]
    totals = tally(records)
    assert set(totals) == {"globex"}
    assert totals["globex"].checkpoints == 1


def test_the_request_token_names_the_records_and_the_part() -> None:
    first = [record(None, checkpoint()), {**record(None, checkpoint()), "eventID": "e2"}]
    assert request_token(first) == request_token([dict(r) for r in first])
    assert request_token(first) != request_token(first[:1])
    assert request_token(first) != request_token(first, part=100)
    assert len(request_token(first)) <= 36


def test_the_counters_are_the_ones_the_tenant_item_reads_and_the_names_are_the_stores() -> None:
    assert tuple(tenants.USAGE.values()) == metering.FOOTPRINT_ATTRIBUTES
    assert (
        (metering.OBJECT, metering.SIZE) == (items.STATE_OBJECT, items.SIZE) == (thread_names.OBJECT, thread_names.SIZE)
    )
    assert metering.DELETED == thread_names.DELETED


def test_a_record_of_a_shape_lambda_never_sends_counts_nothing_and_stops_nothing() -> None:
    good = record(None, checkpoint())
    odd: list[Any] = [
        {"dynamodb": "not a map"},
        {"dynamodb": {"Keys": {"pk": "C#acme#x", "sk": {"S": "C#w#k"}}}},
        {"dynamodb": {"Keys": {"pk": {"S": CHECKPOINT[0]}, "sk": {"S": CHECKPOINT[1]}}, "NewImage": ["a list"]}},
    ]
    assert tally([*odd, good]) == {"acme": footprint(*CHECKPOINT, checkpoint())}
    assert len(request_token([*odd, good])) == 36


BINARY = st.binary(max_size=300)


@given(blobs=st.lists(BINARY, min_size=1, max_size=5), texts=st.lists(st.text(max_size=30), max_size=5))
@settings(max_examples=examples(300))
def test_an_image_in_lambdas_event_form_counts_what_the_same_item_read_from_the_table_does(
    blobs: list[bytes], texts: list[str]
) -> None:
    as_read = checkpoint(
        **{f"b{i}": {"B": raw} for i, raw in enumerate(blobs)},
        m={"M": {f"t{i}": {"S": text} for i, text in enumerate(texts)} | {"raw": {"B": blobs[0]}}},
        l={"L": [{"B": raw} for raw in blobs]},
    )
    streamed = json.loads(json.dumps(as_read, default=lambda raw: base64.b64encode(raw).decode()))
    assert footprint(*CHECKPOINT, streamed) == footprint(*CHECKPOINT, as_read)
    assert footprint(*CHECKPOINT, as_read).stored_bytes == item_bytes(as_read)
    proof_counts.record(SUITE, images=1)


def test_a_change_that_cancels_over_a_batch_still_counts_the_days_it_spans() -> None:
    # Given a checkpoint made a second before midnight and deleted a second after it, in one batch
    made = checkpoint()
    before, after = record(None, made), record(made, None)
    before["dynamodb"]["ApproximateCreationDateTime"] = 1_796_342_399  # 2026-12-03T23:59:59Z
    after["dynamodb"]["ApproximateCreationDateTime"] = 1_796_342_401  # 2026-12-04T00:00:01Z
    # Then the tenant's total is untouched, and each day gets its change: one more, then one fewer
    (part,) = metering.transactions("t", [before, after])
    keys = [update["Key"]["sk"]["S"] for update in part]
    assert keys == ["U#2026-12-03", "U#2026-12-04"]
    changes = [update["ExpressionAttributeValues"] for update in part]
    assert [{v["N"] for k, v in c.items() if k != ":ttl"} & {"1", "-1"} for c in changes] == [{"1"}, {"-1"}]
    assert metering.transactions("t", [record(made, made)]) == []
