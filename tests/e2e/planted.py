"""What the end-to-end tests planted for the log audit (tests/e2e/log_audit.py) to look for: the API key
secrets they used and distinctive strings they put in states. Whatever registers here must never be logged (state
markers never at INFO)."""

from __future__ import annotations

SECRETS: set[str] = set()
STATE_MARKERS: set[str] = set()


def plant_secret(secret: str) -> str:
    """Remember a secret the session used; returns it, so `plant_secret(response["secret"])` reads naturally."""
    SECRETS.add(secret)
    return secret


def plant_state_marker(marker: str) -> str:
    """Remember a string put into a state; returns it."""
    STATE_MARKERS.add(marker)
    return marker
