"""The `Idempotency-Key` header, read the same way by every route that honours it."""

from __future__ import annotations

import re
from typing import Annotated, Final

from aws_lambda_powertools.event_handler.openapi.params import Header

from baton_checkpoints.api.openapi import IDEMPOTENCY_KEY_PATTERN
from baton_checkpoints.api.resolver import Call
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import IdempotencyClaim, request_fingerprint
from baton_checkpoints.domain.errors import ValidationFailed

_KEY: Final = re.compile(IDEMPOTENCY_KEY_PATTERN.removeprefix("^").removesuffix("$"))

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description=(
            f"1 to {limits.IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters (anything else answers 400), "
            "remembered 24 hours for the key's agent. The same key with the same request again answers the first "
            "answer (its status and data, and its ETag where the route sends one, with Idempotent-Replayed: true); "
            "with another request, 422 IDEMPOTENCY_KEY_REUSED."
        ),
        json_schema_extra={"pattern": IDEMPOTENCY_KEY_PATTERN},
    ),
]


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
