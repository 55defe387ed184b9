"""OpenCheckpoint 0.1 through the api handler against moto: saves with `format: "opencheckpoint/0.1"` are validated
(every violation by pointer, nothing written), the seed's example round-trips byte for byte in canonical form, other
formats pass unvalidated, and `GET /v1/schemas/opencheckpoint-0.1.json` serves the schema file without a key.

Tests marked NEEDS_SAVE_HOOK pass once `plan_save` (domain/checkpoints.py) calls
`opencheckpoint.check_document(request.state)` when `request.format == opencheckpoint.FORMAT`.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import rfc8785

from baton_checkpoints.api.resolver import wired
from baton_checkpoints.domain.opencheckpoint import FORMAT, SCHEMA_FILE, schema_text
from baton_checkpoints.store import schema
from tests import proof_counts
from tests.builders import KIND, PLAIN
from tests.builders import SEED_DOCUMENT as SEED_EXAMPLE
from tests.integration.conftest import OPERATOR_SECRET, aws_world, put_key, table_items
from tests.integration.driver import ApiDriver, Result

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

SUITE = "opencheckpoint saves"
SCHEMA_PATH = "/v1/schemas/opencheckpoint-0.1.json"


@pytest.fixture(scope="module")
def aws(engine: str) -> Iterator[Any]:
    """One world for the module, per engine (a world costs ~0.5 s to build); each test works on a subject of its
    own."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture(scope="module")
def api(aws: Any) -> ApiDriver:
    """A driver holding an operator key of tenant `acme`."""
    from baton_checkpoints.api.app import app

    put_key(app.services(), OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "b" * 32)
    return ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def subject() -> str:
    """A subject no other test of the module saves under."""
    return f"ocp-{uuid.uuid4().hex}"


def seed() -> dict[str, Any]:
    return copy.deepcopy(SEED_EXAMPLE)


def subject_items(aws: Any, subject: str) -> list[dict[str, Any]]:
    """The items whose partition key names `subject` (its checkpoints)."""
    return [item for item in table_items(aws) if subject in item[schema.PK]["S"]]


def save_as(api: ApiDriver, subject: str, state: Any, key: str | None = None, **fields: Any) -> Result:
    """A save of `state` declared as OpenCheckpoint 0.1 (unless `fields` say otherwise), plain without `key`."""
    body = {"subject_id": subject, "kind": KIND, "state": state, "format": FORMAT, **fields}
    body = {name: value for name, value in body.items() if value is not None}
    return api.invoke("save_checkpoint", body=body, headers={"idempotency-key": key})


def lookup(api: ApiDriver, subject: str) -> Result:
    return api.invoke("lookup_checkpoint", query={"subject_id": subject, "kind": KIND})


def assert_refused(answer: Result) -> list[dict[str, str]]:
    """A 400 VALIDATION_ERROR whose violations all lie under /state; its `details.errors`."""
    assert answer.status == 400, answer.raw_body
    error = answer.error
    assert error["code"] == "VALIDATION_ERROR"
    errors: list[dict[str, str]] = error["details"]["errors"]
    assert errors
    for entry in errors:
        assert entry["pointer"].startswith("/state/") or entry["pointer"] == "/state"
        assert entry["message"].startswith(entry["pointer"] + " ")
    return errors


# -- saves: NEEDS_SAVE_HOOK ----------------------------------------------------------------------------------


def test_an_invalid_document_is_refused_with_every_pointer_and_nothing_is_written(
    api: ApiDriver, aws: Any, subject: str
) -> None:
    # NEEDS_SAVE_HOOK
    before = table_items(aws)
    document = seed()
    del document["task"]["title"]
    document["statements"][0]["kind"] = "rumour"
    document["statements"][1]["origin"]["type"] = "tool"
    document["operations"][0]["repeat_safe"] = "yes"
    key = f"key-{subject}"

    answer = save_as(api, subject, document, key)

    errors = assert_refused(answer)
    assert [entry["pointer"] for entry in errors] == [
        "/state/operations/0/repeat_safe",
        "/state/statements/0/kind",
        "/state/statements/1/origin/type",
        "/state/task/title",
    ]
    assert errors[1]["message"] == (
        "/state/statements/0/kind must be one of instruction, constraint, decision, observation, hypothesis, "
        "question, external."
    )
    assert "more" not in answer.error["details"]
    assert answer.error["message"].startswith("/state/operations/0/repeat_safe must be true or false.")
    # nothing was written: no checkpoint, and the idempotency key was not consumed either
    assert table_items(aws) == before
    assert save_as(api, subject, seed(), key).status == 201
    proof_counts.record(SUITE, refused_saves=1)


