"""Identifiers Baton mints."""

from __future__ import annotations

import re
import secrets
from typing import Final

CHECKPOINT_ID_PATTERN: Final = re.compile(r"ckpt_[0-9a-f]{32}\Z")
KEY_ID_PATTERN: Final = re.compile(r"key_[0-9a-f]{32}\Z")
BLOB_ID_PATTERN: Final = re.compile(r"blob_[0-9a-f]{32}\Z")


def new_checkpoint_id() -> str:
    """`ckpt_` and 32 random lowercase hex digits."""
    return "ckpt_" + secrets.token_hex(16)


def new_key_id(now_ms: int) -> str:
    """`key_`, the creation time (12 hex digits of milliseconds, so ids sort by age) and 20 random hex digits."""
    return f"key_{now_ms:012x}{secrets.token_hex(10)}"


def new_blob_id() -> str:
    """`blob_` and 32 random lowercase hex digits."""
    return "blob_" + secrets.token_hex(16)
