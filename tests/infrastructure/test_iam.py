"""IAM: every identity policy statement of the template grants named actions on Baton's own resources only.

The template has two roles, the api function's and the reaper's; each is checked for what its function touches. The
reaper role's exact grants are also listed in test_reaper.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import aws_iam as iam

from baton_checkpoints.store import layout, schema
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
LIST_STREAMS = "dynamodb:ListStreams"
"""The one stream action with no resource-level permission: granted on `*`, and only to a stream consumer."""

SERVICES = {
    "api": frozenset({"dynamodb", "s3", "logs", "xray"}),
    "reaper": frozenset({"dynamodb", "s3", "logs", "sqs", "xray", "events"}),
}
"""The services each function's role may be granted: both trace to X-Ray; the reaper sends what it gives up on to
its SQS failure queue."""

ROLES = tuple(SERVICES)

OBJECT_ACTIONS = frozenset(
    {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:GetObjectTagging", "s3:PutObjectTagging"}
)
"""Object-level S3 actions: what the store does with blobs (no bucket configuration)."""
LIST_BUCKET = "s3:ListBucket"
"""The one bucket-level S3 action: without it S3 answers a missing key 403 AccessDenied instead of 404 NoSuchKey."""


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


def _role(synthesized: Synthesized, which: str) -> iam.Role:
    """The role of one of the stack's functions: `api` or `reaper`."""
    stack = synthesized.stack
    return {"api": stack.functions.role, "reaper": stack.reaper.role}[which]


def _role_statements(synthesized: Synthesized, which: str) -> list[dict[str, Any]]:
    """Every identity policy statement one function's role holds: its policies', managed policies' and inline."""
    role_id = synthesized.logical_id(_role(synthesized, which))
    found: list[dict[str, Any]] = []
    for resource in synthesized.resources.values():
        properties = resource.get("Properties", {})
        attached = resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        if attached and {"Ref": role_id} in properties.get("Roles", []):
            found += properties["PolicyDocument"]["Statement"]
    for policy in synthesized.resources[role_id]["Properties"].get("Policies", []):
        found += policy["PolicyDocument"]["Statement"]
    assert found, f"the {which} role is granted nothing: its function could not work"
    return found


def _actions_of(
    synthesized: Synthesized, prefix: str, statements: list[dict[str, Any]] | None = None
) -> list[tuple[list[str], set[str]]]:
    """(actions, rendered resources) of every statement granting an action of one service (of the whole template
    unless `statements` is given)."""
    if statements is None:
        statements = [statement for _, statement in _allowed(synthesized)]
    found = []
    for statement in statements:
        actions = as_list(statement["Action"])
        if any(a.startswith(prefix) for a in actions):
            found.append((actions, {render(r) for r in as_list(statement["Resource"])}))
    return found


def _function_role_id(synthesized: Synthesized, which: str) -> str:
    """The logical id of the role the function runs as, checked to be the role the stack built for it."""
    function = {"api": synthesized.stack.functions.api, "reaper": synthesized.stack.reaper.function}[which]
    role = synthesized.resource(function)["Properties"]["Role"]
    assert role == {"Fn::GetAtt": [synthesized.logical_id(_role(synthesized, which)), "Arn"]}
    return str(role["Fn::GetAtt"][0])


def _stream_arn(synthesized: Synthesized) -> str:
    return "${" + synthesized.logical_id(synthesized.stack.storage.table) + ".StreamArn}"


def test_every_statement_belongs_to_the_api_or_the_reaper_role(synthesized: Synthesized) -> None:
    # Given every identity policy statement of the template, and the statements each function's role holds
    everywhere = sorted(json.dumps(s, sort_keys=True) for _, s in _allowed(synthesized))
    by_role = sorted(json.dumps(s, sort_keys=True) for which in ROLES for s in _role_statements(synthesized, which))
    # Then they are the same: no statement is held by another identity, none by both roles, so what the tests below
    # check per role covers the whole template
    assert everywhere == by_role


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
    # Given every action granted, by role
    services = {
        which: {a.partition(":")[0] for s in _role_statements(synthesized, which) for a in as_list(s["Action"])}
        for which in ROLES
    }
    # Then the api's are DynamoDB, S3, CloudWatch Logs and X-Ray: nothing else
    assert services["api"] <= SERVICES["api"]
    # And the reaper's are DynamoDB, S3, CloudWatch Logs and SQS (its failure destination): nothing else
    assert services["reaper"] <= SERVICES["reaper"]
    assert "sqs" in services["reaper"]
    # And the whole template grants nothing beyond those
    assert {a.partition(":")[0] for _, s in _allowed(synthesized) for a in as_list(s["Action"])} <= (
        SERVICES["api"] | SERVICES["reaper"]
    )


