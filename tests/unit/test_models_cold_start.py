"""A cold start builds the models it uses and no others: the api handler's import builds no validator or serializer
of Baton's request and response models (pydantic's `defer_build`; the envelopes routes document are made with the
OpenAPI document, `api/openapi.py`), and a container's first save, then a lookup, build only their own models; the
bodies and answers of every other route stay unbuilt until a request uses them. Its value objects are msgspec Structs,
whose classes generate no code: the one dataclass it defines is `Services`.

Told by each model's `__pydantic_complete__` (False until pydantic has built its validator and serializer), in a
fresh interpreter that imports the handler and serves a save and a lookup against in-process moto."""

from __future__ import annotations

from typing import Any

from tests.unit import cold_probe

SAVE_MODELS = {
    "baton_checkpoints.domain.models.SaveCheckpointRequest",
    "baton_checkpoints.domain.models.Source",
    "baton_checkpoints.domain.models.ResourceRef",
    "baton_checkpoints.api.schemas.SaveResult",
}
"""What a save may build: its body's models, its answer's."""
LOOKUP_MODELS = {
    "baton_checkpoints.api.schemas.CheckpointSummary",
    "baton_checkpoints.api.schemas.CheckpointRecord",
    "baton_checkpoints.api.schemas.Resource",
    "baton_checkpoints.api.schemas.SourceOut",
    "baton_checkpoints.api.schemas.Lease",
}
"""What a lookup may build: its answer's models."""
OTHER_ROUTES = {
    "baton_checkpoints.domain.models.RestoreRequest",
    "baton_checkpoints.domain.models.AcquireLeaseRequest",
    "baton_checkpoints.domain.models.CreateKeyRequest",
    "baton_checkpoints.domain.models.CreateBlobRequest",
    "baton_checkpoints.domain.tenancy.LimitsRequest",
    "baton_checkpoints.api.schemas.ErrorEnvelope",
}
"""Models a cold start defines (their modules are imported) but a save and a lookup never use. The answers of every
other family (`api/schemas_<family>.py`: keys, blobs, leases, tenants, audit, resume) are not even defined."""

# A save and a lookup served by a cold container (`cold_probe`); after each step, every Baton model defined so far and
# whether pydantic has built it.
PROBE = """
from pydantic import BaseModel

def models():
    found, todo = {}, [BaseModel]
    while todo:
        for model in todo.pop().__subclasses__():
            todo.append(model)
            if model.__module__.startswith("baton_checkpoints."):
                found[f"{model.__module__}.{model.__qualname__}"] = bool(model.__pydantic_complete__)
    return found

import dataclasses
seen = {"import": models()}
seen["dataclasses"] = sorted(
    f"{module.__name__}.{name}"
    for module in list(sys.modules.values())
    if getattr(module, "__name__", "").startswith("baton_checkpoints.")
    for name, value in vars(module).items()
    if isinstance(value, type) and value.__module__ == module.__name__ and dataclasses.is_dataclass(value)
)
statuses = []
for step, name in (("save", "save_checkpoint"), ("lookup", "lookup_checkpoint")):
    statuses.append(handler(event(name), None)["statusCode"])
    seen[step] = models()
# the probe can tell: a model of another route, used, is built
from baton_checkpoints.domain.models import CreateKeyRequest
CreateKeyRequest.model_validate({"agent_id": "a", "scopes": ["checkpoints:read"]})
seen["used"] = models()
print(json.dumps({"statuses": statuses, **seen}))
"""


def probe() -> dict[str, Any]:
    """Run the probe in a fresh interpreter and return what it saw."""
    return cold_probe.run(PROBE)


def built(models: dict[str, bool]) -> set[str]:
    return {name for name, complete in models.items() if complete}


def test_a_cold_save_and_lookup_build_only_their_own_models() -> None:
    seen = probe()
    assert seen["statuses"] == [201, 200], seen["statuses"]
    # Every model of another route is defined by the import (so the probe sees it), and never built
    assert set(seen["import"]) >= OTHER_ROUTES, sorted(OTHER_ROUTES - set(seen["import"]))
    assert built(seen["import"]) == set(), sorted(built(seen["import"]))
    assert built(seen["save"]) <= SAVE_MODELS, sorted(built(seen["save"]))
    assert built(seen["lookup"]) <= SAVE_MODELS | LOOKUP_MODELS, sorted(built(seen["lookup"]))
    assert not built(seen["lookup"]) & OTHER_ROUTES
    assert not [name for name in seen["lookup"] if name.startswith("baton_checkpoints.api.schemas_")], seen["lookup"]
    # No value object of the cold path is a dataclass (each would generate its methods at import)
    assert seen["dataclasses"] == ["baton_checkpoints.api.services.Services"], seen["dataclasses"]
    # A model is built by its first use
    assert seen["used"]["baton_checkpoints.domain.models.CreateKeyRequest"] is True
