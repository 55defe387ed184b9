"""The OAuth routes' answers, as OpenAPI describes them (the routes write these documents themselves: each is
fixed by its RFC, and built in `baton_checkpoints.domain.oauth` or the router)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ProtectedResourceMetadata(BaseModel):
    """RFC 9728: the MCP endpoint as a protected resource."""

    resource: str = Field(description="<origin>/mcp")
    authorization_servers: list[str] = Field(description="Baton itself: [<origin>]")
    scopes_supported: list[str]
    bearer_methods_supported: list[Literal["header"]]
    resource_name: str
    resource_documentation: str


class AuthorizationServerMetadata(BaseModel):
    """RFC 8414: Baton's authorization server."""

    issuer: str = Field(description="<origin>, with no path")
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str
    revocation_endpoint: str
    scopes_supported: list[str]
    response_types_supported: list[Literal["code"]]
    response_modes_supported: list[Literal["query"]]
    grant_types_supported: list[Literal["authorization_code", "refresh_token"]]
    token_endpoint_auth_methods_supported: list[str]
    revocation_endpoint_auth_methods_supported: list[str]
    code_challenge_methods_supported: list[Literal["S256"]]
    client_id_metadata_document_supported: bool
    authorization_response_iss_parameter_supported: bool


class ClientRegistration(BaseModel):
    """RFC 7591 2: what a client asks to be registered with (other members are ignored)."""

    model_config = ConfigDict(extra="allow")

    redirect_uris: list[str] = Field(min_length=1, max_length=10)
    client_name: str | None = Field(default=None, max_length=200)
    token_endpoint_auth_method: str | None = Field(default=None, description="Answered as none: clients are public")
    grant_types: list[Literal["authorization_code", "refresh_token"]] | None = None
    response_types: list[Literal["code"]] | None = None


class ClientInformation(BaseModel):
    """RFC 7591 3.2.1: the registered client."""

    client_id: str = Field(pattern=r"^cli_[0-9a-f]{32}$")
    client_id_issued_at: int
    redirect_uris: list[str]
    client_name: str | None = None
    token_endpoint_auth_method: Literal["none"]
    grant_types: list[Literal["authorization_code", "refresh_token"]]
    response_types: list[Literal["code"]]


class TokenAnswer(BaseModel):
    """RFC 6749 5.1: an access token for `/mcp` and the refresh token that replaces this one."""

    access_token: str = Field(pattern=r"^bta_")
    token_type: Literal["Bearer"]
    expires_in: int
    refresh_token: str = Field(pattern=r"^btr_")
    scope: str
