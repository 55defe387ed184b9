"""Where moto and DynamoDB Local (AWS's own engine) answer the same request differently, each difference pinned on
both engines: what moto does, and what DynamoDB does. docs/testing.md ("Two engines") lists them and says why Baton
does not depend on moto's answer (or, where Baton did, what was fixed).

Only requests are made here, straight to the engine; Baton's own behaviour on both engines is the rest of the suite.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from baton_checkpoints.settings import SettingsError, load_settings
from baton_checkpoints.store.schema import create_table_request
from tests.integration.conftest import DYNAMODB_LOCAL, MOTO, TABLE

pytestmark = pytest.mark.engines
"""Every test runs on in-process moto and on DynamoDB Local (`conftest.py`)."""


def refusal(call: Any) -> str | None:
    """The engine's error message for `call`, None when it accepted it."""
    try:
        call()
    except ClientError as exc:
        return str(exc.response["Error"]["Message"])
    return None


def item(sk: str, **attributes: Any) -> dict[str, Any]:
    return {"pk": {"S": "differences"}, "sk": {"S": sk}, **attributes}


@pytest.mark.parametrize("name", ["t", "ab", "baton test", "baton/test"])
def test_a_table_name_dynamodb_refuses_is_accepted_by_moto_and_refused_by_baton_first(
    aws: Any, engine: str, name: str
) -> None:
    # When a table is created under a name of 1-2 characters, or with a character outside a-z A-Z 0-9 _ - .
    refused = refusal(lambda: aws.create_table(**create_table_request(name)))
    # Then DynamoDB refuses it; moto creates it
    if engine == DYNAMODB_LOCAL:
        assert refused is not None
        assert "Table/index names must be between 3 and 255 characters long" in refused
    else:
        assert refused is None
    # And Baton's settings refuse it before any request, on either engine (tests/unit/test_settings.py)
    with pytest.raises(SettingsError, match="BATON_TABLE_NAME"):
        load_settings({"BATON_TABLE_NAME": name})


def test_a_query_page_that_ends_the_partition_exactly_has_a_last_key_on_dynamodb_only(aws: Any, engine: str) -> None:
    # Given a partition of 4 items
    for n in range(4):
        aws.put_item(TableName=TABLE, Item=item(f"s{n}"))
    # When a Query with Limit 4 reads them all
    page = aws.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "differences"}},
        Limit=4,
        ConsistentRead=True,
    )
    assert len(page["Items"]) == 4
    # Then DynamoDB hands back a LastEvaluatedKey (the next Query finds nothing); moto leaves it out. Baton follows
    # the key either way: a purge of exactly 25 keys costs one more Query on DynamoDB (test_purge.py pins both)
    assert ("LastEvaluatedKey" in page) == (engine == DYNAMODB_LOCAL)


def test_consumed_capacity_is_dynamodbs_on_dynamodb_local_only(aws: Any, engine: str) -> None:
    # When a 3 KB item is put, and a 1.5 KB item with a gsi1 entry is put in a transaction
    put = aws.put_item(TableName=TABLE, Item=item("big", x={"S": "y" * 3_000}), ReturnConsumedCapacity="INDEXES")
    indexed = item("indexed", gpk={"S": "g"}, gsk={"S": "h"}, x={"S": "y" * 1_500})
    transaction = aws.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": indexed}}], ReturnConsumedCapacity="INDEXES"
    )
    read = aws.get_item(TableName=TABLE, Key=item("big"), ReturnConsumedCapacity="TOTAL")
    if engine == DYNAMODB_LOCAL:
        # Then DynamoDB bills 3 units (one per started KB), and twice the item's 2 and the entry's 1 in a transaction
        assert put["ConsumedCapacity"]["CapacityUnits"] == 3
        (consumed,) = transaction["ConsumedCapacity"]
        assert (consumed["Table"]["CapacityUnits"], consumed["GlobalSecondaryIndexes"]["gsi1"]["CapacityUnits"]) == (
            4,
            2,
        )
    else:
        # moto bills 1 unit whatever the size, and nothing for a transaction: the cost tests count units by
        # DynamoDB's rules on moto, and compare with what DynamoDB Local bills
        assert put["ConsumedCapacity"]["CapacityUnits"] == 1
        assert transaction.get("ConsumedCapacity", []) == []
    # (Both bill half a unit for an eventually consistent read of up to 4 KB)
    assert read["ConsumedCapacity"]["CapacityUnits"] == 0.5


