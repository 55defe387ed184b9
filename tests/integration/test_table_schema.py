"""The table moto holds is the one `baton_checkpoints.store.schema` describes (and the CDK stack deploys)."""

from __future__ import annotations

from typing import Any

import pytest

from baton_checkpoints.store import schema
from tests.integration.conftest import TABLE

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""


def _key_schema(entries: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(e["AttributeName"], e["KeyType"]) for e in entries]


def _projection(projection: dict[str, Any]) -> tuple[str, frozenset[str]]:
    return projection["ProjectionType"], frozenset(projection.get("NonKeyAttributes", []))


def _indexes(entries: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {i["IndexName"]: (_key_schema(i["KeySchema"]), _projection(i["Projection"])) for i in entries}


def test_the_table_matches_the_schema_module(aws: Any) -> None:
    # Given what the schema module asks CreateTable for
    wanted = schema.create_table_request(TABLE)
    # When the table moto holds is described
    table = aws.describe_table(TableName=TABLE)["Table"]
    # Then its keys, attribute definitions, indexes, billing and stream are the same
    assert _key_schema(table["KeySchema"]) == _key_schema(wanted["KeySchema"])
    assert _key_schema(table["KeySchema"]) == [(schema.PK, "HASH"), (schema.SK, "RANGE")]
    assert sorted((a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]) == sorted(
        (a["AttributeName"], a["AttributeType"]) for a in wanted["AttributeDefinitions"]
    )
    assert _indexes(table.get("GlobalSecondaryIndexes", [])) == _indexes(wanted["GlobalSecondaryIndexes"])
    assert not table.get("LocalSecondaryIndexes")  # a save never moves an index entry (see store/layout.py)
    assert "LocalSecondaryIndexes" not in wanted
    assert table["BillingModeSummary"]["BillingMode"] == wanted["BillingMode"]
    assert table["StreamSpecification"] == wanted["StreamSpecification"]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_the_schema_names_every_index_the_store_uses(aws: Any) -> None:
    # Given the described table
    table = aws.describe_table(TableName=TABLE)["Table"]
    names = {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", []) + table.get("LocalSecondaryIndexes", [])}
    # Then the indexes the store queries exist under the names it uses
    assert names == {schema.GSI1}


def test_ttl_is_enabled_on_the_schema_attribute(aws: Any) -> None:
    # Given the table
    # When its time-to-live setting is described
    ttl = aws.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    # Then DynamoDB's TTL is on, on the attribute the store writes
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": schema.TTL_ATTRIBUTE}
    assert schema.TTL_ATTRIBUTE == "ttl"


def test_ensure_table_leaves_an_existing_table_alone(aws: Any) -> None:
    # Given the table the fixture created
    before = aws.describe_table(TableName=TABLE)["Table"]["CreationDateTime"]
    # When ensure_table runs again
    created = schema.ensure_table(aws, TABLE)
    # Then it reports that nothing was created, and the table is the same one
    assert created is False
    assert aws.describe_table(TableName=TABLE)["Table"]["CreationDateTime"] == before
