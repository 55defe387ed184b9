"""Review of the history save of commit 9eb559a (copy the superseded revision, then write the checkpoint; the reaper
prunes), against in-process moto: real requests through the api handler, another container's stores acting in the
gap between the copy and the checkpoint write, and the records moto's own stream gave fed to the reaper function.

Tests marked "Found in review" failed on that commit; each passes since the fix it names (the reaper reads an image
with `keep` > 0 as holding revisions; a round lost without the revision moving does not copy again; a spilled state
deleted under a read is a 404 or a re-read, never a 500). The others held and cover races the suite did not.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import botocore.endpoint
import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain.clock import now_ms
from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.store import layout, schema
from tests.integration.conftest import TABLE, aws_world, reaper_environment, services_on
from tests.integration.driver import ApiDriver, CallCounter, Result
from tests.integration.faults import THROTTLING, Duration, Fault, Phase, injected
from tests.integration.test_reaper import Stream
from tests.integration.test_reaper_history import (
    AGENT,
    KIND,
    SUBJECT,
    TENANT,
    World,
    big_state,
    delete,
    revision,
    saved,
)
from tests.proof_counts import record

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

SUITE = "history review (integration)"


@pytest.fixture(scope="module", autouse=True)
def _warm_reaper(engine: str) -> Iterator[None]:
    """The reaper's container, made afresh for this module (per engine) and dropped after it."""
    reaper_function.reaper.cache_clear()
    yield
    reaper_function.reaper.cache_clear()


@pytest.fixture(autouse=True)
def retry_delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore sleeps between its retries of a throttled request: recorded instead, so that a 503 costs no time."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=delays.append))
    return delays


@pytest.fixture(scope="module")
def aws(engine: str) -> Iterator[Any]:
    """One world for the module per engine; each test starts from an emptied table and bucket."""
    with aws_world(engine) as client:
        yield client


@pytest.fixture(scope="module")
def stream(aws: Any) -> Stream:
    return Stream(aws)


@pytest.fixture
def world(aws: Any, services: Services, stream: Stream, monkeypatch: pytest.MonkeyPatch, engine: str) -> World:
    """The reaper function's environment as the stack sets it, on the api handler's world, emptied."""
    reaper_environment(monkeypatch, engine)
    assert services.objects is not None
    # A hint left by an earlier test would send this test's first save down another path.
    services.checkpoints._with_history.clear()
    return World(aws, services.objects.client, stream).emptied()


@pytest.fixture
def other(world: World) -> Services:
    """Another container's services (its own client): the concurrent writer acting in a request's gap."""
    return services_on(TABLE)


class Gap:
    """Runs `action` once, right after the handler's client made its `nth` call of `operation` (the gap between two
    requests of one route), through botocore's `after-call` event; counts the client's calls meanwhile."""

    def __init__(self, services: Services, operation: str, nth: int, action: Callable[[], None]) -> None:
        self.services = services
        self.operation = operation
        self.nth = nth
        self.action: Callable[[], None] | None = action
        self.seen = 0
        self.calls = CallCounter()

    def __call__(self, **_: Any) -> None:
        self.seen += 1
        if self.seen == self.nth and self.action is not None:
            action, self.action = self.action, None
            action()

    def __enter__(self) -> Gap:
        events = self.services.dynamodb.meta.events
        events.register(f"after-call.dynamodb.{self.operation}", self)
        events.register("before-call.dynamodb", self.calls)
        return self

    def __exit__(self, *_: object) -> None:
        events = self.services.dynamodb.meta.events
        events.unregister(f"after-call.dynamodb.{self.operation}", self)
        events.unregister("before-call.dynamodb", self.calls)

    @property
    def fired(self) -> bool:
        return self.action is None


def revisions_of(world: World, checkpoint_id: str) -> list[int]:
    """The revision numbers stored for `checkpoint_id` (whatever the window shows)."""
    return sorted(
        layout.read_revision_sk(item[schema.SK]["S"])[3]
        for item in world.revision_items()
        if layout.read_revision_sk(item[schema.SK]["S"])[2] == checkpoint_id
    )


