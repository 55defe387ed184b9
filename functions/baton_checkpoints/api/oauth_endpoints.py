"""What OAuth's routes do (`api/routers/oauth.py` declares them): discovery (RFC 9728, RFC 8414), client
registration (RFC 7591), the consent page and its form, the token endpoint (authorization code with PKCE, refresh
with rotation) and revocation (RFC 7009).

These routes speak OAuth's own language, not the contract's envelope: errors are `{"error", "error_description"}`
(the description names the parameter and the rule), token answers are `no-store`, and the authorization endpoint
redirects to a client's registered `redirect_uri` only once the client and that URI are known. Each route is public
(the consent form carries a Baton key, checked fresh, as key management checks its caller's).
"""

from __future__ import annotations

import html
import json
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from aws_lambda_powertools.event_handler import Request, Response

from baton_checkpoints.api.operations.audit import record_by
from baton_checkpoints.api.operations.grants import end_grant
from baton_checkpoints.api.origin import request_origin
from baton_checkpoints.api.resolver import Call
from baton_checkpoints.api.responses import JSON
from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import oauth
from baton_checkpoints.domain.access import hash_secret
from baton_checkpoints.domain.audit import Actor
from baton_checkpoints.domain.canonical import parse_strict
from baton_checkpoints.domain.errors import Unauthenticated, ValidationFailed
from baton_checkpoints.domain.oauth import OAuthError

NO_STORE: Final = {"Cache-Control": "no-store", "Pragma": "no-cache"}
"""Token and registration answers hold secrets or one-time facts: never cached (RFC 6749, 5.1)."""
DISCOVERY_CACHE: Final = {"Cache-Control": "public, max-age=3600", "Access-Control-Allow-Origin": "*"}
"""Discovery documents change with a deployment at most; browser-based clients may read them from any origin."""
PAGE_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}
"""The consent page's headers besides its Content-Security-Policy (the console's, with the form's targets)."""

AUTHORIZATION_PARAMETERS: Final = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
)
"""What an authorization request carries (RFC 6749 4.1.1, RFC 7636, RFC 8707): the consent form posts them back."""

SCOPE_WORDS: Final = {
    "mcp:call": "call Baton's MCP tools",
    "checkpoints:read": "read checkpoints",
    "checkpoints:write": "save checkpoints",
    "checkpoints:delete": "delete checkpoints",
    "leases:write": "take and release leases",
}


def _origin(request: Request, services: Services) -> str:
    return request_origin(request.resolved_event.raw_event, services.settings.origin_scheme)


def _json(status: int, value: Any, headers: dict[str, str]) -> Response[str]:
    return Response(
        status_code=status, content_type=JSON, body=json.dumps(value, separators=(",", ":")), headers=headers
    )


def _error(refused: OAuthError) -> Response[str]:
    return _json(refused.status, {"error": refused.error, "error_description": refused.description}, dict(NO_STORE))


def read_form(body: str | bytes | None) -> dict[str, str]:
    """A form body (`application/x-www-form-urlencoded`): each parameter at most once (RFC 6749, 3.1), UTF-8, at
    most `MAX_FORM_BYTES`."""
    raw = body or ""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > oauth.MAX_FORM_BYTES:
        raise OAuthError("invalid_request", f"The form must be at most {oauth.MAX_FORM_BYTES} bytes.")
    try:
        text = data.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict")
    except (UnicodeError, ValueError):
        raise OAuthError("invalid_request", "The form must be UTF-8, percent-encoded.") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise OAuthError("invalid_request", f"{name} must not be sent more than once.")
        form[name] = value
    return form


# ---- discovery --------------------------------------------------------------------------------------------------


def protected_resource(request: Request, services: Services) -> Response[str]:
    """RFC 9728's document for `<origin>/mcp` (served at its own path and at the root path)."""
    return _json(200, oauth.protected_resource_metadata(_origin(request, services)), dict(DISCOVERY_CACHE))


def authorization_server(request: Request, services: Services) -> Response[str]:
    """RFC 8414's document: the issuer is the origin itself."""
    return _json(200, oauth.authorization_server_metadata(_origin(request, services)), dict(DISCOVERY_CACHE))


# ---- registration -----------------------------------------------------------------------------------------------


def _strings_among(values: Any, allowed: set[str]) -> bool:
    """True for a list of strings, each one of `allowed`."""
    return isinstance(values, list) and all(isinstance(v, str) and v in allowed for v in values)


