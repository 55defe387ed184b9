"""Routes: every sample event, the error envelope, and which check answers first when several fail."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import hash_secret
from baton_checkpoints.handlers.api import handler
from tests.builders import SUBJECT, save, save_body
from tests.integration.driver import EVENTS, ApiDriver, Result, load_event

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""


def send(event: dict[str, Any]) -> Result:
    """Hand an event, exactly as given, to the api handler."""
    answer = handler(event, None)
    return Result(answer["statusCode"], dict(answer.get("headers") or {}), answer.get("body") or "")


def sample(name: str, secret: str) -> dict[str, Any]:
    """A sample event with the test's bearer key in place of the example one."""
    event = load_event(name)
    if "authorization" in event["headers"]:
        event["headers"]["authorization"] = f"Bearer {secret}"
    return event


def assert_envelope(answer: Result, status: int, code: str, request_id: str) -> dict[str, Any]:
    """The contract's error envelope: exactly error{code, message[, details]} and meta{request_id}."""
    assert answer.status == status, answer.raw_body
    assert answer.header("Content-Type") == "application/json"
    assert set(answer.body) == {"error", "meta"}
    assert answer.body["meta"] == {"request_id": request_id}
    error = answer.error
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert set(error) <= {"code", "message", "details"}
    return error


# -- every sample event ------------------------------------------------------------------------------------


def test_health_answers_without_any_key(api: ApiDriver) -> None:
    # Given the sample health event, which carries no Authorization header
    event = sample("health", api.secret)
    assert "authorization" not in event["headers"]
    answer = send(event)
    assert answer.status == 200
    assert answer.data["status"] == "ok"
    assert answer.body["meta"] == {"request_id": event["requestContext"]["requestId"]}


def test_the_openapi_document_is_served_without_a_key(api: ApiDriver) -> None:
    # Given the sample OpenAPI event (no key)
    event = sample("openapi", api.secret)
    answer = send(event)
    # Then a JSON OpenAPI document describing the checkpoint routes comes back
    assert answer.status == 200
    document = json.loads(answer.raw_body)
    assert document["openapi"].startswith("3.")
    assert "/v1/checkpoints" in document["paths"]
    assert "/v1/keys" in document["paths"]


def test_the_sample_save_lookup_get_list_and_delete_events_work_on_a_real_checkpoint(api: ApiDriver) -> None:
    saved = send(sample("save_checkpoint", api.secret))
    assert saved.status == 201
    checkpoint_id = saved.data["checkpoint_id"]
    # When the sample lookup, get, list and delete events are sent with the real id in their paths
    looked_up = send(sample("lookup_checkpoint", api.secret))
    get_event = sample("get_checkpoint", api.secret)
    get_event["rawPath"] = get_event["requestContext"]["http"]["path"] = f"/v1/checkpoints/{checkpoint_id}"
    got = send(get_event)
    listed = send(sample("list_subject_checkpoints", api.secret))
    delete_event = sample("delete_checkpoint", api.secret)
    delete_event["rawPath"] = delete_event["requestContext"]["http"]["path"] = f"/v1/checkpoints/{checkpoint_id}"
    delete_event["headers"]["if-match"] = saved.header("ETag")
    deleted = send(delete_event)
    # Then each answers as the contract says
    assert looked_up.status == 200
    assert looked_up.data["state"] == {"step": 3, "of": 7, "pending": ["rollback smoke"]}
    assert looked_up.header("ETag") == f'W/"{checkpoint_id}:1"'
    assert got.status == 200
    assert got.data == looked_up.data
    assert listed.status == 200
    assert [c["checkpoint_id"] for c in listed.data] == [checkpoint_id]
    assert "state" not in listed.data[0]
    assert listed.body["meta"]["next_cursor"] is None
    assert deleted.status == 200
    assert deleted.data == {"checkpoint_id": checkpoint_id, "deleted": True}
    assert send(get_event).status == 404


