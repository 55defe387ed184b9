"""OAuth 2.1 for `/mcp`: the routes of discovery (RFC 9728, RFC 8414), client registration (RFC 7591), the consent
page and its form, the token endpoint and revocation (RFC 7009), as the API declares them. What each does is in
`baton_checkpoints.api.oauth_endpoints`, imported by the first OAuth request: a checkpoint save never loads it."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler import Request, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from baton_checkpoints.api.openapi import OAUTH_ERROR_REF, responses
from baton_checkpoints.api.resolver import FORM, FORM_BODY_EXTENSION, PUBLIC, RAW_BODY_EXTENSION, CurrentCall
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.api.schemas_oauth import (
    AUTHORIZATION_SERVER,
    CLIENT_INFORMATION,
    CLIENT_REGISTRATION,
    PROTECTED_RESOURCE,
    TOKENS,
)
from baton_checkpoints.api.services import Wired

router = Router()

_FORM_BODY = {"required": True, "content": {FORM: {"schema": {"type": "object"}}}}


def _documented(
    answers: dict[int, tuple[str, Any]], errors: tuple[int, ...] = (), oauth_errors: dict[int, str] | None = None
) -> dict[int, OpenAPIResponse]:
    """An OAuth route's answers: JSON documents (a JSON Schema), pages (`str`: HTML), bodiless answers (None), the
    contract's envelope for what the gate refuses (`errors`: media type, size, a malformed query or Host, 503), and
    OAuth's error object for the route's own refusals (`oauth_errors`), which a 400 may also be an envelope of."""
    documented: dict[int, Any] = dict(responses({}, errors))
    for status, (description, model) in answers.items():
        if model is None and status == 302:
            location = {"description": "The client's registered redirect_uri, with the answer in its query"}
            documented[status] = {
                "description": description,
                "content": {},
                "headers": {"Location": {**location, "required": True, "schema": {"type": "string"}}},
            }
        elif model is None:
            documented[status] = {"description": description, "content": {}}
        elif model is str:
            documented[status] = {"description": description, "content": {"text/html": {"schema": {"type": "string"}}}}
        else:
            documented[status] = {"description": description, "content": {JSON: {"schema": model}}}
    for status, description in (oauth_errors or {}).items():
        either = [{"$ref": OAUTH_ERROR_REF}, {"$ref": "#/components/schemas/ErrorEnvelope"}]
        schema = {"anyOf": either} if status in documented else {"$ref": OAUTH_ERROR_REF}
        documented[status] = {"description": description, "content": {JSON: {"schema": schema}}}
    return cast(dict[int, OpenAPIResponse], documented)


@router.get(
    "/.well-known/oauth-protected-resource/mcp",
    summary="OAuth protected resource metadata of /mcp (RFC 9728)",
    description="The MCP endpoint's resource identifier, its authorization server (Baton) and its scopes.",
    openapi_extensions=PUBLIC,
    responses=_documented({200: ("The document", PROTECTED_RESOURCE)}, (400,)),
    tags=["oauth"],
)
def protected_resource(request: Request, services: Wired) -> Response[str]:
    """RFC 9728's document for `<origin>/mcp`."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.protected_resource(request, services)


@router.get(
    "/.well-known/oauth-protected-resource",
    summary="OAuth protected resource metadata (RFC 9728), at the root",
    description="The same document as /.well-known/oauth-protected-resource/mcp, for clients that look here first.",
    openapi_extensions=PUBLIC,
    responses=_documented({200: ("The document", PROTECTED_RESOURCE)}, (400,)),
    tags=["oauth"],
)
def protected_resource_root(request: Request, services: Wired) -> Response[str]:
    """RFC 9728's document, where a client without the challenge's pointer looks."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.protected_resource_root(request, services)


@router.get(
    "/.well-known/oauth-authorization-server",
    summary="OAuth authorization server metadata (RFC 8414)",
    description="Baton's authorization, token, registration and revocation endpoints, and what each supports.",
    openapi_extensions=PUBLIC,
    responses=_documented({200: ("The document", AUTHORIZATION_SERVER)}, (400,)),
    tags=["oauth"],
)
def authorization_server(request: Request, services: Wired) -> Response[str]:
    """RFC 8414's document: the issuer is the origin itself."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.authorization_server(request, services)


