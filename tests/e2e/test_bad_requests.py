"""Bad requests over real HTTP: each is refused with the contract's status, code and a message naming the field,
and none of them writes anything."""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.builders import save_body
from tests.e2e.conftest import table_snapshot
from tests.e2e.server_process import BatonServe

KINDS = ("task_state", "conversation", "workflow", "cursor")
STATUSES = ("active", "completed", "cancelled")
STATE_LIMIT = 3_000_000


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def fresh_subject() -> str:
    """A subject no other test uses."""
    return f"e2e-bad-{uuid.uuid4().hex}"


body = functools.partial(save_body, subject_id=fresh_subject())
"""A valid save body, of this module's own subject, with the fields given set or replaced (None: null)."""


def raw(text: str) -> bytes:
    return text.encode("utf-8")


VALID_RAW = '{"subject_id": "e2e-bad-raw", "kind": "task_state", "state": {"step": 1}}'


@dataclass(frozen=True)
class Bad:
    """One bad request and what it must answer."""

    name: str
    status: int
    code: str
    names: tuple[str, ...]
    """Each must appear in the message or among details.errors' pointers and messages."""
    method: str = "POST"
    path: str = "/v1/checkpoints"
    json_body: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    auth: str = "operator"
    """`operator`, `none`, `reader` (checkpoints:read only), `writer` (a non-* agent), or a raw Authorization value."""
    pointer: str | None = None
    """When set, details.errors must hold exactly this one pointer."""


