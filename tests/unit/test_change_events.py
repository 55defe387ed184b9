"""What a stream record announces to integrators (`store/change_events.py`), without AWS: each kind of change, what
an event says (ids, revision, hash; never the state nor a lease's secret), its stable id, and the publisher's
batching, retry and echo."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from baton_checkpoints.store import change_events, items, thread_names
from baton_checkpoints.store.change_events import Publisher, PublishFailed, as_json, echo_of, events_of

PK, SK = "C#acme#ticket-1", "C#worker#task_state"
AT = 1_800_000_000
SECRET_STATE = "the state itself, never in an event"


def checkpoint(revision: int = 1, status: str = "active", checkpoint_id: str = "ckpt_" + "a" * 32, **more: Any) -> Any:
    return {
        "pk": {"S": PK},
        "sk": {"S": SK},
        "gpk": {"S": f"I#acme#{checkpoint_id}"},
        "rev": {"N": str(revision)},
        "st": {"S": status},
        "h": {"B": base64.b64encode(hashlib.sha256(b"s").digest()).decode()},
        "s": {"S": SECRET_STATE},
        **more,
    }


def leased(counter: int, expires: int, **more: Any) -> dict[str, Any]:
    lease = {"lh": {"S": "worker"}, "lc": {"N": str(counter)}, "lt": {"S": "lease-secret"}, "lx": {"N": str(expires)}}
    return {**lease, **more}


def record(old: Any, new: Any, *, pk: str = PK, sk: str = SK, ttl: bool = False, event_id: str = "r1") -> Any:
    change: dict[str, Any] = {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}, "ApproximateCreationDateTime": AT}
    if old is not None:
        change["OldImage"] = old
    if new is not None:
        change["NewImage"] = new
    found: dict[str, Any] = {"eventID": event_id, "eventName": "MODIFY", "dynamodb": change}
    if ttl:
        found["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    return found


def kinds(found: Any) -> list[str]:
    return [event.detail_type for event in events_of(found)]


def test_each_kind_of_change_is_announced() -> None:
    assert kinds(record(None, checkpoint())) == ["checkpoint.saved"]
    assert kinds(record(checkpoint(1), checkpoint(2))) == ["checkpoint.saved"]
    assert kinds(record(checkpoint(1), checkpoint(2, "completed"))) == ["checkpoint.saved", "checkpoint.closed"]
    assert kinds(record(checkpoint(2, "completed"), checkpoint(3, "cancelled"))) == ["checkpoint.saved"]
    assert kinds(record(checkpoint(), None)) == ["checkpoint.deleted"]
    assert kinds(record(checkpoint(), None, ttl=True)) == ["checkpoint.expired"]
    replaced = checkpoint(1, checkpoint_id="ckpt_" + "b" * 32)
    assert kinds(record(checkpoint(4), replaced)) == ["checkpoint.expired", "checkpoint.saved"]
    # Leases: acquired, renewed (nothing), released, lapsed and taken over
    assert kinds(record(checkpoint(), checkpoint(**leased(1, AT + 60)))) == ["lease.acquired"]
    assert kinds(record(checkpoint(**leased(1, AT + 60)), checkpoint(**leased(1, AT + 120)))) == []
    released = checkpoint(lh={"S": "worker"}, lc={"N": "1"}, lx={"N": str(AT)})
    assert kinds(record(checkpoint(**leased(1, AT + 60)), released)) == ["lease.released"]
    assert kinds(record(checkpoint(**leased(1, AT - 5)), checkpoint(**leased(2, AT + 60)))) == [
        "lease.lapsed",
        "lease.acquired",
    ]
    # (decided from the images, never a clock: a take-over within the second of the expiry is still a lapse)
    assert kinds(record(checkpoint(**leased(1, AT + 1)), checkpoint(**leased(2, AT + 60)))) == [
        "lease.lapsed",
        "lease.acquired",
    ]
    spent = checkpoint(lh={"S": "worker"}, lc={"N": "1"}, lx={"N": str(AT - 5)})  # a lapsed token spent: `lt` gone
    assert kinds(record(checkpoint(**leased(1, AT - 5)), spent)) == ["lease.lapsed"]
    # A thread deleted (its head's floor moves), and nothing for a head touched
    head_pk = "H#acme#worker#thread-1"
    head = {"pk": {"S": head_pk}, "sk": {"S": "H"}, "g": {"S": "abc"}, "exp": {"N": "1"}}
    assert kinds(record(head, {**head, "fl": {"N": "5"}}, pk=head_pk, sk="H")) == ["thread.deleted"]
    assert (
        kinds(record({**head, "fl": {"N": "5"}}, {**head, "fl": {"N": "5"}, "exp": {"N": "2"}}, pk=head_pk, sk="H"))
        == []
    )
    # And nothing for other items, or for moto's first INSERT of the keys alone
    assert kinds(record(None, {"pk": {"S": PK}, "sk": {"S": SK}})) == []
    for pk, sk in (("B#acme#blob_1", "B"), ("L#acme", "L"), ("C#acme#t", "V#worker#task_state#c#0000000000000001")):
        assert kinds(record(None, {"pk": {"S": pk}, "sk": {"S": sk}, "x": {"N": "1"}}, pk=pk, sk=sk)) == []


def test_an_event_names_what_changed_and_never_carries_the_state_or_a_secret() -> None:
    (saved, acquired) = events_of(record(None, checkpoint(3, **leased(7, AT + 60))))
    assert saved.detail == {
        "tenant_id": "acme",
        "subject_id": "ticket-1",
        "agent_id": "worker",
        "kind": "task_state",
        "checkpoint_id": "ckpt_" + "a" * 32,
        "revision": 3,
        "status": "active",
        "state_hash": hashlib.sha256(b"s").hexdigest(),
        "event_id": "r1:checkpoint.saved",
        "at": "2027-01-15T08:00:00.000Z",
    }
    assert acquired.detail["lease_holder"] == "worker"
    assert acquired.detail["lease_counter"] == 7
    text = json.dumps([as_json(event) for event in (saved, acquired)])
    assert SECRET_STATE not in text
    assert "lease-secret" not in text
    thread = events_of(
        record(
            {"pk": {"S": "H#acme#w#t#x"}, "sk": {"S": "H"}, "g": {"S": "a"}},
            {"pk": {"S": "H#acme#w#t#x"}, "sk": {"S": "H"}, "g": {"S": "a"}, "fl": {"N": "9"}},
            pk="H#acme#w#t#x",
            sk="H",
        )
    )
    assert thread[0].detail["thread_id"] == "t#x"


def test_the_same_record_gives_the_same_event_ids() -> None:
    first = [event.detail["event_id"] for event in events_of(record(None, checkpoint(), event_id="abc"))]
    again = [event.detail["event_id"] for event in events_of(record(None, checkpoint(), event_id="abc"))]
    assert first == again == ["abc:checkpoint.saved"]


def test_the_names_read_are_the_stores() -> None:
    assert (change_events.REVISION, change_events.STATUS, change_events.HASH) == (
        items.REVISION,
        items.STATUS,
        items.HASH,
    )
    assert (change_events.LEASE_HOLDER, change_events.LEASE_COUNTER, change_events.LEASE_EXPIRES) == (
        items.LEASE_HOLDER,
        items.LEASE_COUNTER,
        items.LEASE_EXPIRES,
    )
    assert change_events.LEASE_SECRET == items.LEASE_SECRET
    assert change_events.FLOOR == thread_names.FLOOR


class Bus:
    """An EventBridge client that refuses the events of the revisions in `refuse` with `code`: once each, or
    always."""

    def __init__(self, refuse: set[int], always: bool = False, code: str = "ThrottlingException") -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.refuse, self.always, self.code = set(refuse), always, code

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        self.calls.append(Entries)
        results = []
        for entry in Entries:
            revision = json.loads(entry["Detail"])["revision"]
            if revision in self.refuse:
                results.append({"ErrorCode": self.code})
                if not self.always:
                    self.refuse.discard(revision)
            else:
                results.append({"EventId": "x"})
        return {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results}


def test_the_publisher_sends_ten_at_a_time_and_retries_what_was_refused_once() -> None:
    records = [record(checkpoint(n), checkpoint(n + 1), event_id=f"r{n}") for n in range(1, 24)]
    bus = Bus(refuse={5, 17})
    assert Publisher(lambda: bus, "baton-dev").publish(records) == 23
    assert [len(call) for call in bus.calls] == [10, 1, 10, 1, 3]  # each refused entry goes again, alone
    assert {entry["EventBusName"] for call in bus.calls for entry in call} == {"baton-dev"}
    stubborn = Bus(refuse={2}, always=True)
    with pytest.raises(PublishFailed):
        Publisher(lambda: stubborn, "baton-dev").publish(records[:3])
    # An entry refused for good (a permission, a key) is told and dropped: the batch goes on
    dropped: list[list[str]] = []
    denied = Bus(refuse={2, 3}, always=True, code="AccessDeniedException")
    assert Publisher(lambda: denied, "baton-dev", dropped=dropped.append).publish(records[:3]) == 3
    assert dropped == [["AccessDeniedException", "AccessDeniedException"]]
    assert len(denied.calls) == 1
    # And a batch whose time ran out stops before it sends
    late = Bus(refuse=set())
    with pytest.raises(PublishFailed, match="time ran out"):
        Publisher(lambda: late, "baton-dev").publish(records[:3], deadline=0.0)
    assert late.calls == []


def test_the_echo_prints_each_event_or_posts_them(capsys: pytest.CaptureFixture[str]) -> None:
    printed = echo_of("print", lambda url, exc: None)
    assert printed is not None
    Publisher(None, None, printed).publish([record(None, checkpoint())])
    line = capsys.readouterr().out.strip()
    assert line.startswith("baton event ")
    assert json.loads(line.removeprefix("baton event "))["detail-type"] == "checkpoint.saved"
    failures: list[str] = []
    posted = echo_of("http://127.0.0.1:9/nowhere", lambda url, exc: failures.append(url))
    assert posted is not None
    Publisher(None, None, posted).publish([record(None, checkpoint())])  # nothing listens: told, never raised
    assert failures == ["http://127.0.0.1:9/nowhere"]
    assert echo_of(None, lambda url, exc: None) is None


def test_a_record_dynamodb_never_writes_publishes_nothing_and_stops_nothing() -> None:
    far = record(None, checkpoint())
    far["dynamodb"]["ApproximateCreationDateTime"] = 10**20  # past year 9999
    lease_far = record(None, checkpoint(**leased(1, 10**15)))
    odd = {"eventID": "x", "dynamodb": "not a map"}
    bus = Bus(refuse=set())
    assert Publisher(lambda: bus, "baton-dev").publish([far, lease_far, odd, record(None, checkpoint())]) == 1
