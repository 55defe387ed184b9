"""SnapStart's runtime hooks for the api function (`snapshot_restore_py`, which the Python managed runtime runs).

Lambda initializes a SnapStart function once, when a version is published, snapshots the process, and starts each
new container from that snapshot: what the first request would build is built before the snapshot, and what must
differ between containers is made anew after each restore.

- **Before the snapshot** (`prepare`): the modules a first request of any route would import, the services and
  their AWS clients, DynamoDB's and S3's (the settings come from the function's environment), each route's
  resolved annotations and its parameters' validators, every model pydantic builds on first use, the state codec's
  dictionary and tables, and the service logger. No request is made to DynamoDB or S3 (botocore may read the
  function's credentials from Lambda's own endpoint, as at any first request).
- **After a restore** (`restore`): `random` is seeded again (its state is the snapshot's in every container; ids,
  secrets, lease tokens and request tags come from `secrets` and `uuid4`, which read the kernel's random source, and
  need nothing), the rate limiter's clock is anchored again (the snapshot's anchor is as old as the snapshot), and
  the AWS clients' pooled connections are dropped (they lead nowhere).
"""

from __future__ import annotations

import importlib
import random
from typing import Final

from pydantic import BaseModel
from snapshot_restore_py import register_after_restore, register_before_snapshot

from baton_checkpoints.api import ratelimit
from baton_checkpoints.api.app import app, lambda_services
from baton_checkpoints.observability import logger
from baton_checkpoints.store import codec

DEFERRED: Final = (
    "baton_checkpoints.api.mcp.protocol",
    "baton_checkpoints.api.oauth_endpoints",
    "baton_checkpoints.api.origin",
    "baton_checkpoints.domain.oauth",
    "baton_checkpoints.domain.opencheckpoint",
    "baton_checkpoints.store.oauth",
    "baton_checkpoints.store.client_documents",
    "baton_checkpoints.store.threads",
)
"""The modules the routes import on their first use, off a save's cold start: in the snapshot, every one of them."""

LAZY_SERVICES: Final = ("blobs", "history", "leases", "purger", "audit", "threads", "oauth", "client_documents")
"""The repositories `Services` makes on their first use."""


@register_before_snapshot
def prepare() -> None:
    """Build, before the snapshot, what the first request of each route would."""
    for name in DEFERRED:
        importlib.import_module(name)
    services = lambda_services()
    for made_on_first_use in LAZY_SERVICES:
        getattr(services, made_on_first_use)  # now, instead
    if services.objects is not None:
        services.objects.client  # noqa: B018 (the S3 client, made by the first request that needs it: now)
    app.prepare_routes()
    build_models()
    codec.prepare()
    logger()  # (made by the first line logged besides an access line: a restored container's is made already)


def build_models() -> list[type[BaseModel]]:
    """Build every model of Baton's that pydantic left to its first use (`defer_build`: the answers' serializers,
    the bodies' validators); the models built."""
    built: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        for model in todo.pop().__subclasses__():
            todo.append(model)
            generic = bool(model.__pydantic_generic_metadata__["parameters"])  # (built when parametrized)
            if model.__module__.startswith("baton_checkpoints.") and not model.__pydantic_complete__ and not generic:
                model.model_rebuild()
                built.append(model)
    return built


@register_after_restore
def restore() -> None:
    """Make anew, after a restore, what must differ between the containers of one snapshot."""
    random.seed()
    ratelimit.reanchor()
    services = lambda_services.built
    if services is not None:
        services.drop_connections()
