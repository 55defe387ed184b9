"""Who may do what: scopes, principals, API key secrets, and issuing keys."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import Final, Literal, get_args

from msgspec import Struct

from baton_checkpoints.domain.clock import format_ms, parse_time
from baton_checkpoints.domain.errors import FieldError, Forbidden, NotFound, Unauthenticated, ValidationFailed
from baton_checkpoints.domain.ids import new_key_id

Scope = Literal[
    "checkpoints:read",
    "checkpoints:write",
    "checkpoints:delete",
    "blobs:write",
    "leases:write",
    "mcp:call",
    "keys:manage",
    "subjects:purge",
    "usage:read",
    "audit:read",
    "tenants:manage",
    "*",
]
SCOPES: Final[tuple[str, ...]] = get_args(Scope)
WILDCARD: Final = "*"
TENANTS_MANAGE: Final = "tenants:manage"
# `*` stands for every scope but `tenants:manage`, which only operator keys hold.
WILDCARD_COVERS: Final = frozenset(SCOPES) - {WILDCARD, TENANTS_MANAGE}

SECRET_PREFIX: Final = "btn_"


class Principal(Struct, frozen=True):
    """The identity behind an authenticated API key. The tenant comes from here and nowhere else."""

    tenant_id: str
    agent_id: str
    key_id: str
    scopes: frozenset[str]
    expires_ms: int | None = None
    """When the key stops working (None: never); keys it issues expire no later."""
    resource: str | None = None
    """An OAuth access token's resource (`<origin>/mcp`), which alone accepts it; None for an API key."""

    @property
    def is_wildcard(self) -> bool:
        """True when the key may act on every agent's work in its tenant."""
        return WILDCARD in self.scopes

    def holds(self, scope: str) -> bool:
        """True when the key carries `scope`, directly or through `*`."""
        if scope in self.scopes:
            return True
        return scope in WILDCARD_COVERS and self.is_wildcard

    def require(self, scope: str) -> None:
        """Raise `Forbidden` unless the key carries `scope`."""
        if not self.holds(scope):
            raise Forbidden(f"This API key lacks the scope {scope}, which this operation needs.")

    def agent_for_read(self, requested: str | None) -> str:
        """The agent whose work a read addresses; another agent's work is invisible without `*` (a 404)."""
        if requested is None or requested == self.agent_id:
            return self.agent_id
        if not self.is_wildcard:
            raise NotFound()
        return requested

    def agent_for_write(self, requested: str | None) -> str:
        """The agent a write acts for; only a `*` key may name another agent."""
        if requested is None or requested == self.agent_id:
            return self.agent_id
        if not self.is_wildcard:
            raise Forbidden(
                f"/agent_id names another agent ({requested}); a key without the scope * acts only for its own "
                f"agent ({self.agent_id})."
            )
        return requested

    def agent_for_list(self, requested: str | None) -> str | None:
        """Whose work a list shows: any agent's (None: all) with `*`, else only the caller's own; another agent's
        work is invisible without `*`, as absent as a missing checkpoint (a 404)."""
        if self.is_wildcard:
            return requested
        if requested is None or requested == self.agent_id:
            return self.agent_id
        raise NotFound()

    def agent_for_key_list(self, requested: str | None, what: str = "keys") -> str | None:
        """Whose keys a key listing shows: any agent's (None: all) with `*`, else only the caller's own (naming
        another agent is refused: keys are not work whose existence a 404 would hide)."""
        if self.is_wildcard:
            return requested
        if requested is None or requested == self.agent_id:
            return self.agent_id
        raise Forbidden(
            f"The query parameter agent_id names another agent ({requested}); listing other agents' {what} needs "
            "the scope *."
        )

    def can_see_agent(self, agent_id: str) -> bool:
        """True when the caller may see work owned by `agent_id`."""
        return self.is_wildcard or agent_id == self.agent_id

    def may_act_for_tenant(self, tenant_id: str) -> bool:
        """True when the caller may act in `tenant_id`: its own, or any with `tenants:manage`."""
        return tenant_id == self.tenant_id or self.holds(TENANTS_MANAGE)

    def tenant_for(self, requested: str | None, named_by: str) -> str:
        """The tenant a request acts in: the caller's own unless it names another (in `named_by`, e.g.
        `/tenant_id`), which needs `tenants:manage` (`Forbidden` without it)."""
        if requested is None or requested == self.tenant_id:
            return self.tenant_id
        if not self.may_act_for_tenant(requested):
            raise Forbidden(
                f"{named_by} names another tenant ({requested}); acting for another tenant needs the scope "
                f"{TENANTS_MANAGE}."
            )
        return requested


def effective_scopes(scopes: frozenset[str] | set[str]) -> frozenset[str]:
    """Every scope a set grants, with `*` expanded."""
    expanded = set(scopes)
    if WILDCARD in scopes:
        expanded |= WILDCARD_COVERS
    return frozenset(expanded)


def check_can_issue(issuer: Principal, tenant_id: str, agent_id: str, scopes: frozenset[str]) -> None:
    """Raise `Forbidden` unless `issuer` may create a key for that tenant, agent and scopes."""
    issuer.tenant_for(tenant_id, "/tenant_id")
    if agent_id != issuer.agent_id and not issuer.is_wildcard:
        raise Forbidden(
            f"/agent_id names another agent ({agent_id}); a key without the scope * issues keys only for its own "
            f"agent ({issuer.agent_id})."
        )
    held = effective_scopes(issuer.scopes)
    missing = sorted(s for s in effective_scopes(scopes) if s not in held)
    if missing:
        raise Forbidden(f"/scopes asks for {', '.join(missing)}, which this API key does not hold itself.")


