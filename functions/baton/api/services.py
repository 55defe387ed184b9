"""What the routes work with, built on first use and kept for the container's life."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from baton.api.auth import Authenticator
from baton.settings import Settings, settings
from baton.store.aws import dynamodb_client
from baton.store.checkpoints import CheckpointStore
from baton.store.keys import KeyStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class Services:
    """The repositories and the authenticator of one container."""

    settings: Settings
    dynamodb: DynamoDBClient
    checkpoints: CheckpointStore
    keys: KeyStore
    authenticator: Authenticator


def build_services(config: Settings) -> Services:
    """Wire the repositories for `config` (creates the AWS client: call once per container)."""
    client = dynamodb_client(config.aws_endpoint_url)
    keys = KeyStore(client, config.table_name)
    return Services(
        settings=config,
        dynamodb=client,
        checkpoints=CheckpointStore(client, config.table_name),
        keys=keys,
        authenticator=Authenticator(keys),
    )


@cache
def services() -> Services:
    """The container's services, created by the first request that needs them."""
    return build_services(settings())


def reset() -> None:
    """Forget the container's settings and services (tests that change the environment call this)."""
    services.cache_clear()
    settings.cache_clear()