@pytest.mark.parametrize(
    ("state", "pointer"),
    [
        ({"task": {"title": "t", "status": "s"}}, "/state/opencheckpoint"),
        ({"opencheckpoint": "0.1", "task": "t"}, "/state/task"),
        (["opencheckpoint", "0.1"], "/state"),
        ({"opencheckpoint": "0.1", "task": {"title": "t", "status": ""}}, "/state/task/status"),
    ],
    ids=["version-missing", "task-a-string", "state-an-array", "status-empty"],
)
def test_a_broken_document_is_refused_by_its_pointer(
    api: ApiDriver, aws: Any, subject: str, state: Any, pointer: str
) -> None:
    # NEEDS_SAVE_HOOK
    before = table_items(aws)
    errors = assert_refused(save_as(api, subject, state))
    assert [entry["pointer"] for entry in errors] == [pointer]
    assert table_items(aws) == before
    proof_counts.record(SUITE, refused_saves=1)


def test_a_document_with_over_fifty_violations_lists_fifty_and_counts_the_rest(
    api: ApiDriver, aws: Any, subject: str
) -> None:
    # NEEDS_SAVE_HOOK
    document = seed()
    document["statements"] = [{} for _ in range(40)]  # three missing members each
    before = table_items(aws)

    answer = save_as(api, subject, document)

    errors = assert_refused(answer)
    assert len(errors) == 50
    assert answer.error["details"]["more"] == 70
    assert table_items(aws) == before
    proof_counts.record(SUITE, refused_saves=1)


def test_an_invalid_update_leaves_the_stored_revision_as_it_was(api: ApiDriver, aws: Any, subject: str) -> None:
    # NEEDS_SAVE_HOOK
    assert save_as(api, subject, seed()).status == 201
    stored = subject_items(aws, subject)
    assert stored
    broken = seed()
    broken["continuation"]["stop_conditions"] = [{"description": ""}]

    answer = save_as(api, subject, broken)

    pointers = [entry["pointer"] for entry in assert_refused(answer)]
    assert pointers == ["/state/continuation/stop_conditions/0/description"]
    assert subject_items(aws, subject) == stored
    assert lookup(api, subject).data["revision"] == 1
    proof_counts.record(SUITE, refused_saves=1)


def test_an_invalid_document_is_a_400_before_a_revision_conflict(api: ApiDriver, subject: str) -> None:
    # NEEDS_SAVE_HOOK: the contract ranks 400 before 409
    assert save_as(api, subject, seed()).status == 201
    wrong_version = {"opencheckpoint": "0.2", "task": {"title": "t", "status": "s"}}

    answer = save_as(api, subject, wrong_version, expected_revision=7)

    assert [entry["pointer"] for entry in assert_refused(answer)] == ["/state/opencheckpoint"]
    proof_counts.record(SUITE, refused_saves=1)


# -- saves that pass today, and keep passing with the hook ----------------------------------------------------


def test_the_seed_example_saves_and_reads_back_byte_for_byte_in_canonical_form(api: ApiDriver, subject: str) -> None:
    canonical = rfc8785.dumps(SEED_EXAMPLE)

    created = save_as(api, subject, seed(), f"key-{subject}")

    assert created.status == 201, created.raw_body
    assert created.data["state_hash"] == hashlib.sha256(canonical).hexdigest()
    assert created.data["state_bytes"] == len(canonical)
    read = lookup(api, subject)
    assert read.status == 200
    assert read.data["format"] == FORMAT
    assert read.data["state"] == SEED_EXAMPLE
    # the record carries the state as its canonical bytes, spliced in as they are
    assert b'"state":' + canonical + b"}" in read.raw_body.encode("utf-8")
    by_id = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{created.data['checkpoint_id']}")
    assert by_id.status == 200
    assert b'"state":' + canonical + b"}" in by_id.raw_body.encode("utf-8")
    proof_counts.record(SUITE, accepted_saves=1)


