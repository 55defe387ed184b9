"""Routers included by their first request (`BatonResolver.include_router_when_asked`): the thread routes stay off a
fresh container until a request names them, and then answer as if they had been there from the start; a wrong
method on their paths, the OpenAPI document and SnapStart's preparation include them as well."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from baton_checkpoints.api.app import create_app, document
from baton_checkpoints.api.resolver import BatonResolver
from baton_checkpoints.api.services import Services
from tests.integration.conftest import OPERATOR_SECRET
from tests.integration.driver import ApiDriver, load_event

THREADS = "baton_checkpoints.api.routers.threads"


def fresh(services: Services) -> BatonResolver:
    """A new container's resolver, on the test's services (the `api` fixture stores the operator's key)."""
    return create_app(lambda: services)


def ask(app: BatonResolver, method: str, path: str) -> tuple[int, dict[str, Any]]:
    event = copy.deepcopy(load_event("get_checkpoint"))
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    event["headers"]["authorization"] = f"Bearer {OPERATOR_SECRET}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = "$default"
    event.pop("pathParameters", None)
    event["rawQueryString"] = ""
    event.pop("queryStringParameters", None)
    answer = app.resolve(event, None)
    return int(answer["statusCode"]), json.loads(answer["body"])


def test_a_fresh_container_includes_the_thread_routes_at_their_first_request(
    api: ApiDriver, services: Services
) -> None:
    app = fresh(services)
    assert app.deferred_routers() == [THREADS]
    # A checkpoint route leaves them out
    status, listed = ask(app, "GET", "/v1/whoami")
    assert status == 200, listed
    assert app.deferred_routers() == [THREADS]
    # A thread route's first request includes them, and is answered by them (its thread is unknown: 404 of the
    # route, not of an unknown path)
    status, body = ask(app, "GET", f"/v1/threads/t-{uuid.uuid4().hex[:8]}/checkpoint")
    assert app.deferred_routers() == []
    assert status == 404
    assert body["error"]["code"] == "NOT_FOUND", body


def test_a_wrong_method_on_a_thread_path_is_a_405_from_a_fresh_container(api: ApiDriver, services: Services) -> None:
    status, body = ask(fresh(services), "PATCH", "/v1/threads/t-1")
    assert status == 405, body
    assert body["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert "DELETE" in body["error"]["message"]


def test_the_document_and_snapstart_include_every_deferred_router(services: Services) -> None:
    documented = json.loads(document(fresh(services)))
    assert "/v1/threads/{thread_id}/checkpoints" in documented["paths"]
    prepared = fresh(services)
    prepared.prepare_routes()
    assert prepared.deferred_routers() == []
