"""The `Idempotency-Key` header, read the same way by every route that honours it."""

from __future__ import annotations

import re
from typing import Final

from baton.api.openapi import IDEMPOTENCY_KEY_PATTERN
from baton.api.resolver import Call
from baton.domain import limits
from baton.domain.checkpoints import IdempotencyClaim, request_fingerprint
from baton.domain.errors import ValidationFailed

_KEY: Final = re.compile(IDEMPOTENCY_KEY_PATTERN.removeprefix("^").removesuffix("$"))


def idempotency_claim(call: Call, method: str, path: str, value: str | None) -> IdempotencyClaim | None:
    """The request's claim on its `Idempotency-Key` (None without one): keys belong to the caller's agent, and the
    fingerprint is the method, the route's path and the canonical body. A malformed key is a 400 naming the header."""
    if value is None:
        return None
    if not _KEY.fullmatch(value):
        raise ValidationFailed.single(
            "/Idempotency-Key",
            f"The Idempotency-Key header must be 1 to {limits.IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters.",
            "header",
        )
    return IdempotencyClaim(
        key=value,
        agent_id=call.caller.agent_id,
        fingerprint=request_fingerprint(method, path, call.body, call.plain_body),
    )
