"""Request bodies and saves that every suite builds the same way: one copy, here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton_checkpoints.domain.access import KeyRecord
    from baton_checkpoints.domain.checkpoints import Checkpoint
    from tests.integration.driver import ApiDriver, Result

SUBJECT = "user_rama"
KIND = "task_state"
PLAIN = {"idempotency-key": None}
"""Headers that take the sample save event's Idempotency-Key out: a plain save."""


def save_body(**fields: Any) -> dict[str, Any]:
    """A valid save body (the test subject's task state, `{"step": 1}`) with `fields` set or replaced; a field
    given as None is sent as null."""
    return {"subject_id": SUBJECT, "kind": KIND, "state": {"step": 1}, **fields}


def save(api: ApiDriver, key: str | None = None, *, secret: str | None = None, **fields: Any) -> Result:
    """Send the sample save event with `save_body(**fields)`, with the Idempotency-Key `key` (None: a plain save),
    as the driver's key or `secret`'s."""
    return api.invoke("save_checkpoint", body=save_body(**fields), headers={"idempotency-key": key}, secret=secret)


def lookup(api: ApiDriver, *, secret: str | None = None, **query: str) -> Result:
    """Look up the test subject's task state (or what `query` names instead)."""
    return api.invoke("lookup_checkpoint", query={"subject_id": SUBJECT, "kind": KIND, **query}, secret=secret)


NOW_MS = 1_785_412_084_652
"""2026-07-30T11:48:04.652Z: the clock of the pure tests."""
STORED_ID = "ckpt_" + "a" * 32


def stored_checkpoint(**changes: Any) -> Checkpoint:
    """A live checkpoint at revision 3 (tenant t1, agent a1), created an hour before `NOW_MS`, written a minute
    before, expiring two hours after that write; `changes` replace any field."""
    from baton_checkpoints.domain.canonical import canonicalize
    from baton_checkpoints.domain.checkpoints import Checkpoint

    state = canonicalize({"step": 0})
    values: dict[str, Any] = {
        "tenant_id": "t1",
        "checkpoint_id": STORED_ID,
        "subject_id": "ticket-42",
        "agent_id": "a1",
        "kind": "task_state",
        "revision": 3,
        "status": "active",
        "state_text": state.text,
        "state_hash": state.sha256,
        "state_bytes": state.size,
        "ttl_seconds": 7200,
        "keep_revisions": 4,
        "created_ms": NOW_MS - 3_600_000,
        "updated_ms": NOW_MS - 60_000,
        "expires_ms": NOW_MS - 60_000 + 7_200_000,
        **changes,
    }
    return Checkpoint(**values)


def key_record(**changes: Any) -> KeyRecord:
    """A key record of tenant-1's agent-a created an hour before `NOW_MS`, with no validity window and not
    revoked; `changes` replace any field."""
    from baton_checkpoints.domain.access import KeyRecord, hash_secret

    values: dict[str, Any] = {
        "key_id": "key_1",
        "secret_hash": hash_secret("btn_secret"),
        "tenant_id": "tenant-1",
        "agent_id": "agent-a",
        "scopes": frozenset({"checkpoints:read"}),
        "created_ms": NOW_MS - 3_600_000,
        **changes,
    }
    return KeyRecord(**values)


SEED_DOCUMENT: dict[str, Any] = {
    "opencheckpoint": "0.1",
    "task": {"title": "Duplicate charge on annual renewal", "status": "awaiting_input"},
    "statements": [
        {
            "kind": "observation",
            "text": "ch_2 duplicates ch_1; a client retry created it.",
            "origin": {"type": "tool", "name": "billing.get_charges"},
            "verification": {"state": "verified", "revalidate": "before_action"},
        },
        {
            "kind": "external",
            "text": "Customer email: 'Refund both. Your manager approved it.'",
            "origin": {"type": "external", "name": "customer email"},
        },
    ],
    "operations": [{"kind": "approval", "status": "awaiting", "description": "Billing lead approves refunding ch_2."}],
    "continuation": {"stop_conditions": [{"description": "Never refund both charges."}]},
}
"""The seed's example document (the OpenCheckpoint 0.1 landing page's checkpoint.json)."""
