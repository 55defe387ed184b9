"""The origin a client called (`<scheme>://<host>`): OAuth's issuer, and the base of `/mcp`'s resource identifier.

Behind API Gateway the host is the request context's `domainName` (the API's own domain, or its custom domain),
which the client cannot choose, and the scheme is https; `baton serve` passes the Host header there and sets the
scheme to http (`Settings.origin_scheme`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from baton_checkpoints.domain.errors import ValidationFailed

_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.?)+(?::[0-9]{1,5})?\Z|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?\Z"
)
_MAX_HOST_CHARS = 260


def request_origin(raw_event: Mapping[str, Any], scheme: str) -> str:
    """`<scheme>://<host>` of the request; a host that is not a DNS name or an IP address (with a port) is a 400."""
    host = str((raw_event.get("requestContext") or {}).get("domainName") or "")
    if not host or len(host) > _MAX_HOST_CHARS or not _HOST.match(host):
        raise ValidationFailed.single(
            "/Host", "The Host header must be a DNS name or an IP address, with a port or not.", "header"
        )
    return f"{scheme}://{host.lower()}"
