"""The rules of inputs that arrive as bare text (a path segment, a header, a tool's argument), checked once here
and named as their caller sent them: a route's error names the header or path parameter, a tool's the argument."""

from __future__ import annotations

import re
from typing import Any, Final

from msgspec import Struct

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import IdempotencyClaim, request_fingerprint
from baton_checkpoints.domain.errors import ValidationFailed
from baton_checkpoints.domain.ids import CHECKPOINT_ID_PATTERN

IDEMPOTENCY_KEY_PATTERN: Final = rf"^[\x20-\x7e]{{1,{limits.IDEMPOTENCY_KEY_MAX_CHARS}}}$"
"""1 to 200 printable ASCII characters (the OpenAPI document and the tools' schemas state the same pattern)."""
_IDEMPOTENCY_KEY: Final = re.compile(IDEMPOTENCY_KEY_PATTERN.removeprefix("^").removesuffix("$"))
MAX_LEASE_TOKEN_CHARS: Final = 200


class Named(Struct, frozen=True):
    """How an input is named in an error: its pointer, the sentence's subject, and where it was sent."""

    pointer: str
    subject: str
    location: str = "body"

    @classmethod
    def argument(cls, name: str) -> Named:
        """A body field or a tool's argument: `/name`."""
        return cls(f"/{name}", f"/{name}")

    @classmethod
    def header(cls, name: str) -> Named:
        """A request header, as the contract spells it (`Lease-Token`)."""
        return cls(f"/{name}", f"The {name} header", "header")

    @classmethod
    def path(cls, name: str) -> Named:
        """A path parameter."""
        return cls(f"/{name}", f"The path parameter {name}", "path")

    def refused(self, rule: str) -> ValidationFailed:
        """The 400 of this input breaking `rule` (a sentence's predicate: "must be …")."""
        return ValidationFailed.single(self.pointer, f"{self.subject} {rule}", self.location)


def checkpoint_id(text: str, named: Named) -> str:
    """`text` when it is a checkpoint id (`ckpt_` and 32 lowercase hex digits)."""
    if not CHECKPOINT_ID_PATTERN.match(text):
        raise named.refused("must be ckpt_ followed by 32 lowercase hex digits.")
    return text


_IDENTIFIER: Final = re.compile(limits.IDENTIFIER_PATTERN)


def identifier(text: str, named: Named) -> str:
    """`text` when it is an identifier (a tenant or agent id)."""
    if not _IDENTIFIER.fullmatch(text):  # (`$` alone would match before a final newline)
        raise named.refused("must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or a digit.")
    return text


def lease_token(text: str | None, named: Named, required: bool = False) -> str | None:
    """The token `text` carries (None when absent and not `required`): 1 to 200 characters once trimmed. An empty
    one is not "no token": it would name no lease."""
    token = None if text is None else text.strip()
    if token is None and not required:
        return None
    if not token or len(token) > MAX_LEASE_TOKEN_CHARS:
        raise named.refused(f"must be the token the lease was acquired with (1 to {MAX_LEASE_TOKEN_CHARS} characters).")
    return token


LEASE_TOKEN_HEADER: Final = Named.header("Lease-Token")


def lease_token_of(header: str | None, required: bool = False) -> str | None:
    """The token a `Lease-Token` header carries (None when absent and not `required`), else 400 naming it."""
    return lease_token(header, LEASE_TOKEN_HEADER, required)


class Idempotent(Struct, frozen=True):
    """A request's idempotency key as sent (judged by `claim`, after the request's own fields, as the contract
    ranks them), the body it keys (its canonical form is part of the fingerprint), and how the key is named."""

    key: str
    body: Any
    plain: bool = False
    """The body's canonical form may take the fast path (`baton_checkpoints.domain.canonical.Document.plain`)."""
    named: Named = Named("/idempotency_key", "/idempotency_key")


def idempotency_key(text: str | None, named: Named) -> str | None:
    """`text` when it is an idempotency key (None when absent)."""
    if text is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(text):
        raise named.refused(f"must be 1 to {limits.IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters.")
    return text


def claim(agent_id: str, idempotent: Idempotent | None, method: str, path: str) -> IdempotencyClaim | None:
    """The claim on an idempotency key (None without one): keys belong to the caller's agent, and the fingerprint
    is the operation's method and path (as its route is reached) and the canonical body, so a route and its tool
    replay each other's answers."""
    if idempotent is None:
        return None
    key = idempotency_key(idempotent.key, idempotent.named)
    assert key is not None  # a key was sent
    return IdempotencyClaim(
        key=key,
        agent_id=agent_id,
        fingerprint=request_fingerprint(method, path, idempotent.body, idempotent.plain),
    )
