"""The origin a client called (`<scheme>://<host>`): OAuth's issuer, and the base of `/mcp`'s resource identifier.

Behind API Gateway the host is the request context's `domainName` (the API's own domain, or its custom domain),
which the client cannot choose, and the scheme is https; `baton serve` passes the Host header there and sets the
scheme to http (`Settings.origin_scheme`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from baton_checkpoints.domain.errors import ValidationFailed

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]\Z")
_MAX_HOST_CHARS = 260


def valid_host(host: str) -> bool:
    """True for a DNS name or an IP address, with a port or not (checked label by label: no pattern that
    backtracks)."""
    if not host or len(host) > _MAX_HOST_CHARS:
        return False
    name, port = host, None
    if host.startswith("["):
        if "]" not in host:
            return False
        name, _, rest = host.partition("]")
        name += "]"
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
        if not _IPV6.match(name):
            return False
    elif ":" in host:
        name, _, port = host.rpartition(":")
    if port is not None and not _PORT.match(port):
        return False
    if name.startswith("["):
        return True
    labels = name.removesuffix(".").split(".")
    return all(_LABEL.match(label) for label in labels)


def request_origin(raw_event: Mapping[str, Any], scheme: str) -> str:
    """`<scheme>://<host>` of the request; a host that is not a DNS name or an IP address (with a port) is a 400."""
    host = str((raw_event.get("requestContext") or {}).get("domainName") or "")
    if not valid_host(host):
        raise ValidationFailed.single(
            "/Host", "The Host header must be a DNS name or an IP address, with a port or not.", "header"
        )
    return f"{scheme}://{host.lower()}"
