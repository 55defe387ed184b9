"""Settings come from the environment, checked once, and every problem is named with its variable."""

from __future__ import annotations

import pytest

from baton_checkpoints.settings import Settings, SettingsError, environment_name, load_settings


def test_the_table_name_alone_makes_settings_with_defaults() -> None:
    assert load_settings({"BATON_TABLE_NAME": "baton-dev"}) == Settings(table_name="baton-dev")


def test_every_setting_is_read_from_its_variable() -> None:
    environ = {
        environment_name("table_name"): "t-1",
        environment_name("bucket_name"): "b-1",
        environment_name("aws_endpoint_url"): "http://127.0.0.1:5000",
        environment_name("service_name"): "svc",
        environment_name("dynamodb_endpoint_url"): "http://127.0.0.1:8000",
    }
    assert load_settings(environ) == Settings("t-1", "b-1", "http://127.0.0.1:5000", "svc", "http://127.0.0.1:8000")


def test_dynamodb_is_reached_on_its_own_endpoint_else_on_the_aws_endpoint() -> None:
    # DynamoDB Local beside moto's S3: DynamoDB (and its streams) on the one, S3 on the other
    apart = load_settings(
        {
            "BATON_TABLE_NAME": "baton-dev",
            "BATON_AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "BATON_DYNAMODB_ENDPOINT_URL": "http://127.0.0.1:8000",
        }
    )
    assert (apart.dynamodb_endpoint, apart.aws_endpoint_url) == ("http://127.0.0.1:8000", "http://127.0.0.1:5000")
    # One endpoint for both, and AWS itself (no endpoint: the SDK's own for the region)
    together = load_settings({"BATON_TABLE_NAME": "baton-dev", "BATON_AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})
    assert together.dynamodb_endpoint == "http://127.0.0.1:5000"
    assert load_settings({"BATON_TABLE_NAME": "baton-dev"}).dynamodb_endpoint is None


@pytest.mark.parametrize("name", ["abc", "Baton_Table-2.prod", "x" * 255, "0.0", "___"])
def test_a_table_name_dynamodb_accepts_is_accepted(name: str) -> None:
    assert load_settings({"BATON_TABLE_NAME": name}).table_name == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("t", "must be 3 to 255 characters, got 1"),
        ("ab", "must be 3 to 255 characters, got 2"),
        ("x" * 256, "must be 3 to 255 characters, got 256"),
        ("baton table", "must hold only letters, digits, '_', '-' and '.'"),
        ("baton/table", "must hold only letters, digits, '_', '-' and '.'"),
        ("baton:table", "must hold only letters, digits, '_', '-' and '.'"),
        ("bâton", "must hold only letters, digits, '_', '-' and '.'"),
        ("baton\n", "must hold only letters, digits, '_', '-' and '.'"),
    ],
)
def test_a_table_name_dynamodb_refuses_is_refused_naming_the_variable(name: str, problem: str) -> None:
    # DynamoDB's rule (CreateTable and every data call): 3 to 255 characters of a-z A-Z 0-9 _ - . (moto accepts any
    # name, DynamoDB Local refuses these as DynamoDB does: tests/integration/test_table_schema.py)
    with pytest.raises(SettingsError) as raised:
        load_settings({"BATON_TABLE_NAME": name})
    assert f"BATON_TABLE_NAME: {problem}" in str(raised.value)


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
