"""Change events for integrations: what a stream record says happened, published to EventBridge by the reaper.

A record of a checkpoint item or a thread's head is read into events (`events_of`, pure), each with the tenant, the
ids, the revision and the state's hash, never the state:

| detail-type          | when                                                                                     |
|----------------------|------------------------------------------------------------------------------------------|
| `checkpoint.saved`   | a checkpoint is created, or its revision moves (a save, a restore)                       |
| `checkpoint.closed`  | a write makes its status `completed` or `cancelled`                                      |
| `checkpoint.deleted` | it is deleted (a delete, a purge)                                                        |
| `checkpoint.expired` | DynamoDB's TTL removes it, or a save replaces it after it expired                        |
| `lease.acquired`     | a new lease is taken on it                                                               |
| `lease.released`     | its lease is released                                                                    |
| `lease.lapsed`       | a write finds its lease ran out: a take-over, or its lapsed token spent                  |
| `thread.deleted`     | a LangGraph thread is deleted                                                            |

A lease that runs out with nothing written after it is announced by the next write that finds it lapsed: a lapse is
not a write, and no stream record marks it.

Delivery is at least once: a batch Lambda sends again publishes its events again. Each event's `detail.event_id`
(the stream record's id and the event's type) is the same every time; integrators deduplicate on it.
"""

from __future__ import annotations

import base64
import json
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from msgspec import Struct

from baton_checkpoints.domain.clock import format_ms, now_ms
from baton_checkpoints.domain.lifecycle import is_terminal
from baton_checkpoints.store import layout, schema

SOURCE: Final = "baton"
"""Every event's `source`: a rule matches Baton's events with `{"source": ["baton"]}`."""
PUT_EVENTS_ENTRIES: Final = 10
"""EventBridge's most entries per PutEvents."""
TRANSIENT_ENTRY_CODES: Final = frozenset({"ThrottlingException", "InternalFailure", "InternalException"})
"""An entry refused with one of these may be taken later: the batch is sent again rather than lose it."""
RETRY_PAUSE_SECONDS: Final = 0.2
TTL_PRINCIPAL: Final = "dynamodb.amazonaws.com"
"""The `userIdentity.principalId` of a record DynamoDB's TTL wrote (a removal of an expired item)."""
# The names `store/items.py` and `store/thread_names.py` give these attributes (not imported: they load the domain's
# models, which the reaper's cold start does without; a unit test holds them equal).
REVISION: Final = "rev"
STATUS: Final = "st"
HASH: Final = "h"
INDEX_PK: Final = "gpk"
LEASE_HOLDER: Final = "lh"
LEASE_COUNTER: Final = "lc"
LEASE_EXPIRES: Final = "lx"
LEASE_SECRET: Final = "lt"
FLOOR: Final = "fl"


class ChangeEvent(Struct, frozen=True):
    """One event: its type, when it happened (ms since the epoch), and what it says (ids, never the state)."""

    detail_type: str
    at_ms: int
    detail: dict[str, Any]

    @property
    def time(self) -> datetime:
        """When it happened, as EventBridge's `Time` takes it."""
        return datetime.fromtimestamp(self.at_ms / 1000, UTC)


def events_of(record: Mapping[str, Any]) -> list[ChangeEvent]:
    """The events a stream record (Lambda's event form) stands for; [] for records of anything else."""
    change = record.get("dynamodb") or {}
    keys = change.get("Keys") or {}
    pk, sk = keys.get(schema.PK, {}).get("S"), keys.get(schema.SK, {}).get("S")
    if not isinstance(pk, str) or not isinstance(sk, str):
        return []
    old, new = _item(change.get("OldImage")), _item(change.get("NewImage"))
    seconds = change.get("ApproximateCreationDateTime")
    at_ms = int(seconds * 1000) if isinstance(seconds, int | float) else now_ms()
    by_ttl = (record.get("userIdentity") or {}).get("principalId") == TTL_PRINCIPAL
    if pk.startswith(layout.CHECKPOINT_PK_PREFIX) and sk.startswith(layout.CHECKPOINT):
        found = _checkpoint_events(pk, sk, old, new, by_ttl)
    elif pk.startswith(layout.THREAD_PK_PREFIX) and sk == layout.THREAD_HEAD_SK:
        found = _thread_events(pk, old, new)
    else:
        return []
    event_id = str(record.get("eventID", ""))
    at = format_ms(at_ms)  # ValueError outside years 0001-9999: the record is not one DynamoDB wrote
    return [ChangeEvent(kind, at_ms, {**detail, "event_id": f"{event_id}:{kind}", "at": at}) for kind, detail in found]


