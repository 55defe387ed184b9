"""IAM: every identity policy statement of the template grants named actions on Baton's own resources only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from baton.store import layout, schema
from tests.infrastructure.conftest import Synthesized, as_list, render

XRAY_ACTIONS = frozenset({"xray:PutTraceSegments", "xray:PutTelemetryRecords"})
"""X-Ray's write actions support no resource-level permissions: the only grants allowed on `*`."""

ITEM_ACTIONS = frozenset(
    {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:ConditionCheckItem",
    }
)
"""Item-level DynamoDB actions: no Scan (the store never scans), no table management, no PartiQL."""

STREAM_ACTIONS = frozenset(
    {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
)

OBJECT_ACTIONS = frozenset(
    {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:GetObjectTagging", "s3:PutObjectTagging"}
)
"""Object-level S3 actions: what the store does with blobs (no listing, no bucket configuration)."""


def _statements(synthesized: Synthesized) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every identity policy statement: policies, managed policies and roles' inline policies."""
    for logical_id, resource in synthesized.resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for statement in properties["PolicyDocument"]["Statement"]:
                yield logical_id, statement
        elif resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield logical_id, statement


def _allowed(synthesized: Synthesized) -> list[tuple[str, dict[str, Any]]]:
    statements = list(_statements(synthesized))
    assert statements, "the template grants nothing: the function could not work"
    return statements


def _actions_of(synthesized: Synthesized, prefix: str) -> list[tuple[list[str], set[str]]]:
    """(actions, rendered resources) of every statement granting an action of one service."""
    found = []
    for _, statement in _allowed(synthesized):
        actions = as_list(statement["Action"])
        if any(a.startswith(prefix) for a in actions):
            found.append((actions, {render(r) for r in as_list(statement["Resource"])}))
    return found


def _function_role_id(synthesized: Synthesized) -> str:
    _, function = synthesized.only("AWS::Lambda::Function")
    role = function["Properties"]["Role"]
    assert role == {"Fn::GetAtt": [synthesized.logical_id(synthesized.stack.functions.role), "Arn"]}
    return str(role["Fn::GetAtt"][0])


def test_every_statement_allows_named_actions_on_named_resources(synthesized: Synthesized) -> None:
    # Given every identity policy statement of the template
    for logical_id, statement in _allowed(synthesized):
        # Then it allows (never denies-by-exception) and lists its actions and resources explicitly
        assert statement["Effect"] == "Allow", logical_id
        assert "NotAction" not in statement, logical_id
        assert "NotResource" not in statement, logical_id
        assert as_list(statement["Action"]), logical_id
        assert as_list(statement["Resource"]), logical_id


def test_no_statement_has_a_wildcard_action(synthesized: Synthesized) -> None:
    # Given every action of every identity policy statement
    actions = [a for _, s in _allowed(synthesized) for a in as_list(s["Action"])]
    # Then each is one named action of one service: no `*`, no `service:*`, no `service:Get*`, no `?`
    for action in actions:
        service, _, name = action.partition(":")
        assert service, action
        assert name, action
        assert "*" not in action, action
        assert "?" not in action, action


def test_only_the_services_the_function_touches_are_granted(synthesized: Synthesized) -> None:
    # Given every action granted
    services = {a.partition(":")[0] for _, s in _allowed(synthesized) for a in as_list(s["Action"])}
    # Then they are DynamoDB, S3, CloudWatch Logs and X-Ray: nothing else
    assert services <= {"dynamodb", "s3", "logs", "xray"}


def test_dynamodb_actions_reach_only_the_table_and_its_named_indexes(synthesized: Synthesized) -> None:
    # Given Baton's table and the names of its indexes
    table_arn = "${" + synthesized.logical_id(synthesized.stack.storage.table) + ".Arn}"
    index_names = [i.name for i in (*schema.TABLE.global_indexes, *schema.TABLE.local_indexes)]
    allowed = {table_arn} | {f"{table_arn}/index/{name}" for name in index_names}
    # When the statements granting DynamoDB actions are picked
    grants = _actions_of(synthesized, "dynamodb:")
    assert grants
    for actions, resources in grants:
        # Then they are item-level actions, only on the table and its indexes by name (no `/index/*`)
        assert set(actions) <= ITEM_ACTIONS, actions
        assert resources <= allowed, resources
        assert all(a.startswith("dynamodb:") for a in actions), actions
    # And together they cover the table and every index the store queries
    granted = set().union(*(resources for _, resources in grants))
    assert granted == allowed


def test_no_stream_access_without_a_stream_consumer(synthesized: Synthesized) -> None:
    # Given the table's stream, and the event source mappings that would consume it
    table_id = synthesized.logical_id(synthesized.stack.storage.table)
    consumers = [
        m
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if render(m["Properties"]["EventSourceArn"]) == "${" + table_id + ".StreamArn}"
    ]
    # When no function consumes the stream (the reaper of issue 4 will)
    if consumers:
        return
    # Then no statement grants stream actions, nor names the stream
    for _, statement in _allowed(synthesized):
        assert not set(as_list(statement["Action"])) & STREAM_ACTIONS, statement
        assert not any("StreamArn" in render(r) or "/stream/" in render(r) for r in as_list(statement["Resource"]))


def test_s3_actions_reach_only_the_blob_prefix_of_batons_bucket(synthesized: Synthesized) -> None:
    # Given Baton's blob bucket and the prefix it writes under
    bucket_id = synthesized.logical_id(synthesized.stack.storage.bucket)
    prefix_arn = "${" + bucket_id + ".Arn}/" + schema.BLOB_PREFIX + "*"
    states_arn = "${" + bucket_id + ".Arn}/" + schema.BLOB_PREFIX + "*/" + layout.STATES + "/*"
    # When the statements granting S3 actions are picked
    grants = _actions_of(synthesized, "s3:")
    assert grants
    for actions, resources in grants:
        # Then they are object actions on that prefix only (or a folder inside it): never the whole bucket, never
        # another bucket
        assert set(actions) <= OBJECT_ACTIONS, actions
        assert resources in ({prefix_arn}, {states_arn}), resources
    assert schema.BLOB_PREFIX.endswith("/")


def test_the_api_may_delete_only_spilled_states(synthesized: Synthesized) -> None:
    # Given the api function's role
    role_id = synthesized.logical_id(synthesized.stack.functions.role)
    bucket_id = synthesized.logical_id(synthesized.stack.storage.bucket)
    states_arn = "${" + bucket_id + ".Arn}/" + schema.BLOB_PREFIX + "*/" + layout.STATES + "/*"
    # When the statements of its policies that delete objects are picked
    deletes = [
        {render(r) for r in as_list(statement["Resource"])}
        for resource in synthesized.resources.values()
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"].get("Roles", [])
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if "s3:DeleteObject" in as_list(statement["Action"])
    ]
    # Then it deletes only spilled states (a refused save's own object), never an uploaded blob
    assert deletes == [{states_arn}]


def test_logs_actions_reach_only_the_functions_log_group(synthesized: Synthesized) -> None:
    # Given the function's log group
    log_group_arn = "${" + synthesized.logical_id(synthesized.stack.functions.log_group) + ".Arn}"
    # When the statements granting CloudWatch Logs actions are picked
    grants = _actions_of(synthesized, "logs:")
    # Then they write streams and events to that log group only
    for actions, resources in grants:
        assert set(actions) <= {"logs:CreateLogStream", "logs:PutLogEvents"}, actions
        assert resources == {log_group_arn}, resources


def test_only_x_ray_writes_are_granted_on_every_resource(synthesized: Synthesized) -> None:
    # Given the statements whose resources include `*`
    star = [s for _, s in _allowed(synthesized) if "*" in as_list(s["Resource"])]
    # Then they grant X-Ray's trace writes alone, which support no resource-level permissions
    assert star, "tracing is active, so X-Ray's writes must be granted"
    for statement in star:
        assert as_list(statement["Resource"]) == ["*"]
        assert set(as_list(statement["Action"])) <= XRAY_ACTIONS
    # And no other resource has a wildcard outside the blob prefix (and its tenants' states folders)
    blob_prefix = "${" + synthesized.logical_id(synthesized.stack.storage.bucket) + ".Arn}/" + schema.BLOB_PREFIX + "*"
    states = f"{blob_prefix}/{layout.STATES}/*"
    for _, statement in _allowed(synthesized):
        for resource in (render(r) for r in as_list(statement["Resource"])):
            assert resource in ("*", blob_prefix, states) or "*" not in resource, resource


def test_function_role_has_no_managed_policies(synthesized: Synthesized) -> None:
    # Given the function's role
    role_id = _function_role_id(synthesized)
    role = synthesized.resources[role_id]["Properties"]
    # Then no managed policy (AWS's or the stack's) is attached: every grant is one of the statements above
    assert not role.get("ManagedPolicyArns")
    for policy in synthesized.of_type("AWS::IAM::ManagedPolicy").values():
        assert {"Ref": role_id} not in policy["Properties"].get("Roles", [])
    # And only Lambda can assume it
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]


def test_every_policy_is_attached_to_a_function_role_only(synthesized: Synthesized) -> None:
    # Given the roles of the template's functions, and its policies
    function_roles = [
        {"Ref": f["Properties"]["Role"]["Fn::GetAtt"][0]} for f in synthesized.of_type("AWS::Lambda::Function").values()
    ]
    assert {"Ref": _function_role_id(synthesized)} in function_roles
    policies = synthesized.of_type("AWS::IAM::Policy")
    assert policies
    # Then every policy is attached to function roles only (no group, no user, no role of anything else)
    for policy in policies.values():
        assert policy["Properties"]["Roles"]
        assert all(role in function_roles for role in policy["Properties"]["Roles"])
        assert "Groups" not in policy["Properties"]
        assert "Users" not in policy["Properties"]


# What each client call of the store is authorized as (TransactWriteItems: the Put requests it carries).
_IAM_FOR_CALL = {
    "get_item": {"dynamodb:GetItem"},
    "batch_get_item": {"dynamodb:BatchGetItem"},
    "query": {"dynamodb:Query"},
    "put_item": {"dynamodb:PutItem"},
    "update_item": {"dynamodb:UpdateItem"},
    "delete_item": {"dynamodb:DeleteItem"},
    "transact_write_items": {"dynamodb:PutItem"},
}


def _store_calls() -> set[str]:
    """The DynamoDB client methods the store calls, read from its source."""
    import re
    from pathlib import Path

    store = Path(__file__).resolve().parents[2] / "functions" / "baton" / "store"
    found: set[str] = set()
    for source in store.glob("*.py"):
        found |= set(re.findall(r"self\._client\.([a-z_]+)\(", source.read_text(encoding="utf-8")))
    return found


def test_the_function_is_granted_exactly_the_dynamodb_actions_the_store_uses(synthesized: Synthesized) -> None:
    # Given the operations the store's code calls (a transaction is authorized as the Puts it carries)
    calls = _store_calls()
    assert calls <= set(_IAM_FOR_CALL), f"map these calls to IAM actions: {sorted(calls - set(_IAM_FOR_CALL))}"
    needed = set().union(*(_IAM_FOR_CALL[call] for call in calls))
    # When the function role's DynamoDB grants are read from the template
    granted = set().union(*(actions for actions, _ in _actions_of(synthesized, "dynamodb:")))
    # Then they are exactly those: nothing missing, nothing extra
    assert granted == needed
