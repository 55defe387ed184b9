"""Request bodies and saves that every suite builds the same way: one copy, here."""

from __future__ import annotations

import base64
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


def thread_put_body(checkpoint_id: str, value: bytes) -> dict[str, Any]:
    """The body of a LangGraph thread put: one checkpoint (LangGraph's v4) with one new channel value."""
    return {
        "checkpoint": {
            "v": 4,
            "id": checkpoint_id,
            "ts": "2027-03-01T09:00:00+00:00",
            "channel_versions": {"messages": 1},
            "versions_seen": {},
            "updated_channels": ["messages"],
        },
        "metadata": {"source": "loop", "step": 0},
        "checkpoint_ns": "",
        "values": {"messages": {"type": "msgpack", "data": base64.b64encode(value).decode()}},
    }


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


# -- OAuth (the authorization code flow of /mcp) -----------------------------------------------------------------

OAUTH_REDIRECT = "http://127.0.0.1:9/callback"
"""A loopback redirect URI (RFC 8252): nothing listens there; a test reads the 302's Location instead."""
OAUTH_SCOPE = "mcp:call checkpoints:read checkpoints:write"
"""What a client asks for: MCP and what its save and read tools need."""


def pkce() -> tuple[str, str]:
    """A PKCE pair (RFC 7636, S256): (code_verifier, code_challenge)."""
    import base64
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def client_registration(**fields: Any) -> dict[str, Any]:
    """A registration request of a public client (RFC 7591) redirecting to `OAUTH_REDIRECT`; `fields` set or replace
    members."""
    return {
        "redirect_uris": [OAUTH_REDIRECT],
        "client_name": "Baton's test client",
        "token_endpoint_auth_method": "none",
        **fields,
    }


def authorization_form(client_id: str, challenge: str, resource: str, **fields: str) -> dict[str, str]:
    """The parameters of an authorization request (the consent page's query, and its form's hidden fields) for
    `resource` (`<origin>/mcp`); `fields` set or replace any (`key` and `decision` make it the form's post)."""
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": OAUTH_REDIRECT,
        "scope": OAUTH_SCOPE,
        "state": "st-" + challenge[:16],
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
        **fields,
    }


def code_exchange_form(code: str, client_id: str, verifier: str, **fields: str) -> dict[str, str]:
    """A token request exchanging an authorization code (with its PKCE verifier)."""
    return {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": OAUTH_REDIRECT,
        "code_verifier": verifier,
        **fields,
    }


def refresh_form(refresh_token: str, client_id: str, **fields: str) -> dict[str, str]:
    """A token request refreshing a grant (its refresh token rotates)."""
    return {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **fields}
