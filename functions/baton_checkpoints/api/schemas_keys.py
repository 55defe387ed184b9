"""What the key routes answer (`/v1/keys`, `/v1/whoami`), and the OAuth grants made with keys (`/v1/oauth/grants`):
imported by their routers' first request (and the CLI), never by a save's cold start."""

# No `from __future__ import annotations`, as in `schemas.py`: pydantic would evaluate every field's annotation
# from its string when each class is created. A method's annotation that names its own class is quoted.

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from baton_checkpoints.api.schemas import ResponseModel
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import KeyRecord, Principal, Scope, effective_scopes
from baton_checkpoints.domain.clock import format_ms
from baton_checkpoints.domain.models import Identifier, Time

KeyId = Annotated[str, StringConstraints(pattern=r"^key_[0-9a-f]{32}$")]


class KeyInfo(ResponseModel):
    """An API key as listed: never its secret."""

    key_id: KeyId
    tenant_id: Identifier
    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1)]
    not_before: Time | None
    expires_at: Time | None
    description: Annotated[str, StringConstraints(max_length=limits.MAX_DESCRIPTION_CHARS)] | None
    created_at: Time

    @classmethod
    def of(cls, record: KeyRecord, **extra: Any) -> Any:
        """A key as listed (never its secret); `extra` adds fields of a subclass."""
        return cls.model_construct(
            key_id=record.key_id,
            tenant_id=record.tenant_id,
            agent_id=record.agent_id,
            scopes=sorted(record.scopes),
            not_before=format_ms(record.not_before_ms) if record.not_before_ms is not None else None,
            expires_at=format_ms(record.expires_ms) if record.expires_ms is not None else None,
            description=record.description,
            created_at=format_ms(record.created_ms),
            **extra,
        )


class Caller(ResponseModel):
    """The key a request was made with, as the gate knows it: whom it acts for and what it may do."""

    key_id: KeyId
    tenant_id: Identifier
    agent_id: Identifier
    scopes: Annotated[list[Scope], Field(min_length=1, description="The scopes the key was issued with.")]
    effective_scopes: Annotated[
        list[Scope],
        Field(description="Every scope the key holds, `*` expanded: what the key may do, route by route."),
    ]
    expires_at: Time | None

    @classmethod
    def of(cls, principal: Principal) -> Any:
        """The caller as answered."""
        return cls.model_construct(
            key_id=principal.key_id,
            tenant_id=principal.tenant_id,
            agent_id=principal.agent_id,
            scopes=sorted(principal.scopes),
            effective_scopes=sorted(effective_scopes(principal.scopes)),
            expires_at=format_ms(principal.expires_ms) if principal.expires_ms is not None else None,
        )


class CreatedKey(KeyInfo):
    """A new key: the only time its secret is shown."""

    secret: Annotated[str, StringConstraints(pattern=r"^btn_[A-Za-z0-9_-]{43}$")]


class KeyDeleted(ResponseModel):
    """What revoking a key answers."""

    key_id: KeyId
    deleted: Literal[True]


GrantId = Annotated[str, StringConstraints(pattern=r"^grant_[0-9a-f]{32}$")]


class GrantInfo(ResponseModel):
    """An OAuth grant as listed: what a person approved with a key, for which client, until when (never a token)."""

    grant_id: GrantId
    client_id: Annotated[str, Field(description="A registered client's id, or its metadata document's URL")]
    client_name: str | None
    tenant_id: Identifier
    agent_id: Identifier
    key_id: Annotated[KeyId, Field(description="The key that approved it: revoking the key revokes the grant")]
    scopes: list[Scope]
    resource: Annotated[str, Field(description="<origin>/mcp: where its access tokens are accepted")]
    created_at: Time
    expires_at: Annotated[Time, Field(description="When it lapses unless refreshed (each refresh extends it)")]

    @classmethod
    def of(cls, grant: Any) -> "GrantInfo":
        """A grant (`baton_checkpoints.domain.oauth.Grant`) as listed."""
        approval = grant.approval
        return cls.model_construct(
            grant_id=grant.grant_id,
            client_id=approval.client_id,
            client_name=approval.client_name,
            tenant_id=approval.tenant_id,
            agent_id=approval.agent_id,
            key_id=approval.key_id,
            scopes=list(approval.scopes),
            resource=approval.resource,
            created_at=format_ms(grant.created_ms),
            expires_at=format_ms(grant.expires_ms),
        )


class GrantRevoked(ResponseModel):
    """What revoking a grant answers."""

    grant_id: GrantId
    revoked: Literal[True]
