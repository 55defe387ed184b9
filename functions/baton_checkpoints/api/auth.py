"""Authentication: a bearer secret in, a principal out, with key records cached in the container."""

from __future__ import annotations

from typing import Protocol

from cachetools import LRUCache

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import KeyRecord, Principal, hash_secret
from baton_checkpoints.domain.errors import Unauthenticated

_MISSING = "Send an API key as 'Authorization: Bearer <key>'."
_UNKNOWN = "The API key is not valid; check it, or ask for a new one."


def bearer_secret(authorization: str | None) -> str:
    """The secret of an `Authorization: Bearer …` header, or `Unauthenticated`."""
    if not authorization:
        raise Unauthenticated(_MISSING)
    scheme, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret or " " in secret:
        raise Unauthenticated(_MISSING)
    return secret


class KeyFinder(Protocol):
    """Where key records are found by the hash of their secret (the store's `KeyStore`)."""

    def find(self, secret_hash: str) -> KeyRecord | None:
        """The key record of that hash, or None."""
        ...


class Authenticator:
    """Resolves secrets to principals; a record read once is trusted for at most `KEY_CACHE_SECONDS`."""

    def __init__(self, keys: KeyFinder, cache_seconds: int = limits.KEY_CACHE_SECONDS, size: int = 1024) -> None:
        self._keys = keys
        # Only known keys are cached, so a key created a moment ago works at once. Each entry remembers when it was
        # read, and its age is measured on the same clock as every other time rule (the request's `now_ms`).
        self._cache_ms = cache_seconds * 1000
        self._cache: LRUCache[str, tuple[KeyRecord, int]] = LRUCache(maxsize=size)

    def authenticate(self, authorization: str | None, now_ms: int, fresh: bool = False) -> Principal:
        """The principal behind an `Authorization` header value; `fresh` reads the key record even when cached
        (key management must never act on a revocation this container has not seen yet)."""
        secret = bearer_secret(authorization)
        digest = hash_secret(secret)
        cached = None if fresh else self._cache.get(digest)
        if cached is not None and 0 <= now_ms - cached[1] < self._cache_ms:
            record = cached[0]
        else:
            found = self._keys.find(digest)
            if found is None:
                self._cache.pop(digest, None)
                raise Unauthenticated(_UNKNOWN)
            record = found
            self._cache[digest] = (record, now_ms)
        return record.principal(now_ms)

    def forget(self, key_id: str) -> None:
        """Drop a revoked key from this container's cache at once (other containers take up to the cache TTL)."""
        for digest, (record, _) in list(self._cache.items()):
            if record.key_id == key_id:
                self._cache.pop(digest, None)