def listed(api: ApiDriver, checkpoint_id: str) -> list[int]:
    answer = api.invoke("list_revisions", path=f"/v1/checkpoints/{checkpoint_id}/revisions", query={})
    assert answer.status == 200, answer.raw_body
    return [int(r["revision"]) for r in answer.data]


def acquire(api: ApiDriver, checkpoint_id: str, holder: str, ttl_seconds: int = 300) -> Result:
    answer = api.invoke(
        "acquire_lease",
        path=f"/v1/checkpoints/{checkpoint_id}/lease",
        body={"ttl_seconds": ttl_seconds, "holder": holder},
        headers={"idempotency-key": None},
    )
    assert answer.status in (200, 201), answer.raw_body
    return answer


# -- found in review (1): a copy of a checkpoint's first kept revision outlives its checkpoint


def test_a_copy_left_by_a_failed_first_history_save_is_removed_with_its_checkpoint(
    api: ApiDriver, world: World, services: Services
) -> None:
    """Found in review. A checkpoint created with `keep_revisions` has no `vf` until its second save. When that save
    puts its copy of revision 1 and then fails (here DynamoDB throttles the checkpoint's PutItem: 503), and the
    checkpoint is deleted, the reaper's REMOVE sees no `vf` in the old image: it neither deletes the checkpoint's
    revisions nor reads them, so it deletes the spilled state the copy names and leaves the copy, holding the
    deleted checkpoint's state, until its own TTL (up to 30 days)."""
    first = big_state("first")
    checkpoint_id = str(saved(api, first, created=True, keep_revisions=2).data["checkpoint_id"])
    world.reap_until_quiet()
    with injected(services.dynamodb) as injector:
        # the save's first PutItem is the copy of revision 1; every attempt of the second (the checkpoint) throttled
        injector.arm(Fault("PutItem", THROTTLING, Phase.BEFORE, Duration.EVERY, skip=1))
        failed = api.invoke(
            "save_checkpoint",
            body={"subject_id": SUBJECT, "kind": KIND, "state": {"step": 2}},
            headers={"idempotency-key": None},
        )
    assert failed.status == 503, failed.raw_body
    assert revisions_of(world, checkpoint_id) == [1]  # the copy, unseen: the checkpoint is still at revision 1
    assert listed(api, checkpoint_id) == []

    delete(api, checkpoint_id)
    world.reap_until_quiet()

    leftover = revisions_of(world, checkpoint_id)
    assert leftover == [], f"revisions of the deleted checkpoint left in the table: {leftover}"
    world.assert_bucket_in_step()
    record(SUITE, scenarios=1)


def test_a_copy_left_by_a_failed_later_history_save_is_removed_with_its_checkpoint(
    api: ApiDriver, world: World, services: Services
) -> None:
    """Holds: once the checkpoint shows `vf`, its REMOVE deletes every revision of its id, the stray copy too."""
    checkpoint_id = str(saved(api, big_state("1"), created=True, keep_revisions=2).data["checkpoint_id"])
    saved(api, big_state("2"))
    world.reap_until_quiet()
    with injected(services.dynamodb) as injector:
        injector.arm(Fault("PutItem", THROTTLING, Phase.BEFORE, Duration.EVERY, skip=1))
        failed = api.invoke(
            "save_checkpoint",
            body={"subject_id": SUBJECT, "kind": KIND, "state": {"step": 3}},
            headers={"idempotency-key": None},
        )
    assert failed.status == 503, failed.raw_body
    assert revisions_of(world, checkpoint_id) == [1, 2]
    assert listed(api, checkpoint_id) == [1]
    delete(api, checkpoint_id)
    world.reap_until_quiet()
    assert revisions_of(world, checkpoint_id) == []
    world.assert_bucket_in_step()
    assert world.state_objects() == set()
    record(SUITE, scenarios=1)