CASES = [
    # wrong types
    Bad("ttl_seconds as a string", 400, "VALIDATION_ERROR", ("/ttl_seconds",), json_body=body(ttl_seconds="60"),
        pointer="/ttl_seconds"),
    Bad("ttl_seconds as a fraction", 400, "VALIDATION_ERROR", ("/ttl_seconds",), json_body=body(ttl_seconds=60.5),
        pointer="/ttl_seconds"),
    Bad("negative expected_revision", 400, "VALIDATION_ERROR", ("/expected_revision",),
        json_body=body(expected_revision=-1), pointer="/expected_revision"),
    Bad("expected_revision as a string", 400, "VALIDATION_ERROR", ("/expected_revision",),
        json_body=body(expected_revision="1"), pointer="/expected_revision"),
    Bad("kind as a number", 400, "VALIDATION_ERROR", ("/kind",), json_body=body(kind=5), pointer="/kind"),
    Bad("state null", 400, "VALIDATION_ERROR", ("/state",), json_body=body(state=None), pointer="/state"),
    Bad("state missing", 400, "VALIDATION_ERROR", ("/state",),
        json_body={"subject_id": "e2e-bad-nostate", "kind": "task_state"}, pointer="/state"),
    Bad("empty subject_id", 400, "VALIDATION_ERROR", ("/subject_id",), json_body=body(subject_id=""),
        pointer="/subject_id"),
    Bad("source as a string", 400, "VALIDATION_ERROR", ("/source",), json_body=body(source="laptop"),
        pointer="/source"),
    # ranges
    Bad("ttl_seconds below 60", 400, "VALIDATION_ERROR", ("/ttl_seconds", "60"), json_body=body(ttl_seconds=59),
        pointer="/ttl_seconds"),
    Bad("ttl_seconds over 30 days", 400, "VALIDATION_ERROR", ("/ttl_seconds", "2592000"),
        json_body=body(ttl_seconds=2_592_001), pointer="/ttl_seconds"),
    Bad("keep_revisions over 100", 400, "VALIDATION_ERROR", ("/keep_revisions", "100"),
        json_body=body(keep_revisions=101), pointer="/keep_revisions"),
    Bad("subject_id of 201 characters", 400, "VALIDATION_ERROR", ("/subject_id", "200"),
        json_body=body(subject_id="s" * 201), pointer="/subject_id"),
    Bad("subject_id with a control character", 400, "VALIDATION_ERROR", ("/subject_id", "control"),
        json_body=body(subject_id="bell\u0007"), pointer="/subject_id"),
    Bad("source.host over 200 characters", 400, "VALIDATION_ERROR", ("/source/host",),
        json_body=body(source={"host": "h" * 201}), pointer="/source/host"),
    Bad("agent_id not an identifier", 400, "VALIDATION_ERROR", ("/agent_id",), json_body=body(agent_id="Agent One"),
        pointer="/agent_id"),
    # closed sets
    Bad("unknown kind", 400, "VALIDATION_ERROR", ("/kind", *KINDS), json_body=body(kind="bogus"), pointer="/kind"),
    Bad("unknown status", 400, "VALIDATION_ERROR", ("/status", *STATUSES), json_body=body(status="done"),
        pointer="/status"),
    # unknown fields
    Bad("unknown top-level field", 400, "VALIDATION_ERROR", ("/ttl",), json_body=body(ttl=60), pointer="/ttl"),
    Bad("unknown field inside source", 400, "VALIDATION_ERROR", ("/source/hots",),
        json_body=body(source={"hots": "laptop"}), pointer="/source/hots"),
    # several violations are all reported
    Bad("two violations", 400, "VALIDATION_ERROR", ("/kind", "/ttl_seconds", "1 more error"),
        json_body=body(kind="bogus", ttl_seconds=1)),
    # sizes and depth
    Bad("state over 3,000,000 bytes", 413, "PAYLOAD_TOO_LARGE", ("/state",),
        json_body=body(state={"blob": "x" * STATE_LIMIT})),
    Bad("state nested 70 levels", 400, "VALIDATION_ERROR", ("/state", "64"), json_body=body(state=nested(70))),
    Bad("body over 3,100,000 bytes", 413, "PAYLOAD_TOO_LARGE", ("body",),
        content=raw(json.dumps(body(state="x" * 3_100_001))), headers={"Content-Type": "application/json"}),
    Bad("413 before 400", 413, "PAYLOAD_TOO_LARGE", ("body", "3100000"),
        content=b'{"state": "' + b"x" * 3_100_001, headers={"Content-Type": "application/json"}),
    # JSON the contract refuses
    Bad("NaN literal", 400, "VALIDATION_ERROR", ("NaN", "/state/x"),
        content=raw('{"subject_id": "e2e-bad-nan", "kind": "task_state", "state": {"x": NaN}}'),
        headers={"Content-Type": "application/json"}),
    Bad("Infinity literal", 400, "VALIDATION_ERROR", ("Infinity", "/state/x"),
        content=raw('{"subject_id": "e2e-bad-inf", "kind": "task_state", "state": {"x": -Infinity}}'),
        headers={"Content-Type": "application/json"}),
    Bad("number overflowing a double", 400, "VALIDATION_ERROR", ("1e999", "/state/x"),
        content=raw('{"subject_id": "e2e-bad-big", "kind": "task_state", "state": {"x": 1e999}}'),
        headers={"Content-Type": "application/json"}),
    Bad("duplicate keys", 400, "VALIDATION_ERROR", ("/subject_id", "twice"),
        content=raw('{"subject_id": "e2e-bad-dup-1", "subject_id": "e2e-bad-dup-2", "kind": "task_state", '
                    '"state": {"step": 1}}'),
        headers={"Content-Type": "application/json"}),
    Bad("duplicate keys inside state", 400, "VALIDATION_ERROR", ("/state/a", "twice"),
        content=raw('{"subject_id": "e2e-bad-dup", "kind": "task_state", "state": {"a": 1, "a": 2}}'),
        headers={"Content-Type": "application/json"}),
    Bad("truncated JSON", 400, "VALIDATION_ERROR", ("not valid JSON",), content=raw('{"subject_id": '),
        headers={"Content-Type": "application/json"}),
    Bad("empty body", 400, "VALIDATION_ERROR", ("body",), content=b"", headers={"Content-Type": "application/json"}),
    Bad("JSON array body", 400, "VALIDATION_ERROR", ("body", "object"), json_body=[body()]),
    Bad("JSON string body", 400, "VALIDATION_ERROR", ("body", "object"), json_body="a checkpoint"),
    Bad("body not UTF-8", 400, "VALIDATION_ERROR", ("UTF-8",), content=b'{"subject_id": "\xff\xfe"}',
        headers={"Content-Type": "application/json"}),
    # media type
    Bad("text/plain", 415, "UNSUPPORTED_MEDIA_TYPE", ("Content-Type", "application/json", "text/plain"),
        content=raw(VALID_RAW), headers={"Content-Type": "text/plain"}),
    Bad("no content type", 415, "UNSUPPORTED_MEDIA_TYPE", ("Content-Type", "application/json"),
        content=raw(VALID_RAW)),
    Bad("415 before 400", 415, "UNSUPPORTED_MEDIA_TYPE", ("Content-Type",), content=raw("not json"),
        headers={"Content-Type": "application/x-www-form-urlencoded"}),
    # keys and scopes
    Bad("no Authorization", 401, "UNAUTHENTICATED", ("Authorization", "Bearer"), json_body=body(), auth="none"),
    Bad("unknown bearer key", 401, "UNAUTHENTICATED", ("API key",), json_body=body(),
        auth="Bearer btn_this_key_was_never_issued_0000000000"),
    Bad("Basic credentials", 401, "UNAUTHENTICATED", ("Authorization", "Bearer"), json_body=body(),
        auth="Basic eHl6"),
    Bad("401 before 400", 401, "UNAUTHENTICATED", ("Authorization",), json_body=body(kind="bogus", ttl_seconds="x"),
        auth="none"),
    Bad("401 before 415", 401, "UNAUTHENTICATED", ("Authorization",), content=raw("{"),
        headers={"Content-Type": "text/plain"}, auth="none"),
    Bad("read-only key saving", 403, "FORBIDDEN", ("checkpoints:write",), json_body=body(), auth="reader"),
    Bad("403 before 400", 403, "FORBIDDEN", ("checkpoints:write",), json_body=body(kind="bogus"), auth="reader"),
    Bad("read-only key deleting", 403, "FORBIDDEN", ("checkpoints:delete",), method="DELETE",
        path="/v1/checkpoints/ckpt_" + "0" * 32, auth="reader"),
    Bad("non-* key naming another agent", 403, "FORBIDDEN", ("/agent_id",), json_body=body(agent_id="operator"),
        auth="writer"),
    # headers
    Bad("Idempotency-Key of 201 characters", 400, "VALIDATION_ERROR", ("Idempotency-Key",), json_body=body(),
        headers={"Idempotency-Key": "k" * 201}),
    Bad("Idempotency-Key with a non-printable character", 400, "VALIDATION_ERROR", ("Idempotency-Key",),
        json_body=body(), headers={"Idempotency-Key": "tab\there"}),
    Bad("If-Match that is not an entity tag", 400, "VALIDATION_ERROR", ("If-Match",), method="DELETE",
        path="/v1/checkpoints/ckpt_" + "0" * 32, headers={"If-Match": "revision 3"}),
    # path and query
    Bad("malformed checkpoint id on get", 400, "VALIDATION_ERROR", ("checkpoint_id",), method="GET",
        path="/v1/checkpoints/ckpt_XYZ"),
    Bad("malformed checkpoint id on delete", 400, "VALIDATION_ERROR", ("checkpoint_id",), method="DELETE",
        path="/v1/checkpoints/not-an-id"),
    Bad("lookup without kind", 400, "VALIDATION_ERROR", ("kind",), method="GET", params={"subject_id": "x"},
        pointer="/kind"),
    Bad("lookup without subject_id", 400, "VALIDATION_ERROR", ("subject_id",), method="GET",
        params={"kind": "task_state"}, pointer="/subject_id"),
    Bad("lookup with an unknown kind", 400, "VALIDATION_ERROR", ("kind", *KINDS), method="GET",
        params={"subject_id": "x", "kind": "bogus"}, pointer="/kind"),
    Bad("list with limit=0", 400, "VALIDATION_ERROR", ("limit", "1"), method="GET",
        path="/v1/subjects/e2e-bad/checkpoints", params={"limit": 0}, pointer="/limit"),
    Bad("list with limit=201", 400, "VALIDATION_ERROR", ("limit", "200"), method="GET",
        path="/v1/subjects/e2e-bad/checkpoints", params={"limit": 201}, pointer="/limit"),
    Bad("list with limit=ten", 400, "VALIDATION_ERROR", ("limit",), method="GET",
        path="/v1/subjects/e2e-bad/checkpoints", params={"limit": "ten"}, pointer="/limit"),
    Bad("list with a forged cursor", 400, "VALIDATION_ERROR", ("cursor",), method="GET",
        path="/v1/subjects/e2e-bad/checkpoints", params={"cursor": "bm90LWEtY3Vyc29y"}, pointer="/cursor"),
    Bad("list with an unknown status", 400, "VALIDATION_ERROR", ("status", *STATUSES), method="GET",
        path="/v1/subjects/e2e-bad/checkpoints", params={"status": "done"}, pointer="/status"),
]  # fmt: skip


