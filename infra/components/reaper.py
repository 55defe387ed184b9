"""The reaper function: consumes the table's stream and keeps the bucket in step with it
(`baton_checkpoints.store.reaping`).

Same code asset, runtime and architecture as the api function, traced with X-Ray as it is; its own log group and its
own role, which may only read and delete what the reaper reads and deletes: a checkpoint or blob record (GetItem,
DeleteItem), the items of a LangGraph thread (Query, DeleteItem, BatchWriteItem), and update tenants' own items only
(UpdateItem where every leading key is `L#...`: the usage counts), publish to the change events' bus, objects under
the blob prefix (DeleteObject, PutObjectTagging; ListBucket on the bucket so that a missing key is a 404), the stream
(granted by the event source) and the failure queue. Its alarms: records given up on, records that could not even be
given up on, the function failing, lag behind the stream, and any ERROR line it logs.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from baton_checkpoints.settings import environment_name
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.reaping import STREAM_EVENT_NAMES, STREAM_ITEM_PREFIXES
from infra.components.functions import LIST_ACTIONS, RUNTIME, function_code
from infra.components.monitoring import error_lines_alarm, stage_alarm
from infra.config import StageConfig
from infra.nag import acknowledge, logical_id

HANDLER: Final = "baton_checkpoints.handlers.reaper.handler"
BUS_DESCRIPTION: Final = "Baton change events: checkpoints saved, closed, deleted, expired; leases; threads deleted"
TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
"""Reading a checkpoint as it is now, its kept revisions and a blob's record; deleting a released blob's record and
the revisions of a checkpoint that is gone; listing and deleting the items of a thread's ended generation."""
BUCKET_ACTIONS: Final = ("s3:DeleteObject", "s3:PutObjectTagging")
"""Deleting what the table let go of; retagging what it took up `attached`."""
MEMORY_MB: Final = 512
TIMEOUT: Final = Duration.minutes(2)
"""A batch of `BATCH_SIZE` records makes a few S3 and DynamoDB calls each, botocore's retries included."""
BATCH_SIZE: Final = 100
BATCHING_WINDOW: Final = Duration.seconds(5)
RETRY_ATTEMPTS: Final = 10
MAX_RECORD_AGE: Final = Duration.hours(6)
"""A record still failing after this goes to the failure queue: DynamoDB keeps stream records 24 hours, so an
operator has 18 hours to read the failed range again (docs/operations.md)."""
FAILURE_RETENTION: Final = Duration.days(14)
ALARM_PERIOD: Final = Duration.minutes(1)
EVENT_NAMES: Final = STREAM_EVENT_NAMES
ITEM_PREFIXES: Final = STREAM_ITEM_PREFIXES


def stream_filter() -> dict[str, Any]:
    """The event source's filter pattern: only the records the reaper acts on reach (and bill) the function."""
    return {
        "eventName": list(EVENT_NAMES),
        "dynamodb": {"Keys": {schema.PK: {"S": [{"prefix": prefix} for prefix in ITEM_PREFIXES]}}},
    }


