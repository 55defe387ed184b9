"""Soak: concurrent clients save, read, list and delete the same few checkpoints over real HTTP, and afterwards every
acknowledged write reads back consistently.

Every answer is checked as it arrives and every acknowledged (2xx) write goes into a ledger. After the clients stop,
only claims that hold whatever the interleaving are checked:

- each checkpoint id's acknowledged revisions are exactly 1..n, each acknowledged once (two writes acknowledged with
  one revision is a lost update; a gap is a write that landed unacknowledged), and revision 1 alone answered 201;
- a checkpoint id acknowledged as deleted never answers again, and a delete with `If-Match: <rev>` was of revision
  n itself; no write follows a `completed` one;
- in each (subject, kind) slot at most one checkpoint id was never deleted, and a lookup returns exactly it, at its
  highest acknowledged revision with that write's state hash (every write was acknowledged or refused with a 4xx,
  which writes nothing); anything any read showed on the way was an acknowledged write with the same hash;
- an idempotent request sent again replays the first answer (status, data, ETag) with `Idempotent-Replayed: true`;
- no 5xx and no transport error at all.

`make test` runs it for about 15 seconds on 6 threads; `make soak` sets BATON_SOAK_SECONDS for a longer run
(BATON_SOAK_THREADS and BATON_SOAK_SEED tune it further).
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import rfc8785

from tests import proof_counts
from tests.e2e.server_process import BatonServe

SHORT_SECONDS = 15.0
SHORT_THREADS = 6
LONG_THREADS = 8
OPERATIONS_PER_SECOND_PER_THREAD = 60
"""Bounds the loop by count as well as by time: more than any client here can do against `baton serve`."""
KINDS = ("task_state", "workflow")
TEXTS = ("plain", "accents é ü ß", "日本語のテキスト", "emoji 😀🚀", 'quote " backslash \\ slash /', "tab\tnewline\n")
Slot = tuple[str, str]


@dataclass(frozen=True)
class Ack:
    """An acknowledged (2xx) write, as its answer stated it."""

    slot: Slot
    checkpoint_id: str
    revision: int
    state_hash: str
    http_status: int
    status: str
    how: str


@dataclass(frozen=True)
class Seen:
    """A checkpoint revision some read showed."""

    checkpoint_id: str
    revision: int
    state_hash: str
    where: str


@dataclass(frozen=True)
class FirstAnswer:
    """The first answer to an idempotent request, to compare its replays with."""

    key: str
    body: dict[str, Any]
    http_status: int
    data: dict[str, Any]
    etag: str
    request_id: str


@dataclass
class Ledger:
    """What every client did and saw; shared by all clients, so every change holds the lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acks: list[Ack] = field(default_factory=list)
    deleted: list[tuple[str, int | None]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    idempotent: list[FirstAnswer] = field(default_factory=list)
    blobs: list[tuple[dict[str, Any], bytes | None]] = field(default_factory=list)
    """Declared blobs (the declaration's data) and the bytes uploaded for them (None: not uploaded)."""
    statuses: Counter[int] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        """A broken claim, reported at the end (a client thread must not die on its first finding)."""
        with self.lock:
            self.problems.append(text)

    def count(self, outcome: str) -> None:
        """Count an outcome (conflicts, replays, ...)."""
        with self.lock:
            self.outcomes[outcome] += 1


def canonical(state: Any) -> bytes:
    """RFC 8785 canonical JSON, computed here independently of Baton."""
    return bytes(rfc8785.dumps(state))


def etag(checkpoint_id: str, revision: int) -> str:
    """The weak entity tag the contract prescribes."""
    return f'W/"{checkpoint_id}:{revision}"'


class Client:
    """One soak client: its own connection, its own random stream, and what it last wrote and read per slot."""

    def __init__(self, baton: BatonServe, ledger: Ledger, slots: list[Slot], number: int, seed: int) -> None:
        self.http = httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=30)
        self.s3 = httpx.Client(timeout=30)
        """A client of the presigned URLs: no API key goes to S3."""
        self.ledger = ledger
        self.slots = slots
        self.number = number
        self.rng = random.Random(seed * 1_000 + number)
        self.writes = 0
        self.my_last_ack: dict[Slot, tuple[str, int]] = {}
        self.last_seen: dict[Slot, tuple[str, int]] = {}

    # -- transport ---------------------------------------------------------------------------------------------

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        """One request; every status is counted, and a 5xx or a transport error is a failure of the run."""
        try:
            response = self.http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.ledger.problem(f"client {self.number}: {method} {url} failed in transport: {exc!r}")
            return None
        with self.ledger.lock:
            self.ledger.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.ledger.server_errors.append(f"{method} {url} -> {response.status_code} {response.text[:500]}")
        return response

    # -- states and checks -------------------------------------------------------------------------------------

    def new_state(self) -> dict[str, Any]:
        """A state with text of every kind, floats, nesting, and now and then one large enough to be compressed."""
        self.writes += 1
        state: dict[str, Any] = {
            "client": self.number,
            "write": self.writes,
            "text": self.rng.choice(TEXTS),
            "ratio": round(self.rng.random() * 1000, self.rng.randint(0, 6)),
            "steps": [{"n": i, "done": i % 2 == 0, "note": None} for i in range(self.rng.randint(0, 4))],
        }
        if self.rng.random() < 0.1:
            state["log"] = self.rng.choice(TEXTS) * self.rng.randint(50, 800)
        return state

    def check_saved(self, response: httpx.Response, slot: Slot, state: Any, status: str, how: str) -> Ack:
        """Check a 2xx save answer against what was sent, and put it in the ledger."""
        data = response.json()["data"]
        text = canonical(state)
        expected = {
            "subject_id": slot[0],
            "kind": slot[1],
            "agent_id": "operator",
            "status": status,
            "state_hash": hashlib.sha256(text).hexdigest(),
            "state_bytes": len(text),
            "updated": data["revision"] > 1,
        }
        differences = {k: (data.get(k), v) for k, v in expected.items() if data.get(k) != v}
        if differences:
            self.ledger.problem(f"{how} answered {differences} (answer, expected): {response.text[:300]}")
        if (response.status_code == 201) != (data["revision"] == 1):
            self.ledger.problem(f"{how} answered {response.status_code} with revision {data['revision']}")
        if response.headers.get("ETag") != etag(data["checkpoint_id"], data["revision"]):
            self.ledger.problem(f"{how} sent ETag {response.headers.get('ETag')} for {data}")
        ack = Ack(slot, data["checkpoint_id"], data["revision"], data["state_hash"], response.status_code, status, how)
        with self.ledger.lock:
            self.ledger.acks.append(ack)
        self.my_last_ack[slot] = (ack.checkpoint_id, ack.revision)
        return ack

    def check_refused_write(self, response: httpx.Response, how: str, expected_revision: int | None = None) -> None:
        """A refused write must be one of the conflicts the contract names for it (a revision conflict only when the
        write stated a revision)."""
        error = response.json().get("error", {})
        code = error.get("code")
        if response.status_code == 409 and code == "REVISION_CONFLICT" and expected_revision is not None:
            self.ledger.count("conflicts")
            current = error.get("details", {}).get("current_revision")
            if not isinstance(current, int) or current == expected_revision:
                self.ledger.problem(f"{how}: a conflict expecting {expected_revision} says current is {current}")
        elif response.status_code == 409 and code == "CHECKPOINT_CLOSED":
            self.ledger.count("closed")
        else:
            self.ledger.problem(f"{how} answered {response.status_code}: {response.text[:300]}")

    def check_record(self, response: httpx.Response, where: str, slot: Slot | None = None) -> dict[str, Any]:
        """Check a full record (lookup, get by id) for self-consistency, and remember what it showed."""
        data: dict[str, Any] = response.json()["data"]
        text = canonical(data["state"])
        if data["state_hash"] != hashlib.sha256(text).hexdigest() or data["state_bytes"] != len(text):
            self.ledger.problem(f"{where}: the state does not hash to its state_hash: {response.text[:300]}")
        if response.headers.get("ETag") != etag(data["checkpoint_id"], data["revision"]):
            self.ledger.problem(f"{where}: ETag {response.headers.get('ETag')} for revision {data['revision']}")
        if slot is not None and (data["subject_id"], data["kind"]) != slot:
            self.ledger.problem(f"{where}: a lookup of {slot} answered another checkpoint: {response.text[:300]}")
        with self.ledger.lock:
            self.ledger.seen.append(Seen(data["checkpoint_id"], data["revision"], data["state_hash"], where))
        return data

    # -- operations --------------------------------------------------------------------------------------------

    def save(self, slot: Slot) -> None:
        """A plain save; now and then one that completes the checkpoint."""
        status = "completed" if self.rng.random() < 0.03 else "active"
        state = self.new_state()
        body = {"subject_id": slot[0], "kind": slot[1], "state": state, "status": status}
        response = self.send("POST", "/v1/checkpoints", json=body)
        if response is None or response.status_code >= 500:
            return
        if response.status_code in (200, 201):
            self.check_saved(response, slot, state, status, "save")
        else:
            self.check_refused_write(response, "save")

    def conditional_save(self, slot: Slot) -> None:
        """Read the revision, then save expecting it (0 when absent): a conflict is a valid outcome."""
        read = self.send("GET", "/v1/checkpoints", params={"subject_id": slot[0], "kind": slot[1]})
        if read is None or read.status_code >= 500:
            return
        if read.status_code == 200:
            expected = self.check_record(read, "conditional read", slot)["revision"]
        elif read.status_code == 404:
            expected = 0
        else:
            self.ledger.problem(f"a lookup answered {read.status_code}: {read.text[:300]}")
            return
        state = self.new_state()
        body = {"subject_id": slot[0], "kind": slot[1], "state": state, "expected_revision": expected}
        response = self.send("POST", "/v1/checkpoints", json=body)
        if response is None or response.status_code >= 500:
            return
        if response.status_code in (200, 201):
            ack = self.check_saved(response, slot, state, "active", "conditional save")
            if ack.revision != expected + 1:
                self.ledger.problem(f"a save expecting revision {expected} was acknowledged as {ack.revision}")
        else:
            self.check_refused_write(response, "conditional save", expected)

    def idempotent_save(self, slot: Slot) -> None:
        """A save with a new Idempotency-Key, sometimes sent again at once."""
        key = f"soak-{uuid.uuid4()}"
        state = self.new_state()
        body = {"subject_id": slot[0], "kind": slot[1], "state": state}
        response = self.send("POST", "/v1/checkpoints", json=body, headers={"Idempotency-Key": key})
        if response is None or response.status_code >= 500:
            return
        if response.status_code not in (200, 201):
            self.check_refused_write(response, "idempotent save")
            return
        if response.headers.get("Idempotent-Replayed") is not None:
            self.ledger.problem(f"the first request with key {key} was answered as a replay")
        self.check_saved(response, slot, state, "active", "idempotent save")
        first = FirstAnswer(
            key,
            body,
            response.status_code,
            response.json()["data"],
            response.headers.get("ETag", ""),
            response.json()["meta"]["request_id"],
        )
        with self.ledger.lock:
            self.ledger.idempotent.append(first)
        if self.rng.random() < 0.3:
            self.replay(first)

    def replay(self, first: FirstAnswer) -> None:
        """Send an idempotent request again: the first answer comes back, however much happened since."""
        response = self.send("POST", "/v1/checkpoints", json=first.body, headers={"Idempotency-Key": first.key})
        if response is None or response.status_code >= 500:
            return
        self.ledger.count("replays")
        replayed = {
            "status": response.status_code,
            "data": response.json().get("data"),
            "ETag": response.headers.get("ETag"),
            "Idempotent-Replayed": response.headers.get("Idempotent-Replayed"),
        }
        expected = {"status": first.http_status, "data": first.data, "ETag": first.etag, "Idempotent-Replayed": "true"}
        if replayed != expected:
            self.ledger.problem(f"a replay of {first.key} answered {replayed}, not {expected}: {response.text[:300]}")
        elif response.json()["meta"]["request_id"] == first.request_id:
            self.ledger.problem(f"a replay of {first.key} repeated the first request id")

    def replay_earlier(self) -> None:
        """Replay any client's earlier idempotent request, or reuse its key for another body (422)."""
        with self.ledger.lock:
            earlier = self.rng.choice(self.ledger.idempotent) if self.ledger.idempotent else None
        if earlier is None:
            return
        if self.rng.random() < 0.8:
            self.replay(earlier)
            return
        other = {**earlier.body, "state": {"another": "body"}}
        response = self.send("POST", "/v1/checkpoints", json=other, headers={"Idempotency-Key": earlier.key})
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 422 or response.json()["error"]["code"] != "IDEMPOTENCY_KEY_REUSED":
            self.ledger.problem(f"a reused key with another body answered {response.status_code}: {response.text}")
        self.ledger.count("keys_reused")

    def lookup(self, slot: Slot) -> None:
        """Look the slot up (sometimes with If-None-Match); a client always reads its own last write or later."""
        headers = {}
        if slot in self.last_seen and self.rng.random() < 0.3:
            headers["If-None-Match"] = etag(*self.last_seen[slot])
        response = self.send("GET", "/v1/checkpoints", params={"subject_id": slot[0], "kind": slot[1]}, headers=headers)
        if response is None or response.status_code >= 500:
            return
        if response.status_code == 304:
            if response.content or response.headers.get("ETag") != headers.get("If-None-Match"):
                self.ledger.problem(f"a 304 came with a body or another tag: {response.headers} {response.text}")
            return
        if response.status_code == 404:
            return
        if response.status_code != 200:
            self.ledger.problem(f"a lookup answered {response.status_code}: {response.text[:300]}")
            return
        data = self.check_record(response, "lookup", slot)
        self.last_seen[slot] = (data["checkpoint_id"], data["revision"])
        mine = self.my_last_ack.get(slot)
        if mine is not None and mine[0] == data["checkpoint_id"] and data["revision"] < mine[1]:
            self.ledger.problem(f"client {self.number} wrote {mine} but then read revision {data['revision']}")

    def get_by_id(self) -> None:
        """Read a checkpoint any client wrote, by its id."""
        with self.ledger.lock:
            ack = self.rng.choice(self.ledger.acks) if self.ledger.acks else None
        if ack is None:
            return
        response = self.send("GET", f"/v1/checkpoints/{ack.checkpoint_id}")
        if response is None or response.status_code >= 500 or response.status_code == 404:
            return
        if response.status_code != 200:
            self.ledger.problem(f"a get by id answered {response.status_code}: {response.text[:300]}")
            return
        data = self.check_record(response, "get by id", ack.slot)
        if data["checkpoint_id"] != ack.checkpoint_id:
            self.ledger.problem(f"a get of {ack.checkpoint_id} answered {data['checkpoint_id']}")

    def list_subject(self, slot: Slot) -> None:
        """Page through a subject's checkpoints with small pages; every cursor the server gave must be accepted."""
        url = f"/v1/subjects/{quote(slot[0], safe='')}/checkpoints"
        params: dict[str, Any] = {"limit": self.rng.randint(1, 3)}
        for _ in range(5):
            response = self.send("GET", url, params=params)
            if response is None or response.status_code >= 500:
                return
            if response.status_code != 200:
                self.ledger.problem(f"a list page answered {response.status_code}: {response.text[:300]}")
                return
            page = response.json()
            for summary in page["data"]:
                if summary["subject_id"] != slot[0] or summary["kind"] not in KINDS or "state" in summary:
                    self.ledger.problem(f"a list of {slot[0]} showed {summary}")
                with self.ledger.lock:
                    self.ledger.seen.append(
                        Seen(summary["checkpoint_id"], summary["revision"], summary["state_hash"], "list")
                    )
            cursor = page["meta"]["next_cursor"]
            if cursor is None:
                return
            params["cursor"] = cursor

    def delete(self, slot: Slot) -> None:
        """Delete what this client last saw or wrote in the slot, half the time only if it is still that revision."""
        known = self.last_seen.get(slot) or self.my_last_ack.get(slot)
        if known is None:
            return
        checkpoint_id, revision = known
        conditional = self.rng.random() < 0.5
        headers = {"If-Match": etag(checkpoint_id, revision)} if conditional else {}
        response = self.send("DELETE", f"/v1/checkpoints/{checkpoint_id}", headers=headers)
        if response is None or response.status_code >= 500:
            return
        if response.status_code == 200:
            if response.json()["data"] != {"checkpoint_id": checkpoint_id, "deleted": True}:
                self.ledger.problem(f"a delete answered {response.text}")
            with self.ledger.lock:
                self.ledger.deleted.append((checkpoint_id, revision if conditional else None))
        elif response.status_code == 409 and conditional:
            self.check_refused_write(response, "conditional delete", revision)
        elif response.status_code != 404:
            self.ledger.problem(f"a delete answered {response.status_code}: {response.text[:300]}")

    def declare_blob(self, _: Slot) -> None:
        """Declare a blob (half the time with an Idempotency-Key, replayed at once), and now and then upload it."""
        content = f"soak blob {self.number} {uuid.uuid4()} {self.rng.choice(TEXTS)}".encode()
        body = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "media_type": "text/plain"}
        headers = {"Idempotency-Key": f"soak-blob-{uuid.uuid4()}"} if self.rng.random() < 0.5 else {}
        response = self.send("POST", "/v1/blobs", json=body, headers=headers)
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 201 or response.headers.get("Idempotent-Replayed") is not None:
            self.ledger.problem(f"a blob declaration answered {response.status_code}: {response.text[:300]}")
            return
        data = response.json()["data"]
        if {k: data[k] for k in body} != body or data["upload"]["method"] != "PUT":
            self.ledger.problem(f"a blob declaration of {body} answered {data}")
        if headers:
            replay = self.send("POST", "/v1/blobs", json=body, headers=headers)
            if replay is not None and replay.status_code < 500:
                self.ledger.count("blob_replays")
                if (replay.status_code, replay.json().get("data"), replay.headers.get("Idempotent-Replayed")) != (
                    201,
                    data,
                    "true",
                ):
                    self.ledger.problem(f"a blob replay answered {replay.status_code}: {replay.text[:300]}")
        uploaded = None
        if self.rng.random() < 0.3:
            put = self.s3.put(data["upload"]["url"], content=content, headers=data["upload"]["headers"])
            if put.status_code != 200:
                self.ledger.problem(f"an upload to the presigned URL answered {put.status_code}: {put.text[:300]}")
            else:
                uploaded = content
        with self.ledger.lock:
            self.ledger.blobs.append((data, uploaded))

    def read_blob(self, _: Slot) -> None:
        """Read a blob any client declared; download it when it was uploaded."""
        with self.ledger.lock:
            chosen = self.rng.choice(self.ledger.blobs) if self.ledger.blobs else None
        if chosen is None:
            return
        declared, uploaded = chosen
        response = self.send("GET", f"/v1/blobs/{declared['blob_id']}")
        if response is None or response.status_code >= 500:
            return
        self.ledger.count("blob_reads")
        if response.status_code != 200:
            self.ledger.problem(f"a read of blob {declared['blob_id']} answered {response.status_code}")
            return
        data = response.json()["data"]
        fields = ("blob_id", "sha256", "size", "media_type", "created_at")
        if {k: data[k] for k in fields} != {k: declared[k] for k in fields}:
            self.ledger.problem(f"blob {declared['blob_id']} reads back as {data}, declared as {declared}")
        if uploaded is not None:
            downloaded = self.s3.get(data["download_url"])
            if downloaded.status_code != 200 or downloaded.content != uploaded:
                self.ledger.problem(f"blob {declared['blob_id']} downloads as {downloaded.status_code}, not its bytes")

    # -- the loop ----------------------------------------------------------------------------------------------

    def run(self, deadline: float, max_operations: int) -> None:
        """Random operations until the deadline or the operation budget, whichever comes first."""
        operations = (
            (self.save, 22),
            (self.conditional_save, 20),
            (self.idempotent_save, 14),
            (self.lookup, 16),
            (self.list_subject, 7),
            (self.delete, 7),
            (self.declare_blob, 4),
            (self.read_blob, 4),
        )
        functions = [f for f, _ in operations] + [None, None]
        weights = [w for _, w in operations] + [7, 7]  # get by id, replay of an earlier request
        try:
            for _ in range(max_operations):
                if time.monotonic() >= deadline:
                    return
                chosen = self.rng.choices(range(len(functions)), weights)[0]
                if chosen == len(operations):
                    self.get_by_id()
                elif chosen == len(operations) + 1:
                    self.replay_earlier()
                else:
                    function = functions[chosen]
                    assert function is not None
                    function(self.rng.choice(self.slots))
        except Exception:
            self.ledger.problem(f"client {self.number} crashed:\n{traceback.format_exc()}")
        finally:
            self.http.close()
            self.s3.close()