def _item(image: Any) -> dict[str, Any] | None:
    """An image that is an item (one of keys alone is none: moto's first INSERT of an item an UpdateItem creates)."""
    if not isinstance(image, dict) or image.keys() <= {schema.PK, schema.SK}:
        return None
    return image


def _checkpoint_events(
    pk: str, sk: str, old: dict[str, Any] | None, new: dict[str, Any] | None, by_ttl: bool
) -> list[tuple[str, dict[str, Any]]]:
    tenant_id, subject_id, agent_id, kind, _ = layout.read_checkpoint_keys(pk, sk, "")
    about = {"tenant_id": tenant_id, "subject_id": subject_id, "agent_id": agent_id, "kind": kind}
    found: list[tuple[str, dict[str, Any]]] = []
    old_id, new_id = _checkpoint_id(old), _checkpoint_id(new)
    if old is not None and (new is None or old_id != new_id):
        # Gone: deleted, removed by TTL, or replaced by a new checkpoint after it expired (a new id in its place)
        gone = "checkpoint.expired" if by_ttl or new is not None else "checkpoint.deleted"
        found.append((gone, {**about, **_checkpoint(old)}))
        old = None
    if new is None:
        return found
    if old is None or _number(new, REVISION) != _number(old, REVISION):
        found.append(("checkpoint.saved", {**about, **_checkpoint(new)}))
        if is_terminal(_status(new) or "") and (old is None or not is_terminal(_status(old) or "")):
            found.append(("checkpoint.closed", {**about, **_checkpoint(new)}))
    found += _lease_events(about, _checkpoint(new), old, new)
    return found


