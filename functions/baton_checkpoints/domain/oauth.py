"""OAuth 2.1 for `/mcp`, the pure part: what Baton publishes about itself, which clients and redirect URIs it takes,
what a person may grant, PKCE, and the tokens' shapes and lifetimes. Nothing here reads or writes the table.

Baton is its own authorization server (RFC 8414) for one protected resource, `<origin>/mcp` (RFC 9728). A grant is
made by a person who signs in with a Baton key on the consent page: it belongs to that key's tenant and agent, holds
at most that key's scopes, and lives while the key does. Access tokens are short-lived and bound to `<origin>/mcp`
(RFC 8707); refresh tokens rotate, and a refresh token used twice revokes its grant. Every secret (code, access and
refresh token) is stored only as its SHA-256.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import secrets
from collections.abc import Iterable
from typing import Final
from urllib.parse import SplitResult, urlsplit

from msgspec import Struct

from baton_checkpoints.domain.access import Principal, effective_scopes
from baton_checkpoints.domain.errors import Unauthenticated

MCP_PATH: Final = "/mcp"
PROTECTED_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
AUTHORIZATION_SERVER_PATH: Final = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH: Final = "/oauth/authorize"
TOKEN_PATH: Final = "/oauth/token"
REGISTER_PATH: Final = "/oauth/register"
REVOKE_PATH: Final = "/oauth/revoke"

MCP_SCOPE: Final = "mcp:call"
GRANTABLE_SCOPES: Final[tuple[str, ...]] = (
    MCP_SCOPE,
    "checkpoints:read",
    "checkpoints:write",
    "checkpoints:delete",
    "leases:write",
)
"""What a grant may hold: MCP and what its tools need. Key management, purges and tenants stay with keys."""

ACCESS_PREFIX: Final = "bta_"
REFRESH_PREFIX: Final = "btr_"
CODE_PREFIX: Final = "btc_"
CLIENT_PREFIX: Final = "cli_"

CODE_SECONDS: Final = 120
"""An authorization code is exchanged at once by its client; two minutes cover a slow redirect."""
ACCESS_SECONDS: Final = 3600
"""An access token's life: short, so a revoked grant or key stops working soon even where a check is cached."""
REFRESH_SECONDS: Final = 30 * 86400
"""A refresh token's life; each use rotates it, and a grant unused for this long lapses (its items expire by TTL)."""
CLIENT_SECONDS: Final = 365 * 86400
"""A registered client's life once a person approved it (its item expires by TTL; a client registers again after)."""
UNUSED_CLIENT_SECONDS: Final = 86400
"""A registered client's life until a person first approves it: registration needs no key, so what nobody uses
leaves the table within a day."""
USED_REFRESH_SECONDS: Final = REFRESH_SECONDS
"""How long a rotated refresh token is remembered, so that its reuse is recognized (and revokes its grant)."""

MAX_REDIRECT_URIS: Final = 10
MAX_URI_CHARS: Final = 2000
MAX_CLIENT_NAME_CHARS: Final = 200
MAX_STATE_CHARS: Final = 2000
MAX_SCOPE_CHARS: Final = 1000
MAX_FORM_BYTES: Final = 16_384
"""The largest form a token, revoke or consent request may send (it holds a few short fields)."""

_VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}\Z")
_CHALLENGE = re.compile(r"[A-Za-z0-9\-_]{43}\Z")
_PRIVATE_SCHEME = re.compile(r"[a-z][a-z0-9+\-]*\.[a-z0-9+\-.]+\Z")
"""A private-use URI scheme of a native app (RFC 8252, 7.1): a reverse domain name, with a period."""
_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
"""Hosts an http redirect URI may name (as `urlsplit` gives a host: an IPv6 address without its brackets)."""


class OAuthError(Exception):
    """An OAuth error answer (RFC 6749 5.2, RFC 7591 3.2.2, RFC 7009): its code, a sentence naming the field and the
    rule, and the HTTP status."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


# ---- the origin and what Baton publishes ------------------------------------------------------------------------


def resource_of(origin: str) -> str:
    """The protected resource's identifier: `<origin>/mcp`."""
    return origin + MCP_PATH


