"""The `Idempotency-Key` header, read the same way by every route that honours it."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Header

from baton_checkpoints.api.operations.inputs import IDEMPOTENCY_KEY_PATTERN, Idempotent, Named, claim
from baton_checkpoints.api.resolver import Call
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.checkpoints import IdempotencyClaim

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

HEADER = Named.header("Idempotency-Key")


def idempotent(call: Call, value: str | None) -> Idempotent | None:
    """The request's `Idempotency-Key` with the body it keys (None without one); a malformed key is a 400 naming
    the header, when the operation claims it (after the request's own fields are judged)."""
    return None if value is None else Idempotent(value, call.body, call.plain_body, HEADER)


def idempotency_claim(call: Call, method: str, path: str, value: str | None) -> IdempotencyClaim | None:
    """The request's claim on its `Idempotency-Key` (None without one), for a route that is no operation's: keys
    belong to the caller's agent, and the fingerprint is the method, the route's path and the canonical body."""
    return claim(call.caller.agent_id, idempotent(call, value), method, path)
