"""Client ID Metadata Documents: a client whose id is an https URL is described by the JSON document at that URL,
which Baton fetches when a person is asked to approve it. The fetch is an outbound request on a stranger's say-so,
so it is bounded on every side:

- HTTPS only, the certificate checked against the host's name; no redirect followed;
- the host's addresses are resolved first and each must be public (no private, link-local, shared, reserved or
  multicast address; loopback only under `baton serve`); the connection goes to the address checked, never to a
  second resolution of the name (a DNS answer that changes between check and use cannot steer it);
- 3 s to connect and 3 s to read, at most 5 KB of body, JSON only;
- a document read is kept 5 minutes in the container (a consent page and its form read it once).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
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

TIMEOUT_SECONDS: Final = 3.0
CACHE_SECONDS: Final = 300

Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(entry[4][0]) for entry in found))


class ClientDocuments:
    """Fetches, checks and keeps clients' metadata documents."""

    def __init__(
        self,
        loopback: bool = False,
        resolver: Resolver = resolve,
        ca_certs: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loopback = loopback
        self._resolve = resolver
        self._ca_certs = ca_certs
        self._cache: TTLCache[str, Client] = TTLCache(maxsize=256, ttl=CACHE_SECONDS, timer=clock)

    def client(self, client_id: str) -> Client:
        """The client the document at `client_id` describes, or `OAuthError` (invalid_client) saying why not."""
        check_client_document_url(client_id)
        found = self._cache.get(client_id)
        if found is None:
            found = client_from_document(client_id, self._fetch(client_id))
            self._cache[client_id] = found
        return found

    def _fetch(self, url: str) -> Any:
        import urllib3

        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or 443
        try:
            addresses = self._resolve(host, port)
        except (OSError, UnicodeError):
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
            timeout=urllib3.Timeout(connect=TIMEOUT_SECONDS, read=TIMEOUT_SECONDS),
            retries=False,
            maxsize=1,
        )
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            response = pool.urlopen(
                "GET",
                path,
                headers={"Host": parts.netloc.rsplit("@", 1)[-1], "Accept": "application/json"},
                redirect=False,
                preload_content=False,
            )
            try:
                body = response.read(MAX_CLIENT_DOCUMENT_BYTES + 1)
                status, media = response.status, response.headers.get("content-type", "")
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as failed:
            raise OAuthError(
                "invalid_client", f"The client's metadata document could not be read: {type(failed).__name__}."
            ) from None
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
        except ValueError:
            raise OAuthError("invalid_client", "The client's metadata document is not JSON.") from None
