"""LangGraph threads: the checkpointer's calls, one route each (`baton_checkpoints.langgraph.BatonSaver` is their
client).

Thread writes are idempotent by their own keys (a put names its checkpoint id, a write its (task_id, idx)), so these
routes take no Idempotency-Key: a retry writes the same items again and answers the same.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import pybase64
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from msgspec.structs import replace
from pydantic import Field

from baton_checkpoints.api.jsontext import dumps
from baton_checkpoints.api.openapi import (
    AUTHENTICATED_ERRORS,
    WRITE_403,
    CursorParameter,
    documented,
    enveloped,
    paged,
)
from baton_checkpoints.api.operations.audit import record, record_each
from baton_checkpoints.api.paths import ThreadIdParameter, thread_from_path
from baton_checkpoints.api.resolver import Call, CurrentCall, Wired, context_of, needs
from baton_checkpoints.api.responses import fitted_json_page, ok, plain
from baton_checkpoints.api.schemas import ResponseModel
from baton_checkpoints.domain import limits, threads
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.errors import NotFound, ValidationFailed
from baton_checkpoints.domain.models import Identifier, Time
from baton_checkpoints.domain.thread_puts import ThreadRef, plan_put, plan_writes
from baton_checkpoints.domain.threads import (
    DELETE_SECONDS,
    CopyThreadRequest,
    DeleteRunsRequest,
    Name,
    Namespace,
    PruneRequest,
    PutCheckpointRequest,
    PutWritesRequest,
    StoredValue,
    ThreadCheckpoint,
)

router = Router()

AgentParameter = Annotated[
    Identifier | None,
    Query(description="Whose thread (a key holding * may name another agent of its tenant); default the caller's."),
]
NamespaceParameter = Annotated[Namespace, Query(description="The checkpoint namespace ('' is the root graph's).")]


class TypedValueOut(ResponseModel):
    """A stored value: its serializer's tag and its bytes (base64), or a presigned download when they live in the
    bucket."""

    type: str
    data: Annotated[str | None, Field(description="Standard base64; absent when url is given.")] = None
    url: Annotated[str | None, Field(description="A presigned GET of the bytes, valid 15 minutes.")] = None


class PendingWriteOut(TypedValueOut):
    """A pending write of a task."""

    task_id: str
    idx: Annotated[
        int, Field(description="The write's index within its task (LangGraph's special channels: negative).")
    ]
    channel: str
    task_path: str


class ThreadTuple(ResponseModel):
    """A checkpoint as LangGraph's `CheckpointTuple` needs it."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: Annotated[dict[str, Any], Field(description="The checkpoint as put, without channel_values.")]
    metadata: dict[str, Any]
    channel_values: Annotated[
        dict[str, TypedValueOut],
        Field(description="The value of each channel of channel_versions that has one (empty ones left out)."),
    ]
    pending_writes: Annotated[
        list[PendingWriteOut], Field(description="Sorted by (task_path, task_id, idx), as LangGraph applies them.")
    ]


class PutAnswer(ResponseModel):
    """What a put answers: the stored checkpoint's address (LangGraph's config) and the thread's new expiry."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    expires_at: Time


class WritesAnswer(ResponseModel):
    """What a put_writes answers."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    writes: Annotated[int, Field(ge=1, description="Writes in the call (a retry keeps the first of each).")]


class ThreadDeleted(ResponseModel):
    """What a thread delete answers."""

    thread_id: str
    deleted: Literal[True]


class ThreadCopied(ResponseModel):
    """What a copy answers."""

    thread_id: str
    target_thread_id: str
    copied_checkpoints: Annotated[int, Field(ge=0)]


class ThreadsPruned(ResponseModel):
    """What a prune answers."""

    pruned_threads: Annotated[int, Field(ge=0, description="Live threads among those named.")]
    deleted_checkpoints: Annotated[int, Field(ge=0)]
    complete: Annotated[
        bool,
        Field(
            description=(
                "False when keep_latest stopped at what one prune reads "
                f"({threads.MAX_PRUNE_READ_BYTES:,} bytes of checkpoints): what it read is pruned; prune again to go "
                "on (the saver does)."
            )
        ),
    ]


class RunsDeleted(ResponseModel):
    """What a delete-for-runs answers."""

    deleted_checkpoints: Annotated[int, Field(ge=0)]
    complete: Annotated[
        bool,
        Field(
            description=(
                "False when it stopped at what one delete reads "
                f"({threads.MAX_RUNS_READ_BYTES:,} bytes of checkpoints): what it read is deleted; delete again to go "
                "on (the saver does)."
            )
        ),
    ]


def _value(value: StoredValue) -> dict[str, Any]:
    found: dict[str, Any] = {"type": value.type}
    if value.data is not None:
        found["data"] = pybase64.b64encode(value.data).decode("ascii")  # SIMD: 20x the standard library
    else:
        found["url"] = value.url
    return found


