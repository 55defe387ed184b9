"""The Baton stack: storage, functions, api, monitoring and the reaper, composed."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from aws_cdk import aws_cloudwatch_actions as actions
from constructs import Construct

from infra.components.api import Api
from infra.components.functions import Functions
from infra.components.monitoring import Monitoring
from infra.components.reaper import Reaper
from infra.components.storage import Storage
from infra.config import StageConfig


class BatonStack(Stack):
    """Everything one Baton deployment needs."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        Tags.of(self).add("baton:stage", config.name)
        self.storage = Storage(self, "Storage", config=config)
        self.functions = Functions(
            self,
            "Functions",
            config=config,
            table=self.storage.table,
            index_names=self.storage.index_names,
            bucket=self.storage.bucket,
        )
        self.api = Api(self, "Api", config=config, handler=self.functions.alias, removal_policy=config.removal_policy)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            http_api=self.api.http_api,
            function=self.functions.api,
            log_group=self.functions.log_group,
            table=self.storage.table,
        )
        self.reaper = Reaper(self, "Reaper", config=config, table=self.storage.table, bucket=self.storage.bucket)
        if self.monitoring.topic is not None:
            for alarm in self.reaper.alarms:
                alarm.add_alarm_action(actions.SnsAction(self.monitoring.topic))
                alarm.add_ok_action(actions.SnsAction(self.monitoring.topic))
        CfnOutput(self, "ApiUrl", value=self.api.stage.url, description="Base URL of the Baton API")
        CfnOutput(self, "TableName", value=self.storage.table.table_name, description="DynamoDB table")
        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name, description="Blob bucket")
        CfnOutput(
            self, "EventBusName", value=self.reaper.bus.event_bus_name, description="The change events' EventBridge bus"
        )