def _client_metadata(body: str | bytes | None) -> tuple[tuple[str, ...], str | None, list[str]]:
    """The redirect URIs, name and grant types of a registration request (RFC 7591, 2), or its error."""
    try:
        metadata = parse_strict(body or "")  # the contract's JSON rules: depth, numbers, duplicate keys
    except ValidationFailed as failed:
        raise OAuthError("invalid_client_metadata", f"The body must be a JSON object: {failed.message}") from None
    if not isinstance(metadata, dict):
        raise OAuthError("invalid_client_metadata", "The body must be a JSON object.")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise OAuthError("invalid_redirect_uri", "/redirect_uris must be a non-empty array of strings.")
    if len(uris) > oauth.MAX_REDIRECT_URIS:
        raise OAuthError("invalid_redirect_uri", f"/redirect_uris must have at most {oauth.MAX_REDIRECT_URIS} items.")
    checked = tuple(oauth.check_redirect_uri(u, f"/redirect_uris/{i}") for i, u in enumerate(uris))
    name = metadata.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > oauth.MAX_CLIENT_NAME_CHARS):
        raise OAuthError(
            "invalid_client_metadata",
            f"/client_name must be a string of at most {oauth.MAX_CLIENT_NAME_CHARS} characters.",
        )
    grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
    if not _strings_among(grants, {"authorization_code", "refresh_token"}):
        raise OAuthError("invalid_client_metadata", "/grant_types must hold only authorization_code and refresh_token.")
    responses = metadata.get("response_types", ["code"])
    if not _strings_among(responses, {"code"}):
        raise OAuthError("invalid_client_metadata", "/response_types must hold only code.")
    return checked, name, [g for g in ("authorization_code", "refresh_token") if g in grants] or ["authorization_code"]


def register(call: Call, request: Request, services: Services) -> Response[str]:
    """Register a public client."""
    try:
        uris, name, grants = _client_metadata(request.resolved_event.decoded_body)
    except OAuthError as refused:
        return _error(refused)
    client = oauth.Client(client_id=oauth.new_client_id(), redirect_uris=uris, client_name=name)
    services.oauth.register(client, call.now_ms)
    answer: dict[str, Any] = {
        "client_id": client.client_id,
        "client_id_issued_at": call.now_ms // 1000,
        "redirect_uris": list(uris),
        "token_endpoint_auth_method": "none",
        "grant_types": grants,
        "response_types": ["code"],
    }
    if name is not None:
        answer["client_name"] = name
    return _json(201, answer, dict(NO_STORE))


# ---- authorization ----------------------------------------------------------------------------------------------


class _Authorization:
    """An authorization request, checked in RFC 6749's order: until its client and redirect URI are known, an
    error is a page (never a redirect); after, an error goes back to the client."""

    def __init__(self, params: dict[str, str], origin: str, services: Services, now_ms: int) -> None:
        self.params = params
        self.origin = origin
        client_id = params.get("client_id")
        if client_id is not None and client_id.startswith("https://"):
            client: oauth.Client | None = services.client_documents.client(client_id)  # a metadata document
        else:
            # Only an id of the shape Baton issues is looked up (nothing longer reaches the table's key).
            known = client_id is not None and oauth.REGISTERED_CLIENT_ID.match(client_id)
            client = services.oauth.client(client_id, now_ms) if known and client_id else None
        if client is None:
            raise OAuthError("invalid_client", "client_id is missing or names no registered client.", status=400)
        self.client = client
        self.redirect_uri = client.redirect_for(params.get("redirect_uri"))
        self.state = params.get("state")
        if self.state is not None and len(self.state) > oauth.MAX_STATE_CHARS:
            raise OAuthError("invalid_request", f"state must be at most {oauth.MAX_STATE_CHARS} characters.")

    def check(self) -> tuple[tuple[str, ...], str, str]:
        """The scopes asked, the PKCE challenge and the resource (errors here go back to the client)."""
        if self.params.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type must be code.")
        challenge = oauth.check_code_challenge(
            self.params.get("code_challenge"), self.params.get("code_challenge_method")
        )
        asked = oauth.requested_scopes(self.params.get("scope"))
        resource = self.params.get("resource") or oauth.resource_of(self.origin)
        if resource != oauth.resource_of(self.origin):
            raise OAuthError("invalid_target", f"resource must be {oauth.resource_of(self.origin)}.")
        return asked, challenge, resource

    def back(self, answer: dict[str, str]) -> Response[str]:
        """A 302 to the client's redirect URI with `answer`, `state` and `iss` (RFC 9207) added to its query."""
        values = dict(answer)
        if self.state is not None:
            values["state"] = self.state
        values["iss"] = self.origin
        parts = urlsplit(self.redirect_uri)
        query = f"{parts.query}&{urlencode(values)}" if parts.query else urlencode(values)
        location = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
        return Response(status_code=302, content_type=None, body="", headers={**PAGE_HEADERS, "Location": location})


