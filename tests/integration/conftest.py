"""Integration tests: the api handler, driven with `events/`, against in-process moto, and DynamoDB's own engine.

Every test's AWS is a fresh world (`aws_world`): S3 is always in-process moto; DynamoDB is the test's `engine`, moto
in-process by default. A module marked `engines` (`pytestmark = pytest.mark.engines`) runs each of its tests that
uses the world twice, `[moto]` and `[dynamodb-local]`: DynamoDB Local (AWS's own engine, `tests/engines.py`) on a
loopback port, started once per test process; `mock_aws` lets the requests to it through (its patterns match AWS's
hostnames only). A test that needs DynamoDB Local fails when it is not installed (`make dynamodb-local`): never skipped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import pytest
from moto import mock_aws

from baton_checkpoints.api.resolver import wired
from baton_checkpoints.api.services import OnFirstUse, Services, build_services
from baton_checkpoints.domain.access import issue_key
from baton_checkpoints.settings import load_settings
from tests.integration.driver import ApiDriver, CallCounter, CapacityMeter

TABLE = "baton-test"
BUCKET = "baton-test-blobs"
OPERATOR_SECRET = "btn_test_operator_secret_0001"
MOTO: Final = "moto"
DYNAMODB_LOCAL: Final = "dynamodb-local"
ENGINES: Final = (MOTO, DYNAMODB_LOCAL)
"""The DynamoDB engines a test marked `engines` runs on, by the names its ids show."""
_endpoint: list[str | None] = [None]
"""The DynamoDB endpoint of the world in use (None: moto in-process), for the services a test builds itself."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "engines: runs each test on both DynamoDB engines, in-process moto and DynamoDB Local ([moto], "
        "[dynamodb-local]); `--engines` may name one",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `engines` that uses the world (`engine`, directly or through `aws`, `services`, `api`...) runs
    on each engine `--engines` names (both unless told): module-scoped, so a module's worlds shared by its tests are
    one per engine, and the tests of one engine run together."""
    if "engine" in metafunc.fixturenames and metafunc.definition.get_closest_marker("engines") is not None:
        chosen = chosen_engines(metafunc.config)
        metafunc.parametrize("engine", chosen, indirect=True, scope="module", ids=list(chosen))


def chosen_engines(config: pytest.Config) -> tuple[str, ...]:
    """The engines `--engines` names (comma-separated), in `ENGINES` order: both when the option is not given."""
    named = {name.strip() for name in str(config.getoption("engines") or ",".join(ENGINES)).split(",")}
    unknown = named - set(ENGINES)
    if unknown or not named:
        raise pytest.UsageError(f"--engines takes {' or '.join(ENGINES)} (comma-separated), not {sorted(unknown)}")
    return tuple(engine for engine in ENGINES if engine in named)


@pytest.fixture(scope="module")
def engine(request: pytest.FixtureRequest) -> str:
    """The test's DynamoDB engine: `moto`, or `dynamodb-local` in a module marked `engines`."""
    return str(getattr(request, "param", MOTO))


def dynamodb_endpoint() -> str | None:
    """The DynamoDB endpoint of the world in use (None: in-process moto)."""
    return _endpoint[0]


def engine_endpoint(engine: str) -> str | None:
    """The DynamoDB endpoint of `engine` (None: in-process moto; DynamoDB Local: started now if it is not yet)."""
    if engine == MOTO:
        return None
    if engine == DYNAMODB_LOCAL:
        from tests.engines import engine_for_test

        return engine_for_test().endpoint
    raise ValueError(f"unknown engine {engine!r}")


def reaper_environment(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """The reaper function's environment as the stack sets it (table, bucket, no endpoint), on `engine`: there,
    DynamoDB's endpoint as `baton serve --dynamodb-endpoint` sets it."""
    monkeypatch.setenv("BATON_TABLE_NAME", TABLE)
    monkeypatch.setenv("BATON_BUCKET_NAME", BUCKET)
    monkeypatch.delenv("BATON_AWS_ENDPOINT_URL", raising=False)
    endpoint = engine_endpoint(engine)
    if endpoint is None:
        monkeypatch.delenv("BATON_DYNAMODB_ENDPOINT_URL", raising=False)
    else:
        monkeypatch.setenv("BATON_DYNAMODB_ENDPOINT_URL", endpoint)


def streams_client() -> Any:
    """A DynamoDB Streams client on the world in use (in-process, moto's needs the account id left out of its
    endpoint)."""
    import boto3
    from botocore.config import Config

    endpoint = dynamodb_endpoint()
    if endpoint is None:
        return boto3.client(
            "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
        )
    return boto3.client("dynamodbstreams", region_name="us-east-1", endpoint_url=endpoint)


def settings_environment(table: str, bucket: str | None = BUCKET) -> dict[str, str]:
    """A container's environment on `table` (and `bucket`) of the world in use: DynamoDB on its engine."""
    # The suites make thousands of requests a second as one tenant, which is no tenant's rate: their tenants get a
    # rate and a burst no suite exhausts. tests/integration/test_rate_limits.py sets its own tenants' limits (and its
    # limiters' clock), and the e2e suites run `baton serve` with the stage's defaults.
    environ = {
        "BATON_TABLE_NAME": table,
        "BATON_TENANT_REQUESTS_PER_MINUTE": "6000000",
        "BATON_TENANT_BURST": "1000000",
        # A container writes its tenants' usage counts every 100 requests or 30 s: never here, where tests assert
        # each operation's exact requests. tests/integration/test_usage.py writes them itself, and measures what
        # the stage's policy costs on containers of its own.
        "BATON_USAGE_FLUSH_REQUESTS": "10000",
        "BATON_USAGE_FLUSH_SECONDS": "3600",
    }
    if bucket is not None:
        environ["BATON_BUCKET_NAME"] = bucket
    endpoint = dynamodb_endpoint()
    if endpoint is not None:
        environ["BATON_DYNAMODB_ENDPOINT_URL"] = endpoint
    return environ


@contextmanager
def serving(provider: Callable[[], Services]) -> Iterator[None]:
    """The Lambda's app (what `baton_checkpoints.handlers.api.handler` resolves with) serves with `provider`'s
    services, through
    powertools' `dependency_overrides`, which the gate honours as well as the routes."""
    from baton_checkpoints.api.app import app

    app.dependency_overrides[wired] = lambda: provider()
    try:
        yield
    finally:
        app.dependency_overrides.pop(wired, None)


def services_on(table: str, client: Any = None) -> Services:
    """A container's services on `table` (on `client`, or a new client of the world in use: its engine's)."""
    return build_services(load_settings(settings_environment(table)), client)


@functools.cache
def own_client(service: str, endpoint: str | None = None) -> Any:
    """The test's own client of `service` (to create the table and bucket, and to look at what was written), one
    per test process: creating a client costs about 25 ms of CPU, and these are not the containers' (a world's
    services still make their own, as a new Lambda container does). On moto the stubber, registered with botocore's
    built-in handlers when moto is imported, serves whichever `mock_aws` account is current. Tests never register
    handlers on it."""
    if endpoint is not None:
        from tests.engines import engine_for_test

        return engine_for_test().client(service)
    import boto3

    return boto3.client(service, region_name="us-east-1")


@contextmanager
def aws_world(engine: str = MOTO) -> Iterator[Any]:
    """A fresh world with Baton's table and bucket, and the api handler serving it: its services are built by the
    first request (or test) that needs them, as in a new Lambda container. S3 is a fresh in-process moto account;
    DynamoDB is that account's on `moto`, DynamoDB Local's (the table deleted and created again: empty, with a new
    stream) on `dynamodb-local`. Yields a DynamoDB client on the engine."""
    with mock_aws():
        from baton_checkpoints.store.schema import ensure_bucket

        ensure_bucket(own_client("s3"), BUCKET)
        client = dynamodb_of(engine)
        _endpoint[0] = engine_endpoint(engine)
        try:
            with serving(OnFirstUse(lambda: services_on(TABLE))):
                yield client
        finally:
            _endpoint[0] = None


def dynamodb_of(engine: str, table: str = TABLE) -> Any:
    """A DynamoDB client on `engine` holding `table` as Baton creates it: on moto (inside `mock_aws`), created in
    the account; on DynamoDB Local, deleted and created again (empty, with a new stream)."""

    from baton_checkpoints.store.schema import ensure_table
    from tests.engines import engine_for_test, fresh_table

    if engine == MOTO:
        client = own_client("dynamodb")
        ensure_table(client, table)
        return client
    if engine == DYNAMODB_LOCAL:
        client = own_client("dynamodb", engine_for_test().endpoint)
        fresh_table(client, table)
        return client
    raise ValueError(f"unknown engine {engine!r}")


def moto_world() -> Any:
    """`aws_world` on in-process moto alone (what a test that needs moto itself uses: its lock, its stubber)."""
    return aws_world(MOTO)


@pytest.fixture
def aws(engine: str) -> Iterator[Any]:
    """A fresh world for the test (`aws_world`) on its engine."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture
def services(aws: Any) -> Services:
    """The services the handler serves with."""
    from baton_checkpoints.api.app import app

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


@pytest.fixture
def capacity(services: Services, engine: str) -> Iterator[CapacityMeter]:
    """What DynamoDB says the handler's client consumed (`ReturnConsumedCapacity`), request by request. Only
    DynamoDB Local's figures are DynamoDB's: a test asserts them there (`measured(engine)`), and its own count of
    units by DynamoDB's rules on both engines."""
    meter = CapacityMeter()
    meter.attach(services.dynamodb)
    yield meter
    meter.detach(services.dynamodb)


def measured(engine: str) -> bool:
    """True when the engine's `ConsumedCapacity` is DynamoDB's (DynamoDB Local; moto's is not realistic)."""
    return engine == DYNAMODB_LOCAL


NOT_DATA: Final = ("L#", "E#")
"""Partitions of no request's data: a tenant's own items (`L#`: its rate-limit bucket counts requests, refused ones
too; its usage days) and its audit trail (`E#`: appended after each management action, tested on its own in
test_audit.py)."""


def data_items(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`found` without the partitions that hold no request's data (`NOT_DATA`): a refused request writes nothing
    else."""
    return [item for item in found if not item["pk"]["S"].startswith(NOT_DATA)]


def table_items(client: Any, table: str = TABLE) -> list[dict[str, Any]]:
    """Every item of the table that holds data, in key order, read consistently (a test may Scan moto; the product
    never does): not tenants' own items (`data_items`)."""
    found: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**request)
        found.extend(data_items(response["Items"]))
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
