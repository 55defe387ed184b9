"""The resolver: powertools' HTTP API resolver with Baton's gate in front of every route.

Powertools validates a request before any middleware runs; the contract ranks authentication (401/403), media
type (415) and body size (413) before validation (400). So the gate runs first, in `_call_route`, and only then
does the route's own chain (validation, the route) run. Errors of the gate go through the same exception
handlers as everything else.

The resolver is given its services (`api/services.py` wires them) rather than finding them: whoever creates it
decides which table it serves. Routes declare what they need as parameters (`call: CurrentCall`, and the services
with `Wired` from `api/services.py`), which powertools' `Depends` fills in.
"""

# No `from __future__ import annotations` here: powertools reads a dependency's annotations on every request, and
# evaluating them from strings each time costs more than the dependency itself.

import functools
import importlib
import re
import threading
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Depends, Request, Response, depends
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
from aws_lambda_powertools.event_handler.api_gateway import _find_request_param_name as _request_param_name
from aws_lambda_powertools.event_handler.middlewares import openapi_validation as validation
from aws_lambda_powertools.event_handler.openapi.compat import is_scalar_field
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.data_classes.common import CaseInsensitiveDict
from msgspec import Struct
from msgspec.structs import replace
from pydantic import BaseModel
from pydantic._internal._utils import lenient_issubclass  # (what powertools itself judges these parameters with)

from baton_checkpoints.api.encoding import fit_for_lambda, within_lambda_limit
from baton_checkpoints.api.operations import Context, Operation, authorize
from baton_checkpoints.api.paths import check_encoding
from baton_checkpoints.api.services import Counting, Services
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.canonical import Document, parse_document, parse_strict
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.domain.errors import (
    Forbidden,
    PayloadTooLarge,
    Unauthenticated,
    UnsupportedMediaType,
    ValidationFailed,
)
from baton_checkpoints.domain.usage import day_of

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI

# Powertools rebuilds a route's dependency tree on every request (`typing.get_type_hints` of the route and of each
# dependency: about a tenth of a warm save's own time). A function's dependencies are fixed once it is defined, so
# the tree is built once per function; overrides (tests') apply when the tree is solved, not here.
if not hasattr(depends.build_dependency_tree, "cache_info"):
    depends.build_dependency_tree = functools.cache(depends.build_dependency_tree)

SCOPE_EXTENSION = "x-baton-scope"
PUBLIC_EXTENSION = "x-baton-public"
ACTS_FOR_EXTENSION = "x-baton-acts-for"
"""Body fields (`agent_id`, `tenant_id`) that say whom the request acts for: authority, checked before validation."""
ANY_SCOPE_EXTENSION = "x-baton-any-scope"
"""The route needs a valid key and no particular scope (the caller's own identity)."""
FRESH_KEY_EXTENSION = "x-baton-fresh-key"
"""The route reads the caller's key record fresh, never from the container's cache (key management)."""
FORM_BODY_EXTENSION = "x-baton-form-body"
"""The route reads a form (`application/x-www-form-urlencoded`, OAuth's endpoints): the gate checks its media type
and size only."""
MCP_ROUTE: Final = "/mcp"
"""The one route that accepts an OAuth access token (bound to it), and answers 401 with OAuth's discovery."""
RAW_BODY_EXTENSION = "x-baton-raw-body"
"""The route reads its body itself (MCP answers a body that is not JSON with a JSON-RPC error, not the contract's
400): the gate checks its media type and size only."""
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON_MEDIA: Final = "application/json"
FORM: Final = "application/x-www-form-urlencoded"


def needs(
    scope_or_operation: "str | Operation[..., Any]", acts_for: tuple[str, ...] = (), fresh_key: bool = False
) -> dict[str, Any]:
    """Route metadata: the scope a route needs (also shown in the OpenAPI document); which body fields claim
    authority (naming another agent or tenant there is a 403, ranked before 400); and whether the caller's key
    must be read fresh, so that a key revoked a moment ago can do nothing with it.

    A route that serves an operation (`api/operations/`) names it: its scope, authority fields and key freshness
    are the operation's own, which its MCP tool (if it has one) checks too."""
    scope = scope_or_operation
    if isinstance(scope_or_operation, Operation):
        if acts_for or fresh_key:
            raise TypeError("an operation declares its own authority fields and key freshness")
        scope, acts_for = scope_or_operation.scope, scope_or_operation.acts_for
        fresh_key = scope_or_operation.fresh_key
    extensions: dict[str, Any] = {SCOPE_EXTENSION: scope}
    if acts_for:
        extensions[ACTS_FOR_EXTENSION] = list(acts_for)
    if fresh_key:
        extensions[FRESH_KEY_EXTENSION] = True
    return extensions


