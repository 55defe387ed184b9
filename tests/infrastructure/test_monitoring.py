"""Alarms on 5xx rate, function errors and throttles, table throttling and p99 latency, the reaper's (failed stream
records, records that missed the failure queue, its errors, stream lag), and on the ERROR lines each function logs
(a metric filter on its log group); SNS only with an email."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from infra.config import STAGES

import baton_checkpoints.store
from tests.infrastructure.conftest import Synthesized

DYNAMODB_DATA_OPERATIONS = {
    "get_item": "GetItem",
    "batch_get_item": "BatchGetItem",
    "query": "Query",
    "scan": "Scan",
    "put_item": "PutItem",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "batch_write_item": "BatchWriteItem",
    "transact_get_items": "TransactGetItems",
    "transact_write_items": "TransactWriteItems",
}
"""boto3 method -> DynamoDB operation, as CloudWatch names it in the `Operation` dimension of ThrottledRequests."""

CLOUDWATCH_OPERATIONS = frozenset(
    {*DYNAMODB_DATA_OPERATIONS.values(), "BatchExecuteStatement", "ExecuteStatement", "ExecuteTransaction"}
)
"""Every value CloudWatch publishes for the `Operation` dimension of AWS/DynamoDB ThrottledRequests."""


def _store_operations() -> frozenset[str]:
    """The DynamoDB operations `baton_checkpoints.store` calls, read from its source."""
    found: set[str] = set()
    for path in Path(baton_checkpoints.store.__file__).parent.glob("*.py"):
        for method in re.findall(r"\.([a-z_]+)\(", path.read_text(encoding="utf-8")):
            if method in DYNAMODB_DATA_OPERATIONS:
                found.add(DYNAMODB_DATA_OPERATIONS[method])
    assert found, "the store calls no DynamoDB operation?"
    return frozenset(found)


def _alarms(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    alarms = {lid: a["Properties"] for lid, a in synthesized.of_type("AWS::CloudWatch::Alarm").items()}
    assert alarms
    return alarms


def _metric_stats(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics a math alarm reads: {id, namespace, name, stat, dimensions}."""
    return [
        {
            "id": m["Id"],
            "namespace": m["MetricStat"]["Metric"]["Namespace"],
            "name": m["MetricStat"]["Metric"]["MetricName"],
            "stat": m["MetricStat"]["Stat"],
            "dimensions": {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"].get("Dimensions", [])},
        }
        for m in alarm.get("Metrics", [])
        if "MetricStat" in m
    ]


def _expression(alarm: dict[str, Any]) -> str:
    """The expression a math alarm alarms on (the one metric returning data)."""
    returned = [m for m in alarm.get("Metrics", []) if m.get("ReturnData", True)]
    assert len(returned) == 1
    assert "Expression" in returned[0], "the alarm's returned metric is not a math expression"
    return str(returned[0]["Expression"])


def _simple(synthesized: Synthesized, namespace: str, metric: str) -> dict[str, Any]:
    """The one alarm on a single metric of the api function."""
    function_id = synthesized.logical_id(synthesized.stack.functions.api)
    found = [
        a
        for a in _alarms(synthesized).values()
        if (a.get("Namespace"), a.get("MetricName")) == (namespace, metric)
        and a.get("Dimensions") == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]
    ]
    assert len(found) == 1, f"expected one alarm on the api function's {namespace} {metric}, found {len(found)}"
    return found[0]


def _reaper_simple(synthesized: Synthesized, metric: str) -> dict[str, Any]:
    """The one alarm on a single AWS/Lambda metric of the reaper (test_reaper.py checks each in detail)."""
    reaper_id = synthesized.logical_id(synthesized.stack.reaper.function)
    found = [
        a
        for a in _alarms(synthesized).values()
        if (a.get("Namespace"), a.get("MetricName")) == ("AWS/Lambda", metric)
        and a.get("Dimensions") == [{"Name": "FunctionName", "Value": {"Ref": reaper_id}}]
    ]
    assert len(found) == 1, f"expected one alarm on the reaper's {metric}, found {len(found)}"
    return found[0]