def _policy(redirect_uri: str | None) -> str:
    """The consent page's Content-Security-Policy: the console's, with the form allowed to post here and to be
    redirected to the client (browsers check a form's redirect against `form-action`)."""
    target = ""
    if redirect_uri is not None:
        parts = urlsplit(redirect_uri)
        target = f" {parts.scheme}://{parts.netloc}" if parts.netloc else f" {parts.scheme}:"
    return (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; "
        f"form-action 'self'{target}; frame-ancestors 'none'"
    )


def _page(status: int, title: str, body: str, redirect_uri: str | None = None) -> Response[str]:
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · Baton</title>"
        '<link rel="stylesheet" href="/console/console.css"><link rel="icon" href="/console/favicon.svg"></head>'
        '<body><header class="bar"><span class="brand">Baton <span>authorization</span></span></header>'
        f'<main id="view">{body}</main></body></html>'
    )
    headers = {**PAGE_HEADERS, "Content-Security-Policy": _policy(redirect_uri)}
    return Response(status_code=status, content_type="text/html; charset=utf-8", body=document, headers=headers)


def _problem_page(refused: OAuthError) -> Response[str]:
    return _page(
        refused.status,
        "Authorization refused",
        f'<h1>Authorization refused</h1><div class="note error" role="alert"><strong>{html.escape(refused.error)}'
        f"</strong> {html.escape(refused.description)}</div>",
    )


def _consent(
    authorization: _Authorization, asked: tuple[str, ...], status: int = 200, problem: str | None = None
) -> Response[str]:
    client = authorization.client
    name = html.escape(client.client_name or client.client_id)
    redirect = html.escape(authorization.redirect_uri)
    hidden = "".join(
        f'<input type="hidden" name="{p}" value="{html.escape(authorization.params[p])}">'
        for p in AUTHORIZATION_PARAMETERS
        if p in authorization.params
    )
    scopes = "".join(f"<li><code>{html.escape(s)}</code>: {html.escape(SCOPE_WORDS.get(s, s))}</li>" for s in asked)
    alert = f'<div class="note error" role="alert">{html.escape(problem)}</div>' if problem else ""
    # A client known by its metadata document names itself: say whose document that is.
    host = urlsplit(client.client_id).hostname if client.client_id.startswith("https://") else None
    described_by = f" (described by <code>{html.escape(host)}</code>)" if host else ""
    body = (
        f"<h1>Allow {name} to use Baton?</h1>{alert}"
        '<section class="panel">'
        f"<p><strong>{name}</strong>{described_by} asks to act for the agent of the key you sign in with, in its "
        "tenant, through Baton's MCP endpoint. It may:</p>"
        f"<ul>{scopes}</ul>"
        f'<p class="muted">Only the scopes your key holds are granted. After you decide, you are sent to '
        f"<code>{redirect}</code>.</p>"
        f'<form method="post" action="{oauth.AUTHORIZE_PATH}">{hidden}'
        '<div class="field"><label for="key">API key</label>'
        '<input id="key" name="key" type="password" autocomplete="off" required>'
        '<span class="hint">A Baton key of the agent this client will act for (it must hold mcp:call).</span></div>'
        '<div class="actions"><button class="primary" type="submit" name="decision" value="approve">Allow</button>'
        '<button type="submit" name="decision" value="deny" formnovalidate>Deny</button></div>'
        "</form></section>"
    )
    return _page(status, f"Allow {client.client_name or client.client_id}?", body, authorization.redirect_uri)