def protected_resource_metadata(origin: str) -> dict[str, object]:
    """RFC 9728: the MCP endpoint, its authorization server (Baton itself) and how a token is presented."""
    return {
        "resource": resource_of(origin),
        "authorization_servers": [origin],
        "scopes_supported": list(GRANTABLE_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Baton MCP",
        "resource_documentation": origin + "/v1/openapi.json",
    }


def authorization_server_metadata(origin: str) -> dict[str, object]:
    """RFC 8414: Baton's endpoints and what it supports."""
    return {
        "issuer": origin,
        "authorization_endpoint": origin + AUTHORIZE_PATH,
        "token_endpoint": origin + TOKEN_PATH,
        "registration_endpoint": origin + REGISTER_PATH,
        "revocation_endpoint": origin + REVOKE_PATH,
        "scopes_supported": list(GRANTABLE_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


def challenge(origin: str, error: str | None = None, scope: str | None = None) -> str:
    """The `WWW-Authenticate` value of a 401 or 403 at `/mcp`: where the resource's metadata is, and what failed."""
    parts = [f'resource_metadata="{origin}{PROTECTED_RESOURCE_PATH}{MCP_PATH}"']
    if error is not None:
        parts.append(f'error="{error}"')
    parts.append(f'scope="{scope or " ".join(GRANTABLE_SCOPES)}"')
    return "Bearer " + ", ".join(parts)


# ---- clients ------------------------------------------------------------------------------------------------------


def check_redirect_uri(uri: str, pointer: str) -> str:
    """A redirect URI a client may register: HTTPS; HTTP on a loopback address (RFC 8252, 7.3); or a native app's
    private-use scheme (RFC 8252, 7.1). Never a fragment, never credentials in it."""
    if len(uri) > MAX_URI_CHARS:
        raise OAuthError("invalid_redirect_uri", f"{pointer} must be at most {MAX_URI_CHARS} characters.")
    if any(ord(c) < 0x21 or ord(c) >= 0x7F for c in uri):
        # It goes into a Location header and a Content-Security-Policy as it is: ASCII only (IDNA, percent-encoding)
        raise OAuthError(
            "invalid_redirect_uri",
            f"{pointer} must be printable ASCII without spaces (a non-ASCII host in IDNA form, other text "
            "percent-encoded).",
        )
    if "#" in uri:
        raise OAuthError("invalid_redirect_uri", f"{pointer} must not have a fragment (#…).")
    parts = _split(uri, "invalid_redirect_uri", pointer)
    scheme = parts.scheme.lower()
    if scheme in ("https", "http"):
        if not parts.hostname:
            raise OAuthError("invalid_redirect_uri", f"{pointer} must be an absolute URL with a host.")
        if parts.username is not None or parts.password is not None:
            raise OAuthError("invalid_redirect_uri", f"{pointer} must not carry a user name or password.")
        if scheme == "http" and parts.hostname.lower() not in _LOOPBACK_HOSTS:
            raise OAuthError(
                "invalid_redirect_uri",
                f"{pointer} must use https, or http only on a loopback address (127.0.0.1, [::1], localhost).",
            )
        return uri
    if _PRIVATE_SCHEME.match(scheme) and scheme not in ("javascript", "data", "file", "vbscript"):
        return uri
    raise OAuthError(
        "invalid_redirect_uri",
        f"{pointer} must be an https URL, an http URL on a loopback address, or a private-use scheme of reverse "
        "domain form (com.example.app:/callback).",
    )


class Client(Struct, frozen=True):
    """A registered client: public (no secret), with the redirect URIs it may be sent back to."""

    client_id: str
    redirect_uris: tuple[str, ...]
    client_name: str | None

    def redirect_for(self, requested: str | None) -> str:
        """The redirect URI of an authorization request: exactly one registered, or the only one registered when
        the request names none. Anything else is never redirected to."""
        if requested is None:
            if len(self.redirect_uris) == 1:
                return self.redirect_uris[0]
            raise OAuthError("invalid_request", "redirect_uri is required: this client registered several.")
        if requested not in self.redirect_uris:
            raise OAuthError("invalid_request", "redirect_uri is not one this client registered (compared exactly).")
        return requested


MAX_CLIENT_DOCUMENT_BYTES: Final = 5 * 1024
"""The largest client metadata document read (the draft's own bound)."""


def _split(url: str, error: str, pointer: str) -> SplitResult:
    """`urlsplit` of a URL whose port and host are well formed (a bracket left open, a port out of range or not a
    number is refused, never an uncaught ValueError)."""
    try:
        parts = urlsplit(url)
        _ = parts.port, parts.hostname
    except ValueError:
        raise OAuthError(error, f"{pointer} is not a well-formed URL (its host or port).") from None
    return parts


MAX_CLIENT_ID_URL_CHARS: Final = 1000
"""The longest client id that is a URL (its document is fetched, never looked up by that id)."""
REGISTERED_CLIENT_ID: Final = re.compile(r"cli_[0-9a-f]{32}\Z")


def check_client_document_url(client_id: str) -> str:
    """A client id that is a Client ID Metadata Document's URL: https, a host, a path beyond `/`, no fragment, no
    user name or password, ASCII (draft-ietf-oauth-client-id-metadata-document)."""
    if len(client_id) > MAX_CLIENT_ID_URL_CHARS or any(ord(c) < 0x21 or ord(c) >= 0x7F for c in client_id):
        raise OAuthError(
            "invalid_client",
            f"client_id, as a URL, must be printable ASCII of at most {MAX_CLIENT_ID_URL_CHARS} characters.",
        )
    parts = _split(client_id, "invalid_client", "client_id")
    if (
        len(client_id) > MAX_URI_CHARS
        or parts.scheme != "https"
        or not parts.hostname
        or parts.path in ("", "/")
        or parts.fragment
        or "#" in client_id
        or parts.username is not None
        or parts.password is not None
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in client_id)
    ):
        raise OAuthError(
            "invalid_client",
            "client_id, as a URL, must be https with a host and a path, without a fragment or credentials, at most "
            f"{MAX_URI_CHARS} characters.",
        )
    return client_id


def client_from_document(client_id: str, document: object) -> Client:
    """The client a metadata document describes: it must name itself (`client_id` equal to its URL), list its
    redirect URIs, and be a public client."""
    if not isinstance(document, dict):
        raise OAuthError("invalid_client", "The client's metadata document must be a JSON object.")
    if document.get("client_id") != client_id:
        raise OAuthError("invalid_client", "The client's metadata document must name its own URL as client_id.")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise OAuthError("invalid_client", "The client's metadata document must list redirect_uris (strings).")
    if len(uris) > MAX_REDIRECT_URIS:
        raise OAuthError(
            "invalid_client", f"The client's metadata document lists over {MAX_REDIRECT_URIS} redirect_uris."
        )
    try:
        checked = tuple(check_redirect_uri(u, f"/redirect_uris/{i}") for i, u in enumerate(uris))
    except OAuthError as refused:
        raise OAuthError("invalid_client", f"The client's metadata document: {refused.description}") from None
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise OAuthError("invalid_client", "The client's metadata document must say token_endpoint_auth_method none.")
    name = document.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_CLIENT_NAME_CHARS):
        name = None  # a name is shown to a person: an unusable one is left out, never trusted
    return Client(client_id=client_id, redirect_uris=checked, client_name=name)


def allowed_address(address: str, loopback: bool) -> bool:
    """True when a client's metadata document may be fetched from `address`: a public address (never private,
    link-local, shared, multicast, reserved or unspecified); a loopback one only where `loopback` (`baton serve`)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif any(ip in network for network in _EMBEDDING_V4):
            return False  # an IPv4 address inside (NAT64, 6to4, IPv4-compatible): whichever it is, not fetched
    if ip.is_loopback:
        return loopback
    return ip.is_global and not ip.is_multicast


_EMBEDDING_V4: Final = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "::/96"))
"""IPv6 ranges that carry an IPv4 address (NAT64, 6to4, IPv4-compatible): refused outright."""


def new_client_id() -> str:
    """`cli_` and 32 random lowercase hex digits."""
    return CLIENT_PREFIX + secrets.token_hex(16)


# ---- what a person grants ---------------------------------------------------------------------------------------


def requested_scopes(scope: str | None) -> tuple[str, ...]:
    """The scopes an authorization request asks for (space-separated), in the published order; none asked is every
    grantable scope. An unknown scope is `invalid_scope`."""
    if scope is None or not scope.strip():
        return GRANTABLE_SCOPES
    if len(scope) > MAX_SCOPE_CHARS:
        raise OAuthError("invalid_scope", f"scope must be at most {MAX_SCOPE_CHARS} characters.")
    asked = set(scope.split())
    unknown = sorted(asked - set(GRANTABLE_SCOPES))
    if unknown:
        raise OAuthError(
            "invalid_scope", f"scope names {', '.join(unknown)}; the scopes are: {' '.join(GRANTABLE_SCOPES)}."
        )
    return tuple(s for s in GRANTABLE_SCOPES if s in asked)


def granted_scopes(asked: Iterable[str], key: Principal) -> tuple[str, ...]:
    """What a grant approved with `key` holds: what was asked, of what the key holds. The key must hold `mcp:call`
    (a grant is for MCP), else the approval is refused."""
    held = effective_scopes(key.scopes)
    if MCP_SCOPE not in held:
        raise OAuthError(
            "access_denied",
            f"The key {key.key_id} lacks the scope {MCP_SCOPE}: sign in with a key that holds it.",
            status=403,
        )
    return tuple(s for s in asked if s in held)


# ---- PKCE and secrets -------------------------------------------------------------------------------------------


def check_code_challenge(challenge_value: str | None, method: str | None) -> str:
    """An authorization request's PKCE challenge: S256 (RFC 7636), required (OAuth 2.1)."""
    if challenge_value is None:
        raise OAuthError("invalid_request", "code_challenge is required (PKCE with S256).")
    if method != "S256":
        raise OAuthError("invalid_request", "code_challenge_method must be S256.")
    if not _CHALLENGE.match(challenge_value):
        raise OAuthError("invalid_request", "code_challenge must be 43 characters of base64url (a SHA-256).")
    return challenge_value


def verifier_matches(verifier: str | None, challenge_value: str) -> bool:
    """True when `verifier` is the one behind `challenge_value`: BASE64URL(SHA256(verifier)) without padding."""
    if verifier is None or not _VERIFIER.match(verifier):
        return False
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    computed = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return secrets.compare_digest(computed, challenge_value)


def new_token(prefix: str) -> str:
    """A new secret of 256 random bits, URL-safe, after its kind's prefix."""
    return prefix + secrets.token_urlsafe(32)


# ---- what is stored ---------------------------------------------------------------------------------------------


class Approval(Struct, frozen=True):
    """What a person approved on the consent page, for one client: carried by the authorization code, then by the
    grant its exchange makes."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    tenant_id: str
    agent_id: str
    key_id: str
    key_hash: str
    """The approving key's hash: every use of the grant checks that key still works (revoking it revokes them)."""
    client_name: str | None = None
    """The client's name when approved (shown where grants are listed)."""


class Code(Struct, frozen=True):
    """An authorization code as stored."""

    approval: Approval
    expires_ms: int
    grant_id: str | None = None
    """The grant its exchange made (set once used: a second exchange revokes that grant)."""


class Token(Struct, frozen=True):
    """An access or refresh token as stored: which grant it stands for, and what that grant holds."""

    kind: str
    """`access` or `refresh`."""
    grant_id: str
    approval: Approval
    expires_ms: int
    rotated: bool = False
    """A refresh token already exchanged for a new pair: its reuse revokes the grant."""

    def principal(self, key: Principal, now_ms: int) -> Principal:
        """Who an access token acts as: the approving key's tenant and agent, with the grant's scopes, bound to
        its resource; it stops working when either the token or the key does."""
        if now_ms >= self.expires_ms:
            raise Unauthenticated("The access token has expired; refresh it, or authorize again.")
        expires = self.expires_ms if key.expires_ms is None else min(self.expires_ms, key.expires_ms)
        return Principal(
            tenant_id=key.tenant_id,
            agent_id=key.agent_id,
            key_id=key.key_id,
            scopes=frozenset(s for s in self.approval.scopes if key.holds(s)),
            expires_ms=expires,
            resource=self.approval.resource,
        )


class Grant(Struct, frozen=True):
    """A live grant as listed: what a person approved, for which client, until when."""

    grant_id: str
    approval: Approval
    created_ms: int
    expires_ms: int


GRANT_ID_PATTERN: Final = re.compile(r"grant_[0-9a-f]{32}\Z")


def new_grant_id(now_ms: int) -> str:
    """`grant_`, the approval time (12 hex digits of milliseconds, so grants sort by age) and 20 random hex digits."""
    return f"grant_{now_ms:012x}{secrets.token_hex(10)}"