def test_the_sample_delete_event_with_a_stale_if_match_is_a_conflict(api: ApiDriver) -> None:
    # Given a checkpoint at revision 2
    checkpoint_id = save(api).data["checkpoint_id"]
    assert save(api, state={"step": 2}).data["revision"] == 2
    # When the sample delete event carries the tag of revision 1
    event = sample("delete_checkpoint", api.secret)
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/checkpoints/{checkpoint_id}"
    event["headers"]["if-match"] = f'W/"{checkpoint_id}:1"'
    answer = send(event)
    # Then it is 409 REVISION_CONFLICT naming the current revision, and the checkpoint stays
    error = assert_envelope(answer, 409, "REVISION_CONFLICT", event["requestContext"]["requestId"])
    assert error["details"] == {"current_revision": 2}
    assert api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}").status == 200


def test_the_sample_key_events_create_list_and_revoke_a_real_key(api: ApiDriver) -> None:
    # Given the sample create-key event
    created = send(sample("create_key", api.secret))
    assert created.status == 201
    key_id = created.data["key_id"]
    # When the sample list and revoke events are sent, revoke with the real key id
    listed = send(sample("list_keys", api.secret))
    revoke_event = sample("revoke_key", api.secret)
    revoke_event["rawPath"] = revoke_event["requestContext"]["http"]["path"] = f"/v1/keys/{key_id}"
    revoked = send(revoke_event)
    # Then the key was listed without its secret, and is revoked
    assert listed.status == 200
    assert key_id in [k["key_id"] for k in listed.data]
    assert created.data["secret"] not in listed.raw_body
    assert hash_secret(created.data["secret"]) not in listed.raw_body
    assert revoked.status == 200
    assert revoked.data == {"key_id": key_id, "deleted": True}
    assert api.invoke("lookup_checkpoint", secret=created.data["secret"]).status == 401


def test_the_sample_revoke_event_for_an_unknown_key_is_404(api: ApiDriver) -> None:
    # Given the sample revoke event, naming a key that does not exist
    event = sample("revoke_key", api.secret)
    answer = send(event)
    error = assert_envelope(answer, 404, "NOT_FOUND", event["requestContext"]["requestId"])
    assert error == {"code": "NOT_FOUND", "message": "Resource was not found."}


SHIPPED_EVENTS = sorted(
    p.stem for p in EVENTS.glob("*.json") if json.loads(p.read_text(encoding="utf-8")).get("version") == "2.0"
)
SAMPLE_CHECKPOINT_ID = "ckpt_0123456789abcdef0123456789abcdef"
SAMPLE_KEY_ID = "key_019ad1c2b3f4e5d6a7b8c9d0e1f2a3b4"
SAMPLE_BLOB_ID = "blob_0123456789abcdef0123456789abcdef"
EXPECTED_STATUS = {
    "health": 200,
    "openapi": 200,
    "save_checkpoint": 200,
    "lookup_checkpoint": 200,
    "get_checkpoint": 200,
    "delete_checkpoint": 200,
    "list_subject_checkpoints": 200,
    "create_key": 201,
    "list_keys": 200,
    "revoke_key": 200,
    "create_blob": 201,
    "get_blob": 200,
    "list_revisions": 200,
    "get_revision": 200,
    "restore_checkpoint": 200,
    "acquire_lease": 201,
    "release_lease": 200,
    "purge_subject": 200,
    "resume": 200,
    "mcp_tools_call": 200,
    "whoami": 200,
    "console_page": 200,
    "get_limits": 200,
    "get_usage": 200,
    "get_audit": 200,
    "put_limits": 200,
}
HISTORY_EVENTS = frozenset({"list_revisions", "get_revision", "restore_checkpoint"})
"""Samples that need a kept revision: the checkpoint is saved again (revision 2, keeping revision 1)."""


def _substitute(event: dict[str, Any], old: str, new: str) -> None:
    event["rawPath"] = event["rawPath"].replace(old, new)
    event["requestContext"]["http"]["path"] = event["requestContext"]["http"]["path"].replace(old, new)
    for name, value in event["headers"].items():
        event["headers"][name] = value.replace(old, new)


