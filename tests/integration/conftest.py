"""Integration tests: the api handler, driven with `events/`, against in-process moto."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from baton.domain.access import KeyRecord, hash_secret
from tests.integration.driver import ApiDriver, CallCounter

TABLE = "baton-test"
OPERATOR_SECRET = "btn_test_operator_secret_0001"


@pytest.fixture
def aws() -> Iterator[Any]:
    """A fresh moto account with Baton's table, and the api function's environment pointed at it."""
    from baton.api import services as wiring

    with mock_aws():
        import boto3

        from baton.store.schema import ensure_table

        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, TABLE)
        os.environ["BATON_TABLE_NAME"] = TABLE
        os.environ.pop("BATON_AWS_ENDPOINT_URL", None)
        wiring.reset()
        yield client
        wiring.reset()


@pytest.fixture
def services(aws: Any) -> Any:
    """The container's services, as the handler will use them."""
    from baton.api.services import services as current

    return current()


def put_key(services: Any, secret: str, tenant: str, agent: str, scopes: set[str], key_id: str) -> None:
    """Store a key record directly, as `baton serve` does for its development key."""
    services.keys.put(
        KeyRecord(
            key_id=key_id,
            secret_hash=hash_secret(secret),
            tenant_id=tenant,
            agent_id=agent,
            scopes=frozenset(scopes),
            created_ms=1_700_000_000_000,
        )
    )


@pytest.fixture
def api(services: Any) -> ApiDriver:
    """A driver holding an operator key of tenant `acme` (scopes `*` and `tenants:manage`)."""
    put_key(services, OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
    return ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def counter(services: Any) -> Iterator[CallCounter]:
    """Counts DynamoDB calls made by the handler's client."""
    calls = CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", calls)
    yield calls
    services.dynamodb.meta.events.unregister("before-call.dynamodb", calls)
