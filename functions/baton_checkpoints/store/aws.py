"""AWS clients, created on first use (importing boto3 is most of a cold start); `store.errors` classifies their
failures."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    import botocore.session
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

SERVICES: Final = ("dynamodb", "s3", "events")
"""The AWS services Baton makes clients of: all its sessions' loader looks for."""


def session() -> botocore.session.Session:
    """A botocore session whose data loader knows only `SERVICES` (`known_services_loader`)."""
    import botocore.session

    made = botocore.session.get_session()
    made.register_component("data_loader", known_services_loader()(made.get_config_variable("data_path")))
    return made


@cache
def known_services_loader() -> Any:
    """botocore's data loader, told which services exist instead of finding out.

    Before it loads a service's model, botocore's loader lists every directory of its data (some four hundred
    services, each with its API versions) to check the service exists: about a quarter of a client's creation, on
    every cold start (~11 ms of CPU of a DynamoDB client's ~41 ms here). This one lists only `SERVICES`, the same way
    (a test holds its answers equal to botocore's own for them); everything else is botocore's loader as it is.
    """
    from botocore.loaders import Loader, instance_cache

    class KnownServicesLoader(Loader):
        def __init__(self, data_path: str | None) -> None:
            # As botocore.loaders.create_loader reads AWS_DATA_PATH (the session's `data_path`).
            paths = [os.path.expanduser(os.path.expandvars(p)) for p in (data_path or "").split(os.pathsep) if p]
            super().__init__(extra_search_paths=paths or None)

        @instance_cache
        def list_available_services(self, type_name: str) -> list[str]:
            found = set()
            for location in self.search_paths:
                if not os.path.isdir(location):
                    continue
                for service in SERVICES:
                    directory = os.path.join(location, service)
                    if not os.path.isdir(directory):
                        continue
                    for version in os.listdir(directory):
                        if self.file_loader.exists(os.path.join(directory, version, type_name)):
                            found.add(service)
                            break
            return sorted(found)

    return KnownServicesLoader


def dynamodb_client(endpoint_url: str | None = None) -> DynamoDBClient:
    """A DynamoDB client with short timeouts and standard retries (the API has 30 s in all).

    Made with botocore itself: boto3 adds only import time. Parameter validation is off: every request is built
    by the store's own code, and botocore's check of a save's ~120-node request cost about a sixth of the save's
    CPU; DynamoDB validates again, and a request it refuses is a defect the store's tests catch.
    """
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=5,
        tcp_keepalive=True,
        parameter_validation=False,
    )
    client = session().create_client("dynamodb", endpoint_url=endpoint_url, config=config)
    return cast("DynamoDBClient", client)


def s3_client(endpoint_url: str | None = None) -> S3Client:
    """An S3 client that signs with SigV4 (presigned URLs included: only SigV4 makes S3 check the
    `x-amz-checksum-sha256` an upload was signed with) and, on a local endpoint, addresses buckets by path (a
    loopback address has no bucket subdomains).

    Created only when a request first needs S3 (a spilled state, a blob): most requests never pay for it.
    """
    from botocore.config import Config

    config = Config(
        signature_version="s3v4",
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=10,
        tcp_keepalive=True,
        s3={"addressing_style": "path" if endpoint_url else "auto"},
    )
    client = session().create_client("s3", endpoint_url=endpoint_url, config=config)
    return cast("S3Client", client)


def events_client(endpoint_url: str | None = None) -> Any:
    """An EventBridge client (the reaper's change events), made on the first batch that has events to publish."""
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=5)
    return session().create_client("events", endpoint_url=endpoint_url, config=config)