PUBLIC: dict[str, Any] = {PUBLIC_EXTENSION: True}
"""Route metadata: the route answers without an API key."""
ANY_SCOPE: dict[str, Any] = {ANY_SCOPE_EXTENSION: True}
"""Route metadata: the route answers any valid key, whatever its scopes."""

SERVICES_CONTEXT: Final = "services"
"""Where a resolver's context keeps its provider of services while it serves a request."""
CALL_CONTEXT: Final = "call"
"""Where the resolver's context keeps the current request's `Call`."""


class Call(Struct, frozen=True):
    """What the gate learned about the current request."""

    request_id: str
    principal: Principal | None
    body: Any
    now_ms: int
    route: str | None = None
    """The matched route's pattern (`/v1/checkpoints/{checkpoint_id}`), None for an unknown path."""
    plain_body: bool = False
    """The body's canonical form may take the fast path (see `baton_checkpoints.domain.canonical.Document.plain`)."""
    rate_limit: str | None = None
    """The `RateLimit` field of the caller's tenant, once the request was admitted (every authenticated answer
    carries it)."""

    @property
    def caller(self) -> Principal:
        """The authenticated principal (routes that need a scope always have one)."""
        if self.principal is None:
            raise RuntimeError("route is public: it has no principal")
        return self.principal


class _Direct(Struct, frozen=True):
    """A route called without powertools' middleware chain (`BatonResolver._direct`): the names of its parameters
    that take the current `Call` and the services, if it has them."""

    call: str | None
    services: str | None
    scalar_queries: tuple[Any, ...] = ()
    """Its query parameters powertools treats as scalars, and those that are models (`model_queries`): what
    `_normalize_multi_params` would find out again on every request from their annotations, found once. The same
    for its header parameters."""
    model_queries: tuple[Any, ...] = ()
    scalar_headers: tuple[Any, ...] = ()
    model_headers: tuple[Any, ...] = ()


API_ROOT: Final = "/"
"""A deferred router's "prefix" that stands for the API's own address (`/`, or a stage's name alone)."""


def _asking_for(prefixes: Iterable[str]) -> re.Pattern[str]:
    """A pattern that finds, in one search, a path that may be for a route whose path holds one of `prefixes`: the
    prefix anywhere in it (`in`, not a prefix test: a stage's name may come first; including a router early is
    harmless, only late is not), and for `API_ROOT` the API's address alone (at most one `/` besides trailing
    ones)."""
    alternatives = [
        r"\A[^/]*(?:/[^/]*)?/*\Z" if prefix == API_ROOT else re.escape(prefix) for prefix in dict.fromkeys(prefixes)
    ]
    return re.compile("|".join(alternatives) or r"(?!)")


def _holds(path: str, prefix: str) -> bool:
    """True when a request for `path` may be for a route whose path holds `prefix` (`_asking_for`)."""
    return _asking_for((prefix,)).search(path) is not None