# -- found in review (2): a round lost to a lease renewal copies the same revision again


def test_a_round_lost_to_a_lease_renewal_does_not_copy_the_same_revision_twice(
    api: ApiDriver, world: World, other: Services
) -> None:
    """Found in review. The holder renews its lease between the save's copy and its checkpoint write (a heartbeat):
    the write's condition fails, the next round reads the checkpoint still at the same revision, and puts the very
    same copy again (a second PutItem billed at the revision's size) before writing the checkpoint."""
    checkpoint_id = str(saved(api, {"step": 1}, created=True, keep_revisions=2).data["checkpoint_id"])
    saved(api, {"step": 2, "pad": "x" * 3000})
    token = str(acquire(api, checkpoint_id, "worker-1", ttl_seconds=300).data["lease_token"])

    def renew() -> None:
        other.leases.acquire(TENANT, checkpoint_id, "worker-1", "key_" + "a" * 32, 900, now_ms(), None)

    services: Services = api_services()
    with Gap(services, "PutItem", 1, renew) as gap:
        answer = save_with(api, {"step": 3}, lease_token=token)
    assert answer.status == 200, answer.raw_body
    assert gap.fired
    assert listed(api, checkpoint_id) == [2, 1]
    # One BatchGetItem and one copy, then the checkpoint's PutItem twice (the first lost to the renewal) and the
    # second round's BatchGetItem: the revision read the same both times, so it needs no second copy.
    assert gap.calls.calls["PutItem"] == 3, dict(gap.calls.calls)
    record(SUITE, scenarios=1)


def api_services() -> Services:
    """The services the handler serves with (its warm container)."""
    from baton_checkpoints.api.app import app

    return app.services()


def save_with(api: ApiDriver, state: Any, **fields: Any) -> Result:
    return api.invoke(
        "save_checkpoint",
        body={"subject_id": SUBJECT, "kind": KIND, "state": state, **fields},
        headers={"idempotency-key": None},
    )


def other_save(other: Services, state: Any, **fields: Any) -> int:
    """A save of the test slot by another container (its own client, so no gap hook fires): the new revision."""
    from uuid import uuid4

    from baton_checkpoints.domain.checkpoints import plan_save
    from baton_checkpoints.domain.models import SaveCheckpointRequest

    request = SaveCheckpointRequest.model_validate({"subject_id": SUBJECT, "kind": KIND, "state": state, **fields})
    plan = plan_save(request, TENANT, AGENT, uuid4().hex, now_ms(), caller_agent_id=AGENT)
    return other.checkpoints.save(plan).saved.revision


# -- a delete in the gap between the save's read and its copy ----------------------------------------------------


def test_a_copy_landing_after_its_deleted_checkpoint_was_reaped_is_forgotten_by_the_next_round(
    api: ApiDriver, world: World, other: Services
) -> None:
    """Holds: the checkpoint is deleted (and its REMOVE reaped: its revisions deleted) after the save read it and
    before the copy lands; the checkpoint write fails, the next round deletes the copy and creates a new checkpoint.
    Nothing of the old id is left once reaped, and the bucket holds exactly what the table names."""
    old_id = str(saved(api, big_state("1"), created=True, keep_revisions=2).data["checkpoint_id"])
    saved(api, big_state("2"))
    saved(api, big_state("3"))
    world.reap_until_quiet()

    def delete_and_reap() -> None:
        other.checkpoints.delete(TENANT, old_id, now_ms(), None, None)
        world.reap_until_quiet()
        assert revisions_of(world, old_id) == []

    with Gap(api_services(), "BatchGetItem", 1, delete_and_reap) as gap:
        answer = save_with(api, {"step": 4})
    assert gap.fired
    assert answer.status == 201, answer.raw_body  # the slot was empty when the save wrote: a new checkpoint
    world.reap_until_quiet()
    assert revisions_of(world, old_id) == []
    assert world.revision_items() == []
    world.assert_bucket_in_step()
    assert world.state_objects() == set()  # the new checkpoint's state is inline
    record(SUITE, scenarios=1)