def check_can_revoke(issuer: Principal, target: KeyRecord) -> None:
    """Raise unless `issuer` may revoke `target`: another agent's key is invisible without `*` (NotFound), and a
    key holding a scope the issuer lacks (an operator key, say) cannot be revoked by it (Forbidden)."""
    if target.revoked_ms is not None or not issuer.may_act_for_tenant(target.tenant_id):
        raise NotFound()
    if target.agent_id != issuer.agent_id and not issuer.is_wildcard:
        raise NotFound()
    missing = sorted(s for s in effective_scopes(target.scopes) if s not in effective_scopes(issuer.scopes))
    if missing:
        raise Forbidden(
            f"The key holds {', '.join(missing)}, which this API key does not hold itself; only a key with at least "
            "the same scopes may revoke it."
        )


def key_validity(
    not_before: str | None, expires_at: str | None, now_ms: int, issuer_expires_ms: int | None = None
) -> tuple[int | None, int | None]:
    """The validity window of a new key in milliseconds, or `ValidationFailed` naming the bad time.

    A key never outlives the key that issues it: without `expires_at` it expires with its issuer, and an
    `expires_at` later than the issuer's is refused.
    """
    parsed: dict[str, int | None] = {}
    problems: list[FieldError] = []
    for name, value in (("not_before", not_before), ("expires_at", expires_at)):
        parsed[name] = None
        if value is None:
            continue
        try:
            parsed[name] = parse_time(value)
        except ValueError:
            problems.append(
                FieldError(
                    f"/{name}",
                    f"/{name} must be an RFC 3339 time with a zone, within years 0001-9999 in UTC, e.g. "
                    "2026-07-30T11:48:04.652Z.",
                )
            )
    if problems:
        raise ValidationFailed(problems)
    start, end = parsed["not_before"], parsed["expires_at"]
    if end is not None and end <= now_ms:
        raise ValidationFailed.single("/expires_at", "/expires_at must be in the future.")
    if issuer_expires_ms is not None:
        if end is not None and end > issuer_expires_ms:
            raise ValidationFailed.single(
                "/expires_at",
                f"/expires_at must be no later than {format_ms(issuer_expires_ms)}, when the issuing API key "
                "expires; a key never outlives its issuer.",
            )
        end = issuer_expires_ms if end is None else end
    if end is not None and start is not None and end <= start:
        field = "/expires_at" if expires_at is not None else "/not_before"
        rule = (
            "/expires_at must be later than /not_before."
            if expires_at is not None
            else f"/not_before must be earlier than {format_ms(end)}, when the issuing API key expires."
        )
        raise ValidationFailed.single(field, rule)
    return start, end


def new_secret() -> str:
    """A new API key secret: the prefix and 256 random bits, URL-safe."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """SHA-256 hex of a secret: the only form in which a key is stored or looked up."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class KeyRecord(Struct, frozen=True):
    """An API key as stored: its hash, never its secret."""

    key_id: str
    secret_hash: str
    tenant_id: str
    agent_id: str
    scopes: frozenset[str]
    created_ms: int
    not_before_ms: int | None = None
    expires_ms: int | None = None
    description: str | None = None
    revoked_ms: int | None = None

    def principal(self, now_ms: int) -> Principal:
        """The principal this key stands for, or `Unauthenticated` when it cannot be used now."""
        if self.revoked_ms is not None and self.revoked_ms <= now_ms:
            raise Unauthenticated("The API key was revoked; ask for a new one.")
        if self.expires_ms is not None and now_ms >= self.expires_ms:
            raise Unauthenticated("The API key has expired; ask for a new one.")
        if self.not_before_ms is not None and now_ms < self.not_before_ms:
            raise Unauthenticated("The API key is not valid yet; see its not_before time.")
        return Principal(
            tenant_id=self.tenant_id,
            agent_id=self.agent_id,
            key_id=self.key_id,
            scopes=self.scopes,
            expires_ms=self.expires_ms,
        )


class IssuedKey(Struct, frozen=True):
    """A key just issued: the record to store and the secret, which is shown once and never stored."""

    record: KeyRecord
    secret: str


def issue_key(
    tenant_id: str,
    agent_id: str,
    scopes: Iterable[str],
    now_ms: int,
    *,
    not_before_ms: int | None = None,
    expires_ms: int | None = None,
    description: str | None = None,
    secret: str | None = None,
    key_id: str | None = None,
) -> IssuedKey:
    """A new API key: its id, a fresh secret (or `secret`, for a fixed development or test key) and the record
    that stores only the secret's hash. Whoever asks has already checked that it may (`check_can_issue`,
    `key_validity`); storing the record is the caller's next step."""
    secret = new_secret() if secret is None else secret
    record = KeyRecord(
        key_id=new_key_id(now_ms) if key_id is None else key_id,
        secret_hash=hash_secret(secret),
        tenant_id=tenant_id,
        agent_id=agent_id,
        scopes=frozenset(scopes),
        created_ms=now_ms,
        not_before_ms=not_before_ms,
        expires_ms=expires_ms,
        description=description,
    )
    return IssuedKey(record=record, secret=secret)
