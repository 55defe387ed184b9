"""The HTTP API: every request, on every path and method, goes to the api function (`$default` route)."""

from __future__ import annotations

import json

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge

CORS_ALLOWED_HEADERS = (
    "authorization",
    "content-type",
    "idempotency-key",
    "if-match",
    "if-none-match",
    "lease-token",
    "mcp-session-id",
    "mcp-protocol-version",
)
CORS_EXPOSED_HEADERS = ("etag", "idempotent-replayed", "retry-after")

ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "path": "$context.path",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "error": "$context.error.message",
}
"""One JSON object per request; never headers or query strings, so keys cannot reach the access log."""


@jsii.implements(apigwv2.IAccessLogSettings)
class JsonAccessLogs:
    """Access logs of a stage: one JSON line per request into a log group."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        """Where the lines go."""
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        """What a line holds."""
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":")))


class Api(Construct):
    """An HTTP API with one `$default` route to the function, stage throttling, JSON access logs and CORS."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        handler: lambda_.IFunction,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        cors = None
        if config.cors_origins:
            cors = apigwv2.CorsPreflightOptions(
                allow_origins=list(config.cors_origins),
                allow_methods=[apigwv2.CorsHttpMethod.ANY],
                allow_headers=list(CORS_ALLOWED_HEADERS),
                expose_headers=list(CORS_EXPOSED_HEADERS),
            )
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="Baton: a checkpoint API for AI agents",
            create_default_stage=False,
            default_integration=integrations.HttpLambdaIntegration(
                "ApiFunction", handler, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0
            ),
            cors_preflight=cors,
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=config.log_retention, removal_policy=removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=config.throttle_rate, burst_limit=config.throttle_burst),
            access_log_settings=JsonAccessLogs(self.access_logs),
        )
        acknowledge(
            self.http_api,
            "AwsSolutions-APIG4",
            (
                "Authentication happens in the api function before any route runs (bearer keys, hashed, cached 60 s), "
                "so every refusal speaks the contract's error envelope; see docs/architecture.md."
            ),
        )