def _tuple(checkpoint: ThreadCheckpoint) -> dict[str, Any]:
    return {
        "thread_id": checkpoint.thread_id,
        "checkpoint_ns": checkpoint.namespace,
        "checkpoint_id": checkpoint.checkpoint_id,
        "parent_checkpoint_id": checkpoint.parent_checkpoint_id,
        "checkpoint": checkpoint.checkpoint,
        "metadata": checkpoint.metadata,
        "channel_values": {channel: _value(value) for channel, value in checkpoint.values.items()},
        "pending_writes": [
            {"task_id": w.task_id, "idx": w.index, "channel": w.channel, "task_path": w.task_path, **_value(value)}
            for w, value in checkpoint.writes
        ],
    }


def _owner(call: Call, agent_id: str | None, write: bool) -> tuple[str, str]:
    caller = call.caller
    return caller.tenant_id, caller.agent_for_write(agent_id) if write else caller.agent_for_read(agent_id)


def _thread(call: Call, thread_id: str, agent_id: str | None, write: bool) -> ThreadRef:
    """The thread a request names in its path, of the caller's tenant and the agent it acts for."""
    thread = thread_from_path(thread_id)
    return ThreadRef(*_owner(call, agent_id, write), thread)


_THREAD_404 = "NOT_FOUND: the thread (or the checkpoint) is missing, expired, deleted, or not the caller's"


