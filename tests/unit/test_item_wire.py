"""DynamoDB items on the wire (`store/item_wire.py`): what the direct serializer writes and the direct parser reads is
exactly what botocore's own JSON-protocol serializer and parser make of the same items, requests and answers,
malformed ones included (the same result, or the same kind of error), and Baton's clients use them."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import botocore.session
import pytest
from botocore.parsers import JSONParser
from botocore.serialize import JSONSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton_checkpoints.store import aws
from baton_checkpoints.store.item_wire import ItemParser, ItemParserFactory, ItemSerializer, is_item_value
from tests.unit.hypothesis_profiles import examples

MODEL = botocore.session.get_session().get_service_model("dynamodb")

names = st.text(min_size=1, max_size=6)
numbers = st.integers(-(10**12), 10**12).map(str)


def _values(blob: st.SearchStrategy[Any], odd: bool) -> st.SearchStrategy[Any]:
    """Item values: every member's kind, nested, and with `odd` the malformed ones a caller or a service could send
    (no member, two, an unknown one, a null, a member of the wrong type)."""
    scalars = st.one_of(
        st.builds(lambda s: {"S": s}, st.text(max_size=8)),
        st.builds(lambda n: {"N": n}, numbers),
        st.builds(lambda b: {"B": b}, blob),
        st.builds(lambda b: {"BOOL": b}, st.booleans()),
        st.just({"NULL": True}),
        st.builds(lambda s: {"SS": s}, st.lists(st.text(max_size=4), max_size=3)),
        st.builds(lambda s: {"NS": s}, st.lists(numbers, max_size=3)),
        st.builds(lambda s: {"BS": s}, st.lists(blob, max_size=3)),
    )
    if odd:
        scalars = st.one_of(
            scalars,
            st.just({}),
            st.just({"S": "a", "N": "1"}),
            st.just({"X": "unknown"}),
            st.just({"S": None}),
            st.just({"B": None}),
            st.just({"L": {"not": "a list"}}),
            st.just({"M": ["not", "a map"]}),
            st.just({"SS": ("a", "tuple")}),
            st.just({"BS": [None]}),
            st.none(),
        )

    def nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.builds(lambda m: {"M": m}, st.dictionaries(names, children, max_size=4)),
            st.builds(lambda items: {"L": items}, st.lists(children, max_size=4)),
        )

    return st.recursive(scalars, nested, max_leaves=12)


wire_blobs = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode("ascii"))
python_blobs = st.one_of(st.binary(max_size=12), st.text(max_size=4), st.binary(max_size=4).map(bytearray))


def _typed(value: Any) -> Any:
    """`value` with the type of every part beside it: `==` alone takes bytes for a bytearray, a dict for an
    OrderedDict."""
    if isinstance(value, dict):
        return (type(value).__name__, [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, value)


def _outcome(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("answered", _typed(call(*args)))
    except Exception as error:  # the same kind of error is what "the same" means for a malformed input
        return ("raised", type(error))


def _item(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(names, values, max_size=5)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(item=_item(_values(python_blobs, odd=True)), key=_item(_values(python_blobs, odd=False)))
def test_requests_are_written_as_botocore_writes_them(item: dict[str, Any], key: dict[str, Any]) -> None:
    requests = [
        ("PutItem", {"TableName": "t", "Item": item}),
        (
            "UpdateItem",
            {
                "TableName": "t",
                "Key": key,
                "UpdateExpression": "SET #a = :a",
                "ExpressionAttributeNames": {"#a": "a", "#b": "b"},
                "ExpressionAttributeValues": item,
            },
        ),
        ("BatchWriteItem", {"RequestItems": {"t": [{"PutRequest": {"Item": item}}, {"DeleteRequest": {"Key": key}}]}}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": "t", "Item": item}}]}),
        ("Query", {"TableName": "t", "ExclusiveStartKey": key, "ExpressionAttributeValues": item}),
    ]
    for operation, params in requests:
        model = MODEL.operation_model(operation)
        theirs = _outcome(JSONSerializer().serialize_to_request, params, model)
        ours = _outcome(ItemSerializer().serialize_to_request, params, model)
        assert ours == theirs, operation


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(item=_item(_values(wire_blobs, odd=True)), items=st.lists(_item(_values(wire_blobs, odd=True)), max_size=3))
def test_answers_are_read_as_botocore_reads_them(item: dict[str, Any], items: list[dict[str, Any]]) -> None:
    answers = [
        ("GetItem", {"Item": item}),
        ("UpdateItem", {"Attributes": item, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}}),
        ("Query", {"Items": items, "Count": len(items), "LastEvaluatedKey": item}),
        ("BatchGetItem", {"Responses": {"t": items}, "UnprocessedKeys": {}}),
        ("TransactGetItems", {"Responses": [{"Item": i} for i in items]}),
    ]
    for operation, answer in answers:
        shape = MODEL.operation_model(operation).output_shape
        response = {"status_code": 200, "headers": {"x-amzn-requestid": "r"}, "body": json.dumps(answer).encode()}
        theirs = _outcome(JSONParser().parse, response, shape)
        ours = _outcome(ItemParser().parse, response, shape)
        assert ours == theirs, operation


def test_errors_are_read_as_botocore_reads_them() -> None:
    shape = MODEL.operation_model("PutItem").output_shape
    body = {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "Item": {"n": {"N": "1"}}}
    response = {"status_code": 400, "headers": {}, "body": json.dumps(body).encode()}
    assert ItemParser().parse(response, shape) == JSONParser().parse(response, shape)


def test_only_dynamodbs_item_values_take_the_direct_path() -> None:
    assert is_item_value(MODEL.shape_for("AttributeValue"))
    assert not is_item_value(MODEL.shape_for("AttributeValueUpdate"))
    assert not is_item_value(MODEL.operation_model("GetItem").output_shape)
    # Asked again, the same shape object gives the same answer from what was found the first time
    shape = MODEL.operation_model("GetItem").output_shape.members["Item"].value
    assert is_item_value(shape)
    assert is_item_value(shape)


def test_the_factory_hands_out_the_item_parser_for_json_alone() -> None:
    factory = ItemParserFactory()
    assert type(factory.create_parser("json")) is ItemParser
    assert type(factory.create_parser("rest-xml")).__name__ == "RestXMLParser"


def test_batons_dynamodb_clients_write_and_read_items_directly() -> None:
    client = aws.dynamodb_client("http://127.0.0.1:1")
    assert type(client._serializer) is ItemSerializer  # type: ignore[attr-defined]
    assert type(client._endpoint._response_parser_factory) is ItemParserFactory  # type: ignore[attr-defined]


def test_the_replaced_serializer_keeps_botocores_settings() -> None:
    client = botocore.session.get_session().create_client("dynamodb", region_name="us-east-1")
    client._serializer = JSONSerializer(timestamp_precision="millisecond")
    aws.with_item_serializer(client)
    assert type(client._serializer) is ItemSerializer
    assert client._serializer._timestamp_precision == "millisecond"


@pytest.mark.parametrize("make", [aws.s3_client, aws.events_client])
def test_other_clients_keep_botocores_serializer(make: Callable[[str], Any]) -> None:
    client = make("http://127.0.0.1:1")
    assert type(client._serializer) is not ItemSerializer
