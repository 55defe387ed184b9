"""The api function: runtime, architecture, handler, tracing, logs, settings, concurrency, and its alias."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest
from aws_cdk import RemovalPolicy

from baton_checkpoints.settings import environment_name, load_settings
from tests.infrastructure.conftest import Synthesized, render

RETENTION_DAYS = {"dev": 7, "prod": 90}


def _function(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    """The api function (the reaper, the stack's other function, has its own tests: test_reaper.py)."""
    api = synthesized.stack.functions.api
    return synthesized.logical_id(api), dict(synthesized.resource(api)["Properties"])


def _alias(synthesized: Synthesized) -> dict[str, Any]:
    logical_id, alias = synthesized.only("AWS::Lambda::Alias")
    assert logical_id == synthesized.logical_id(synthesized.stack.functions.alias)
    return dict(alias["Properties"])


def test_the_stack_has_two_functions_the_api_and_the_reaper(synthesized: Synthesized) -> None:
    # Given the template's functions
    functions = set(synthesized.of_type("AWS::Lambda::Function"))
    # Then they are the api function and the reaper: nothing else runs code in the stack
    stack = synthesized.stack
    ours = {synthesized.logical_id(stack.functions.api), synthesized.logical_id(stack.reaper.function)}
    if synthesized.config.removal_policy == RemovalPolicy.RETAIN:
        assert functions == ours
        return
    # but a stage whose data goes with it (dev), where CDK's own handler empties the buckets when it is destroyed
    (emptier,) = functions - ours
    assert emptier.startswith("CustomS3AutoDeleteObjectsCustomResourceProvider")
    assert ours < functions


def test_a_destroyed_dev_stack_empties_its_buckets_and_prod_keeps_them(dev: Synthesized, prod: Synthesized) -> None:
    # Given both stages' buckets
    for synthesized, emptied in ((dev, True), (prod, False)):
        buckets = synthesized.of_type("AWS::S3::Bucket")
        emptiers = synthesized.of_type("Custom::S3AutoDeleteObjects")
        # Then dev's are emptied on deletion (CloudFormation cannot delete a bucket holding objects), prod's retained
        assert len(buckets) == 2
        assert {render(e["Properties"]["BucketName"]) for e in emptiers.values()} == (
            {render({"Ref": logical_id}) for logical_id in buckets} if emptied else set()
        )
        policies = {bucket["DeletionPolicy"] for bucket in buckets.values()}
        assert policies == ({"Delete"} if emptied else {"Retain"})


def test_function_runs_python_3_13_on_arm64(synthesized: Synthesized) -> None:
    # Given the api function
    _, properties = _function(synthesized)
    # Then it runs on Python 3.13, on Graviton
    assert properties["Runtime"] == "python3.13"
    assert properties["Architectures"] == ["arm64"]


def test_function_handler_names_the_api_handler(synthesized: Synthesized) -> None:
    # Given the api function's handler setting
    _, properties = _function(synthesized)
    assert properties["Handler"] == "baton_checkpoints.handlers.api.handler"
    # When that name is resolved in the package Lambda receives
    module_name, _, attribute = properties["Handler"].rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    # Then it is a callable
    assert callable(handler)


def test_function_is_traced_with_x_ray(synthesized: Synthesized) -> None:
    # Given the api function
    _, properties = _function(synthesized)
    # Then X-Ray tracing is active
    assert properties["TracingConfig"] == {"Mode": "Active"}


def test_function_logs_json_to_its_stages_log_group(synthesized: Synthesized) -> None:
    # Given the api function and the stack's function log group
    _, properties = _function(synthesized)
    log_group_id = synthesized.logical_id(synthesized.stack.functions.log_group)
    # Then its logs are structured JSON, written to that log group
    assert properties["LoggingConfig"]["LogFormat"] == "JSON"
    assert properties["LoggingConfig"]["LogGroup"] == {"Ref": log_group_id}
    assert synthesized.resources[log_group_id]["Type"] == "AWS::Logs::LogGroup"


def test_function_times_out_before_api_gateway_does(synthesized: Synthesized) -> None:
    # Given the api function
    _, properties = _function(synthesized)
    # Then it ends a slow request itself, below API Gateway's 30 s integration limit
    assert 0 < properties["Timeout"] < 30


def test_function_environment_names_its_table_and_bucket(synthesized: Synthesized) -> None:
    # Given the api function's environment
    _, properties = _function(synthesized)
    variables = properties["Environment"]["Variables"]
    # Then the settings model's variables reference the stack's own table and bucket
    table_id = synthesized.logical_id(synthesized.stack.storage.table)
    bucket_id = synthesized.logical_id(synthesized.stack.storage.bucket)
    assert variables[environment_name("table_name")] == {"Ref": table_id}
    assert variables[environment_name("bucket_name")] == {"Ref": bucket_id}
    assert environment_name("table_name") == "BATON_TABLE_NAME"
    assert environment_name("bucket_name") == "BATON_BUCKET_NAME"


def test_function_environment_never_points_at_another_endpoint(synthesized: Synthesized) -> None:
    # Given the api function's environment
    _, properties = _function(synthesized)
    # Then it does not redirect the AWS clients, nor DynamoDB's alone (those settings are for moto and DynamoDB
    # Local only)
    endpoints = {environment_name("aws_endpoint_url"), environment_name("dynamodb_endpoint_url")}
    assert not endpoints & set(properties["Environment"]["Variables"])
    # And neither does any other function of the stack (the reaper)
    functions = synthesized.functions
    assert len(functions) == 2
    for logical_id, function in functions.items():
        assert not endpoints & set(function["Properties"]["Environment"]["Variables"]), logical_id


def test_function_skips_pydantic_plugin_discovery(synthesized: Synthesized) -> None:
    # Given the api function's environment
    _, properties = _function(synthesized)
    # Then pydantic does not scan the installed distributions for plugins at cold start (Baton uses none)
    assert properties["Environment"]["Variables"]["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_function_has_no_reserved_concurrency_unless_configured(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without reserved_concurrency
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then the function's concurrency is not reserved
    _, properties = _function(synthesized)
    assert "ReservedConcurrentExecutions" not in properties


def test_function_reserves_the_configured_concurrency(overrides: Synthesized) -> None:
    # Given a stage synthesized with reserved_concurrency=50
    _, properties = _function(overrides)
    # Then 50 concurrent executions are reserved for the function
    assert properties["ReservedConcurrentExecutions"] == 50


def test_live_alias_points_at_the_functions_current_version(synthesized: Synthesized) -> None:
    # Given the function, its published version and the alias
    function_id, _ = _function(synthesized)
    version_id, version = synthesized.only("AWS::Lambda::Version")
    alias = _alias(synthesized)
    # Then the alias `live` is of the function and points at the version published from it
    assert alias["Name"] == "live"
    assert alias["FunctionName"] == {"Ref": function_id}
    assert alias["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    assert version["Properties"]["FunctionName"] == {"Ref": function_id}


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_live_alias_has_no_provisioned_concurrency_unless_configured(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without provisioned_concurrency
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then nothing is provisioned (and billed) on the alias
    assert "ProvisionedConcurrencyConfig" not in _alias(synthesized)


def test_live_alias_provisions_the_configured_concurrency(overrides: Synthesized) -> None:
    # Given a stage synthesized with provisioned_concurrency=2
    alias = _alias(overrides)
    # Then two environments stay initialized on the alias the API invokes
    assert alias["ProvisionedConcurrencyConfig"] == {"ProvisionedConcurrentExecutions": 2}


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_function_log_retention_depends_on_the_stage(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage's function log group
    synthesized: Synthesized = request.getfixturevalue(name)
    log_group = synthesized.resource(synthesized.stack.functions.log_group)
    # Then its logs are kept a week in dev and three months in prod
    assert log_group["Properties"]["RetentionInDays"] == RETENTION_DAYS[name]


def test_log_retention_differs_between_dev_and_prod(dev: Synthesized, prod: Synthesized) -> None:
    # Given both stages' function log groups
    retention = {s.label: s.resource(s.stack.functions.log_group)["Properties"]["RetentionInDays"] for s in (dev, prod)}
    # Then prod keeps logs longer than dev
    assert retention == RETENTION_DAYS
    assert retention["prod"] > retention["dev"]


def test_function_environment_carries_the_stages_tenant_defaults(dev: Synthesized, prod: Synthesized) -> None:
    # Given each stage's api function
    for synthesized, rate, burst in ((dev, "600", "100"), (prod, "6000", "200")):
        _, properties = _function(synthesized)
        variables = properties["Environment"]["Variables"]
        # Then a tenant's default limits are the stage's, in the variables the settings read
        assert variables["BATON_TENANT_REQUESTS_PER_MINUTE"] == rate
        assert variables["BATON_TENANT_BURST"] == burst
        assert int(variables["BATON_TENANT_STORAGE_BYTES"]) > 0
        assert int(variables["BATON_TENANT_CHECKPOINTS"]) > 0
        settings = load_settings(
            {k: v for k, v in variables.items() if isinstance(v, str)} | {"BATON_TABLE_NAME": "t-1"}
        )
        assert settings.tenant_requests_per_minute == int(rate)


def test_function_carries_the_shutdown_extension_so_lambda_sends_it_sigterm(synthesized: Synthesized) -> None:
    # Given the api function and the layer it names
    _, properties = _function(synthesized)
    layer = synthesized.stack.functions.shutdown_layer
    assert properties["Layers"] == [{"Ref": synthesized.logical_id(layer)}]
    layer_properties = synthesized.resource(layer)["Properties"]
    assert layer_properties["CompatibleRuntimes"] == ["python3.13"]
    assert layer_properties["CompatibleArchitectures"] == ["arm64"]
    # When the layer's asset is staged as Lambda will unpack it under /opt
    staged = [path for path in synthesized.outdir.glob("asset.*") if (path / "extensions").is_dir()]
    assert len(staged) == 1, staged
    files = sorted(str(path.relative_to(staged[0])) for path in staged[0].rglob("*") if path.is_file())
    # Then it holds the extension's launcher, executable (Lambda starts each file of /opt/extensions), and its
    # script, nothing else
    assert files == ["baton-shutdown/extension.py", "extensions/baton-shutdown"]
    assert os.access(staged[0] / "extensions" / "baton-shutdown", os.X_OK)


def test_prod_snapshots_the_functions_published_versions_which_the_alias_and_the_api_use(prod: Synthesized) -> None:
    # Given prod's api function
    function_id, properties = _function(prod)
    # Then SnapStart is on for its published versions, the alias the API invokes points at the published version,
    # and the hooks it runs are registered by the handler's module (tests/integration/test_snapstart.py)
    assert properties["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    version_id, version = prod.only("AWS::Lambda::Version")
    assert version["Properties"]["FunctionName"] == {"Ref": function_id}
    assert _alias(prod)["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    _, integration = prod.only("AWS::ApiGatewayV2::Integration")
    assert integration["Properties"]["IntegrationUri"] == {"Ref": prod.logical_id(prod.stack.functions.alias)}


@pytest.mark.parametrize("name", ["dev", "overrides"])
def test_snap_start_is_off_unless_the_stage_asks(request: pytest.FixtureRequest, name: str) -> None:
    synthesized: Synthesized = request.getfixturevalue(name)
    _, properties = _function(synthesized)
    assert "SnapStart" not in properties
