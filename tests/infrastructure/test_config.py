"""Stage configuration: what the context may ask for (pure: nothing is synthesized)."""

from __future__ import annotations

import pytest
from infra.config import ConfigError, stage_config


def test_unknown_stage_is_refused_naming_the_known_ones() -> None:
    # Given a stage the app does not define
    # When its configuration is asked for
    with pytest.raises(ConfigError) as raised:
        stage_config({"stage": "staging"})
    # Then the error names the stage asked for and the ones that exist
    message = str(raised.value)
    assert "'staging'" in message
    assert "dev" in message
    assert "prod" in message


@pytest.mark.parametrize("origins", ["*", "https://app.example.com,*", " * "])
def test_wildcard_cors_origin_is_refused(origins: str) -> None:
    # Given cors_origins that include `*`
    # When the configuration is built
    with pytest.raises(ConfigError) as raised:
        stage_config({"stage": "prod", "cors_origins": origins})
    # Then the error says why: any site could use a browser's key
    assert "'*'" in str(raised.value)
    assert "cors_origins" in str(raised.value)


def test_cors_origins_are_split_on_commas() -> None:
    # Given two comma-separated origins
    config = stage_config({"cors_origins": "https://a.example.com, https://b.example.com"})
    # Then both are allowed, trimmed, in order (and the stage defaults to dev)
    assert config.cors_origins == ("https://a.example.com", "https://b.example.com")
    assert config.name == "dev"


@pytest.mark.parametrize("key", ["reserved_concurrency", "provisioned_concurrency"])
@pytest.mark.parametrize("value", ["many", "-1"])
def test_concurrency_must_be_a_non_negative_integer(key: str, value: str) -> None:
    # Given a concurrency that is not a count
    # When the configuration is built
    with pytest.raises(ConfigError) as raised:
        stage_config({key: value})
    # Then the error names the setting
    assert key in str(raised.value)


def test_a_tenants_default_limits_come_from_the_context() -> None:
    config = stage_config({"stage": "prod", "tenant_requests_per_minute": "1200", "tenant_burst": "50"})
    assert (config.tenant_requests_per_minute, config.tenant_burst) == (1200, 50)
    assert stage_config({"stage": "prod"}).tenant_requests_per_minute == 6000
    with pytest.raises(ConfigError, match="tenant_burst must be from 1 to 1,000,000"):
        stage_config({"tenant_burst": "0"})
    with pytest.raises(ConfigError, match="tenant_requests_per_minute must be an integer"):
        stage_config({"tenant_requests_per_minute": "many"})
    with pytest.raises(ConfigError, match="tenant_requests_per_minute must be from 1 to 6,000,000"):
        stage_config({"tenant_requests_per_minute": "10000000"})


def test_snap_start_is_on_in_prod_off_in_dev_and_either_may_be_asked() -> None:
    assert stage_config({"stage": "prod"}).snap_start is True
    assert stage_config({"stage": "dev"}).snap_start is False
    assert stage_config({"stage": "prod", "snap_start": "false"}).snap_start is False
    assert stage_config({"stage": "dev", "snap_start": "true"}).snap_start is True


def test_snap_start_must_be_true_or_false_and_excludes_provisioned_concurrency() -> None:
    with pytest.raises(ConfigError) as raised:
        stage_config({"snap_start": "sometimes"})
    assert "snap_start" in str(raised.value)
    # Lambda allows SnapStart or provisioned concurrency on a version, not both: the app says so before a deploy fails
    with pytest.raises(ConfigError) as both:
        stage_config({"stage": "prod", "provisioned_concurrency": "2"})
    assert "snap_start=false" in str(both.value)
    assert stage_config({"stage": "prod", "provisioned_concurrency": "2", "snap_start": "false"}).snap_start is False


def test_the_app_hands_stage_config_every_context_key_it_reads() -> None:
    from infra.app import _CONTEXT_KEYS

    # Given a context that records what stage_config asks of it
    asked: set[str] = set()

    class Recording(dict[str, object]):
        def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
            asked.add(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> object:
            asked.add(key)
            return super().__getitem__(key)

    stage_config(
        Recording(stage="prod", alarm_email="ops@example.com", event_bus_name="bus", cors_origins="https://a.b")
    )
    # Then the app reads each of those keys from the CDK context (one missing would be accepted and ignored)
    assert asked <= set(_CONTEXT_KEYS), sorted(asked - set(_CONTEXT_KEYS))
    assert "snap_start" in asked
