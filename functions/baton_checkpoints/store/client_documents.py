"""Client ID Metadata Documents: a client whose id is an https URL is described by the JSON document at that URL,
which Baton fetches when a person is asked to approve it. The fetch is an outbound request on a stranger's say-so,
so it is bounded on every side:

- HTTPS only, the certificate checked against the host's name; no redirect followed; port 443 only when deployed
  (`baton serve` allows any port on loopback);
- the host's addresses are resolved first and each must be public (no private, link-local, shared, reserved or
  multicast address, nor an IPv6 form carrying an IPv4 one; loopback only under `baton serve`); the connection goes
  to the address checked, never to a second resolution of the name (a DNS answer that changes between check and use
  cannot steer it);
- 2 s to resolve, 3 s to connect, and 5 s for the whole fetch however slowly the server sends; at most 5 KB of body,
  JSON only; a failed read says only that it failed (no probing of ports or hosts through it);
- a document read is kept 5 minutes in the container (a consent page and its form read it once), a refusal 30 s.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Late
from typing import Any, Final
from urllib.parse import urlsplit

from cachetools import TTLCache

from baton_checkpoints.domain.oauth import (
    MAX_CLIENT_DOCUMENT_BYTES,
    Client,
    OAuthError,
    allowed_address,
    check_client_document_url,
    client_from_document,
)

RESOLVE_SECONDS: Final = 2.0
CONNECT_SECONDS: Final = 3.0
FETCH_SECONDS: Final = 5.0
"""The whole fetch, connection and body together: a server sending a byte at a time is cut off here."""
CACHE_SECONDS: Final = 300
REFUSAL_CACHE_SECONDS: Final = 30
_UNREADABLE: Final = "The client's metadata document could not be read over HTTPS within Baton's bounds (5 s)."

Resolver = Callable[[str, int], list[str]]


def _within(seconds: float, work: Callable[[], Any], on_late: Callable[[], None] | None = None) -> Any:
    """`work()`'s result, or `TimeoutError` once `seconds` have passed (the work's thread is then abandoned, after
    `on_late` has had the chance to cut it short)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(work).result(seconds)
    except Late:
        if on_late is not None:
            on_late()
        raise TimeoutError from None
    finally:
        pool.shutdown(wait=False)


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA), within `RESOLVE_SECONDS` (the system's resolver has no
    timeout of its own)."""
    found = _within(RESOLVE_SECONDS, lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    return list(dict.fromkeys(str(entry[4][0]) for entry in found))


class ClientDocuments:
    """Fetches, checks and keeps clients' metadata documents."""

    def __init__(
        self,
        loopback: bool = False,
        resolver: Resolver = resolve,
        ca_certs: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        fetch_seconds: float = FETCH_SECONDS,
    ) -> None:
        self._loopback = loopback
        self._resolve = resolver
        self._ca_certs = ca_certs
        self._fetch_seconds = fetch_seconds
        self._cache: TTLCache[str, Client] = TTLCache(maxsize=256, ttl=CACHE_SECONDS, timer=clock)
        self._refused: TTLCache[str, OAuthError] = TTLCache(maxsize=256, ttl=REFUSAL_CACHE_SECONDS, timer=clock)

    def client(self, client_id: str) -> Client:
        """The client the document at `client_id` describes, or `OAuthError` (invalid_client) saying why not."""
        check_client_document_url(client_id)
        found = self._cache.get(client_id)
        if found is not None:
            return found
        refused = self._refused.get(client_id)
        if refused is not None:
            raise refused
        try:
            found = client_from_document(client_id, self._fetch(client_id))
        except OAuthError as refusal:
            self._refused[client_id] = refusal
            raise
        self._cache[client_id] = found
        return found

    def _fetch(self, url: str) -> Any:
        import urllib3

        parts = urlsplit(url)  # well formed: check_client_document_url split it
        host = parts.hostname or ""
        port = parts.port or 443
        if port != 443 and not self._loopback:
            raise OAuthError("invalid_client", "The client's metadata document must be served on port 443.")
        try:
            addresses = self._resolve(host, port)
        except (OSError, UnicodeError, TimeoutError):
            raise OAuthError("invalid_client", f"The client's host {host[:100]} does not resolve.") from None
        if not addresses or not all(allowed_address(a, self._loopback) for a in addresses):
            raise OAuthError(
                "invalid_client",
                f"The client's host {host[:100]} resolves to an address Baton does not fetch from (private, "
                "loopback, link-local or reserved).",
            )
        pool = urllib3.HTTPSConnectionPool(
            addresses[0],
            port,
            server_hostname=host,
            assert_hostname=host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=self._ca_certs,
            timeout=urllib3.Timeout(connect=CONNECT_SECONDS, read=self._fetch_seconds),
            retries=False,
            maxsize=1,
        )
        path = parts.path + (f"?{parts.query}" if parts.query else "")

        def download() -> tuple[int, str, bytes]:
            response = pool.urlopen(
                "GET",
                path,
                headers={"Host": parts.netloc, "Accept": "application/json"},
                redirect=False,
                preload_content=False,
            )
            try:
                body = response.read(MAX_CLIENT_DOCUMENT_BYTES + 1)
                return response.status, str(response.headers.get("content-type", "")), body
            finally:
                response.release_conn()

        try:
            status, media, body = _within(self._fetch_seconds, download, on_late=pool.close)
        except (urllib3.exceptions.HTTPError, OSError, TimeoutError):
            raise OAuthError("invalid_client", _UNREADABLE) from None
        finally:
            pool.close()
        if status != 200:
            raise OAuthError("invalid_client", f"The client's metadata document answered HTTP {status}, not 200.")
        if len(body) > MAX_CLIENT_DOCUMENT_BYTES:
            raise OAuthError(
                "invalid_client", f"The client's metadata document is over {MAX_CLIENT_DOCUMENT_BYTES} bytes."
            )
        if media.split(";", 1)[0].strip().lower() != "application/json":
            raise OAuthError("invalid_client", "The client's metadata document must be served as application/json.")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise OAuthError("invalid_client", "The client's metadata document is not JSON.") from None