class Reaper(Construct):
    """The reaper function, its log group, its role, the stream event source and its failure queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        table: dynamodb.Table,
        bucket: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        # The change events' bus: an existing one the context names, else the stack's own
        if config.event_bus_name:
            if config.event_bus_name.startswith("arn:"):
                self.bus = events.EventBus.from_event_bus_arn(self, "ChangeEvents", config.event_bus_name)
            else:
                self.bus = events.EventBus.from_event_bus_name(self, "ChangeEvents", config.event_bus_name)
        else:
            self.bus = events.EventBus(
                self, "ChangeEvents", event_bus_name=f"baton-{config.name}-changes", description=BUS_DESCRIPTION
            )
        self.log_group = logs.LogGroup(
            self, "ReaperLogs", retention=config.log_retention, removal_policy=config.removal_policy
        )
        self.role = iam.Role(
            self,
            "ReaperRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Baton reaper function: its table's stream and records, its bucket prefix, its logs.",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="Table", actions=list(TABLE_ACTIONS), resources=[table.table_arn])
        )
        self.role.add_to_policy(
            # Counting what each tenant stores (`store/metering.py`): a transaction of UpdateItems of tenants' own
            # items, and of nothing else (every item the request names must have a partition key `L#...`).
            iam.PolicyStatement(
                sid="TenantCounts",
                actions=["dynamodb:UpdateItem"],
                resources=[table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{layout.TENANT_PK_PREFIX}*"]}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="BlobPrefix",
                actions=list(BUCKET_ACTIONS),
                resources=[f"{bucket.bucket_arn}/{schema.BLOB_PREFIX}*"],
            )
        )
        self.role.add_to_policy(
            # As the api's: so that retagging an object already gone is `NoSuchKey`, which the reaper expects, and
            # not `AccessDenied`, which would fail the record until it is given up on (`functions.LIST_ACTIONS`).
            iam.PolicyStatement(sid="MissingKeysAre404", actions=list(LIST_ACTIONS), resources=[bucket.bucket_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="ChangeEvents", actions=["events:PutEvents"], resources=[self.bus.event_bus_arn])
        )
        self.failures = sqs.Queue(
            self,
            "Failures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=FAILURE_RETENTION,
            removal_policy=config.removal_policy,
        )
        self.function = lambda_.Function(
            self,
            "Reaper",
            description="Baton reaper: deletes and retags blob objects as the table's stream says",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER,
            code=function_code(),
            memory_size=MEMORY_MB,
            timeout=TIMEOUT,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            # As the api function: each batch's invocation and its AWS calls show in X-Ray (CDK grants the two
            # X-Ray writes, which support no resource-level permissions).
            tracing=lambda_.Tracing.ACTIVE,
            environment={
                environment_name("table_name"): table.table_name,
                environment_name("bucket_name"): bucket.bucket_name,
                environment_name("service_name"): "baton",
                # A bus given by ARN is published to by its ARN (its name alone would name a bus of this account)
                environment_name("event_bus_name"): self.bus.event_bus_arn
                if (config.event_bus_name or "").startswith("arn:")
                else self.bus.event_bus_name,
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        )
        self.event_source = event_sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=BATCH_SIZE,
            max_batching_window=BATCHING_WINDOW,
            bisect_batch_on_error=True,
            retry_attempts=RETRY_ATTEMPTS,
            max_record_age=MAX_RECORD_AGE,
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(self.failures),
            filters=[lambda_.FilterCriteria.filter(stream_filter())],
        )
        self.function.add_event_source(self.event_source)
        self.alarms = [
            stage_alarm(
                self,
                "FailedRecords",
                self.failures.metric_approximate_number_of_messages_visible(period=ALARM_PERIOD, statistic="Maximum"),
                1,
                config,
                "the reaper gave up on stream records (see its failure queue); objects they name may be left behind.",
            ),
            stage_alarm(
                self,
                "StreamBehind",
                self.function.metric("IteratorAge", period=ALARM_PERIOD, statistic="Maximum"),
                Duration.hours(1).to_milliseconds(),
                config,
                "the reaper is more than an hour behind the table's stream.",
            ),
            stage_alarm(
                self,
                "Errors",
                self.function.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
                1,
                config,
                "the reaper function failed (a crash or a timeout: it reports a failing record without failing); "
                "its batch is retried, bisected, and given up on to the failure queue.",
            ),
            stage_alarm(
                self,
                "FailureDeliveries",
                self.function.metric("DestinationDeliveryFailures", period=ALARM_PERIOD, statistic="Sum"),
                1,
                config,
                "records the reaper gave up on could not be sent to its failure queue: their objects may be left "
                "behind with no trace but this alarm.",
            ),
            error_lines_alarm(self, "ErrorLines", self.log_group, config, "reaper"),
        ]
        self._acknowledge(bucket)

    def _acknowledge(self, bucket: s3.Bucket) -> None:
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to python3.13 like the api function, the runtime Baton's dependencies and tests target; an "
            "upgrade is a deliberate change with its own tests.",
        )
        acknowledge(
            self.failures,
            "AwsSolutions-SQS3",
            "This queue is itself the reaper's on-failure destination (a dead-letter queue for stream records); a "
            "queue behind it would only move the same messages again.",
        )
        bucket_id = logical_id(bucket)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{schema.BLOB_PREFIX}*]",
            "The reaper deletes and retags objects anywhere under the blob prefix of Baton's own bucket (every "
            "tenant's blobs and states), and nowhere else.",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "dynamodb:ListStreams, which the stream event source grants, and X-Ray's PutTraceSegments and "
            "PutTelemetryRecords, which active tracing grants, support no resource-level permissions.",
        )
