"""OAuth 2.1 for `/mcp`: the routes of discovery (RFC 9728, RFC 8414), client registration (RFC 7591), the consent
page and its form, the token endpoint and revocation (RFC 7009), as the API declares them. What each does is in
`baton_checkpoints.api.oauth_endpoints`, imported by the first OAuth request: a checkpoint save never loads it."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler import Request, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from baton_checkpoints.api.openapi import OAUTH_ERROR_REF, responses
from baton_checkpoints.api.resolver import FORM, FORM_BODY_EXTENSION, PUBLIC, RAW_BODY_EXTENSION, CurrentCall, Wired
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.api.schemas_oauth import (
    AUTHORIZATION_QUERY,
    AUTHORIZATION_SERVER,
    CLIENT_INFORMATION,
    CLIENT_REGISTRATION,
    DECISION_FORM,
    PROTECTED_RESOURCE,
    REVOCATION_FORM,
    TOKEN_FORM,
    TOKENS,
)

router = Router()


def _form_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {FORM: {"schema": schema}}}


_FORM_MEDIA_TYPE = {415: "UNSUPPORTED_MEDIA_TYPE: the body is not application/x-www-form-urlencoded"}


def _documented(
    answers: dict[int, tuple[str, Any]],
    errors: tuple[int, ...] = (),
    oauth_errors: dict[int, str] | None = None,
    form: bool = False,
) -> dict[int, OpenAPIResponse]:
    """An OAuth route's answers: JSON documents (a JSON Schema), pages (`str`: HTML), bodiless answers (None), the
    contract's envelope for what the gate refuses (`errors`: media type, size, a malformed query or Host, 503), and
    OAuth's error object for the route's own refusals (`oauth_errors`), which a 400 may also be an envelope of. A
    `form` route's 415 names the form's media type."""
    documented: dict[int, Any] = dict(responses({}, errors, described=_FORM_MEDIA_TYPE if form else None))
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


def _pages(answers: dict[int, tuple[str, Any]], errors: tuple[int, ...]) -> dict[int, OpenAPIResponse]:
    """The authorization endpoint's answers (pages, redirects), and the contract's envelope for what the gate refuses
    before the route reads the request (`errors`: a query whose encoding is broken (400), the form's media type and
    size, and 503). A status that is both (400) is a page or the envelope."""
    documented: dict[int, Any] = dict(_documented(answers))
    for status, envelope in responses({}, errors, described=_FORM_MEDIA_TYPE).items():
        page = documented.get(status)
        if page is None:
            documented[status] = envelope
        else:
            content = {**page["content"], **cast(dict[str, Any], envelope)["content"]}
            documented[status] = {
                **page,
                "description": f"{page['description']}; or the gate's envelope",
                "content": content,
            }
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

    return oauth_endpoints.protected_resource(request, services)


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
    openapi_extensions={**PUBLIC, "parameters": AUTHORIZATION_QUERY},
    responses=_pages(
        {
            200: ("The consent page", str),
            302: ("An error sent back to the client", None),
            400: ("An unknown client or redirect URI, or a repeated parameter (a page)", str),
        },
        (400, 503),
    ),
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
        "requestBody": _form_body(DECISION_FORM),
    },
    responses=_pages(
        {
            302: ("The decision, sent back to the client", None),
            400: ("An unknown client or redirect URI, a malformed form, or no decision (a page)", str),
            401: ("The key does not work (the page again)", str),
            403: ("The key lacks mcp:call (the page again)", str),
        },
        (400, 413, 415, 503),
    ),
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
    openapi_extensions={**PUBLIC, FORM_BODY_EXTENSION: True, "requestBody": _form_body(TOKEN_FORM)},
    responses=_documented(
        {200: ("The tokens", TOKENS)},
        (400, 413, 415, 503),
        {400: "An RFC 6749 error (invalid_request, invalid_grant, invalid_target, …), or a Host naming no host"},
        form=True,
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
    openapi_extensions={**PUBLIC, FORM_BODY_EXTENSION: True, "requestBody": _form_body(REVOCATION_FORM)},
    responses=_documented(
        {200: ("Revoked, or nothing to revoke", None)},
        (400, 413, 415, 503),
        {400: "An RFC 7009 error (invalid_request), or a Host naming no host"},
        form=True,
    ),
    tags=["oauth"],
)
def revoke(call: CurrentCall, request: Request, services: Wired) -> Response[str]:
    """Revoke the grant of a token."""
    from baton_checkpoints.api import oauth_endpoints

    return oauth_endpoints.revoke(call, request, services)