def _lease_events(
    about: dict[str, Any], checkpoint: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """A lease is held while its secret is stored; its counter names it (a release keeps the counter, a new lease
    moves it)."""
    before, after = _lease(old), _lease(new)
    found: list[tuple[str, dict[str, Any]]] = []
    if before is not None and (after is None or after["lease_counter"] != before["lease_counter"]):
        # Decided from the images, not a clock: a new lease is taken only over one that ran out; a release ends the
        # lease now (its expiry moves to the release's time); a secret dropped with the expiry as it was is a lease
        # that had run out.
        taken_over = after is not None
        released = not taken_over and _expires_s(new) != _expires_s(old)
        found.append(("lease.released" if released else "lease.lapsed", {**about, **checkpoint, **before}))
    if after is not None and (before is None or after["lease_counter"] != before["lease_counter"]):
        found.append(("lease.acquired", {**about, **checkpoint, **after}))
    return found


def _lease(image: dict[str, Any] | None) -> dict[str, Any] | None:
    if image is None or LEASE_SECRET not in image or LEASE_COUNTER not in image:
        return None
    return {
        "lease_holder": image.get(LEASE_HOLDER, {}).get("S"),
        "lease_counter": _number(image, LEASE_COUNTER),
        "lease_expires_at": format_ms(int(_expires_s(image) * 1000)),
    }


def _expires_s(image: dict[str, Any] | None) -> float:
    try:
        return float((image or {})[LEASE_EXPIRES]["N"])
    except (KeyError, TypeError, ValueError):
        return 0.0


def _thread_events(pk: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    if new is None or FLOOR not in new or _number(new, FLOOR) <= _number(old or {}, FLOOR):
        return []
    tenant_id, agent_id, thread_id = layout.read_thread_pk(pk)
    return [("thread.deleted", {"tenant_id": tenant_id, "agent_id": agent_id, "thread_id": thread_id})]


def _checkpoint(image: dict[str, Any]) -> dict[str, Any]:
    """What an event says of a checkpoint: its id, revision, status and the state's hash (never the state)."""
    return {
        "checkpoint_id": _checkpoint_id(image),
        "revision": _number(image, REVISION),
        "status": _status(image),
        "state_hash": _hash(image),
    }


def _checkpoint_id(image: dict[str, Any] | None) -> str | None:
    value = (image or {}).get(INDEX_PK, {}).get("S")
    return value.rpartition("#")[2] if isinstance(value, str) else None


def _status(image: dict[str, Any]) -> str | None:
    value = image.get(STATUS, {}).get("S")
    return value if isinstance(value, str) else None


def _hash(image: dict[str, Any]) -> str | None:
    raw = image.get(HASH, {}).get("B")
    try:
        digest = base64.b64decode(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return digest.hex() if isinstance(digest, bytes) else None


def _number(image: dict[str, Any], name: str) -> int:
    try:
        return int(float(image[name]["N"]))
    except (KeyError, TypeError, ValueError):
        return 0


# -- publishing -------------------------------------------------------------------------------------------------


class PublishFailed(Exception):
    """EventBridge did not take every entry (after one more try of those it refused): the batch is sent again."""


class Publisher:
    """Sends events to the stage's bus (`events_client` made on first use), and, for local development, echoes
    them (`echo`: a callable given each event's JSON form)."""

    def __init__(
        self,
        client: Callable[[], Any] | None,
        bus_name: str | None,
        echo: Callable[[list[dict[str, Any]]], None] | None = None,
        dropped: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._client = client
        self._bus = bus_name
        self._echo = echo
        self._dropped = dropped

    def _drop(self, codes: list[str | None]) -> None:
        if self._dropped is not None:
            self._dropped([str(code) for code in codes])

    def publish(self, records: Sequence[Mapping[str, Any]], deadline: float | None = None) -> int:
        """Publish what `records` stand for (before `deadline`, `time.monotonic()`); the events sent. Raises
        `PublishFailed` (or the client's error) when EventBridge did not take them all for now; entries it refused
        for good are told to `dropped` (their error codes) and not raised."""
        events = [event for record in records for event in _events_or_none(record)]
        if not events:
            return 0
        if self._client is not None and self._bus is not None:
            for start in range(0, len(events), PUT_EVENTS_ENTRIES):
                self._put([self._entry(event) for event in events[start : start + PUT_EVENTS_ENTRIES]], deadline)
        if self._echo is not None:
            self._echo([as_json(event) for event in events])
        return len(events)

    def _entry(self, event: ChangeEvent) -> dict[str, Any]:
        return {
            "Source": SOURCE,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail, separators=(",", ":")),
            "EventBusName": self._bus,
            "Time": event.time,
        }

    def _put(self, entries: list[dict[str, Any]], deadline: float | None) -> None:
        assert self._client is not None
        for attempt in range(2):
            if deadline is not None and time.monotonic() >= deadline:
                raise PublishFailed("the batch's time ran out before its events were published")
            answer = self._client().put_events(Entries=entries)
            if not answer.get("FailedEntryCount"):
                return
            # The answer lists entries in order: what was refused for a moment goes again (once, after a pause);
            # what was refused for good (a permission, a key, a malformed entry) is told and dropped.
            refused = [
                (entry, result.get("ErrorCode"))
                for entry, result in zip(entries, answer["Entries"], strict=False)
                if "EventId" not in result
            ]
            lost = [code for _, code in refused if code not in TRANSIENT_ENTRY_CODES]
            if lost:
                self._drop(lost)
            entries = [entry for entry, code in refused if code in TRANSIENT_ENTRY_CODES]
            if not entries:
                return
            if attempt == 0:
                time.sleep(random.uniform(0, RETRY_PAUSE_SECONDS))
        raise PublishFailed(f"EventBridge refused {len(entries)} of the batch's events for now")


def _events_or_none(record: Mapping[str, Any]) -> list[ChangeEvent]:
    """`events_of`, and none for a record not of the shape Lambda sends (it stops nothing)."""
    try:
        return events_of(record)
    except (AttributeError, TypeError, ValueError, KeyError, OverflowError):
        return []


def as_json(event: ChangeEvent) -> dict[str, Any]:
    """An event as EventBridge delivers it to a rule's target (the fields an integrator reads)."""
    return {"source": SOURCE, "detail-type": event.detail_type, "time": event.detail["at"], "detail": event.detail}


def echo_of(
    setting: str | None, log: Callable[[str, Exception], None]
) -> Callable[[list[dict[str, Any]]], None] | None:
    """Local development's echo of the events (`baton serve --events`): `print` writes each as a JSON line on
    standard output; an http(s) URL receives each batch's events as a JSON array in one POST (2 s at most; a failure
    is told to `log`, never fails the batch). None: no echo."""
    if setting is None:
        return None
    if setting == "print":

        def printed(events: list[dict[str, Any]]) -> None:
            for event in events:
                sys.stdout.write(f"baton event {json.dumps(event, separators=(',', ':'))}\n")
            sys.stdout.flush()

        return printed

    def posted(events: list[dict[str, Any]]) -> None:
        import urllib.request

        body = json.dumps(events, separators=(",", ":")).encode("utf-8")
        request = urllib.request.Request(setting, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                answer.read()
        except Exception as exc:
            log(setting, exc)

    return posted
