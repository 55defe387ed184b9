"""The answers a save and a lookup write without building their response models (`api/records.py`): the same text
as the models would write, for any checkpoint (text of any characters in every field the client chose, leases live
or not, sources of any parts), so the contract the models document is the one the fast path keeps."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.api.jsontext import model_json
from baton_checkpoints.api.records import record_summary_json, save_result_json
from baton_checkpoints.api.schemas import CheckpointSummary, SaveResult
from baton_checkpoints.domain.checkpoints import Checkpoint, Saved
from baton_checkpoints.domain.leases import Lease
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
TEXT = st.text(max_size=20)  # every character, control characters, U+2028 and astral ones included
MS = st.integers(min_value=0, max_value=4_102_444_800_000)
COUNT = st.integers(min_value=0, max_value=2**53 - 1)


@st.composite
def checkpoints(draw: Any) -> Checkpoint:
    lease = draw(st.none() | st.builds(Lease, holder=TEXT, counter=COUNT, secret=TEXT, expires_ms=MS, key_id=TEXT))
    # (the domain keeps what the write sent; a part the answer does not describe, or a null, must read as the model
    # reads it)
    source = draw(st.none() | st.dictionaries(st.sampled_from(["model", "session", "host"]) | TEXT, st.none() | TEXT))
    return Checkpoint(
        tenant_id=draw(TEXT),
        checkpoint_id=draw(TEXT),
        subject_id=draw(TEXT),
        agent_id=draw(TEXT),
        kind=draw(TEXT),
        revision=draw(COUNT),
        status=draw(TEXT),
        state_text=b"{}",
        state_hash=draw(TEXT),
        state_bytes=draw(COUNT),
        ttl_seconds=draw(COUNT),
        keep_revisions=draw(COUNT),
        created_ms=draw(MS),
        updated_ms=draw(MS),
        expires_ms=draw(MS),
        format=draw(st.none() | TEXT),
        source=source,
        lease=lease,
    )


@settings(PROFILE, max_examples=examples(300))
@given(checkpoints(), st.none() | MS)
def test_a_summary_is_written_as_its_model_writes_it(cp: Checkpoint, now_ms: int | None) -> None:
    assert record_summary_json(cp, None, now_ms) == model_json(CheckpointSummary.of(cp, now_ms))  # type: ignore[arg-type]


@settings(PROFILE, max_examples=examples(300))
@given(
    st.builds(
        Saved,
        checkpoint_id=TEXT,
        subject_id=TEXT,
        agent_id=TEXT,
        kind=TEXT,
        revision=COUNT,
        status=TEXT,
        state_hash=TEXT,
        state_bytes=COUNT,
        expires_ms=MS,
    )
)
def test_a_save_result_is_written_as_its_model_writes_it(saved: Saved) -> None:
    assert save_result_json(saved) == model_json(SaveResult.of(saved))
