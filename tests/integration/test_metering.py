"""What each tenant stores, counted by the reaper function from the table's stream (`store/metering.py`): real writes
through the api handler, the records the engine's own stream gave for them, fed to the reaper function as Lambda
would. What is shown: the counts equal what the table holds (recomputed from every item, which a test may Scan);
a batch is counted with one request; only the records before a batch's first failure are counted, and the rest when
Lambda sends them again; a count that fails for a moment fails the whole batch and counts nothing; the same batch
sent again is counted once (DynamoDB's request token); and the quotas act on these counts.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from baton_checkpoints.handlers import reaper as reaper_function
from baton_checkpoints.store import layout, metering
from baton_checkpoints.store.reaping import Reaper
from tests import proof_counts
from tests.builders import save
from tests.integration import test_quotas as quotas
from tests.integration import test_reaper_history as history
from tests.integration.driver import ApiDriver, CallCounter
from tests.integration.test_reaper_history import COUNT, TENANT, World, _reaped, big_state, uploaded_blob

# The reaper history module's world: its fixtures, used here as they are there.
aws, stream, world, reaper_calls, _warm_reaper = (
    history.aws,
    history.stream,
    history.world,
    history.reaper_calls,
    history._warm_reaper,
)

pytestmark = pytest.mark.engines
SUITE = "metering (integration)"


@pytest.fixture(autouse=True)
def _uncounted(world: World) -> None:
    """What an earlier test left of threads and of the tenant's counts goes too (`World.emptied` keeps them)."""
    for item in world.table():
        if item["pk"]["S"].startswith(layout.THREAD_PK_PREFIX):
            world.dynamodb.delete_item(TableName=reaper_function.reaper().table, Key=layout.key(*layout.identity(item)))
    world.dynamodb.delete_item(TableName=reaper_function.reaper().table, Key=layout.tenant_key(TENANT))
    while world.stream.read():
        pass


def counted(world: World, tenant: str = TENANT) -> metering.Footprint:
    """What the tenant's item says it stores."""
    item = world.dynamodb.get_item(TableName=reaper_function.reaper().table, Key=layout.tenant_key(tenant)).get(
        "Item", {}
    )
    number = {name: int(item.get(name, {}).get("N", "0")) for name in metering.FOOTPRINT_ATTRIBUTES}
    return metering.Footprint(number[metering.STORED_BYTES], number[metering.CHECKPOINTS], number[metering.THREADS])


def held(world: World, tenant: str = TENANT) -> metering.Footprint:
    """What the table holds of the tenant, item by item (the test may Scan; Baton never does)."""
    total = metering.NONE
    for item in world.table():
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if metering.tenant_of(pk) == tenant:
            total += metering.footprint(pk, sk, item)
    return total


def reap_once(world: World) -> None:
    """Reap what the stream carries, each batch delivered once, until it is quiet."""
    for _ in range(8):
        batch = world.pending()
        if not batch:
            return
        world.reap(batch, twice=False)
    raise AssertionError("the stream was not quiet")


def thread_put(api: ApiDriver, thread: str, checkpoint_id: str, value: bytes) -> None:
    answer = quotas.thread_put(api, thread, checkpoint_id, value)
    assert answer.status == 201, answer.raw_body


def test_the_counts_equal_what_the_table_holds_through_every_kind_of_write(api: ApiDriver, world: World) -> None:
    # Given writes of every kind: inline and spilled states, kept revisions, a blob attached, a thread with a value
    # item of its own, a checkpoint deleted, a thread deleted
    resource = uploaded_blob(api, b"an attachment\n" * 40)
    assert save(api, subject_id="inline", state={"step": 1}).status == 201
    assert save(api, subject_id="spilled", state=big_state("one"), keep_revisions=2).status == 201
    assert save(api, subject_id="spilled", state=big_state("two"), resources=[resource]).status == 200
    assert save(api, subject_id="spilled", state={"step": 3}).status == 200
    doomed = save(api, subject_id="doomed", state={"step": 1})
    thread_put(api, "thread-kept", "1ef0000000000001", b"v" * 9_000)
    thread_put(api, "thread-gone", "1ef0000000000002", b"w" * 100)
    reap_once(world)
    assert counted(world) == held(world)
    assert (counted(world).checkpoints, counted(world).threads) == (3, 2)
    # When a checkpoint and a thread are deleted, and the reaper has done what that asks
    path = f"/v1/checkpoints/{doomed.data['checkpoint_id']}"
    assert api.invoke("delete_checkpoint", path=path, headers={"if-match": None}).status == 200
    assert api.invoke("purge_subject", path="/v1/threads/thread-gone", query={}).status == 200
    reap_once(world)
    # Then the counts follow
    assert counted(world) == held(world)
    assert (counted(world).checkpoints, counted(world).threads) == (2, 1)
    proof_counts.record(SUITE, kinds_of_write=7)


