"""Response models are built from domain objects: the contract's fields, times as RFC 3339, no state leaks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton_checkpoints.api.jsontext import model_json
from baton_checkpoints.api.schemas import CheckpointRecord, CheckpointSummary, SaveResult
from baton_checkpoints.api.schemas_keys import KeyInfo
from baton_checkpoints.domain.access import KeyRecord
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.clock import format_ms
from tests.builders import key_record, stored_checkpoint

NOW = 1_785_412_084_652  # 2026-07-30T11:48:04.652Z
HOUR_MS = 3_600_000
OLD_ID = "ckpt_" + "a" * 32


def stored(**changes: Any) -> Checkpoint:
    """A live checkpoint at revision 3, created an hour ago, written a minute ago (`tests.builders`)."""
    return stored_checkpoint(**changes)


def as_json(model: Any) -> dict[str, Any]:
    """What the answer carries: the model as the responses module writes it."""
    parsed: dict[str, Any] = json.loads(model_json(model))
    return parsed


# --- shapes ----------------------------------------------------------------------------------------


SUMMARY_FIELDS = {
    "checkpoint_id",
    "subject_id",
    "agent_id",
    "kind",
    "revision",
    "status",
    "state_hash",
    "state_bytes",
    "format",
    "resources",
    "source",
    "ttl_seconds",
    "keep_revisions",
    "lease",
    "expires_at",
    "created_at",
    "updated_at",
}
SAVE_RESULT_FIELDS = {
    "checkpoint_id",
    "subject_id",
    "agent_id",
    "kind",
    "revision",
    "status",
    "state_hash",
    "state_bytes",
    "expires_at",
    "updated",
}


def test_summary_is_the_record_without_state_with_contract_times() -> None:
    # Given a stored checkpoint
    checkpoint = stored(source={"host": "h"})
    # When summarized
    summary = as_json(CheckpointSummary.of(checkpoint))
    # Then it has exactly the contract's fields, no state, and RFC 3339 millisecond times
    assert set(summary) == SUMMARY_FIELDS
    assert summary["created_at"] == format_ms(NOW - HOUR_MS)
    assert summary["updated_at"] == format_ms(NOW - 60_000)
    assert summary["expires_at"] == format_ms(checkpoint.expires_ms)
    assert summary["lease"] is None
    assert summary["source"] == {"host": "h"}
    assert summary["revision"] == 3


def test_record_adds_the_parsed_state_to_the_summary() -> None:
    # Given a stored checkpoint with its state
    checkpoint = stored()
    # When the full record is built
    record = as_json(CheckpointRecord.of_record(checkpoint))
    # Then it is the summary plus the parsed state
    assert set(record) == {*SUMMARY_FIELDS, "state"}
    assert record["state"] == {"step": 0}
    assert {k: v for k, v in record.items() if k != "state"} == as_json(CheckpointSummary.of(checkpoint))


def test_record_without_loaded_state_is_an_error() -> None:
    # Given a checkpoint loaded without its state
    checkpoint = stored(state_text=None)
    # When the full record is asked for
    # Then it fails loudly instead of inventing a state
    with pytest.raises(ValueError, match="without its state"):
        CheckpointRecord.of_record(checkpoint)


def test_the_summary_does_not_share_the_resources_list() -> None:
    # Given a checkpoint with a resource
    checkpoint = stored(resources=[{"name": "n"}])
    # When its summary's resources are changed
    CheckpointSummary.of(checkpoint).resources.append({"name": "other"})
    # Then the checkpoint itself is untouched
    assert checkpoint.resources == [{"name": "n"}]


@pytest.mark.parametrize(("revision", "updated"), [(1, False), (2, True), (17, True)])
def test_save_result_says_updated_only_after_the_first_revision(revision: int, updated: bool) -> None:
    # Given a checkpoint at some revision
    checkpoint = stored(revision=revision)
    # When the save answer is built
    result = as_json(SaveResult.of(checkpoint.saved()))
    # Then it has the contract's fields and `updated` is false exactly at revision 1
    assert set(result) == SAVE_RESULT_FIELDS
    assert result["updated"] is updated
    assert result["revision"] == revision


def key(**changes: Any) -> KeyRecord:
    """A key record created an hour ago (`tests.builders`)."""
    return key_record(**changes)


def test_key_info_never_shows_the_secret_or_its_hash() -> None:
    # Given a key with a validity window
    record = key(not_before_ms=NOW, expires_ms=NOW + 1000, description="ci", scopes=frozenset({"b", "a"}))
    # When it is listed
    info = as_json(KeyInfo.of(record))
    # Then it has no secret material, sorted scopes and contract times
    assert "secret" not in info
    assert "secret_hash" not in info
    assert record.secret_hash not in info.values()
    assert info["scopes"] == ["a", "b"]
    assert info["not_before"] == "2026-07-30T11:48:04.652Z"
    assert info["expires_at"] == "2026-07-30T11:48:05.652Z"