def authorize_page(call: Call, request: Request, services: Services) -> Response[str]:
    """The consent page for an authorization request."""
    try:
        # The raw query, not the gateway's parameters (which join a repeated one with commas): each at most once.
        params = read_form(request.resolved_event.raw_event.get("rawQueryString") or "")
        authorization = _Authorization(params, _origin(request, services), services, call.now_ms)
    except OAuthError as refused:
        return _problem_page(refused)
    try:
        asked, _, _ = authorization.check()
    except OAuthError as refused:
        # A page, not a redirect: a link that anyone can make (with a client anyone can register) must not send a
        # browser on to another site without a person's action (RFC 9700, 4.11.2).
        return _problem_page(refused)
    return _consent(authorization, asked)


def authorize_decision(call: Call, request: Request, services: Services) -> Response[str]:
    """A person's decision on an authorization request."""
    try:
        form = read_form(request.resolved_event.decoded_body)
        authorization = _Authorization(form, _origin(request, services), services, call.now_ms)
    except OAuthError as refused:
        return _problem_page(refused)
    try:
        asked, challenge, resource = authorization.check()
    except OAuthError as refused:
        return authorization.back({"error": refused.error, "error_description": refused.description})
    decision = form.get("decision")
    if decision == "deny":
        return authorization.back({"error": "access_denied", "error_description": "The person denied the request."})
    if decision != "approve":
        return _consent(authorization, asked, 400, "decision must be approve or deny.")
    secret = form.get("key", "").strip()
    if not secret:
        return _consent(authorization, asked, 401, "Enter a Baton API key.")
    try:
        record = services.authenticator.key(hash_secret(secret), call.now_ms, fresh=True)
        key = record.principal(call.now_ms)
        scopes = oauth.granted_scopes(asked, key)
    except Unauthenticated as refused:
        return _consent(authorization, asked, 401, refused.message)
    except OAuthError as refused:
        return _consent(authorization, asked, refused.status, refused.description)
    approval = oauth.Approval(
        client_id=authorization.client.client_id,
        redirect_uri=authorization.redirect_uri,
        code_challenge=challenge,
        resource=resource,
        scopes=scopes,
        tenant_id=key.tenant_id,
        agent_id=key.agent_id,
        key_id=key.key_id,
        key_hash=record.secret_hash,
        client_name=authorization.client.client_name,
    )
    code = oauth.new_token(oauth.CODE_PREFIX)
    services.oauth.put_code(code, approval, call.now_ms)
    target = {"type": "oauth_client", "id": approval.client_id}
    actor = Actor(key.key_id, key.agent_id)
    details = {"scopes": sorted(scopes), "resource": resource}
    record_by(services, key.tenant_id, actor, call.request_id, call.now_ms, "grant.approved", target, details)
    return authorization.back({"code": code})


# ---- tokens -----------------------------------------------------------------------------------------------------