@pytest.mark.parametrize("name", SHIPPED_EVENTS)
def test_each_sample_event_succeeds_once_its_ids_name_real_things(api: ApiDriver, name: str) -> None:
    # Given a real checkpoint (revision 1) of the samples' subject and kind, and a real key
    checkpoint_id = save(api).data["checkpoint_id"]
    if name in HISTORY_EVENTS:
        assert save(api, state={"step": 2}, keep_revisions=3).data["revision"] == 2
    key_id = api.invoke("create_key").data["key_id"]
    blob_id = api.invoke("create_blob", headers={"idempotency-key": None}).data["blob_id"]
    # When the sample event is sent with those ids in place of the example ones
    event = sample(name, api.secret)
    _substitute(event, SAMPLE_CHECKPOINT_ID, checkpoint_id)
    _substitute(event, SAMPLE_KEY_ID, key_id)
    _substitute(event, SAMPLE_BLOB_ID, blob_id)
    answer = send(event)
    # Then it succeeds with the status the contract gives it (every shipped event must be listed here)
    assert name in EXPECTED_STATUS, f"events/{name}.json has no expectation in this test"
    assert answer.status == EXPECTED_STATUS[name], answer.raw_body
    if name == "mcp_tools_call":
        # A JSON-RPC answer (no envelope): the tool's result, not an error
        assert answer.body["result"]["isError"] is False, answer.raw_body
    elif name == "console_page":
        # The console's page: HTML, not the envelope
        assert answer.headers["Content-Type"].startswith("text/html"), answer.headers
    elif name != "openapi":
        assert answer.body["meta"]["request_id"] == event["requestContext"]["requestId"]


def test_every_sample_request_is_shipped() -> None:
    # Given the events/ directory
    # Then it holds one sample request per route this suite drives
    assert set(SHIPPED_EVENTS) == set(EXPECTED_STATUS)


# -- unknown paths and methods ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_name", "path", "allowed"),
    [
        ("delete_checkpoint", "/v1/checkpoints", "GET, POST"),
        ("save_checkpoint", "/v1/health", "GET"),
        ("save_checkpoint", "/v1/checkpoints/ckpt_0123456789abcdef0123456789abcdef", "DELETE, GET"),
        ("revoke_key", "/v1/subjects/user_rama/checkpoints", "GET"),
    ],
)
def test_a_known_path_with_another_method_is_405(api: ApiDriver, event_name: str, path: str, allowed: str) -> None:
    # Given a path that exists, sent with a method it does not take
    event = load_event(event_name)
    event["headers"]["authorization"] = f"Bearer {api.secret}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    answer = send(event)
    error = assert_envelope(answer, 405, "METHOD_NOT_ALLOWED", event["requestContext"]["requestId"])
    assert "details" not in error
    assert answer.header("Allow") == allowed


@pytest.mark.parametrize("authorization", [True, False], ids=["with-key", "without-key"])
def test_an_unknown_path_is_the_404_envelope(api: ApiDriver, authorization: bool) -> None:
    # Given a path no route has
    event = load_event("get_checkpoint")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/nothing/here"
    if authorization:
        event["headers"]["authorization"] = f"Bearer {api.secret}"
    else:
        event["headers"].pop("authorization")
    answer = send(event)
    # Then it is the contract's 404, with no details, saying the route is unknown and where the routes are listed
    error = assert_envelope(answer, 404, "NOT_FOUND", event["requestContext"]["requestId"])
    assert error == {
        "code": "NOT_FOUND",
        "message": "No route matches GET /v1/nothing/here; the routes are listed at /v1/openapi.json.",
    }


