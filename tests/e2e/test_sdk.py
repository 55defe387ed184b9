"""The Python SDK (`baton_checkpoints.client`) against a real `baton serve`: every method of both clients, typed
exceptions for
every error code the server can be made to answer, a retry after a dropped connection that writes once, and the
async client under concurrent saves.

What needs a failing dependency (429, 503, API Gateway's 5xx bodies, `Retry-After`) is in
tests/unit/test_sdk_retries.py, against respx."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton_checkpoints.client import (
    AsyncBaton,
    Baton,
    BatonConnectionError,
    BatonError,
    CheckpointClosedError,
    CheckpointRecord,
    ForbiddenError,
    IdempotencyKeyReusedError,
    LeaseHeldError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    RetryPolicy,
    RevisionConflictError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
    ValidationError,
    etag_for,
)
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

SUITE = "sdk (e2e)"
FAST = RetryPolicy(backoff_base=0.01, backoff_max=0.05, not_found_pause=0.05)
"""Real retries, short waits: the suite's runtime stays small."""


def new_subject(label: str = "") -> str:
    return f"e2e-sdk-{label}-{uuid.uuid4().hex}"


@pytest.fixture
def client(baton: BatonServe) -> Iterator[Baton]:
    """The synchronous client with the operator key."""
    with Baton(baton.url, baton.key, retry=FAST) as sdk:
        yield sdk