@pytest.fixture(scope="module")
def keys(baton: BatonServe) -> dict[str, str]:
    """Authorization values for the callers the cases name."""
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=30) as http:
        issued = {}
        for name, scopes in (("reader", ["checkpoints:read"]), ("writer", ["checkpoints:read", "checkpoints:write"])):
            response = http.post("/v1/keys", json={"agent_id": f"e2e-{name}-{uuid.uuid4().hex[:8]}", "scopes": scopes})
            assert response.status_code == 201, response.text
            issued[name] = f"Bearer {response.json()['data']['secret']}"
    return {"operator": f"Bearer {baton.key}", **issued}


def send(baton: BatonServe, case: Bad, keys: dict[str, str]) -> httpx.Response:
    headers = dict(case.headers)
    if case.auth != "none":
        headers["Authorization"] = keys.get(case.auth, case.auth)
    with httpx.Client(base_url=baton.url, timeout=60) as client:
        if case.json_body is not None:
            return client.request(case.method, case.path, json=case.json_body, headers=headers, params=case.params)
        return client.request(case.method, case.path, content=case.content, headers=headers, params=case.params)


def mentioned(error: dict[str, Any]) -> str:
    """Everything an error says about where it is: its message and every pointer and message in its details."""
    parts = [error["message"]]
    for entry in error.get("details", {}).get("errors", []):
        parts += [entry["pointer"], entry["message"]]
    return "\n".join(parts)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_request_is_refused_naming_the_field_and_writes_nothing(
    baton: BatonServe, table: Any, keys: dict[str, str], case: Bad
) -> None:
    # Given the table as it is
    before = table_snapshot(table)
    # When the bad request is sent
    response = send(baton, case, keys)
    # Then it answers the contract's status and code in the error envelope, naming what is wrong
    assert response.status_code == case.status, response.text
    envelope = response.json()
    assert set(envelope) == {"error", "meta"}, envelope
    assert envelope["meta"]["request_id"]
    error = envelope["error"]
    assert error["code"] == case.code, error
    assert error["message"].strip(), error
    assert "details" not in error or error["details"], "details is omitted rather than empty or null"
    said = mentioned(error)
    for name in case.names:
        assert name in said, (name, error)
    if case.pointer is not None:
        assert [e["pointer"] for e in error["details"]["errors"]] == [case.pointer], error
    if case.code == "VALIDATION_ERROR":
        assert error["details"]["errors"], error
        assert all(set(e) <= {"pointer", "message", "in"} for e in error["details"]["errors"]), error
    if case.status == 401:
        assert response.headers.get("WWW-Authenticate", "").startswith("Bearer"), response.headers
    # And nothing was written
    assert table_snapshot(table) == before


