"""SigV4 for Baton's DynamoDB requests: botocore's own signer, without the work it repeats.

botocore signs each request with a fresh `SigV4Auth`. Inside a warm lookup, signing took about 0.1 ms, a sixth of
the lookup's CPU (`bench/harness/warm.py`), and most of that repeated work:
- it selects the headers to sign twice (once for the canonical request, once for the `Authorization` header), each
  time reading every header through `email.message`'s policy into a new `HTTPHeaders`;
- it hashes the payload from `request.body`, which prepares the whole request (its headers copied twice) to return
  the bytes the request already holds;
- it derives the signing key (four HMAC-SHA256s) for every request, though the key changes only with the secret,
  the day, the region and the service.

`BatonSigV4Auth` selects the headers once per request, into a plain mapping, hashes the body's bytes, and keeps the
last few signing keys: 0.1 ms became about 0.07 ms. Everything else, and every case it does not expect (a header
value that is not an ASCII string, a body that is not bytes), is botocore's own code. A property test holds the
headers it signs with equal to botocore's on generated requests (`tests/unit/test_signing.py`).

The signer is chosen the way botocore lets a client choose one: a `choose-signer` handler on Baton's DynamoDB client
names it, under `SIGNATURE_VERSION` in botocore's table of signers (`AUTH_TYPE_MAPS`, where it is added beside
botocore's own). S3's and EventBridge's clients, and S3's presigned URLs, keep botocore's signers.
"""

from __future__ import annotations

import threading
from hashlib import sha256
from typing import Any, Final

import botocore.auth
from botocore.auth import AUTH_TYPE_MAPS, SIGNED_HEADERS_BLACKLIST, SigV4Auth

SIGNATURE_VERSION: Final = "baton-v4"
"""The name Baton's signer is registered under in botocore's `AUTH_TYPE_MAPS`."""
_KEPT_KEYS: Final = 4
"""Signing keys kept (per secret, day, region and service): a container signs with one or two at a time."""
_host_from_url = botocore.auth._host_from_url  # type: ignore[attr-defined]  # (the stubs know only public names)
_keys: dict[tuple[bytes, str, str, str], bytes] = {}
_keys_lock = threading.Lock()


class _SignedHeaders(dict[str, list[str]]):
    """The headers to sign, by lowercase name, each with its values in order: what `SigV4Auth.canonical_headers`
    and `signed_headers` read of botocore's `HTTPHeaders` (its names, and `get_all`)."""

    def get_all(self, name: str) -> list[str]:
        return self[name]


class BatonSigV4Auth(SigV4Auth):
    """botocore's `SigV4Auth`, selecting a request's headers to sign once, hashing its body's bytes as they are, and
    reusing its signing keys."""

    def __init__(self, credentials: Any, service_name: str, region_name: str) -> None:
        super().__init__(credentials, service_name, region_name)
        self._selected: tuple[tuple[Any, ...], Any] | None = None

    def headers_to_sign(self, request: Any) -> Any:
        """botocore's selection (`SigV4Auth.headers_to_sign`), made once per request as long as its headers do not
        change, and read straight from the `HTTPHeaders`: botocore reads each value through `email.message`'s
        policy, which returns an ASCII string as it is (any other value is left to botocore)."""
        raw_items = getattr(request.headers, "raw_items", None)
        if raw_items is None:
            return super().headers_to_sign(request)
        raw = (request.url, *raw_items())  # (the host comes from the URL when no header names it)
        selected_before = self._selected
        if selected_before is not None and selected_before[0] == raw:
            return selected_before[1]
        if not all(type(value) is str and value.isascii() for _, value in raw[1:]):
            selected: Any = super().headers_to_sign(request)
        else:
            selected = _SignedHeaders()
            for name, value in raw[1:]:
                lname = name.lower()
                if lname not in SIGNED_HEADERS_BLACKLIST:
                    selected.setdefault(lname, []).append(value)
            if "host" not in selected:
                selected["host"] = [_host_from_url(request.url)]
        self._selected = (raw, selected)
        return selected

    def payload(self, request: Any) -> str:
        """botocore's payload hash (`SigV4Auth.payload`) of a request whose body is bytes, hashed from the bytes:
        botocore reads `request.body`, which prepares the whole request (its headers copied twice) only to return
        them."""
        botocore_auth: Any = self  # (the stubs know only SigV4Auth's public names)
        data = request.data
        if (
            type(data) is bytes
            and not botocore_auth._is_streaming_checksum_payload(request)
            and botocore_auth._should_sha256_sign_payload(request)
        ):
            return sha256(data).hexdigest()  # (of b"": botocore's EMPTY_SHA256_HASH)
        hashed: str = super().payload(request)
        return hashed

    def signature(self, string_to_sign: str, request: Any) -> str:
        """botocore's signature (`SigV4Auth.signature`), with the signing key derived once per secret, day, region
        and service: the last `_KEPT_KEYS` keys are kept, in this process's memory only, each found by a digest of
        its secret (a rotated secret is not kept)."""
        botocore_auth: Any = self
        sign = botocore_auth._sign
        region, service = botocore_auth._region_name, botocore_auth._service_name
        secret = str(self.credentials.secret_key)
        day = request.context["timestamp"][0:8]
        kept = (sha256(secret.encode()).digest(), day, region, service)
        key = _keys.get(kept)
        if key is None:
            key = sign(sign(sign(sign(f"AWS4{secret}".encode(), day), region), service), "aws4_request")
            with _keys_lock:
                while len(_keys) >= _KEPT_KEYS:
                    del _keys[next(iter(_keys))]  # the oldest
                _keys[kept] = key
        signed: str = sign(key, string_to_sign, hex=True)
        return signed


def choose_signer(signature_version: str, context: dict[str, Any], **_: Any) -> str | None:
    """A `choose-signer` handler for Baton's DynamoDB client (`sign_with_baton`): Baton's signer where botocore
    would sign with plain SigV4, its payload signed; botocore's own choice otherwise (None: the next handler
    decides). It runs before botocore's own handlers: S3's signing names (`s3v4`), an auth scheme preference in the
    client's configuration, or a CRT signer would each choose otherwise, and none applies to this client (a test
    holds the client's choice)."""
    if signature_version != "v4" or context.get("unsigned_payload") or context.get("auth_type") not in (None, "v4"):
        return None
    return SIGNATURE_VERSION


def sign_with_baton(client: Any) -> Any:
    """`client` signing its plain SigV4 requests with `BatonSigV4Auth`."""
    AUTH_TYPE_MAPS.setdefault(SIGNATURE_VERSION, BatonSigV4Auth)
    client.meta.events.register_first(
        f"choose-signer.{client.meta.service_model.service_id.hyphenize()}", choose_signer
    )
    return client
