"""The reaper function in the synthesized stack: the function, its stream event source (filter, failure reporting,
retries, destination), its failure queue and alarms, and a role that may do what the reaper does and nothing else."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from infra.components import reaper as reaper_component
from infra.config import ConfigError, stage_config

from baton_checkpoints.settings import environment_name
from baton_checkpoints.store import layout, schema
from tests.infrastructure.conftest import Synthesized, as_list, render, synthesize_app

EVENTS = Path(__file__).resolve().parents[2] / "events"
STREAM_VIEW = "NEW_AND_OLD_IMAGES"
STREAM_RETENTION_SECONDS = 24 * 3600
"""DynamoDB keeps stream records 24 hours: a record older than that cannot be retried, nor read again."""


def _id(synthesized: Synthesized, construct: Any) -> str:
    return synthesized.logical_id(construct)


def _reaper(synthesized: Synthesized) -> dict[str, Any]:
    return dict(synthesized.resource(synthesized.stack.reaper.function)["Properties"])


def _api(synthesized: Synthesized) -> dict[str, Any]:
    return dict(synthesized.resource(synthesized.stack.functions.api)["Properties"])


def _mapping(synthesized: Synthesized) -> dict[str, Any]:
    mappings = synthesized.of_type("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 1, sorted(mappings)
    return dict(next(iter(mappings.values()))["Properties"])


def _role_statements(synthesized: Synthesized, role: Any) -> list[dict[str, Any]]:
    """Every statement of every policy attached to `role`."""
    role_ref = {"Ref": _id(synthesized, role)}
    return [
        statement
        for resource in synthesized.resources.values()
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        and role_ref in resource["Properties"].get("Roles", [])
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def _grants(synthesized: Synthesized, role: Any) -> dict[str, set[str]]:
    """action -> the resources it is granted on (rendered), over every statement of the role's policies."""
    grants: dict[str, set[str]] = {}
    for statement in _role_statements(synthesized, role):
        assert statement["Effect"] == "Allow", statement
        # Only the usage counts' grant is narrowed by a condition (`test_the_reaper_updates_tenants_own_items_only`)
        assert "Condition" not in statement or statement.get("Sid") == "TenantCounts", statement
        for action in as_list(statement["Action"]):
            grants.setdefault(action, set()).update(render(r) for r in as_list(statement["Resource"]))
    return grants


# -- the function -----------------------------------------------------------------------------------------------


def test_the_reaper_runs_the_api_functions_code_runtime_and_architecture(dev: Synthesized) -> None:
    reaper, api = _reaper(dev), _api(dev)
    assert reaper["Handler"] == reaper_component.HANDLER == "baton_checkpoints.handlers.reaper.handler"
    for setting in ("Runtime", "Architectures", "Code"):
        assert reaper[setting] == api[setting], setting
    # And the handler it names resolves to a callable in the package Lambda receives
    module_name, _, attribute = reaper["Handler"].rpartition(".")
    assert callable(getattr(importlib.import_module(module_name), attribute))


def test_the_reaper_has_its_own_role_and_log_group(synthesized: Synthesized) -> None:
    reaper, api = _reaper(synthesized), _api(synthesized)
    stack = synthesized.stack
    assert reaper["Role"] == {"Fn::GetAtt": [_id(synthesized, stack.reaper.role), "Arn"]}
    assert reaper["Role"] != api["Role"]
    assert reaper["LoggingConfig"] == {
        "LogFormat": "JSON",
        "LogGroup": {"Ref": _id(synthesized, stack.reaper.log_group)},
    }
    log_group = synthesized.resource(stack.reaper.log_group)
    api_log_group = synthesized.resource(stack.functions.log_group)
    # Kept as long as the api's logs, and kept or removed with the stack alike
    assert log_group["Properties"]["RetentionInDays"] == api_log_group["Properties"]["RetentionInDays"]
    assert log_group["DeletionPolicy"] == api_log_group["DeletionPolicy"]


def test_the_reaper_is_traced_with_x_ray_as_the_api_is(synthesized: Synthesized) -> None:
    assert _reaper(synthesized)["TracingConfig"] == {"Mode": "Active"} == _api(synthesized)["TracingConfig"]


