"""Routes called directly after validation (`BatonResolver._direct`) answer exactly as through powertools' middleware
chain: the same status, headers and body for every kind of request, refusals above all (the direct path reuses
powertools' private validation functions, so a powertools upgrade that changes them shows here first)."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import pytest

from baton_checkpoints.api.resolver import BatonResolver
from tests.integration.driver import ApiDriver, Result

THREAD = "/v1/threads/thread-1/checkpoints"
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "a save with an unknown field": (
        "save_checkpoint",
        {"body": {"subject_id": "s", "kind": "task_state", "state": {}, "surplus": 1}},
    ),
    "a save with a kind of the wrong type": ("save_checkpoint", {"body": {"subject_id": "s", "kind": 3, "state": {}}}),
    "a save whose body is a list": ("save_checkpoint", {"raw_body": "[1, 2]"}),
    "a save with a duplicated key": ("save_checkpoint", {"raw_body": '{"subject_id": "s", "subject_id": "t"}'}),
    "a lookup without its subject": ("lookup_checkpoint", {"query": {"kind": "task_state"}}),
    "a lookup of nothing": ("lookup_checkpoint", {"query": {"subject_id": "nobody", "kind": "task_state"}}),
    "a lookup with an unknown kind": ("lookup_checkpoint", {"query": {"subject_id": "s", "kind": "nope"}}),
    "a page with a limit of 0": ("list_subject_checkpoints", {"query": {"limit": "0"}}),
    "a page with a limit that is no number": ("list_subject_checkpoints", {"query": {"limit": "many"}}),
    "a page with a limit given twice": ("list_subject_checkpoints", {"query": {"limit": "1,2"}}),
    "a page with a cursor not its own": ("list_subject_checkpoints", {"query": {"cursor": "bm90IG91cnM"}}),
    "a get of an id of the wrong shape": ("get_checkpoint", {"path": "/v1/checkpoints/not-an-id"}),
    "a keys page over the largest limit": ("list_keys", {"query": {"limit": "1000"}}),
    "a keys page": ("list_keys", {}),
    "who the key is": ("whoami", {}),
    "health": ("health", {}),
    "a thread put without a checkpoint": ("save_checkpoint", {"path": THREAD, "body": {"metadata": {}}}),
    "a thread put with a value of bad base64": (
        "save_checkpoint",
        {
            "path": THREAD,
            "body": {
                "checkpoint": {"id": "c1", "channel_versions": {"a": 1}},
                "values": {"a": {"type": "json", "data": "not base64!"}},
            },
        },
    ),
    "a thread read of nothing": ("get_checkpoint", {"path": "/v1/threads/thread-1/checkpoints/latest"}),
    # Routes that read headers (since they too are called directly)
    "a save with an empty Idempotency-Key": (
        "save_checkpoint",
        {"body": {"subject_id": "s", "kind": "task_state", "state": {}}, "headers": {"idempotency-key": ""}},
    ),
    "a save with an Idempotency-Key too long": (
        "save_checkpoint",
        {"body": {"subject_id": "s", "kind": "task_state", "state": {}}, "headers": {"idempotency-key": "k" * 300}},
    ),
    "a delete with a Lease-Token too long": (
        "delete_checkpoint",
        {"path": "/v1/checkpoints/ckpt_" + "0" * 32, "headers": {"lease-token": "t" * 300}},
    ),
    "a delete with an If-Match that is no tag": (
        "delete_checkpoint",
        {"path": "/v1/checkpoints/ckpt_" + "0" * 32, "headers": {"if-match": "no tag"}},
    ),
    "a delete of an id of the wrong shape, with If-Match": (
        "delete_checkpoint",
        {"path": "/v1/checkpoints/not-an-id", "headers": {"if-match": 'W/"x:1"'}},
    ),
    "a lookup with If-None-Match": (
        "lookup_checkpoint",
        {"query": {"subject_id": "nobody", "kind": "task_state"}, "headers": {"if-none-match": 'W/"x:1"'}},
    ),
    "a thread page with a filter that is not an object": (
        "list_subject_checkpoints",
        {"path": THREAD, "query": {"filter": "[1]"}},
    ),
}


def _comparable(answer: Result) -> tuple[int, dict[str, Any], Any]:
    """An answer without its request id (each request has its own) and with its `RateLimit` field's shape only (each
    request spends one of the tenant's requests, so the figures move)."""
    body: Any = answer.raw_body
    with contextlib.suppress(ValueError):
        body = json.loads(answer.raw_body)
    if isinstance(body, dict) and isinstance(body.get("meta"), dict):
        body["meta"].pop("request_id", None)
    headers = dict(answer.headers)
    if "RateLimit" in headers:
        headers["RateLimit"] = re.sub(r"\d+", "N", headers["RateLimit"])
    return answer.status, headers, body


@pytest.mark.parametrize("case", list(CASES))
def test_a_route_called_directly_answers_as_through_the_middleware_chain(
    api: ApiDriver, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    event_name, overrides = CASES[case]
    # Given a request answered by the direct path
    direct = api.invoke(event_name, **overrides)
    # When the same request goes through powertools' chain instead
    with monkeypatch.context() as patched:
        patched.setattr(BatonResolver, "_direct", lambda self, route: None)
        chained = api.invoke(event_name, **overrides)
    # Then both answers are the same
    assert _comparable(direct) == _comparable(chained)


def test_the_routes_that_read_headers_are_called_directly_too() -> None:
    from baton_checkpoints.api.app import app

    routes = {(route.method, route.rule.pattern): route for route in app._static_routes + app._dynamic_routes}
    save = next(r for (method, rule), r in routes.items() if method == "POST" and rule == "^/v1/checkpoints$")
    assert save.dependant.header_params, "the save reads Idempotency-Key"
    assert app._direct(save) is not None