@router.post(
    "/oauth/register",
    summary="Register an OAuth client (RFC 7591)",
    description=(
        "Dynamic client registration: a public client (token_endpoint_auth_method none, PKCE) with its redirect "
        "URIs: https, http on a loopback address, or a native app's private-use scheme. Errors are RFC 7591's."
    ),
    openapi_extensions={
        **PUBLIC,
        RAW_BODY_EXTENSION: True,
        "requestBody": {"required": True, "content": {JSON: {"schema": CLIENT_REGISTRATION}}},
    },
    responses=_documented(
        {201: ("The client", CLIENT_INFORMATION)},
        (400, 413, 415, 503),
        {400: "An RFC 7591 error (invalid_client_metadata, invalid_redirect_uri), or a Host naming no host"},
    ),
    tags=["oauth"],
)
def register(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """Register a public client."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.register(call, request, services)


@router.get(
    "/oauth/authorize",
    summary="OAuth authorization endpoint: the consent page",
    description=(
        "A page where a person signs in with a Baton key and allows or denies the client's request. An unknown "
        "client or an unregistered redirect_uri is a page saying so, never a redirect; any other error goes back "
        "to the client's redirect_uri (RFC 6749, 4.1.2.1)."
    ),
    openapi_extensions=PUBLIC,
    responses={
        200: {"description": "The consent page", "content": {"text/html": {"schema": {"type": "string"}}}},
        302: {"description": "An error sent back to the client", "content": {}},
        400: {
            "description": "An unknown client or redirect URI",
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
    },
    tags=["oauth"],
)
def authorize_page(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """The consent page for an authorization request."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.authorize_page(call, request, services)


@router.post(
    "/oauth/authorize",
    summary="OAuth authorization endpoint: the consent form",
    description=(
        "The consent page's form, also for automation: every parameter of the authorization request plus key (a "
        "Baton key holding mcp:call) and decision (approve or deny). Answers 302 to the registered redirect_uri "
        "with code, state and iss, or error=access_denied; a key that does not work is the page again (401), and "
        "one without mcp:call is refused (403)."
    ),
    openapi_extensions={
        **PUBLIC,
        FORM_BODY_EXTENSION: True,
        "requestBody": {"required": True, "content": {FORM: {"schema": {"type": "object"}}}},
    },
    responses={
        302: {"description": "The decision, sent back to the client", "content": {}},
        400: {
            "description": "An unknown client or redirect URI",
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
        401: {"description": "The key does not work", "content": {"text/html": {"schema": {"type": "string"}}}},
        403: {"description": "The key lacks mcp:call", "content": {"text/html": {"schema": {"type": "string"}}}},
    },
    tags=["oauth"],
)
def authorize_decision(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """A person's decision on an authorization request."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.authorize_decision(call, request, services)


@router.post(
    "/oauth/token",
    summary="OAuth token endpoint",
    description=(
        "grant_type authorization_code (code, client_id, code_verifier, redirect_uri, resource) or refresh_token "
        "(refresh_token, client_id): a Bearer access token for /mcp and a refresh token, which rotates on each use "
        "(a reused one revokes its grant). Errors are RFC 6749's."
    ),
    openapi_extensions={**PUBLIC, FORM_BODY_EXTENSION: True, "requestBody": _FORM_BODY},
    responses=_documented(
        {200: ("The tokens", TOKENS)},
        (400, 413, 415, 503),
        {400: "An RFC 6749 error (invalid_request, invalid_grant, invalid_target, …), or a Host naming no host"},
    ),
    tags=["oauth"],
)
def token(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """Issue tokens for a code or a refresh token."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.token(call, request, services)


@router.post(
    "/oauth/revoke",
    summary="OAuth token revocation (RFC 7009)",
    description=(
        "token: an access or refresh token. Its whole grant is revoked (every token of it stops working at once in "
        "this container, and within the key cache's 60 s everywhere). An unknown token answers 200 too."
    ),
    openapi_extensions={**PUBLIC, FORM_BODY_EXTENSION: True, "requestBody": _FORM_BODY},
    responses=_documented(
        {200: ("Revoked, or nothing to revoke", None)},
        (400, 413, 415, 503),
        {400: "An RFC 7009 error (invalid_request), or a Host naming no host"},
    ),
    tags=["oauth"],
)
def revoke(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """Revoke the grant of a token."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.revoke(call, request, services)
