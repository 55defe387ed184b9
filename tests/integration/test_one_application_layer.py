"""One application layer (`api/operations/`): a route and its MCP tool run the same operation, so they are refused
for the same reasons with the same errors, key idempotency alike (a route's answer replays for its tool and back),
and a tool call no longer passes through a second resolver. Through the api handler, against in-process moto."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from baton_checkpoints.api.app import create_app
from baton_checkpoints.api.mcp.tools import catalogue
from baton_checkpoints.api.operations import Context
from baton_checkpoints.api.operations import checkpoints as checkpoint_operations
from baton_checkpoints.api.operations import leases as lease_operations
from baton_checkpoints.api.operations import resume as resume_operation
from baton_checkpoints.api.resolver import ACTS_FOR_EXTENSION, FRESH_KEY_EXTENSION, SCOPE_EXTENSION, BatonResolver
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.errors import Forbidden
from baton_checkpoints.domain.models import SaveCheckpointRequest
from tests import proof_counts
from tests.builders import KIND, save
from tests.integration.driver import ApiDriver, Result

SUITE = "one application layer"

TOOL_ROUTES = {
    "baton_checkpoint_save": [("POST", "/v1/checkpoints")],
    "baton_checkpoint_get": [("GET", "/v1/checkpoints"), ("GET", "/v1/checkpoints/{checkpoint_id}")],
    "baton_checkpoint_list": [("GET", "/v1/subjects/{subject_id}/checkpoints")],
    "baton_checkpoint_delete": [("DELETE", "/v1/checkpoints/{checkpoint_id}")],
    "baton_resume": [("POST", "/v1/resume")],
    "baton_lease_acquire": [("POST", "/v1/checkpoints/{checkpoint_id}/lease")],
    "baton_lease_release": [("DELETE", "/v1/checkpoints/{checkpoint_id}/lease")],
}
"""Each tool and the routes that run its operations."""


def send_tool(api: ApiDriver, name: str, arguments: dict[str, Any], secret: str | None = None) -> dict[str, Any]:
    """A tools/call answered 200; its structured content, with `isError` beside it."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    answer = api.invoke("mcp_tools_call", body=message, secret=secret)
    assert answer.status == 200, answer.raw_body[:500]
    result: dict[str, Any] = answer.body["result"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return {"isError": result.get("isError", False), **result["structuredContent"]}


def route_error(answer: Result) -> dict[str, Any]:
    """A route's error object (code, message, details)."""
    assert answer.status >= 400, answer.raw_body[:300]
    return dict(answer.error)


def test_each_tool_checks_the_scope_and_authority_its_routes_declare() -> None:
    # Given the app's routes (their metadata, which the gate judges) and the tool catalogue
    app = create_app(lambda: None)  # type: ignore[arg-type,return-value]
    app.include_deferred_routers()
    routes = {
        (r.method, r.openapi_path): r.openapi_extensions or {} for r in [*app._static_routes, *app._dynamic_routes]
    }
    for name, spec in catalogue().items():
        for method, path in TOOL_ROUTES[name]:
            extensions = routes[(method, path)]
            # Then the route's scope, authority fields and key freshness are the tool's operation's own
            assert extensions[SCOPE_EXTENSION] == spec.operation.scope, (name, path)
            assert extensions.get(ACTS_FOR_EXTENSION, []) == list(spec.operation.acts_for), (name, path)
            assert bool(extensions.get(FRESH_KEY_EXTENSION)) == spec.operation.fresh_key, (name, path)
            proof_counts.record(SUITE, declarations=1)


@pytest.mark.parametrize(
    ("label", "call"),
    [
        ("save", lambda c: checkpoint_operations.save(c, SaveCheckpointRequest.model_validate(
            {"subject_id": "s", "kind": KIND, "state": 1}))),
        ("lookup", lambda c: checkpoint_operations.lookup(c, "s", KIND)),
        ("get", lambda c: checkpoint_operations.get(c, "ckpt_" + "0" * 32)),
        ("delete", lambda c: checkpoint_operations.delete(c, "ckpt_" + "0" * 32)),
        ("list", lambda c: checkpoint_operations.list_subject(c, "s", None, None, None, 10, None)),
        ("release", lambda c: lease_operations.release(c, "ckpt_" + "0" * 32, "t")),
    ],
)  # fmt: skip
def test_an_operation_checks_its_own_scope_whoever_calls_it(label: str, call: Any) -> None:
    # Given a caller whose key holds none of the operation's scopes, and no services at all
    caller = Principal("acme", "agent", "key_1", frozenset({"mcp:call"}))
    no_services: Any = None
    # When the operation is called directly (no route's gate, no tool before it)
    with pytest.raises(Forbidden):
        call(Context(caller, "req-1", 0, no_services))
    # Then it refuses before touching anything (no services to touch)
    proof_counts.record(SUITE, scope_refusals=1)


def test_resume_checks_its_scope_too() -> None:
    from baton_checkpoints.domain.resume import ResumeRequest

    caller = Principal("acme", "agent", "key_1", frozenset({"checkpoints:write"}))
    no_services: Any = None
    with pytest.raises(Forbidden):
        resume_operation.resume(Context(caller, "r", 0, no_services), ResumeRequest.model_validate({"subject_id": "s"}))


def test_a_route_and_its_tool_answer_the_same_errors(api: ApiDriver) -> None:
    # Given a checkpoint at revision 2, leased
    subject = f"errors-{uuid.uuid4().hex[:8]}"
    checkpoint_id = save(api, subject_id=subject, state={"step": 1}).data["checkpoint_id"]
    assert save(api, subject_id=subject, state={"step": 2}).status == 200
    lease = api.invoke("acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease", body={"ttl_seconds": 60})
    assert lease.status == 201, lease.raw_body
    missing = "ckpt_" + "0" * 32
    pairs: list[tuple[str, dict[str, Any], Result]] = [
        # a checkpoint that is not there
        ("baton_checkpoint_get", {"checkpoint_id": missing},
         api.invoke("get_checkpoint", path=f"/v1/checkpoints/{missing}")),
        # a stale revision
        ("baton_checkpoint_save", {"subject_id": subject, "kind": KIND, "state": 3, "expected_revision": 1,
                                   "lease_token": lease.data["lease_token"]},
         api.invoke("save_checkpoint", body={"subject_id": subject, "kind": KIND, "state": 3, "expected_revision": 1,
                                             "lease_token": lease.data["lease_token"]})),
        # a write without the live lease's token
        ("baton_checkpoint_save", {"subject_id": subject, "kind": KIND, "state": 3},
         api.invoke("save_checkpoint", body={"subject_id": subject, "kind": KIND, "state": 3})),
        # another holder while the lease is live
        ("baton_lease_acquire", {"checkpoint_id": checkpoint_id, "ttl_seconds": 60, "holder": "someone-else"},
         api.invoke("acquire_lease", path=f"/v1/checkpoints/{checkpoint_id}/lease",
                    body={"ttl_seconds": 60, "holder": "someone-else"})),
        # body fields the model refuses (several, named in details)
        ("baton_checkpoint_save", {"subject_id": "", "kind": "diary", "state": 1, "ttl_seconds": 5},
         api.invoke("save_checkpoint", body={"subject_id": "", "kind": "diary", "state": 1, "ttl_seconds": 5})),
    ]  # fmt: skip
    for tool, arguments, by_route in pairs:
        # When the tool is called with the same input
        by_tool = send_tool(api, tool, arguments)
        # Then it is the route's error, word for word
        assert by_tool.pop("isError") is True, tool
        assert by_tool == route_error(by_route), tool
        proof_counts.record(SUITE, error_pairs=1)


@pytest.mark.parametrize("first", ["route", "tool"])
def test_a_route_and_its_tool_replay_each_others_idempotent_answers(api: ApiDriver, first: str) -> None:
    # Given one idempotency key and one save, sent once through the route or the tool
    subject = f"replay-{first}-{uuid.uuid4().hex[:8]}"
    body = {"subject_id": subject, "kind": KIND, "state": {"step": 1}}
    key = f"key-{uuid.uuid4().hex}"

    def by_route() -> dict[str, Any]:
        answer = api.invoke("save_checkpoint", body=body, headers={"idempotency-key": key})
        assert answer.status in (200, 201), answer.raw_body
        return dict(answer.data)

    def by_tool() -> dict[str, Any]:
        found = send_tool(api, "baton_checkpoint_save", {**body, "idempotency_key": key})
        assert found.pop("isError") is False, found
        return found

    earlier, later = (by_route, by_tool) if first == "route" else (by_tool, by_route)
    answered = earlier()
    # When the same save comes the other way with the same key
    again = later()
    # Then it is the first one's answer again: one write, one revision
    assert again == answered
    assert answered["revision"] == 1
    # And the same key with another body is refused either way
    body["state"] = {"step": 2}
    reused = send_tool(api, "baton_checkpoint_save", {**body, "idempotency_key": key})
    assert (reused["isError"], reused["code"]) == (True, "IDEMPOTENCY_KEY_REUSED")
    proof_counts.record(SUITE, replay_pairs=1)


def test_a_tool_call_is_not_served_by_a_second_resolver() -> None:
    # The tools reach the operations directly: no module builds an API Gateway event for a tool call any more.
    import importlib.util

    assert importlib.util.find_spec("baton_checkpoints.api.mcp.dispatch") is None
    assert not hasattr(BatonResolver, "twin")


def test_a_tool_save_of_plain_json_takes_the_canonical_fast_path(
    api: ApiDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the save operation, watched for what its tool hands it
    from msgspec.structs import replace

    seen: list[tuple[bool, bool | None]] = []
    watched = checkpoint_operations.save

    def run(context: Context, request: Any, idempotent: Any = None, plain: bool = False) -> Any:
        seen.append((plain, None if idempotent is None else idempotent.plain))
        return watched.run(context, request, idempotent, plain)

    monkeypatch.setattr(checkpoint_operations, "save", replace(watched, run=run))
    # When a tool saves a state with no fraction and no key outside the BMP, and one with a fraction
    subject = f"plain-{uuid.uuid4().hex[:8]}"
    plain = {"subject_id": subject, "kind": KIND, "state": {"step": 1}, "idempotency_key": f"k-{uuid.uuid4().hex}"}
    fraction = {"subject_id": subject, "kind": KIND, "state": {"ratio": 0.5}}
    assert send_tool(api, "baton_checkpoint_save", plain)["isError"] is False
    assert send_tool(api, "baton_checkpoint_save", fraction)["isError"] is False
    # Then the first, and its idempotency fingerprint, take the fast path as a route's body does; the second not
    assert seen == [(True, True), (False, None)]


def test_a_routes_own_fields_are_judged_before_its_idempotency_key(api: ApiDriver) -> None:
    # Given a save whose state holds a lone surrogate, sent with a malformed Idempotency-Key
    raw = f'{{"subject_id":"order-{uuid.uuid4().hex[:8]}","kind":"{KIND}","state":{{"note":"a\\ud800"}}}}'
    answer = api.invoke("save_checkpoint", raw_body=raw, headers={"idempotency-key": "é"})
    # Then the state's problem is the one answered (the contract ranks a request's own fields first)
    assert answer.status == 400
    assert answer.error["details"]["errors"][0]["pointer"] == "/state"


def test_an_operation_that_reads_its_callers_key_fresh_cannot_be_a_tool() -> None:
    # A tool runs as /mcp authenticated its caller, possibly from the container's key cache
    from baton_checkpoints.api.mcp.tools import Hints, ToolSpec
    from baton_checkpoints.api.operations import grants

    assert grants.revoke.fresh_key
    with pytest.raises(ValueError, match="cannot be a tool"):
        ToolSpec("t", "T", "d", {}, Hints(False, True, True), grants.revoke, lambda context, args, plain: {})


def test_a_route_naming_an_operation_takes_its_declaration_whole() -> None:
    from baton_checkpoints.api.resolver import needs

    assert needs(checkpoint_operations.save) == {SCOPE_EXTENSION: "checkpoints:write", ACTS_FOR_EXTENSION: ["agent_id"]}
    with pytest.raises(TypeError):
        needs(checkpoint_operations.save, fresh_key=True)