def test_an_oversized_state_reports_its_field_limit_and_size(baton: BatonServe, table: Any, http: httpx.Client) -> None:
    # Given a state whose canonical JSON is 11 bytes over the limit
    state = {"blob": "x" * STATE_LIMIT}
    actual = len(json.dumps(state, separators=(",", ":")).encode("utf-8"))
    assert actual == STATE_LIMIT + 11
    before = table_snapshot(table)
    response = http.post("/v1/checkpoints", json=body(state=state))
    # Then the answer is 413 with the field, the limit and the actual size, and nothing is written
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE"
    assert error["details"] == {"field": "/state", "limit_bytes": STATE_LIMIT, "actual_bytes": actual}
    assert "/state" in error["message"]
    assert table_snapshot(table) == before


def test_a_state_of_exactly_the_limit_is_accepted(http: httpx.Client) -> None:
    # Given a state whose canonical JSON is exactly 3,000,000 bytes
    overhead = len(json.dumps({"blob": ""}, separators=(",", ":")))
    state = {"blob": "x" * (STATE_LIMIT - overhead)}
    response = http.post("/v1/checkpoints", json=body(subject_id=fresh_subject(), state=state))
    assert response.status_code == 201, response.text
    assert response.json()["data"]["state_bytes"] == STATE_LIMIT


def test_a_rejected_save_leaves_an_existing_checkpoint_unchanged(http: httpx.Client, table: Any) -> None:
    saved = http.post("/v1/checkpoints", json=body(subject_id=fresh_subject()))
    assert saved.status_code == 201, saved.text
    subject = saved.json()["data"]["subject_id"]
    before = table_snapshot(table)
    # When a save of the same checkpoint is refused (an oversized state, then an unknown field)
    too_big = http.post("/v1/checkpoints", json=body(subject_id=subject, state="x" * (STATE_LIMIT + 1)))
    unknown = http.post("/v1/checkpoints", json=body(subject_id=subject, colour="blue"))
    # Then both are refused and the checkpoint and the table are as they were
    assert (too_big.status_code, unknown.status_code) == (413, 400), (too_big.text, unknown.text)
    assert table_snapshot(table) == before
    record = http.get("/v1/checkpoints", params={"subject_id": subject, "kind": "task_state"}).json()["data"]
    assert (record["revision"], record["state"]) == (1, {"step": 1})
