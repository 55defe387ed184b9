"""The table and the blob bucket: what the template deploys, and that the table is the one the code and moto use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
import pytest
from moto import mock_aws

from baton_checkpoints.store import schema
from tests.infrastructure.conftest import Synthesized, as_list, render

# Normalized table shapes: comparable whatever the order of lists, and whether they come from CreateTable
# arguments, a CloudFormation template or DescribeTable.


def _key_schema(entries: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((e["AttributeName"], e["KeyType"]) for e in entries)


def _attributes(entries: list[dict[str, str]]) -> frozenset[tuple[str, str]]:
    return frozenset((a["AttributeName"], a["AttributeType"]) for a in entries)


def _indexes(entries: list[dict[str, Any]] | None) -> dict[str, tuple[Any, ...]]:
    return {
        i["IndexName"]: (
            _key_schema(i["KeySchema"]),
            i["Projection"]["ProjectionType"],
            frozenset(i["Projection"].get("NonKeyAttributes", [])),
        )
        for i in entries or []
    }


def _shape(table: Mapping[str, Any]) -> dict[str, Any]:
    """Keys, attribute definitions and indexes: what the store depends on."""
    return {
        "keys": _key_schema(table["KeySchema"]),
        "attributes": _attributes(table["AttributeDefinitions"]),
        "global_indexes": _indexes(table.get("GlobalSecondaryIndexes")),
        "local_indexes": _indexes(table.get("LocalSecondaryIndexes")),
    }


def _table(synthesized: Synthesized) -> dict[str, Any]:
    logical_id, table = synthesized.only("AWS::DynamoDB::Table")
    assert logical_id == synthesized.logical_id(synthesized.stack.storage.table)
    return table


def _blob_bucket(synthesized: Synthesized) -> dict[str, Any]:
    return synthesized.resource(synthesized.stack.storage.bucket)


def _bucket_policy_statements(synthesized: Synthesized, bucket_id: str) -> list[dict[str, Any]]:
    policies = [
        p
        for p in synthesized.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert len(policies) == 1, f"expected one bucket policy on {bucket_id}"
    return list(policies[0]["Properties"]["PolicyDocument"]["Statement"])


# The table.


def test_table_bills_on_demand_with_point_in_time_recovery(synthesized: Synthesized) -> None:
    # Given the synthesized table
    properties = _table(synthesized)["Properties"]
    # Then it is billed per request and can be restored to any point in time
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in properties
    assert properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_table_expires_items_on_the_schema_ttl_attribute(synthesized: Synthesized) -> None:
    # Given the synthesized table
    properties = _table(synthesized)["Properties"]
    # Then DynamoDB's TTL is on, on the attribute the store writes
    assert properties["TimeToLiveSpecification"] == {"AttributeName": schema.TABLE.ttl_attribute, "Enabled": True}


def test_table_streams_new_and_old_images_for_the_reaper(synthesized: Synthesized) -> None:
    # Given the synthesized table
    properties = _table(synthesized)["Properties"]
    # Then it streams both images of every change
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_table_is_encrypted_at_rest_with_kms(synthesized: Synthesized) -> None:
    # Given the synthesized table
    sse = _table(synthesized)["Properties"]["SSESpecification"]
    # Then server-side encryption is on; with SSEEnabled, CloudFormation's SSE type is KMS (the only one it accepts)
    assert sse["SSEEnabled"] is True
    assert sse.get("SSEType", "KMS") == "KMS"


def test_prod_table_is_retained_and_protected_from_deletion(prod: Synthesized) -> None:
    # Given the prod stage's table
    table = _table(prod)
    # Then neither a stack deletion nor a replacement nor a stray DeleteTable can take the data
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_dev_table_is_deleted_with_its_stack(dev: Synthesized) -> None:
    # Given the dev stage's table
    table = _table(dev)
    # Then tearing the stack down removes it, and nothing protects it from that
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"].get("DeletionProtectionEnabled", False) is False


def test_table_keys_attributes_and_indexes_are_the_schema_modules(synthesized: Synthesized) -> None:
    # Given what the schema module asks CreateTable for
    wanted = schema.create_table_request("x")
    # When the template's table is compared with it
    properties = _table(synthesized)["Properties"]
    # Then the key schema, attribute definitions, global and local indexes (keys and projections) are the same
    assert _shape(properties) == _shape(wanted)
    assert properties["BillingMode"] == wanted["BillingMode"]
    assert properties["StreamSpecification"]["StreamViewType"] == wanted["StreamSpecification"]["StreamViewType"]


def test_table_indexes_project_the_schemas_non_key_attributes(dev: Synthesized) -> None:
    # Given the template's indexes, by name
    properties = _table(dev)["Properties"]
    indexes = _indexes(properties["GlobalSecondaryIndexes"]) | _indexes(properties.get("LocalSecondaryIndexes"))
    # Then each index the schema defines exists with its keys and an INCLUDE projection of its summary attributes
    for index in (*schema.TABLE.global_indexes, *schema.TABLE.local_indexes):
        keys, projection, non_key = indexes[index.name]
        assert keys == ((index.partition_key, "HASH"), (index.sort_key, "RANGE"))
        assert projection == "INCLUDE"
        assert non_key == frozenset(index.non_key_attributes)
    assert set(indexes) == {i.name for i in (*schema.TABLE.global_indexes, *schema.TABLE.local_indexes)}


def test_moto_table_and_template_table_have_the_same_keys_attributes_ttl_and_indexes(dev: Synthesized) -> None:
    # Given the table of the integration tests, created in moto by the same function
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        assert schema.ensure_table(client, "baton-infra-test") is True
        # When moto describes it
        described = client.describe_table(TableName="baton-infra-test")["Table"]
        ttl = client.describe_time_to_live(TableName="baton-infra-test")["TimeToLiveDescription"]
    # Then its keys, attribute definitions and indexes are the template's
    properties = _table(dev)["Properties"]
    assert _shape(described) == _shape(properties)
    # And so is its TTL attribute (enabled in both)
    assert ttl == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": properties["TimeToLiveSpecification"]["AttributeName"],
    }
    assert properties["TimeToLiveSpecification"]["Enabled"] is True
    # And both stream new and old images
    assert described["StreamSpecification"]["StreamViewType"] == properties["StreamSpecification"]["StreamViewType"]


# The blob bucket (and the bucket of its access logs).


@pytest.mark.parametrize("which", ["blobs", "access_logs"])
def test_buckets_block_every_kind_of_public_access(synthesized: Synthesized, which: str) -> None:
    # Given one of the stack's buckets
    bucket = synthesized.resource(getattr(synthesized.stack.storage, "bucket" if which == "blobs" else which))
    # Then all four public access blocks are on
    assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }


@pytest.mark.parametrize("which", ["blobs", "access_logs"])
def test_buckets_deny_every_request_without_tls(synthesized: Synthesized, which: str) -> None:
    # Given one of the stack's buckets and its bucket policy
    construct = getattr(synthesized.stack.storage, "bucket" if which == "blobs" else which)
    bucket_id = synthesized.logical_id(construct)
    statements = _bucket_policy_statements(synthesized, bucket_id)
    # When the statements denying insecure transport are picked
    denials = [
        s
        for s in statements
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    # Then one denies every S3 action, to everyone, on the bucket and every object in it
    assert len(denials) == 1
    denial = denials[0]
    assert as_list(denial["Action"]) == ["s3:*"]
    assert denial["Principal"] in ({"AWS": "*"}, "*")
    resources = {render(r) for r in as_list(denial["Resource"])}
    assert resources == {f"${{{bucket_id}.Arn}}", f"${{{bucket_id}.Arn}}/*"}


@pytest.mark.parametrize("which", ["blobs", "access_logs"])
def test_buckets_are_encrypted_at_rest(synthesized: Synthesized, which: str) -> None:
    # Given one of the stack's buckets
    bucket = synthesized.resource(getattr(synthesized.stack.storage, "bucket" if which == "blobs" else which))
    # Then default encryption is configured
    rules = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rules
    assert all(r["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms") for r in rules)


def test_blob_bucket_aborts_incomplete_multipart_uploads(synthesized: Synthesized) -> None:
    # Given the blob bucket's lifecycle rules
    rules = _blob_bucket(synthesized)["Properties"]["LifecycleConfiguration"]["Rules"]
    # Then an enabled rule aborts multipart uploads left incomplete
    aborts = [r for r in rules if "AbortIncompleteMultipartUpload" in r]
    assert len(aborts) == 1
    assert aborts[0]["Status"] == "Enabled"
    assert aborts[0]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] >= 1


def test_blob_bucket_expires_only_pending_blobs_after_the_schemas_days(synthesized: Synthesized) -> None:
    # Given the blob bucket's lifecycle rules
    rules = _blob_bucket(synthesized)["Properties"]["LifecycleConfiguration"]["Rules"]
    # When the rules that expire objects are picked
    expiring = [r for r in rules if "ExpirationInDays" in r or "ExpirationDate" in r]
    # Then exactly one does: only objects under the blob prefix still tagged pending, after the schema's days
    key, value = schema.PENDING_TAG
    assert len(expiring) == 1
    rule = expiring[0]
    assert rule["Status"] == "Enabled"
    assert rule["ExpirationInDays"] == schema.PENDING_EXPIRY_DAYS
    assert rule["Prefix"] == schema.BLOB_PREFIX
    assert rule["TagFilters"] == [{"Key": key, "Value": value}]


def test_blob_bucket_logs_server_access_to_the_access_log_bucket(synthesized: Synthesized) -> None:
    # Given the blob bucket and the access-log bucket
    bucket = _blob_bucket(synthesized)
    access_logs_id = synthesized.logical_id(synthesized.stack.storage.access_logs)
    # Then the blob bucket's server access logs go to the access-log bucket
    logging = bucket["Properties"]["LoggingConfiguration"]
    assert logging["DestinationBucketName"] == {"Ref": access_logs_id}
    assert access_logs_id != synthesized.logical_id(synthesized.stack.storage.bucket)


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_blob_bucket_has_no_cors_rule_without_cors_origins(request: pytest.FixtureRequest, name: str) -> None:
    # Given a stage synthesized without cors_origins
    synthesized: Synthesized = request.getfixturevalue(name)
    # Then browsers get no CORS access to the bucket
    assert "CorsConfiguration" not in _blob_bucket(synthesized)["Properties"]


def test_blob_bucket_allows_exactly_the_configured_origins(overrides: Synthesized) -> None:
    # Given a stage synthesized with cors_origins
    rules = _blob_bucket(overrides)["Properties"]["CorsConfiguration"]["CorsRules"]
    # Then every CORS rule of the bucket lists exactly those origins (the API's)
    assert rules
    for rule in rules:
        assert rule["AllowedOrigins"] == list(overrides.config.cors_origins)
        assert rule["AllowedOrigins"] == ["https://app.example.com"]
        assert "*" not in rule["AllowedOrigins"]


# What survives the stack.

STATEFUL_TYPES = ("AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::Logs::LogGroup", "AWS::SQS::Queue")


def _stateful(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """Every table, bucket, log group and queue of the stack, checked to be the ones it is meant to have."""
    stateful = {lid: r for t in STATEFUL_TYPES for lid, r in synthesized.of_type(t).items()}
    stack = synthesized.stack
    expected = (
        stack.storage.table,
        stack.storage.bucket,
        stack.storage.access_logs,
        stack.functions.log_group,
        stack.api.access_logs,
        stack.reaper.log_group,
        stack.reaper.failures,  # the stream records the reaper gave up on
    )
    assert set(stateful) == {synthesized.logical_id(construct) for construct in expected}
    return stateful


def test_prod_keeps_every_stateful_resource_when_the_stack_goes(prod: Synthesized) -> None:
    # Given every table, bucket, log group and queue of the prod stage
    stateful = _stateful(prod)
    # the table, the blob and access-log buckets, the api function's, the API's and the reaper's logs, the reaper's
    # failure queue
    assert len(stateful) == 7
    # Then deleting or replacing them through the stack leaves their data in place
    for logical_id, resource in stateful.items():
        assert resource.get("DeletionPolicy") == "Retain", logical_id
        assert resource.get("UpdateReplacePolicy") == "Retain", logical_id


def test_dev_removes_every_stateful_resource_with_the_stack(dev: Synthesized) -> None:
    # Given every table, bucket, log group and queue of the dev stage
    stateful = _stateful(dev)
    assert len(stateful) == 7
    # Then tearing the stack down removes them
    for logical_id, resource in stateful.items():
        assert resource.get("DeletionPolicy") == "Delete", logical_id