# -- a revision read in the gap between its item and its spilled state ---------------------------------------------


def test_a_revision_read_meeting_its_pruning_answers_404_not_500(api: ApiDriver, world: World, other: Services) -> None:
    """Found in review (older than 9eb559a). A `GET …/revisions/{n}` of a spilled revision reads the checkpoint and
    the revision (BatchGetItem), then the object. Saves that move the window past n, and the reaper that prunes n
    and deletes its object, may come in between: the answer must be one the contract allows (200 with the state,
    or 404), never a 500. It is a 500: the GetObject's NoSuchKey is unhandled."""
    checkpoint_id = str(saved(api, big_state("1"), created=True, keep_revisions=1).data["checkpoint_id"])
    saved(api, {"step": 2})
    world.reap_until_quiet()
    assert listed(api, checkpoint_id) == [1]

    def move_on_and_reap() -> None:
        other_save(other, {"step": 3})
        world.reap_until_quiet()
        assert revisions_of(world, checkpoint_id) == [2]

    with Gap(api_services(), "BatchGetItem", 1, move_on_and_reap) as gap:
        answer = revision(api, checkpoint_id, 1)
    assert gap.fired
    assert answer.status in (200, 404), answer.raw_body
    record(SUITE, scenarios=1)


def reap_once_until_quiet(world: World) -> None:
    """Reap what the stream carries, each batch delivered once, until nothing more comes. (A lagging batch that holds
    a MODIFY dropping a state and a later MODIFY pruning the revision that holds it does more when delivered again:
    the MODIFY then finds the revision pruned and deletes the object its REMOVE would delete next. Harmless, and the
    same class as `test_a_checkpoint_remove_delivered_again_does_nothing_more`, so not asserted here.)"""
    for _ in range(6):
        batch = world.pending()
        if not batch:
            return
        world.reap(batch, twice=False)
    raise AssertionError("the stream was not quiet after 6 rounds of reaping")


# -- keep_revisions 0 -> N -> 0 -> N, the reaper lagging ------------------------------------------------------------


def test_history_turned_off_and_on_again_never_shows_an_old_revision_and_leaves_nothing(
    api: ApiDriver, world: World
) -> None:
    """Holds: with the reaper lagging behind the saves (then catching up), history turned on, off, on, off, on
    shows exactly the window of the current epoch at every step, and once reaped the table holds exactly that
    window and the bucket exactly what the table names."""
    checkpoint_id = str(saved(api, big_state("1"), created=True).data["checkpoint_id"])
    plan = [(2, 3), (3, None), (4, None), (5, 0), (6, None), (7, 2), (8, None), (9, 0), (10, 1), (11, None), (12, 5)]
    floor: int | None = None  # `revisions_from` as the contract's rules make it: only rises while history is on
    keep = 0
    checks = 0
    expected: list[int] = []
    for number, sent in plan:
        fields: dict[str, Any] = {} if sent is None else {"keep_revisions": sent}
        keep = keep if sent is None else sent
        superseded = number - 1
        floor = None if keep == 0 else max(superseded if floor is None else floor, superseded + 1 - keep)
        saved(api, big_state(str(number)), **fields)
        expected = [] if floor is None else list(range(floor, number))
        assert listed(api, checkpoint_id) == sorted(expected, reverse=True), (number, sent)
        for n in range(1, number + 1):
            assert revision(api, checkpoint_id, n).status == (200 if n in expected else 404), (number, n)
        checks += 1
        if number % 3 == 0:
            reap_once_until_quiet(world)
    reap_once_until_quiet(world)
    assert revisions_of(world, checkpoint_id) == expected
    world.assert_bucket_in_step()
    record(SUITE, scenarios=1, windows_checked=checks)