def test_dynamodb_actions_reach_only_the_table_and_its_named_indexes(synthesized: Synthesized) -> None:
    # Given Baton's table and the names of its indexes
    table_arn = "${" + synthesized.logical_id(synthesized.stack.storage.table) + ".Arn}"
    index_names = [i.name for i in (*schema.TABLE.global_indexes, *schema.TABLE.local_indexes)]
    allowed = {table_arn} | {f"{table_arn}/index/{name}" for name in index_names}
    # When the statements of the api role granting DynamoDB actions are picked
    grants = _actions_of(synthesized, "dynamodb:", _role_statements(synthesized, "api"))
    assert grants
    for actions, resources in grants:
        # Then they are item-level actions, only on the table and its indexes by name (no `/index/*`)
        assert set(actions) <= ITEM_ACTIONS, actions
        assert resources <= allowed, resources
        assert all(a.startswith("dynamodb:") for a in actions), actions
    # And together they cover the table and every index the store queries
    granted = set().union(*(resources for _, resources in grants))
    assert granted == allowed
    # When the reaper role's are picked
    reaper_grants = _actions_of(synthesized, "dynamodb:", _role_statements(synthesized, "reaper"))
    assert reaper_grants
    stream_arn = _stream_arn(synthesized)
    for actions, resources in reaper_grants:
        assert all(a.startswith("dynamodb:") for a in actions), actions
        if set(actions) & STREAM_ACTIONS:
            # Then a stream statement reads the table's stream only; ListStreams, which has no resource-level
            # permission, stands alone on `*`
            if LIST_STREAMS in actions:
                assert (actions, resources) == ([LIST_STREAMS], {"*"}), (actions, resources)
            else:
                assert set(actions) <= STREAM_ACTIONS, actions
                assert resources == {stream_arn}, resources
        else:
            # And any other grants item-level actions on the table itself (the reaper queries no index)
            assert set(actions) <= ITEM_ACTIONS, actions
            assert resources == {table_arn}, resources


def test_no_stream_access_without_a_stream_consumer(synthesized: Synthesized) -> None:
    # Given the table's stream, and the roles of the functions event source mappings feed from it
    stream_arn = _stream_arn(synthesized)
    functions = synthesized.of_type("AWS::Lambda::Function")
    consumer_roles = {
        functions[m["Properties"]["FunctionName"]["Ref"]]["Properties"]["Role"]["Fn::GetAtt"][0]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if render(m["Properties"]["EventSourceArn"]) == stream_arn
    }
    # Then the reaper's role is the only one
    assert consumer_roles == {synthesized.logical_id(synthesized.stack.reaper.role)}
    for which in ROLES:
        statements = _role_statements(synthesized, which)
        if synthesized.logical_id(_role(synthesized, which)) in consumer_roles:
            # And a consumer reads that stream only (ListStreams, which names no resource, alone on `*`)
            for statement in statements:
                actions = set(as_list(statement["Action"]))
                resources = {render(r) for r in as_list(statement["Resource"])}
                if not actions & STREAM_ACTIONS:
                    continue
                if resources == {"*"}:
                    assert actions == {LIST_STREAMS}, statement
                else:
                    assert resources == {stream_arn}, statement
                    assert actions <= STREAM_ACTIONS - {LIST_STREAMS}, statement
            continue
        # And no other role is granted stream actions, nor names the stream
        for statement in statements:
            assert not set(as_list(statement["Action"])) & STREAM_ACTIONS, statement
            assert not any("StreamArn" in render(r) or "/stream/" in render(r) for r in as_list(statement["Resource"]))


