"""The wiring: the repositories and the authenticator the routes work with; the one api module that knows the
store's classes.

Nothing here is global. Whoever creates a resolver hands it a provider of `Services` (`create_app(services)`): the
Lambda's app (`api/app.py`) gets `from_environment()`, which reads the environment and builds the services on the
first request that needs AWS, then keeps them for the container's life. Routes receive them as a parameter
(`services: Wired`, from `api/resolver.py`), and the operations (`api/operations/`) in their `Context`. A test builds
its own services (`build_services`, on its table and client) and hands them to an app with powertools'
`dependency_overrides`: `app.dependency_overrides[wired] = lambda: services`, which the gate honours too.

Nothing here knows HTTP or powertools: the operations, which know no transport, are given these services.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from baton_checkpoints.api.auth import Authenticator
from baton_checkpoints.api.ratelimit import RateLimiter
from baton_checkpoints.domain.tenancy import Limits
from baton_checkpoints.settings import Settings, load_settings
from baton_checkpoints.store.aws import dynamodb_client, s3_client
from baton_checkpoints.store.checkpoints import CheckpointStore
from baton_checkpoints.store.keys import KeyStore
from baton_checkpoints.store.objects import ObjectStore
from baton_checkpoints.store.tenants import TenantStore
from baton_checkpoints.store.usage import Counting as Counting  # the resolver holds the request being counted
from baton_checkpoints.store.usage import UsageMeter, watch

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.store.audit import AuditTrail
    from baton_checkpoints.store.blobs import BlobStore
    from baton_checkpoints.store.client_documents import ClientDocuments
    from baton_checkpoints.store.history import HistoryStore
    from baton_checkpoints.store.leases import LeaseStore
    from baton_checkpoints.store.oauth import OAuthStore
    from baton_checkpoints.store.purge import SubjectPurger
    from baton_checkpoints.store.threads import ThreadStore


@dataclass(frozen=True)
class Services:
    """The repositories and the authenticator of one container.

    What every request may need is made with them; the other repositories (blobs, history, leases, the purger, the
    audit trail, threads, OAuth) by the first request that uses each: their modules stay off the cold start of a
    save or a lookup. All are made from the fields given here, so whoever builds services cannot wire them apart.

    A dataclass, where Baton's other value objects are `msgspec.Struct`s: the repositories made on first use are
    `cached_property`s, which need an instance `__dict__`, and the fields made from the others are not arguments.
    There is one such object per container.
    """

    settings: Settings
    dynamodb: DynamoDBClient
    checkpoints: CheckpointStore
    keys: KeyStore
    authenticator: Authenticator
    objects: ObjectStore | None
    """The blob bucket (None where the deployment has none: then no state is spilled and no blob stored)."""
    tenants: TenantStore = field(init=False)
    """Tenants' own items: their limits and their rate limit's buckets."""
    limiter: RateLimiter = field(init=False)
    """This container's share of each tenant's rate limit (`api/ratelimit.py`)."""
    usage: UsageMeter = field(init=False)
    """What this container counted of its tenants' usage and has not yet written (`store/usage.py`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenants", TenantStore(self.dynamodb, self.settings.table_name))
        object.__setattr__(self, "limiter", RateLimiter(self.tenants, default_limits(self.settings)))
        usage = UsageMeter(
            self.dynamodb,
            self.settings.table_name,
            self.settings.usage_flush_requests,
            self.settings.usage_flush_seconds,
        )
        object.__setattr__(self, "usage", usage)
        watch(self.dynamodb)

    def drop_connections(self) -> None:
        """Close the AWS clients' pooled connections (the next requests open new ones): after a SnapStart restore,
        those of the snapshot lead nowhere."""
        self.dynamodb.close()
        if self.objects is not None:
            self.objects.drop_connections()

    @cached_property
    def blobs(self) -> BlobStore:
        """Blob records and their presigned requests, on the same table, client and bucket."""
        from baton_checkpoints.store.blobs import BlobStore

        return BlobStore(self.dynamodb, self.settings.table_name, self.objects)

    @cached_property
    def history(self) -> HistoryStore:
        """Kept revisions of the checkpoints (restores save through `checkpoints`)."""
        from baton_checkpoints.store.history import HistoryStore

        return HistoryStore(self.dynamodb, self.settings.table_name, self.objects, self.checkpoints)

    @cached_property
    def leases(self) -> LeaseStore:
        """Checkpoints' leases, on the same table and client."""
        from baton_checkpoints.store.leases import LeaseStore

        return LeaseStore(self.dynamodb, self.settings.table_name)

    @cached_property
    def purger(self) -> SubjectPurger:
        """Deletes a subject's items page by page, on the same table and client."""
        from baton_checkpoints.store.purge import SubjectPurger

        return SubjectPurger(self.dynamodb, self.settings.table_name)

    @cached_property
    def audit(self) -> AuditTrail:
        """Tenants' audit trails (`store/audit.py`)."""
        from baton_checkpoints.store.audit import AuditTrail

        return AuditTrail(self.dynamodb, self.settings.table_name)

    @cached_property
    def threads(self) -> ThreadStore:
        """LangGraph threads, on the same table, client and bucket."""
        from baton_checkpoints.store.threads import ThreadStore

        return ThreadStore(self.dynamodb, self.settings.table_name, self.objects, self.blobs)

    @cached_property
    def oauth(self) -> OAuthStore:
        """OAuth clients, codes, tokens and grants (for `/mcp`), on the same table and client: made by the first
        OAuth request (its module stays off a save's cold start)."""
        return oauth_store(self.dynamodb, self.settings.table_name)

    @cached_property
    def client_documents(self) -> ClientDocuments:
        """OAuth clients described by a metadata document at their https id, fetched within bounds; a loopback
        address is allowed only where clients call plain http (`baton serve`)."""
        from baton_checkpoints.store.client_documents import ClientDocuments

        return ClientDocuments(loopback=self.settings.origin_scheme == "http")


