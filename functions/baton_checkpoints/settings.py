"""Settings from the environment, validated once per container (by the wiring, `api/services.py`, when it builds
the services on the first request that needs AWS).

Anything that differs between deployments (the table's name) has no default: a function deployed without it
fails at its first request with a message naming the variable, rather than writing somewhere unexpected.
"""

from __future__ import annotations

import os
import re
from typing import Final

from msgspec import Struct
from msgspec.structs import fields

_ENVIRONMENT: Final = {
    "table_name": "BATON_TABLE_NAME",
    "bucket_name": "BATON_BUCKET_NAME",
    "aws_endpoint_url": "BATON_AWS_ENDPOINT_URL",
    "service_name": "POWERTOOLS_SERVICE_NAME",
    "dynamodb_endpoint_url": "BATON_DYNAMODB_ENDPOINT_URL",
    "origin_scheme": "BATON_ORIGIN_SCHEME",
    "tenant_requests_per_minute": "BATON_TENANT_REQUESTS_PER_MINUTE",
    "tenant_burst": "BATON_TENANT_BURST",
    "tenant_storage_bytes": "BATON_TENANT_STORAGE_BYTES",
    "tenant_checkpoints": "BATON_TENANT_CHECKPOINTS",
    "event_bus_name": "BATON_EVENT_BUS_NAME",
    "events_echo": "BATON_EVENTS_ECHO",
    "usage_flush_requests": "BATON_USAGE_FLUSH_REQUESTS",
    "usage_flush_seconds": "BATON_USAGE_FLUSH_SECONDS",
}
"""The environment variable behind each setting (infrastructure sets them by these names)."""
_LENGTHS: Final = {"table_name": (3, 255), "bucket_name": (3, 63)}
EVENT_BUS_NAME: Final = re.compile(r"[A-Za-z0-9/._:-]{1,256}\Z")
"""An EventBridge bus's name or ARN (`BATON_EVENT_BUS_NAME`; the CDK app's `-c event_bus_name` checks the same)."""
EVENTS_ECHO: Final = re.compile(r"(print|https?://[^\s/]+[^\s]*)\Z")
"""`baton serve --events`: `print`, or an http(s) URL with a host."""
_PATTERNS: Final = {
    "table_name": (re.compile(r"[A-Za-z0-9_.-]+\Z"), "only letters, digits, '_', '-' and '.'"),
    "origin_scheme": (re.compile(r"https?\Z"), "https or http"),
    "event_bus_name": (EVENT_BUS_NAME, "a bus's name or ARN, 1 to 256 characters"),
    "events_echo": (EVENTS_ECHO, "print, or an http(s) URL"),
}
"""DynamoDB's rule for a table's name (with `_LENGTHS`): a name it refuses fails here, naming the variable, not at
the first request as a 500 from DynamoDB (moto accepts any name)."""
NUMBER_RANGES: Final = {
    "tenant_requests_per_minute": (1, 6_000_000),
    "tenant_burst": (1, 1_000_000),
    "tenant_storage_bytes": (0, 2**53 - 1),
    "tenant_checkpoints": (0, 2**53 - 1),
    "usage_flush_requests": (1, 10_000),
    "usage_flush_seconds": (0, 3_600),
}
"""The stage's default limits of a tenant (`GET /v1/tenants/{tenant_id}/limits`): whole numbers in these ranges."""


class Settings(Struct, frozen=True):
    """The api function's environment. A plain struct: a few strings and numbers do not need a validation
    library, and a pydantic model cost about 14 ms of every cold start to build."""

    table_name: str
    bucket_name: str | None = None
    """The blob bucket (spilled states, blobs); unset where a deployment has none (DynamoDB Local, say): then
    states must fit in an item and blobs are refused."""
    aws_endpoint_url: str | None = None
    """An AWS-compatible endpoint (moto, DynamoDB Local); unset on AWS itself."""
    service_name: str = "baton"
    dynamodb_endpoint_url: str | None = None
    """DynamoDB's endpoint where it is not `aws_endpoint_url`'s (DynamoDB Local beside moto's S3, as `baton serve
    --dynamodb-endpoint` and the tests run it); unset on AWS itself, and wherever one endpoint serves both."""
    origin_scheme: str = "https"
    """The scheme of the origin clients call (`<scheme>://<host>`, OAuth's issuer and resource): https behind API
    Gateway; `baton serve` sets http."""
    tenant_requests_per_minute: int = 60_000
    """The stage's default rate limit of a tenant (the CDK app's context sets it per stage)."""
    tenant_burst: int = 10_000
    """The stage's default burst of a tenant: requests it may make at once, on top of the rate."""
    tenant_storage_bytes: int = 100 * 1024**3
    """The stage's default quota of bytes a tenant stores (`docs/api.md`, Quotas)."""
    tenant_checkpoints: int = 10_000_000
    """The stage's default quota of live checkpoints and threads of a tenant."""
    event_bus_name: str | None = None
    """The EventBridge bus the reaper publishes change events to (`store/change_events.py`); unset: none."""
    events_echo: str | None = None
    """Local development (`baton serve --events`): `print` the change events, or POST them to an http(s) URL."""
    usage_flush_requests: int = 100
    """A container adds what it counted of a tenant's usage to the day's item after this many requests
    (`store/usage.py`; `baton serve` sets 1, so its figures are exact at once)..."""
    usage_flush_seconds: int = 30
    """... or once its oldest count is this many seconds old: what a container reclaimed by Lambda loses is at most
    that much of its tenants' requests."""

    @property
    def dynamodb_endpoint(self) -> str | None:
        """The endpoint DynamoDB (and its streams) is reached on: `dynamodb_endpoint_url`, else `aws_endpoint_url`
        (None on AWS: the SDK's own endpoint for the region)."""
        return self.dynamodb_endpoint_url or self.aws_endpoint_url


def environment_name(field: str) -> str:
    """The environment variable that sets a field of `Settings` (infrastructure sets them by these names)."""
    return _ENVIRONMENT[field]


class SettingsError(RuntimeError):
    """The environment does not describe a usable deployment."""


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Validate settings from `environ` (default: the process environment); every problem is named at once."""
    source = os.environ if environ is None else environ
    values: dict[str, str | int] = {}
    problems: list[str] = []
    for field in fields(Settings):
        name = _ENVIRONMENT[field.name]
        value = source.get(name)
        if value is None:
            if field.name == "table_name":
                problems.append(f"{name}: is required")
            continue
        low, high = _LENGTHS.get(field.name, (0, None))
        if len(value) < low or (high is not None and len(value) > high):
            problems.append(f"{name}: must be {low} to {high} characters, got {len(value)}")
            continue
        if field.name in NUMBER_RANGES:
            least, most = NUMBER_RANGES[field.name]
            if not value.isascii() or not value.isdigit() or not least <= int(value) <= most:
                problems.append(f"{name}: must be a whole number from {least:,} to {most:,}, got {value!r}")
                continue
            values[field.name] = int(value)
            continue
        pattern = _PATTERNS.get(field.name)
        if pattern is not None and not pattern[0].match(value):
            problems.append(f"{name}: must hold {pattern[1]}, got {value!r}")
            continue
        values[field.name] = value
    if problems:
        raise SettingsError(f"invalid environment: {'; '.join(problems)}")
    return Settings(**values)  # type: ignore[arg-type]