def test_unknown_paths_and_methods_leave_nothing_behind_in_the_container(api: ApiDriver) -> None:
    # Given a warm container that served its routes once
    from baton_checkpoints.handlers.api import app

    assert api.invoke("health").status == 200
    remembered = (len(app._directs), len(app._evaluated))
    # When it answers many unknown paths and wrong methods (powertools makes a route afresh for each)
    for n in range(40):
        event = load_event("get_checkpoint")
        event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/nothing/{n}"
        assert send(event).status == 404
        event = load_event("delete_checkpoint")
        event["headers"]["authorization"] = f"Bearer {api.secret}"
        event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/health"
        assert send(event).status == 405
    # Then it remembers nothing more of them than before
    assert (len(app._directs), len(app._evaluated)) == remembered


# -- the error envelope ----------------------------------------------------------------------------------


def test_an_error_without_details_omits_the_field_and_echoes_the_event_request_id(api: ApiDriver) -> None:
    # Given a lookup of a checkpoint that does not exist
    event = sample("lookup_checkpoint", api.secret)
    answer = send(event)
    # Then the envelope carries code, message, the event's request id, and no details key at all (not null)
    error = assert_envelope(answer, 404, "NOT_FOUND", event["requestContext"]["requestId"])
    assert "details" not in error
    assert '"details"' not in answer.raw_body


def test_a_401_has_the_envelope_without_details(api: ApiDriver) -> None:
    # Given the sample lookup event without its key
    event = sample("lookup_checkpoint", api.secret)
    event["headers"].pop("authorization")
    answer = send(event)
    error = assert_envelope(answer, 401, "UNAUTHENTICATED", event["requestContext"]["requestId"])
    assert "details" not in error


def test_a_validation_error_lists_each_violation_by_pointer(api: ApiDriver) -> None:
    # Given a save body with an unknown field and a kind outside the closed set
    event = sample("save_checkpoint", api.secret)
    event["body"] = json.dumps({"subject_id": SUBJECT, "kind": "diary", "state": {}, "colour": "red"})
    answer = send(event)
    # Then it is 400 with one entry per violation, each naming its pointer; the closed set is listed
    error = assert_envelope(answer, 400, "VALIDATION_ERROR", event["requestContext"]["requestId"])
    by_pointer = {e["pointer"]: e["message"] for e in error["details"]["errors"]}
    assert set(by_pointer) == {"/kind", "/colour"}
    for allowed in ("task_state", "conversation", "workflow", "cursor"):
        assert allowed in by_pointer["/kind"]
    assert "/colour" in by_pointer["/colour"]


# -- which check answers first ---------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_no_key_and_an_invalid_body_is_401(api: ApiDriver, content_type: str) -> None:
    # Given a save without a key whose body is not even JSON (and, in one case, not declared as JSON either)
    event = sample("save_checkpoint", api.secret)
    event["headers"].pop("authorization")
    event["headers"]["content-type"] = content_type
    event["body"] = "{not json"
    answer = send(event)
    # Then authentication answers first
    assert_envelope(answer, 401, "UNAUTHENTICATED", event["requestContext"]["requestId"])


def test_a_key_lacking_the_scope_and_an_invalid_body_is_403(api: ApiDriver, services: Any) -> None:
    # Given a read-only key sending a save whose body is invalid
    from tests.integration.conftest import put_key

    put_key(services, "btn_test_reader_secret_00001", "acme", "reader", {"checkpoints:read"}, "key_" + "3" * 32)
    event = sample("save_checkpoint", "btn_test_reader_secret_00001")
    event["body"] = json.dumps({"kind": "diary"})
    answer = send(event)
    # Then the scope check answers before validation
    assert_envelope(answer, 403, "FORBIDDEN", event["requestContext"]["requestId"])


def test_a_wrong_content_type_and_an_invalid_body_is_415(api: ApiDriver) -> None:
    # Given a save sent as text/plain whose body is not JSON
    event = sample("save_checkpoint", api.secret)
    event["headers"]["content-type"] = "text/plain"
    event["body"] = "{not json"
    answer = send(event)
    # Then the media type answers before validation
    assert_envelope(answer, 415, "UNSUPPORTED_MEDIA_TYPE", event["requestContext"]["requestId"])


