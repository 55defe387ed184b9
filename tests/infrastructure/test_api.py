"""The HTTP API: one `$default` route to the function's alias, a throttled stage, JSON access logs, CORS."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.config import STAGES

from tests.infrastructure.conftest import Synthesized, render

CONTRACT_ALLOWED_HEADERS = (
    "authorization",
    "content-type",
    "idempotency-key",
    "if-match",
    "if-none-match",
    "lease-token",
    "mcp-session-id",
    "mcp-protocol-version",
)
"""The request headers the contract's CORS section lets a browser send."""
CONTRACT_EXPOSED_HEADERS = ("etag", "idempotent-replayed", "retry-after")
"""The response headers the contract's CORS section lets a browser read."""


def _api(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    logical_id, api = synthesized.only("AWS::ApiGatewayV2::Api")
    return logical_id, api["Properties"]


def _stage(synthesized: Synthesized) -> dict[str, Any]:
    _, stage = synthesized.only("AWS::ApiGatewayV2::Stage")
    return dict(stage["Properties"])


def test_api_is_an_http_api(synthesized: Synthesized) -> None:
    # Given the template's API
    _, properties = _api(synthesized)
    # Then it is an HTTP API (payload 2.0, JWT-free, cheaper than REST)
    assert properties["ProtocolType"] == "HTTP"


def test_every_request_goes_through_one_default_route(synthesized: Synthesized) -> None:
    # Given the API's routes
    api_id, _ = _api(synthesized)
    routes = synthesized.of_type("AWS::ApiGatewayV2::Route")
    # Then there is exactly one, `$default`, so any path and method reaches the function (its 404 and 405)
    assert len(routes) == 1
    ((_, route),) = routes.items()
    assert route["Properties"]["RouteKey"] == "$default"
    assert route["Properties"]["ApiId"] == {"Ref": api_id}
    # And authentication is the function's, not API Gateway's
    assert route["Properties"].get("AuthorizationType", "NONE") == "NONE"


def test_default_route_proxies_to_the_functions_live_alias_with_payload_2(synthesized: Synthesized) -> None:
    # Given the route and its integration
    _, route = synthesized.only("AWS::ApiGatewayV2::Route")
    integration_id, integration = synthesized.only("AWS::ApiGatewayV2::Integration")
    alias_id = synthesized.logical_id(synthesized.stack.functions.alias)
    # Then the route targets the integration, a Lambda proxy of the `live` alias in payload format 2.0
    assert render(route["Properties"]["Target"]) == "integrations/${" + integration_id + "}"
    properties = integration["Properties"]
    assert properties["IntegrationType"] == "AWS_PROXY"
    assert properties["PayloadFormatVersion"] == "2.0"
    assert properties["IntegrationUri"] == {"Ref": alias_id}


def test_api_gateway_may_invoke_the_alias_from_this_api_only(synthesized: Synthesized) -> None:
    # Given the Lambda permissions of the template
    api_id, _ = _api(synthesized)
    alias_id = synthesized.logical_id(synthesized.stack.functions.alias)
    permissions = list(synthesized.of_type("AWS::Lambda::Permission").values())
    # Then API Gateway may invoke the alias, when the call comes from this API
    assert len(permissions) == 1
    properties = permissions[0]["Properties"]
    assert properties["Action"] == "lambda:InvokeFunction"
    assert properties["Principal"] == "apigateway.amazonaws.com"
    assert properties["FunctionName"] == {"Ref": alias_id}
    assert "${" + api_id + "}/" in render(properties["SourceArn"])


def test_default_stage_deploys_itself(synthesized: Synthesized) -> None:
    # Given the API's stage
    api_id, _ = _api(synthesized)
    stage = _stage(synthesized)
    # Then it is the `$default` stage of this API, deploying every change automatically
    assert stage["StageName"] == "$default"
    assert stage["ApiId"] == {"Ref": api_id}
    assert stage["AutoDeploy"] is True


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_stage_throttles_at_the_stage_configs_rate_and_burst(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without overrides
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then its default route settings throttle at that stage's configured rate and burst
    settings = _stage(synthesized)["DefaultRouteSettings"]
    assert settings["ThrottlingRateLimit"] == STAGES[name].throttle_rate
    assert settings["ThrottlingBurstLimit"] == STAGES[name].throttle_burst


def test_throttling_differs_between_dev_and_prod(dev: Synthesized, prod: Synthesized) -> None:
    # Given both stages' throttling
    dev_settings, prod_settings = (_stage(s)["DefaultRouteSettings"] for s in (dev, prod))
    # Then prod accepts more than dev
    assert (dev_settings["ThrottlingRateLimit"], dev_settings["ThrottlingBurstLimit"]) == (50, 100)
    assert (prod_settings["ThrottlingRateLimit"], prod_settings["ThrottlingBurstLimit"]) == (1000, 2000)


def test_access_logs_are_json_lines_with_the_request_id(synthesized: Synthesized) -> None:
    # Given the stage's access log settings
    settings = _stage(synthesized)["AccessLogSettings"]
    access_logs_id = synthesized.logical_id(synthesized.stack.api.access_logs)
    # Then they go to the API's access log group
    assert settings["DestinationArn"] == {"Fn::GetAtt": [access_logs_id, "Arn"]}
    assert synthesized.resources[access_logs_id]["Type"] == "AWS::Logs::LogGroup"
    # And each line is a JSON object carrying API Gateway's request id
    line = json.loads(settings["Format"])
    assert isinstance(line, dict)
    assert "$context.requestId" in line.values()


def test_access_logs_never_record_headers_or_query_strings(synthesized: Synthesized) -> None:
    # Given the fields of an access log line
    fields = json.loads(_stage(synthesized)["AccessLogSettings"]["Format"]).values()
    # Then none can carry a header (a bearer key) or a query string
    for value in fields:
        assert "header" not in value.lower(), value
        assert "querystring" not in value.lower(), value
        assert "authorizer" not in value.lower(), value


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_api_has_no_cors_without_cors_origins(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without cors_origins
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then the API answers no preflight
    _, properties = _api(synthesized)
    assert "CorsConfiguration" not in properties


def test_api_cors_lists_the_origins_and_exactly_the_contracts_headers(overrides: Synthesized) -> None:
    # Given a stage synthesized with cors_origins
    _, properties = _api(overrides)
    cors = properties["CorsConfiguration"]
    # Then the configured origins (never `*`) may call it
    assert cors["AllowOrigins"] == ["https://app.example.com"]
    # And exactly the contract's request headers may be sent, and its response headers read
    assert sorted(h.lower() for h in cors["AllowHeaders"]) == sorted(CONTRACT_ALLOWED_HEADERS)
    assert sorted(h.lower() for h in cors["ExposeHeaders"]) == sorted(CONTRACT_EXPOSED_HEADERS)
    # And no credentials are involved (keys travel as bearer tokens, not cookies)
    assert cors.get("AllowCredentials", False) is False