@router.post(
    "/v1/threads/<thread_id>/checkpoints",
    summary="Put a LangGraph checkpoint",
    description=(
        "LangGraph's put. values holds only the channels whose version is new; the others keep the value stored for "
        "their version. Values of at most 512 bytes ride in the checkpoint's item, larger new ones too up to 8 KB "
        "stored; beyond, each version is stored once in an item of its own (in S3 past 350,000 bytes), written before "
        "the checkpoint item, so a failure never leaves a checkpoint without its values. Refreshes the thread's time "
        "to live (a tenth of it, at most a minute, after a refresh, puts write their checkpoint alone). Idempotent by "
        "checkpoint id: a put of an id already stored replaces it and keeps its pending writes."
    ),
    openapi_extensions=needs("checkpoints:write"),
    responses=documented(
        {201: ("Stored", enveloped(PutAnswer))},
        (400, *AUTHENTICATED_ERRORS, 413, 415),
        described={403: WRITE_403},
    ),
    tags=["threads"],
)
def put_checkpoint(
    call: CurrentCall,
    services: Wired,
    thread_id: ThreadIdParameter,
    request: Annotated[PutCheckpointRequest, Body()],
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Store one checkpoint of a thread."""
    ref = _thread(call, thread_id, agent_id, write=True)
    plan = plan_put(request, ref, call.now_ms)
    refusal = services.limiter.quota_refusal(ref.tenant_id, plan.stored_bytes)
    if refusal is not None:
        raise refusal
    creates = services.limiter.quota_refusal(ref.tenant_id, 0, creates=1)
    put = services.threads.put(replace(plan, create_refused=creates))
    answer = PutAnswer.model_construct(
        thread_id=ref.thread_id,
        checkpoint_ns=put.namespace,
        checkpoint_id=put.checkpoint_id,
        expires_at=format_ms(put.expires_ms),
    )
    return ok(answer, call.request_id, status=201)


@router.post(
    "/v1/threads/<thread_id>/writes",
    summary="Put pending writes of a task",
    description=(
        "LangGraph's put_writes. The write at position idx is kept under (task_id, idx), the special channels under "
        "their fixed index (__error__ -1, __scheduled__ -2, __interrupt__ -3, __resume__ -4). A (task_id, idx) "
        "already stored keeps its first write; the special channels overwrite. One call's writes are stored at once "
        "(one write), so a reader sees all of them or none. Writes may arrive before the put of their checkpoint "
        "(LangGraph stores checkpoints in the background): they are kept for it, and shown once it is stored. Reads "
        "never show writes without their checkpoint, and the checkpoints of a deleted thread refuse late writes "
        "(404): a deleted thread stays deleted, even when a checkpoint of the same id is put again."
    ),
    openapi_extensions=needs("checkpoints:write"),
    responses=documented(
        {200: ("Kept", enveloped(WritesAnswer))},
        (400, *AUTHENTICATED_ERRORS, 404, 413, 415),
        described={403: WRITE_403, 404: "NOT_FOUND: the checkpoint belongs to a deleted thread"},
    ),
    tags=["threads"],
)
def put_writes(
    call: CurrentCall,
    services: Wired,
    thread_id: ThreadIdParameter,
    request: Annotated[PutWritesRequest, Body()],
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Keep the writes a task made against a checkpoint."""
    ref = _thread(call, thread_id, agent_id, write=True)
    plan = plan_writes(request, ref, call.now_ms)
    refusal = services.limiter.quota_refusal(ref.tenant_id, plan.stored_bytes)
    if refusal is not None:
        raise refusal
    kept = services.threads.put_writes(plan)
    answer = WritesAnswer.model_construct(
        thread_id=ref.thread_id,
        checkpoint_ns=request.checkpoint_ns,
        checkpoint_id=request.checkpoint_id,
        task_id=request.task_id,
        writes=kept,
    )
    return ok(answer, call.request_id)


@router.get(
    "/v1/threads/<thread_id>/checkpoint",
    summary="Get a LangGraph checkpoint tuple",
    description=(
        "LangGraph's get_tuple: the checkpoint named by checkpoint_id, or without it the latest of the namespace, "
        "with its channel values resolved through channel_versions and its pending writes. Consistent read."
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=documented(
        {200: ("The tuple", enveloped(ThreadTuple))}, (400, *AUTHENTICATED_ERRORS, 404), described={404: _THREAD_404}
    ),
    tags=["threads"],
)
def get_checkpoint(
    call: CurrentCall,
    services: Wired,
    thread_id: ThreadIdParameter,
    checkpoint_ns: NamespaceParameter = "",
    checkpoint_id: Annotated[Name | None, Query(description="Which checkpoint; default the latest.")] = None,
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Read one checkpoint of a thread, as LangGraph resumes from it."""
    ref = _thread(call, thread_id, agent_id, write=False)
    found = services.threads.get(ref, checkpoint_ns, checkpoint_id, call.now_ms)
    return plain(_tuple(found), call.request_id)


@router.get(
    "/v1/threads/<thread_id>/checkpoints",
    summary="List a thread's checkpoints",
    description=(
        "LangGraph's list: tuples newest first (descending checkpoint_id) within checkpoint_ns (without it, every "
        "namespace, one after another), before keeps strictly older ids, filter (a URL-encoded JSON object) keeps "
        "checkpoints whose metadata has every key with an equal value, applied on the server. A page also stops early "
        "(with a cursor) before its data passes 4,500,000 bytes of JSON, and when it has read 4,000,000 bytes of "
        "checkpoints: a page whose filter or before skips many may come back short, or empty with a cursor. A value "
        "kept in the bucket comes as {type, url}: a presigned GET."
    ),
    openapi_extensions=needs("checkpoints:read"),
    responses=documented(
        {200: ("A page", paged(ThreadTuple))}, (400, *AUTHENTICATED_ERRORS, 404), described={404: _THREAD_404}
    ),
    tags=["threads"],
)
def list_checkpoints(
    call: CurrentCall,
    services: Wired,
    thread_id: ThreadIdParameter,
    checkpoint_ns: Annotated[Namespace | None, Query(description="One namespace; every one when absent.")] = None,
    before: Annotated[Name | None, Query(description="Only checkpoints whose id sorts before this one.")] = None,
    filter: Annotated[str | None, Query(description="A JSON object matched exactly against metadata.")] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT,
    cursor: CursorParameter = None,
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Page through a thread's history."""
    thread = thread_from_path(thread_id)
    try:
        wanted = threads.parse_filter(filter)
    except ValueError as exc:
        raise ValidationFailed.single("/filter", f"The query parameter filter {exc}.", "query") from None
    ref = ThreadRef(*_owner(call, agent_id, write=False), thread)
    found = services.threads.page(ref, checkpoint_ns, before, wanted, limit, cursor, call.now_ms)
    return fitted_json_page(
        found.checkpoints, lambda c: dumps(_tuple(c)), call.request_id, found.next_cursor, found.cursor_after
    )


@router.delete(
    "/v1/threads/<thread_id>",
    summary="Delete a thread",
    description=(
        "LangGraph's delete_thread: the whole thread is hidden at once (one write), then its items are removed; what "
        "a very large thread leaves is removed by the reaper shortly after."
    ),
    openapi_extensions=needs("checkpoints:delete"),
    responses=documented(
        {200: ("Deleted", enveloped(ThreadDeleted))}, (400, *AUTHENTICATED_ERRORS, 404), described={404: _THREAD_404}
    ),
    tags=["threads"],
)
def delete_thread(
    call: CurrentCall, services: Wired, thread_id: ThreadIdParameter, agent_id: AgentParameter = None
) -> Response[str]:
    """Forget a thread."""
    deadline = time.monotonic() + DELETE_SECONDS
    ref = _thread(call, thread_id, agent_id, write=False)
    if not services.threads.delete(ref, call.now_ms, deadline):
        raise NotFound()
    target = {"type": "thread", "id": ref.thread_id}
    record(context_of(call, services), ref.tenant_id, "thread.deleted", target, {"agent_id": ref.agent_id})
    return ok(ThreadDeleted.model_construct(thread_id=ref.thread_id, deleted=True), call.request_id)


@router.post(
    "/v1/threads/<thread_id>/copy",
    summary="Copy a thread",
    description=(
        "LangGraph's copy_thread: every checkpoint, pending write and value of the thread into target_thread_id "
        "(merged into it when it exists), with the source's time to live. Repeating it copies the same again. A copy "
        f"reads at most {threads.MAX_COPY_READ_BYTES:,} bytes of the thread's items: a larger thread is refused (413) "
        "before anything is written."
    ),
    openapi_extensions=needs("checkpoints:write"),
    responses=documented(
        {200: ("Copied", enveloped(ThreadCopied))},
        (400, *AUTHENTICATED_ERRORS, 404, 413, 415),
        described={
            403: WRITE_403,
            404: _THREAD_404,
            413: "PAYLOAD_TOO_LARGE: the thread's items pass what one copy reads",
        },
    ),
    tags=["threads"],
)
def copy_thread(
    call: CurrentCall,
    services: Wired,
    thread_id: ThreadIdParameter,
    request: Annotated[CopyThreadRequest, Body()],
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Fork a thread under a new id."""
    deadline = time.monotonic() + DELETE_SECONDS
    ref = _thread(call, thread_id, agent_id, write=True)
    copied = services.threads.copy(
        ref,
        request.target_thread_id,
        call.now_ms,
        deadline,
        lambda adds_bytes, creates: services.limiter.quota_refusal(ref.tenant_id, adds_bytes, creates),
    )
    answer = ThreadCopied.model_construct(
        thread_id=ref.thread_id, target_thread_id=request.target_thread_id, copied_checkpoints=copied
    )
    return ok(answer, call.request_id)


@router.post(
    "/v1/threads:prune",
    summary="Prune threads",
    description=(
        "LangGraph's prune: keep_latest keeps the latest checkpoint of each namespace (its pending writes and the "
        "values it needs), delete removes the threads. Threads that do not exist are skipped. keep_latest reads at "
        f"most {threads.MAX_PRUNE_READ_BYTES:,} bytes of checkpoints a request: past that it prunes what it read "
        "and answers complete: false; prune again to go on."
    ),
    openapi_extensions=needs("checkpoints:delete"),
    responses=documented({200: ("Pruned", enveloped(ThreadsPruned))}, (400, *AUTHENTICATED_ERRORS, 415)),
    tags=["threads"],
)
def prune_threads(
    call: CurrentCall,
    services: Wired,
    request: Annotated[PruneRequest, Body()],
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Drop old checkpoints of threads."""
    deadline = time.monotonic() + DELETE_SECONDS
    tenant, agent = _owner(call, agent_id, write=True)
    refs = [ThreadRef(tenant, agent, thread_id) for thread_id in request.thread_ids]
    deleted: list[str] = []
    try:
        pruned = services.threads.prune(refs, request.strategy, call.now_ms, deadline, deleted)
    finally:
        # Every thread it deleted, even when a later one's delete failed (its retry skips the deleted ones)
        targets = [({"type": "thread", "id": thread_id}, {"agent_id": agent}) for thread_id in deleted]
        record_each(context_of(call, services), tenant, "thread.deleted", targets)
    answer = ThreadsPruned.model_construct(
        pruned_threads=pruned.threads, deleted_checkpoints=pruned.checkpoints, complete=pruned.complete
    )
    return ok(answer, call.request_id)


@router.post(
    "/v1/threads:delete-for-runs",
    summary="Delete the checkpoints of runs",
    description=(
        "LangGraph's delete_for_runs: every thread checkpoint of the agent whose metadata.run_id is one of run_ids, "
        "with its pending writes, found through an index (never a scan). The index follows writes within about a "
        f"second. It reads at most {threads.MAX_RUNS_READ_BYTES:,} bytes of checkpoints a request: past that it "
        "deletes what it read and answers complete: false; delete again to go on."
    ),
    openapi_extensions=needs("checkpoints:delete"),
    responses=documented({200: ("Deleted", enveloped(RunsDeleted))}, (400, *AUTHENTICATED_ERRORS, 415)),
    tags=["threads"],
)
def delete_for_runs(
    call: CurrentCall,
    services: Wired,
    request: Annotated[DeleteRunsRequest, Body()],
    agent_id: AgentParameter = None,
) -> Response[str]:
    """Forget what some runs wrote."""
    tenant, agent = _owner(call, agent_id, write=True)
    deleted, complete = services.threads.delete_for_runs(tenant, agent, request.run_ids)
    return ok(RunsDeleted.model_construct(deleted_checkpoints=deleted, complete=complete), call.request_id)
