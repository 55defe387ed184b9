"""AWS clients, created on first use (importing boto3 is most of a cold start); `store.errors` classifies their
failures."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    import botocore.session
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

SERVICES: Final = ("dynamodb", "s3", "events")
"""The AWS services Baton makes clients of: all its sessions' loader looks for."""
ENDPOINTS: Final = Path(__file__).with_name("endpoints.json")
"""botocore's endpoint data (`data/endpoints.json`) trimmed to `SERVICES` (`trimmed_endpoints`), with the botocore
version it was trimmed from. Written by `make botocore-endpoints`; a test holds it equal to the installed botocore's."""


def session() -> botocore.session.Session:
    """A botocore session whose data loader knows only `SERVICES` (`known_services_loader`), and whose clients parse
    DynamoDB's items directly (`item_wire.ItemParserFactory`)."""
    import botocore.session

    from baton_checkpoints.store.item_wire import ItemParserFactory

    made = botocore.session.get_session()
    made.register_component("data_loader", known_services_loader()(made.get_config_variable("data_path")))
    made.register_component("response_parser_factory", ItemParserFactory())
    return made


@cache
def known_services_loader() -> Any:
    """botocore's data loader, told which services exist instead of finding out, reading its JSON with orjson, and
    handing out botocore's endpoint data trimmed to `SERVICES`.

    A DynamoDB client's creation took ~41 ms of CPU of a cold start here; three things botocore's own loader does
    took most of it, each for every service it knows rather than the three Baton uses:
    - Before it loads a service's model, it lists every directory of its data (some four hundred services, each with
      its API versions) to check the service exists (~11 ms). This one lists only `SERVICES`, the same way.
    - It parses its endpoint data, 1.2 MB holding every service in every partition, to answer for one (~14 ms).
      This one hands out the copy trimmed to `SERVICES` (`ENDPOINTS`), when that copy was made from this very
      botocore and botocore would read its own file (no `AWS_DATA_PATH` or `~/.aws/models` copy comes first).
    - It parses JSON into `OrderedDict`s; orjson's plain dicts keep the same order, at a third of the time (~3 ms of
      a DynamoDB model). What orjson would read otherwise is parsed as botocore parses it: what it refuses (NaN),
      and a file holding a run of 19 digits or more anywhere (orjson reads an integer past 64 bits as a float).
    Tests hold every answer equal to botocore's own loader's for `SERVICES`; anything else is botocore's as it is.
    """
    import botocore
    import orjson
    from botocore.loaders import JSONFileLoader, Loader, instance_cache

    class OrjsonFileLoader(JSONFileLoader):
        def _load_file(self, full_path: str, open_method: Any) -> Any:
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as file:
                payload = file.read()
            if payload.translate(_DIGITS).find(_LONG_NUMBER) < 0:
                try:
                    return orjson.loads(payload)
                except orjson.JSONDecodeError:
                    pass
            return super()._load_file(full_path, open_method)  # type: ignore[misc]  # (untyped in the stubs)

    class KnownServicesLoader(Loader):
        FILE_LOADER_CLASS = OrjsonFileLoader

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

        @instance_cache
        def load_data_with_path(self, name: str) -> tuple[Any, str]:
            if name == "endpoints":
                # The file botocore would read: the first of its search paths that has one.
                locations = (os.path.join(p, name) for p in self.search_paths if os.path.isdir(p))
                path = next((p for p in locations if self.file_loader.exists(p)), None)
                if path == os.path.join(self.BUILTIN_DATA_PATH, name):
                    try:
                        kept = orjson.loads(ENDPOINTS.read_bytes())
                        if kept["botocore"] == botocore.__version__:
                            return kept["endpoints"], path
                    except (OSError, ValueError, KeyError, TypeError):
                        pass  # (a copy missing or damaged: botocore's own file, as botocore reads it)
            return cast("tuple[Any, str]", super().load_data_with_path(name))

    return KnownServicesLoader


_DIGITS: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""A translation of bytes that makes every digit `0` and everything else a space."""
_LONG_NUMBER: Final = b"0" * 19
"""19 digits in a row, translated: an integer that may not fit in 64 bits (or a string holding such a run)."""


def trimmed_endpoints(endpoints: dict[str, Any]) -> dict[str, Any]:
    """botocore's endpoint data with each partition's services cut down to `SERVICES`: botocore's endpoint resolver
    reads a service's entry of the partition it looks in and nothing of any other service."""
    return {
        **endpoints,
        "partitions": [
            {**partition, "services": {k: v for k, v in partition["services"].items() if k in SERVICES}}
            for partition in endpoints["partitions"]
        ],
    }


def write_trimmed_endpoints() -> Path:
    """Write `ENDPOINTS` from the installed botocore's endpoint data (`make botocore-endpoints`)."""
    import json

    import botocore
    from botocore.loaders import Loader

    endpoints = Loader(include_default_search_paths=False, extra_search_paths=[Loader.BUILTIN_DATA_PATH]).load_data(
        "endpoints"
    )
    kept = {"botocore": botocore.__version__, "endpoints": trimmed_endpoints(endpoints)}
    ENDPOINTS.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    return ENDPOINTS


def dynamodb_client(endpoint_url: str | None = None) -> DynamoDBClient:
    """A DynamoDB client with short timeouts and standard retries (the API has 30 s in all).

    Made with botocore itself: boto3 adds only import time; its items are written and parsed directly (`item_wire`).
    Parameter validation is off: every request is built by the store's own code, and botocore's check of a save's
    ~120-node request cost about a sixth of the save's CPU; DynamoDB validates again, and a request it refuses is a
    defect the store's tests catch.
    """
    from botocore.config import Config

    from baton_checkpoints.store.signing import sign_with_baton

    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=5,
        tcp_keepalive=True,
        parameter_validation=False,
    )
    client = session().create_client("dynamodb", endpoint_url=endpoint_url, config=config)
    with_item_serializer(client)
    sign_with_baton(client)
    return cast("DynamoDBClient", client)


def with_item_serializer(client: Any) -> Any:
    """`client` writing DynamoDB's items directly (`item_wire.ItemSerializer`) instead of through botocore's
    `JSONSerializer`, which it replaces: botocore takes no serializer of a caller's, so this is the client's own
    attribute (a test fails if botocore renames it), with the settings botocore gave the one it replaces (its
    timestamps' precision). A serializer of another kind is left as it is."""
    from botocore.serialize import JSONSerializer

    from baton_checkpoints.store.item_wire import ItemSerializer

    serializer = getattr(client, "_serializer", None)
    if type(serializer) is JSONSerializer:
        replacement = ItemSerializer()
        replacement.__dict__.update(vars(serializer))
        client._serializer = replacement
    return client


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
