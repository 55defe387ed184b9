"""Change events through EventBridge, as an integrator receives them: real writes through the api handler, the
engine's own stream records fed to the reaper function, which publishes to a bus (in-process moto's EventBridge); a
rule routes the tenant's events to an SQS queue the test reads. What is shown: each kind of change arrives with the
ids, revision and hash, never the state; a checkpoint removed by TTL or replaced after it expired is `expired`; a
publish that fails for a moment fails the batch and counts nothing, and the batch sent again publishes the same ids.
"""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from botocore.exceptions import ClientError

from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.store import layout, metering
from tests import proof_counts
from tests.builders import save
from tests.integration import test_reaper_history as history
from tests.integration.driver import ApiDriver
from tests.integration.test_metering import reap_once
from tests.integration.test_reaper_history import START, TENANT, World, _reaped

# The reaper history module's world: its fixtures, used here as they are there.
aws, stream, world, _warm_reaper = history.aws, history.stream, history.world, history._warm_reaper

pytestmark = pytest.mark.engines
SUITE = "change events (integration)"
BUS = "baton-test-changes"
STATE_MARK = "never-in-an-event"


class Integrator:
    """A rule on the bus that sends every Baton event of the tenant to a queue, and what the queue received."""

    def __init__(self) -> None:
        import boto3

        self.events = boto3.client("events", region_name="us-east-1")
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        with contextlib.suppress(ClientError):  # made by an earlier test of the module
            self.events.create_event_bus(Name=BUS)
        self.queue = self.sqs.create_queue(QueueName="integrator")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        pattern = {"source": ["baton"], "detail": {"tenant_id": [TENANT]}}
        self.events.put_rule(Name="tenant-acme", EventBusName=BUS, EventPattern=json.dumps(pattern))
        self.events.put_targets(Rule="tenant-acme", EventBusName=BUS, Targets=[{"Id": "queue", "Arn": arn}])
        self.received: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        """Every event received so far (the queue drained into `received`)."""
        while True:
            answer = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10)
            messages = answer.get("Messages", [])
            if not messages:
                return self.received
            for message in messages:
                self.received.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"])

    def kinds(self) -> list[str]:
        return [event["detail-type"] for event in self.read()]


@pytest.fixture
def integrator(world: World, monkeypatch: pytest.MonkeyPatch) -> Integrator:
    monkeypatch.setenv("BATON_EVENT_BUS_NAME", BUS)
    found = Integrator()
    found.read()
    found.received.clear()
    return found


def test_each_change_arrives_through_a_rule_with_ids_and_never_the_state(
    api: ApiDriver, world: World, integrator: Integrator
) -> None:
    first = save(api, subject_id="events-1", state={"note": STATE_MARK})
    checkpoint_id = first.data["checkpoint_id"]
    assert save(api, subject_id="events-1", state={"note": STATE_MARK, "step": 2}, status="completed").status == 200
    path = f"/v1/checkpoints/{checkpoint_id}"
    assert api.invoke("delete_checkpoint", path=path, headers={"if-match": None}).status == 200
    reap_once(world)
    assert integrator.kinds() == ["checkpoint.saved", "checkpoint.saved", "checkpoint.closed", "checkpoint.deleted"]
    saved = integrator.received[0]
    assert saved["source"] == "baton"
    assert saved["detail"]["checkpoint_id"] == checkpoint_id
    assert saved["detail"]["revision"] == 1
    assert saved["detail"]["state_hash"] == first.data["state_hash"]
    assert STATE_MARK not in json.dumps(integrator.received)
    proof_counts.record(SUITE, events=len(integrator.received))


def test_a_checkpoint_removed_by_ttl_or_replaced_after_it_expired_is_expired(
    api: ApiDriver, world: World, integrator: Integrator
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        first = save(api, subject_id="events-2", state={"step": 1}, ttl_seconds=60)
        reap_once(world)
        clock.shift(timedelta(seconds=61))
        again = save(api, subject_id="events-2", state={"step": 1})
        assert again.data["checkpoint_id"] != first.data["checkpoint_id"]
        reap_once(world)
    assert integrator.kinds()[-2:] == ["checkpoint.expired", "checkpoint.saved"]
    assert integrator.received[-2]["detail"]["checkpoint_id"] == first.data["checkpoint_id"]
    # And DynamoDB's own TTL removal of the item (its record names DynamoDB as the one who removed it)
    item = world.checkpoint_item("events-2")
    assert item is not None
    removal = {
        "eventID": "ttl-removal-1",
        "eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "Keys": {"pk": item["pk"], "sk": item["sk"]},
            "OldImage": _event_form(item),
            "SequenceNumber": "9",
        },
    }
    assert _reaped([removal]) == []
    assert integrator.kinds()[-1] == "checkpoint.expired"
    assert integrator.received[-1]["detail"]["checkpoint_id"] == again.data["checkpoint_id"]


def test_a_publish_that_fails_for_a_moment_fails_the_batch_and_its_retry_publishes_the_same_ids(
    api: ApiDriver, world: World, integrator: Integrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert save(api, subject_id="events-3", state={"step": 1}).status == 201
    batch = world.pending()
    counts_before = _counts(world)
    client: Any = reaper_function._events_client(None)
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "PutEvents")

    def refuse(**_: Any) -> Any:
        raise throttled

    with monkeypatch.context() as patched:
        patched.setattr(client, "put_events", refuse)
        assert _reaped(batch) == [batch[0]["dynamodb"]["SequenceNumber"]]
    # Nothing published, nothing counted
    assert integrator.kinds() == []
    assert _counts(world) == counts_before
    # And the batch sent again publishes its events, with ids that a delivery of it twice repeats exactly
    assert _reaped(batch) == []
    assert _reaped(batch) == []
    ids = [event["detail"]["event_id"] for event in integrator.read()]
    assert len(ids) == 2
    assert ids[0] == ids[1]


def _counts(world: World) -> dict[str, Any]:
    item = world.dynamodb.get_item(TableName=reaper_function.reaper().table, Key=layout.tenant_key(TENANT))
    return {name: value for name, value in item.get("Item", {}).items() if name in metering.FOOTPRINT_ATTRIBUTES}


def _event_form(item: dict[str, Any]) -> dict[str, Any]:
    """An item as the table gives it to boto3, in Lambda's event form (binaries as base64)."""
    import base64

    def convert(value: Any) -> Any:
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    converted: dict[str, Any] = convert(item)
    return converted