def default_limits(settings: Settings) -> Limits:
    """The stage's default limits of a tenant."""
    return Limits(
        requests_per_minute=settings.tenant_requests_per_minute,
        burst=settings.tenant_burst,
        storage_bytes=settings.tenant_storage_bytes,
        checkpoints=settings.tenant_checkpoints,
    )


def oauth_store(client: DynamoDBClient, table_name: str) -> OAuthStore:
    """OAuth's repository on `client` and `table_name` (its module imported now, not at cold start)."""
    from baton_checkpoints.store.oauth import OAuthStore

    return OAuthStore(client, table_name)


def build_services(config: Settings, client: DynamoDBClient | None = None) -> Services:
    """The services for `config`, on `client` (default: a new client for its DynamoDB endpoint, the costly part of a
    cold start: call this once per container). The S3 client, on `aws_endpoint_url` (DynamoDB may be elsewhere:
    `dynamodb_endpoint_url`), is made by the first request that needs it."""
    if client is None:
        client = dynamodb_client(config.dynamodb_endpoint)
    objects = None
    if config.bucket_name is not None:
        endpoint = config.aws_endpoint_url
        objects = ObjectStore(lambda: s3_client(endpoint), config.bucket_name)
    keys = KeyStore(client, config.table_name)
    return Services(
        settings=config,
        dynamodb=client,
        checkpoints=CheckpointStore(client, config.table_name, objects),
        keys=keys,
        authenticator=Authenticator(keys, tokens=lambda: oauth_store(client, config.table_name)),
        objects=objects,
    )


class OnFirstUse:
    """A provider of services that builds them on its first call and hands out the same ones after."""

    def __init__(self, build: Callable[[], Services]) -> None:
        self._build = build
        self._built: Services | None = None

    def __call__(self) -> Services:
        """The services, built now if this is the first call."""
        if self._built is None:
            self._built = self._build()
        return self._built

    @property
    def built(self) -> Services | None:
        """The services if a request built them (never builds them)."""
        return self._built


def from_environment() -> OnFirstUse:
    """The Lambda's services: settings read from the environment (a missing or invalid variable fails the first
    request that needs AWS, naming it) and the client created on that first request, not at import."""
    return OnFirstUse(lambda: build_services(load_settings()))
