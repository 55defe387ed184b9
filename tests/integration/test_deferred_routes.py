"""Routers included by their first request (`BatonResolver.include_router_when_asked`): every family but the
checkpoints' stays off a fresh container until a request names one of its routes, which then answers as if it had
been there from the start; a wrong method on their paths, the OpenAPI document and SnapStart's preparation include
them as well."""

from __future__ import annotations

import copy
import importlib
import json
import re
import uuid
from typing import Any

import pytest

from baton_checkpoints.api.app import DEFERRED_ROUTERS, create_app, document
from baton_checkpoints.api.resolver import BatonResolver
from baton_checkpoints.api.services import Services
from tests.integration.conftest import OPERATOR_SECRET
from tests.integration.driver import ApiDriver, load_event

THREADS = "baton_checkpoints.api.routers.threads"
DEFERRED = [f"baton_checkpoints.api.routers.{module}" for module, *_ in DEFERRED_ROUTERS]


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
    text = answer.get("body") or ""
    return int(answer["statusCode"]), json.loads(text) if text.startswith("{") else {"body": text}


def test_a_fresh_container_includes_the_thread_routes_at_their_first_request(
    api: ApiDriver, services: Services
) -> None:
    app = fresh(services)
    assert app.deferred_routers() == DEFERRED
    # A checkpoint route leaves every other family out
    status, found = ask(app, "GET", f"/v1/checkpoints/ckpt_{'0' * 32}")
    assert status == 404, found
    assert app.deferred_routers() == DEFERRED
    # A thread route's first request includes them, and is answered by them (its thread is unknown: 404 of the
    # route, not of an unknown path)
    status, body = ask(app, "GET", f"/v1/threads/t-{uuid.uuid4().hex[:8]}/checkpoint")
    assert THREADS not in app.deferred_routers()
    assert status == 404
    assert body["error"]["code"] == "NOT_FOUND", body
    assert "No route matches" not in body["error"]["message"]


def _concrete(pattern: str) -> str:
    return re.sub(r"<[^>]+>", "x-1", pattern)


@pytest.mark.parametrize(
    ("module", "method", "path"),
    [
        pytest.param(module, method, _concrete(rule), id=f"{method} {rule}")
        for module, *_ in DEFERRED_ROUTERS
        for rule, method in sorted(
            (key[0], method)
            for key in importlib.import_module(f"baton_checkpoints.api.routers.{module}").router._routes
            for method in key[1]
        )
    ],
)
def test_every_deferred_route_is_found_by_its_first_request(
    api: ApiDriver, services: Services, module: str, method: str, path: str
) -> None:
    # Given a fresh container, which has not included the route's router
    app = fresh(services)
    # When the route is asked for first (without a body: refusals are fine, an unknown route is not)
    status, body = ask(app, method, path)
    # Then its router is included and the route answers
    assert f"baton_checkpoints.api.routers.{module}" not in app.deferred_routers()
    if status >= 400:
        assert "No route matches" not in json.dumps(body), body
    # And a wrong method on its path, first thing in another fresh container, is a 405 that names the method
    status, body = ask(fresh(services), "PATCH", path)
    assert status == 405, body
    assert method in body["error"]["message"], body


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


def test_a_route_documents_its_responses_only_in_the_document(services: Services) -> None:
    """What a route documents of its responses (`api/openapi.py`'s `documented`) is made with the document, not by
    its router's import nor by its first request (which makes the route's dependant), for every resolver the router
    is included in (routers are shared: the checkpoint routes' may have been documented by an earlier test, so the
    route here is a router of its own)."""
    from aws_lambda_powertools.event_handler import Response
    from aws_lambda_powertools.event_handler.api_gateway import Router

    from baton_checkpoints.api.openapi import documented, enveloped, responses
    from baton_checkpoints.api.resolver import Documented
    from baton_checkpoints.api.schemas import Health

    router = Router()

    @router.get("/v1/documented", responses=documented({200: ("Up", enveloped(Health))}, (401, 503)))
    def documented_route():  # (no return annotation: this module's annotations are strings, never evaluated here)
        return Response(status_code=200, body="{}")

    def resolver() -> tuple[BatonResolver, Any]:
        made = BatonResolver(lambda: services)
        made.include_router(router)
        return made, next(r for r in made.routes() if r.openapi_path == "/v1/documented")

    def models(route: Any) -> list[str]:
        return [field.type_.__name__ for field in route.dependant.response_extra_models]

    (app, route), (again, other) = resolver(), resolver()
    assert set(route.responses) == {200, 401, 503}
    assert all(isinstance(answer, Documented) and answer == {} for answer in route.responses.values())
    # Each route's first request (its dependant) analyses no documented model
    assert models(route) == models(other) == []
    # The document makes them: generated by powertools' own entry, not only by `api/app.py`'s `document`
    described = json.loads(app.get_openapi_json_schema())["paths"]["/v1/documented"]["get"]["responses"]
    assert described["200"]["description"] == "Up"
    assert described["503"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
    assert route.responses[200]["content"]["application/json"]["model"].__name__ == "DataEnvelope[Health]"
    assert models(route) == ["DataEnvelope[Health]", "ErrorEnvelope", "ErrorEnvelope"]
    app.document_responses()  # once only
    assert len(models(route)) == 3
    # Another resolver whose route served a request before the documentation was made, then documented
    assert models(other) == []
    again.document_responses()
    assert models(other) == ["DataEnvelope[Health]", "ErrorEnvelope", "ErrorEnvelope"]
    # A resolver made after it: its first request sees the documentation made, its document adds nothing more
    third, late = resolver()
    assert len(models(late)) == 3
    third.document_responses()
    assert len(models(late)) == 3
    # A route cannot mix documentation made later with documentation given made
    mixed = Router()

    @mixed.get("/v1/mixed", responses={**documented({200: ("Up", None)}, ()), **responses({}, (503,))})
    def mixed_route():
        return Response(status_code=200, body="{}")

    wrong = BatonResolver(lambda: services)
    wrong.include_router(mixed)
    with pytest.raises(TypeError, match="/v1/mixed"):
        wrong.document_responses()
