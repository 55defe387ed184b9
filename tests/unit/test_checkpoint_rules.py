"""Checkpoints: how a save is planned, how state is stored, and the rules every write must pass."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import msgspec
import pytest

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import (
    Checkpoint,
    CheckpointKey,
    SavePlan,
    build_next,
    check_write,
    etag_for,
    parse_etag,
    plan_save,
    request_fingerprint,
    request_tag,
)
from baton_checkpoints.domain.errors import CheckpointClosed, PayloadTooLarge, RevisionConflict, ValidationFailed
from baton_checkpoints.domain.models import SaveCheckpointRequest
from tests.builders import stored_checkpoint

NOW = 1_785_412_084_652  # 2026-07-30T11:48:04.652Z
HOUR_MS = 3_600_000
OLD_ID = "ckpt_" + "a" * 32
NEW_ID = "ckpt_" + "b" * 32
SHA = "0" * 64


def request(**changes: Any) -> SaveCheckpointRequest:
    """A validated save request."""
    body: dict[str, Any] = {"subject_id": "ticket-42", "kind": "task_state", "state": {"step": 1}, **changes}
    return SaveCheckpointRequest.model_validate(body)


def plan(now_ms: int = NOW, **changes: Any) -> SavePlan:
    """A save plan for tenant t1, agent a1."""
    return plan_save(request(**changes), tenant_id="t1", agent_id="a1", request_id="req-1", now_ms=now_ms)


def stored(**changes: Any) -> Checkpoint:
    """A live checkpoint at revision 3, created an hour ago, written a minute ago (`tests.builders`)."""
    return stored_checkpoint(**changes)


def state_of_size(size: int) -> str:
    """A string state whose canonical JSON is exactly `size` bytes (two of them are the quotes)."""
    return "x" * (size - 2)


# --- plan_save --------------------------------------------------------------------------------------------------


def test_plan_save_computes_the_canonical_state_its_hash_and_size() -> None:
    # Given a request whose state has unsorted keys, whitespace-free or not
    # When the save is planned
    result = plan(state={"b": [1.0, "é"], "a": True})
    # Then the plan holds the RFC 8785 bytes, their SHA-256 and their length
    canonical = b'{"a":true,"b":[1,"\xc3\xa9"]}'
    assert result.state.text == canonical
    assert result.state.sha256 == hashlib.sha256(canonical).hexdigest()
    assert result.state.size == len(canonical)
    assert result.oversize is None


def test_plan_save_carries_the_key_and_request_facts() -> None:
    # Given a request with optional fields set
    result = plan_save(
        request(ttl_seconds=120, keep_revisions=2, expected_revision=3, status="completed", format="x/1"),
        tenant_id="t9",
        agent_id="agent-9",
        request_id="req-9",
        now_ms=NOW,
    )
    # When the save is planned
    # Then the key is (tenant, subject, agent, kind) and every fact is carried over
    assert result.key == CheckpointKey("t9", "ticket-42", "agent-9", "task_state")
    assert (result.ttl_seconds, result.keep_revisions, result.expected_revision) == (120, 2, 3)
    assert (result.status, result.format, result.request_id, result.now_ms) == ("completed", "x/1", "req-9", NOW)
    assert result.resources == []


def test_plan_save_defaults_the_status_to_active() -> None:
    # Given a request without status
    # When planned
    # Then the status is active
    assert plan().status == "active"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (None, None),
        ({}, None),
        ({"host": None, "session": None}, None),
        ({"host": "laptop"}, {"host": "laptop"}),
        ({"host": "h", "session": None, "model": "m"}, {"host": "h", "model": "m"}),
    ],
)
def test_plan_save_keeps_only_the_source_fields_that_were_sent(source: Any, expected: Any) -> None:
    # Given a request with a source holding some, none or no fields
    # When planned
    # Then absent or null fields are dropped and an empty source is no source
    changes = {} if source is None else {"source": source}
    assert plan(**changes).source == expected


@pytest.mark.parametrize("size", [limits.MAX_STATE_BYTES - 1, limits.MAX_STATE_BYTES])
def test_plan_save_accepts_a_state_up_to_the_limit(size: int) -> None:
    # Given a state whose canonical JSON is at most the limit
    # When planned
    result = plan(state=state_of_size(size))
    # Then nothing is flagged
    assert result.state.size == size
    assert result.oversize is None


def test_plan_save_flags_a_state_over_the_limit_instead_of_raising() -> None:
    # Given a state one byte over the limit
    size = limits.MAX_STATE_BYTES + 1
    # When planned
    result = plan(state=state_of_size(size))
    # Then the plan carries the 413 for later (the contract ranks it after the 404/409 checks)
    assert isinstance(result.oversize, PayloadTooLarge)
    assert result.oversize.details() == {
        "field": "/state",
        "limit_bytes": limits.MAX_STATE_BYTES,
        "actual_bytes": size,
    }
    assert "/state" in result.oversize.message


def test_plan_save_measures_the_limit_in_canonical_utf8_bytes() -> None:
    # Given a state of few characters but many UTF-8 bytes (each "😀" is four bytes)
    state = "😀" * (limits.MAX_STATE_BYTES // 4)
    # When planned
    result = plan(state=state)
    # Then the byte count, not the character count, decides
    assert result.state.size == limits.MAX_STATE_BYTES + 2
    assert result.oversize is not None


def test_plan_save_keeps_resources_and_the_blobs_they_name() -> None:
    # Given a request that references two blobs
    ref = {"name": "log", "blob_id": "blob_123", "sha256": SHA, "size": 3, "media_type": "text/plain"}
    other = {**ref, "name": "trace", "blob_id": "blob_456"}
    # When planned
    planned = plan(resources=[ref, other])
    # Then the plan keeps them in order, and knows the blobs it names (the store checks and claims those)
    assert planned.resources == [ref, other]
    assert planned.blob_ids == {"blob_123", "blob_456"}


def test_plan_save_refuses_a_name_or_a_blob_named_twice_naming_each_repeat() -> None:
    # Given resources that repeat a name and a blob
    ref = {"name": "log", "blob_id": "blob_123", "sha256": SHA, "size": 3, "media_type": "text/plain"}
    # When planned
    with pytest.raises(ValidationFailed) as exc:
        plan(resources=[ref, {**ref, "blob_id": "blob_456"}, {**ref, "name": "other"}])
    # Then every repeat is named by its pointer, with the one it repeats
    assert [e.pointer for e in exc.value.errors] == ["/resources/1/name", "/resources/2/blob_id"]
    assert "/resources/0/name" in exc.value.errors[0].message


def test_a_plan_may_attach_blobs_of_its_agent_or_of_the_calling_key() -> None:
    planned = plan_save(request(), "t1", "worker", "req-1", NOW, caller_agent_id="operator")
    assert planned.may_attach("worker")
    assert planned.may_attach("operator")
    assert not planned.may_attach("someone-else")


def test_plan_save_rejects_a_state_that_cannot_be_canonicalized_naming_state() -> None:
    # Given a state holding an integer beyond ±(2^53-1)
    # When planned
    with pytest.raises(ValidationFailed) as exc:
        plan(state={"big": 2**53})
    # Then /state is named
    assert exc.value.errors[0].pointer == "/state"


@pytest.mark.parametrize(("now", "live"), [(NOW, True), (NOW + 7_140_000 - 1, True), (NOW + 7_140_000, False)])
def test_a_checkpoint_is_live_until_its_expiry(now: int, live: bool) -> None:
    # Given a checkpoint that expires at a known millisecond
    checkpoint = stored()
    assert checkpoint.expires_ms == NOW + 7_140_000
    # When asked whether it is live at a moment
    # Then it is live strictly before expires_at and absent from then on
    assert checkpoint.is_live(now) is live


# --- ETags ----------------------------------------------------------------------------------------------------


def test_etag_is_weak_and_names_id_and_revision() -> None:
    # Given a checkpoint id and revision
    # When the tag is built
    # Then it is W/"<id>:<revision>", and a checkpoint's own tag is the same
    assert etag_for(OLD_ID, 7) == f'W/"{OLD_ID}:7"'
    assert stored(revision=7).etag == f'W/"{OLD_ID}:7"'


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (f'W/"{OLD_ID}:7"', (OLD_ID, 7)),
        (f'"{OLD_ID}:7"', (OLD_ID, 7)),
        (f'  W/"{OLD_ID}:12"  ', (OLD_ID, 12)),
        ('"a:b:3"', ("a:b", 3)),
        ('"x:0"', ("x", 0)),
    ],
)
def test_parse_etag_reads_weak_and_strong_tags(value: str, parsed: tuple[str, int]) -> None:
    # Given an entity tag, weak or strong
    # When it is parsed
    # Then id and revision come back (the revision after the last colon)
    assert parse_etag(value) == parsed


def test_parse_etag_reads_back_what_etag_for_writes() -> None:
    # Given tags built for several revisions
    # When each is parsed
    # Then the round trip is exact
    for revision in (1, 9, 10, 12345):
        assert parse_etag(etag_for(NEW_ID, revision)) == (NEW_ID, revision)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "*",
        "W/",
        '"',
        '""',
        'W/""',
        f"{OLD_ID}:7",
        f'W/"{OLD_ID}:7',
        f'W/{OLD_ID}:7"',
        f'"{OLD_ID}"',
        f'"{OLD_ID}:"',
        f'"{OLD_ID}:-1"',
        f'"{OLD_ID}:+1"',
        f'"{OLD_ID}:1.0"',
        f'"{OLD_ID}:seven"',
        f'"{OLD_ID}: 7"',
        f'w/"{OLD_ID}:7"x',
        f'"{OLD_ID}:²"',  # a superscript two: str.isdigit() says yes, int() refuses it
        f'"{OLD_ID}:３"',  # a fullwidth three: a Unicode digit, but never in a tag Baton sends
    ],
)
def test_parse_etag_returns_none_for_anything_malformed(value: str) -> None:
    # Given a header value that is not one of our tags
    # When it is parsed
    # Then the answer is None, never an exception
    assert parse_etag(value) is None


# --- check_write ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "expected_revision"),
    [
        (None, None),
        (None, 0),
        ("live", None),
        ("live", 3),
        ("expired", None),
        ("expired", 0),
        ("expired_closed", 0),
    ],
)
def test_check_write_lets_matching_writes_through(existing: str | None, expected_revision: int | None) -> None:
    # Given no checkpoint, a live one at revision 3, or an expired one (which counts as absent)
    found = {
        None: None,
        "live": stored(),
        "expired": stored(expires_ms=NOW),
        "expired_closed": stored(expires_ms=NOW - 1, status="completed"),
    }[existing]
    # When a write checks against it with a matching (or no) expected revision
    # Then nothing is raised
    check_write(found, expected_revision, NOW)


@pytest.mark.parametrize(
    ("existing", "expected_revision", "current"),
    [
        (None, 1, 0),
        ("live", 0, 3),
        ("live", 2, 3),
        ("live", 4, 3),
        ("expired", 3, 0),
    ],
)
def test_check_write_reports_the_current_revision_on_conflict(
    existing: str | None, expected_revision: int, current: int
) -> None:
    # Given a checkpoint that is absent, live at revision 3, or expired at revision 3
    found = {None: None, "live": stored(), "expired": stored(expires_ms=NOW)}[existing]
    # When a write expects another revision
    with pytest.raises(RevisionConflict) as exc:
        check_write(found, expected_revision, NOW)
    # Then the conflict reports the current revision, 0 when absent or expired
    assert exc.value.details() == {"current_revision": current}
    assert f"/expected_revision is {expected_revision}" in exc.value.message


@pytest.mark.parametrize("status", ["completed", "cancelled"])
def test_check_write_refuses_a_closed_checkpoint_before_any_conflict(status: str) -> None:
    # Given a live checkpoint in a terminal status
    found = stored(status=status)
    # When a write arrives, with a stale expected revision, the right one, or none
    for expected_revision in (0, 3, None):
        with pytest.raises(CheckpointClosed) as exc:
            check_write(found, expected_revision, NOW)
        # Then the answer is CHECKPOINT_CLOSED, naming the status, never REVISION_CONFLICT
        assert exc.value.details() == {"status": status}


# --- build_next -----------------------------------------------------------------------------------------------


def test_build_next_over_nothing_creates_revision_one_with_defaults() -> None:
    # Given no checkpoint and a plan without ttl or keep_revisions
    the_plan = plan(state={"step": 1})
    # When the next checkpoint is built
    created = build_next(None, the_plan, NEW_ID)
    # Then it is new: the given id, revision 1, default ttl and keep, created now, expiring now + ttl
    assert created.checkpoint_id == NEW_ID
    assert created.revision == 1
    assert created.ttl_seconds == limits.DEFAULT_TTL_SECONDS
    assert created.keep_revisions == 0
    assert created.created_ms == created.updated_ms == NOW
    assert created.expires_ms == NOW + limits.DEFAULT_TTL_SECONDS * 1000
    assert created.saved().updated is False
    assert (created.tenant_id, created.subject_id, created.agent_id, created.kind) == (
        "t1",
        "ticket-42",
        "a1",
        "task_state",
    )
    assert created.state_text == b'{"step":1}'
    assert created.state_hash == the_plan.state.sha256
    assert created.state_bytes == 10
    assert created.recent_requests == (request_tag("req-1"),)


def test_build_next_over_a_live_checkpoint_keeps_identity_ttl_and_keep() -> None:
    # Given a live checkpoint at revision 3 with ttl 7200 s and keep 4, and a plan that sets neither
    existing = stored()
    # When the next checkpoint is built
    updated = build_next(existing, plan(state={"step": 2}), NEW_ID)
    # Then id, created time, ttl and keep are kept; the revision grows by one; expiry restarts from now
    assert updated.checkpoint_id == OLD_ID
    assert updated.revision == 4
    assert updated.created_ms == existing.created_ms
    assert updated.updated_ms == NOW
    assert updated.ttl_seconds == 7200
    assert updated.keep_revisions == 4
    assert updated.expires_ms == NOW + 7200 * 1000
    assert updated.saved().updated is True
    assert json.loads(updated.state_text or b"") == {"step": 2}


@pytest.mark.parametrize(("keep", "expected_keep"), [(0, 0), (9, 9), (None, 4)])
def test_build_next_changes_ttl_and_keep_only_when_the_save_sends_them(keep: int | None, expected_keep: int) -> None:
    # Given a live checkpoint (ttl 7200 s, keep 4) and a save that sends a ttl and maybe keep_revisions
    changes: dict[str, Any] = {"ttl_seconds": 60}
    if keep is not None:
        changes["keep_revisions"] = keep
    # When the next checkpoint is built
    updated = build_next(stored(), plan(**changes), NEW_ID)
    # Then what was sent wins, including keep_revisions 0, and what was not sent is kept
    assert updated.ttl_seconds == 60
    assert updated.expires_ms == NOW + 60_000
    assert updated.keep_revisions == expected_keep


def test_build_next_over_an_expired_checkpoint_starts_afresh() -> None:
    # Given a checkpoint that expired exactly now (it counts as absent)
    existing = stored(expires_ms=NOW)
    # When the next checkpoint is built
    created = build_next(existing, plan(), NEW_ID)
    # Then it is a new one: new id, revision 1, created now, default ttl and keep rather than the old ones
    assert created.checkpoint_id == NEW_ID
    assert created.revision == 1
    assert created.created_ms == NOW
    assert created.ttl_seconds == limits.DEFAULT_TTL_SECONDS
    assert created.keep_revisions == 0
    assert created.saved().updated is False


def test_build_next_takes_the_status_format_and_source_of_the_plan() -> None:
    # Given a live checkpoint and a plan that completes it with a format and a source
    the_plan = plan(status="completed", format="notes/1", source={"model": "m"})
    # When the next checkpoint is built
    updated = build_next(stored(), the_plan, NEW_ID)
    # Then the new values are in the checkpoint
    assert (updated.status, updated.format, updated.source) == ("completed", "notes/1", {"model": "m"})


def test_build_next_never_changes_the_existing_checkpoint() -> None:
    # Given a live checkpoint
    existing = stored()
    before = msgspec.to_builtins(existing)
    # When the next one is built over it
    build_next(existing, plan(), NEW_ID)
    # Then the existing one is unchanged
    assert msgspec.to_builtins(existing) == before


# --- request_fingerprint --------------------------------------------------------------------------------------


def test_fingerprint_ignores_key_order_and_number_spelling_of_the_body() -> None:
    # Given two bodies that are equal as JSON but written differently
    first = json.loads('{"subject_id": "s", "state": {"a": 1.0, "b": [1, 2]}, "kind": "cursor"}')
    second = json.loads('{"kind":"cursor","state":{"b":[1,2],"a":1},"subject_id":"s"}')
    # When each request is fingerprinted
    # Then the fingerprints are equal
    assert request_fingerprint("POST", "/v1/checkpoints", first) == request_fingerprint(
        "POST", "/v1/checkpoints", second
    )


def test_fingerprint_ignores_the_case_of_the_method() -> None:
    # Given the same request with the method in another case
    # When fingerprinted
    # Then the fingerprints are equal
    assert request_fingerprint("post", "/v1/x", {}) == request_fingerprint("POST", "/v1/x", {})


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/v1/checkpoints", {"a": 1}),
        ("POST", "/v1/checkpoints/", {"a": 1}),
        ("POST", "/v1/resume", {"a": 1}),
        ("POST", "/v1/checkpoints", {"a": 2}),
        ("POST", "/v1/checkpoints", {"a": "1"}),
        ("POST", "/v1/checkpoints", {"a": 1, "b": None}),
        ("POST", "/v1/checkpoints", [{"a": 1}]),
        ("POST", "/v1/checkpoints", None),
    ],
)
def test_fingerprint_differs_by_method_path_or_body(method: str, path: str, body: Any) -> None:
    # Given a reference request and one that differs in method, path or body
    reference = request_fingerprint("POST", "/v1/checkpoints", {"a": 1})
    # When the other is fingerprinted
    # Then the fingerprints differ
    assert request_fingerprint(method, path, body) != reference


def test_fingerprint_is_a_sha256_hex_digest() -> None:
    # Given any request
    # When fingerprinted
    digest = request_fingerprint("POST", "/v1/checkpoints", {"a": 1})
    # Then it is 64 lowercase hex digits and stable
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert digest == request_fingerprint("POST", "/v1/checkpoints", {"a": 1})
