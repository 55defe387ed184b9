"""Authentication: a bearer secret in, a principal out, with key records cached in the container."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cachetools import LRUCache

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import KeyRecord, Principal, hash_secret
from baton_checkpoints.domain.errors import Unauthenticated

if TYPE_CHECKING:
    from baton_checkpoints.domain.oauth import Token

ACCESS_TOKEN_PREFIX = "bta_"
"""`baton_checkpoints.domain.oauth.ACCESS_PREFIX`, stated here so that a key's request never imports OAuth's
module (a test holds them equal)."""

_MISSING = "Send an API key as 'Authorization: Bearer <key>'."
_UNKNOWN = "The API key is not valid; check it, or ask for a new one."
_UNKNOWN_TOKEN = "The access token is not valid: it expired, was revoked or replaced; refresh it, or authorize again."
_KEY_GONE = "The key that approved this access token no longer works (revoked or expired): authorize again."


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


class TokenFinder(Protocol):
    """Where OAuth access tokens are found (the store's `OAuthStore`)."""

    def token(self, secret: str, kind: str) -> Token | None:
        """The token of that secret and kind, or None."""
        ...


class Authenticator:
    """Resolves secrets to principals: API keys, and OAuth access tokens (which stand for the key that approved
    their grant). A record read once is trusted for at most `KEY_CACHE_SECONDS`."""

    def __init__(
        self,
        keys: KeyFinder,
        cache_seconds: int = limits.KEY_CACHE_SECONDS,
        size: int = 1024,
        tokens: Callable[[], TokenFinder] | None = None,
    ) -> None:
        """`tokens` makes where access tokens are found, on the first token presented (never for a key)."""
        self._keys = keys
        self._make_tokens = tokens
        self._tokens: TokenFinder | None = None
        # Only known keys and tokens are cached, so one created a moment ago works at once. Each entry remembers
        # when it was read, and its age is measured on the same clock as every other time rule (`now_ms`).
        self._cache_ms = cache_seconds * 1000
        self._cache: LRUCache[str, tuple[KeyRecord | Token, int]] = LRUCache(maxsize=size)

    def authenticate(self, authorization: str | None, now_ms: int, fresh: bool = False) -> Principal:
        """The principal behind an `Authorization` header value; `fresh` reads the key record even when cached
        (key management must never act on a revocation this container has not seen yet). An access token's
        principal carries its resource (`Principal.resource`): where it may be used is the caller's to check."""
        secret = bearer_secret(authorization)
        if secret.startswith(ACCESS_TOKEN_PREFIX):
            return self._token_principal(secret, now_ms)
        return self.key(hash_secret(secret), now_ms, fresh).principal(now_ms)

    def key(self, digest: str, now_ms: int, fresh: bool = False) -> KeyRecord:
        """The key record of a secret's hash, from the cache when fresh enough (else `Unauthenticated`)."""
        cached = None if fresh else self._cache.get(digest)
        if cached is not None and 0 <= now_ms - cached[1] < self._cache_ms and isinstance(cached[0], KeyRecord):
            return cached[0]
        found = self._keys.find(digest)
        if found is None:
            self._cache.pop(digest, None)
            raise Unauthenticated(_UNKNOWN)
        self._cache[digest] = (found, now_ms)
        return found

    def _token_principal(self, secret: str, now_ms: int) -> Principal:
        digest = hash_secret(secret)
        cached = self._cache.get(digest)
        if cached is not None and 0 <= now_ms - cached[1] < self._cache_ms and not isinstance(cached[0], KeyRecord):
            token = cached[0]
        else:
            if self._tokens is None and self._make_tokens is not None:
                self._tokens = self._make_tokens()
            found = self._tokens.token(secret, "access") if self._tokens is not None else None
            if found is None:
                self._cache.pop(digest, None)
                raise Unauthenticated(_UNKNOWN_TOKEN)
            token = found
            self._cache[digest] = (token, now_ms)
        try:
            key = self.key(token.approval.key_hash, now_ms).principal(now_ms)
        except Unauthenticated:
            raise Unauthenticated(_KEY_GONE) from None
        return token.principal(key, now_ms)

    def forget(self, key_id: str) -> None:
        """Drop a revoked key (and the tokens it approved) from this container's cache at once (other containers
        take up to the cache TTL)."""
        for digest, (record, _) in list(self._cache.items()):
            if (record.key_id if isinstance(record, KeyRecord) else record.approval.key_id) == key_id:
                self._cache.pop(digest, None)

    def forget_grant(self, grant_id: str) -> None:
        """Drop a revoked grant's tokens from this container's cache at once."""
        for digest, (record, _) in list(self._cache.items()):
            if not isinstance(record, KeyRecord) and record.grant_id == grant_id:
                self._cache.pop(digest, None)

    def forget_token(self, secret: str) -> None:
        """Drop a revoked token from this container's cache."""
        self._cache.pop(hash_secret(secret), None)
