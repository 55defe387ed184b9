"""The tool catalogue: each tool runs the operation its HTTP route runs (`api/operations/`).

A tool's arguments are the route's body fields, path and query parameters and the headers a model needs
(`lease_token`, `expected_revision` as `If-Match`, `idempotency_key`), under the names the contract gives them.
They are judged by the route's own rules (its request model, the parameters' types, `operations.inputs`), and an
error names the argument. The tool's result is its route's `data`, written by the same code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, TypeVar

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as ModelError

from baton_checkpoints.api.errors import validation_failed
from baton_checkpoints.api.jsontext import fit_page, model_json, record_json
from baton_checkpoints.api.mcp import arguments
from baton_checkpoints.api.mcp.arguments import IDEMPOTENCY_KEY, LEASE_TOKEN, Schema, closed
from baton_checkpoints.api.operations import Context, Operation
from baton_checkpoints.api.operations import checkpoints as checkpoint_operations
from baton_checkpoints.api.operations import leases as lease_operations
from baton_checkpoints.api.operations import resume as resume_operation
from baton_checkpoints.api.operations.inputs import Idempotent, Named, checkpoint_id, lease_token
from baton_checkpoints.api.records import record_summary
from baton_checkpoints.api.schemas import CheckpointSummary, DeleteResult, SaveResult
from baton_checkpoints.api.schemas_leases import LeaseGranted, LeaseReleased
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import Checkpoint
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.errors import FieldError, ValidationFailed
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import AcquireLeaseRequest, Identifier, SaveCheckpointRequest, SubjectId
from baton_checkpoints.domain.resume import ResumeRequest

Result = dict[str, Any]
"""A tool's structured result: its route's `data` (a list's page under `checkpoints`, with `next_cursor`)."""
M = TypeVar("M", bound=BaseModel)


class Hints(Struct, frozen=True):
    """What a tool does to the world (MCP tool annotations), stated truthfully."""

    read_only: bool
    destructive: bool
    idempotent: bool


class ToolSpec(Struct, frozen=True):
    """One tool: its name, what a model reads about it, and the operation a call runs."""

    name: str
    title: str
    description: str
    input_schema: Schema
    hints: Hints
    operation: Operation[..., Any]
    """The operation the tool runs: its scope and authority fields are judged before any argument."""
    call: Callable[[Context, dict[str, Any], bool], Result]
    """Run the operation with the call's arguments (and whether their canonical form may take the fast path): its
    result, or the domain's error (`ValidationFailed` for arguments the route's rules refuse)."""

    def __post_init__(self) -> None:
        if self.operation.fresh_key:
            # A tool runs as the caller `/mcp` authenticated, whose key may come from the container's cache.
            raise ValueError(f"{self.name}: an operation that reads its caller's key fresh cannot be a tool")

    def run(self, context: Context, args: dict[str, Any], plain: bool = False) -> Result:
        """Authorize, then call (the contract ranks 403 before 400, as the route's gate does)."""
        self.operation.authorize(context.caller, args)
        return self.call(context, args, plain)


def _check(args: dict[str, Any], schema: Schema) -> None:
    """Unknown arguments, and arguments of the wrong JSON type, named by pointer (the route judges the values)."""
    problems: list[FieldError] = []
    properties: dict[str, Schema] = schema["properties"]
    for name, value in args.items():
        expected = properties.get(name)
        if expected is None:
            allowed = ", ".join(sorted(properties))
            problems.append(
                FieldError(f"/{name}", f"/{name} is not an argument of this tool; its arguments: {allowed}.")
            )
        elif not _has_type(value, expected.get("type")):
            problems.append(FieldError(f"/{name}", f"/{name} must be a JSON {expected.get('type')}."))
    for name in schema.get("required", []):
        if name not in args:
            problems.append(FieldError(f"/{name}", f"/{name} is required."))
    if problems:
        raise ValidationFailed(problems)


def _has_type(value: Any, expected: str | None) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return True


def _split(args: dict[str, Any], *names: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the arguments named, the rest)."""
    return {n: args[n] for n in names if n in args}, {n: v for n, v in args.items() if n not in names}


def _idempotent(taken: dict[str, Any], body: dict[str, Any], plain: bool) -> Idempotent | None:
    """The call's idempotency key, keying `body` as the route's header keys its body (None without one)."""
    key = taken.get("idempotency_key")
    if key is not None and not isinstance(key, str):
        raise ValidationFailed.single("/idempotency_key", "/idempotency_key must be a string.")
    return None if key is None else Idempotent(key, body, plain, Named.argument("idempotency_key"))


def _validated(model: type[M], values: dict[str, Any]) -> M:
    """`values` as `model` reads them, or the route's `ValidationFailed` for them (pointers into the arguments)."""
    try:
        return model.model_validate(values)
    except ModelError as invalid:
        raise validation_failed([{**e, "loc": ("body", *e["loc"])} for e in invalid.errors()]) from None


def _text(args: dict[str, Any]) -> None:
    """Arguments that a route reads from its path, query or headers are text: a lone surrogate (valid JSON, not
    text) is refused here, naming the argument, before it can reach a key or a request."""
    for name, value in args.items():
        if isinstance(value, str) and not _is_text(value):
            raise ValidationFailed.single(f"/{name}", f"/{name} holds a lone surrogate, which is not text.")


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _data(model: BaseModel) -> Result:
    """A response model as the route writes it in `data`."""
    data: Result = json.loads(model_json(model))
    return data


def _record(context: Context, found: Checkpoint) -> Result:
    """A checkpoint record as the route writes it: its summary, and the state as the store holds it."""
    if found.state_text is None:
        raise ValueError("checkpoint was loaded without its state")
    data: Result = json.loads(record_json(record_summary(found, context.services, context.now_ms), found.state_text))
    return data


# -- the tools --------------------------------------------------------------------------------------------------


def _save_schema() -> Schema:
    from baton_checkpoints.domain.models import SaveCheckpointRequest

    schema = arguments.of_model(
        SaveCheckpointRequest,
        {
            "subject_id": "Who or what the work is about, e.g. a ticket or a user id (1-200 characters).",
            "kind": "What the state is: task_state, conversation, workflow or cursor.",
            "ttl_seconds": "Seconds the checkpoint lives after this write (60 to 2592000; default 86400 on create).",
            "agent_id": "Whose checkpoint: defaults to the calling key's agent; another agent's needs the scope *.",
            "expected_revision": "Save only if the current revision is this one (0: only if it does not exist yet).",
            "status": "active (default), completed or cancelled; completed and cancelled are final.",
            "format": "Optional, e.g. opencheckpoint/0.1: the state is then validated as that format.",
            "lease_token": "The token of the checkpoint's live lease, when it is leased.",
            "keep_revisions": "How many superseded revisions stay readable (0 to 100; default 0 on create).",
        },
    )
    schema["properties"]["state"] = {
        "description": "The state to park: any JSON value except null (up to 3,000,000 bytes of canonical JSON).",
        "not": {"type": "null"},
    }
    schema["properties"]["idempotency_key"] = IDEMPOTENCY_KEY
    return schema


def _save(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    taken, body = _split(args, "idempotency_key")
    request = _validated(SaveCheckpointRequest, body)
    outcome = checkpoint_operations.save(context, request, _idempotent(taken, body, plain), plain)
    return _data(SaveResult.of(outcome.saved))


def _get_schema() -> Schema:
    return closed(
        {
            "checkpoint_id": {**arguments.CHECKPOINT_ID, "description": "Read this checkpoint (or give subject_id "
                              "and kind instead)."},
            "subject_id": arguments.subject_id("With kind: read the checkpoint of this subject."),
            "kind": arguments.kind("With subject_id: which of the subject's checkpoints."),
            "agent_id": arguments.agent_id(
                "With subject_id and kind: another agent's checkpoint (needs the scope *); default the caller's."
            ),
        }
    )  # fmt: skip


class _Lookup(BaseModel):
    """The lookup's query parameters, as the route types them."""

    model_config = ConfigDict(extra="forbid")
    subject_id: SubjectId
    kind: Kind
    agent_id: Identifier | None = None


def _get(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    _check(args, _get_schema())
    _text(args)
    if "checkpoint_id" in args:
        if len(args) > 1:
            raise ValidationFailed.single(
                "/checkpoint_id", "Give either checkpoint_id, or subject_id and kind (and agent_id), not both."
            )
        target = checkpoint_id(args["checkpoint_id"], Named.argument("checkpoint_id"))
        return _record(context, checkpoint_operations.get(context, target))
    missing = [FieldError(f"/{n}", f"/{n} is required without checkpoint_id.") for n in ("subject_id", "kind")]
    missing = [problem for problem in missing if problem.pointer[1:] not in args]
    if missing:
        raise ValidationFailed(missing)
    query = _validated(_Lookup, args)
    return _record(context, checkpoint_operations.lookup(context, query.subject_id, query.kind, query.agent_id))


def _list_schema() -> Schema:
    return closed(
        {
            "subject_id": arguments.subject_id("The subject whose checkpoints to list."),
            "kind": arguments.kind("Only checkpoints of this kind."),
            "status": arguments.status("Only checkpoints with this status."),
            "agent_id": arguments.agent_id("Only this agent's (another agent's needs the scope *)."),
            "limit": arguments.page_limit(),
            "cursor": arguments.cursor(),
        },
        required=("subject_id",),
    )


class _List(BaseModel):
    """The list's path and query parameters, as the route types them."""

    model_config = ConfigDict(extra="forbid")
    subject_id: SubjectId
    kind: Kind | None = None
    status: Status | None = None
    agent_id: Identifier | None = None
    limit: Annotated[int, Field(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.DEFAULT_PAGE_LIMIT
    cursor: Annotated[str | None, Field(max_length=2048)] = None


def _list(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    _check(args, _list_schema())
    _text(args)
    query = _validated(_List, args)
    page = checkpoint_operations.list_subject(
        context, query.subject_id, query.kind, query.status, query.agent_id, query.limit, query.cursor
    )
    now_ms = context.now_ms
    shown, next_cursor = fit_page(
        page.items, lambda cp: model_json(CheckpointSummary.of(cp, now_ms)), page.next_cursor, page.cursor_after
    )
    return {"checkpoints": [json.loads(text) for text in shown], "next_cursor": next_cursor}


def _delete_schema() -> Schema:
    return closed(
        {
            "checkpoint_id": arguments.CHECKPOINT_ID,
            "expected_revision": {
                "type": "integer",
                "minimum": 1,
                "description": "Delete only if this is still the current revision (REVISION_CONFLICT otherwise).",
            },
            "lease_token": {**LEASE_TOKEN, "description": "The token of the checkpoint's live lease, if leased."},
        },
        required=("checkpoint_id",),
    )


def _delete(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    _check(args, _delete_schema())
    _text(args)
    target = checkpoint_id(args["checkpoint_id"], Named.argument("checkpoint_id"))
    revision = args.get("expected_revision")
    if revision is not None and revision < 1:
        raise ValidationFailed.single("/expected_revision", "/expected_revision must be at least 1.")
    token = lease_token(args.get("lease_token"), Named.argument("lease_token"))
    checkpoint_operations.delete(context, target, None if revision is None else (revision,), token)
    return _data(DeleteResult.model_construct(checkpoint_id=target, deleted=True))


def _resume_schema() -> Schema:
    from baton_checkpoints.domain.resume import ResumeRequest

    return arguments.of_model(
        ResumeRequest,
        {
            "subject_id": "The subject whose work to pick up again.",
            "kind": "Only checkpoints of this kind.",
        },
    )


MCP_RESUME_DATA_BYTES = limits.MAX_ANSWER_DATA_BYTES * 4 // 5
"""The most bytes of `data` a `ready` resume takes through MCP, whatever the caller's budget (past it: `omitted`).
The tool's result is the route's data parsed and written again, and Python writes some numbers one character longer
than canonical JSON does (`1e-07` for `1e-7`; strings and every other number are written alike), so data of
canonical bytes n is at most 5n/4 bytes there: 4/5 of what one answer carries keeps the result within it."""


def _resume(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    budget = args.get("budget_bytes")
    if budget is None or (type(budget) is int and budget > MCP_RESUME_DATA_BYTES):
        args = {**args, "budget_bytes": MCP_RESUME_DATA_BYTES}  # a budget the route refuses is left to it to judge
    resumed = resume_operation.resume(context, _validated(ResumeRequest, args))
    if isinstance(resumed, resume_operation.Ready):
        data: Result = json.loads(resumed.data_json)
        return data
    return _data(resumed)


def _acquire_schema() -> Schema:
    from baton_checkpoints.domain.models import AcquireLeaseRequest

    schema = arguments.of_model(AcquireLeaseRequest, {})
    schema["properties"] = {
        "checkpoint_id": arguments.CHECKPOINT_ID,
        **schema["properties"],
        "idempotency_key": IDEMPOTENCY_KEY,
    }
    schema["required"] = ["checkpoint_id", *schema.get("required", [])]
    return schema


def _acquire(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    taken, body = _split(args, "checkpoint_id", "idempotency_key")
    found = taken.get("checkpoint_id")
    if not isinstance(found, str):
        raise ValidationFailed.single("/checkpoint_id", "/checkpoint_id is required, a string.")
    _text({"checkpoint_id": found})
    target = checkpoint_id(found, Named.argument("checkpoint_id"))
    request = _validated(AcquireLeaseRequest, body)
    acquired = lease_operations.acquire(context, target, request, _idempotent(taken, body, plain))
    lease = acquired.grant.lease
    granted = LeaseGranted.model_construct(
        checkpoint_id=target, lease_token=lease.token, holder=lease.holder, expires_at=format_ms(lease.expires_ms)
    )
    return _data(granted)


def _release_schema() -> Schema:
    return closed(
        {"checkpoint_id": arguments.CHECKPOINT_ID, "lease_token": LEASE_TOKEN}, ("checkpoint_id", "lease_token")
    )


def _release(context: Context, args: dict[str, Any], plain: bool = False) -> Result:
    _check(args, _release_schema())
    _text(args)
    target = checkpoint_id(args["checkpoint_id"], Named.argument("checkpoint_id"))
    token = lease_token(args["lease_token"], Named.argument("lease_token"), required=True)
    assert token is not None  # required: refused above otherwise
    lease_operations.release(context, target, token)
    return _data(LeaseReleased.model_construct(checkpoint_id=target, released=True))


@cache
def catalogue() -> dict[str, ToolSpec]:
    """Every tool, by name (built once per container, at the first MCP request that needs it)."""
    tools = [
        ToolSpec(
            "baton_checkpoint_save",
            "Save a checkpoint",
            "Park where the work got to: upserts the checkpoint of (subject_id, kind) for the caller's agent. The "
            "first save creates it (revision 1, a new checkpoint_id); each later one replaces its state and adds 1 "
            "to its revision. Returns checkpoint_id, revision, status, state_hash, state_bytes, expires_at and "
            "updated (false on create). Needs the scope checkpoints:write.",
            _save_schema(),
            Hints(read_only=False, destructive=True, idempotent=False),
            checkpoint_operations.save,
            _save,
        ),
        ToolSpec(
            "baton_checkpoint_get",
            "Get a checkpoint",
            "Read a checkpoint whole, state included: by checkpoint_id, or by subject_id and kind. A missing, "
            "expired or not visible checkpoint is NOT_FOUND. Right after a create, reading by id may be NOT_FOUND "
            "for about a second; retry once. Needs the scope checkpoints:read.",
            _get_schema(),
            Hints(read_only=True, destructive=False, idempotent=True),
            checkpoint_operations.get,
            _get,
        ),
        ToolSpec(
            "baton_checkpoint_list",
            "List a subject's checkpoints",
            "The caller's checkpoints of a subject, as summaries without state, newest update first, a page at a "
            "time: when next_cursor is not null, call again with it as cursor. Needs the scope checkpoints:read.",
            _list_schema(),
            Hints(read_only=True, destructive=False, idempotent=True),
            checkpoint_operations.list_subject,
            _list,
        ),
        ToolSpec(
            "baton_checkpoint_delete",
            "Delete a checkpoint",
            "Delete a checkpoint and its kept revisions (terminal ones too). A leased checkpoint needs its "
            "lease_token. Returns {checkpoint_id, deleted: true}. Needs the scope checkpoints:delete.",
            _delete_schema(),
            Hints(read_only=False, destructive=True, idempotent=True),
            checkpoint_operations.delete,
            _delete,
        ),
        ToolSpec(
            "baton_resume",
            "Resume work on a subject",
            "Which checkpoint to pick up again, without changing anything. status is ready (exactly one active "
            "match: the checkpoint whole, with pending_operations and stop_conditions for an OpenCheckpoint "
            "document), ambiguous (several: candidates; narrow with kind, agent_id or checkpoint_id), none, closed "
            "(the only match is completed or cancelled) or omitted (the answer would exceed budget_bytes, or "
            f"{MCP_RESUME_DATA_BYTES:,} bytes through this tool: required_bytes; read the checkpoint whole with "
            "baton_checkpoint_get). Needs the scope checkpoints:read.",
            _resume_schema(),
            Hints(read_only=True, destructive=False, idempotent=True),
            resume_operation.resume,
            _resume,
        ),
        ToolSpec(
            "baton_lease_acquire",
            "Acquire a checkpoint's lease",
            "Claim a checkpoint for ttl_seconds so that no one else writes it: returns lease_token, holder and "
            "expires_at. The same holder renews its lease (same token, later expiry); anyone else gets LEASE_HELD "
            "while it is live. While leased, saves and deletes must send lease_token; a write whose lease_token "
            "names a lease that is gone (taken over or released; a save's checkpoint deleted or purged) answers "
            "LEASE_LOST and writes nothing: stop, acquire again and re-read. Needs the scope leases:write.",
            _acquire_schema(),
            Hints(read_only=False, destructive=False, idempotent=False),
            lease_operations.acquire,
            _acquire,
        ),
        ToolSpec(
            "baton_lease_release",
            "Release a checkpoint's lease",
            "End the lease whose token you hold, so that others can work on the checkpoint. Releasing a lease that "
            "already lapsed succeeds all the same and spends its token; while another lease is live, a token of "
            "a lease taken over is LEASE_LOST and any other text LEASE_HELD. Needs the scope leases:write.",
            _release_schema(),
            Hints(read_only=False, destructive=False, idempotent=True),
            lease_operations.release,
            _release,
        ),
    ]
    return {tool.name: tool for tool in tools}
