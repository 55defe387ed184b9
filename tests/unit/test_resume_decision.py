"""Resume, decided purely: which status the matching checkpoints give, the request's rules, the OpenCheckpoint lifts
and the budget arithmetic on the exact `ready` data."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from baton_checkpoints.api.schemas import CheckpointSummary
from baton_checkpoints.api.schemas_resume import ResumeAmbiguous, ResumeClosed, ResumeOmitted, ready_json
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.canonical import canonicalize
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.errors import NotFound
from baton_checkpoints.domain.resume import (
    ResumeRequest,
    agent_scope,
    decide,
    lift,
    matches,
    newest_first,
    within_budget,
)
from tests.builders import NOW_MS, SEED_DOCUMENT, stored_checkpoint
from tests.proof_counts import record
from tests.unit.hypothesis_profiles import examples

OPENCHECKPOINT = "opencheckpoint/0.1"


def checkpoint(number: int, status: str = "active", **changes: Any) -> Checkpoint:
    """The `number`-th checkpoint of subject ticket-42 (tenant t1), each under its own kind/agent slot, written
    `number` seconds before the others that follow it (a higher number is older)."""
    values: dict[str, Any] = {
        "checkpoint_id": f"ckpt_{number:032x}",
        "agent_id": f"a{number}",
        "status": status,
        "updated_ms": NOW_MS - 60_000 - number * 1000,
        **changes,
    }
    return stored_checkpoint(**values)


def request(**fields: Any) -> ResumeRequest:
    return ResumeRequest.model_validate({"subject_id": "ticket-42", **fields})


# --- the decision ----------------------------------------------------------------------------------


def test_nothing_matching_is_none() -> None:
    assert decide([]).status == "none"


def test_one_active_match_is_ready_with_it() -> None:
    only = checkpoint(1)
    decision = decide([only])
    assert (decision.status, decision.checkpoint) == ("ready", only)


def test_one_active_match_is_ready_whatever_terminal_ones_match_beside_it() -> None:
    active = checkpoint(5)
    decision = decide([checkpoint(1, "completed"), active, checkpoint(2, "cancelled")])
    assert (decision.status, decision.checkpoint) == ("ready", active)


def test_two_active_matches_are_ambiguous_newest_first_even_when_one_is_much_newer() -> None:
    newer, older = checkpoint(1), checkpoint(2, updated_ms=NOW_MS - 30 * 86_400_000)
    decision = decide([older, newer, checkpoint(3, "completed")])
    assert decision.status == "ambiguous"
    assert decision.checkpoint is None
    assert decision.candidates == (newer, older)
    assert decision.candidate_count == 2


def test_one_terminal_match_and_no_active_one_is_closed_with_it() -> None:
    done = checkpoint(1, "completed")
    decision = decide([done])
    assert (decision.status, decision.checkpoint) == ("closed", done)


def test_several_terminal_matches_and_no_active_one_are_ambiguous_among_them() -> None:
    done, cancelled = checkpoint(1, "completed"), checkpoint(2, "cancelled")
    decision = decide([cancelled, done])
    assert decision.status == "ambiguous"
    assert decision.candidates == (done, cancelled)
    assert decision.candidate_count == 2


def test_candidates_are_at_most_fifty_and_the_count_says_how_many_matched() -> None:
    many = [checkpoint(n) for n in range(1, 61)]
    decision = decide(reversed(many))
    assert decision.status == "ambiguous"
    assert decision.candidates == tuple(many[: limits.MAX_RESUME_CANDIDATES])
    assert decision.candidate_count == 60


def test_candidates_written_in_the_same_millisecond_are_ordered_by_agent_then_kind() -> None:
    same = NOW_MS - 1000
    b_cursor = checkpoint(1, agent_id="b", kind="cursor", updated_ms=same)
    a_workflow = checkpoint(2, agent_id="a", kind="workflow", updated_ms=same)
    a_cursor = checkpoint(3, agent_id="a", kind="cursor", updated_ms=same)
    assert newest_first([b_cursor, a_workflow, a_cursor]) == [a_cursor, a_workflow, b_cursor]


statuses = st.lists(st.sampled_from(["active", "completed", "cancelled"]), max_size=70)


@settings(max_examples=examples(200), deadline=None)
@given(statuses)
def test_the_status_follows_only_from_how_many_active_and_terminal_checkpoints_match(found: list[str]) -> None:
    # Given checkpoints of any statuses and ages (shuffled by their numbers)
    matched = [checkpoint(n, status, updated_ms=NOW_MS - (n * 7919) % 100_000) for n, status in enumerate(found)]
    active = sum(1 for s in found if s == "active")
    terminal = len(found) - active
    decision = decide(matched)
    record("resume decision", statuses_tried=1)
    if active == 1:
        assert decision.status == "ready"
        assert decision.checkpoint is not None
        assert decision.checkpoint.status == "active"
    elif active >= 2:
        assert (decision.status, decision.candidate_count) == ("ambiguous", active)
        assert all(cp.status == "active" for cp in decision.candidates)
    elif terminal == 1:
        assert decision.status == "closed"
    elif terminal >= 2:
        assert (decision.status, decision.candidate_count) == ("ambiguous", terminal)
    else:
        assert decision.status == "none"
    # Candidates are never more than 50, newest first
    shown = [cp.updated_ms for cp in decision.candidates]
    assert len(shown) == min(decision.candidate_count, limits.MAX_RESUME_CANDIDATES)
    assert shown == sorted(shown, reverse=True)


# --- what matches ----------------------------------------------------------------------------------


def test_a_live_checkpoint_of_the_subject_matches() -> None:
    assert matches(checkpoint(1), request(), "t1", None, NOW_MS)


@pytest.mark.parametrize(
    ("changes", "fields", "agent_id"),
    [
        ({"expires_ms": NOW_MS}, {}, None),
        ({"subject_id": "ticket-43"}, {}, None),
        ({"tenant_id": "t2"}, {}, None),
        ({"kind": "cursor"}, {"kind": "task_state"}, None),
        ({}, {"checkpoint_id": "ckpt_" + "f" * 32}, None),
        ({}, {}, "a2"),
    ],
    ids=["expired", "another subject", "another tenant", "another kind", "another id", "another agent"],
)
def test_a_checkpoint_that_differs_from_the_request_does_not_match(
    changes: dict[str, Any], fields: dict[str, Any], agent_id: str | None
) -> None:
    assert not matches(checkpoint(1, **changes), request(**fields), "t1", agent_id, NOW_MS)


def test_kind_checkpoint_id_and_agent_match_when_they_are_the_checkpoints_own() -> None:
    cp = checkpoint(1)
    assert matches(cp, request(kind=cp.kind, checkpoint_id=cp.checkpoint_id), "t1", cp.agent_id, NOW_MS)


def caller(agent_id: str = "a1", *scopes: str) -> Principal:
    return Principal("t1", agent_id, "key_1", frozenset(scopes or {"checkpoints:read"}))


def test_a_key_without_star_resumes_only_its_own_agents_work() -> None:
    assert agent_scope(caller("a1"), None) == "a1"
    assert agent_scope(caller("a1"), "a1") == "a1"
    with pytest.raises(NotFound):
        agent_scope(caller("a1"), "a2")


def test_a_star_key_resumes_every_agents_work_or_the_one_it_names() -> None:
    assert agent_scope(caller("a1", "*"), None) is None
    assert agent_scope(caller("a1", "*"), "a2") == "a2"


# --- the request -----------------------------------------------------------------------------------


def test_a_full_request_is_accepted() -> None:
    body = {
        "subject_id": "ticket-42",
        "kind": "task_state",
        "agent_id": "a1",
        "checkpoint_id": "ckpt_" + "0" * 32,
        "budget_bytes": limits.MIN_RESUME_BUDGET_BYTES,
    }
    assert ResumeRequest.model_validate(body).model_dump() == body


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"budget": 2048}, "budget"),
        ({"budget_bytes": limits.MIN_RESUME_BUDGET_BYTES - 1}, "budget_bytes"),
        ({"budget_bytes": limits.MAX_RESUME_BUDGET_BYTES + 1}, "budget_bytes"),
        ({"budget_bytes": "2048"}, "budget_bytes"),
        ({"budget_bytes": 2048.5}, "budget_bytes"),
        ({"checkpoint_id": "ckpt_" + "A" * 32}, "checkpoint_id"),
        ({"checkpoint_id": "ckpt_" + "0" * 32 + "\n"}, "checkpoint_id"),
        ({"kind": "notes"}, "kind"),
        ({"agent_id": "Agent"}, "agent_id"),
        ({"subject_id": ""}, "subject_id"),
    ],
)
def test_a_request_breaking_a_rule_is_refused_naming_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        request(**fields)
    assert [error["loc"][0] for error in refused.value.errors()] == [field]


def test_the_budget_bounds_themselves_are_accepted() -> None:
    for budget in (limits.MIN_RESUME_BUDGET_BYTES, limits.MAX_RESUME_BUDGET_BYTES):
        assert request(budget_bytes=budget).budget_bytes == budget


# --- the lifts -------------------------------------------------------------------------------------


def test_an_opencheckpoint_documents_pending_operations_and_stop_conditions_are_lifted_as_canonical_json() -> None:
    lifted = lift(OPENCHECKPOINT, canonicalize(SEED_DOCUMENT).text)
    assert lifted is not None
    assert json.loads(lifted.pending_operations) == SEED_DOCUMENT["operations"]
    assert json.loads(lifted.stop_conditions) == SEED_DOCUMENT["continuation"]["stop_conditions"]
    assert lifted.pending_operations == canonicalize(SEED_DOCUMENT["operations"]).text


def test_finished_operations_are_not_pending() -> None:
    document = {
        **SEED_DOCUMENT,
        "operations": [
            {"kind": "refund", "status": status, "description": f"Refund {status}."}
            for status in ("done", "completed", "cancelled", "failed", "started", "awaiting")
        ],
    }
    lifted = lift(OPENCHECKPOINT, canonicalize(document).text)
    assert lifted is not None
    assert [op["status"] for op in json.loads(lifted.pending_operations)] == ["started", "awaiting"]


def test_a_document_without_operations_or_continuation_lifts_empty_lists() -> None:
    document = {"opencheckpoint": "0.1", "task": {"title": "t", "status": "open"}}
    lifted = lift(OPENCHECKPOINT, canonicalize(document).text)
    assert lifted is not None
    assert (lifted.pending_operations, lifted.stop_conditions) == (b"[]", b"[]")


@pytest.mark.parametrize("format_name", [None, "opencheckpoint/0.2", "markdown"])
def test_another_format_lifts_nothing_even_when_the_state_looks_like_a_document(format_name: str | None) -> None:
    assert lift(format_name, canonicalize(SEED_DOCUMENT).text) is None


# --- the budget, on the exact data -----------------------------------------------------------------


def test_the_ready_data_is_the_record_with_the_state_spliced_in_as_stored() -> None:
    state = canonicalize({"z": "é", "a": [1, 2.5]})
    cp = checkpoint(1, state_text=state.text, state_hash=state.sha256, state_bytes=state.size)
    data = ready_json(CheckpointSummary.of(cp, NOW_MS), cp.state_text or b"", None)
    parsed = json.loads(data)
    assert list(parsed) == ["status", "checkpoint"]
    assert parsed["status"] == "ready"
    assert parsed["checkpoint"]["state"] == {"z": "é", "a": [1, 2.5]}
    assert data.endswith(f',"state":{state.text.decode()}}}}}')
    assert json.dumps(parsed, separators=(",", ":"), ensure_ascii=False) == data  # compact, nothing added


def test_the_ready_data_of_a_document_carries_the_lifts_after_the_checkpoint() -> None:
    state = canonicalize(SEED_DOCUMENT)
    cp = checkpoint(1, state_text=state.text, format=OPENCHECKPOINT)
    parsed = json.loads(ready_json(CheckpointSummary.of(cp, NOW_MS), state.text, lift(cp.format, state.text)))
    assert list(parsed) == ["status", "checkpoint", "pending_operations", "stop_conditions"]
    assert parsed["pending_operations"] == SEED_DOCUMENT["operations"]


@pytest.mark.parametrize(("slack", "fits"), [(-1, False), (0, True), (1, True), (10_000, True)])
def test_a_budget_fits_the_ready_data_from_exactly_its_utf8_length(slack: int, fits: bool) -> None:
    # A state with multi-byte characters: the budget counts bytes, not characters
    state = canonicalize({"note": "naïve café " * 200})
    cp = checkpoint(1, state_text=state.text, state_hash=state.sha256, state_bytes=state.size)
    data = ready_json(CheckpointSummary.of(cp, NOW_MS), state.text, None)
    required = len(data.encode("utf-8"))
    assert required > len(data)
    assert within_budget(required, required + slack) is fits


def test_no_budget_takes_any_size_one_answer_carries() -> None:
    assert within_budget(limits.MAX_ANSWER_DATA_BYTES, None)
    assert not within_budget(limits.MAX_ANSWER_DATA_BYTES + 1, None)
    assert not within_budget(limits.MAX_ANSWER_DATA_BYTES + 1, limits.MAX_RESUME_BUDGET_BYTES)


# --- the other answers -----------------------------------------------------------------------------


def test_ambiguous_closed_and_omitted_answers_carry_summaries_without_state() -> None:
    cp = checkpoint(1)
    answers = [
        json.loads(ResumeAmbiguous.of(decide([cp, checkpoint(2)]), NOW_MS).model_dump_json(exclude_unset=True)),
        json.loads(ResumeClosed.of(cp, NOW_MS).model_dump_json(exclude_unset=True)),
        json.loads(ResumeOmitted.of(cp, 5000, NOW_MS).model_dump_json(exclude_unset=True)),
    ]
    assert answers[0]["candidate_count"] == 2
    assert [c["checkpoint_id"] for c in answers[0]["candidates"]] == [cp.checkpoint_id, checkpoint(2).checkpoint_id]
    assert answers[2]["required_bytes"] == 5000
    for answer in answers:
        shown = answer.get("candidates") or [answer["checkpoint"]]
        assert all("state" not in summary for summary in shown)