def _required(form: dict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise OAuthError("invalid_request", f"{name} is required.")
    return value


def _key_works(services: Services, approval: oauth.Approval, now_ms: int) -> None:
    """The approving key, read fresh, still works: a revoked or expired key's grants issue nothing."""
    try:
        services.authenticator.key(approval.key_hash, now_ms, fresh=True).principal(now_ms)
    except Unauthenticated:
        raise OAuthError(
            "invalid_grant", "The key that approved this grant no longer works: authorize again."
        ) from None


def _tokens(access: str, refresh: str, scopes: tuple[str, ...]) -> Response[str]:
    return _json(
        200,
        {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": oauth.ACCESS_SECONDS,
            "refresh_token": refresh,
            "scope": " ".join(scopes),
        },
        dict(NO_STORE),
    )


def _exchange_code(form: dict[str, str], services: Services, now_ms: int, request_id: str) -> Response[str]:
    code = _required(form, "code")
    client_id = _required(form, "client_id")
    found = services.oauth.code(code)
    if found is None:
        raise OAuthError("invalid_grant", "code is not valid.")
    approval = found.approval
    if found.grant_id is not None:
        _revoke_reused(services, approval.tenant_id, found.grant_id, now_ms, request_id)
        raise OAuthError("invalid_grant", "code was used already; the tokens it gave are revoked.")
    if now_ms >= found.expires_ms:
        raise OAuthError("invalid_grant", "code has expired: authorize again.")
    if client_id != approval.client_id:
        raise OAuthError("invalid_grant", "code was issued to another client_id.")
    if form.get("redirect_uri", approval.redirect_uri) != approval.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's.")
    if not oauth.verifier_matches(form.get("code_verifier"), approval.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge (PKCE S256).")
    if form.get("resource", approval.resource) != approval.resource:
        raise OAuthError("invalid_target", f"resource must be {approval.resource}, as authorized.")
    _key_works(services, approval, now_ms)
    access, refresh = oauth.new_token(oauth.ACCESS_PREFIX), oauth.new_token(oauth.REFRESH_PREFIX)
    grant_id = oauth.new_grant_id(now_ms)
    try:
        services.oauth.exchange(code, found, grant_id, access, refresh, now_ms)
    except OAuthError:
        # Another exchange of the same code won the race: the code was used twice all the same.
        again = services.oauth.code(code)
        if again is not None and again.grant_id not in (None, grant_id):
            _revoke_reused(services, approval.tenant_id, again.grant_id, now_ms, request_id)
        raise
    return _tokens(access, refresh, approval.scopes)


def _revoke_reused(services: Services, tenant_id: str, grant_id: str, now_ms: int, request_id: str) -> None:
    """A code or refresh token presented twice: someone holds a copy. Its grant goes, here at once too (Baton's
    own action: no key's)."""
    end_grant(services, tenant_id, grant_id, now_ms, Actor(None, None), request_id, "reuse")


def _refresh(form: dict[str, str], services: Services, now_ms: int, request_id: str) -> Response[str]:
    old = _required(form, "refresh_token")
    client_id = _required(form, "client_id")
    found = services.oauth.token(old, "refresh")
    if found is None:
        raise OAuthError("invalid_grant", "refresh_token is not valid.")
    approval = found.approval
    if found.rotated:
        # A refresh token used twice: one of the two holders is not the client. The grant goes.
        _revoke_reused(services, approval.tenant_id, found.grant_id, now_ms, request_id)
        raise OAuthError("invalid_grant", "refresh_token was used already; its grant is revoked: authorize again.")
    if now_ms >= found.expires_ms:
        raise OAuthError("invalid_grant", "refresh_token has expired: authorize again.")
    if client_id != approval.client_id:
        raise OAuthError("invalid_grant", "refresh_token was issued to another client_id.")
    if form.get("resource", approval.resource) != approval.resource:
        raise OAuthError("invalid_target", f"resource must be {approval.resource}, as authorized.")
    scope = form.get("scope")
    if scope is not None and not set(scope.split()) <= set(approval.scopes):
        raise OAuthError("invalid_scope", f"scope may name only the grant's scopes: {' '.join(approval.scopes)}.")
    _key_works(services, approval, now_ms)
    access, refresh = oauth.new_token(oauth.ACCESS_PREFIX), oauth.new_token(oauth.REFRESH_PREFIX)
    try:
        services.oauth.rotate(old, found, access, refresh, now_ms)
    except OAuthError:
        # Another refresh with the same token won the race: it was used twice all the same.
        again = services.oauth.token(old, "refresh")
        if again is not None and again.rotated:
            _revoke_reused(services, approval.tenant_id, found.grant_id, now_ms, request_id)
        raise
    return _tokens(access, refresh, approval.scopes)


def token(call: Call, request: Request, services: Services) -> Response[str]:
    """Issue tokens for a code or a refresh token."""
    try:
        form = read_form(request.resolved_event.decoded_body)
        grant_type = _required(form, "grant_type")
        if grant_type == "authorization_code":
            return _exchange_code(form, services, call.now_ms, call.request_id)
        if grant_type == "refresh_token":
            return _refresh(form, services, call.now_ms, call.request_id)
        raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token.")
    except OAuthError as refused:
        return _error(refused)


def revoke(call: Call, request: Request, services: Services) -> Response[str]:
    """Revoke the grant of a token."""
    try:
        form = read_form(request.resolved_event.decoded_body)
        secret = _required(form, "token")
    except OAuthError as refused:
        return _error(refused)
    hint = form.get("token_type_hint")
    kinds = ("refresh", "access") if hint == "refresh_token" else ("access", "refresh")
    for kind in kinds:
        found = services.oauth.token(secret, kind)
        if found is not None:
            approval = found.approval
            actor = Actor(approval.key_id, approval.agent_id)
            end_grant(services, approval.tenant_id, found.grant_id, call.now_ms, actor, call.request_id, "token")
            break
    return Response(status_code=200, content_type=None, body="", headers=dict(NO_STORE))