def test_unknown_fields_of_a_fuller_draft_round_trip(api: ApiDriver, subject: str) -> None:
    document = seed()
    document["x-vendor"] = {"trace": [1, 2.5, None, True]}
    document["task"]["priority"] = "high"
    document["statements"][0]["origin"]["url"] = "https://billing.example/ch_2"
    document["resources"] = [{"system": "stripe", "key": "ch_2", "fetched_at": "2026-07-30T11:48:04.652Z"}]

    assert save_as(api, subject, document).status == 201

    read = lookup(api, subject)
    assert read.data["state"] == document
    assert b'"state":' + rfc8785.dumps(document) + b"}" in read.raw_body.encode("utf-8")
    proof_counts.record(SUITE, accepted_saves=1)


@pytest.mark.parametrize("declared", ["x/1", None], ids=["another-format", "no-format"])
def test_a_state_of_another_format_or_none_is_not_validated(api: ApiDriver, subject: str, declared: str | None) -> None:
    not_opencheckpoint = {"opencheckpoint": 2, "task": "anything", "statements": "free text"}

    answer = save_as(api, subject, not_opencheckpoint, format=declared)

    assert answer.status == 201, answer.raw_body
    read = lookup(api, subject).data
    assert read["state"] == not_opencheckpoint
    assert read.get("format") == declared
    proof_counts.record(SUITE, accepted_saves=1)


# -- GET /v1/schemas/{name} ------------------------------------------------------------------------------------


@contextmanager
def without_aws() -> Iterator[None]:
    """The handler serves with services that fail the test if anything asks for them (the module's moto world,
    if any, is put back after)."""
    from baton_checkpoints.api.app import app

    def no_services() -> Any:
        raise AssertionError("GET /v1/schemas must not touch AWS")

    previous = app.dependency_overrides.get(wired)
    app.dependency_overrides[wired] = no_services
    try:
        yield
    finally:
        if previous is None:
            app.dependency_overrides.pop(wired, None)
        else:
            app.dependency_overrides[wired] = previous


ANONYMOUS = ApiDriver("btn_not_a_real_key")
"""A driver whose key exists nowhere: the schema routes must not care."""


def get_schema(path: str = SCHEMA_PATH, authorization: str | None = None) -> Result:
    """GET `path` with the sample health event, with no Authorization header unless one is given."""
    with without_aws():
        return ANONYMOUS.invoke("health", path=path, headers={"authorization": authorization})


@pytest.mark.parametrize(
    "authorization", [None, "Bearer btn_not_a_real_key"], ids=["without-a-key", "with-an-unknown-key"]
)
def test_the_schema_is_served_without_a_key_as_the_file_and_without_aws(authorization: str | None) -> None:
    answer = get_schema(authorization=authorization)

    assert answer.status == 200, answer.raw_body
    assert answer.header("Content-Type") == "application/schema+json"
    assert answer.raw_body.encode("utf-8") == schema_text()
    assert answer.body["$id"] == "https://baton.dev/v1/schemas/opencheckpoint-0.1.json"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/schemas/nope.json",
        "/v1/schemas/opencheckpoint-0.1",
        "/v1/schemas/opencheckpoint-0.2.json",
        "/v1/schemas/OPENCHECKPOINT-0.1.json",
        "/v1/schemas/opencheckpoint-0.1.json.bak",
    ],
    ids=["unknown", "no-extension", "other-version", "other-case", "suffixed"],
)
def test_any_other_schema_name_is_the_contract_404(path: str) -> None:
    answer = get_schema(path)

    assert answer.status == 404, answer.raw_body
    assert answer.header("Content-Type") == "application/json"
    assert answer.error == {"code": "NOT_FOUND", "message": "Resource was not found."}
    assert answer.body["meta"]["request_id"]


def test_the_served_names_are_the_formats_schema_files() -> None:
    from baton_checkpoints.api.routers import meta

    assert set(meta.SCHEMA_FILES) == {SCHEMA_FILE}


def test_the_schema_route_takes_only_get() -> None:
    with without_aws():
        answer = ANONYMOUS.invoke("save_checkpoint", path=SCHEMA_PATH, headers={"authorization": None, **PLAIN})
    assert answer.status == 405, answer.raw_body
    assert answer.header("Allow") == "GET"
