"""Alarms on what hurts callers: 5xx answers, function errors and throttles, table throttling, p99 latency; and on
every line the functions log at ERROR (a defect Baton caught and answered: a response over Lambda's limit, a
missing state object, an unreadable key record, an unhandled exception)."""

from __future__ import annotations

from aws_cdk import Annotations, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig

PERIOD = Duration.minutes(1)
LOG_METRICS_NAMESPACE = "Baton"
"""Where the metrics counted from log lines go (each named after its stack and function, so that two stages in one
account and region never add up)."""
ERROR_LEVELS = ("ERROR", "CRITICAL")
"""The `level` values of the JSON lines counted as errors: powertools writes `"level":"ERROR"` (and `CRITICAL`), as
Lambda does for a runtime error in the JSON log format."""
TABLE_OPERATIONS = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
    dynamodb.Operation.BATCH_WRITE_ITEM,
)


class Monitoring(Construct):
    """The alarms, and the SNS topic they notify when `-c alarm_email=...` is given."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        http_api: apigwv2.HttpApi,
        function: lambda_.Function,
        log_group: logs.ILogGroup,
        table: dynamodb.Table,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic: sns.Topic | None = None
        if not config.alarm_email and config.removal_policy == RemovalPolicy.RETAIN:
            # A stage that keeps its data (prod) with alarms that notify nobody: said on every synth and deploy.
            Annotations.of(self).add_warning_v2(
                "baton:alarms-notify-nobody",
                "This stage's alarms notify nobody: deploy with -c alarm_email=you@example.com "
                "(make deploy STAGE=prod CONTEXT='alarm_email=you@example.com').",
            )
        if config.alarm_email:
            # CloudWatch can publish to an encrypted topic only with a customer-managed key whose policy lets it
            # (the AWS-managed alias/aws/sns key cannot grant that), so the topic gets its own key.
            key = kms.Key(
                self,
                "AlarmsKey",
                description="Baton alarm topic",
                enable_key_rotation=True,
                removal_policy=config.removal_policy,
            )
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="CloudWatchAlarmsPublish",
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                )
            )
            self.topic = sns.Topic(self, "Alarms", display_name="Baton alarms", enforce_ssl=True, master_key=key)
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))

        requests = http_api.metric_count(period=PERIOD, statistic="Sum")
        server_errors = http_api.metric_server_error(period=PERIOD, statistic="Sum")
        error_rate = cloudwatch.MathExpression(
            expression="IF(requests > 0, 100 * errors / requests, 0)",
            using_metrics={"errors": server_errors, "requests": requests},
            period=PERIOD,
            label="5xx rate (%)",
        )
        throttled = table.metric_throttled_requests_for_operations(operations=list(TABLE_OPERATIONS), period=PERIOD)
        self.alarms = [
            self._alarm(
                "ServerErrorRate",
                error_rate,
                config.error_rate_threshold_percent,
                config,
                "More than the threshold share of requests answered 5xx.",
            ),
            self._alarm(
                "FunctionErrors",
                function.metric_errors(period=PERIOD, statistic="Sum"),
                1,
                config,
                "The api function failed (a defect or a timeout).",
            ),
            self._alarm(
                "FunctionThrottles",
                function.metric_throttles(period=PERIOD, statistic="Sum"),
                1,
                config,
                "Lambda throttled the api function: concurrency is exhausted.",
            ),
            self._alarm("TableThrottles", throttled, 1, config, "DynamoDB throttled requests of the api function."),
            self._alarm(
                "LatencyP99",
                function.metric_duration(period=PERIOD, statistic="p99"),
                config.p99_latency_threshold_ms,
                config,
                "The api function's p99 duration is over the threshold.",
            ),
            self._notify(error_lines_alarm(self, "ErrorLines", log_group, config, "api")),
        ]

    def _alarm(
        self, name: str, metric: cloudwatch.IMetric, threshold: float, config: StageConfig, description: str
    ) -> cloudwatch.Alarm:
        return self._notify(stage_alarm(self, name, metric, threshold, config, description))

    def _notify(self, alarm: cloudwatch.Alarm) -> cloudwatch.Alarm:
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        return alarm


def stage_alarm(
    scope: Construct,
    name: str,
    metric: cloudwatch.IMetric,
    threshold: float,
    config: StageConfig,
    description: str,
    datapoints_to_alarm: int | None = None,
) -> cloudwatch.Alarm:
    """An alarm as every alarm of the stack is made: at or over `threshold` for the stage's evaluation periods (all
    of them, unless `datapoints_to_alarm` says how many), missing data is not breaching, described with the stage's
    name."""
    return cloudwatch.Alarm(
        scope,
        name,
        metric=metric,
        threshold=threshold,
        evaluation_periods=config.alarm_evaluation_periods,
        datapoints_to_alarm=datapoints_to_alarm or config.alarm_evaluation_periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"Baton {config.name}: {description}",
    )


def error_lines_filter() -> logs.IFilterPattern:
    """The JSON lines whose `level` is one of `ERROR_LEVELS`: `{ ($.level = "ERROR") || ($.level = "CRITICAL") }`."""
    return logs.FilterPattern.any(*(logs.FilterPattern.string_value("$.level", "=", level) for level in ERROR_LEVELS))


def error_lines_alarm(
    scope: Construct, name: str, log_group: logs.ILogGroup, config: StageConfig, function: str
) -> cloudwatch.Alarm:
    """A metric filter counting the ERROR lines of a function's log group, and an alarm on the count.

    Baton logs at ERROR only what is a defect of its own that it caught and answered (a 500, a 503 for a state
    object that is gone, a response over Lambda's limit): each is worth a look, and none shows in the function's
    Errors metric, which counts only invocations that failed. So the alarm fires on one line within the stage's
    evaluation periods, not only when every period has one, and clears once a whole window passed without any.
    """
    metric_name = f"{Stack.of(scope).stack_name}-{function.capitalize()}ErrorLines"
    metric_filter = logs.MetricFilter(
        scope,
        f"{name}Filter",
        log_group=log_group,
        filter_pattern=error_lines_filter(),
        metric_namespace=LOG_METRICS_NAMESPACE,
        metric_name=metric_name,
        metric_value="1",
    )
    metric = metric_filter.metric(period=PERIOD, statistic="Sum")
    return stage_alarm(
        scope,
        name,
        metric,
        1,
        config,
        f"the {function} function logged a line at ERROR (a defect it caught: find it by `level` in its log group).",
        datapoints_to_alarm=1,
    )