# --- the test ---------------------------------------------------------------------------------------------------


def soak_settings() -> tuple[float, int, int]:
    """(seconds, threads, seed): short in `make test`, as long as BATON_SOAK_SECONDS says in `make soak`."""
    long_seconds = os.environ.get("BATON_SOAK_SECONDS")
    seconds = float(long_seconds) if long_seconds else SHORT_SECONDS
    threads = int(os.environ.get("BATON_SOAK_THREADS") or (LONG_THREADS if long_seconds else SHORT_THREADS))
    seed = int(os.environ.get("BATON_SOAK_SEED") or random.SystemRandom().randrange(1_000_000))
    return seconds, threads, seed


def final_checks(http: httpx.Client, ledger: Ledger, slots: list[Slot]) -> list[str]:
    """The claims that hold after the clients stopped, whatever the interleaving was."""
    problems: list[str] = []
    by_id: dict[str, list[Ack]] = defaultdict(list)
    for ack in ledger.acks:
        by_id[ack.checkpoint_id].append(ack)
    deleted: dict[str, list[int | None]] = defaultdict(list)
    for checkpoint_id, revision in ledger.deleted:
        deleted[checkpoint_id].append(revision)

    for checkpoint_id, acks in by_id.items():
        revisions = sorted(a.revision for a in acks)
        if {a.slot for a in acks} != {acks[0].slot}:
            problems.append(f"{checkpoint_id} was acknowledged in several slots: {sorted({a.slot for a in acks})}")
        if revisions != list(range(1, len(revisions) + 1)):
            repeated = sorted(r for r, n in Counter(revisions).items() if n > 1)
            problems.append(
                f"{checkpoint_id}: acknowledged revisions are not 1..n (repeated, a lost update: {repeated}): "
                f"{revisions}"
            )
        created = [a for a in acks if a.http_status == 201]
        if [a.revision for a in created] != [1]:
            problems.append(f"{checkpoint_id}: 201 answered for revisions {[a.revision for a in created]}")
        completed = [a.revision for a in acks if a.status == "completed"]
        if completed and completed != [max(revisions)]:
            problems.append(f"{checkpoint_id}: writes after completion (completed at {completed}, last {revisions})")

    for checkpoint_id, if_match in deleted.items():
        if len(if_match) > 1:
            problems.append(f"{checkpoint_id} was deleted {len(if_match)} times")
        if checkpoint_id not in by_id:
            problems.append(f"{checkpoint_id} was deleted but no write of it was acknowledged")
            continue
        last_revision = max(a.revision for a in by_id[checkpoint_id])
        for revision in if_match:
            if revision is not None and revision != last_revision:
                problems.append(
                    f"{checkpoint_id}: deleted If-Match revision {revision}, its last write was {last_revision}"
                )

    acknowledged = {(a.checkpoint_id, a.revision): a.state_hash for a in ledger.acks}
    for seen in ledger.seen:
        found = acknowledged.get((seen.checkpoint_id, seen.revision))
        if found != seen.state_hash:
            problems.append(f"a {seen.where} showed {seen}, but the acknowledged write of it has hash {found}")

    for slot in slots:
        ids = {a.checkpoint_id for a in ledger.acks if a.slot == slot}
        live = sorted(ids - set(deleted))
        response = http.get("/v1/checkpoints", params={"subject_id": slot[0], "kind": slot[1]})
        if len(live) > 1:
            problems.append(f"{slot}: several checkpoint ids were never deleted: {live}")
        elif not live:
            if response.status_code != 404:
                problems.append(f"{slot}: every checkpoint was deleted, yet the lookup answered {response.text[:300]}")
        elif response.status_code != 200:
            problems.append(f"{slot}: {live[0]} was never deleted, yet the lookup answered {response.status_code}")
        else:
            data = response.json()["data"]
            last = max(by_id[live[0]], key=lambda a: a.revision)
            shown = (data["checkpoint_id"], data["revision"], data["state_hash"])
            if shown != (last.checkpoint_id, last.revision, last.state_hash):
                problems.append(f"{slot}: the lookup shows {shown}, the last acknowledged write is {last}")
    for checkpoint_id in deleted:
        response = http.get(f"/v1/checkpoints/{checkpoint_id}")
        if response.status_code != 404:
            problems.append(f"{checkpoint_id} was deleted, yet a get by id answered {response.status_code}")
    return problems


