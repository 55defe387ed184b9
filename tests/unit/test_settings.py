"""Settings come from the environment, checked once, and every problem is named with its variable."""

from __future__ import annotations

import pytest

from baton.settings import Settings, SettingsError, environment_name, load_settings


def test_the_table_name_alone_makes_settings_with_defaults() -> None:
    assert load_settings({"BATON_TABLE_NAME": "baton-dev"}) == Settings(table_name="baton-dev")


def test_every_setting_is_read_from_its_variable() -> None:
    environ = {
        environment_name("table_name"): "t-1",
        environment_name("bucket_name"): "b-1",
        environment_name("aws_endpoint_url"): "http://127.0.0.1:5000",
        environment_name("service_name"): "svc",
    }
    assert load_settings(environ) == Settings("t-1", "b-1", "http://127.0.0.1:5000", "svc")


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({}, ["BATON_TABLE_NAME: is required"]),
        ({"BATON_TABLE_NAME": "ab"}, ["BATON_TABLE_NAME: must be 3 to 255 characters, got 2"]),
        (
            {"BATON_TABLE_NAME": "x" * 256, "BATON_BUCKET_NAME": "b"},
            ["BATON_TABLE_NAME: must be 3 to 255 characters, got 256", "BATON_BUCKET_NAME: must be 3 to 63"],
        ),
    ],
)
def test_a_missing_or_malformed_variable_is_named(environ: dict[str, str], named: list[str]) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(environ)
    assert all(part in str(raised.value) for part in named)