def test_a_batch_is_counted_with_one_request_whatever_its_size(
    api: ApiDriver, world: World, reaper_calls: CallCounter
) -> None:
    for step in range(30):
        assert save(api, subject_id=f"steady-{step % 3}", state={"step": step}).status in (200, 201)
    batch = world.pending()
    assert len({layout.identity(r["dynamodb"]["Keys"]) for r in batch}) == 3
    reaper_calls.reset()
    assert _reaped(batch) == []
    assert dict(reaper_calls.calls) == COUNT
    assert counted(world) == held(world)
    proof_counts.record(SUITE, records_in_one_count=len(batch))


def test_only_the_records_before_a_failure_are_counted_and_the_rest_when_sent_again(
    api: ApiDriver, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for step in range(4):
        assert save(api, subject_id=f"partial-{step}", state={"step": step}).status == 201
    batch = world.pending()
    assert len({layout.identity(r["dynamodb"]["Keys"]) for r in batch}) == 4
    # When the third item's last record fails (its sequence number reported; Lambda sends it and those after again)
    third = [r for r in batch if r["dynamodb"]["Keys"]["pk"]["S"].endswith("partial-2")]
    failed_from = third[-1]
    at = batch.index(failed_from)
    original = Reaper.reap

    def failing(self: Reaper, record: Any, deadline: float | None = None) -> Any:
        if record is failed_from:
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"}}, "PutObjectTagging")
        return original(self, record, deadline)

    monkeypatch.setattr(Reaper, "reap", failing)
    assert _reaped(batch) == [failed_from["dynamodb"]["SequenceNumber"]]
    # Then only the records before it were counted
    assert counted(world).checkpoints == 2
    # And once the rest is sent again and reaped, the counts equal what the table holds
    monkeypatch.setattr(Reaper, "reap", original)
    assert _reaped(batch[at:]) == []
    assert counted(world) == held(world)


def test_a_count_that_fails_for_a_moment_fails_the_whole_batch_and_counts_nothing(
    api: ApiDriver, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for step in range(3):
        assert save(api, subject_id=f"throttled-{step}", state={"step": step}).status == 201
    batch = world.pending()
    client: Any = reaper_function.reaper().dynamodb
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "TransactWriteItems")

    def refuse(**_: Any) -> Any:
        raise throttled

    with monkeypatch.context() as patched:
        patched.setattr(client, "transact_write_items", refuse)
        # When the count stays throttled (through its few tries), then the whole batch is reported failed from its
        # first record, and nothing is counted
        assert _reaped(batch) == [batch[0]["dynamodb"]["SequenceNumber"]]
    assert counted(world) == metering.NONE
    # And when Lambda sends it all again, it is counted once
    assert _reaped(batch) == []
    assert counted(world) == held(world)


def test_the_same_batch_sent_again_is_counted_once(api: ApiDriver, world: World, engine: str) -> None:
    if engine == "moto":
        pytest.skip("moto ignores a transaction's ClientRequestToken; DynamoDB and DynamoDB Local honour it")
    for step in range(3):
        assert save(api, subject_id=f"again-{step}", state={"step": step}).status == 201
    batch = world.pending()
    assert _reaped(batch) == []
    assert _reaped(batch) == []  # the invocation's answer was lost: Lambda sends the same batch again
    assert counted(world) == held(world)


def test_the_quotas_act_on_the_counts(api: ApiDriver, world: World) -> None:
    # Given the tenant may keep two checkpoints
    answer = api.invoke("put_limits", path=f"/v1/tenants/{TENANT}/limits", body={"checkpoints": 2})
    assert answer.status == 200
    first = save(api, subject_id="quota-1", state={"step": 1})
    assert save(api, subject_id="quota-2", state={"step": 1}).status == 201
    reap_once(world)
    services = reaper_services()
    services.limiter.forget(TENANT)  # a container's next take learns the counts (here: at once)
    # When it saves a third, then it is refused
    refused = save(api, subject_id="quota-3", state={"step": 1})
    assert (refused.status, refused.error["code"]) == (403, "QUOTA_EXCEEDED")
    assert refused.error["details"] == {"quota": "checkpoints", "limit": 2, "used": 2}
    # And once it deleted one and the reaper counted that, it is served
    path = f"/v1/checkpoints/{first.data['checkpoint_id']}"
    assert api.invoke("delete_checkpoint", path=path, headers={"if-match": None}).status == 200
    reap_once(world)
    services.limiter.forget(TENANT)
    assert save(api, subject_id="quota-3", state={"step": 1}).status == 201
    api.invoke("put_limits", path=f"/v1/tenants/{TENANT}/limits", body={})


def reaper_services() -> Any:
    from baton_checkpoints.api.app import app

    return app.services()
