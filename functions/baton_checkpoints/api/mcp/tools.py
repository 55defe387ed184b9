"""The tool catalogue: each tool stands for one HTTP route, and a call becomes that route's request.

A tool's arguments are the route's body fields, path and query parameters and the headers a model needs
(`lease_token`, `expected_revision` as `If-Match`, `idempotency_key`), under the names the contract gives them.
The route checks them as it checks any request: the tool only checks what the route cannot see (an argument of the
wrong type for a path or a query, an argument the tool does not have).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import quote

from baton_checkpoints.api.mcp import arguments
from baton_checkpoints.api.mcp.arguments import IDEMPOTENCY_KEY, LEASE_TOKEN, Schema, closed
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.errors import FieldError, ValidationFailed


@dataclass(frozen=True)
class RouteRequest:
    """The HTTP request a tool call stands for."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hints:
    """What a tool does to the world (MCP tool annotations), stated truthfully."""

    read_only: bool
    destructive: bool
    idempotent: bool


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what a model reads about it, and the request a call becomes."""

    name: str
    title: str
    description: str
    input_schema: Schema
    hints: Hints
    request: Callable[[dict[str, Any]], RouteRequest]
    """The route's request for the call's arguments; raises `ValidationFailed` for arguments the route cannot
    judge (unknown ones, wrong types of path and query parameters)."""
    list_key: str | None = None
    """For a list route: the key under which the page's items are given (structured content is an object)."""


def _segment(value: str) -> str:
    """A path segment: percent-encoded, so that no value can name another route."""
    return quote(value, safe="")


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


def _idempotency(taken: dict[str, Any]) -> dict[str, str]:
    key = taken.get("idempotency_key")
    if key is None:
        return {}
    if not isinstance(key, str):
        raise ValidationFailed.single("/idempotency_key", "/idempotency_key must be a string.")
    return {"idempotency-key": key}


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


def _save(args: dict[str, Any]) -> RouteRequest:
    taken, body = _split(args, "idempotency_key")
    return RouteRequest("POST", "/v1/checkpoints", body=body, headers=_idempotency(taken))


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


def _get(args: dict[str, Any]) -> RouteRequest:
    _check(args, _get_schema())
    if "checkpoint_id" in args:
        if len(args) > 1:
            raise ValidationFailed.single(
                "/checkpoint_id", "Give either checkpoint_id, or subject_id and kind (and agent_id), not both."
            )
        return RouteRequest("GET", f"/v1/checkpoints/{_segment(args['checkpoint_id'])}")
    missing = [FieldError(f"/{n}", f"/{n} is required without checkpoint_id.") for n in ("subject_id", "kind")]
    missing = [problem for problem in missing if problem.pointer[1:] not in args]
    if missing:
        raise ValidationFailed(missing)
    return RouteRequest("GET", "/v1/checkpoints", query={n: str(v) for n, v in args.items()})


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


def _list(args: dict[str, Any]) -> RouteRequest:
    _check(args, _list_schema())
    query = {n: str(v) for n, v in args.items() if n != "subject_id"}
    return RouteRequest("GET", f"/v1/subjects/{_segment(args['subject_id'])}/checkpoints", query=query)


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


def _delete(args: dict[str, Any]) -> RouteRequest:
    _check(args, _delete_schema())
    checkpoint_id: str = args["checkpoint_id"]
    headers: dict[str, str] = {}
    if "expected_revision" in args:
        headers["if-match"] = f'W/"{checkpoint_id}:{args["expected_revision"]}"'
    if "lease_token" in args:
        headers["lease-token"] = args["lease_token"]
    return RouteRequest("DELETE", f"/v1/checkpoints/{_segment(checkpoint_id)}", headers=headers)


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


def _resume(args: dict[str, Any]) -> RouteRequest:
    budget = args.get("budget_bytes")
    if budget is None or (type(budget) is int and budget > MCP_RESUME_DATA_BYTES):
        args = {**args, "budget_bytes": MCP_RESUME_DATA_BYTES}  # a budget the route refuses is left to it to judge
    return RouteRequest("POST", "/v1/resume", body=args)


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


def _acquire(args: dict[str, Any]) -> RouteRequest:
    taken, body = _split(args, "checkpoint_id", "idempotency_key")
    checkpoint_id = taken.get("checkpoint_id")
    if not isinstance(checkpoint_id, str):
        raise ValidationFailed.single("/checkpoint_id", "/checkpoint_id is required, a string.")
    return RouteRequest(
        "POST", f"/v1/checkpoints/{_segment(checkpoint_id)}/lease", body=body, headers=_idempotency(taken)
    )


def _release_schema() -> Schema:
    return closed(
        {"checkpoint_id": arguments.CHECKPOINT_ID, "lease_token": LEASE_TOKEN}, ("checkpoint_id", "lease_token")
    )


def _release(args: dict[str, Any]) -> RouteRequest:
    _check(args, _release_schema())
    path = f"/v1/checkpoints/{_segment(args['checkpoint_id'])}/lease"
    return RouteRequest("DELETE", path, headers={"lease-token": args["lease_token"]})


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
            _get,
        ),
        ToolSpec(
            "baton_checkpoint_list",
            "List a subject's checkpoints",
            "The caller's checkpoints of a subject, as summaries without state, newest update first, a page at a "
            "time: when next_cursor is not null, call again with it as cursor. Needs the scope checkpoints:read.",
            _list_schema(),
            Hints(read_only=True, destructive=False, idempotent=True),
            _list,
            list_key="checkpoints",
        ),
        ToolSpec(
            "baton_checkpoint_delete",
            "Delete a checkpoint",
            "Delete a checkpoint and its kept revisions (terminal ones too). A leased checkpoint needs its "
            "lease_token. Returns {checkpoint_id, deleted: true}. Needs the scope checkpoints:delete.",
            _delete_schema(),
            Hints(read_only=False, destructive=True, idempotent=True),
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
            _release,
        ),
    ]
    return {tool.name: tool for tool in tools}