def _metric_filters(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """log group logical id -> its metric filter's properties (one each)."""
    filters: dict[str, dict[str, Any]] = {}
    for properties in (f["Properties"] for f in synthesized.of_type("AWS::Logs::MetricFilter").values()):
        group = properties["LogGroupName"]["Ref"]
        assert group not in filters, f"two metric filters on {group}"
        filters[group] = properties
    return filters


def _error_lines(synthesized: Synthesized, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the metric filter counting the ERROR lines of one function's log group, the alarm on its metric)."""
    stack = synthesized.stack
    log_group = {"api": stack.functions.log_group, "reaper": stack.reaper.log_group}[which]
    metric_filter = _metric_filters(synthesized)[synthesized.logical_id(log_group)]
    (transformation,) = metric_filter["MetricTransformations"]
    found = [
        a
        for a in _alarms(synthesized).values()
        if (a.get("Namespace"), a.get("MetricName"))
        == (transformation["MetricNamespace"], transformation["MetricName"])
    ]
    assert len(found) == 1, f"expected one alarm on the {which} function's ERROR lines, found {len(found)}"
    return metric_filter, found[0]


def _server_error_rate(synthesized: Synthesized) -> dict[str, Any]:
    found = [a for a in _alarms(synthesized).values() if any(m["name"] == "5xx" for m in _metric_stats(a))]
    assert len(found) == 1, "expected one alarm reading the API's 5xx count"
    return found[0]


def _table_throttles(synthesized: Synthesized) -> dict[str, Any]:
    found = [
        a for a in _alarms(synthesized).values() if any(m["name"] == "ThrottledRequests" for m in _metric_stats(a))
    ]
    assert len(found) == 1, "expected one alarm reading the table's ThrottledRequests"
    return found[0]


def _p99_duration(synthesized: Synthesized) -> dict[str, Any]:
    alarm = _simple(synthesized, "AWS/Lambda", "Duration")
    assert alarm["ExtendedStatistic"] == "p99"
    return alarm


def test_server_error_rate_alarm_divides_5xx_by_requests(synthesized: Synthesized) -> None:
    # Given the alarm on the API's 5xx answers
    alarm = _server_error_rate(synthesized)
    api_id = synthesized.logical_id(synthesized.stack.api.http_api)
    metrics = {m["name"]: m for m in _metric_stats(alarm)}
    # Then it reads this API's 5xx and request counts (sums)
    assert set(metrics) == {"5xx", "Count"}
    for metric in metrics.values():
        assert metric["namespace"] == "AWS/ApiGateway"
        assert metric["dimensions"] == {"ApiId": {"Ref": api_id}}
        assert metric["stat"] == "Sum"
    # And alarms on a metric math rate: 5xx divided by requests
    expression = _expression(alarm).replace(" ", "")
    assert f"{metrics['5xx']['id']}/{metrics['Count']['id']}" in expression


def test_function_errors_alarm_exists(synthesized: Synthesized) -> None:
    # Given the alarm on the function's Errors
    alarm = _simple(synthesized, "AWS/Lambda", "Errors")
    # Then it counts errors and fires from the first one
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] >= 1


def test_function_throttles_alarm_exists(synthesized: Synthesized) -> None:
    # Given the alarm on the function's Throttles
    alarm = _simple(synthesized, "AWS/Lambda", "Throttles")
    # Then it counts throttled invocations
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] >= 1


def test_function_p99_duration_alarm_exists(synthesized: Synthesized) -> None:
    # Given the alarm on the function's Duration
    alarm = _p99_duration(synthesized)
    # Then it watches the 99th percentile, at the stage's threshold
    assert alarm["Threshold"] == synthesized.config.p99_latency_threshold_ms


def test_table_throttles_alarm_reads_the_tables_throttled_requests(synthesized: Synthesized) -> None:
    # Given the alarm on DynamoDB throttling
    alarm = _table_throttles(synthesized)
    table_id = synthesized.logical_id(synthesized.stack.storage.table)
    metrics = _metric_stats(alarm)
    # Then every metric it reads is ThrottledRequests of Baton's table
    for metric in metrics:
        assert (metric["namespace"], metric["name"], metric["stat"]) == ("AWS/DynamoDB", "ThrottledRequests", "Sum")
        assert metric["dimensions"]["TableName"] == {"Ref": table_id}
    # And the alarm adds them all up (as SUM(METRICS()) or as a + b + ...)
    expression = _expression(alarm).replace(" ", "").upper()
    ids = [m["id"].upper() for m in _metric_stats(alarm)]
    assert expression.startswith("SUM(") or sorted(expression.split("+")) == sorted(ids)


