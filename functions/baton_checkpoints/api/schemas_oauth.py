"""The OAuth routes' documents, as OpenAPI describes them: JSON Schemas written out, not pydantic models. The routes
write these documents themselves (each is fixed by its RFC, built in `baton_checkpoints.domain.oauth` or the
router), so nothing validates against a model, and no model class is built at cold start for them."""

from __future__ import annotations

from typing import Any, Final

_STRING: Final = {"type": "string"}
_STRINGS: Final = {"type": "array", "items": _STRING}
_GRANT_TYPES: Final = {"type": "array", "items": {"type": "string", "enum": ["authorization_code", "refresh_token"]}}
_CODE: Final = {"type": "array", "items": {"type": "string", "enum": ["code"]}}


def _closed(title: str, description: str, properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "title": title,
        "description": description,
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
    }


PROTECTED_RESOURCE: Final = _closed(
    "ProtectedResourceMetadata",
    "RFC 9728: the MCP endpoint as a protected resource, and Baton as its authorization server.",
    {
        "resource": {"type": "string", "description": "<origin>/mcp"},
        "authorization_servers": {**_STRINGS, "description": "Baton itself: [<origin>]"},
        "scopes_supported": _STRINGS,
        "bearer_methods_supported": {"type": "array", "items": {"type": "string", "enum": ["header"]}},
        "resource_name": _STRING,
        "resource_documentation": _STRING,
    },
)
AUTHORIZATION_SERVER: Final = _closed(
    "AuthorizationServerMetadata",
    "RFC 8414: Baton's authorization server: its endpoints and what each supports.",
    {
        "issuer": {"type": "string", "description": "<origin>, with no path"},
        "authorization_endpoint": _STRING,
        "token_endpoint": _STRING,
        "registration_endpoint": _STRING,
        "revocation_endpoint": _STRING,
        "scopes_supported": _STRINGS,
        "response_types_supported": _CODE,
        "response_modes_supported": {"type": "array", "items": {"type": "string", "enum": ["query"]}},
        "grant_types_supported": _GRANT_TYPES,
        "token_endpoint_auth_methods_supported": _STRINGS,
        "revocation_endpoint_auth_methods_supported": _STRINGS,
        "code_challenge_methods_supported": {"type": "array", "items": {"type": "string", "enum": ["S256"]}},
        "client_id_metadata_document_supported": {"type": "boolean"},
        "authorization_response_iss_parameter_supported": {"type": "boolean"},
    },
)
CLIENT_REGISTRATION: Final = {
    "title": "ClientRegistration",
    "description": "RFC 7591 2: what a client asks to be registered with (other members are ignored).",
    "type": "object",
    "properties": {
        "redirect_uris": {**_STRINGS, "minItems": 1, "maxItems": 10},
        "client_name": {"type": "string", "maxLength": 200},
        "token_endpoint_auth_method": {"type": "string", "description": "Answered as none: clients are public."},
        "grant_types": _GRANT_TYPES,
        "response_types": _CODE,
    },
    "required": ["redirect_uris"],
}
CLIENT_INFORMATION: Final = _closed(
    "ClientInformation",
    "RFC 7591 3.2.1: the registered client.",
    {
        "client_id": {"type": "string", "pattern": "^cli_[0-9a-f]{32}$"},
        "client_id_issued_at": {"type": "integer"},
        "redirect_uris": _STRINGS,
        "client_name": _STRING,
        "token_endpoint_auth_method": {"type": "string", "enum": ["none"]},
        "grant_types": _GRANT_TYPES,
        "response_types": _CODE,
    },
    optional=("client_name",),
)
TOKENS: Final = _closed(
    "TokenAnswer",
    "RFC 6749 5.1: an access token for /mcp and the refresh token that replaces the one used.",
    {
        "access_token": {"type": "string", "pattern": "^bta_"},
        "token_type": {"type": "string", "enum": ["Bearer"]},
        "expires_in": {"type": "integer"},
        "refresh_token": {"type": "string", "pattern": "^btr_"},
        "scope": _STRING,
    },
)


def _form(title: str, description: str, fields: dict[str, dict[str, Any]], required: tuple[str, ...]) -> dict[str, Any]:
    return {
        "title": title,
        "description": description,
        "type": "object",
        "properties": fields,
        "required": list(required),
    }


_AUTHORIZATION_FIELDS: Final[dict[str, dict[str, Any]]] = {
    "response_type": {"type": "string", "enum": ["code"]},
    "client_id": {"type": "string", "description": "A registered client's id, or its metadata document's https URL"},
    "redirect_uri": {"type": "string", "description": "One the client registered, exactly"},
    "scope": {"type": "string", "description": "Space-separated; none asked is every grantable scope"},
    "state": {"type": "string", "maxLength": 2000},
    "code_challenge": {"type": "string", "pattern": "^[A-Za-z0-9_-]{43}$"},
    "code_challenge_method": {"type": "string", "enum": ["S256"]},
    "resource": {"type": "string", "description": "<origin>/mcp (the default)"},
}
AUTHORIZATION_QUERY: Final = [
    {"name": name, "in": "query", "required": name in ("client_id", "response_type"), "schema": schema}
    for name, schema in _AUTHORIZATION_FIELDS.items()
]
"""The consent page's query: an authorization request (RFC 6749 4.1.1, RFC 7636, RFC 8707)."""
DECISION_FORM: Final = _form(
    "ConsentDecision",
    "The authorization request's parameters, the key of the person deciding, and the decision.",
    {
        **_AUTHORIZATION_FIELDS,
        "key": {"type": "string", "description": "A Baton key holding mcp:call: the grant acts for its agent"},
        "decision": {"type": "string", "enum": ["approve", "deny"]},
    },
    ("client_id", "response_type", "decision"),
)
TOKEN_FORM: Final = _form(
    "TokenRequest",
    "RFC 6749 4.1.3 (authorization_code, with the PKCE code_verifier) or 6 (refresh_token).",
    {
        "grant_type": {"type": "string", "enum": ["authorization_code", "refresh_token"]},
        "client_id": _STRING,
        "code": _STRING,
        "code_verifier": {"type": "string", "pattern": "^[A-Za-z0-9._~-]{43,128}$"},
        "redirect_uri": _STRING,
        "resource": _STRING,
        "refresh_token": _STRING,
        "scope": _STRING,
    },
    ("grant_type", "client_id"),
)
REVOCATION_FORM: Final = _form(
    "RevocationRequest",
    "RFC 7009 2.1: an access or refresh token; its whole grant is revoked.",
    {"token": _STRING, "token_type_hint": {"type": "string", "enum": ["access_token", "refresh_token"]}},
    ("token",),
)
