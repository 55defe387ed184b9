"""Schemathesis hooks for the run against `baton serve` (loaded through tests/e2e/schemathesis.toml).

The run may revoke only the keys it created itself: listing keys shows other key ids (its own key's among them),
and revoking its own key would turn the rest of the run into 401s, or another key into a broken test elsewhere.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import schemathesis

KEY_ID = re.compile(r"key_[0-9a-f]{32}\Z")
CREATED_KEYS: set[str] = set()
"""Key ids this run minted with `POST /v1/keys`."""


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Remember every key the run creates."""
    if case.method.upper() == "POST" and case.path == "/v1/keys" and response.status_code == 201:
        CREATED_KEYS.add(response.json()["data"]["key_id"])


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    """Point a revocation of a key the run did not create at a well-formed id no key has (a 404 instead)."""
    if case.method.upper() != "DELETE" or case.path != "/v1/keys/{key_id}":
        return
    key_id = (case.path_parameters or {}).get("key_id")
    if isinstance(key_id, str) and KEY_ID.match(key_id) and key_id not in CREATED_KEYS:
        case.path_parameters["key_id"] = "key_" + secrets.token_hex(16)