def test_table_throttles_alarm_uses_the_operation_names_cloudwatch_publishes(synthesized: Synthesized) -> None:
    # Given the Operation dimension of every metric the table throttling alarm reads
    operations = {m["dimensions"].get("Operation") for m in _metric_stats(_table_throttles(synthesized))}
    # Then each is an operation name CloudWatch publishes ThrottledRequests under (`GetItem`, not `GET_ITEM`):
    # a metric with any other dimension value has no data, and the alarm could never fire
    assert operations <= CLOUDWATCH_OPERATIONS, sorted(str(o) for o in operations - CLOUDWATCH_OPERATIONS)
    # And together they cover every operation the store makes
    assert operations >= _store_operations()


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_alarm_thresholds_are_the_stage_configs(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without overrides
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then the 5xx rate and p99 latency alarms use that stage's thresholds
    assert _server_error_rate(synthesized)["Threshold"] == STAGES[name].error_rate_threshold_percent
    assert _p99_duration(synthesized)["Threshold"] == STAGES[name].p99_latency_threshold_ms
    # And every alarm needs the stage's number of breaching periods
    for alarm in _alarms(synthesized).values():
        assert alarm["EvaluationPeriods"] == STAGES[name].alarm_evaluation_periods


def test_alarm_thresholds_differ_between_dev_and_prod(dev: Synthesized, prod: Synthesized) -> None:
    # Given both stages' alarms
    # Then prod alarms on a smaller 5xx share and a lower p99 than dev
    assert _server_error_rate(dev)["Threshold"] == 5
    assert _server_error_rate(prod)["Threshold"] == 1
    assert _p99_duration(dev)["Threshold"] == 2000
    assert _p99_duration(prod)["Threshold"] == 1000


def _reaper_failed_records(synthesized: Synthesized) -> dict[str, Any]:
    """The one alarm on the reaper's failure queue (test_reaper.py checks its metric in detail)."""
    queue_id = synthesized.logical_id(synthesized.stack.reaper.failures)
    found = [
        a
        for a in _alarms(synthesized).values()
        if (a.get("Namespace"), a.get("MetricName")) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    ]
    assert len(found) == 1, f"expected one alarm on the reaper's failure queue, found {len(found)}"
    assert found[0]["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    return found[0]


def _reaper_iterator_age(synthesized: Synthesized) -> dict[str, Any]:
    """The one alarm on how far behind the table's stream the reaper is."""
    found = [
        a
        for a in _alarms(synthesized).values()
        if (a.get("Namespace"), a.get("MetricName")) == ("AWS/Lambda", "IteratorAge")
    ]
    assert len(found) == 1, f"expected one alarm on the reaper's IteratorAge, found {len(found)}"
    reaper_id = synthesized.logical_id(synthesized.stack.reaper.function)
    assert found[0]["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": reaper_id}}]
    return found[0]


def test_eleven_alarms_exist_in_every_stage(synthesized: Synthesized) -> None:
    # Given the template's alarms
    alarms = _alarms(synthesized)
    # Then there are the five named by the issue: 5xx rate, errors, throttles, table throttles, p99 latency
    # And the reaper's four: records it gave up on, records that missed the failure queue, its errors, its lag
    # And one per function on the lines it logs at ERROR
    assert len(alarms) == 11
    found = [
        _server_error_rate(synthesized),
        _simple(synthesized, "AWS/Lambda", "Errors"),
        _simple(synthesized, "AWS/Lambda", "Throttles"),
        _table_throttles(synthesized),
        _p99_duration(synthesized),
        _reaper_failed_records(synthesized),
        _reaper_iterator_age(synthesized),
        _reaper_simple(synthesized, "Errors"),
        _reaper_simple(synthesized, "DestinationDeliveryFailures"),
        _error_lines(synthesized, "api")[1],
        _error_lines(synthesized, "reaper")[1],
    ]
    # And each is a different alarm: together they are all of them
    assert sorted(json.dumps(a, sort_keys=True) for a in found) == sorted(
        json.dumps(a, sort_keys=True) for a in alarms.values()
    )


ERROR_LINES_PATTERN = '{ ($.level = "ERROR") || ($.level = "CRITICAL") }'


