"""Request models are strict (no coercion) and closed (unknown fields rejected), with the contract's ranges."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from baton_checkpoints.domain.access import SCOPES
from baton_checkpoints.domain.lifecycle import KINDS, STATUSES
from baton_checkpoints.domain.models import CreateKeyRequest, SaveCheckpointRequest
from tests.builders import SUBJECT, save_body

VALID_SAVE: dict[str, Any] = save_body()
VALID_KEY: dict[str, Any] = {"agent_id": "agent-1", "scopes": ["checkpoints:read"]}
SHA = "0" * 64


def rejected(model: type[SaveCheckpointRequest] | type[CreateKeyRequest], body: dict[str, Any]) -> list[Any]:
    """The (loc, type) pairs of the violations `body` has; fails the test when the body is accepted."""
    with pytest.raises(ValidationError) as exc:
        model.model_validate(body)
    return [(e["loc"], e["type"]) for e in exc.value.errors()]


# --- SaveCheckpointRequest: what it accepts -------------------------------------------------------------------


def test_a_minimal_save_gets_the_documented_defaults() -> None:
    # Given only subject_id, kind and state
    # When the body is validated
    request = SaveCheckpointRequest.model_validate(VALID_SAVE)
    # Then the optional fields are absent (None), resources empty, and nothing is invented
    assert request.subject_id == SUBJECT
    assert request.kind == "task_state"
    assert request.state == {"step": 1}
    assert request.ttl_seconds is None
    assert request.keep_revisions is None
    assert request.expected_revision is None
    assert request.status is None
    assert request.agent_id is None
    assert request.resources == []
    assert request.source is None


def test_a_save_with_every_optional_field_keeps_them_all() -> None:
    # Given a body that uses every optional field
    body = save_body(
        ttl_seconds=3600,
        agent_id="worker_7",
        expected_revision=0,
        status="completed",
        format="opencheckpoint/0.1",
        resources=[{"name": "log", "blob_id": "blob_1", "sha256": SHA, "size": 0, "media_type": "text/plain"}],
        source={"host": "laptop", "session": "s-1", "model": "m"},
        lease_token="3.abc",
        keep_revisions=5,
    )
    # When it is validated
    request = SaveCheckpointRequest.model_validate(body)
    # Then every value is kept as sent
    assert request.model_dump(exclude={"resources", "source"}) == {
        k: v for k, v in body.items() if k not in ("resources", "source")
    }
    assert request.resources[0].blob_id == "blob_1"
    assert request.source is not None
    assert request.source.host == "laptop"


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_the_closed_set_is_accepted(kind: str) -> None:
    # Given a save of each documented kind
    # When it is validated
    # Then it is accepted
    assert SaveCheckpointRequest.model_validate(save_body(kind=kind)).kind == kind


@pytest.mark.parametrize("status", STATUSES)
def test_every_status_of_the_closed_set_is_accepted(status: str) -> None:
    # Given a save with each documented status
    # When it is validated
    # Then it is accepted
    assert SaveCheckpointRequest.model_validate(save_body(status=status)).status == status


def test_kinds_and_statuses_are_exactly_the_contracts() -> None:
    # Given the closed sets the models use
    # Then they are exactly the contract's
    assert set(KINDS) == {"task_state", "conversation", "workflow", "cursor"}
    assert set(STATUSES) == {"active", "completed", "cancelled"}


@pytest.mark.parametrize(
    "state",
    [0, False, "", [], {}, "text", 1.5, [None], {"nested": None}],
)
def test_any_json_state_but_null_is_accepted_even_falsy_ones(state: Any) -> None:
    # Given a state that is falsy or holds nulls inside
    # When it is validated
    # Then it is accepted unchanged (only a null state itself is refused)
    assert SaveCheckpointRequest.model_validate(save_body(state=state)).state == state


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl_seconds", 60),
        ("ttl_seconds", 2_592_000),
        ("keep_revisions", 0),
        ("keep_revisions", 100),
        ("expected_revision", 0),
        ("subject_id", "x"),
        ("subject_id", "s" * 200),
        ("subject_id", "user 42 / café ☕ 漢字 😀"),
        ("subject_id", "a\u00a0b"),  # NBSP follows the C1 controls and is allowed
        ("agent_id", "a"),
        ("agent_id", "0" + "z" * 63),
        ("agent_id", "a_b-c"),
        ("format", "f" * 100),
        ("source", {}),
        ("source", {"host": "h" * 200}),
        ("lease_token", "t" * 200),
    ],
)
def test_boundary_values_inside_the_documented_ranges_are_accepted(field: str, value: Any) -> None:
    # Given a field at the edge of its allowed range
    # When the body is validated
    request = SaveCheckpointRequest.model_validate(save_body(**{field: value}))
    # Then it is accepted
    assert getattr(request, field) is not None


def test_one_hundred_resources_pass_the_model() -> None:
    # Given exactly 100 resource references
    ref = {"name": "n", "blob_id": "b", "sha256": SHA, "size": 1, "media_type": "application/octet-stream"}
    # When validated
    request = SaveCheckpointRequest.model_validate(save_body(resources=[ref] * 100))
    # Then all are kept
    assert len(request.resources) == 100


# --- SaveCheckpointRequest: strictness ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl_seconds", "60"),
        ("ttl_seconds", 60.0),
        ("ttl_seconds", True),
        ("keep_revisions", "1"),
        ("keep_revisions", False),
        ("expected_revision", "0"),
        ("expected_revision", 1.0),
        ("expected_revision", True),
        ("subject_id", 42),
        ("kind", ["task_state"]),
        ("agent_id", 7),
        ("status", True),
        ("format", 1),
        ("lease_token", 3),
        ("source", "laptop"),
        ("source", ["laptop"]),
        ("resources", {"name": "n"}),
    ],
)
def test_values_of_the_wrong_type_are_not_coerced(field: str, value: Any) -> None:
    # Given a field sent with a type that a lax parser would convert ("60" → 60, true → 1, 1.0 → 1)
    # When the body is validated
    errors = rejected(SaveCheckpointRequest, save_body(**{field: value}))
    # Then it is rejected at that field
    assert [loc[0] for loc, _ in errors] == [field]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"ttl": 60}, ("ttl",)),
        ({"State": {}}, ("State",)),
        ({"source": {"hostx": "a"}}, ("source", "hostx")),
        (
            {"resources": [{"name": "n", "blob_id": "b", "sha256": SHA, "size": 1, "media_type": "m", "url": "u"}]},
            ("resources", 0, "url"),
        ),
    ],
)
def test_unknown_fields_are_rejected_at_any_depth(extra: dict[str, Any], loc: tuple[Any, ...]) -> None:
    # Given a body with a field the contract does not name (a typo), at the top or inside a nested object
    # When it is validated
    errors = rejected(SaveCheckpointRequest, save_body(**extra))
    # Then exactly that field is rejected as unknown
    assert errors == [(loc, "extra_forbidden")]


# --- SaveCheckpointRequest: closed sets and ranges ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("kind", "task-state", "literal_error"),
        ("kind", "TASK_STATE", "literal_error"),
        ("kind", "", "literal_error"),
        ("status", "done", "literal_error"),
        ("status", "Active", "literal_error"),
        ("ttl_seconds", 59, "greater_than_equal"),
        ("ttl_seconds", 0, "greater_than_equal"),
        ("ttl_seconds", 2_592_001, "less_than_equal"),
        ("keep_revisions", -1, "greater_than_equal"),
        ("keep_revisions", 101, "less_than_equal"),
        ("expected_revision", -1, "greater_than_equal"),
        ("subject_id", "", "string_too_short"),
        ("subject_id", "s" * 201, "string_too_long"),
        ("agent_id", "", "string_pattern_mismatch"),
        ("agent_id", "Agent", "string_pattern_mismatch"),
        ("agent_id", "_agent", "string_pattern_mismatch"),
        ("agent_id", "-agent", "string_pattern_mismatch"),
        ("agent_id", "a.b", "string_pattern_mismatch"),
        ("agent_id", "a" * 65, "string_pattern_mismatch"),
        ("agent_id", "agent\n", "string_pattern_mismatch"),
        ("format", "", "string_too_short"),
        ("format", "f" * 101, "string_too_long"),
        ("lease_token", "", "string_too_short"),
        ("lease_token", "t" * 201, "string_too_long"),
    ],
)
def test_values_outside_the_documented_ranges_are_rejected(field: str, value: Any, error: str) -> None:
    # Given one field just outside its allowed values
    # When the body is validated
    errors = rejected(SaveCheckpointRequest, save_body(**{field: value}))
    # Then that field, and only it, is rejected for that reason
    assert errors == [((field,), error)]


@pytest.mark.parametrize("source_field", ["host", "session", "model"])
def test_each_source_field_is_limited_to_200_characters(source_field: str) -> None:
    # Given a source field one character too long
    # When the body is validated
    errors = rejected(SaveCheckpointRequest, save_body(source={source_field: "x" * 201}))
    # Then it is rejected at that nested field
    assert errors == [(("source", source_field), "string_too_long")]


def test_more_than_one_hundred_resources_are_rejected() -> None:
    # Given 101 resource references
    ref = {"name": "n", "blob_id": "b", "sha256": SHA, "size": 1, "media_type": "m"}
    # When validated
    errors = rejected(SaveCheckpointRequest, save_body(resources=[ref] * 101))
    # Then the array itself is rejected as too long
    assert errors == [(("resources",), "too_long")]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("sha256", "A" * 64, "string_pattern_mismatch"),
        ("sha256", "0" * 63, "string_pattern_mismatch"),
        ("size", -1, "greater_than_equal"),
        ("size", "1", "int_type"),
        ("name", "", "string_too_short"),
        ("blob_id", "", "string_too_short"),
        ("media_type", "", "string_too_short"),
    ],
)
def test_resource_references_are_validated_field_by_field(field: str, value: Any, error: str) -> None:
    # Given a resource reference with one bad field
    ref = {"name": "n", "blob_id": "b", "sha256": SHA, "size": 1, "media_type": "m", field: value}
    # When the body is validated
    errors = rejected(SaveCheckpointRequest, save_body(resources=[ref]))
    # Then the violation is located inside that reference
    assert errors == [(("resources", 0, field), error)]


@pytest.mark.parametrize(
    "subject_id",
    [
        "a\x00b",
        "tab\there",
        "new\nline",
        "cr\r",
        "\x1f",
        "del\x7f",
        "c1\x80",
        "nel\x85",
        "c1 end\x9f",
    ],
)
def test_subject_ids_with_control_characters_are_rejected(subject_id: str) -> None:
    # Given a subject id holding a C0 control, DEL or a C1 control
    # When the body is validated
    errors = rejected(SaveCheckpointRequest, save_body(subject_id=subject_id))
    # Then subject_id is rejected
    assert errors == [(("subject_id",), "string_pattern_mismatch")]


def test_subject_id_length_counts_characters_not_bytes() -> None:
    # Given 200 characters that take 800 bytes of UTF-8
    subject_id = "😀" * 200
    # When validated
    request = SaveCheckpointRequest.model_validate(save_body(subject_id=subject_id))
    # Then it is accepted: the limit is in characters
    assert request.subject_id == subject_id


@pytest.mark.parametrize("missing", ["subject_id", "kind", "state"])
def test_the_required_fields_are_required(missing: str) -> None:
    # Given a body without one required field
    body = {k: v for k, v in VALID_SAVE.items() if k != missing}
    # When it is validated
    errors = rejected(SaveCheckpointRequest, body)
    # Then that field is reported missing
    assert errors == [((missing,), "missing")]


def test_a_null_state_is_rejected() -> None:
    # Given a body whose state is null
    # When it is validated
    errors = rejected(SaveCheckpointRequest, save_body(state=None))
    # Then state is rejected by Baton's own rule
    assert errors == [(("state",), "value_error")]


def test_every_violation_is_reported_not_only_the_first() -> None:
    # Given a body with three independent mistakes
    body = {"subject_id": "", "kind": "nope", "state": None, "typo": 1}
    # When it is validated
    errors = rejected(SaveCheckpointRequest, body)
    # Then all four are reported
    assert sorted(loc[0] for loc, _ in errors) == ["kind", "state", "subject_id", "typo"]


# --- CreateKeyRequest -----------------------------------------------------------------------------------------


def test_a_key_request_with_every_field_is_accepted() -> None:
    # Given a key request using every field
    body = {
        "agent_id": "agent-1",
        "scopes": list(SCOPES),
        "tenant_id": "tenant_a",
        "not_before": "2026-07-30T11:48:04.652Z",
        "expires_at": "2026-08-30T11:48:04.652Z",
        "description": "d" * 500,
    }
    # When validated
    request = CreateKeyRequest.model_validate(body)
    # Then every value is kept
    assert request.model_dump() == body


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"scopes": []}, [(("scopes",), "too_short")]),
        ({"scopes": ["checkpoints:admin"]}, [(("scopes", 0), "literal_error")]),
        ({"scopes": ["checkpoints:read", "all"]}, [(("scopes", 1), "literal_error")]),
        ({"scopes": "checkpoints:read"}, [(("scopes",), "list_type")]),
        ({"scopes": [*SCOPES, "*"]}, [(("scopes",), "too_long")]),
        ({"agent_id": "Agent"}, [(("agent_id",), "string_pattern_mismatch")]),
        ({"tenant_id": "t" * 65}, [(("tenant_id",), "string_pattern_mismatch")]),
        ({"description": "d" * 501}, [(("description",), "string_too_long")]),
        ({"not_before": 1785412084652}, [(("not_before",), "string_type")]),
        ({"secret": "btn_x"}, [(("secret",), "extra_forbidden")]),
    ],
)
def test_key_requests_are_strict_and_closed(changes: dict[str, Any], expected: list[Any]) -> None:
    # Given a key request with one mistake
    # When it is validated
    errors = rejected(CreateKeyRequest, {**VALID_KEY, **changes})
    # Then exactly that mistake is reported
    assert errors == expected


@pytest.mark.parametrize("missing", ["agent_id", "scopes"])
def test_a_key_request_needs_agent_and_scopes(missing: str) -> None:
    # Given a key request without agent_id or scopes
    body = {k: v for k, v in VALID_KEY.items() if k != missing}
    # When validated
    errors = rejected(CreateKeyRequest, body)
    # Then the missing field is reported
    assert errors == [((missing,), "missing")]


# --- repr: what powertools formats into a debug message on every request ----------------------------------------


def test_a_requests_repr_shows_a_state_by_type_and_containers_and_long_text_by_size() -> None:
    # Given a save with a state, a list, a nested model and a source field longer than a repr shows
    body = save_body(
        state={"note": "private words"},
        resources=[{"name": "log", "blob_id": "blob_1", "sha256": SHA, "size": 0, "media_type": "text/plain"}],
        source={"host": "h" * 150},
        ttl_seconds=3600,
    )
    # When it is shown
    shown = repr(SaveCheckpointRequest.model_validate(body))
    # Then ids and numbers are shown as they are, everything else only by its type and size
    assert f"subject_id='{SUBJECT}'" in shown
    assert "ttl_seconds=3600" in shown
    assert "state='<dict>'" in shown
    assert "resources='<list of 1>'" in shown
    assert "source='<Source>'" in shown
    assert "private words" not in shown
    assert "blob_1" not in shown
    assert "h" * 101 not in repr(SaveCheckpointRequest.model_validate(body).source)