def test_a_missing_content_type_is_415(api: ApiDriver) -> None:
    # Given a valid save without a Content-Type
    event = sample("save_checkpoint", api.secret)
    event["headers"].pop("content-type")
    answer = send(event)
    assert_envelope(answer, 415, "UNSUPPORTED_MEDIA_TYPE", event["requestContext"]["requestId"])


def test_a_content_type_with_a_charset_is_accepted(api: ApiDriver) -> None:
    # Given a save sent as application/json with a charset parameter
    event = sample("save_checkpoint", api.secret)
    event["headers"]["content-type"] = "application/json; charset=utf-8"
    answer = send(event)
    assert answer.status == 201


@pytest.mark.parametrize("idempotency_key", [None, "big-and-stale"], ids=["plain", "idempotent"])
def test_a_too_large_state_with_a_revision_conflict_is_409(api: ApiDriver, idempotency_key: str | None) -> None:
    # Given a checkpoint at revision 1
    assert save(api).status == 201
    # When a save sends a state over the limit and expects revision 5
    event = sample("save_checkpoint", api.secret)
    event["headers"]["idempotency-key"] = idempotency_key
    if idempotency_key is None:
        event["headers"].pop("idempotency-key")
    event["body"] = json.dumps(save_body(state={"blob": "x" * (limits.MAX_STATE_BYTES + 1)}, expected_revision=5))
    answer = send(event)
    # Then the revision conflict answers (the contract ranks an oversized state last)
    error = assert_envelope(answer, 409, "REVISION_CONFLICT", event["requestContext"]["requestId"])
    assert error["details"] == {"current_revision": 1}


@pytest.mark.parametrize("idempotency_key", [None, "big"], ids=["plain", "idempotent"])
def test_a_too_large_state_alone_is_413_naming_the_state(api: ApiDriver, idempotency_key: str | None) -> None:
    # Given a state whose canonical JSON is over 3,000,000 bytes (in a body under the body limit)
    state = {"blob": "x" * limits.MAX_STATE_BYTES}
    canonical_size = len(json.dumps(state, separators=(",", ":")).encode())
    event = sample("save_checkpoint", api.secret)
    if idempotency_key is None:
        event["headers"].pop("idempotency-key")
    else:
        event["headers"]["idempotency-key"] = idempotency_key
    event["body"] = json.dumps(save_body(state=state))
    answer = send(event)
    # Then it is 413 with the field, the limit and the actual size, and nothing was stored
    error = assert_envelope(answer, 413, "PAYLOAD_TOO_LARGE", event["requestContext"]["requestId"])
    assert error["details"] == {"field": "/state", "limit_bytes": 3_000_000, "actual_bytes": canonical_size}
    assert api.invoke("lookup_checkpoint").status == 404


def test_a_state_of_exactly_the_limit_is_accepted(api: ApiDriver) -> None:
    # Given a state whose canonical JSON is exactly 3,000,000 bytes
    overhead = len(json.dumps({"blob": ""}, separators=(",", ":")).encode())
    state = {"blob": "x" * (3_000_000 - overhead)}
    answer = save(api, state=state)
    assert answer.status == 201
    assert answer.data["state_bytes"] == 3_000_000


def test_a_base64_encoded_json_body_is_accepted(api: ApiDriver) -> None:
    # Given the sample save event with its body base64-encoded, as API Gateway sends some bodies
    event = sample("save_checkpoint", api.secret)
    event["body"] = base64.b64encode(json.dumps(save_body(state={"encoded": "ÿes"})).encode("utf-8")).decode("ascii")
    event["isBase64Encoded"] = True
    answer = send(event)
    assert answer.status == 201
    assert api.invoke("lookup_checkpoint").data["state"] == {"encoded": "ÿes"}


def test_a_success_echoes_the_event_request_id(api: ApiDriver) -> None:
    event = sample("save_checkpoint", api.secret)
    answer = send(event)
    assert answer.body["meta"] == {"request_id": event["requestContext"]["requestId"]}
