"""The reaper's rules, without AWS: which objects a checkpoint image references, and what each stream record (the
samples of `events/` among them) asks for."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.store import items, layout, reaping
from baton_checkpoints.store.reaping import (
    CheckpointChange,
    Ignored,
    References,
    UnattachedBlobRemoved,
    references_of,
    work_of,
)
from tests.proof_counts import record
from tests.unit.hypothesis_profiles import active_profile, examples

EVENTS = Path(__file__).resolve().parents[2] / "events"
TENANT = "acme"
PK, SK = "C#acme#ticket-4411", "C#operator#task_state"
NOTES = "blob_0c1d2e3f405162738495a6b7c8d9eaf0"
SCREENSHOT = "blob_5f4e3d2c1b0a99887766554433221100"
NEVER_ATTACHED = "blob_d00dfeedd00dfeedd00dfeedd00dfeed"
STATE_1 = "blobs/acme/states/9f0c4b6e2a7d4e1b8c3f5a6d7e8f9012"
STATE_2 = "blobs/acme/states/a1b2c3d4e5f60718293a4b5c6d7e8f90"
PROFILE = active_profile()


def sample(name: str) -> list[dict[str, Any]]:
    """The records of the sample event `events/<name>.json`."""
    records = json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))["Records"]
    assert isinstance(records, list)
    return records


def only(name: str) -> dict[str, Any]:
    (single,) = sample(name)
    return single


def image(state: str | None = None, blobs: tuple[str, ...] = (), with_set: bool = True) -> dict[str, Any]:
    """A checkpoint image (typed) with a spilled state and resources naming `blobs`."""
    found: dict[str, Any] = {"pk": {"S": PK}, "sk": {"S": SK}, "rev": {"N": "1"}}
    if state is not None:
        found[items.STATE_OBJECT] = {"S": state}
    else:
        found[items.TEXT] = {"S": '{"step":1}'}
    if blobs:
        found[items.RESOURCES] = {"L": [{"M": {"name": {"S": b}, "blob_id": {"S": b}}} for b in blobs]}
        if with_set:
            found[items.RESOURCE_BLOBS] = {"SS": sorted(blobs)}
    return found


def stream_record(event_name: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    keys = (old or new or {"pk": {"S": PK}, "sk": {"S": SK}}).copy()
    change: dict[str, Any] = {"Keys": {"pk": keys["pk"], "sk": keys["sk"]}, "SequenceNumber": "1"}
    if old is not None:
        change["OldImage"] = old
    if new is not None:
        change["NewImage"] = new
    return {"eventName": event_name, "dynamodb": change}


def test_the_reaper_reads_the_attributes_the_store_writes() -> None:
    # The reaper names them itself (importing items would load pydantic into its cold start): they must agree
    assert reaping.STATE_OBJECT == items.STATE_OBJECT
    assert reaping.RESOURCES == items.RESOURCES
    assert reaping.RESOURCE_BLOBS == items.RESOURCE_BLOBS
    assert reaping.OWNER_PK == items.OWNER_PK
    assert reaping.OWNER_SK == items.OWNER_SK
    assert reaping.CLAIM == items.CLAIM
    assert reaping.REVISIONS_FROM == items.REVISIONS_FROM
    assert reaping.REVISION == items.REVISION
    assert reaping.KEEP == items.KEEP


# -- references_of ----------------------------------------------------------------------------------------------


def test_an_image_references_its_spilled_state_and_the_blobs_of_its_resources() -> None:
    assert references_of(image(STATE_1, (NOTES, SCREENSHOT)), TENANT) == References(
        frozenset({STATE_1}), frozenset({NOTES, SCREENSHOT})
    )


def test_an_inline_state_without_resources_references_nothing() -> None:
    assert references_of(image(), TENANT) == reaping.NOTHING
    assert references_of(None, TENANT) == reaping.NOTHING
    assert references_of({}, TENANT) == reaping.NOTHING


def test_blobs_named_only_in_res_or_only_in_rb_both_count() -> None:
    only_res = image(None, (NOTES,), with_set=False)
    only_set = {**image(), items.RESOURCE_BLOBS: {"SS": [SCREENSHOT]}}
    assert references_of(only_res, TENANT).blobs == {NOTES}
    assert references_of(only_set, TENANT).blobs == {SCREENSHOT}


@pytest.mark.parametrize(
    "state",
    [
        "blobs/other/states/9f0c4b6e2a7d4e1b8c3f5a6d7e8f9012",  # another tenant's state
        f"blobs/acme/{NOTES}",  # a blob's object, not a state
        "blobs/acme/states/",  # the folder itself
        "blobs/acme/states/x/../../other/states/y",  # a deeper path
        "elsewhere/acme/states/9f0c",  # outside the blob prefix
    ],
)
def test_a_state_key_outside_the_tenants_states_folder_is_not_referenced(state: str) -> None:
    assert references_of(image(state), TENANT).states == frozenset()


@pytest.mark.parametrize("blob_id", ["blob_XYZ", "../other/blob_" + "a" * 32, "states/abc", "", "blob_" + "A" * 32])
def test_a_resource_naming_no_blob_id_references_nothing(blob_id: str) -> None:
    named = image(None, (blob_id,))
    assert references_of(named, TENANT).blobs == frozenset()


# -- work_of on the sample events -------------------------------------------------------------------------------


def test_the_sample_insert_retags_its_state_and_both_blobs() -> None:
    work = work_of(only("stream_checkpoint_insert"))
    assert work == CheckpointChange(
        tenant_id=TENANT,
        key=layout.key(PK, SK),
        attach=(STATE_1, f"blobs/acme/{NOTES}", f"blobs/acme/{SCREENSHOT}"),
    )


def test_the_sample_modify_retags_the_new_state_and_drops_the_old_one_and_the_dropped_resource() -> None:
    work = work_of(only("stream_checkpoint_modify"))
    assert work == CheckpointChange(
        tenant_id=TENANT,
        key=layout.key(PK, SK),
        attach=(STATE_2,),
        drop_states=(STATE_1,),
        drop_blobs=(SCREENSHOT,),
    )
    assert work.owner == (PK, SK)


def test_the_sample_ttl_removal_drops_the_state_and_the_remaining_blob() -> None:
    expired = only("stream_checkpoint_expired")
    assert expired["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert work_of(expired) == CheckpointChange(
        tenant_id=TENANT, key=layout.key(PK, SK), drop_states=(STATE_2,), drop_blobs=(NOTES,)
    )


def test_the_sample_blob_record_expiry_deletes_the_blobs_object() -> None:
    assert work_of(only("stream_blob_expired")) == UnattachedBlobRemoved(f"blobs/acme/{NEVER_ATTACHED}")


def test_the_sample_batch_holds_every_sample_and_a_claim_that_asks_nothing() -> None:
    batch = sample("stream_batch")
    singles = [only(n) for n in ("stream_checkpoint_insert", "stream_checkpoint_modify", "stream_checkpoint_expired")]
    assert all(s in batch for s in [*singles, only("stream_blob_expired")])
    numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers)
    claims = [r for r in batch if r["dynamodb"]["Keys"]["pk"]["S"].startswith("B#") and r["eventName"] == "MODIFY"]
    assert len(claims) == 1
    assert isinstance(work_of(claims[0]), Ignored)


# -- work_of: every other kind of record ------------------------------------------------------------------------


def test_a_blob_record_removed_while_attached_asks_nothing() -> None:
    removed = copy.deepcopy(only("stream_blob_expired"))
    removed["dynamodb"]["OldImage"][items.OWNER_PK] = {"S": PK}
    removed["dynamodb"]["OldImage"][items.OWNER_SK] = {"S": SK}
    assert isinstance(work_of(removed), Ignored)


def test_a_blob_record_removed_without_its_old_image_asks_nothing() -> None:
    removed = copy.deepcopy(only("stream_blob_expired"))
    del removed["dynamodb"]["OldImage"]
    assert isinstance(work_of(removed), Ignored)


@pytest.mark.parametrize("event_name", ["INSERT", "MODIFY"])
def test_a_blob_record_written_asks_nothing(event_name: str) -> None:
    written = copy.deepcopy(only("stream_blob_expired"))
    written["eventName"] = event_name
    written["dynamodb"]["NewImage"] = written["dynamodb"]["OldImage"]
    assert isinstance(work_of(written), Ignored)


def test_a_blob_record_with_a_malformed_id_asks_nothing() -> None:
    removed = copy.deepcopy(only("stream_blob_expired"))
    removed["dynamodb"]["Keys"]["pk"] = {"S": "B#acme#states/9f0c"}
    assert isinstance(work_of(removed), Ignored)


@pytest.mark.parametrize("pk", ["K#" + "0" * 64, "D#acme#operator#step-3", "I#acme#ckpt_0", "T#acme#keys"])
def test_records_of_other_items_are_ignored(pk: str) -> None:
    other = stream_record("REMOVE", {"pk": {"S": pk}, "sk": {"S": "X"}, items.STATE_OBJECT: {"S": STATE_1}}, None)
    assert isinstance(work_of(other), Ignored)


@pytest.mark.parametrize("event_name", [None, "", "TRUNCATE", "insert"])
def test_records_of_unknown_events_are_ignored(event_name: str | None) -> None:
    unknown = stream_record("REMOVE", image(STATE_1, (NOTES,)), None)
    unknown["eventName"] = event_name
    assert isinstance(work_of(unknown), Ignored)


def test_a_record_without_keys_is_ignored() -> None:
    assert isinstance(work_of({"eventName": "REMOVE", "dynamodb": {}}), Ignored)
    assert isinstance(work_of({"eventName": "REMOVE"}), Ignored)


def test_a_write_that_keeps_the_same_objects_asks_nothing() -> None:
    # Given a MODIFY that changed the item (a ttl refresh, say) but not what it references
    old = image(STATE_1, (NOTES,))
    new = {**image(STATE_1, (NOTES,)), "rev": {"N": "2"}}
    # Then nothing is retagged and nothing dropped
    assert work_of(stream_record("MODIFY", old, new)) == CheckpointChange(TENANT, layout.key(PK, SK))


def test_a_spill_replaced_by_an_inline_state_drops_the_object() -> None:
    work = work_of(stream_record("MODIFY", image(STATE_1), image()))
    assert isinstance(work, CheckpointChange)
    assert (work.attach, work.drop_states, work.drop_blobs) == ((), (STATE_1,), ())


def test_a_checkpoint_deleted_by_a_client_drops_everything_it_referenced() -> None:
    work = work_of(stream_record("REMOVE", image(STATE_1, (NOTES, SCREENSHOT)), None))
    assert isinstance(work, CheckpointChange)
    assert (work.attach, work.drop_states, work.drop_blobs) == ((), (STATE_1,), (NOTES, SCREENSHOT))


# -- pruning: what fell below the window ----------------------------------------------------------------------------

CHECKPOINT_ID = "ckpt_0123456789abcdef0123456789abcdef"


def history_image(revision: int, revisions_from: int | None, checkpoint_id: str = CHECKPOINT_ID) -> dict[str, Any]:
    """A checkpoint image at `revision` whose kept revisions start at `revisions_from` (None: none kept)."""
    found = {**image(), "rev": {"N": str(revision)}, "gpk": {"S": f"I#{TENANT}#{checkpoint_id}"}}
    if revisions_from is not None:
        found[items.REVISIONS_FROM] = {"N": str(revisions_from)}
    return found


def revision_sks(low: int, high: int) -> tuple[str, str]:
    return (
        layout.revision_sk("operator", "task_state", CHECKPOINT_ID, low),
        layout.revision_sk("operator", "task_state", CHECKPOINT_ID, high),
    )


@pytest.mark.parametrize(
    ("old", "new", "pruned"),
    [
        # The steady state of keep 3: the window moves up by one, everything below it goes
        ((5, 2), (6, 3), revision_sks(1, 2)),
        # keep_revisions lowered from 10 to 2
        ((12, 2), (13, 11), revision_sks(1, 10)),
        # History turned off: every revision below the checkpoint's own goes
        ((9, 6), (10, None), revision_sks(1, 9)),
        # History turned on: nothing was kept before, nothing to delete
        ((4, None), (5, 4), None),
        # A lease granted or released: the window did not move
        ((7, 4), (7, 4), None),
        # keep_revisions raised: the window only grows
        ((7, 4), (8, 4), None),
    ],
)
def test_a_save_that_raises_the_window_prunes_what_fell_below_it(
    old: tuple[int, int | None], new: tuple[int, int | None], pruned: tuple[str, str] | None
) -> None:
    work = work_of(stream_record("MODIFY", history_image(*old), history_image(*new)))
    assert isinstance(work, CheckpointChange)
    assert work.pruned == pruned
    assert work.orphaned is None


def test_a_checkpoint_replaced_by_a_new_one_deletes_its_revisions_rather_than_prunes_them() -> None:
    old, new = history_image(9, 6), history_image(1, None, "ckpt_" + "f" * 32)
    work = work_of(stream_record("MODIFY", old, new))
    assert isinstance(work, CheckpointChange)
    assert work.pruned is None
    assert work.orphaned == layout.revisions_prefix("operator", "task_state", CHECKPOINT_ID)


# -- still_holds ------------------------------------------------------------------------------------------------


def test_the_current_item_holds_a_blob_it_names_in_rb_or_in_res() -> None:
    assert reaping.still_holds(image(STATE_2, (NOTES,)), reaping.NOTHING, NOTES)
    assert reaping.still_holds(image(STATE_2, (NOTES,), with_set=False), reaping.NOTHING, NOTES)
    assert not reaping.still_holds(image(STATE_2, (NOTES,)), reaping.NOTHING, SCREENSHOT)
    assert not reaping.still_holds(image(STATE_2), reaping.NOTHING, NOTES)
    assert not reaping.still_holds(None, reaping.NOTHING, NOTES)
    assert reaping.still_holds(None, References(blobs=frozenset({NOTES})), NOTES)


# -- properties -------------------------------------------------------------------------------------------------

STATE_KEYS = st.sampled_from([f"blobs/acme/states/{n:032x}" for n in range(4)])
BLOB_IDS = st.sampled_from([f"blob_{n:032x}" for n in range(6)])


def _optional_image(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    state = draw(st.none() | STATE_KEYS)
    blobs = tuple(draw(st.sets(BLOB_IDS, max_size=4)))
    return image(state, blobs, with_set=draw(st.booleans()))


@st.composite
def stream_changes(draw: st.DrawFn) -> dict[str, Any]:
    event_name = draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"]))
    old = None if event_name == "INSERT" else _optional_image(draw)
    new = None if event_name == "REMOVE" else _optional_image(draw)
    return stream_record(event_name, old, new)


@settings(PROFILE, max_examples=examples(300))
@given(stream_changes())
def test_nothing_the_new_image_references_is_dropped_and_everything_new_is_retagged(change: dict[str, Any]) -> None:
    record("reaper rules (unit)", stream_changes=1)
    old = references_of(change["dynamodb"].get("OldImage"), TENANT)
    new = references_of(change["dynamodb"].get("NewImage"), TENANT)
    work = work_of(change)
    assert isinstance(work, CheckpointChange)
    # Dropped: exactly what the old image referenced and the new does not
    assert set(work.drop_states) == old.states - new.states
    assert set(work.drop_blobs) == old.blobs - new.blobs
    # Retagged: exactly what the new image references and the old did not, as object keys of this tenant
    expected = (new.states - old.states) | {layout.blob_object(TENANT, b) for b in new.blobs - old.blobs}
    assert set(work.attach) == expected
    assert all(key.startswith(layout.tenant_prefix(TENANT)) for key in (*work.attach, *work.drop_states))
    # And a record delivered twice asks the same
    assert work_of(copy.deepcopy(change)) == work


# -- the cold start ---------------------------------------------------------------------------------------------

HEAVY = (
    "pydantic",
    "boto3",
    "botocore.session",
    "botocore.client",
    "baton_checkpoints.api",
    "baton_checkpoints.store.items",
    "aws_xray_sdk",
)
"""What importing the reaper's handler must not load: its cold-start budget is 1.1 x importing boto3 and making one
client (docs/architecture.md), and its clients are made by the first record that needs one."""


def test_importing_the_reaper_loads_nothing_heavy() -> None:
    import subprocess
    import sys

    probe = f"import sys, baton_checkpoints.handlers.reaper; print([m for m in {HEAVY!r} if m in sys.modules])"
    env = {"PATH": "", "BATON_TABLE_NAME": "baton-test", "PYTHONPATH": str(EVENTS.parent / "functions")}
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