@pytest.mark.parametrize("which", ["api", "reaper"])
def test_a_metric_filter_counts_each_functions_error_lines_and_an_alarm_fires_on_one(
    synthesized: Synthesized, which: str
) -> None:
    # Given the metric filter on the function's own log group, and the alarm on what it counts
    metric_filter, alarm = _error_lines(synthesized, which)
    (transformation,) = metric_filter["MetricTransformations"]
    # Then it counts every JSON line at ERROR (or CRITICAL), one per line
    assert metric_filter["FilterPattern"] == ERROR_LINES_PATTERN
    assert transformation["MetricValue"] == "1"
    # In a metric of its own: named after the stack and the function, so two stages never add up
    assert transformation["MetricNamespace"] == "Baton"
    assert transformation["MetricName"] == f"{synthesized.stack.stack_name}-{which.capitalize()}ErrorLines"
    # And the alarm fires on a single line within the stage's evaluation window (a caught defect writes one line
    # and answers: requiring a line in every period would never fire on it)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["DatapointsToAlarm"]) == ("Sum", 1, 1)
    assert alarm["EvaluationPeriods"] == synthesized.config.alarm_evaluation_periods
    assert alarm["TreatMissingData"] == "notBreaching"


def test_the_error_lines_filter_matches_what_the_service_logger_writes() -> None:
    # Given a line the service logger writes at ERROR, as a defect caught by the store writes it
    import io
    import logging

    from baton_checkpoints.observability import logger

    handler = logger().logger_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        logger().error("a spilled state's object is missing", extra={"defect": "state_object_missing"})
        logger().info("request")
    finally:
        handler.setStream(previous)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    # Then its `level` field is what the filter selects, and an INFO line's is not
    assert [line["level"] for line in lines] == ["ERROR", "INFO"]
    assert '$.level = "ERROR"' in ERROR_LINES_PATTERN
    assert '"INFO"' not in ERROR_LINES_PATTERN


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_no_topic_and_no_alarm_actions_without_an_alarm_email(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without alarm_email
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then there is no topic, no subscription, and the alarms notify nobody
    assert not synthesized.of_type("AWS::SNS::Topic")
    assert not synthesized.of_type("AWS::SNS::Subscription")
    for alarm in _alarms(synthesized).values():
        assert not alarm.get("AlarmActions")


def test_alarm_email_adds_an_encrypted_topic_with_an_email_subscription(overrides: Synthesized) -> None:
    # Given a stage synthesized with alarm_email
    topic_id, topic = overrides.only("AWS::SNS::Topic")
    _, subscription = overrides.only("AWS::SNS::Subscription")
    # Then the topic is encrypted with a KMS key
    assert topic["Properties"]["KmsMasterKeyId"]
    # And the address is subscribed to it by email
    assert subscription["Properties"] == {
        "Endpoint": "ops@example.com",
        "Protocol": "email",
        "TopicArn": {"Ref": topic_id},
    }


def test_alarm_email_makes_every_alarm_notify_the_topic(overrides: Synthesized) -> None:
    # Given a stage synthesized with alarm_email, and its topic
    topic_id, _ = overrides.only("AWS::SNS::Topic")
    # Then every alarm notifies the topic when it fires
    for alarm in _alarms(overrides).values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def _warnings(synthesized: Synthesized) -> list[str]:
    from aws_cdk.assertions import Annotations, Match

    found = Annotations.from_stack(synthesized.stack).find_warning("*", Match.any_value())
    return [str(entry.entry.data) for entry in found]


def test_a_prod_stack_whose_alarms_notify_nobody_says_so(
    prod: Synthesized, dev: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.infrastructure.conftest import _synthesize

    # Given prod without an alarm target, Then every synth and deploy warns, naming the option to set
    (warning,) = [text for text in _warnings(prod) if "notify nobody" in text]
    assert "-c alarm_email=" in warning
    assert "CONTEXT='alarm_email=" in warning
    # and neither prod with one nor dev (whose alarms may go unwatched) says it
    context = {"stage": "prod", "alarm_email": "ops@example.com"}
    notified = _synthesize(tmp_path_factory.mktemp("cdk-prod-alarms"), "prod", context)
    assert not [text for text in _warnings(notified) if "notify nobody" in text]
    assert not [text for text in _warnings(dev) if "notify nobody" in text]
