"""End-to-end: HTTP against a running `baton serve`, whose AWS is a moto server this test session owns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from baton_checkpoints.local.moto_server import LocalMotoServer
from tests.e2e.log_audit import stop_audited
from tests.e2e.server_process import BatonServe

TABLE = "baton-e2e"
DEV_KEY = "btn_e2e_operator_key_000000000001"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A serialized moto server on a loopback port."""
    server = LocalMotoServer()
    endpoint = server.start()
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def baton(moto_endpoint: str) -> Iterator[BatonServe]:
    """`baton serve --aws-endpoint <moto>` on a free port, with a fixed operator key."""
    # No reaper here: the suites compare whole tables before and after a request, which a background reaper would
    # change under them; tests/e2e/test_serve_reaper.py runs servers of its own that reap.
    # Usage counts are written as a deployed container writes them (every 100 requests or 30 s), not after every
    # request as `baton serve` does by default: on the session's in-process moto, a write after every request of the
    # isolation matrix alone held about 0.8 GB more (CI's workers ran out of memory). The suites that check usage
    # figures exactly run servers of their own.
    usage = {"BATON_USAGE_FLUSH_REQUESTS": "100"}
    server = BatonServe("--aws-endpoint", moto_endpoint, "--table", TABLE, "--no-reaper", dev_key=DEV_KEY, env=usage)
    yield server
    # Everything this server printed over the session (under pytest-xdist, this worker's share of it): no secret, no
    # state at INFO, a request id on every line. A failure shows as an error at the last teardown.
    stop_audited(server, "log audit (whole session)")


@pytest.fixture(scope="session")
def table(moto_endpoint: str) -> Any:
    """A DynamoDB client on the same moto server, to look at what was (not) written."""
    import boto3

    return boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="us-east-1")


@pytest.fixture
def http(baton: BatonServe) -> Iterator[httpx.Client]:
    """An HTTP client on the server, authenticated with the operator key."""
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=30) as client:
        yield client


def table_snapshot(table: Any) -> list[dict[str, Any]]:
    """Every item of the table that holds data, sorted: what "the table is unchanged" compares. Tenants' own items
    (`L#<tenant>`: their rate-limit buckets, which every request advances, refused ones too) are left out.

    A Scan is fine here: this is the test looking at moto, never Baton's code.
    """
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
    while True:
        page = table.scan(**kwargs)
        items.extend(item for item in page.get("Items", []) if not item["pk"]["S"].startswith("L#"))
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