class DropAnswerOnce(httpx.BaseTransport):
    """Lets a matching request reach the server, then throws its answer away and raises `httpx.ReadError`, once:
    a connection that broke after the server acted."""

    def __init__(self, matches: Callable[[httpx.Request], bool]) -> None:
        self.inner = httpx.HTTPTransport()
        self.matches = matches
        self.dropped = 0
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.inner.handle_request(request)
        if not self.dropped and self.matches(request):
            response.read()
            response.close()
            self.dropped += 1
            raise httpx.ReadError("the connection broke before the answer arrived", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


# -- the synchronous client, route by route --------------------------------------------------------------------


def test_health_and_schemas_need_no_key(baton: BatonServe) -> None:
    with Baton(baton.url, api_key="") as anonymous:
        health = anonymous.health()
        schema = anonymous.schema("opencheckpoint-0.1")
    record(SUITE, requests=2)
    assert health.status == "ok"
    assert health.version
    assert schema["properties"]["opencheckpoint"]


def test_the_openapi_document_needs_no_key(baton: BatonServe) -> None:
    with Baton(baton.url, api_key="") as anonymous:
        document = anonymous.openapi()
    record(SUITE, requests=1)
    assert "/v1/checkpoints" in document["paths"]


def test_environment_configures_the_client(baton: BatonServe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_URL", baton.url)
    monkeypatch.setenv("BATON_API_KEY", baton.key)
    with Baton() as sdk:
        page = sdk.list_keys(limit=1)
    record(SUITE, requests=1)
    assert len(page.items) == 1
    monkeypatch.delenv("BATON_URL")
    with pytest.raises(ValueError, match="BATON_URL"):
        Baton()


def test_save_lookup_get_and_etag_aware_reads(client: Baton) -> None:
    subject = new_subject("save")
    created = client.save(subject, "task_state", {"step": 1}, source={"host": "ci"}, ttl_seconds=3600)
    updated = client.save(subject, "task_state", {"step": 2}, source={"host": "ci", "model": "m1"})
    # Created then updated: 201/200, the same id, the ETag of each revision, a generated Idempotency-Key each
    assert (created.meta.status, created.updated, created.revision) == (201, False, 1)
    assert (updated.meta.status, updated.updated, updated.revision) == (200, True, 2)
    assert updated.checkpoint_id == created.checkpoint_id
    assert updated.meta.etag == etag_for(created.checkpoint_id, 2)
    assert created.meta.idempotency_key
    assert updated.meta.idempotency_key
    assert created.meta.idempotency_key != updated.meta.idempotency_key
    assert not updated.meta.replayed

    by_lookup = client.lookup(subject, "task_state")
    by_id = client.get(created.checkpoint_id)
    assert isinstance(by_id, CheckpointRecord)
    assert by_lookup == by_id
    assert (by_id.state, by_id.revision, by_id.ttl_seconds) == ({"step": 2}, 2, 3600)
    assert by_id.source is not None
    assert (by_id.source.host, by_id.source.model, by_id.source.session) == ("ci", "m1", None)
    assert by_id.state_hash == hashlib.sha256(b'{"step":2}').hexdigest()
    assert by_id.meta.status == 200

    # Read again: the client sends If-None-Match, the server answers 304, the cached record comes back
    again_by_id = client.get(created.checkpoint_id)
    again_by_lookup = client.lookup(subject, "task_state")
    assert (again_by_id.meta.status, again_by_lookup.meta.status) == (304, 304)
    assert again_by_id == by_id
    assert again_by_lookup == by_lookup
    # A write makes the tag stale: the next read is a 200 with the new record
    client.save(subject, "task_state", {"step": 3})
    fresh = client.get(created.checkpoint_id)
    record(SUITE, requests=9)
    assert (fresh.meta.status, fresh.revision, fresh.state) == (200, 3, {"step": 3})


def test_list_pages_and_the_iterator_follow_next_cursor(client: Baton) -> None:
    subject = new_subject("list")
    saved = {
        client.save(subject, kind, {"n": index}, agent_id=agent).checkpoint_id
        for index, (agent, kind) in enumerate(
            [(agent, kind) for agent in ("agent-a", "agent-b") for kind in ("task_state", "workflow", "cursor")]
        )
    }
    first = client.list_checkpoints(subject, limit=4)
    assert len(first.items) == 4
    assert first.next_cursor is not None
    second = client.list_checkpoints(subject, limit=4, cursor=first.next_cursor)
    assert (len(second.items), second.next_cursor) == (2, None)
    iterated = list(client.iter_checkpoints(subject, page_size=2))
    filtered = list(client.iter_checkpoints(subject, kind="workflow", agent_id="agent-b"))
    record(SUITE, requests=6 + 2 + 3 + 1)
    assert {item.checkpoint_id for item in first.items + second.items} == saved
    assert [item.checkpoint_id for item in iterated] == [item.checkpoint_id for item in first.items + second.items]
    assert [(item.agent_id, item.kind) for item in filtered] == [("agent-b", "workflow")]
    assert all(not hasattr(item, "state") for item in iterated)


def test_revisions_and_restore(client: Baton) -> None:
    subject = new_subject("history")
    first = client.save(subject, "workflow", {"v": 1}, keep_revisions=5)
    for value in (2, 3):
        client.save(subject, "workflow", {"v": value})
    page = client.list_revisions(first.checkpoint_id)
    one_by_one = list(client.iter_revisions(first.checkpoint_id, page_size=1))
    oldest = client.get_revision(first.checkpoint_id, 1)
    restored = client.restore(first.checkpoint_id, 1, expected_revision=3)
    current = client.get(first.checkpoint_id)
    record(SUITE, requests=3 + 1 + 2 + 1 + 1 + 1)
    assert [item.revision for item in page.items] == [2, 1]
    assert [item.revision for item in one_by_one] == [2, 1]
    assert (oldest.revision, oldest.state) == (1, {"v": 1})
    assert (restored.revision, restored.meta.status) == (4, 200)
    assert restored.meta.idempotency_key
    assert (current.revision, current.state) == (4, {"v": 1})
    with pytest.raises(RevisionConflictError) as stale:
        client.restore(first.checkpoint_id, 1, expected_revision=3)
    assert stale.value.current_revision == 4


def test_resume_answers_each_status(client: Baton) -> None:
    subject = new_subject("resume")
    assert client.resume(subject).status == "none"
    saved = client.save(subject, "task_state", {"todo": ["a"]})
    ready = client.resume(subject)
    client.save(subject, "workflow", {"w": 1})
    ambiguous = client.resume(subject)
    omitted = client.resume(subject, kind="task_state", budget_bytes=1024 * 1024)
    client.save(subject, "workflow", {"w": 2}, status="completed")
    closed = client.resume(subject, kind="workflow")
    record(SUITE, requests=8)
    assert ready.status == "ready"
    assert isinstance(ready.checkpoint, CheckpointRecord)
    assert (ready.checkpoint.checkpoint_id, ready.checkpoint.state) == (saved.checkpoint_id, {"todo": ["a"]})
    assert (ambiguous.status, ambiguous.candidate_count, len(ambiguous.candidates)) == ("ambiguous", 2, 2)
    assert omitted.status == "ready"  # a budget larger than the answer leaves it whole
    assert closed.status == "closed"
    assert closed.checkpoint is not None
    assert not isinstance(closed.checkpoint, CheckpointRecord)
    assert closed.checkpoint.status == "completed"
    tight = client.resume(subject, kind="task_state", budget_bytes=1024)
    big = client.save(subject, "cursor", {"blob": "x" * 4000})
    squeezed = client.resume(subject, checkpoint_id=big.checkpoint_id, budget_bytes=1024)
    record(SUITE, requests=3)
    assert tight.status == "ready"
    assert (squeezed.status, squeezed.checkpoint is not None) == ("omitted", True)
    assert squeezed.required_bytes is not None
    assert squeezed.required_bytes > 1024


def test_leases_acquire_renew_guard_and_release(client: Baton) -> None:
    subject = new_subject("lease")
    saved = client.save(subject, "task_state", {"step": 1})
    lease = client.acquire_lease(saved.checkpoint_id, 60, holder="worker-1")
    renewed = client.acquire_lease(saved.checkpoint_id, 120, holder="worker-1")
    assert (lease.meta.status, lease.renewed, renewed.renewed) == (201, False, True)
    assert renewed.lease_token == lease.lease_token
    with pytest.raises(LeaseHeldError) as held:
        client.save(subject, "task_state", {"step": 2})
    assert held.value.lease_expires_at == renewed.expires_at
    with pytest.raises(LeaseHeldError):
        client.delete(saved.checkpoint_id)
    written = client.save(subject, "task_state", {"step": 2}, lease_token=lease.lease_token)
    record_with_lease = client.get(saved.checkpoint_id)
    released = client.release_lease(saved.checkpoint_id, lease.lease_token)
    after = client.get(saved.checkpoint_id)
    record(SUITE, requests=9)
    assert written.revision == 2
    assert record_with_lease.lease is not None
    assert record_with_lease.lease.holder == "worker-1"
    assert released.released is True
    assert after.lease is None


def test_conditional_delete_then_not_found(client: Baton) -> None:
    subject = new_subject("delete")
    saved = client.save(subject, "task_state", {"step": 1})
    client.save(subject, "task_state", {"step": 2})
    client.get(saved.checkpoint_id)  # now cached: the delete must make the cache forget it
    with pytest.raises(RevisionConflictError) as stale:
        client.delete(saved.checkpoint_id, if_match=1)
    assert stale.value.current_revision == 2
    deleted = client.delete(saved.checkpoint_id, if_match=etag_for(saved.checkpoint_id, 2))
    assert (deleted.deleted, deleted.confirmed) == (True, True)
    with pytest.raises(NotFoundError) as missing:
        client.get(saved.checkpoint_id)
    record(SUITE, requests=6)
    assert missing.value.message == "Resource was not found."
    assert missing.value.request_id


def test_purge_removes_every_agents_checkpoints(client: Baton) -> None:
    subject = new_subject("purge")
    for agent in ("agent-a", "agent-b"):
        client.save(subject, "task_state", {"a": agent}, agent_id=agent)
    purged = client.purge_subject(subject, until_complete=True)
    again = client.purge_subject(subject)
    record(SUITE, requests=5)
    assert (purged.deleted_checkpoints, purged.complete) == (2, True)
    assert (again.deleted_checkpoints, again.complete) == (0, True)
    assert client.list_checkpoints(subject).items == []


def test_keys_create_list_use_and_revoke(client: Baton, baton: BatonServe) -> None:
    agent = f"sdk-{uuid.uuid4().hex[:12]}"
    created = client.create_key(agent, ["checkpoints:read", "checkpoints:write"], description="sdk e2e")
    listed = [key.key_id for key in client.iter_keys(agent_id=agent, page_size=1)]
    with Baton(baton.url, created.secret, retry=FAST) as agent_client:
        saved = agent_client.save(new_subject("keys"), "task_state", {"by": agent})
        revoked = client.revoke_key(created.key_id)
        after = [key.key_id for key in client.iter_keys(agent_id=agent)]
    record(SUITE, requests=6)
    assert created.secret
    assert created.scopes == ("checkpoints:read", "checkpoints:write")
    assert listed == [created.key_id]
    assert saved.agent_id == agent
    assert (revoked.key_id, revoked.deleted, revoked.confirmed) == (created.key_id, True, True)
    assert after == []


def test_blob_upload_and_download_stream_with_progress(client: Baton, tmp_path: Path) -> None:
    content = os.urandom(700 * 1024 + 17)
    source = tmp_path / "screenshot.png"
    source.write_bytes(content)
    uploads: list[tuple[int, int]] = []
    downloads: list[tuple[int, int]] = []
    blob = client.upload_blob(source, progress=lambda done, total: uploads.append((done, total)), chunk_size=256 * 1024)
    assert (blob.sha256, blob.size, blob.media_type) == (hashlib.sha256(content).hexdigest(), len(content), "image/png")
    saved = client.save(new_subject("blob"), "task_state", {"see": "shot"}, resources=[blob.as_resource("shot")])
    held = client.get(saved.checkpoint_id)
    target = tmp_path / "out" / "copy.png"
    target.parent.mkdir()
    info = client.download_blob(blob.blob_id, target, progress=lambda done, total: downloads.append((done, total)))
    record(SUITE, requests=7, blob_bytes=2 * len(content))
    assert [done for done, _ in uploads] == [256 * 1024, 512 * 1024, len(content)]
    assert {total for _, total in uploads} == {len(content)}
    assert downloads[-1] == (len(content), len(content))
    assert target.read_bytes() == content
    assert not (tmp_path / "out" / "copy.png.part").exists()
    assert info.blob_id == blob.blob_id
    assert [(item.name, item.blob_id, item.download_url is not None) for item in held.resources] == [
        ("shot", blob.blob_id, True)
    ]
    # The record's resources go back into a save as they are
    again = client.save(saved.subject_id, "task_state", {"see": "again"}, resources=held.resources)
    assert again.revision == 2


# -- retries that never write twice ----------------------------------------------------------------------------


def test_a_save_whose_answer_was_lost_is_retried_and_written_once(baton: BatonServe, client: Baton) -> None:
    subject = new_subject("dropped")
    first = client.save(subject, "task_state", {"step": 1})
    transport = DropAnswerOnce(lambda request: request.method == "POST")
    with Baton(baton.url, baton.key, retry=FAST, transport=transport) as flaky:
        second = flaky.save(subject, "task_state", {"step": 2})
    current = client.lookup(subject, "task_state")
    record(SUITE, requests=4, dropped_answers=1)
    # The first try reached the server and wrote revision 2; its answer was lost; the retry, with the same
    # Idempotency-Key, was answered with the replay of that write, and nothing more was written
    assert transport.dropped == 1
    assert [request.headers["Idempotency-Key"] for request in transport.requests] == [second.meta.idempotency_key] * 2
    assert (second.revision, second.meta.replayed, second.meta.attempts) == (2, True, 2)
    assert (current.revision, current.state) == (2, {"step": 2})
    assert first.revision == 1


def test_a_delete_whose_answer_was_lost_counts_as_done_on_a_404(baton: BatonServe, client: Baton) -> None:
    saved = client.save(new_subject("dropped-delete"), "task_state", {"step": 1})
    transport = DropAnswerOnce(lambda request: request.method == "DELETE")
    with Baton(baton.url, baton.key, retry=FAST, transport=transport) as flaky:
        deleted = flaky.delete(saved.checkpoint_id)
    record(SUITE, requests=3, dropped_answers=1)
    assert (deleted.deleted, deleted.confirmed, deleted.meta.status, deleted.meta.attempts) == (True, False, 404, 2)
    with pytest.raises(NotFoundError):
        client.get(saved.checkpoint_id)


def test_a_key_creation_whose_answer_was_lost_is_not_repeated(baton: BatonServe, client: Baton) -> None:
    agent = f"sdk-{uuid.uuid4().hex[:12]}"
    transport = DropAnswerOnce(lambda request: request.method == "POST")
    with (
        Baton(baton.url, baton.key, retry=FAST, transport=transport) as flaky,
        pytest.raises(BatonConnectionError) as lost,
    ):
        flaky.create_key(agent, ["checkpoints:read"])
    keys = list(client.iter_keys(agent_id=agent))
    record(SUITE, requests=2, dropped_answers=1)
    # POST /v1/keys takes no Idempotency-Key: one request, an error saying the outcome is unknown, one key minted
    assert len(transport.requests) == 1
    assert lost.value.outcome_unknown
    assert len(keys) == 1


# -- typed exceptions ------------------------------------------------------------------------------------------


def test_each_error_code_the_server_answers_raises_its_class(baton: BatonServe, client: Baton) -> None:
    subject = new_subject("errors")
    saved = client.save(subject, "task_state", {"step": 1})
    reader = client.create_key(f"sdk-{uuid.uuid4().hex[:12]}", ["checkpoints:read"])
    cases: list[tuple[type[BatonError], str, int, Callable[[], object]]] = []

    def case(cls: type[BatonError], code: str, status: int) -> Callable[[Callable[[], object]], None]:
        def add(provoke: Callable[[], object]) -> None:
            cases.append((cls, code, status, provoke))

        return add

    case(ValidationError, "VALIDATION_ERROR", 400)(lambda: client.save(subject, "diary", {"step": 1}))
    with Baton(baton.url, "btn_not_a_key_0000000000000000000") as stranger:
        case(UnauthenticatedError, "UNAUTHENTICATED", 401)(lambda: stranger.get(saved.checkpoint_id))
        with Baton(baton.url, reader.secret) as read_only:
            case(ForbiddenError, "FORBIDDEN", 403)(lambda: read_only.save(subject, "cursor", {"c": 1}))
            case(NotFoundError, "NOT_FOUND", 404)(lambda: client.get("ckpt_" + "0" * 32))
            case(MethodNotAllowedError, "METHOD_NOT_ALLOWED", 405)(lambda: client.request("PATCH", "/v1/health"))
            case(RevisionConflictError, "REVISION_CONFLICT", 409)(
                lambda: client.save(subject, "task_state", {"step": 2}, expected_revision=0)
            )
            closed_subject = new_subject("closed")
            client.save(closed_subject, "task_state", {"done": True}, status="completed")
            case(CheckpointClosedError, "CHECKPOINT_CLOSED", 409)(
                lambda: client.save(closed_subject, "task_state", {"again": True})
            )
            leased = client.save(new_subject("leased"), "task_state", {"l": 1})
            client.acquire_lease(leased.checkpoint_id, 60)
            case(LeaseHeldError, "LEASE_HELD", 409)(lambda: client.save(leased.subject_id, "task_state", {"l": 2}))
            case(PayloadTooLargeError, "PAYLOAD_TOO_LARGE", 413)(
                lambda: client.save(subject, "cursor", "x" * 3_000_000)
            )
            case(UnsupportedMediaTypeError, "UNSUPPORTED_MEDIA_TYPE", 415)(
                lambda: client.request(
                    "POST", "/v1/resume", content=b"subject_id=x", headers={"Content-Type": "text/plain"}
                )
            )
            key = str(uuid.uuid4())
            client.save(subject, "workflow", {"w": 1}, idempotency_key=key)
            case(IdempotencyKeyReusedError, "IDEMPOTENCY_KEY_REUSED", 422)(
                lambda: client.save(subject, "workflow", {"w": "other"}, idempotency_key=key)
            )
            for cls, code, status, provoke in cases:
                with pytest.raises(BatonError) as raised:
                    provoke()
                assert type(raised.value) is cls, (code, raised.value)
                assert (raised.value.code, raised.value.status, raised.value.gateway) == (code, status, False)
                assert raised.value.message
                assert raised.value.request_id
    record(SUITE, requests=len(cases) + 7, error_codes=len(cases))
    assert len(cases) == 11


def test_the_emulated_gateways_own_413_body_maps_to_payload_too_large(client: Baton) -> None:
    # Over API Gateway's 10 MB: baton serve answers as API Gateway does, `{"message": ...}` without a code
    with pytest.raises(PayloadTooLargeError) as raised:
        client.request(
            "POST", "/v1/resume", content=b" " * (10 * 1024 * 1024 + 1), headers={"Content-Type": "application/json"}
        )
    record(SUITE, requests=1)
    assert raised.value.gateway is True
    assert raised.value.status == 413
    assert raised.value.message


def test_validation_errors_carry_their_pointers(client: Baton) -> None:
    with pytest.raises(ValidationError) as raised:
        client.save(new_subject("pointers"), "diary", {"s": 1}, ttl_seconds=5)
    record(SUITE, requests=1)
    assert {error["pointer"] for error in raised.value.errors} == {"/kind", "/ttl_seconds"}


# -- the asynchronous client -----------------------------------------------------------------------------------


def test_async_client_covers_the_routes(baton: BatonServe, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncBaton(baton.url, baton.key, retry=FAST) as sdk:
            subject = new_subject("async")
            assert (await sdk.health()).status == "ok"
            assert await sdk.schema("opencheckpoint-0.1.json")
            saved = await sdk.save(subject, "task_state", {"step": 1}, keep_revisions=2)
            await sdk.save(subject, "task_state", {"step": 2})
            assert (await sdk.lookup(subject, "task_state")).revision == 2
            assert (await sdk.get(saved.checkpoint_id)).meta.status == 200
            assert (await sdk.get(saved.checkpoint_id)).meta.status == 304
            assert [item.checkpoint_id async for item in sdk.iter_checkpoints(subject, page_size=1)] == [
                saved.checkpoint_id
            ]
            assert [item.revision async for item in sdk.iter_revisions(saved.checkpoint_id)] == [1]
            assert (await sdk.list_revisions(saved.checkpoint_id)).next_cursor is None
            assert (await sdk.get_revision(saved.checkpoint_id, 1)).state == {"step": 1}
            assert (await sdk.restore(saved.checkpoint_id, 1)).revision == 3
            assert (await sdk.resume(subject)).status == "ready"
            lease = await sdk.acquire_lease(saved.checkpoint_id, 30)
            assert (await sdk.release_lease(saved.checkpoint_id, lease.lease_token)).released
            content = os.urandom(300_000)
            (tmp_path / "a.bin").write_bytes(content)
            seen: list[int] = []
            blob = await sdk.upload_blob(tmp_path / "a.bin", progress=lambda done, _: seen.append(done))
            info = await sdk.get_blob(blob.blob_id)
            await sdk.download_blob(info, tmp_path / "b.bin")
            assert (tmp_path / "b.bin").read_bytes() == content
            assert seen[-1] == len(content)
            agent = f"sdk-{uuid.uuid4().hex[:12]}"
            key = await sdk.create_key(agent, ["checkpoints:read"])
            assert [item.key_id async for item in sdk.iter_keys(agent_id=agent)] == [key.key_id]
            assert (await sdk.list_keys(agent_id=agent)).items[0].key_id == key.key_id
            assert (await sdk.revoke_key(key.key_id)).deleted
            assert (await sdk.delete(saved.checkpoint_id)).deleted
            with pytest.raises(NotFoundError):
                await sdk.get(saved.checkpoint_id)
            assert (await sdk.purge_subject(subject)).complete
            assert (await sdk.request("GET", "/v1/health")).data["status"] == "ok"

    asyncio.run(scenario())
    record(SUITE, requests=32)


def test_async_client_under_twenty_concurrent_saves(baton: BatonServe) -> None:
    async def scenario() -> tuple[list[Any], list[Any], list[Any], int]:
        async with AsyncBaton(baton.url, baton.key, retry=FAST) as sdk:
            # 20 subjects at once: every save creates its own checkpoint
            subjects = [new_subject(f"many-{index}") for index in range(20)]
            spread = await asyncio.gather(*(sdk.save(s, "task_state", {"s": s}) for s in subjects))
            # 20 writers racing on one checkpoint at revision 1: exactly one wins, the others see revision 2
            shared = new_subject("race")
            await sdk.save(shared, "task_state", {"writer": None})
            raced = await asyncio.gather(
                *(sdk.save(shared, "task_state", {"writer": index}, expected_revision=1) for index in range(20)),
                return_exceptions=True,
            )
            # 20 sends of the same request with one Idempotency-Key at once: written once, every answer that one
            key = str(uuid.uuid4())
            same = await asyncio.gather(
                *(sdk.save(shared, "workflow", {"once": True}, idempotency_key=key) for _ in range(20)),
                return_exceptions=True,
            )
            final = (await sdk.lookup(shared, "task_state")).revision
            return list(spread), list(raced), list(same), final

    spread, raced, same, final = asyncio.run(scenario())
    record(SUITE, requests=62, concurrent_saves=60)
    assert [(result.meta.status, result.revision) for result in spread] == [(201, 1)] * 20
    assert len({result.checkpoint_id for result in spread}) == 20
    winners = [result for result in raced if not isinstance(result, BaseException)]
    losers = [result for result in raced if isinstance(result, BaseException)]
    assert len(winners) == 1
    assert winners[0].revision == 2
    assert all(isinstance(error, RevisionConflictError) and error.current_revision == 2 for error in losers)
    assert final == 2
    errors = [result for result in same if isinstance(result, BaseException)]
    assert errors == []
    assert len({(result.checkpoint_id, result.revision) for result in same}) == 1
    assert sum(not result.meta.replayed for result in same) == 1
