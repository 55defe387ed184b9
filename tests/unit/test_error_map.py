"""The one error map: domain errors to HTTP statuses, and pydantic's findings to the contract's sentences."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from baton_checkpoints.api.errors import STATUS, field_errors, headers_of, status_of
from baton_checkpoints.domain import errors as e
from baton_checkpoints.domain.access import SCOPES
from baton_checkpoints.domain.lifecycle import KINDS, STATUSES
from baton_checkpoints.domain.models import CreateKeyRequest, SaveCheckpointRequest

VALID_SAVE: dict[str, Any] = {"subject_id": "ticket-42", "kind": "task_state", "state": {"step": 1}}


def body_errors(model: type[SaveCheckpointRequest] | type[CreateKeyRequest], body: Any) -> list[dict[str, Any]]:
    """The real pydantic errors of `body`, located in the request body as the resolver reports them."""
    with pytest.raises(ValidationError) as exc:
        model.model_validate(body)
    return [{**err, "loc": ("body", *err["loc"])} for err in exc.value.errors()]


def save_errors(**changes: Any) -> list[e.FieldError]:
    """The field errors of a save body with some fields changed."""
    return field_errors(body_errors(SaveCheckpointRequest, {**VALID_SAVE, **changes}))


def one(found: list[e.FieldError]) -> e.FieldError:
    """The only field error of a list."""
    assert len(found) == 1, found
    return found[0]


# --- status_of ------------------------------------------------------------------------------------------------


class NewKindOfError(e.BatonError):
    """A domain error nobody mapped yet."""

    code = "SOMETHING_NEW"


class StaleEntityTag(e.RevisionConflict):
    """A subclass of a mapped error."""


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (e.ValidationFailed.single("/kind", "bad"), 400, "VALIDATION_ERROR"),
        (e.Unauthenticated("no key"), 401, "UNAUTHENTICATED"),
        (e.Forbidden("no scope"), 403, "FORBIDDEN"),
        (e.NotFound(), 404, "NOT_FOUND"),
        (e.MethodNotAllowed("GET", ["POST"]), 405, "METHOD_NOT_ALLOWED"),
        (e.RevisionConflict(expected=1, current=2), 409, "REVISION_CONFLICT"),
        (e.CheckpointClosed("completed"), 409, "CHECKPOINT_CLOSED"),
        (e.PayloadTooLarge("/state", 10, 11, "/state"), 413, "PAYLOAD_TOO_LARGE"),
        (e.UnsupportedMediaType("text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE"),
        (e.IdempotencyKeyReused(), 422, "IDEMPOTENCY_KEY_REUSED"),
        (e.Unavailable(), 503, "UNAVAILABLE"),
    ],
)
def test_each_domain_error_maps_to_the_contracts_status_and_code(error: e.BatonError, status: int, code: str) -> None:
    # Given a domain error of each class
    # When its HTTP status is looked up
    # Then it is the status the contract's error table gives its code
    assert status_of(error) == status
    assert error.code == code


@pytest.mark.parametrize("error", [NewKindOfError("x"), e.BatonError("x")])
def test_an_unmapped_domain_error_is_a_500(error: e.BatonError) -> None:
    # Given a BatonError class the map does not know (or the base class itself)
    # When its status is looked up
    # Then it is 500, the status of a defect
    assert status_of(error) == 500
    assert e.BatonError("x").code == "INTERNAL"


def test_a_subclass_takes_the_status_of_its_mapped_parent() -> None:
    # Given a subclass of RevisionConflict
    # When its status is looked up
    # Then the class hierarchy is followed to 409
    assert status_of(StaleEntityTag(expected=1, current=2)) == 409


def test_every_concrete_domain_error_class_is_mapped() -> None:
    # Given every error class the domain defines
    defined = {cls for cls in vars(e).values() if isinstance(cls, type) and issubclass(cls, e.BatonError)}
    # Then each but the base class has its own entry in the map
    assert defined - {e.BatonError} == set(STATUS)


@pytest.mark.parametrize(
    ("error", "headers"),
    [
        (e.Unavailable(retry_after=7), {"Retry-After": "7"}),
        (e.Unavailable(), {"Retry-After": "1"}),
        (e.MethodNotAllowed("GET", ["DELETE", "POST"]), {"Allow": "DELETE, POST"}),
        (e.Unauthenticated("no key"), {"WWW-Authenticate": 'Bearer realm="baton"'}),
        (e.NotFound(), {}),
        (e.ValidationFailed.single("", "bad"), {}),
    ],
)
def test_error_answers_carry_the_headers_their_status_calls_for(error: e.BatonError, headers: dict[str, str]) -> None:
    # Given an error
    # When its headers are looked up
    # Then 503 says when to retry, 405 what is allowed, 401 how to authenticate, and the others nothing
    assert headers_of(error) == headers


# --- field_errors: pointers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "pointer"),
    [
        ({"kind": "nope"}, "/kind"),
        ({"ttl_seconds": 1}, "/ttl_seconds"),
        ({"source": {"hostx": "h"}}, "/source/hostx"),
        ({"source": {"host": 1}}, "/source/host"),
        ({"resources": [{"name": "n", "blob_id": "b", "sha256": "x", "size": 1, "media_type": "m"}]}, None),
        ({"a/b~c": 1}, "/a~1b~0c"),
    ],
)
def test_field_errors_point_at_the_field_from_the_bodys_root(changes: dict[str, Any], pointer: str | None) -> None:
    # Given a body with one bad field, at the top, nested, in an array, or with a name that needs escaping
    # When pydantic's errors are turned into field errors
    found = one(save_errors(**changes))
    # Then the pointer is the RFC 6901 pointer from the body's root ("body" is not part of it), and so is the subject
    expected = pointer or "/resources/0/sha256"
    assert found.pointer == expected
    assert found.location == "body"
    assert found.message.startswith(expected + " ")


def test_optional_constrained_fields_report_no_branch_names() -> None:
    # Given optional constrained fields with bad values (a union of the constraint and None)
    found = save_errors(ttl_seconds="60", agent_id="Bad!", expected_revision=-1, lease_token="")
    # When turned into field errors
    # Then the pointers are the field names only, never pydantic's internal branch names
    assert sorted(f.pointer for f in found) == ["/agent_id", "/expected_revision", "/lease_token", "/ttl_seconds"]
    assert not any("constrained" in f.message or "function" in f.message for f in found)


def test_each_violation_becomes_its_own_field_error() -> None:
    # Given a body with three mistakes
    raw = body_errors(SaveCheckpointRequest, {"subject_id": "", "kind": "x", "state": {}, "extra": 1})
    # When turned into field errors
    found = field_errors(raw)
    # Then there is one entry per violation, in pydantic's order
    assert [f.pointer for f in found] == ["/subject_id", "/kind", "/extra"]
    failure = e.ValidationFailed(found)
    assert len(failure.details()["errors"]) == 3
    assert failure.message.endswith("(2 more errors in details.errors)")


# --- field_errors: sentences ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ttl_seconds": "60"}, "/ttl_seconds must be an integer."),
        ({"ttl_seconds": True}, "/ttl_seconds must be an integer."),
        ({"ttl_seconds": 59}, "/ttl_seconds must be at least 60."),
        ({"ttl_seconds": 2_592_001}, "/ttl_seconds must be at most 2592000."),
        ({"keep_revisions": 101}, "/keep_revisions must be at most 100."),
        ({"subject_id": 5}, "/subject_id must be a string."),
        ({"subject_id": ""}, "/subject_id must be at least 1 characters long."),
        ({"subject_id": "s" * 201}, "/subject_id must be at most 200 characters long."),
        ({"subject_id": "a\nb"}, "/subject_id must not contain control characters."),
        ({"subject_id": "a\x85b"}, "/subject_id must not contain control characters."),
        ({"agent_id": "Bad"}, "/agent_id must match the pattern ^[a-z0-9][a-z0-9_-]{0,63}$."),
        ({"state": None}, "/state must not be null."),
        ({"extra": 1}, "/extra is not a known field; remove it or check its spelling."),
        ({"source": {"hostx": "h"}}, "/source/hostx is not a known field; remove it or check its spelling."),
        ({"source": "laptop"}, "/source must be an object."),
        ({"resources": "none"}, "/resources must be an array."),
        ({"resources": [{}] * 101}, "/resources must have at most 100 items."),
    ],
)
def test_field_errors_say_which_rule_the_field_broke(changes: dict[str, Any], message: str) -> None:
    # Given a body with one bad field
    # When turned into field errors
    # Then the message is one sentence naming the field and the rule
    assert one(save_errors(**changes)).message == message


@pytest.mark.parametrize("missing", ["subject_id", "kind", "state"])
def test_a_missing_field_is_named_as_required(missing: str) -> None:
    # Given a body without a required field
    body = {k: v for k, v in VALID_SAVE.items() if k != missing}
    # When turned into field errors
    found = one(field_errors(body_errors(SaveCheckpointRequest, body)))
    # Then the field is named as required
    assert (found.pointer, found.message) == (f"/{missing}", f"/{missing} is required.")


@pytest.mark.parametrize(
    ("field", "allowed"),
    [("kind", KINDS), ("status", STATUSES)],
)
def test_a_closed_set_violation_lists_every_allowed_value(field: str, allowed: tuple[str, ...]) -> None:
    # Given a value outside a closed set
    # When turned into field errors
    found = one(save_errors(**{field: "nope"}))
    # Then the message lists every allowed value, and only those
    assert found.message == f"/{field} must be one of: {', '.join(allowed)}."


def test_a_bad_scope_lists_every_scope() -> None:
    # Given a key request with an unknown scope
    raw = body_errors(CreateKeyRequest, {"agent_id": "a", "scopes": ["checkpoints:read", "everything"]})
    # When turned into field errors
    found = one(field_errors(raw))
    # Then the array item is named and every scope, `*` included, is listed
    assert found.pointer == "/scopes/1"
    listed = found.message.removeprefix("/scopes/1 must be one of: ").removesuffix(".").split(", ")
    assert listed == list(SCOPES)


def test_a_body_that_is_not_an_object_is_named_as_the_body() -> None:
    # Given a JSON array where an object is expected
    raw = body_errors(SaveCheckpointRequest, [1, 2])
    # When turned into field errors
    found = one(field_errors(raw))
    # Then the root is named, in words
    assert found.pointer == ""
    assert found.message == "The body must be an object."


def test_a_missing_body_is_reported_as_required() -> None:
    # Given the error the resolver reports when there is no body at all
    raw = [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
    # When turned into field errors
    found = one(field_errors(raw))
    # Then it says a JSON object body is required
    assert (found.pointer, found.message) == ("", "The body is required and must be a JSON object.")


# --- field_errors: query and path parameters ------------------------------------------------------------------


def test_a_query_parameter_is_named_as_one_and_located_in_the_query() -> None:
    # Given a literal error on the kind query parameter (as the resolver reports it)
    expected = "'task_state', 'conversation', 'workflow' or 'cursor'"
    raw = [{"type": "literal_error", "loc": ("query", "kind"), "msg": "...", "ctx": {"expected": expected}}]
    # When turned into field errors
    found = one(field_errors(raw))
    # Then the pointer is /kind, located in the query, and the sentence names the parameter and every value
    assert (found.pointer, found.location) == ("/kind", "query")
    assert found.message == "The query parameter kind must be one of: task_state, conversation, workflow, cursor."
    assert found.as_detail() == {"pointer": "/kind", "message": found.message, "in": "query"}


@pytest.mark.parametrize(
    ("item", "pointer", "location", "message"),
    [
        (
            {"type": "missing", "loc": ("query", "subject_id"), "msg": "Field required"},
            "/subject_id",
            "query",
            "The query parameter subject_id is required.",
        ),
        (
            {"type": "less_than_equal", "loc": ("query", "limit"), "msg": "...", "ctx": {"le": 200}},
            "/limit",
            "query",
            "The query parameter limit must be at most 200.",
        ),
        (
            {"type": "string_too_long", "loc": ("path", "subject_id"), "msg": "...", "ctx": {"max_length": 200}},
            "/subject_id",
            "path",
            "The path parameter subject_id must be at most 200 characters long.",
        ),
        (
            {"type": "string_too_long", "loc": ("header", "idempotency-key"), "msg": "...", "ctx": {"max_length": 200}},
            "/Idempotency-Key",
            "header",
            "The Idempotency-Key header must be at most 200 characters long.",
        ),
    ],
)
def test_parameters_are_located_where_they_were_sent(
    item: dict[str, Any], pointer: str, location: str, message: str
) -> None:
    # Given a violation in a query parameter, a path parameter or a header
    # When turned into field errors
    found = one(field_errors([item]))
    # Then pointer, location and sentence say where it was
    assert (found.pointer, found.location, found.message) == (pointer, location, message)


def test_an_unknown_error_type_still_names_the_field() -> None:
    # Given an error type the map has no sentence for
    raw = [{"type": "uuid_parsing", "loc": ("body", "x"), "msg": "Input should be a valid UUID"}]
    # When turned into field errors
    # Then pydantic's own message follows the field's name
    assert one(field_errors(raw)).message == "/x: Input should be a valid UUID."


def test_no_errors_at_all_still_yields_one_violation() -> None:
    # Given an empty error list
    # When turned into field errors
    # Then there is one generic violation, so ValidationFailed can always be built
    found = one(field_errors([]))
    assert found.message == "The request is not valid."
    assert e.ValidationFailed(field_errors([])).message == "The request is not valid."


def test_an_unknown_route_says_what_was_asked_and_where_the_routes_are() -> None:
    from baton_checkpoints.domain.errors import NotFound, UnknownRoute

    short = UnknownRoute("GET", "/v1/chekpoints")
    long = UnknownRoute("POST", "/v1/" + "x" * 500 + "\x1b[31m")
    assert isinstance(short, NotFound)
    assert short.code == "NOT_FOUND"
    assert short.message == "No route matches GET /v1/chekpoints; the routes are listed at /v1/openapi.json."
    # A hostile path is cut, and no control character reaches the answer
    assert len(long.message) < 300
    assert "\x1b" not in long.message
    assert "…;" in long.message
