"""`baton keys create`: the first operator key of a deployment, written straight into the table."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from baton_checkpoints.cli.main import main
from tests.integration.conftest import TABLE
from tests.integration.driver import ApiDriver


def test_a_key_created_by_the_cli_authenticates_against_the_api(aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # Given an empty deployment (the table exists, no key does)
    # When the operator creates a key with their own credentials
    status = main(
        ["keys", "create", "--table", TABLE, "--tenant", "acme", "--agent", "operator", "--region", "us-east-1"]
    )
    printed = json.loads(capsys.readouterr().out)
    # Then it prints the secret once, with operator scopes, and the API accepts it
    assert status == 0
    assert printed["scopes"] == ["*", "tenants:manage"]
    assert printed["secret"].startswith("btn_")
    result = ApiDriver(printed["secret"]).invoke("list_keys", query={})
    assert result.status == 200, result.raw_body
    assert [k["key_id"] for k in result.data] == [printed["key_id"]]
    # And the table holds only the secret's hash
    items = aws.scan(TableName=TABLE)["Items"]
    assert printed["secret"] not in json.dumps(items)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--tenant", "Acme!", "--agent", "operator"], "tenant_id"),
        (["--tenant", "acme", "--agent", "operator", "--scopes", "checkpoints:everything"], "scopes"),
        (["--tenant", "acme", "--agent", "operator", "--expires-at", "tomorrow"], "expires"),
    ],
)
def test_the_cli_refuses_a_bad_key_and_writes_nothing(
    aws: Any, flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a request the API itself would refuse
    # When the CLI is asked for it
    status = main(["keys", "create", "--table", TABLE, "--region", "us-east-1", *flags])
    # Then it exits 2 naming the field, and the table stays empty
    assert status == 2
    assert named in capsys.readouterr().err
    assert aws.scan(TableName=TABLE)["Items"] == []


def test_create_key_prints_to_the_stream_given(aws: Any) -> None:
    # Given an output stream
    from argparse import Namespace

    from baton_checkpoints.cli.keys import create_key

    out = io.StringIO()
    args = Namespace(
        table=TABLE,
        tenant="beta",
        agent="planner",
        scopes="checkpoints:read",
        description="read-only planner",
        expires_at=None,
        region="us-east-1",
        aws_endpoint=None,
    )
    # When a key is created
    assert create_key(args, out) == 0
    # Then the JSON goes there
    assert json.loads(out.getvalue())["description"] == "read-only planner"