def test_the_reaper_is_configured_by_the_settings_it_reads(dev: Synthesized) -> None:
    variables = _reaper(dev)["Environment"]["Variables"]
    table_id, bucket_id = _id(dev, dev.stack.storage.table), _id(dev, dev.stack.storage.bucket)
    assert variables == {
        environment_name("table_name"): {"Ref": table_id},
        environment_name("bucket_name"): {"Ref": bucket_id},
        environment_name("service_name"): "baton",
        environment_name("event_bus_name"): {"Ref": _id(dev, dev.stack.reaper.bus)},
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


def test_the_reaper_has_time_for_a_whole_batch(dev: Synthesized) -> None:
    reaper = _reaper(dev)
    assert reaper["Timeout"] == reaper_component.TIMEOUT.to_seconds() >= 60
    assert reaper["MemorySize"] == reaper_component.MEMORY_MB


# -- the event source -------------------------------------------------------------------------------------------


def test_the_event_source_reads_the_tables_stream_of_both_images(dev: Synthesized) -> None:
    mapping = _mapping(dev)
    table = dev.resource(dev.stack.storage.table)["Properties"]
    assert table["StreamSpecification"] == {"StreamViewType": STREAM_VIEW}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [_id(dev, dev.stack.storage.table), "StreamArn"]}
    assert mapping["FunctionName"] == {"Ref": _id(dev, dev.stack.reaper.function)}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"


def test_the_event_source_reports_failed_records_and_bisects_failing_batches(dev: Synthesized) -> None:
    mapping = _mapping(dev)
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True


def test_the_event_source_retries_a_bounded_number_of_times_within_the_streams_retention(dev: Synthesized) -> None:
    mapping = _mapping(dev)
    # -1 (the default) would retry a failing record until the stream drops it, blocking its shard for a day
    assert 1 <= mapping["MaximumRetryAttempts"] <= 20
    # Given up early enough that the failed range can still be read again from the stream
    assert 60 <= mapping["MaximumRecordAgeInSeconds"] <= STREAM_RETENTION_SECONDS // 2


def test_the_failure_queue_is_kept_where_the_stage_keeps_its_data(synthesized: Synthesized) -> None:
    queue = synthesized.resource(synthesized.stack.reaper.failures)
    kept = "Retain" if synthesized.config.name == "prod" else "Delete"
    assert queue["DeletionPolicy"] == queue["UpdateReplacePolicy"] == kept


def test_records_given_up_on_go_to_an_encrypted_queue_that_refuses_plain_http(dev: Synthesized) -> None:
    mapping = _mapping(dev)
    queue_id = _id(dev, dev.stack.reaper.failures)
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}}
    queue = dev.resources[queue_id]["Properties"]
    assert queue.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue
    denials = [
        statement
        for policy in dev.of_type("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in policy["Properties"]["Queues"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny"
    ]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denials), denials