def test_s3_actions_reach_only_the_blob_prefix_of_batons_bucket(synthesized: Synthesized) -> None:
    # Given Baton's blob bucket and the prefix it writes under
    bucket_id = synthesized.logical_id(synthesized.stack.storage.bucket)
    prefix_arn = "${" + bucket_id + ".Arn}/" + schema.BLOB_PREFIX + "*"
    states_arn = "${" + bucket_id + ".Arn}/" + schema.BLOB_PREFIX + "*/" + layout.STATES + "/*"
    bucket_arn = "${" + bucket_id + ".Arn}"
    # When the statements granting S3 actions are picked
    grants = _actions_of(synthesized, "s3:")
    assert grants
    for actions, resources in grants:
        if actions == [LIST_BUCKET]:
            # Then listing stands alone, on Baton's bucket itself (it shows keys, never bytes)
            assert resources == {bucket_arn}, resources
            continue
        # And every other is an object action on that prefix only (or a folder inside it): never the whole bucket,
        # never another bucket
        assert set(actions) <= OBJECT_ACTIONS, actions
        assert resources in ({prefix_arn}, {states_arn}), resources
    assert schema.BLOB_PREFIX.endswith("/")


@pytest.mark.parametrize("which", ROLES)
def test_each_role_may_list_the_bucket_so_that_a_missing_key_is_a_404(synthesized: Synthesized, which: str) -> None:
    # Given the role of a function that reads (the api: GetObject, HeadObject) or retags (the reaper) objects that may
    # be gone: S3 answers a missing key 404 only to a principal with s3:ListBucket on the bucket, else 403, which
    # the store cannot tell from a real denial (a missing spilled state would be a 500, not the 503 naming it)
    bucket_arn = "${" + synthesized.logical_id(synthesized.stack.storage.bucket) + ".Arn}"
    listing = [
        statement for statement in _role_statements(synthesized, which) if LIST_BUCKET in as_list(statement["Action"])
    ]
    # Then it holds s3:ListBucket on Baton's bucket, with no condition (a GET carries no prefix a condition could
    # match, so a conditioned grant would not count)
    assert len(listing) == 1, listing
    (statement,) = listing
    assert as_list(statement["Action"]) == [LIST_BUCKET]
    assert {render(r) for r in as_list(statement["Resource"])} == {bucket_arn}
    assert "Condition" not in statement


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


@pytest.mark.parametrize("which", ROLES)
def test_logs_actions_reach_only_the_functions_log_group(synthesized: Synthesized, which: str) -> None:
    # Given one function's log group
    stack = synthesized.stack
    log_group = {"api": stack.functions.log_group, "reaper": stack.reaper.log_group}[which]
    log_group_arn = "${" + synthesized.logical_id(log_group) + ".Arn}"
    # When the statements of its role granting CloudWatch Logs actions are picked
    grants = _actions_of(synthesized, "logs:", _role_statements(synthesized, which))
    # Then they write streams and events to that log group only (not to the other function's)
    assert grants
    for actions, resources in grants:
        assert set(actions) <= {"logs:CreateLogStream", "logs:PutLogEvents"}, actions
        assert resources == {log_group_arn}, resources