def test_batch_writes_dynamodb_refuses_moto_accepts(aws: Any, engine: str) -> None:
    # A BatchWriteItem of 26 requests, and one naming the same key twice
    too_many = refusal(
        lambda: aws.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": item(str(n))}} for n in range(26)]})
    )
    twice = refusal(
        lambda: aws.batch_write_item(
            RequestItems={TABLE: [{"PutRequest": {"Item": item("k")}}, {"DeleteRequest": {"Key": item("k")}}]}
        )
    )
    # DynamoDB refuses both; moto applies them. Baton writes 25 requests a batch at most, each key once (its
    # batches are DynamoDB Local's to refuse in the rest of the suite)
    if engine == DYNAMODB_LOCAL:
        assert too_many is not None
        assert "Too many items requested for the BatchWriteItem call" in too_many
        assert twice is not None
        assert "Provided list of item keys contains duplicates" in twice
    else:
        assert (too_many, twice) == (None, None)


def test_expressions_and_numbers_dynamodb_refuses_moto_accepts(aws: Any, engine: str) -> None:
    # An ExpressionAttributeValues entry no expression uses, and a number of 39 significant digits
    unused = refusal(
        lambda: aws.put_item(
            TableName=TABLE,
            Item=item("unused"),
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":never": {"S": "x"}},
        )
    )
    wide = refusal(lambda: aws.put_item(TableName=TABLE, Item=item("wide", n={"N": "1" * 39})))
    if engine == DYNAMODB_LOCAL:
        assert unused is not None
        assert "Value provided in ExpressionAttributeValues unused in expressions" in unused
        assert wide is not None
        assert "DynamoDB only supports precision up to 38 digits" in wide
    else:
        assert (unused, wide) == (None, None)


def test_a_reserved_word_in_an_update_expression_is_refused_by_moto_only(aws: Any, engine: str) -> None:
    # `size` is on DynamoDB's list of reserved words; Baton names every attribute through ExpressionAttributeNames
    # (`store/attributes.py`, `names_in`), so neither answer reaches it
    refused = refusal(
        lambda: aws.update_item(
            TableName=TABLE,
            Key=item("reserved"),
            UpdateExpression="SET size = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    )
    if engine == MOTO:
        assert refused is not None
        assert "reserved keyword" in refused
    else:
        assert refused is None  # DynamoDB Local 3.3.1 is the lenient one here


def test_an_access_key_id_of_other_characters_than_letters_and_digits_is_refused_by_dynamodb_local(
    aws: Any, engine: str
) -> None:
    import boto3

    from baton_checkpoints.local.serve import LOCAL_CREDENTIAL

    # A client whose access key id holds a '-' (what `baton serve` gave a local endpoint before: "baton-local")
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=aws.meta.endpoint_url if engine == DYNAMODB_LOCAL else None,
        aws_access_key_id="baton-local",
        aws_secret_access_key="baton-local",
    )
    refused = refusal(lambda: client.describe_table(TableName=TABLE))
    # DynamoDB Local refuses it (moto takes any): `baton serve` now gives letters and digits only
    if engine == DYNAMODB_LOCAL:
        assert refused is not None
        assert "The Access Key ID or security token is invalid" in refused
    else:
        assert refused is None
    assert LOCAL_CREDENTIAL.isalnum()
    assert LOCAL_CREDENTIAL.isascii()


def test_a_transaction_of_items_of_the_same_cost_is_billed_as_one_by_dynamodb_local(aws: Any, engine: str) -> None:
    # When three new items of one write unit each are put in one transaction, then three of 1, 3 and 3 units
    alike = aws.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": item(f"alike-{n}")}} for n in range(3)],
        ReturnConsumedCapacity="TOTAL",
    )
    mixed = aws.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": item(f"mixed-{n}", x={"S": "y" * size})}}
            for n, size in enumerate((10, 2_500, 2_500))
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    # DynamoDB's rule bills each item twice its units: 6 and 14. DynamoDB Local 3.3.1 bills each distinct cost once
    # (2 and 8): a transaction's figure is its to trust only when its items' costs differ, so the cost tests assert
    # DynamoDB Local's figure for single writes, batches and such transactions, and count the rest by the rules
    # (`baton_checkpoints.store.sizes`, `bench/billing/capacity.py`). moto says nothing of a transaction.
    if engine == DYNAMODB_LOCAL:
        assert [alike["ConsumedCapacity"][0]["CapacityUnits"], mixed["ConsumedCapacity"][0]["CapacityUnits"]] == [2, 8]
    else:
        assert (alike.get("ConsumedCapacity", []), mixed.get("ConsumedCapacity", [])) == ([], [])
