"""Integration tests: the api handler, driven with `events/`, against in-process moto."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from moto import mock_aws

from baton.api.services import OnFirstUse, Services, build_services, wired
from baton.domain.access import issue_key
from baton.settings import load_settings
from tests.integration.driver import ApiDriver, CallCounter

TABLE = "baton-test"
BUCKET = "baton-test-blobs"
OPERATOR_SECRET = "btn_test_operator_secret_0001"


@contextmanager
def serving(provider: Callable[[], Services]) -> Iterator[None]:
    """The Lambda's app (what `baton.handlers.api.handler` resolves with) serves with `provider`'s services, through
    powertools' `dependency_overrides`, which the gate honours as well as the routes."""
    from baton.api.app import app

    app.dependency_overrides[wired] = lambda: provider()
    try:
        yield
    finally:
        app.dependency_overrides.pop(wired, None)


def services_on(table: str, client: Any = None) -> Services:
    """A container's services on `table` (on `client`, or a new client of the current moto account)."""
    return build_services(load_settings({"BATON_TABLE_NAME": table, "BATON_BUCKET_NAME": BUCKET}), client)


@contextmanager
def moto_world() -> Iterator[Any]:
    """A fresh moto account with Baton's table and bucket, and the api handler serving it: its services are built
    by the first request (or test) that needs them, as in a new Lambda container. Yields a DynamoDB client."""
    with mock_aws():
        import boto3

        from baton.store.schema import ensure_bucket, ensure_table

        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, TABLE)
        ensure_bucket(boto3.client("s3", region_name="us-east-1"), BUCKET)
        provider = OnFirstUse(lambda: services_on(TABLE))
        with serving(provider):
            yield client


@pytest.fixture
def aws() -> Iterator[Any]:
    """A fresh moto world for the test (`moto_world`)."""
    with moto_world() as client:
        yield client


@pytest.fixture
def services(aws: Any) -> Services:
    """The services the handler serves with."""
    from baton.api.app import app

    return app.services()


def put_key(services: Services, secret: str, tenant: str, agent: str, scopes: set[str], key_id: str) -> None:
    """Store a key with a known secret and id directly, as `baton serve` does for its development key."""
    services.keys.put(issue_key(tenant, agent, scopes, 1_700_000_000_000, secret=secret, key_id=key_id).record)


@pytest.fixture
def api(services: Services) -> ApiDriver:
    """A driver holding an operator key of tenant `acme` (scopes `*` and `tenants:manage`)."""
    put_key(services, OPERATOR_SECRET, "acme", "operator", {"*", "tenants:manage"}, "key_" + "a" * 32)
    return ApiDriver(OPERATOR_SECRET)


@pytest.fixture
def counter(services: Services) -> Iterator[CallCounter]:
    """Counts DynamoDB calls made by the handler's client."""
    calls = CallCounter()
    services.dynamodb.meta.events.register("before-call.dynamodb", calls)
    yield calls
    services.dynamodb.meta.events.unregister("before-call.dynamodb", calls)


def table_items(client: Any, table: str = TABLE) -> list[dict[str, Any]]:
    """Every item of the table, in key order, read consistently (a test may Scan moto; the product never does)."""
    found: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**request)
        found.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            return sorted(found, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


@pytest.fixture
def s3_calls(services: Services) -> Iterator[CallCounter]:
    """Counts the S3 operations the services' object store makes."""
    assert services.objects is not None
    calls = CallCounter()
    services.objects.client.meta.events.register("before-call.s3", calls)
    yield calls
    services.objects.client.meta.events.unregister("before-call.s3", calls)