def test_only_x_ray_writes_are_granted_on_every_resource(synthesized: Synthesized) -> None:
    # Given the api role's statements whose resources include `*`
    star = [s for s in _role_statements(synthesized, "api") if "*" in as_list(s["Resource"])]
    # Then they grant X-Ray's trace writes alone, which support no resource-level permissions
    assert star, "tracing is active, so X-Ray's writes must be granted"
    for statement in star:
        assert as_list(statement["Resource"]) == ["*"]
        assert set(as_list(statement["Action"])) <= XRAY_ACTIONS
    # And the reaper role's grant X-Ray's trace writes (it is traced too) and DynamoDB's ListStreams (the stream
    # grant's), none of which has resource-level permissions
    reaper_star = [s for s in _role_statements(synthesized, "reaper") if "*" in as_list(s["Resource"])]
    for statement in reaper_star:
        assert as_list(statement["Resource"]) == ["*"]
        assert set(as_list(statement["Action"])) <= XRAY_ACTIONS | {LIST_STREAMS}
    assert {a for s in reaper_star for a in as_list(s["Action"])} == XRAY_ACTIONS | {LIST_STREAMS}
    # And no other resource has a wildcard outside the blob prefix (and its tenants' states folders)
    blob_prefix = "${" + synthesized.logical_id(synthesized.stack.storage.bucket) + ".Arn}/" + schema.BLOB_PREFIX + "*"
    states = f"{blob_prefix}/{layout.STATES}/*"
    for _, statement in _allowed(synthesized):
        for resource in (render(r) for r in as_list(statement["Resource"])):
            assert resource in ("*", blob_prefix, states) or "*" not in resource, resource


@pytest.mark.parametrize("which", ROLES)
def test_function_role_has_no_managed_policies(synthesized: Synthesized, which: str) -> None:
    # Given the role one function runs as
    role_id = _function_role_id(synthesized, which)
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
    function_roles = [{"Ref": f["Properties"]["Role"]["Fn::GetAtt"][0]} for f in synthesized.functions.values()]
    assert sorted(function_roles, key=str) == sorted(
        ({"Ref": _function_role_id(synthesized, which)} for which in ROLES), key=str
    )
    policies = synthesized.of_type("AWS::IAM::Policy")
    assert policies
    # Then every policy is attached to function roles only (no group, no user, no role of anything else)
    for policy in policies.values():
        assert policy["Properties"]["Roles"]
        assert all(role in function_roles for role in policy["Properties"]["Roles"])
        assert "Groups" not in policy["Properties"]
        assert "Users" not in policy["Properties"]


# What each client call of the store is authorized as (TransactWriteItems: the Put, Update and Delete requests it
# carries).
_IAM_FOR_CALL = {
    "get_item": {"dynamodb:GetItem"},
    "batch_get_item": {"dynamodb:BatchGetItem"},
    "query": {"dynamodb:Query"},
    "put_item": {"dynamodb:PutItem"},
    "update_item": {"dynamodb:UpdateItem"},
    "delete_item": {"dynamodb:DeleteItem"},
    "batch_write_item": {"dynamodb:BatchWriteItem"},
    "transact_write_items": {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
    "close": set(),  # no request: closes the client's pooled connections (after a SnapStart restore)
}


REAPER_STORE_MODULE = "reaping.py"
"""The store module only the reaper runs (its grants are checked exactly in test_reaper.py)."""


def _store_calls() -> set[str]:
    """The DynamoDB client methods the api's store calls, read from its source."""
    import re
    from pathlib import Path

    store = Path(__file__).resolve().parents[2] / "functions" / "baton_checkpoints" / "store"
    assert (store / REAPER_STORE_MODULE).is_file()
    found: set[str] = set()
    # Every module of the store and its packages; dynamo.py, the shared plumbing, is handed the client as `client`.
    for source in store.rglob("*.py"):
        if source.name != REAPER_STORE_MODULE:
            names = r"self\._client|dynamodb|client" if source.name == "dynamo.py" else r"self\._client|dynamodb"
            found |= set(re.findall(rf"\b(?:{names})\.([a-z_]+)\(", source.read_text(encoding="utf-8")))
    return found


def test_the_function_is_granted_exactly_the_dynamodb_actions_the_store_uses(synthesized: Synthesized) -> None:
    # Given the operations the store's code calls (a transaction is authorized as the Puts it carries)
    calls = _store_calls()
    assert calls <= set(_IAM_FOR_CALL), f"map these calls to IAM actions: {sorted(calls - set(_IAM_FOR_CALL))}"
    needed = set().union(*(_IAM_FOR_CALL[call] for call in calls))
    # When the api function role's DynamoDB grants are read from the template
    api_statements = _role_statements(synthesized, "api")
    granted = set().union(*(actions for actions, _ in _actions_of(synthesized, "dynamodb:", api_statements)))
    # Then they are exactly those: nothing missing, nothing extra
    assert granted == needed
