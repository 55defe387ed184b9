"""SnapStart's runtime hooks (`handlers/snapstart.py`): registered by the api handler's module in Lambda, they build
before the snapshot what a first request would, and make anew after each restore what must differ between the
containers that resume from one snapshot. A restore is played here as Lambda plays it on one snapshot: a process
prepared once, forked (each child resumes from the same memory), each child running the after-restore hooks."""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from functools import cached_property
from typing import Any

import pytest
import snapshot_restore_py

from baton_checkpoints.api import ratelimit
from baton_checkpoints.api.services import OnFirstUse, Services
from baton_checkpoints.domain.ids import new_checkpoint_id
from baton_checkpoints.domain.leases import new_secret
from tests import proof_counts

SUITE = "snapstart (integration)"


@pytest.fixture
def hooks(services: Services, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The hooks module, on the test's services (as the Lambda's, built from its environment)."""
    from baton_checkpoints.handlers import snapstart

    built = OnFirstUse(lambda: services)
    monkeypatch.setattr(snapstart, "lambda_services", built)
    return snapstart


def test_the_hooks_are_registered_for_the_runtime_to_run(hooks: Any) -> None:
    # The managed runtime runs what snapshot_restore_py holds: before the snapshot, then after each restore
    before = [func for func, _, _ in snapshot_restore_py.get_before_snapshot()]
    after = [func for func, _, _ in snapshot_restore_py.get_after_restore()]
    assert hooks.prepare in before
    assert hooks.restore in after


def test_prepare_builds_what_a_first_request_would_without_calling_aws(hooks: Any, services: Services) -> None:
    import sys

    calls: list[str] = []
    services.dynamodb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    try:
        hooks.prepare()
    finally:
        services.dynamodb.meta.events.unregister("before-call.dynamodb")
    assert calls == []
    assert all(name in sys.modules for name in hooks.DEFERRED)
    # every repository the services make on first use is made (a new one cannot be left out of the snapshot)
    lazy = {name for name, value in vars(Services).items() if isinstance(value, cached_property)}
    assert set(hooks.LAZY_SERVICES) == lazy
    assert lazy <= set(vars(services))
    # every model and every route's validators are built: a restored container's first request builds none
    assert hooks.build_models() == []
    save = next(r for r in hooks.app._static_routes if r.method == "POST" and r.openapi_path == "/v1/checkpoints")
    assert save.body_field._type_adapter.pydantic_complete
    from baton_checkpoints import observability

    assert observability._made is not None
    # and the state codec's dictionary and tables: a first packed save makes none
    from baton_checkpoints.store import codec

    assert codec._zstd is not None
    assert all(codec._zstd._compressors.values())
    assert codec._zstd._decompressors
    assert hooks.lambda_services.built is services


def _resumed(writer: int, restore: Any) -> None:
    """A child: a container resumed from the parent's memory, drawing what must be its own."""
    try:
        if restore is not None:
            restore()
        drawn = {
            "checkpoint_id": new_checkpoint_id(),
            "lease_secret": new_secret(),
            "uuid": uuid.uuid4().hex,
            "random": random.random(),
        }
        os.write(writer, json.dumps(drawn).encode())
    finally:
        os._exit(0)


def _restore_twice(restore: Any) -> list[dict[str, Any]]:
    drawn = []
    for _ in range(2):
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(reader)
            _resumed(writer, restore)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            drawn.append(json.loads(pipe.read()))
        os.waitpid(child, 0)
    return drawn


def test_two_containers_restored_from_one_snapshot_draw_different_ids(hooks: Any) -> None:
    # Given a process prepared as Lambda prepares the snapshot
    hooks.prepare()
    kept = random.getstate()
    random.seed(1234)  # whatever `random` holds at the snapshot, every restored container holds it too
    # When two containers resume from it, each running the after-restore hooks
    first, second = _restore_twice(hooks.restore)
    # Then everything they draw is their own: ids, lease secrets, uuids, and `random`'s jitter too
    assert all(first[name] != second[name] for name in first), (first, second)
    # (Ids and secrets come from the kernel's random source, so they differ even without the hook. `random` would
    # not after a snapshot's restore; a fork cannot show that: Python seeds `random` again in a forked child itself)
    bare_first, bare_second = _restore_twice(None)
    random.setstate(kept)  # (this process's own `random`, as it was)
    assert bare_first["checkpoint_id"] != bare_second["checkpoint_id"]
    assert bare_first["lease_secret"] != bare_second["lease_secret"]
    proof_counts.record(SUITE, restores=4)


def test_restore_anchors_the_rate_limiters_clock_again_and_the_clients_still_serve(
    hooks: Any, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks.prepare()
    monkeypatch.setattr(ratelimit, "_anchor_ns", ratelimit._anchor_ns)  # (put back after the test)
    # Given a snapshot taken a day before its restore (the monotonic clock resumes where it stopped)
    before = ratelimit.container_clock_us()
    day_ns = 86_400 * 10**9
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + day_ns)
    # When the container is restored
    hooks.restore()
    # Then the limiter's clock is the wall clock of now, not of the snapshot
    after = ratelimit.container_clock_us()
    assert after - before >= 86_400 * 10**6
    # And the clients, their pooled connections dropped, still serve
    table = services.settings.table_name
    assert services.dynamodb.describe_table(TableName=table)["Table"]["TableName"] == table