def _matches(pattern: Any, value: Any) -> bool:
    """Lambda's event filtering for what Baton's pattern uses: a map descends into the event, a list of values and
    `prefix` rules matches a string that equals one value or begins with one prefix."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(k in value and _matches(p, value[k]) for k, p in pattern.items())
    assert isinstance(pattern, list), pattern
    for rule in pattern:
        if isinstance(rule, dict):
            assert list(rule) == ["prefix"], rule  # the only rule the reaper's filter uses
            argument = rule["prefix"]
            if isinstance(value, str) and value.startswith(argument):
                return True
        elif value == rule:
            return True
    return False


def _sample_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in sorted(EVENTS.glob("stream_*.json")):
        records += json.loads(path.read_text(encoding="utf-8"))["Records"]
    return records


def test_the_filter_delivers_checkpoint_blob_and_thread_records_only(dev: Synthesized) -> None:
    # Given the event source's filter, as deployed
    (only_filter,) = _mapping(dev)["FilterCriteria"]["Filters"]
    pattern = json.loads(only_filter["Pattern"])
    assert pattern == {
        "eventName": ["INSERT", "MODIFY", "REMOVE"],
        "dynamodb": {"Keys": {schema.PK: {"S": [{"prefix": "C#"}, {"prefix": "B#"}, {"prefix": "H#"}]}}},
    }
    # Then every sample record reaches the function, a thread's among them
    samples = _sample_records()
    assert len(samples) >= 6
    assert any(r["dynamodb"]["Keys"]["pk"]["S"].startswith("H#") for r in samples)
    assert all(_matches(pattern, r) for r in samples)
    # And records of keys, idempotency records and anything else do not
    for pk in ("K#" + "0" * 64, "D#acme#operator#step-3", "T#acme#keys", "c#lowercase", "XC#acme#s", "h#acme#a#t"):
        other = json.loads(json.dumps(samples[0]))
        other["dynamodb"]["Keys"]["pk"]["S"] = pk
        assert not _matches(pattern, other), pk
    unknown = json.loads(json.dumps(samples[0]))
    unknown["eventName"] = "TRUNCATE"
    assert not _matches(pattern, unknown)


# -- the role ---------------------------------------------------------------------------------------------------


def test_the_reapers_role_grants_exactly_what_the_reaper_does(dev: Synthesized) -> None:
    stack = dev.stack
    table = "${" + _id(dev, stack.storage.table) + ".Arn}"
    stream = "${" + _id(dev, stack.storage.table) + ".StreamArn}"
    bucket = "${" + _id(dev, stack.storage.bucket) + ".Arn}"
    blob_prefix = bucket + "/" + schema.BLOB_PREFIX + "*"
    log_group = "${" + _id(dev, stack.reaper.log_group) + ".Arn}"
    queue = "${" + _id(dev, stack.reaper.failures) + ".Arn}"
    bus = "${" + _id(dev, stack.reaper.bus) + ".Arn}"
    assert _grants(dev, stack.reaper.role) == {
        # Its own calls: the checkpoint and blob records it reads and deletes, on the table alone (no index)
        "dynamodb:GetItem": {table},
        "dynamodb:Query": {table},
        "dynamodb:DeleteItem": {table},
        "dynamodb:BatchWriteItem": {table},
        # The usage counts: tenants' own items only (the condition is checked below)
        "dynamodb:UpdateItem": {table},
        # Only under the blob prefix: delete what the table let go of, retag what it took up; no read, no write
        "s3:DeleteObject": {blob_prefix},
        "s3:PutObjectTagging": {blob_prefix},
        # And list the bucket, so that retagging an object already gone is NoSuchKey (which the reaper expects),
        # not AccessDenied
        "s3:ListBucket": {bucket},
        # Its traces (X-Ray's writes have no resource-level permission)
        "xray:PutTraceSegments": {"*"},
        "xray:PutTelemetryRecords": {"*"},
        # The event source's: reading the stream (ListStreams has no resource-level permission)
        "dynamodb:DescribeStream": {stream},
        "dynamodb:GetRecords": {stream},
        "dynamodb:GetShardIterator": {stream},
        "dynamodb:ListStreams": {"*"},
        # The change events, on the stack's bus only
        "events:PutEvents": {bus},
        # The on-failure destination
        "sqs:SendMessage": {queue},
        "sqs:GetQueueAttributes": {queue},
        "sqs:GetQueueUrl": {queue},
        "logs:CreateLogStream": {log_group},
        "logs:PutLogEvents": {log_group},
    }


def test_the_reaper_updates_tenants_own_items_only(dev: Synthesized) -> None:
    statements = [
        statement
        for policy in dev.of_type("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "TenantCounts"
    ]
    assert len(statements) == 1
    assert statements[0]["Action"] == "dynamodb:UpdateItem"
    assert statements[0]["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["L#*"]}}
    assert layout.tenant_key("acme")["pk"]["S"].startswith("L#")


def test_the_reapers_role_is_assumed_by_lambda_only_and_has_no_managed_policy(dev: Synthesized) -> None:
    role = dev.resource(dev.stack.reaper.role)["Properties"]
    assert not role.get("ManagedPolicyArns")
    assert not role.get("Policies")
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]


def test_the_api_gains_nothing_from_the_reaper(dev: Synthesized) -> None:
    granted = _grants(dev, dev.stack.functions.role)
    assert not {a for a in granted if a.startswith("sqs:")}
    assert not {"dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"} & set(granted)


# -- what to watch ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alarm", ["FailedRecords", "StreamBehind", "Errors", "FailureDeliveries", "ErrorLines"])
def test_the_reapers_alarms_notify_the_alarm_topic_when_there_is_one(
    dev: Synthesized, overrides: Synthesized, alarm: str
) -> None:
    for synthesized in (dev, overrides):
        (found,) = [a for a in synthesized.stack.reaper.alarms if a.node.id == alarm]
        properties = synthesized.resource(found)["Properties"]
        topic = synthesized.stack.monitoring.topic
        if topic is None:
            assert "AlarmActions" not in properties
        else:
            assert properties["AlarmActions"] == [{"Ref": _id(synthesized, topic)}]
    assert overrides.stack.monitoring.topic is not None


def test_the_failed_records_alarm_watches_the_failure_queue(dev: Synthesized) -> None:
    (alarm,) = [a for a in dev.stack.reaper.alarms if a.node.id == "FailedRecords"]
    properties = dev.resource(alarm)["Properties"]
    assert properties["Namespace"] == "AWS/SQS"
    assert properties["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert properties["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [_id(dev, dev.stack.reaper.failures), "QueueName"]}}
    ]
    assert properties["Threshold"] == 1


def _reaper_alarm(synthesized: Synthesized, name: str) -> dict[str, Any]:
    (alarm,) = [a for a in synthesized.stack.reaper.alarms if a.node.id == name]
    return dict(synthesized.resource(alarm)["Properties"])


def test_the_errors_alarm_counts_the_reapers_failed_invocations(synthesized: Synthesized) -> None:
    properties = _reaper_alarm(synthesized, "Errors")
    assert (properties["Namespace"], properties["MetricName"], properties["Statistic"]) == (
        "AWS/Lambda",
        "Errors",
        "Sum",
    )
    assert properties["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": _id(synthesized, synthesized.stack.reaper.function)}}
    ]
    assert properties["Threshold"] == 1


def test_the_failure_deliveries_alarm_counts_records_that_missed_the_failure_queue(synthesized: Synthesized) -> None:
    # Records given up on go to the failure queue (FailedRecords watches it); those Lambda could not send there are
    # lost but for this metric
    properties = _reaper_alarm(synthesized, "FailureDeliveries")
    assert (properties["Namespace"], properties["MetricName"], properties["Statistic"]) == (
        "AWS/Lambda",
        "DestinationDeliveryFailures",
        "Sum",
    )
    assert properties["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": _id(synthesized, synthesized.stack.reaper.function)}}
    ]
    assert properties["Threshold"] == 1


def test_the_change_events_go_to_the_stacks_bus_or_the_one_the_context_names(dev: Synthesized, tmp_path: Path) -> None:
    # The stack's own bus, by default
    buses = dev.of_type("AWS::Events::EventBus")
    assert [bus["Properties"]["Name"] for bus in buses.values()] == ["baton-dev-changes"]
    assert dev.json["Outputs"]["EventBusName"]["Value"] == {"Ref": _id(dev, dev.stack.reaper.bus)}
    # A bus the context names: the stack creates none, and the reaper publishes there
    app, named = synthesize_app(
        tmp_path, {"stage": "dev", "event_bus_name": "acme-integrations", "tenant_requests_per_minute": "1200"}
    )
    assert named.resolve(named.reaper.bus.event_bus_name) == "acme-integrations"
    assert named.reaper.bus.node.default_child is None
    # (and every context key reaches the stack, a tenant's default limits too)
    template = app.synth().get_stack_by_name(named.stack_name).template
    variables = [
        resource["Properties"].get("Environment", {}).get("Variables", {})
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
    ]
    assert {"1200"} == {
        v[environment_name("tenant_requests_per_minute")]
        for v in variables
        if v.get("BATON_TABLE_NAME") and environment_name("tenant_requests_per_minute") in v
    }
    assert any(v.get(environment_name("event_bus_name")) == "acme-integrations" for v in variables)
    by_arn = "arn:aws:events:us-east-1:123456789012:event-bus/acme"
    assert stage_config({"event_bus_name": by_arn}).event_bus_name == by_arn
    # A bus given by ARN (another account's, say) is published to by its ARN
    arn_app, arn_stack = synthesize_app(tmp_path / "arn", {"stage": "dev", "event_bus_name": by_arn})
    arn_template = arn_app.synth().get_stack_by_name(arn_stack.stack_name).template
    assert any(
        resource["Properties"].get("Environment", {}).get("Variables", {}).get(environment_name("event_bus_name"))
        == by_arn
        for resource in arn_template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
    )
    with pytest.raises(ConfigError, match="event_bus_name"):
        stage_config({"event_bus_name": "no spaces allowed"})