def test_concurrent_clients_lose_no_acknowledged_write(baton: BatonServe, http: httpx.Client) -> None:
    seconds, threads, seed = soak_settings()
    run = uuid.uuid4().hex[:12]
    # A few subjects, one with characters that need escaping in keys and paths, so that clients collide.
    subjects = [f"soak-{run}-a", f"soak-{run}-b/c#d", f"soak-{run}-é 日本"]
    slots = [(subject, kind) for subject in subjects for kind in KINDS]
    ledger = Ledger()
    deadline = time.monotonic() + seconds
    max_operations = int(seconds * OPERATIONS_PER_SECOND_PER_THREAD)
    clients = [Client(baton, ledger, slots, number, seed) for number in range(threads)]
    workers = [
        threading.Thread(target=client.run, args=(deadline, max_operations), name=f"soak-{client.number}")
        for client in clients
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=seconds + 120)
    elapsed = time.monotonic() - started
    stuck = [w.name for w in workers if w.is_alive()]

    problems = [*ledger.problems, *final_checks(http, ledger, slots)]
    requests = sum(ledger.statuses.values())
    checkpoints = len({a.checkpoint_id for a in ledger.acks})
    proof_counts.record(
        "soak",
        requests=requests,
        writes_acknowledged=len(ledger.acks),
        conflicts=ledger.outcomes["conflicts"],
        replays=ledger.outcomes["replays"],
        checkpoints=checkpoints,
        deletes_acknowledged=len(ledger.deleted),
        reads_checked=len(ledger.seen),
        blobs_declared=len(ledger.blobs),
        blob_reads=ledger.outcomes["blob_reads"],
        blob_replays=ledger.outcomes["blob_replays"],
    )
    print(
        f"\nsoak: seed {seed}, {threads} clients for {elapsed:.1f} s: {requests} requests "
        f"({requests / max(elapsed, 0.001):.0f}/s), statuses {dict(sorted(ledger.statuses.items()))}, "
        f"{len(ledger.acks)} writes acknowledged over {checkpoints} checkpoints, {len(ledger.deleted)} deletes, "
        f"outcomes {dict(ledger.outcomes)}, {len(ledger.seen)} reads checked"
    )
    assert not stuck, f"clients still running after the deadline: {stuck}"
    assert not ledger.server_errors, f"5xx answers (seed {seed}):\n" + "\n".join(ledger.server_errors[:20])
    assert not problems, f"{len(problems)} problems (seed {seed}):\n" + "\n".join(problems[:40])
    # The run proves something only if the clients really collided.
    assert len(ledger.acks) >= 20, ledger.statuses
    assert ledger.outcomes["conflicts"] > 0
    assert ledger.outcomes["replays"] > 0
    assert ledger.blobs
    assert ledger.outcomes["blob_reads"] > 0