def _kinds(params: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The parameters powertools' `_normalize_multi_params` treats as scalars, and those it treats as models."""
    scalars = tuple(param for param in params if is_scalar_field(param))
    models = tuple(
        param for param in params if param not in scalars and lenient_issubclass(param.field_info.annotation, BaseModel)
    )
    return scalars, models


class Documented(dict[str, Any]):
    """One status of a route's response documentation (`api/openapi.py`'s `documented`), made when the OpenAPI
    document is generated (`BatonResolver.get_openapi_schema`), not when its router is imported. Empty until then,
    so that the route's first request analyses no response model (powertools makes a field of each documented model
    when it first needs the route's dependant), and the envelopes are not parametrized at import. Together about
    4 ms of a cold save (`bench/harness/coldstart.py`). The statuses themselves are known at import: powertools keys
    a route by them."""

    def __init__(self, make: Callable[[], Any]) -> None:
        super().__init__()
        self._make = make

    def made(self) -> "Documented":
        """This status's documentation, made now if it was not yet."""
        if not self:
            self.update(self._make())
        return self


class BatonResolver(APIGatewayHttpResolver):
    """`APIGatewayHttpResolver` with authentication, scope, media type, size and strict JSON checks first."""

    def __init__(self, services: Callable[[], Services]) -> None:
        """`services` gives the services of this resolver's container; it is called by the requests that need
        them (an authenticated route), so it may build them on its first call."""
        super().__init__(enable_validation=True, json_body_deserializer=self._gate_body)
        self._services = services
        self._evaluated: set[Callable[..., Any]] = set()
        self.last_call: Call | None = None
        """What the gate learned about the request served last, kept after `resolve` (for the access log)."""
        self._directs: dict[Route, _Direct | None] = {}
        self._counting: Counting | None = None
        """The usage of the request being served, counted from its admission (`store/usage.py`)."""
        self._deferred: list[tuple[str, tuple[str, ...]]] = []
        """Routers not imported yet: each module's name and the path prefixes its routes answer."""
        self._deferred_lock = threading.Lock()
        self._deferred_asked: re.Pattern[str] | None = None
        """Matches a path that may be for a deferred router's route: one search per request instead of a test of
        each prefix. Compiled by the first request (None until then): not once per router the app defers."""

    def include_router_when_asked(self, module: str, *prefixes: str) -> None:
        """Include the router of `module` when the first request whose path holds one of `prefixes` arrives
        (or the OpenAPI document is asked for, or SnapStart prepares): its module, and the models and modules it
        imports, stay off the cold start of every other route. Its routes answer exactly as if included now."""
        self._deferred.append((module, prefixes))
        self._deferred_asked = None

    def deferred_routers(self) -> list[str]:
        """The modules of the routers not included yet."""
        return [module for module, _ in self._deferred]

    def include_deferred_routers(self, path: str | None = None) -> None:
        """Include the deferred routers whose prefixes `path` holds (None: all of them)."""
        if not self._deferred:
            return
        asked = self._deferred_asked
        if asked is None:
            with self._deferred_lock:  # (the list read whole: another thread may be including a router)
                asked = self._deferred_asked = _asking_for(
                    prefix for _, prefixes in self._deferred for prefix in prefixes
                )
        if path is not None and not asked.search(path):
            return
        with self._deferred_lock:
            for entry in list(self._deferred):
                module, prefixes = entry
                if path is None or any(_holds(path, prefix) for prefix in prefixes):
                    self.include_router(importlib.import_module(module).router)
                    self._deferred.remove(entry)
            self._deferred_asked = _asking_for(prefix for _, prefixes in self._deferred for prefix in prefixes)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Resolve one event; `last_call` then tells who asked what, however far the request got.

        An answer over 1 MB goes back base64-encoded (gzip-compressed when accepted), so it fits Lambda's payload
        limit; one that would still not fit is answered `500 RESPONSE_TOO_LARGE` instead, logged at ERROR
        (`api/encoding.py`)."""
        self.last_call = None
        self._counting = None
        if self._deferred:
            self.include_deferred_routers(str(event.get("rawPath") or event.get("path") or ""))
        try:
            result = super().resolve(event, context)
        finally:
            counting, self._counting = self._counting, None
            if counting is not None:
                self.services().usage.end(counting)
        headers = event.get("headers") or {}
        accept = next((v for k, v in headers.items() if k.lower() == "accept-encoding"), None)
        fitted = fit_for_lambda(result, accept)
        call = self.last_call
        if call is not None:
            answer = within_lambda_limit(fitted, call.route, call.request_id)
            if call.rate_limit is not None:  # (an answer too large for Lambda is replaced: it carries it too)
                answer.setdefault("headers", {}).setdefault("RateLimit", call.rate_limit)
            return answer
        return within_lambda_limit(fitted, None, str((event.get("requestContext") or {}).get("requestId", "")))

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        try:
            self._gate(route, route_arguments)
            # Only Baton's routes (they carry its metadata): powertools makes its not-found route afresh for each
            # unknown path, and remembering those would grow the container's memory with every 404.
            if route.openapi_extensions:
                self._evaluate_annotations(route.func)
                # A test's override of another dependency than `wired` is applied by the chain alone.
                direct = None if set(self.dependency_overrides) - {wired} else self._direct(route)
                if direct is not None:
                    return self._call_direct(route, direct, route_arguments)
        except Exception as exc:
            handled = self._call_exception_handler(exc, route)
            if handled is not None:
                return handled
            raise
        return super()._call_route(route, route_arguments)

    def _direct(self, route: Route) -> "_Direct | None":
        """How `route` is called without powertools' middleware chain, or None when it needs the chain.

        Every Baton route is called the same way: the gate has run, there are no middlewares besides powertools'
        two validation ones, and a route's only dependencies are `CurrentCall` and `Wired`. The chain around such a
        route (frames, the cookies' normalization for routes that read none, a debug message formatting the
        arguments, dependency solving that reads annotations again, each parameter's kind found again from its
        annotation) cost about a tenth of a warm request (`bench/harness/warm.py`). So such a route is called here,
        validated by the same powertools functions the chain calls, in the same order (`_call_direct`); a route with
        anything else (a middleware, a cookie parameter, a `Request` parameter, another dependency) goes through the
        chain, and so does every route while a dependency other than `wired` is overridden."""
        if route in self._directs:
            return self._directs[route]
        direct = None
        dependant = route.dependant
        if (
            not route.middlewares
            and not self._router_middlewares
            and route.enable_validation is not False
            and not dependant.cookie_params
            and _request_param_name(route.func) is None
        ):
            given = {
                node.depends.dependency: node.param_name
                for node in depends.build_dependency_tree(route.func).dependencies
            }
            if set(given) <= {current_call, wired}:
                scalar_queries, model_queries = _kinds(dependant.query_params)
                scalar_headers, model_headers = _kinds(dependant.header_params)
                direct = _Direct(
                    call=given.get(current_call),
                    services=given.get(wired),
                    scalar_queries=scalar_queries,
                    model_queries=model_queries,
                    scalar_headers=scalar_headers,
                    model_headers=model_headers,
                )
        self._directs[route] = direct
        return direct

    def _call_direct(self, route: Route, direct: "_Direct", route_arguments: dict[str, str]) -> ResponseBuilder[Any]:
        """Validate the request as powertools' request validation does, call the route, and validate its answer as
        powertools' response validation does."""
        event = self.current_event
        dependant = route.dependant
        values, errors = validation._request_params_to_args(dependant.path_params, route_arguments)
        if dependant.query_params:
            # powertools' `_normalize_multi_params`, with each parameter's kind found once (`_direct`)
            query = event.resolved_query_string_parameters
            multi_value = validation._get_multi_value_query_params(event)
            for param in direct.scalar_queries:
                validation._process_scalar_param(query, param, multi_value)
            for param in direct.model_queries:
                validation._process_model_param(query, param, multi_value)
            found, wrong = validation._request_params_to_args(dependant.query_params, query)
            values.update(found)
            errors += wrong
        if dependant.header_params:
            headers = event.resolved_headers_field
            multi_value = CaseInsensitiveDict(event.get("multiValueHeaders"))
            for param in direct.scalar_headers:
                validation._process_scalar_param(headers, param, multi_value)
            for param in direct.model_headers:
                validation._process_model_param(headers, param, multi_value)
            found, wrong = validation._request_params_to_args(dependant.header_params, headers)
            values.update(found)
            errors += wrong
        if dependant.body_params:
            found, wrong = validation._request_body_to_args(
                required_params=dependant.body_params, received_body=self._request_validation_middleware._get_body(self)
            )
            values.update(found)
            errors += wrong
        if errors:
            raise RequestValidationError(errors)
        if direct.call is not None:
            values[direct.call] = self.context[CALL_CONTEXT]
        if direct.services is not None:
            values[direct.services] = self.services()
        response = self._to_response(route.func(**values))
        if not isinstance(response, Response):  # what only a Bedrock agent's resolver makes
            raise TypeError(f"{route.func.__name__} answered {type(response).__name__}")
        response = self._response_validation_middleware._handle_response(route=route, response=response)
        return self._response_builder_class(response=response, serializer=self._serializer, route=route)

    def services(self) -> Services:
        """The services this resolver serves with: those that `dependency_overrides[wired]` gives (a test's), or
        its own provider's."""
        override = self.dependency_overrides.get(wired)
        return override() if override is not None else self._services()

    def _evaluate_annotations(self, func: Callable[..., Any]) -> None:
        """Turn a route's annotations from strings into objects, once, at its first request.

        Powertools looks for `Depends` in a route's annotations on every request (`typing.get_type_hints`), and
        the routers' annotations are strings (`from __future__ import annotations`, which keeps them from being
        built at import): evaluated on every request they would cost ~0.4 ms each time.
        """
        if func not in self._evaluated:
            func.__annotations__ = typing.get_type_hints(func, include_extras=True)
            self._evaluated.add(func)

    def _record(self, call: Call) -> None:
        self.last_call = call
        self.context[CALL_CONTEXT] = call

    def _gate(self, route: Route, path_arguments: Mapping[str, str]) -> None:
        event = self.current_event
        extensions = route.openapi_extensions or {}
        call = Call(
            request_id=event.request_context.request_id or str(uuid.uuid4()),
            principal=None,
            body=None,
            now_ms=now_ms(),
            # powertools' own not-found route carries no Baton metadata; its "pattern" would be the raw path
            route=route.openapi_path if extensions else None,
        )
        self._record(call)
        self.context[SERVICES_CONTEXT] = self.services
        if not extensions:
            return  # the not-found handler answers
        if not extensions.get(PUBLIC_EXTENSION):
            family = min(route.tags or (), default="other")  # every route of the API has one tag
            if route.openapi_path == MCP_ROUTE:
                call = self._authenticate_mcp(call, extensions[SCOPE_EXTENSION], family)
            else:
                principal = self.services().authenticator.authenticate(
                    event.headers.get("authorization"), call.now_ms, fresh=bool(extensions.get(FRESH_KEY_EXTENSION))
                )
                if principal.resource is not None:
                    raise Unauthenticated(
                        "An OAuth access token is accepted only at /mcp; send an API key to this route."
                    )
                call = self._admit(replace(call, principal=principal), family)
                if not extensions.get(ANY_SCOPE_EXTENSION):
                    authorize(principal, extensions[SCOPE_EXTENSION], (), None)
        if route.method in BODY_METHODS and extensions.get(FORM_BODY_EXTENSION):
            self._raw_body(FORM)
        elif route.method in BODY_METHODS and extensions.get(RAW_BODY_EXTENSION):
            self._raw_body()
        elif route.method in BODY_METHODS:
            document = self._json_body()
            if call.principal is not None and extensions.get(ACTS_FOR_EXTENSION):
                authorize(call.principal, None, extensions[ACTS_FOR_EXTENSION], document.value)
            self._record(replace(call, body=document.value, plain_body=document.plain))
        check_encoding(path_arguments, event.raw_event.get("rawQueryString"))

    def _admit(self, call: Call, family: str) -> Call:
        """Spend one of the caller's tenant's requests (`api/ratelimit.py`): `RateLimited` (429) when it has none;
        the call, recorded, with the `RateLimit` its answer carries otherwise. From here on, the request and what
        serving it costs count as the tenant's usage of `family` (the route's tag)."""
        self._record(call)  # a request refused from here on is still logged with its caller
        services = self.services()
        admitted = services.limiter.admit(call.caller.tenant_id)
        call = replace(call, rate_limit=admitted.header())
        self._record(call)
        self._counting = services.usage.begin(call.caller.tenant_id, family, day_of(call.now_ms))
        return call

    def _authenticate_mcp(self, call: Call, scope: str, family: str) -> Call:
        """The caller at `/mcp`: an API key, or an OAuth access token bound to this origin's `/mcp`. A refusal says
        where OAuth's discovery starts (`WWW-Authenticate` with `resource_metadata`, RFC 9728)."""
        from baton_checkpoints.api.origin import request_origin
        from baton_checkpoints.domain import oauth

        origin = request_origin(self.current_event.raw_event, self.services().settings.origin_scheme)
        authorization = self.current_event.headers.get("authorization")
        try:
            principal = self.services().authenticator.authenticate(authorization, call.now_ms)
            if principal.resource is not None and principal.resource != oauth.resource_of(origin):
                raise Unauthenticated(
                    f"The access token is for another resource; this one is {oauth.resource_of(origin)}."
                )
        except Unauthenticated as refused:
            refused.challenge = oauth.challenge(origin, "invalid_token" if authorization else None)
            raise
        call = self._admit(replace(call, principal=principal), family)
        try:
            principal.require(scope)
        except Forbidden as refused:
            refused.challenge = oauth.challenge(origin, "insufficient_scope", scope)
            raise
        return call

    def _gate_body(self, text: str) -> Any:
        """The body the routes' validation sees: the one the gate already parsed strictly (parsed once, with the
        gate's reading of numbers: `3600.0` is the integer 3600)."""
        call = self.last_call
        if call is not None and call.body is not None:
            return call.body
        return parse_strict(text)

    def _json_body(self) -> Document:
        document = parse_document(self._raw_body())
        # Every body of this API is an object; powertools would otherwise validate a list's first element.
        if not isinstance(document.value, dict):
            raise ValidationFailed.single("", "The body must be a JSON object.")
        return document

    def _raw_body(self, expected: str = JSON_MEDIA) -> str | bytes:
        """The body, once its media type (`expected`), encoding and size are acceptable."""
        event = self.current_event
        content_type = event.headers.get("content-type")
        media_type = (content_type or "").split(";", 1)[0].strip().lower()
        if media_type != expected:
            raise UnsupportedMediaType(content_type, expected)
        # Media types are case-insensitive (RFC 9110); powertools' body validation compares them case-sensitively,
        # so what the gate accepted is handed on in the one spelling it knows.
        if content_type != expected:
            raw_headers = self.current_event.raw_event.get("headers") or {}
            for name in [n for n in raw_headers if n.lower() == "content-type"]:
                raw_headers[name] = expected
        try:
            raw = event.decoded_body or ""
            # (an ASCII body has as many bytes as characters; encoding another is where a lone surrogate fails)
            size = len(raw) if not isinstance(raw, str) or raw.isascii() else len(raw.encode("utf-8"))
        except (UnicodeError, ValueError):  # not UTF-8, or text UTF-8 cannot carry (a lone surrogate)
            raise ValidationFailed.single("", "The body is not valid UTF-8 JSON.") from None
        if size > limits.MAX_BODY_BYTES:
            raise PayloadTooLarge(
                field="body", limit_bytes=limits.MAX_BODY_BYTES, actual_bytes=size, what="The request body"
            )
        return raw

    def prepare_routes(self) -> None:
        """Build now what each route's first request would (the deferred routers included, each route's annotations
        evaluated, its dependants and body field, the validators of its parameters and body, how it is called):
        SnapStart's snapshot holds them (`handlers/snapstart.py`)."""
        self.include_deferred_routers()
        for route in self.routes():
            if route.openapi_extensions:
                self._evaluate_annotations(route.func)
                dependant = route.dependant
                fields = (*dependant.path_params, *dependant.query_params, *dependant.header_params)
                for field in (*fields, *dependant.body_params, route.body_field):
                    if field is not None:
                        # powertools validates each with a TypeAdapter of its own, deferred with Baton's models
                        # (`defer_build`) until its first request: built now
                        field._type_adapter.rebuild()
                self._direct(route)

    def routes(self) -> list[Route]:
        """Every route included so far."""
        return self._static_routes + self._dynamic_routes

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> "OpenAPI":
        """powertools' document, with each route's response documentation made first (`Documented`)."""
        self.document_responses()
        return super().get_openapi_schema(*args, **kwargs)

    def document_responses(self) -> None:
        """Make each route's response documentation (`Documented`) and add its models to the route's dependant, as
        powertools does with documentation given made."""
        from aws_lambda_powertools.event_handler.openapi.dependant import _add_extra_responses

        for route in self.routes():
            answers = list((route.responses or {}).values())
            later = [answer for answer in answers if isinstance(answer, Documented)]
            if not later:
                continue
            if len(later) != len(answers):
                raise TypeError(f"{route.method} {route.openapi_path}: its responses are all documented() or none")
            # A dependant made while the documentation was empty holds none of its models; one made after it was
            # made (by another resolver's document: routers are shared) holds them all.
            dependant = route.dependant
            for answer in later:
                answer.made()
            if not dependant.response_extra_models:
                _add_extra_responses(dependant, route.responses)

    def allowed_methods(self, path: str) -> list[str]:
        """The methods registered for `path` (empty when no route has that path)."""
        self.include_deferred_routers(path)
        return sorted({r.method for r in self.routes() if r.rule.match(path)})


def current_call(request: Request) -> Call:
    """The current request as the gate saw it (the dependency behind `CurrentCall`)."""
    found = request.context.get(CALL_CONTEXT)
    if not isinstance(found, Call):
        raise RuntimeError("no request is being resolved")
    return found


CurrentCall = Annotated[Call, Depends(current_call)]
"""A route parameter: the current request as the gate saw it (its caller, request id, clock, body)."""


def context_of(call: Call, services: Services) -> Context:
    """The operations' context of the current request: its caller, request id and clock, and the services."""
    return Context(call.caller, call.request_id, call.now_ms, services)


def wired(request: Request) -> Services:
    """The services of the resolver serving this request (the dependency behind `Wired`): its own provider's,
    unless `dependency_overrides[wired]` names others."""
    provider = typing.cast(Callable[[], Services], request.context[SERVICES_CONTEXT])
    return provider()


Wired = Annotated[Services, Depends(wired)]
"""A route parameter: the services of the container serving the request."""
