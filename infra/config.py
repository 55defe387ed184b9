"""What differs between stages, in one place: `-c stage=dev|prod` picks a row, other context keys refine it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs

from baton_checkpoints.settings import EVENT_BUS_NAME, NUMBER_RANGES


@dataclass(frozen=True)
class StageConfig:
    """Settings of one deployment stage."""

    name: str
    removal_policy: RemovalPolicy
    """Whether data survives the stack's deletion: kept outside development."""
    log_retention: logs.RetentionDays
    throttle_rate: int
    """Steady requests per second the HTTP API stage accepts before answering 429."""
    throttle_burst: int
    api_memory_mb: int = 1024
    reserved_concurrency: int | None = None
    provisioned_concurrency: int | None = None
    snap_start: bool = False
    """SnapStart on the api function's published versions (`handlers/snapstart.py`): a new container resumes from a
    snapshot taken after its imports and set-up, instead of running them. It charges for the snapshot's cache while
    a version is live (by memory, at least 3 hours) and for each restore (by memory); see docs/operations.md. Lambda
    allows no provisioned concurrency beside it."""
    cors_origins: tuple[str, ...] = ()
    alarm_email: str | None = None
    error_rate_threshold_percent: float = 1.0
    """Alarm when more than this share of requests answer 5xx over the evaluation window."""
    p99_latency_threshold_ms: int = 1000
    alarm_evaluation_periods: int = 3
    tenant_requests_per_minute: int = 6_000
    """A tenant's default rate limit (the operator sets a tenant's own at /v1/tenants/{tenant_id}/limits): a tenth of
    the stage's throttle in prod, so that no one tenant can spend the whole stage's."""
    tenant_burst: int = 200
    tenant_storage_bytes: int = 10 * 1024**3
    tenant_checkpoints: int = 1_000_000
    event_bus_name: str | None = None
    """An existing EventBridge bus (a name or an ARN) the change events go to; None: the stack creates one,
    `baton-<stage>-changes`."""


STAGES: dict[str, StageConfig] = {
    "dev": StageConfig(
        name="dev",
        removal_policy=RemovalPolicy.DESTROY,
        log_retention=logs.RetentionDays.ONE_WEEK,
        throttle_rate=50,
        throttle_burst=100,
        tenant_requests_per_minute=600,
        tenant_burst=100,
        error_rate_threshold_percent=5.0,
        p99_latency_threshold_ms=2000,
    ),
    "prod": StageConfig(
        name="prod",
        removal_policy=RemovalPolicy.RETAIN,
        log_retention=logs.RetentionDays.THREE_MONTHS,
        throttle_rate=1000,
        throttle_burst=2000,
        snap_start=True,
        error_rate_threshold_percent=1.0,
        p99_latency_threshold_ms=1000,
    ),
}


TENANT_DEFAULTS: dict[str, tuple[int, int]] = {
    key: limits for key, limits in NUMBER_RANGES.items() if key.startswith("tenant_")
}
"""The context keys of a tenant's default limits, and the range of each: the function's settings' own
(`baton_checkpoints.settings.NUMBER_RANGES`), so a stack that synthesizes is one whose function starts."""


class ConfigError(ValueError):
    """The context asks for something this app cannot build."""


def _optional_int(value: Any, key: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"-c {key} must be an integer, got {value!r}") from None
    if number < 0:
        raise ConfigError(f"-c {key} must not be negative")
    return number


def _optional_bool(value: Any, key: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"-c {key} must be true or false, got {value!r}")


def stage_config(context: dict[str, Any]) -> StageConfig:
    """The stage chosen by the context (`stage`, default `dev`) with its overrides applied.

    Overrides: `cors_origins` (comma-separated), `alarm_email`, `event_bus_name` (an existing bus for the change
    events), `reserved_concurrency`, `provisioned_concurrency`, `snap_start` (true or false), and a tenant's default
    limits:
    `tenant_requests_per_minute`, `tenant_burst`, `tenant_storage_bytes`, `tenant_checkpoints`.
    """
    name = str(context.get("stage") or "dev")
    if name not in STAGES:
        raise ConfigError(f"-c stage must be one of {', '.join(STAGES)}, got {name!r}")
    config = STAGES[name]
    origins = context.get("cors_origins")
    if origins:
        parsed = tuple(o.strip() for o in str(origins).split(",") if o.strip())
        if "*" in parsed:
            raise ConfigError("-c cors_origins must list origins; '*' would let any site use a browser's key")
        config = replace(config, cors_origins=parsed)
    if context.get("alarm_email"):
        config = replace(config, alarm_email=str(context["alarm_email"]))
    if context.get("event_bus_name"):
        bus = str(context["event_bus_name"])
        if not EVENT_BUS_NAME.match(bus):
            raise ConfigError("-c event_bus_name must be an EventBridge bus's name or ARN")
        config = replace(config, event_bus_name=bus)
    tenant_defaults: dict[str, Any] = {}
    for key, (least, most) in TENANT_DEFAULTS.items():
        value = _optional_int(context.get(key), key)
        if value is not None:
            if not least <= value <= most:
                raise ConfigError(f"-c {key} must be from {least:,} to {most:,}")
            tenant_defaults[key] = value
    config = replace(config, **tenant_defaults)
    snap_start = _optional_bool(context.get("snap_start"), "snap_start")
    config = replace(
        config,
        reserved_concurrency=_optional_int(context.get("reserved_concurrency"), "reserved_concurrency"),
        provisioned_concurrency=_optional_int(context.get("provisioned_concurrency"), "provisioned_concurrency"),
        snap_start=config.snap_start if snap_start is None else snap_start,
    )
    if config.snap_start and config.provisioned_concurrency:
        raise ConfigError(
            "-c provisioned_concurrency cannot be used with SnapStart (Lambda allows one or the other): "
            "add -c snap_start=false"
        )
    return config
