"""Soak: concurrent clients save, read, list, delete, restore and resume the same few checkpoints over real HTTP,
while lease holders race for a few others, and afterwards every acknowledged write reads back consistently.

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

Lease workers (`LeaseWorker`) race for the leases of three checkpoints that keep 100 revisions: they acquire (ttl 10
or 12 s), read, save with their token and the revision they know, renew, release, and keep using tokens they released
or let lapse. Every save's state names its worker and token, so the revisions read back afterwards say who wrote
each one. With this process's clock beside the server's stamps (one machine, one clock), `lease_checks` holds:

- no two leases of a checkpoint certainly live at once, and no write accepted while another token's lease was
  certainly live; the holder of a live lease is never refused;
- over the kept revisions the token counter never goes down: a holder whose lease was taken over got no write in.
  A write that goes down while no lease was live (the newer one released or lapsed), and a lease counter granted
  twice, are known gaps of the product, pinned by the two strict expected failures at the end of this file: when
  everything else held, a run that met them ends as an expected failure naming them.

An MCP client (`McpClient`) works the same slots through `tools/call` on `POST /mcp` (plain JSON-RPC over HTTP): its
acknowledged writes join the ledger and the checks above, and after the run `mcp_replay_probe` replays a tool's
idempotent save through the route and a route's through the tool.

LangGraph clients (`ThreadClient`) run graphs on threads of their own beside them: puts with parents and only the
channels whose version is new (values inline, in items of their own, of tens of KB), tasks' pending writes (special
channels that overwrite among them), get_tuple of the latest and by id, list pages with a cursor and a metadata
filter, and now and then a thread deleted. Each client is its threads' only writer, as a graph run is, so every
tuple any read shows must be exactly the one its ledger holds, and after the run every thread lists exactly what
was put into it (a deleted one answers 404).

An OAuth client (`OAuthMcpClient`) is that MCP client as a hosted platform connects it: it registers, a person
approves it on the consent form with a key of the operator's agent, it exchanges the code with PKCE, and then works
the same slots through the tools with the access token (its writes join the ledger), now and then refreshing the
grant (the refresh token rotates) or revoking it (its refresh token is then refused) and being approved again. With
a key of that agent holding keys:manage it lists the agent's grants (`GET /v1/oauth/grants`, page by page: its live
grant exactly once, under the same id across refreshes, never a token) and now and then revokes its grant there
(`DELETE /v1/oauth/grants/{grant_id}`: its refresh token refused, the grant no longer listed, a second revocation
404), to be approved again.

The plain clients also ask `GET /v1/whoami`, each with a key of its own (the operator's tenant, agent and scopes),
which must name that key whatever the others send at the same time, and fetch the console's files (issue 12), which
must answer 200 (or 304 to the ETag they had) with the strict Content-Security-Policy.

Tenants' rate limits meet the run too. A rate-limited client (`RateLimitedClient`) is an agent of a tenant of its
own (`soak-limited`, its key made with the development key, which holds tenants:manage), limited to 120 requests a
minute, 10 at once, working through the SDK (`baton_checkpoints.client`) as fast as it is served: it saves its own
checkpoint, reads it back and asks whoami. It meets 429s within seconds; the SDK waits out each one (its
Retry-After) and tries again, so every call must end served, and a save refused with a 429 wrote nothing (its
revisions go 1, 2, 3... with no gap and no repeat). Every answer it gets is watched on the wire (`WatchedTransport`):
no 5xx, each 429 with `Retry-After`, `RateLimit-Policy` and `RateLimit` as the contract has them, and each success
with a `RateLimit` within the tenant's burst. Meanwhile the operator (`LimitsOperator`, with the development key)
now and then sets and reads the limits of another tenant of the soak's own (`soak-limits`, which makes no request):
each read answers what it last set, all of it, with the stage's defaults in effect where a setting is null; an
invalid setting is refused and changes nothing. It also reads the limited tenant's usage (`GET /v1/usage`): the
requests counted never go down and never pass what that tenant's clients were admitted (a 429 is not counted), and
after the run they are exactly that many. The tenant the other clients share keeps the stage's defaults.

After the run, the operator's tenant's audit trail (`GET /v1/audit`) must be a whole hash chain (`baton audit
verify`'s check) holding an approval and a revocation for each OAuth grant the run approved and revoked.

`make test` runs it for about 15 seconds on 6 threads, 3 lease workers, 1 MCP client, 1 OAuth client, 2
LangGraph clients, 1 rate-limited client and the limits operator; `make soak` sets BATON_SOAK_SECONDS for a longer
run (BATON_SOAK_THREADS, BATON_SOAK_LEASE_WORKERS, BATON_SOAK_MCP_WORKERS, BATON_SOAK_OAUTH_WORKERS,
BATON_SOAK_THREAD_WORKERS, BATON_SOAK_LIMITED_WORKERS, BATON_SOAK_LIMITS_WORKERS and BATON_SOAK_SEED tune it
further).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import random
import re
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import rfc8785

from baton_checkpoints.client import Baton, BatonError, RetryPolicy
from tests import proof_counts
from tests.e2e.log_audit import stop_audited
from tests.e2e.oauth_flow import OAuthFlow
from tests.e2e.planted import plant_secret
from tests.e2e.server_process import BatonServe
from tests.e2e.test_checkpoints import parse_time_ms

SHORT_SECONDS = 15.0
SHORT_THREADS = 6
LONG_THREADS = 8
OPERATIONS_PER_SECOND_PER_THREAD = 60
"""Bounds the loop by count as well as by time: more than any client here can do against `baton serve`."""
OVERTIME_SECONDS = 150.0
"""How long past its deadline a run may go on until it has shown what it must (a loaded CI runner has answered
3 requests a second, so 15 s made 13 acknowledged writes): the clients stop at the deadline once the run proved
enough, and at the deadline plus this whatever."""
KINDS = ("task_state", "workflow")
KEPT_REVISIONS = (2, 5)
LEASE_WORKERS = 3
LEASED_CHECKPOINTS = 3
LEASE_TTLS = (10, 12)
"""Seconds: the shortest leases the contract allows, so that a lapse happens within the run."""
LEASE_KEEP = 100
"""Revisions the leased checkpoints keep: enough to read back every write of a short run from its revisions."""
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
    by_mcp: bool = False
    """Made through the MCP tool (its key the `idempotency_key` argument), replayed here through the route."""


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


@dataclass
class Pace:
    """When the clients stop: at the deadline once the run has shown what it must (its shortfalls are none), and
    at the ceiling whatever it has shown, so that a slow machine makes a longer run, not a run that proves nothing."""

    deadline: float
    ceiling: float
    max_operations: int
    """Per client: with the deadline, the bound of a run that has shown enough."""
    shortfalls: Callable[[], list[str]]

    def over(self, operations: int) -> bool:
        """Whether a client that has made this many operations stops now."""
        now = time.monotonic()
        if now >= self.ceiling:
            return True
        if now < self.deadline and operations < self.max_operations:
            return False
        return not self.shortfalls()


def canonical(state: Any) -> bytes:
    """RFC 8785 canonical JSON, computed here independently of Baton."""
    return bytes(rfc8785.dumps(state))


def etag(checkpoint_id: str, revision: int) -> str:
    """The weak entity tag the contract prescribes."""
    return f'W/"{checkpoint_id}:{revision}"'


@dataclass(frozen=True)
class OwnKey:
    """A key of a plain client's own: the operator's tenant, agent and scopes under another key id, so that a
    whoami answering another client's key (a request mixed up with a concurrent one) is seen."""

    secret: str
    key_id: str
    tenant_id: str
    agent_id: str


CONSOLE_FILES = ("/console", "/console/app.js", "/console/console.css", "/console/api.js")
"""What a plain client fetches of the console (public: its key changes nothing of the answer)."""


class Client:
    """One soak client: its own connection, its own random stream, and what it last wrote and read per slot."""

    def __init__(
        self, baton: BatonServe, ledger: Ledger, slots: list[Slot], number: int, seed: int, key: OwnKey | None = None
    ) -> None:
        secret = key.secret if key is not None else baton.key
        self.http = httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        self.key = key
        """The client's own key (a plain client's), which whoami must name; None: the operator's."""
        self.console_tags: dict[str, str] = {}
        """The ETag of each console file this client fetched, sent back now and then (a 304)."""
        self.asked_root = False
        """Whether this client has asked for the API's address (`GET /`) yet."""
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

    def history(self) -> dict[str, int]:
        """Now and then a save that sets how many revisions the checkpoint keeps (it keeps them until changed)."""
        return {"keep_revisions": self.rng.choice(KEPT_REVISIONS)} if self.rng.random() < 0.25 else {}

    def check_saved(
        self, response: httpx.Response, slot: Slot, state: Any, status: str, how: str, state_hash: str | None = None
    ) -> Ack:
        """Check a 2xx save answer against what was sent (`state`, or for a restore the `state_hash` of the revision
        it restored), and put it in the ledger."""
        data = response.json()["data"]
        if response.headers.get("ETag") != etag(data["checkpoint_id"], data["revision"]):
            self.ledger.problem(f"{how} sent ETag {response.headers.get('ETag')} for {data}")
        return self.acknowledge(data, response.status_code, slot, state, status, how, state_hash, response.text)

    def acknowledge(
        self,
        data: dict[str, Any],
        http_status: int,
        slot: Slot,
        state: Any,
        status: str,
        how: str,
        state_hash: str | None = None,
        shown: str = "",
    ) -> Ack:
        """Check a save's answer (`data`, answered with `http_status`; `shown` is the answer as received, for the
        report) against what was sent, and put it in the ledger."""
        text = canonical(state) if state_hash is None else None
        expected = {
            "subject_id": slot[0],
            "kind": slot[1],
            "agent_id": "operator",
            "status": status,
            "state_hash": hashlib.sha256(text).hexdigest() if text is not None else state_hash,
            "updated": data["revision"] > 1,
        }
        if text is not None:
            expected["state_bytes"] = len(text)
        differences = {k: (data.get(k), v) for k, v in expected.items() if data.get(k) != v}
        if differences:
            self.ledger.problem(f"{how} answered {differences} (answer, expected): {shown[:300]}")
        if (http_status == 201) != (data["revision"] == 1):
            self.ledger.problem(f"{how} answered {http_status} with revision {data['revision']}")
        ack = Ack(slot, data["checkpoint_id"], data["revision"], data["state_hash"], http_status, status, how)
        with self.ledger.lock:
            self.ledger.acks.append(ack)
        self.my_last_ack[slot] = (ack.checkpoint_id, ack.revision)
        return ack

    def check_refused_write(self, response: httpx.Response, how: str, expected_revision: int | None = None) -> None:
        """A refused write must be one of the conflicts the contract names for it (a revision conflict only when the
        write stated a revision)."""
        if response.status_code == 409:
            self.check_conflict(response.json().get("error", {}), how, expected_revision, response.text)
        else:
            self.ledger.problem(f"{how} answered {response.status_code}: {response.text[:300]}")

    def check_conflict(self, error: dict[str, Any], how: str, expected_revision: int | None, shown: str) -> None:
        """A refused write's error (`{code, message, details}`) must be a conflict the contract names for it."""
        code = error.get("code")
        if code == "REVISION_CONFLICT" and expected_revision is not None:
            self.ledger.count("conflicts")
            current = error.get("details", {}).get("current_revision")
            if not isinstance(current, int) or current == expected_revision:
                self.ledger.problem(f"{how}: a conflict expecting {expected_revision} says current is {current}")
        elif code == "CHECKPOINT_CLOSED":
            self.ledger.count("closed")
        else:
            self.ledger.problem(f"{how} answered {code}: {shown[:300]}")

    def check_record(self, response: httpx.Response, where: str, slot: Slot | None = None) -> dict[str, Any]:
        """Check a full record (lookup, get by id) for self-consistency, and remember what it showed."""
        data: dict[str, Any] = response.json()["data"]
        if response.headers.get("ETag") != etag(data["checkpoint_id"], data["revision"]):
            self.ledger.problem(f"{where}: ETag {response.headers.get('ETag')} for revision {data['revision']}")
        return self.record_seen(data, where, slot, response.text)

    def record_seen(self, data: dict[str, Any], where: str, slot: Slot | None, shown: str) -> dict[str, Any]:
        """Check a full record's data for self-consistency, and remember what it showed."""
        text = canonical(data["state"])
        if data["state_hash"] != hashlib.sha256(text).hexdigest() or data["state_bytes"] != len(text):
            self.ledger.problem(f"{where}: the state does not hash to its state_hash: {shown[:300]}")
        if slot is not None and (data["subject_id"], data["kind"]) != slot:
            self.ledger.problem(f"{where}: a lookup of {slot} answered another checkpoint: {shown[:300]}")
        with self.ledger.lock:
            self.ledger.seen.append(Seen(data["checkpoint_id"], data["revision"], data["state_hash"], where))
        return data

    # -- operations --------------------------------------------------------------------------------------------

    def save(self, slot: Slot) -> None:
        """A plain save; now and then one that completes the checkpoint."""
        status = "completed" if self.rng.random() < 0.03 else "active"
        state = self.new_state()
        body = {"subject_id": slot[0], "kind": slot[1], "state": state, "status": status, **self.history()}
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
        body = {"subject_id": slot[0], "kind": slot[1], "state": state, "expected_revision": expected, **self.history()}
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
        if first.by_mcp:
            self.ledger.count("route_replays_of_tool_saves")
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

    def known(self, slot: Slot) -> tuple[str, int] | None:
        """The checkpoint of `slot` this client last saw or wrote (id, revision)."""
        return self.last_seen.get(slot) or self.my_last_ack.get(slot)

    def revisions(self, checkpoint_id: str, limit: int, pages: int) -> list[dict[str, Any]] | None:
        """Up to `pages` pages of a checkpoint's kept revisions (summaries, newest first), each checked and
        remembered; None when the checkpoint is gone (404)."""
        shown: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": limit}
        for _ in range(pages):
            response = self.send("GET", f"/v1/checkpoints/{checkpoint_id}/revisions", params=params)
            if response is None or response.status_code >= 500:
                return None
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                self.ledger.problem(f"a revisions list answered {response.status_code}: {response.text[:300]}")
                return None
            page = response.json()
            numbers = [summary["revision"] for summary in page["data"]]
            if numbers != sorted(numbers, reverse=True) or (shown and numbers and numbers[0] >= shown[-1]["revision"]):
                self.ledger.problem(f"revisions of {checkpoint_id} are not newest first: {numbers} after {shown}")
            for summary in page["data"]:
                if summary["checkpoint_id"] != checkpoint_id or "state" in summary:
                    self.ledger.problem(f"a revisions list of {checkpoint_id} showed {summary}")
                with self.ledger.lock:
                    self.ledger.seen.append(
                        Seen(summary["checkpoint_id"], summary["revision"], summary["state_hash"], "revisions")
                    )
            shown.extend(page["data"])
            cursor = page["meta"]["next_cursor"]
            if cursor is None:
                break
            params["cursor"] = cursor
        self.ledger.count("revision_lists")
        return shown

    def read_revisions(self, slot: Slot) -> None:
        """List the kept revisions of what this client knows of the slot, and read one of them whole."""
        known = self.known(slot)
        if known is None:
            return
        shown = self.revisions(known[0], self.rng.randint(1, 3), 3)
        if not shown:
            return
        number = self.rng.choice(shown)["revision"]
        response = self.send("GET", f"/v1/checkpoints/{known[0]}/revisions/{number}")
        if response is None or response.status_code >= 500 or response.status_code == 404:
            return  # pruned, or the checkpoint deleted, since the list
        if response.status_code != 200:
            self.ledger.problem(f"a kept revision read answered {response.status_code}: {response.text[:300]}")
            return
        data = self.check_record(response, "kept revision", slot)
        self.ledger.count("revision_reads")
        if (data["checkpoint_id"], data["revision"]) != (known[0], number):
            self.ledger.problem(f"revision {number} of {known[0]} answered {data['checkpoint_id']}:{data['revision']}")

    def restore(self, slot: Slot) -> None:
        """Restore one of the kept revisions this client can see, half the time expecting the revision it knows."""
        known = self.known(slot)
        if known is None:
            return
        shown = self.revisions(known[0], 5, 1)
        if not shown:
            return
        chosen = self.rng.choice(shown)
        body: dict[str, Any] = {"revision": chosen["revision"]}
        conditional = self.rng.random() < 0.5
        if conditional:
            body["expected_revision"] = known[1]
        response = self.send("POST", f"/v1/checkpoints/{known[0]}/restore", json=body)
        if response is None or response.status_code >= 500:
            return
        if response.status_code == 200:
            self.ledger.count("restores")
            ack = self.check_saved(response, slot, None, "active", "restore", state_hash=chosen["state_hash"])
            if ack.checkpoint_id != known[0] or ack.revision <= chosen["revision"]:
                self.ledger.problem(f"a restore of {known[0]}:{chosen['revision']} was acknowledged as {ack}")
            if conditional and ack.revision != known[1] + 1:
                self.ledger.problem(f"a restore expecting revision {known[1]} was acknowledged as {ack.revision}")
        elif response.status_code == 404:
            self.ledger.count("restores_gone")  # pruned, or the checkpoint deleted, since the list
        else:
            self.check_refused_write(response, "restore", body.get("expected_revision"))

    def resume(self, slot: Slot) -> None:
        """Ask what to resume on the slot's subject (with its kind, or without, which may be ambiguous), sometimes
        within a budget too small for a large state."""
        body: dict[str, Any] = {"subject_id": slot[0]}
        if self.rng.random() < 0.6:
            body["kind"] = slot[1]
        if self.rng.random() < 0.3:
            body["budget_bytes"] = 1024
        response = self.send("POST", "/v1/resume", json=body)
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 200:
            self.ledger.problem(f"a resume answered {response.status_code}: {response.text[:300]}")
            return
        # The budget counts the compact bytes of `data`, exactly as sent: `{"data":<data>,"meta":{...}}`.
        sent = response.content[len(b'{"data":') : response.content.rfind(b',"meta":')]
        self.judge_resume(response.json()["data"], body, slot, len(sent), response.text)

    def judge_resume(self, data: dict[str, Any], body: dict[str, Any], slot: Slot, sent: int, shown: str) -> None:
        """Check a resume's answer (`data`, `sent` bytes as sent) to the request `body` about `slot`, and remember
        what it showed."""
        status = data.get("status")
        self.ledger.count(f"resume_{status}")
        summaries = [data["checkpoint"]] if "checkpoint" in data else data.get("candidates", [])
        if status == "ready":
            text = canonical(data["checkpoint"]["state"])
            if data["checkpoint"]["state_hash"] != hashlib.sha256(text).hexdigest():
                self.ledger.problem(f"a ready resume's state does not hash to its state_hash: {shown[:300]}")
            if sent > body.get("budget_bytes", sent):
                self.ledger.problem(f"a ready resume's data of {sent} bytes exceeds the budget of {body}")
        elif status == "omitted" and not data["required_bytes"] > body.get("budget_bytes", 10**9):
            self.ledger.problem(f"a resume omitted {data['required_bytes']} bytes within a budget: {body}")
        elif status == "ambiguous" and (
            len(summaries) < 2 or "kind" in body or len({s["status"] == "active" for s in summaries}) > 1
        ):
            # Active candidates decide first; terminal ones only when no active one matches.
            self.ledger.problem(f"an ambiguous resume of {body} named {summaries}")
        elif status not in ("ready", "omitted", "ambiguous", "closed", "none"):
            self.ledger.problem(f"a resume answered status {status}: {shown[:300]}")
        for summary in summaries:
            if summary["subject_id"] != slot[0] or ("kind" in body and summary["kind"] != slot[1]):
                self.ledger.problem(f"a resume of {body} answered {summary}")
            if (status in ("ready", "omitted")) != (summary["status"] == "active") and status != "ambiguous":
                self.ledger.problem(f"a {status} resume offered a {summary['status']} checkpoint")
            with self.ledger.lock:
                self.ledger.seen.append(
                    Seen(summary["checkpoint_id"], summary["revision"], summary["state_hash"], f"resume {status}")
                )

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

    def read_blob(self, slot: Slot) -> None:
        """Read a blob any client declared (declaring one first when none was yet, so that a slow run still reads
        some); download it when it was uploaded."""
        with self.ledger.lock:
            any_declared = bool(self.ledger.blobs)
        if not any_declared:
            self.declare_blob(slot)
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

    def whoami(self, _: Slot) -> None:
        """GET /v1/whoami: the client's own key, whatever the other clients send at the same time."""
        response = self.send("GET", "/v1/whoami")
        if response is None or response.status_code >= 500 or self.key is None:
            return
        self.ledger.count("whoami")
        data = response.json().get("data") or {}
        shown = {name: data.get(name) for name in ("key_id", "tenant_id", "agent_id")}
        own = {"key_id": self.key.key_id, "tenant_id": self.key.tenant_id, "agent_id": self.key.agent_id}
        if response.status_code != 200 or shown != own:
            self.ledger.problem(f"client {self.number}: whoami answered {response.status_code} {shown}, not {own}")

    def console_file(self, _: Slot) -> None:
        """A file of the console (now and then with the ETag it had, a 304), or the API's address (a 302 to the
        console): served with the strict CSP."""
        again = bool(self.console_tags) and self.rng.random() < 0.5
        # The first time (every client's tour makes this call once), then now and then: the API's address
        root = not self.asked_root or (not again and self.rng.random() < 0.2)
        self.asked_root = True
        path = "/" if root else self.rng.choice(sorted(self.console_tags) if again else CONSOLE_FILES)
        tag = self.console_tags[path] if again else None
        response = self.send("GET", path, headers={"If-None-Match": tag} if tag else {})
        if response is None or response.status_code >= 500:
            return
        self.ledger.count("console_redirects" if root else "console_files")
        policy = response.headers.get("content-security-policy", "")
        expected = 302 if root else 304 if tag else 200
        strict = all(d in policy for d in ("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"))
        if response.status_code != expected or not strict or "unsafe-" in policy:
            self.ledger.problem(f"GET {path} (If-None-Match {tag}) answered {response.status_code}, CSP {policy!r}")
            return
        if root:
            if response.headers.get("location") != "/console" or response.content:
                self.ledger.problem(f"GET / sent {response.headers.get('location')!r} with {len(response.content)} B")
            return
        if response.status_code == 200:
            if not response.content or not response.headers.get("etag"):
                self.ledger.problem(f"GET {path} answered 200 without a body or an ETag")
                return
            self.console_tags[path] = response.headers["etag"]
        else:
            self.ledger.count("console_not_modified")

    # -- the loop ----------------------------------------------------------------------------------------------

    def operations(self) -> list[tuple[Callable[[Slot], None], int]]:
        """This client's operations on a slot, with their weights."""
        return [
            (self.save, 22),
            (self.conditional_save, 20),
            (self.idempotent_save, 14),
            (self.lookup, 16),
            (self.list_subject, 7),
            (self.delete, 7),
            (self.declare_blob, 4),
            (self.read_blob, 4),
            (self.read_revisions, 5),
            (self.restore, 4),
            (self.resume, 5),
            (lambda _: self.get_by_id(), 7),
            (lambda _: self.replay_earlier(), 7),
            (self.whoami, 2),
            (self.console_file, 2),
        ]

    def run(self, pace: Pace) -> None:
        """Random operations until the pace says the run is over."""
        operations = self.operations()
        functions = [f for f, _ in operations]
        weights = [w for _, w in operations]
        # Every operation once first (a tour starting at this client's own place in it), then at random: however slow
        # the machine, every kind of request is made and checked (the coverage asserts below hold on a busy runner).
        start = self.number % len(functions)
        tour = functions[start:] + functions[:start]
        try:
            for number in itertools.count():
                if pace.over(number):
                    return
                function = tour[number] if number < len(tour) else self.rng.choices(functions, weights)[0]
                function(self.rng.choice(self.slots))
        except Exception:
            self.ledger.problem(f"client {self.number} crashed:\n{traceback.format_exc()}")
        finally:
            self.http.close()
            self.s3.close()


# --- an agent speaking MCP ---------------------------------------------------------------------------------------

MCP_WORKERS = 1
MCP_PROTOCOL_VERSION = "2025-11-25"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MCP_PROTOCOL_VERSION}
"""What a streamable HTTP client sends with every message after `initialize`."""
SERVER_FAULTS = frozenset({"UNAVAILABLE", "INTERNAL"})
"""Tool error codes that are the server's failure, as a 5xx is the route's: a failure of the run."""


class McpClient(Client):
    """A soak client that reaches Baton as an agent does through MCP: plain JSON-RPC `tools/call` messages over HTTP
    to `POST /mcp` (stateless, no session), on the same slots as the other clients. It saves (plainly, expecting a
    revision, with an `idempotency_key`), reads by subject and by id, lists, resumes and deletes; its acknowledged
    writes go into the same ledger and meet the same final checks. Its idempotent saves join the ledger's replays:
    the HTTP clients replay them through the route, and it replays theirs through the tool."""

    def __init__(self, baton: BatonServe, ledger: Ledger, slots: list[Slot], number: int, seed: int) -> None:
        super().__init__(baton, ledger, slots, 200 + number, seed)
        self.rpc_ids = 0

    def operations(self) -> list[tuple[Callable[[Slot], None], int]]:
        return [
            (self.save, 22),
            (self.conditional_save, 20),
            (self.idempotent_save, 14),
            (self.lookup, 16),
            (self.list_subject, 7),
            (self.delete, 7),
            (self.resume, 5),
            (lambda _: self.get_by_id(), 7),
            (lambda _: self.replay_earlier(), 7),
        ]

    def run(self, pace: Pace) -> None:
        """Initialize (as an MCP client does, though the server keeps no session), then the random operations."""
        try:
            initialized = self.rpc(
                "initialize",
                {
                    "protocolVersion": MCP_PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "baton-soak", "version": "1"},
                },
            )
            if initialized is not None and initialized.get("protocolVersion") != MCP_PROTOCOL_VERSION:
                self.ledger.problem(f"MCP initialize answered {initialized}")
            notified = self.send(
                "POST", "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=MCP_HEADERS
            )
            if notified is not None and (notified.status_code != 202 or notified.content):
                self.ledger.problem(f"notifications/initialized answered {notified.status_code}: {notified.text}")
            # Where the work stands, first: a read, so that this run's first tool call in the server is never an
            # idempotent write (the first tools/call of a container fingerprints its request wrongly, a product defect
            # pinned by tests/integration/test_fault_injection.py, and would make the run fail by chance).
            self.lookup(self.rng.choice(self.slots))
        except Exception:
            self.ledger.problem(f"MCP client {self.number} crashed:\n{traceback.format_exc()}")
        super().run(pace)

    # -- transport ---------------------------------------------------------------------------------------------

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """One JSON-RPC request; its result, or None (a transport error, a 5xx or a JSON-RPC error: a problem)."""
        self.rpc_ids += 1
        message = {"jsonrpc": "2.0", "id": self.rpc_ids, "method": method, "params": params}
        response = self.send("POST", "/mcp", json=message, headers=MCP_HEADERS)
        if response is None or response.status_code >= 500:
            return None
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else None
        if response.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("result"), dict):
            self.ledger.problem(f"MCP {method} answered {response.status_code}: {response.text[:300]}")
            return None
        if body.get("id") != message["id"]:
            self.ledger.problem(f"MCP {method} with id {message['id']} was answered for id {body.get('id')}")
        result: dict[str, Any] = body["result"]
        return result

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None, str] | None:
        """`tools/call`: (the structured content, the error code of a failing tool or None, the text content); None
        when the call failed (a problem already counted). A server's failure (UNAVAILABLE, INTERNAL) counts as a 5xx."""
        result = self.rpc("tools/call", {"name": name, "arguments": arguments})
        if result is None:
            return None
        self.ledger.count("mcp_tool_calls")
        content = result.get("content") or [{}]
        text = content[0].get("text", "")
        structured = result.get("structuredContent")
        if not isinstance(structured, dict) or json.loads(text or "null") != structured:
            self.ledger.problem(f"{name}: the text content is not the structured content: {result}")
            return None
        code = structured.get("code") if result.get("isError") else None
        if result.get("isError") and not isinstance(code, str):
            self.ledger.problem(f"{name} failed without a contract code: {result}")
            return None
        if code in SERVER_FAULTS:
            with self.ledger.lock:
                self.ledger.server_errors.append(f"MCP {name} {arguments} -> isError {text[:500]}")
            return None
        return structured, code, text

    # -- operations --------------------------------------------------------------------------------------------

    def tool_save(
        self, slot: Slot, arguments: dict[str, Any], how: str, expected: int | None = None
    ) -> tuple[Ack, dict[str, Any]] | None:
        """`baton_checkpoint_save`: (its acknowledgement, put into the ledger, and its data), or None for a refusal,
        checked as a conflict."""
        answered = self.call("baton_checkpoint_save", arguments)
        if answered is None:
            return None
        data, code, text = answered
        if code is not None:
            self.check_conflict(data, how, expected, text)
            return None
        # The tool states the route's 201 (a create) as `updated: false`.
        status = arguments.get("status", "active")
        ack = self.acknowledge(
            data, 200 if data.get("updated") else 201, slot, arguments["state"], status, how, None, text
        )
        if expected is not None and ack.revision != expected + 1:
            self.ledger.problem(f"{how} expecting revision {expected} was acknowledged as {ack.revision}")
        return ack, data

    def save(self, slot: Slot) -> None:
        """A plain save through the tool; now and then one that completes the checkpoint."""
        status = "completed" if self.rng.random() < 0.03 else "active"
        arguments = {"subject_id": slot[0], "kind": slot[1], "state": self.new_state(), "status": status}
        self.tool_save(slot, {**arguments, **self.history()}, "mcp save")

    def read(self, arguments: dict[str, Any], where: str, slot: Slot | None) -> dict[str, Any] | None:
        """`baton_checkpoint_get`: the record (checked and remembered), or None when NOT_FOUND or failed."""
        answered = self.call("baton_checkpoint_get", arguments)
        if answered is None:
            return None
        data, code, text = answered
        if code == "NOT_FOUND":
            return None
        if code is not None:
            self.ledger.problem(f"{where} of {arguments} answered {code}: {text[:300]}")
            return None
        return self.record_seen(data, where, slot, text)

    def conditional_save(self, slot: Slot) -> None:
        """Read the revision through the tool, then save expecting it (0 when absent): a conflict is a valid
        outcome."""
        answered = self.call("baton_checkpoint_get", {"subject_id": slot[0], "kind": slot[1]})
        if answered is None:
            return
        data, code, text = answered
        if code is None:
            expected = self.record_seen(data, "mcp conditional read", slot, text)["revision"]
        elif code == "NOT_FOUND":
            expected = 0
        else:
            self.ledger.problem(f"an MCP lookup answered {code}: {text[:300]}")
            return
        arguments = {"subject_id": slot[0], "kind": slot[1], "state": self.new_state(), "expected_revision": expected}
        self.tool_save(slot, {**arguments, **self.history()}, "mcp conditional save", expected)

    def idempotent_save(self, slot: Slot) -> None:
        """A save with a new `idempotency_key`, sometimes sent again at once; its first answer joins the ledger's
        replays (an HTTP client may replay it through the route, with the key as Idempotency-Key)."""
        key = f"soak-mcp-{uuid.uuid4()}"
        body = {"subject_id": slot[0], "kind": slot[1], "state": self.new_state()}
        saved = self.tool_save(slot, {**body, "idempotency_key": key}, "mcp idempotent save")
        if saved is None:
            return
        ack, data = saved
        # The route's replay of it answers the status and the ETag the route would have given the first request.
        first = FirstAnswer(key, body, ack.http_status, data, etag(ack.checkpoint_id, ack.revision), "", by_mcp=True)
        with self.ledger.lock:
            self.ledger.idempotent.append(first)
        if self.rng.random() < 0.3:
            self.replay(first)

    def replay(self, first: FirstAnswer) -> None:
        """Send an idempotent save again through the tool: the first answer's data comes back."""
        answered = self.call("baton_checkpoint_save", {**first.body, "idempotency_key": first.key})
        if answered is None:
            return
        data, code, text = answered
        self.ledger.count("replays")
        self.ledger.count("mcp_replays")
        if code is not None or data != first.data:
            self.ledger.problem(f"an MCP replay of {first.key} answered {text[:300]}, not {first.data}")

    def replay_earlier(self) -> None:
        """Replay any client's earlier idempotent request through the tool, or reuse its key for another state."""
        with self.ledger.lock:
            earlier = self.rng.choice(self.ledger.idempotent) if self.ledger.idempotent else None
        if earlier is None:
            return
        if self.rng.random() < 0.8:
            self.replay(earlier)
            return
        other = {**earlier.body, "state": {"another": "body"}, "idempotency_key": earlier.key}
        answered = self.call("baton_checkpoint_save", other)
        if answered is None:
            return
        _, code, text = answered
        if code != "IDEMPOTENCY_KEY_REUSED":
            self.ledger.problem(f"an MCP save reusing key {earlier.key} for another state answered {text[:300]}")
        self.ledger.count("keys_reused")

    def lookup(self, slot: Slot) -> None:
        """Read the slot through the tool; a client always reads its own last write or later."""
        data = self.read({"subject_id": slot[0], "kind": slot[1]}, "mcp lookup", slot)
        if data is None:
            return
        self.last_seen[slot] = (data["checkpoint_id"], data["revision"])
        mine = self.my_last_ack.get(slot)
        if mine is not None and mine[0] == data["checkpoint_id"] and data["revision"] < mine[1]:
            self.ledger.problem(f"MCP client {self.number} wrote {mine} but then read revision {data['revision']}")

    def get_by_id(self) -> None:
        """Read a checkpoint any client wrote, by its id, through the tool."""
        with self.ledger.lock:
            ack = self.rng.choice(self.ledger.acks) if self.ledger.acks else None
        if ack is None:
            return
        data = self.read({"checkpoint_id": ack.checkpoint_id}, "mcp get by id", ack.slot)
        if data is not None and data["checkpoint_id"] != ack.checkpoint_id:
            self.ledger.problem(f"an MCP get of {ack.checkpoint_id} answered {data['checkpoint_id']}")

    def list_subject(self, slot: Slot) -> None:
        """Page through a subject's checkpoints with the list tool and small pages, following next_cursor."""
        arguments: dict[str, Any] = {"subject_id": slot[0], "limit": self.rng.randint(1, 3)}
        for _ in range(5):
            answered = self.call("baton_checkpoint_list", arguments)
            if answered is None:
                return
            page, code, text = answered
            if code is not None:
                self.ledger.problem(f"an MCP list page answered {code}: {text[:300]}")
                return
            for summary in page["checkpoints"]:
                if summary["subject_id"] != slot[0] or summary["kind"] not in KINDS or "state" in summary:
                    self.ledger.problem(f"an MCP list of {slot[0]} showed {summary}")
                with self.ledger.lock:
                    self.ledger.seen.append(
                        Seen(summary["checkpoint_id"], summary["revision"], summary["state_hash"], "mcp list")
                    )
            if page["next_cursor"] is None:
                return
            arguments["cursor"] = page["next_cursor"]

    def delete(self, slot: Slot) -> None:
        """Delete what this client last saw or wrote in the slot through the tool, half the time only if it is still
        that revision (`expected_revision`, the route's If-Match)."""
        known = self.known(slot)
        if known is None:
            return
        checkpoint_id, revision = known
        conditional = self.rng.random() < 0.5
        arguments: dict[str, Any] = {"checkpoint_id": checkpoint_id}
        if conditional:
            arguments["expected_revision"] = revision
        answered = self.call("baton_checkpoint_delete", arguments)
        if answered is None:
            return
        data, code, text = answered
        if code is None:
            if data != {"checkpoint_id": checkpoint_id, "deleted": True}:
                self.ledger.problem(f"an MCP delete answered {text}")
            with self.ledger.lock:
                self.ledger.deleted.append((checkpoint_id, revision if conditional else None))
        elif code == "REVISION_CONFLICT" and conditional:
            self.check_conflict(data, "mcp conditional delete", revision, text)
        elif code != "NOT_FOUND":
            self.ledger.problem(f"an MCP delete answered {code}: {text[:300]}")

    def resume(self, slot: Slot) -> None:
        """Ask the resume tool what to pick up on the slot's subject (with its kind or without, sometimes within a
        small budget): the same checks as the route's answer, the budget counted on the tool's text (the data)."""
        arguments: dict[str, Any] = {"subject_id": slot[0]}
        if self.rng.random() < 0.6:
            arguments["kind"] = slot[1]
        if self.rng.random() < 0.3:
            arguments["budget_bytes"] = 1024
        answered = self.call("baton_resume", arguments)
        if answered is None:
            return
        data, code, text = answered
        if code is not None:
            self.ledger.problem(f"an MCP resume answered {code}: {text[:300]}")
            return
        self.judge_resume(data, arguments, slot, len(text.encode()), text)


# --- an agent connected through OAuth, as hosted platforms connect ---------------------------------------------

OAUTH_WORKERS = 1
OAUTH_SCOPES = ("mcp:call", "checkpoints:read", "checkpoints:write", "checkpoints:delete")
"""What the OAuth client asks for, and the approving key holds: the MCP client's tools (it deletes too)."""
GRANT_FIELDS = frozenset(
    {"grant_id", "client_id", "client_name", "tenant_id", "agent_id", "key_id", "scopes", "resource", "created_at",
     "expires_at"}
)  # fmt: skip
"""What a listed grant holds (docs/api.md): never a token."""
GRANT_PAGES = 20
"""Pages a grant listing follows at most (its agent has one live grant per OAuth client)."""


class OAuthMcpClient(McpClient):
    """The MCP client as a hosted platform connects it: registered (RFC 7591), approved on the consent form with
    `approving_key` (the operator's agent, holding `OAUTH_SCOPES`), its code exchanged with PKCE, and every tool call
    made with the grant's access token. Beside the MCP client's operations it refreshes its grant (the refresh token
    rotates; the new access token is used from then on) and revokes it (its refresh token is then refused, fresh from
    the table) to be approved again. With `manager_key` (the same agent, keys:manage) it lists the agent's grants and
    revokes its own through the API. Its acknowledged writes join the ledger as `oauth mcp ...`."""

    def __init__(
        self,
        baton: BatonServe,
        ledger: Ledger,
        slots: list[Slot],
        number: int,
        seed: int,
        approving_key: str,
        manager_key: str,
    ) -> None:
        super().__init__(baton, ledger, slots, 100 + number, seed)
        self.approving_key = approving_key
        self.manager = {"Authorization": f"Bearer {manager_key}"}
        self.grant_id: str | None = None
        """The live grant's id, once a listing showed it (a refresh keeps it; a new approval makes another)."""
        self.agent_id = ""
        """The agent of the approving and the managing key, whose grants alone a listing shows."""
        # OAuth's endpoints are public: their client sends no key, and counts its answers as every request here is.
        plain = httpx.Client(base_url=baton.url, timeout=30, event_hooks={"response": [self.counted]})
        self.flow = OAuthFlow(plain, scope=" ".join(OAUTH_SCOPES))
        self.refresh_token = ""

    def counted(self, response: httpx.Response) -> None:
        """Count an OAuth endpoint's answer; a 5xx is a failure of the run."""
        with self.ledger.lock:
            self.ledger.statuses[response.status_code] += 1
            if response.status_code >= 500:
                response.read()
                self.ledger.server_errors.append(
                    f"{response.request.method} {response.request.url.path} -> {response.status_code} "
                    f"{response.text[:500]}"
                )

    def operations(self) -> list[tuple[Callable[[Slot], None], int]]:
        return [
            *super().operations(),
            (self.refresh_grant, 4),
            (self.revoke_grant, 1),
            (lambda _: self.list_grants(), 3),
            (self.revoke_grant_through_the_api, 1),
        ]

    def run(self, pace: Pace) -> None:
        """Register and be approved, then the MCP client's run with the access token."""
        try:
            self.agent_id = httpx.get(f"{self.flow.origin}/v1/whoami", headers=self.manager).json()["data"]["agent_id"]
            self.flow.register(client_name=f"soak client {self.number}")
            self.ledger.count("oauth_registrations")
            self.authorize(first=True)
        except Exception:
            self.ledger.problem(f"OAuth client {self.number} could not connect:\n{traceback.format_exc()}")
            self.flow.http.close()
            return
        try:
            super().run(pace)
        finally:
            self.flow.http.close()

    def use(self, tokens: dict[str, Any]) -> None:
        """Act with a token answer from now on (its secrets are the log audit's to look for)."""
        if tokens.get("token_type") != "Bearer" or set(tokens.get("scope", "").split()) != set(OAUTH_SCOPES):
            self.ledger.problem(
                f"OAuth client {self.number} was given {tokens.get('token_type')} {tokens.get('scope')}"
            )
        self.http.headers["Authorization"] = f"Bearer {plant_secret(tokens['access_token'])}"
        self.refresh_token = plant_secret(tokens["refresh_token"])

    def authorize(self, first: bool = False) -> None:
        """The person's part (the consent page, then the form approved with the key) and the client's (the code
        exchanged with its verifier)."""
        if first:
            _, request = self.flow.authorization()
            page = self.flow.http.get("/oauth/authorize", params=request)
            if page.status_code != 200 or self.flow.client_id not in page.text or "location" in page.headers:
                self.ledger.problem(f"the consent page answered {page.status_code}: {page.text[:300]}")
        code, verifier = self.flow.code(self.approving_key)
        answer = self.flow.exchange(code, verifier)
        if answer.status_code != 200:
            self.ledger.problem(f"OAuth client {self.number}: the code's exchange answered {answer.text[:300]}")
            return
        self.use(answer.json())
        self.grant_id = None
        self.ledger.count("oauth_grants")

    def refresh_grant(self, _: Slot) -> None:
        """Refresh the grant: a new pair (the refresh token rotates), the new access token used from now on."""
        answer = self.flow.refresh(self.refresh_token)
        if answer.status_code != 200:
            self.ledger.problem(f"OAuth client {self.number}: a refresh answered {answer.status_code}: {answer.text}")
            return
        tokens = answer.json()
        if tokens["refresh_token"] == self.refresh_token:
            self.ledger.problem(f"OAuth client {self.number}: a refresh gave the same refresh token again")
        self.use(tokens)
        self.ledger.count("oauth_refreshes")

    def revoke_grant(self, _: Slot) -> None:
        """Revoke the grant (by its access or its refresh token): its refresh token is refused from then on, read
        fresh from the table; then approved again, a new grant."""
        current = str(self.http.headers["Authorization"]).removeprefix("Bearer ")
        token, hint = (current, "access_token") if self.rng.random() < 0.5 else (self.refresh_token, "refresh_token")
        revoked = self.flow.revoke(token, hint if self.rng.random() < 0.5 else None)
        if revoked.status_code != 200 or revoked.content:
            self.ledger.problem(f"OAuth client {self.number}: a revocation answered {revoked.status_code}")
        refused = self.flow.refresh(self.refresh_token)
        if refused.status_code != 400 or refused.json().get("error") != "invalid_grant":
            self.ledger.problem(f"a revoked grant's refresh token answered {refused.status_code}: {refused.text}")
        self.ledger.count("oauth_revocations")
        self.authorize()

    def list_grants(self) -> list[dict[str, Any]] | None:
        """Every page of the agent's grants with the keys:manage key (one grant a page: every cursor followed): only
        its agent's, each as a listed grant, no token; this client's live grant exactly once, under the id it had
        since its approval. The client's grants as listed, or None (a problem already counted)."""
        shown: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": self.rng.randint(1, 3)}
        tokens = (str(self.http.headers["Authorization"]).removeprefix("Bearer "), self.refresh_token)
        for _ in range(GRANT_PAGES):
            response = self.send("GET", "/v1/oauth/grants", params=params, headers=self.manager)
            if response is None or response.status_code >= 500:
                return None
            if response.status_code != 200:
                self.ledger.problem(f"a grant listing answered {response.status_code}: {response.text[:300]}")
                return None
            if any(token in response.text for token in tokens):
                self.ledger.problem(f"OAuth client {self.number}: a grant listing shows a token of its grant")
            body = response.json()
            shown += body["data"]
            if not body["meta"]["next_cursor"]:
                break
            params["cursor"] = body["meta"]["next_cursor"]
        else:
            self.ledger.problem(f"a grant listing went on past {GRANT_PAGES} pages")
        self.ledger.count("oauth_grant_lists")
        foreign = [g for g in shown if set(g) != GRANT_FIELDS or g["agent_id"] != self.agent_id]
        if foreign:
            self.ledger.problem(f"a grant listing of one agent shows {foreign[:2]}")
        mine = [g for g in shown if g["client_id"] == self.flow.client_id]
        if len(mine) != 1 or set(mine[0]["scopes"]) != set(OAUTH_SCOPES):
            self.ledger.problem(f"OAuth client {self.number}'s live grants listed: {mine}")
            return mine
        if self.grant_id is not None and mine[0]["grant_id"] != self.grant_id:
            self.ledger.problem(f"OAuth client {self.number}'s grant {self.grant_id} is listed as {mine[0]}")
        self.grant_id = mine[0]["grant_id"]
        return mine

    def revoke_grant_through_the_api(self, _: Slot) -> None:
        """Revoke the client's grant with the keys:manage key: `{grant_id, revoked: true}`, its refresh token refused
        from then on, the grant gone from the listing, a second revocation 404; then approved again."""
        mine = self.list_grants()
        if not mine:
            return
        grant_id = mine[0]["grant_id"]
        revoked = self.send("DELETE", f"/v1/oauth/grants/{grant_id}", headers=self.manager)
        if revoked is None or revoked.status_code >= 500:
            return
        if revoked.status_code != 200 or revoked.json()["data"] != {"grant_id": grant_id, "revoked": True}:
            self.ledger.problem(f"a grant's revocation answered {revoked.status_code}: {revoked.text[:300]}")
            return
        refused = self.flow.refresh(self.refresh_token)
        if refused.status_code != 400 or refused.json().get("error") != "invalid_grant":
            self.ledger.problem(f"a revoked grant's refresh token answered {refused.status_code}: {refused.text}")
        again = self.send("DELETE", f"/v1/oauth/grants/{grant_id}", headers=self.manager)
        if again is not None and again.status_code != 404:
            self.ledger.problem(f"a revoked grant revoked again answered {again.status_code}: {again.text[:300]}")
        listed = self.send("GET", "/v1/oauth/grants", params={"limit": 200}, headers=self.manager)
        if listed is not None and listed.status_code == 200 and grant_id in listed.text:
            self.ledger.problem(f"OAuth client {self.number}'s revoked grant {grant_id} is still listed")
        self.ledger.count("oauth_api_revocations")
        self.authorize()

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None, str] | None:
        answered = super().call(name, arguments)
        if answered is not None:
            self.ledger.count("oauth_tool_calls")
        return answered

    def tool_save(
        self, slot: Slot, arguments: dict[str, Any], how: str, expected: int | None = None
    ) -> tuple[Ack, dict[str, Any]] | None:
        return super().tool_save(slot, arguments, f"oauth {how}", expected)


# --- lease holders racing for work ------------------------------------------------------------------------------


def now_ms() -> float:
    """The wall clock in milliseconds: `baton serve` runs on this machine and stamps leases with the same clock."""
    return time.time() * 1000


CLOCK_MARGIN_MS = 20
"""Slack on comparisons between this process's clock and the server's stamps (the same clock, read apart)."""


@dataclass
class Grant:
    """A lease some worker was granted, as its answers showed it."""

    checkpoint_id: str
    holder: str
    token: str
    counter: int
    received_ms: float
    """When the grant's answer arrived: the lease was live from then on (until it expired or was released)."""
    expires_ms: int
    """The earliest expiry any answer gave it (a renewal sets the expiry from its own time: a later one, or with a
    shorter ttl an earlier one). The lease was live at least until then, unless released."""
    release_sent_ms: float | None = None
    """When its holder sent the release (None: never released, it lapsed or outlived the run)."""

    def surely_live(self, start_ms: float, end_ms: float) -> bool:
        """True when the lease was certainly live through [start_ms, end_ms]."""
        ended = self.expires_ms if self.release_sent_ms is None else min(self.expires_ms, self.release_sent_ms)
        return self.received_ms <= start_ms and end_ms + CLOCK_MARGIN_MS < ended


@dataclass(frozen=True)
class LeaseWrite:
    """A save a lease worker sent with a lease token, and what came of it."""

    checkpoint_id: str
    worker: str
    token: str
    counter: int
    stale: bool
    """Sent with a token its worker had released, or whose lease it had let lapse."""
    sent_ms: float
    received_ms: float
    status: int
    code: str | None
    revision: int | None


@dataclass
class LeaseLedger:
    """What the lease workers were granted and wrote; shared, so every change holds the lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    grants: list[Grant] = field(default_factory=list)
    writes: list[LeaseWrite] = field(default_factory=list)
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every state a lease worker sent, by its hash: who wrote it, with which token."""


@dataclass
class Held:
    """A lease a worker holds: its grant, and the checkpoint's revision as the worker last knew it."""

    grant: Grant
    expires_ms: int
    """The latest expiry an answer gave (a renewal moves it)."""
    revision: int | None = None


def token_counter(token: str) -> int:
    """The counter of a fencing token (`<counter>.<random>`)."""
    return int(token.partition(".")[0])


class LeaseWorker(Client):
    """A worker racing the others for the leases of a few shared checkpoints: it acquires one, reads it, saves with
    its token and the revision it knows, renews, releases; and now and then it keeps using a token after it released
    it or let its lease lapse, as a holder that paused too long does."""

    def __init__(
        self,
        baton: BatonServe,
        ledger: Ledger,
        leases: LeaseLedger,
        shared: list[tuple[Slot, str]],
        number: int,
        seed: int,
    ) -> None:
        super().__init__(baton, ledger, [slot for slot, _ in shared], 100 + number, seed)
        self.name = f"worker-{number}"
        self.leases = leases
        self.shared = shared
        self.held: dict[str, Held] = {}
        self.stale: list[tuple[Slot, str, str]] = []
        """(slot, checkpoint_id, token) of leases this worker released or let lapse."""
        self.seq = 0
        self.abandon_first = number == 0
        """Worker 0 lets its first lease lapse without a word: the others take over when it expires."""
        self.abandoned: dict[str, int] = {}
        """Checkpoints whose lease this worker walked away from, until it expires: asking again would renew it."""

    def run(self, pace: Pace) -> None:
        try:
            for number in itertools.count():
                if pace.over(number):
                    return
                slot, checkpoint_id = self.rng.choice(self.shared)
                held = self.held.get(checkpoint_id)
                if held is None:
                    if self.stale and (self.rng.random() < 0.3 or now_ms() < self.abandoned.get(checkpoint_id, 0)):
                        self.stale_write()
                    else:
                        self.acquire(slot, checkpoint_id)
                    continue
                roll = self.rng.random()
                if roll < 0.7:
                    self.write(slot, checkpoint_id, held)
                elif roll < 0.8:
                    self.acquire(slot, checkpoint_id, renewing=held)
                else:
                    self.release(slot, checkpoint_id, held)
        except Exception:
            self.ledger.problem(f"{self.name} crashed:\n{traceback.format_exc()}")
        finally:
            self.http.close()
            self.s3.close()

    def acquire(self, slot: Slot, checkpoint_id: str, renewing: Held | None = None) -> None:
        """Acquire the checkpoint's lease (or renew the one held), a third of the time with an Idempotency-Key that is
        sent again at once: the replay answers the same lease."""
        ttl_ms = self.rng.choice(LEASE_TTLS) * 1000
        body = {"ttl_seconds": ttl_ms // 1000, "holder": self.name}
        headers = {"Idempotency-Key": f"soak-lease-{uuid.uuid4()}"} if self.rng.random() < 0.3 else {}
        url = f"/v1/checkpoints/{checkpoint_id}/lease"
        sent = now_ms()
        response = self.send("POST", url, json=body, headers=headers)
        if response is None or response.status_code >= 500:
            return
        received = now_ms()
        if response.status_code == 409 and response.json()["error"]["code"] == "LEASE_HELD":
            self.ledger.count("lease_held")
            if renewing is not None and received + CLOCK_MARGIN_MS < renewing.expires_ms:
                self.ledger.problem(f"{self.name} was refused a renewal of its live lease: {response.text[:300]}")
            if "lease_expires_at" not in response.json()["error"].get("details", {}):
                self.ledger.problem(f"a LEASE_HELD without lease_expires_at: {response.text[:300]}")
            if renewing is not None:
                self.let_go(slot, checkpoint_id)
            return
        if response.status_code not in (200, 201):
            self.ledger.problem(f"an acquire answered {response.status_code}: {response.text[:300]}")
            return
        data = response.json()["data"]
        if data["holder"] != self.name or data["checkpoint_id"] != checkpoint_id:
            self.ledger.problem(f"{self.name} acquired {checkpoint_id} and was answered {data}")
        expires = parse_time_ms(data["expires_at"])
        # The expiry runs from the moment of the request (a renewal's too), never from the lease's start; a renewal
        # never shortens the lease, so one asking less than the lease has left keeps the lease's expiry.
        latest = received + ttl_ms
        if renewing is not None and data["lease_token"] == renewing.grant.token:
            latest = max(latest, renewing.expires_ms)
        if not sent + ttl_ms - CLOCK_MARGIN_MS <= expires <= latest + CLOCK_MARGIN_MS:
            self.ledger.problem(f"a lease of {ttl_ms} ms asked at {sent} expires at {data['expires_at']}")
        if response.status_code == 200:
            # A renewal: only of a lease this worker was granted (held, or one it stopped using while it was still
            # live, which it now takes up again), same token, a later expiry.
            self.ledger.count("lease_renewals")
            if renewing is None:
                renewing = self.take_up(checkpoint_id, data["lease_token"])
            if renewing is None or data["lease_token"] != renewing.grant.token:
                self.ledger.problem(f"{self.name} renewed {data}, holding {renewing}")
            else:
                renewing.expires_ms = expires
                with self.leases.lock:
                    renewing.grant.expires_ms = min(renewing.grant.expires_ms, expires)
        else:
            if renewing is not None:
                # Its lease had lapsed and it got a new one (a new token): the old one is stale.
                self.let_go(slot, checkpoint_id)
            grant = Grant(
                checkpoint_id, self.name, data["lease_token"], token_counter(data["lease_token"]), received, expires
            )
            with self.leases.lock:
                self.leases.grants.append(grant)
            self.ledger.count("leases_granted")
            self.held[checkpoint_id] = Held(grant, expires)
            if self.abandon_first:
                # Worker 0 walks away from its first lease: it lapses, another worker takes over, and worker 0
                # later writes with the lapsed token.
                self.abandon_first = False
                self.abandoned[checkpoint_id] = expires + CLOCK_MARGIN_MS
                self.let_go(slot, checkpoint_id)
        if headers:
            self.replay_acquire(url, body, headers, response)

    def replay_acquire(self, url: str, body: dict[str, Any], headers: dict[str, str], first: httpx.Response) -> None:
        replay = self.send("POST", url, json=body, headers=headers)
        if replay is None or replay.status_code >= 500:
            return
        self.ledger.count("lease_replays")
        got = (replay.status_code, replay.json().get("data"), replay.headers.get("Idempotent-Replayed"))
        if got != (first.status_code, first.json()["data"], "true"):
            self.ledger.problem(f"a lease replay answered {got}, first {first.status_code} {first.text[:300]}")

    def take_up(self, checkpoint_id: str, token: str) -> Held | None:
        """Hold again a lease this worker stopped using while it was still live (a renewal found it)."""
        with self.leases.lock:
            grant = next((g for g in self.leases.grants if g.token == token and g.holder == self.name), None)
        if grant is None or grant.release_sent_ms is not None:
            return None
        self.stale = [entry for entry in self.stale if entry[2] != token]
        held = Held(grant, grant.expires_ms)
        self.held[checkpoint_id] = held
        return held

    def let_go(self, slot: Slot, checkpoint_id: str) -> None:
        """Stop treating the lease as held, but keep its token: a paused holder that wakes up still has it."""
        held = self.held.pop(checkpoint_id, None)
        if held is not None:
            self.stale.append((slot, checkpoint_id, held.grant.token))

    def lease_state(self, token: str, checkpoint_id: str) -> dict[str, Any]:
        """A state that says who wrote it, with which token: read back from the revisions, it names its writer."""
        self.seq += 1
        state = {"worker": self.name, "token": token, "counter": token_counter(token), "seq": self.seq}
        if self.rng.random() < 0.2:
            state["note"] = self.rng.choice(TEXTS)
        with self.leases.lock:
            self.leases.written[hashlib.sha256(canonical(state)).hexdigest()] = {
                **state,
                "checkpoint_id": checkpoint_id,
            }
        return state

    def write(self, slot: Slot, checkpoint_id: str, held: Held) -> None:
        """Save as the holder: its token and the revision it knows (read once after acquiring)."""
        if held.revision is None:
            read = self.send("GET", f"/v1/checkpoints/{checkpoint_id}")
            if read is None or read.status_code != 200:
                self.ledger.problem(f"a leased checkpoint read answered {read and read.status_code}")
                return
            data = self.check_record(read, "leased read", slot)
            held.revision = data["revision"]
            lease = data.get("lease")
            if held.grant.surely_live(now_ms(), now_ms()) and (lease is None or lease["holder"] != self.name):
                self.ledger.problem(f"{self.name} holds the lease of {checkpoint_id}, yet a read shows {lease}")
        expected = held.revision
        write = self.save_with(slot, checkpoint_id, held.grant.token, expected, stale=False)
        if write is None:
            return
        if write.status == 200:
            held.revision = write.revision
        elif write.received_ms + CLOCK_MARGIN_MS < held.expires_ms:
            # The lease was certainly live from its grant through this whole write (a renewal only answers 200 while
            # it is live): nobody else can have written since this worker read the revision.
            self.ledger.problem(f"{self.name}, holding the live lease, was refused: {write}")
        else:
            self.let_go(slot, checkpoint_id)  # it lapsed (or someone took over): what it knows no longer holds

    def stale_write(self) -> None:
        """Write with a token this worker released or let lapse, sometimes expecting the revision it last knew."""
        slot, checkpoint_id, token = self.rng.choice(self.stale)
        expected = self.my_last_ack.get(slot, (checkpoint_id, None))[1] if self.rng.random() < 0.5 else None
        self.save_with(slot, checkpoint_id, token, expected, stale=True)

    def save_with(
        self, slot: Slot, checkpoint_id: str, token: str, expected: int | None, stale: bool
    ) -> LeaseWrite | None:
        """One save carrying `token` (and `expected_revision` when given); recorded, acknowledged in the ledger."""
        state = self.lease_state(token, checkpoint_id)
        body: dict[str, Any] = {"subject_id": slot[0], "kind": slot[1], "state": state, "lease_token": token}
        if expected is not None:
            body["expected_revision"] = expected
        sent = now_ms()
        response = self.send("POST", "/v1/checkpoints", json=body)
        if response is None or response.status_code >= 500:
            return None
        received = now_ms()
        code = response.json().get("error", {}).get("code") if response.status_code >= 400 else None
        revision = None
        if response.status_code in (200, 201):
            ack = self.check_saved(response, slot, state, "active", "stale-token save" if stale else "leased save")
            revision = ack.revision
            if ack.checkpoint_id != checkpoint_id or response.status_code != 200:
                self.ledger.problem(f"a leased save of {checkpoint_id} was acknowledged as {ack}")
        elif response.status_code == 409 and code in ("LEASE_HELD", "LEASE_LOST"):
            # LEASE_LOST: the token's lease was released or taken over; LEASE_HELD: a live lease of another token
            self.ledger.count("stale_refused" if stale else "holder_refused")
            if code == "LEASE_HELD" and "lease_expires_at" not in response.json()["error"].get("details", {}):
                self.ledger.problem(f"a LEASE_HELD without lease_expires_at: {response.text[:300]}")
        elif response.status_code == 409 and code == "REVISION_CONFLICT" and expected is not None:
            self.ledger.count("lease_conflicts")
        else:
            self.ledger.problem(f"a save with a lease token answered {response.status_code}: {response.text[:300]}")
        write = LeaseWrite(
            checkpoint_id,
            self.name,
            token,
            token_counter(token),
            stale,
            sent,
            received,
            response.status_code,
            code,
            revision,
        )
        with self.leases.lock:
            self.leases.writes.append(write)
        if stale and response.status_code == 200:
            self.ledger.count("stale_accepted")
        return write

    def release(self, slot: Slot, checkpoint_id: str, held: Held) -> None:
        """Release the lease with its token, then keep the token as a paused holder would."""
        held.grant.release_sent_ms = now_ms()
        response = self.send(
            "DELETE", f"/v1/checkpoints/{checkpoint_id}/lease", headers={"Lease-Token": held.grant.token}
        )
        self.let_go(slot, checkpoint_id)
        if response is None or response.status_code >= 500:
            return
        if response.status_code == 200:
            self.ledger.count("lease_releases")
            if response.json()["data"] != {"checkpoint_id": checkpoint_id, "released": True}:
                self.ledger.problem(f"a release answered {response.text[:300]}")
        elif response.status_code == 409 and response.json()["error"]["code"] in ("LEASE_HELD", "LEASE_LOST"):
            # Its lease lapsed and another holder has the checkpoint now (LEASE_LOST: taken over since).
            self.ledger.count("release_after_takeover")
            if now_ms() + CLOCK_MARGIN_MS < held.expires_ms:
                self.ledger.problem(f"{self.name} was refused the release of its live lease: {response.text[:300]}")
        else:
            self.ledger.problem(f"a release answered {response.status_code}: {response.text[:300]}")


# --- the test ---------------------------------------------------------------------------------------------------


# --- an agent running LangGraph graphs on threads -----------------------------------------------------------------

THREAD_WORKERS = 2
THREAD_CHANNELS = ("messages", "plan", "scratch", "files")
SPECIAL_WRITES = {"__error__": -1, "__interrupt__": -3}
"""Special channels a task may write: their write has a fixed index and overwrites (docs/api.md, Put writes)."""


@dataclass
class ThreadLedger:
    """What one thread client put into its threads: every acknowledged checkpoint as a read must show it."""

    tuples: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Thread id -> checkpoint id -> the tuple a read must show (its pending writes kept up to date)."""
    writes: dict[tuple[str, str], dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)
    """(thread, checkpoint) -> (task_id, idx) -> the pending write kept under it."""
    deleted: set[str] = field(default_factory=set)


class ThreadClient(Client):
    """A LangGraph-like agent: each of its threads is a chain of checkpoints (a put with its parent and only the
    channels whose version is new, some values small enough to ride in the checkpoint's item, some over 512 bytes,
    some of tens of KB), tasks' pending writes (special channels among them), reads of the latest, by id and list
    pages, and now and then a thread deleted and a new one begun. It is its threads' only writer, as a graph run
    is, so every read must show exactly what its ledger holds: what was put is read back exactly."""

    def __init__(self, baton: BatonServe, ledger: Ledger, run: str, number: int, seed: int) -> None:
        super().__init__(baton, ledger, [("threads", "langgraph")], number, seed)  # its threads are its own
        self.soak_run = run
        self.threads = ThreadLedger()
        self.live: list[str] = []
        self.values: dict[str, dict[str, tuple[str, dict[str, str]]]] = {}
        """Thread id -> channel -> (version, typed value) of its latest checkpoint."""
        self.made = 0
        for _ in range(2):
            self.begin()

    def begin(self) -> None:
        """A new thread (ids that need escaping now and then)."""
        self.made += 1
        name = f"soak-{self.soak_run}-t{self.number}-{self.made}" + ("/é #" if self.made % 3 == 0 else "")
        self.live.append(name)
        self.threads.tuples[name] = {}
        self.values[name] = {}

    def url(self, thread_id: str, tail: str = "") -> str:
        return f"/v1/threads/{quote(thread_id, safe='')}{tail}"

    def value(self) -> dict[str, str]:
        """A serialized value: small, over the 512 bytes that ride in the checkpoint's item, or tens of KB."""
        size = self.rng.choice((0, 12, 200, 513, 2_000, 40_000))
        raw = self.rng.randbytes(size) if self.rng.random() < 0.5 else (self.rng.choice(TEXTS).encode() * size)[:size]
        return {"type": self.rng.choice(("msgpack", "json", "bytes")), "data": base64.b64encode(raw).decode()}

    def put(self, _: Slot) -> None:
        """The next checkpoint of one of its threads: new versions for some channels, the others carried."""
        thread_id = self.rng.choice(self.live)
        known = self.threads.tuples[thread_id]
        parent = max(known) if known else None
        current = dict(self.values[thread_id])
        changed = [c for c in THREAD_CHANNELS if c not in current or self.rng.random() < 0.4] or ["messages"]
        for channel in changed:
            version = f"{len(known) + 1:032d}.0.{self.rng.random():.16f}"
            empty = self.rng.random() < 0.05
            current[channel] = (version, {"type": "empty", "data": ""} if empty else self.value())
        checkpoint_id = f"{len(known):08d}-{uuid.uuid4().hex[:8]}"
        checkpoint = {
            "v": 4,
            "id": checkpoint_id,
            "ts": f"2026-12-01T00:00:{len(known) % 60:02d}Z",
            "channel_versions": {channel: version for channel, (version, _) in current.items()},
            "versions_seen": {"__input__": {}},
        }
        metadata = {"source": "loop", "step": len(known), "run_id": f"run-{thread_id}", "writes": None}
        body = {
            "checkpoint": checkpoint,
            "metadata": metadata,
            "parent_checkpoint_id": parent,
            "values": {channel: current[channel][1] for channel in changed},
        }
        response = self.send("POST", self.url(thread_id, "/checkpoints"), json=body)
        if response is None or response.status_code >= 500:
            return
        expected = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
        if response.status_code != 201 or {k: response.json()["data"].get(k) for k in expected} != expected:
            self.ledger.problem(f"thread put of {checkpoint_id} answered {response.status_code}: {response.text[:300]}")
            return
        self.ledger.count("thread_puts")
        self.values[thread_id] = current
        known[checkpoint_id] = {
            **expected,
            "parent_checkpoint_id": parent,
            "checkpoint": checkpoint,
            "metadata": metadata,
            "channel_values": {c: typed for c, (_, typed) in current.items() if typed["type"] != "empty"},
            "pending_writes": [],
        }

    def put_writes(self, _: Slot) -> None:
        """A task's writes on the latest checkpoint (now and then on an older one, and a special channel)."""
        thread_id = self.rng.choice(self.live)
        known = self.threads.tuples[thread_id]
        if not known:
            return
        checkpoint_id = max(known) if self.rng.random() < 0.8 else self.rng.choice(list(known))
        task_id = f"task-{self.rng.randint(1, 4)}"
        task_path = self.rng.choice(("", "~__pregel_pull, agent"))
        writes = [{"channel": self.rng.choice(THREAD_CHANNELS), **self.value()} for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.2:
            writes.append({"channel": self.rng.choice(list(SPECIAL_WRITES)), **self.value()})
        body = {"checkpoint_id": checkpoint_id, "task_id": task_id, "task_path": task_path, "writes": writes}
        response = self.send("POST", self.url(thread_id, "/writes"), json=body)
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 200 or response.json()["data"].get("writes") != len(writes):
            self.ledger.problem(f"put_writes on {checkpoint_id} answered {response.status_code}: {response.text[:300]}")
            return
        self.ledger.count("thread_writes")
        kept = self.threads.writes.setdefault((thread_id, checkpoint_id), {})
        for position, write in enumerate(writes):
            index = SPECIAL_WRITES.get(write["channel"], position)
            if (task_id, index) not in kept or index < 0:
                kept[(task_id, index)] = {"task_id": task_id, "task_path": task_path, **write}
        ordered = sorted(kept.items(), key=lambda item: (item[1]["task_path"], item[0][0], item[0][1]))
        known[checkpoint_id]["pending_writes"] = [
            {"idx": key[1], **{k: w[k] for k in ("task_id", "channel", "task_path", "type", "data")}}
            for key, w in ordered
        ]

    def compare(self, shown: Any, thread_id: str, where: str) -> None:
        """A tuple a read showed must be the acknowledged one, exactly."""
        expected = self.threads.tuples[thread_id].get(shown.get("checkpoint_id"))
        if shown != expected:
            self.ledger.problem(f"{where} of {thread_id} showed {str(shown)[:400]}, put was {str(expected)[:400]}")
        self.ledger.count("thread_reads_checked")

    def get_latest(self, _: Slot) -> None:
        """get_tuple without an id: the last checkpoint put."""
        thread_id = self.rng.choice(self.live)
        known = self.threads.tuples[thread_id]
        response = self.send("GET", self.url(thread_id, "/checkpoint"))
        if response is None or response.status_code >= 500:
            return
        if not known:
            if response.status_code != 404:
                self.ledger.problem(f"a thread with no checkpoint answered {response.status_code}")
            return
        if response.status_code != 200 or response.json()["data"]["checkpoint_id"] != max(known):
            self.ledger.problem(f"the latest of {thread_id} is not {max(known)}: {response.text[:300]}")
            return
        self.compare(response.json()["data"], thread_id, "get_tuple")

    def get_by_id(self) -> None:
        """get_tuple of an older checkpoint."""
        thread_id = self.rng.choice(self.live)
        known = self.threads.tuples[thread_id]
        if not known:
            return
        checkpoint_id = self.rng.choice(list(known))
        response = self.send("GET", self.url(thread_id, "/checkpoint"), params={"checkpoint_id": checkpoint_id})
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 200:
            self.ledger.problem(f"get_tuple of {checkpoint_id} answered {response.status_code}: {response.text[:300]}")
            return
        self.compare(response.json()["data"], thread_id, "get_tuple by id")

    def list_thread(self, _: Slot) -> None:
        """list, newest first, in small pages (a cursor walk), now and then filtered on a metadata key."""
        thread_id = self.rng.choice(self.live)
        known = self.threads.tuples[thread_id]
        params: dict[str, Any] = {"limit": self.rng.randint(1, 4)}
        if self.rng.random() < 0.3:
            params["filter"] = json.dumps({"run_id": f"run-{thread_id}", "source": "loop"})
        shown: list[str] = []
        for _page in range(3):
            response = self.send("GET", self.url(thread_id, "/checkpoints"), params=params)
            if response is None or response.status_code >= 500:
                return
            if response.status_code != 200:
                if known or response.status_code != 404:
                    self.ledger.problem(f"list of {thread_id} answered {response.status_code}: {response.text[:300]}")
                return
            page = response.json()
            for item in page["data"]:
                self.compare(item, thread_id, "list")
                shown.append(item["checkpoint_id"])
            if not page["meta"]["next_cursor"]:
                if shown != sorted(known, reverse=True)[: len(shown)] or len(shown) != len(known):
                    self.ledger.problem(f"list of {thread_id} showed {shown}, put were {sorted(known)}")
                return
            params["cursor"] = page["meta"]["next_cursor"]
        if shown != sorted(known, reverse=True)[: len(shown)]:
            self.ledger.problem(f"list of {thread_id} showed {shown} first, put were {sorted(known)}")

    def delete_thread(self, _: Slot) -> None:
        """Now and then: delete a thread (it must read as gone at once) and begin another."""
        thread_id = self.rng.choice(self.live)
        if len(self.threads.tuples[thread_id]) < 3:
            return
        response = self.send("DELETE", self.url(thread_id))
        if response is None or response.status_code >= 500:
            return
        if response.status_code != 200:
            self.ledger.problem(f"delete of {thread_id} answered {response.status_code}: {response.text[:300]}")
            return
        self.ledger.count("thread_deletes")
        self.live.remove(thread_id)
        self.threads.deleted.add(thread_id)
        self.begin()
        after = self.send("GET", self.url(thread_id, "/checkpoint"))
        if after is not None and after.status_code != 404:
            self.ledger.problem(f"{thread_id} deleted, yet get_tuple answered {after.status_code}")

    def operations(self) -> list[tuple[Callable[[Slot], None], int]]:
        return [
            (self.put, 30),
            (self.put_writes, 25),
            (self.get_latest, 15),
            (lambda _: self.get_by_id(), 10),
            (self.list_thread, 12),
            (self.delete_thread, 2),
        ]

    def final_check(self, http: httpx.Client) -> list[str]:
        """After the run: each live thread lists exactly what was put into it (every page), and each deleted one
        reads as gone."""
        problems: list[str] = []
        for thread_id in self.live:
            expected = [self.threads.tuples[thread_id][c] for c in sorted(self.threads.tuples[thread_id], reverse=True)]
            shown: list[Any] = []
            params: dict[str, Any] = {"limit": 50}
            while True:
                response = http.get(self.url(thread_id, "/checkpoints"), params=params)
                if response.status_code == 404 and not expected:
                    break
                if response.status_code != 200:
                    problems.append(f"the final list of {thread_id} answered {response.status_code}")
                    break
                shown += response.json()["data"]
                cursor = response.json()["meta"]["next_cursor"]
                if not cursor:
                    break
                params["cursor"] = cursor
            if shown != expected:
                problems.append(f"{thread_id} lists {len(shown)} tuples at the end, not the {len(expected)} put")
        for thread_id in self.threads.deleted:
            gone = http.get(self.url(thread_id, "/checkpoints"))
            if gone.status_code != 404:
                problems.append(f"{thread_id} was deleted, yet its list answered {gone.status_code}")
        return problems


# --- tenants' rate limits ------------------------------------------------------------------------------------------

LIMITED_TENANT = "soak-limited"
"""The rate-limited client's tenant: its own, limited low, so that a short run meets its limit."""
LIMITED_RPM = 120
LIMITED_BURST = 10
LIMITED_WORKERS = 1
LIMITED_CONCURRENT = 6
"""Calls the rate-limited client now and then makes at once."""
LIMITED_ATTEMPTS = 8
"""The SDK's attempts per call: a 429 asks for a second at most here (a token every half second), so a call meets a
few at most, however many containers hold a share."""
LIMITED_POLICY = f'"tenant";q={LIMITED_RPM};w=60'
"""The `RateLimit-Policy` of the limited tenant's refusals."""
RATE_LIMIT_FIELD = re.compile(r'^"tenant";r=(\d+);t=(\d+)$')
"""The `RateLimit` field: the requests left and the seconds until the bucket is full."""
MAX_RETRY_AFTER = 2
"""Seconds a 429 of the limited tenant may ask for: one token's wait (half a second), rounded up, and the second a
container's remembered refusal may add for clocks' skew."""
LIMITS_TENANT = "soak-limits"
"""The tenant whose limits the operator sets and reads during the run: no client makes requests as it."""
LIMITS_WORKERS = 1
LIMITS_PAUSE = (0.3, 1.2)
"""Seconds the operator waits between two of its requests: it sets and reads a few times a run, no more."""
SETTING_NAMES = ("requests_per_minute", "burst", "storage_bytes", "checkpoints")
SETTING_RANGES = {
    "requests_per_minute": (1, 6_000),
    "burst": (1, 500),
    "storage_bytes": (0, 10**12),
    "checkpoints": (0, 10**6),
}


class WatchedTransport(httpx.BaseTransport):
    """The SDK's transport, watched: every answer the rate-limited client gets, the SDK's own retries among them (it
    makes them without a word), is counted with the run's statuses; a 5xx is a failure of the run; a 429 must say
    how long to wait and why (`Retry-After`, `RateLimit-Policy`, `RateLimit` with nothing left), and a success what
    is left (a `RateLimit` within the tenant's burst)."""

    def __init__(self, ledger: Ledger, name: str) -> None:
        self.inner = httpx.HTTPTransport()
        self.ledger = ledger
        self.name = name

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        status = response.status_code
        where = f"{self.name}: {request.method} {request.url.path} -> {status}"
        with self.ledger.lock:
            self.ledger.statuses[status] += 1
            self.ledger.outcomes["rate_limited_answers"] += 1
            if status != 429:  # admitted: counted in the tenant's usage (GET /v1/usage)
                self.ledger.outcomes["rate_limited_admitted"] += 1
            if status >= 500:
                self.ledger.server_errors.append(where)
        shown = {name: response.headers.get(name) for name in ("Retry-After", "RateLimit-Policy", "RateLimit")}
        left = RATE_LIMIT_FIELD.match(shown["RateLimit"] or "")
        if status == 429:
            self.ledger.count("rate_limited_429s")
            wait = shown["Retry-After"] or ""
            if not (
                wait.isdigit()
                and 1 <= int(wait) <= MAX_RETRY_AFTER
                and shown["RateLimit-Policy"] == LIMITED_POLICY
                and left is not None
                and left[1] == "0"
            ):
                self.ledger.problem(f"{where} came with {shown}")
        elif status < 300 and (left is None or int(left[1]) > LIMITED_BURST):
            self.ledger.problem(
                f"{where} came with RateLimit {shown['RateLimit']!r}, not within a burst of {LIMITED_BURST}"
            )
        return response

    def close(self) -> None:
        self.inner.close()


class RateLimitedClient:
    """An agent of the limited tenant, working through the SDK as fast as it is served (the module's docstring): it
    saves its own checkpoint (the SDK gives each save an Idempotency-Key, kept by its retries), looks it up and asks
    whoami. Every call must end served, whatever number of 429s the SDK waited out on the way; it is its checkpoint's
    only writer, so each save's revision is one past the last and a lookup shows the last save exactly."""

    def __init__(self, baton: BatonServe, ledger: Ledger, secret: str, run: str, number: int, seed: int) -> None:
        self.number = 300 + number
        self.name = f"rate-limited client {self.number}"
        self.ledger = ledger
        self.sdk = Baton(
            baton.url,
            secret,
            retry=RetryPolicy(max_attempts=LIMITED_ATTEMPTS, max_retry_after=MAX_RETRY_AFTER),
            transport=WatchedTransport(ledger, self.name),
        )
        self.subject = f"soak-{run}-limited-{number}"
        self.rng = random.Random(seed * 1_000 + self.number)
        self.saved: tuple[str, int, str] | None = None
        """(checkpoint id, revision, state hash) of its last save."""

    def run(self, pace: Pace) -> None:
        """A save first, then saves, lookups and whoami at random until the pace says the run is over."""
        operations = [(self.save, 3), (self.lookup, 2), (self.whoami, 1), (self.burst, 1)]
        functions = [f for f, _ in operations]
        weights = [w for _, w in operations]
        try:
            for number in itertools.count():
                if pace.over(number):
                    return
                function = functions[number] if number < len(functions) else self.rng.choices(functions, weights)[0]
                try:
                    function()
                except BatonError as exc:
                    self.ledger.problem(f"{self.name}: a {function.__name__} was not served: {exc!r}")
                    continue
                self.ledger.count("rate_limited_calls_served")
        except Exception:
            self.ledger.problem(f"{self.name} crashed:\n{traceback.format_exc()}")

    def save(self) -> None:
        revision = self.saved[1] + 1 if self.saved is not None else 1
        state = {"client": self.number, "n": revision, "text": self.rng.choice(TEXTS)}
        saved = self.sdk.save(self.subject, "task_state", state)
        if saved.revision != revision or saved.state_hash != hashlib.sha256(canonical(state)).hexdigest():
            self.ledger.problem(f"{self.name}: save {revision} was answered as revision {saved.revision}: {saved}")
        self.saved = (saved.checkpoint_id, saved.revision, saved.state_hash)

    def lookup(self) -> None:
        if self.saved is None:
            self.save()
            return
        record = self.sdk.lookup(self.subject, "task_state")
        shown = (record.checkpoint_id, record.revision, record.state_hash)
        if shown != self.saved:
            self.ledger.problem(f"{self.name}: its lookup shows {shown}, its last save was {self.saved}")

    def whoami(self) -> None:
        identity = self.sdk.whoami()
        if identity.tenant_id != LIMITED_TENANT:
            self.ledger.problem(f"{self.name}: whoami names tenant {identity.tenant_id}")

    def burst(self) -> None:
        """`LIMITED_CONCURRENT` whoami calls at once (the SDK is shared between threads): more than the tenant's
        rate however slow the server, each waiting out its own 429s, and each must end served."""
        with ThreadPoolExecutor(max_workers=LIMITED_CONCURRENT) as pool:
            called = [pool.submit(self.sdk.whoami) for _ in range(LIMITED_CONCURRENT)]
        for call in called:
            if call.result().tenant_id != LIMITED_TENANT:  # a call not served raises its BatonError here
                self.ledger.problem(f"{self.name}: whoami names tenant {call.result().tenant_id}")
        with self.ledger.lock:  # the run's loop counts one call served: this was as many as were sent
            self.ledger.outcomes["rate_limited_calls_served"] += LIMITED_CONCURRENT - 1

    def final_check(self) -> list[str]:
        """After the run: its checkpoint reads back as its last save (waiting out 429s as any call does)."""
        try:
            if self.saved is None:
                return [f"{self.name} saved nothing"]
            record = self.sdk.lookup(self.subject, "task_state")
            shown = (record.checkpoint_id, record.revision, record.state_hash)
            return [] if shown == self.saved else [f"{self.name}: reads back {shown}, its last save was {self.saved}"]
        except BatonError as exc:
            return [f"{self.name}: the final lookup was not served: {exc!r}"]
        finally:
            self.sdk.close()


class LimitsOperator:
    """The operator setting and reading `LIMITS_TENANT`'s limits now and then during the run, with the development
    key (tenants:manage). It is that tenant's only writer and a read is consistent, so each read answers all it last
    set (`current`), each setting or null, and `effective` is each setting over the stage's defaults (those its
    first read shows: nothing was set yet). Now and then it sends an invalid setting, refused (400) with nothing
    changed."""

    def __init__(self, baton: BatonServe, ledger: Ledger, number: int, seed: int) -> None:
        self.number = 400 + number
        self.name = f"limits operator {self.number}"
        self.http = httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}, timeout=30)
        self.ledger = ledger
        self.rng = random.Random(seed * 1_000 + self.number)
        self.path = f"/v1/tenants/{LIMITS_TENANT}/limits"
        self.current: dict[str, int | None] = dict.fromkeys(SETTING_NAMES)
        self.defaults: dict[str, int] | None = None
        self.usage_seen = 0
        """The most requests a read of the limited tenant's usage counted so far."""
        self.in_flight = int(os.environ.get("BATON_SOAK_LIMITED_WORKERS") or LIMITED_WORKERS)
        """The limited tenant's requests that may be counted and not yet answered: one per client."""

    def send(self, method: str, **kwargs: Any) -> httpx.Response | None:
        try:
            response = self.http.request(method, self.path, **kwargs)
        except httpx.HTTPError as exc:
            self.ledger.problem(f"{self.name}: {method} {self.path} failed in transport: {exc!r}")
            return None
        with self.ledger.lock:
            self.ledger.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.ledger.server_errors.append(
                    f"{method} {self.path} -> {response.status_code} {response.text[:500]}"
                )
        return None if response.status_code >= 500 else response

    def run(self, pace: Pace) -> None:
        """A read first (the defaults), then sets and reads at random, a pause between two."""
        try:
            for number in itertools.count():
                if pace.over(number):
                    return
                if number == 0 or self.rng.random() < 0.4:
                    self.read()
                elif self.rng.random() < 0.3:
                    self.read_usage()
                elif self.rng.random() < 0.2:
                    self.set_invalid()
                else:
                    self.set()
                time.sleep(self.rng.uniform(*LIMITS_PAUSE))
        except Exception:
            self.ledger.problem(f"{self.name} crashed:\n{traceback.format_exc()}")
        finally:
            self.http.close()

    def check(self, response: httpx.Response, what: str) -> None:
        """An answer of the limits routes: the tenant, `current` whole, and what applies."""
        data = response.json().get("data") or {}
        settings = {name: data.get(name) for name in SETTING_NAMES}
        if self.defaults is None and data.get("tenant_id") == LIMITS_TENANT and settings == self.current:
            self.defaults = dict(data["effective"])
        assert self.defaults is not None
        effective = {n: self.defaults[n] if settings[n] is None else settings[n] for n in SETTING_NAMES}
        expected = {"tenant_id": LIMITS_TENANT, **self.current, "effective": effective}
        if response.status_code != 200 or data != expected or settings != self.current:
            self.ledger.problem(
                f"{self.name}: {what} answered {response.status_code} {response.text[:300]}, not {expected}"
            )

    def read(self) -> None:
        response = self.send("GET")
        if response is None:
            return
        if response.status_code != 200:
            self.ledger.problem(f"{self.name}: a read answered {response.status_code}: {response.text[:300]}")
            return
        self.check(response, "a read")
        self.ledger.count("limits_read")

    def read_usage(self) -> None:
        """The limited tenant's usage: the requests counted never go down, and never pass what its client was
        admitted (`baton serve` writes each request's counts before answering it; one may be in flight)."""
        with self.ledger.lock:
            admitted_before = self.ledger.outcomes["rate_limited_admitted"]
        response = self.http.get("/v1/usage", params={"tenant_id": LIMITED_TENANT})
        with self.ledger.lock:
            self.ledger.statuses[response.status_code] += 1
            admitted_after = self.ledger.outcomes["rate_limited_admitted"]
        if response.status_code != 200:
            self.ledger.problem(f"{self.name}: a usage read answered {response.status_code}: {response.text[:300]}")
            return
        counted = usage_requests(response.json()["data"])
        if counted < self.usage_seen or counted > admitted_after + self.in_flight:
            self.ledger.problem(
                f"{self.name}: the limited tenant's usage counts {counted} requests, after {self.usage_seen}, with "
                f"{admitted_before}..{admitted_after} admitted"
            )
        self.usage_seen = max(self.usage_seen, counted)
        self.ledger.count("usage_read")

    def set(self) -> None:
        wanted = {
            name: None if self.rng.random() < 0.3 else self.rng.randint(*SETTING_RANGES[name]) for name in SETTING_NAMES
        }
        response = self.send("PUT", json=wanted)
        if response is None:
            return
        self.current = wanted
        self.check(response, f"a set of {wanted}")
        self.ledger.count("limits_set")

    def set_invalid(self) -> None:
        response = self.send("PUT", json={**self.current, "burst": 0})
        if response is None:
            return
        if response.status_code != 400 or response.json().get("error", {}).get("code") != "VALIDATION_ERROR":
            self.ledger.problem(f"{self.name}: a burst of 0 answered {response.status_code}: {response.text[:300]}")
        self.ledger.count("limits_refused")


def usage_requests(data: dict[str, Any]) -> int:
    """The requests a usage answer counts over its days (the run may cross midnight, UTC)."""
    return sum(sum(day["requests"].values()) for day in data["days"])


def usage_check(http: httpx.Client, ledger: Ledger) -> list[str]:
    """After the run: the limited tenant's usage counts exactly the requests its clients were admitted."""
    response = http.get("/v1/usage", params={"tenant_id": LIMITED_TENANT})
    if response.status_code != 200:
        return [f"the limited tenant's usage answered {response.status_code}: {response.text[:300]}"]
    counted, admitted = usage_requests(response.json()["data"]), ledger.outcomes["rate_limited_admitted"]
    ledger.count("usage_checked")
    return [] if counted == admitted else [f"the limited tenant's usage counts {counted} requests, {admitted} admitted"]


def audit_check(http: httpx.Client, ledger: Ledger) -> list[str]:
    """After the run: the operator's tenant's audit trail is a whole chain (`baton audit verify`'s check), holding an
    approval for every OAuth grant the run made, and a revocation for every one it revoked."""
    from baton_checkpoints.client.audit import problems_of

    events: list[dict[str, Any]] = []
    head: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        answer = http.get("/v1/audit", params={"limit": 100, **({"cursor": cursor} if cursor else {})})
        if answer.status_code != 200:
            return [f"the audit trail answered {answer.status_code}: {answer.text[:300]}"]
        head = head or answer.json()["meta"]["head"]
        events += answer.json()["data"]
        cursor = answer.json()["meta"]["next_cursor"]
        if cursor is None:
            break
    problems = [f"the operator's audit trail: {p}" for p in problems_of(events, head)]
    actions = Counter(e["action"] for e in events)
    ledger.outcomes["audit_events"] = len(events)
    revoked = ledger.outcomes["oauth_revocations"] + ledger.outcomes["oauth_api_revocations"]
    if actions["grant.approved"] < ledger.outcomes["oauth_grants"] or actions["grant.revoked"] < revoked:
        problems.append(f"the audit trail holds {dict(actions)} for {ledger.outcomes['oauth_grants']} grants made")
    return problems


def limited_tenant_key(http: httpx.Client, run: str) -> str:
    """A key of `LIMITED_TENANT` (made with the development key, whose tenants:manage lets it make keys of another
    tenant), once the tenant's limits are set low."""
    limits = {"requests_per_minute": LIMITED_RPM, "burst": LIMITED_BURST}
    set_limits = http.put(f"/v1/tenants/{LIMITED_TENANT}/limits", json=limits)
    assert set_limits.status_code == 200, set_limits.text
    assert {k: set_limits.json()["data"]["effective"][k] for k in limits} == limits, set_limits.text
    body = {"tenant_id": LIMITED_TENANT, "agent_id": "soak-limited", "scopes": ["*"], "description": f"soak {run}"}
    created = http.post("/v1/keys", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["data"]["tenant_id"] == LIMITED_TENANT, created.text
    return plant_secret(str(created.json()["data"]["secret"]))


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


def lease_checks(
    http: httpx.Client, ledger: Ledger, leases: LeaseLedger, shared: list[tuple[Slot, str]]
) -> tuple[list[str], list[str]]:
    """The claims about the leased checkpoints, once the workers stopped: (broken claims, fencing gaps).

    Broken: two leases of a checkpoint certainly live at once; a write accepted while another token's lease was
    certainly live; a write refused as a revision conflict while another's lease was live (LEASE_HELD ranks first);
    a kept revision or the current state that no lease worker wrote. The revisions, read back from the server
    (`keep_revisions` 100), name the token each write carried: over the revisions, the token counter never goes
    down, or a holder whose lease was taken over got a write in.

    Known gaps of the product, returned apart (each pinned by a test below): a write whose counter goes down, made
    while no lease was live (the newer one released or lapsed); a lease counter granted again (a save while no
    lease is live drops the counter, and the next lease starts from 1)."""
    problems: list[str] = []
    gaps: list[str] = []
    grants: dict[str, list[Grant]] = defaultdict(list)
    for grant in leases.grants:
        grants[grant.checkpoint_id].append(grant)
    for checkpoint_id, granted in grants.items():
        counters = Counter(g.counter for g in granted)
        for counter, times in counters.items():
            if times > 1:
                twice = [g for g in granted if g.counter == counter]
                gaps.append(f"{checkpoint_id}: lease counter {counter} granted {times} times: {twice}")
        for first in granted:
            for second in granted:
                if first is not second and first.surely_live(second.received_ms, second.received_ms):
                    problems.append(f"{checkpoint_id}: {second} was granted while {first} was live")
    for write in leases.writes:
        others = [g for g in grants[write.checkpoint_id] if g.token != write.token]
        live = [g for g in others if g.surely_live(write.sent_ms, write.received_ms)]
        if live and write.status == 200:
            problems.append(f"a write was accepted while {live[0].holder}'s lease {live[0].counter} was live: {write}")
        if live and write.code == "REVISION_CONFLICT":
            problems.append(
                f"a write without the live lease's token answered REVISION_CONFLICT, not LEASE_HELD: {write}"
            )

    accepted = {(w.checkpoint_id, w.revision): w for w in leases.writes if w.status == 200}
    for _, checkpoint_id in shared:
        current = http.get(f"/v1/checkpoints/{checkpoint_id}")
        if current.status_code != 200:
            problems.append(f"leased {checkpoint_id} answered {current.status_code}")
            continue
        data = current.json()["data"]
        revisions: dict[int, str] = {data["revision"]: data["state_hash"]}
        params: dict[str, Any] = {"limit": 200}
        while True:
            page = http.get(f"/v1/checkpoints/{checkpoint_id}/revisions", params=params).json()
            revisions.update({r["revision"]: r["state_hash"] for r in page["data"]})
            if page["meta"]["next_cursor"] is None:
                break
            params["cursor"] = page["meta"]["next_cursor"]
        low = max(1, data["revision"] - LEASE_KEEP)
        if sorted(revisions) != list(range(low, data["revision"] + 1)):
            problems.append(f"{checkpoint_id} at {data['revision']} keeps revisions {sorted(revisions)}")
        with ledger.lock:
            ledger.seen.extend(Seen(checkpoint_id, n, h, "leased revisions") for n, h in revisions.items())
        written = leases.written.get(data["state_hash"])
        if written is None or {k: data["state"].get(k) for k in ("worker", "token", "seq")} != {
            k: written[k] for k in ("worker", "token", "seq")
        }:
            problems.append(f"{checkpoint_id}: the current state {data['state']} is not the write it hashes to")
        newest = (0, 0)  # (counter, revision) of the newest token seen so far, in revision order
        for number in sorted(revisions):
            state = leases.written.get(revisions[number])
            if state is None or state["checkpoint_id"] != checkpoint_id:
                problems.append(f"{checkpoint_id} revision {number} holds a state no lease worker wrote there")
                continue
            if state["counter"] < newest[0]:
                late = accepted.get((checkpoint_id, number))
                what = (
                    f"{checkpoint_id} revision {number} was written by {state['worker']} with lease "
                    f"{state['counter']}, after lease {newest[0]} wrote revision {newest[1]}: {late}"
                )
                live = [
                    g
                    for g in grants[checkpoint_id]
                    if late is not None and g.token != late.token and g.surely_live(late.sent_ms, late.received_ms)
                ]
                (problems if live or late is None else gaps).append(what)
            newest = max(newest, (state["counter"], number))
    return problems, gaps


def shortfalls(
    ledger: Ledger,
    leases: LeaseLedger,
    mcp_workers: int,
    lease_workers: int,
    thread_workers: int,
    oauth_workers: int = 0,
    limited_workers: int = 0,
    limits_workers: int = 0,
) -> list[str]:
    """What the clients have not yet shown: a run proves something only if they really collided, replayed, raced
    for leases and worked through MCP, OAuth and threads. Empty once the run has shown all of it."""
    with ledger.lock, leases.lock:
        outcomes = ledger.outcomes
        wanted = {
            "20 acknowledged writes": len(ledger.acks) >= 20,
            "a conflict": outcomes["conflicts"] > 0,
            "a replay": outcomes["replays"] > 0,
            "a blob declared": bool(ledger.blobs),
            "a blob read": outcomes["blob_reads"] > 0,
            "a whoami": outcomes["whoami"] > 0,
            "a console file": outcomes["console_files"] > 0,
            "the API's address": outcomes["console_redirects"] > 0,
        }
        if mcp_workers:
            wanted["an MCP tool call"] = outcomes["mcp_tool_calls"] > 0
            wanted["a write through MCP"] = any(a.how.startswith("mcp ") for a in ledger.acks)
        if lease_workers:
            wanted["leases granted to two holders"] = len({g.holder for g in leases.grants}) >= 2
            wanted["a holder's write accepted"] = any(w.status == 200 and not w.stale for w in leases.writes)
        if oauth_workers:
            wanted["an OAuth grant"] = outcomes["oauth_grants"] > 0
            wanted["a tool call with an access token"] = outcomes["oauth_tool_calls"] > 0
            wanted["a write with an access token"] = any(a.how.startswith("oauth ") for a in ledger.acks)
            wanted["an OAuth grant refreshed"] = outcomes["oauth_refreshes"] > 0
            wanted["an OAuth grant revoked"] = outcomes["oauth_revocations"] > 0
            wanted["an agent's OAuth grants listed"] = outcomes["oauth_grant_lists"] > 0
            wanted["an OAuth grant revoked through the API"] = outcomes["oauth_api_revocations"] > 0
        if thread_workers:
            wanted["a thread put"] = outcomes["thread_puts"] > 0
            wanted["a thread put_writes"] = outcomes["thread_writes"] > 0
            wanted["a thread tuple read back"] = outcomes["thread_reads_checked"] > 0
        if limited_workers:
            wanted["a 429 waited out"] = outcomes["rate_limited_429s"] > 0
            wanted["calls of the limited tenant served"] = outcomes["rate_limited_calls_served"] > LIMITED_BURST
        if limits_workers:
            wanted["a tenant's limits set"] = outcomes["limits_set"] > 0
            wanted["a tenant's limits read back"] = outcomes["limits_read"] > 1
            if limited_workers:
                wanted["a tenant's usage read"] = outcomes["usage_read"] > 0
    return [name for name, shown in wanted.items() if not shown]


@pytest.fixture(scope="module")
def soaked(moto_endpoint: str) -> Iterator[BatonServe]:
    """A `baton serve` of the soak's own, on a fresh table and bucket: what it measures (moto's lock held by each
    call, a transaction copying its table) does not depend on how much the session's other tests stored before it.
    Its log lines get the session server's audit when it stops."""
    name = f"baton-e2e-soak-{uuid.uuid4().hex[:8]}"
    server = BatonServe("--aws-endpoint", moto_endpoint, "--table", name, "--bucket", name, "--no-reaper")
    yield server
    stop_audited(server, "log audit (soak server)")


def test_concurrent_clients_lose_no_acknowledged_write(soaked: BatonServe) -> None:
    with httpx.Client(base_url=soaked.url, headers={"Authorization": f"Bearer {soaked.key}"}, timeout=30) as http:
        soak(soaked, http)


def soak(baton: BatonServe, http: httpx.Client) -> None:
    """The soak proper (the module's docstring): clients, then the ledger's claims."""
    seconds, threads, seed = soak_settings()
    lease_workers = int(os.environ.get("BATON_SOAK_LEASE_WORKERS") or LEASE_WORKERS)
    mcp_workers = int(os.environ.get("BATON_SOAK_MCP_WORKERS") or MCP_WORKERS)
    thread_workers = int(os.environ.get("BATON_SOAK_THREAD_WORKERS") or THREAD_WORKERS)
    oauth_workers = int(os.environ.get("BATON_SOAK_OAUTH_WORKERS") or OAUTH_WORKERS)
    limited_workers = int(os.environ.get("BATON_SOAK_LIMITED_WORKERS") or LIMITED_WORKERS)
    limits_workers = int(os.environ.get("BATON_SOAK_LIMITS_WORKERS") or LIMITS_WORKERS)
    run = uuid.uuid4().hex[:12]
    # A few subjects, one with characters that need escaping in keys and paths, so that clients collide.
    subjects = [f"soak-{run}-a", f"soak-{run}-b/c#d", f"soak-{run}-é 日本"]
    slots = [(subject, kind) for subject in subjects for kind in KINDS]
    ledger = Ledger()
    leases = LeaseLedger()
    shared = leased_checkpoints(http, ledger, leases, run)
    deadline = time.monotonic() + seconds
    pace = Pace(
        deadline=deadline,
        ceiling=deadline + OVERTIME_SECONDS,
        max_operations=int(seconds * OPERATIONS_PER_SECOND_PER_THREAD),
        shortfalls=lambda: shortfalls(
            ledger, leases, mcp_workers, lease_workers, thread_workers, oauth_workers, limited_workers, limits_workers
        ),
    )
    keys = own_keys(http, threads, run)
    clients = [Client(baton, ledger, slots, number, seed, keys[number]) for number in range(threads)]
    clients += [LeaseWorker(baton, ledger, leases, shared, number, seed) for number in range(lease_workers)]
    clients += [McpClient(baton, ledger, slots, number, seed) for number in range(mcp_workers)]
    approving = approving_key(http, run) if oauth_workers else ""
    manager = grants_manager_key(http, run) if oauth_workers else ""
    clients += [
        OAuthMcpClient(baton, ledger, slots, number, seed, approving, manager) for number in range(oauth_workers)
    ]
    thread_clients = [ThreadClient(baton, ledger, run, number, seed) for number in range(thread_workers)]
    clients += thread_clients
    limited = limited_tenant_key(http, run) if limited_workers else ""
    limited_clients = [
        RateLimitedClient(baton, ledger, limited, run, number, seed) for number in range(limited_workers)
    ]
    participants: list[Client | RateLimitedClient | LimitsOperator] = [*clients, *limited_clients]
    participants += [LimitsOperator(baton, ledger, number, seed) for number in range(limits_workers)]
    workers = [
        threading.Thread(target=client.run, args=(pace,), name=f"soak-{client.number}") for client in participants
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=max(0.0, pace.ceiling - time.monotonic()) + 120)
    elapsed = time.monotonic() - started
    stuck = [w.name for w in workers if w.is_alive()]

    if lease_workers:
        takeover_probe(http, ledger)
    if mcp_workers:
        mcp_replay_probe(http, ledger)
    lease_problems, fencing_gaps = lease_checks(http, ledger, leases, shared)
    problems = [*ledger.problems, *lease_problems, *final_checks(http, ledger, [*slots, *(s for s, _ in shared)])]
    for thread_client in thread_clients:
        problems += thread_client.final_check(http)
    for limited_client in limited_clients:
        problems += limited_client.final_check()
    if limited_clients:
        problems += usage_check(http, ledger)
    problems += audit_check(http, ledger)
    requests = sum(ledger.statuses.values())
    checkpoints = len({a.checkpoint_id for a in ledger.acks})
    mcp_acks = sum(1 for a in ledger.acks if a.how.startswith("mcp "))
    oauth_acks = sum(1 for a in ledger.acks if a.how.startswith("oauth "))
    proof_counts.record(
        "soak",
        requests=requests,
        writes_acknowledged=len(ledger.acks),
        conflicts=ledger.outcomes["conflicts"],
        replays=ledger.outcomes["replays"],
        checkpoints=checkpoints,
        usage_reads=ledger.outcomes["usage_read"] + ledger.outcomes["usage_checked"],
        audit_events=ledger.outcomes["audit_events"],
        deletes_acknowledged=len(ledger.deleted),
        reads_checked=len(ledger.seen),
        blobs_declared=len(ledger.blobs),
        blob_reads=ledger.outcomes["blob_reads"],
        blob_replays=ledger.outcomes["blob_replays"],
        revision_lists=ledger.outcomes["revision_lists"],
        revision_reads=ledger.outcomes["revision_reads"],
        restores=ledger.outcomes["restores"],
        resumes=sum(n for name, n in ledger.outcomes.items() if name.startswith("resume_")),
        leases_granted=len(leases.grants),
        lease_renewals=ledger.outcomes["lease_renewals"],
        lease_releases=ledger.outcomes["lease_releases"],
        leased_writes_accepted=sum(1 for w in leases.writes if w.status == 200 and not w.stale),
        stale_token_writes=sum(1 for w in leases.writes if w.stale),
        stale_token_writes_refused=sum(1 for w in leases.writes if w.stale and w.code in ("LEASE_HELD", "LEASE_LOST")),
        fencing_gaps=len(fencing_gaps),
        mcp_tool_calls=ledger.outcomes["mcp_tool_calls"],
        mcp_writes_acknowledged=mcp_acks,
        mcp_replays=ledger.outcomes["mcp_replays"],
        route_replays_of_tool_saves=ledger.outcomes["route_replays_of_tool_saves"],
        cross_replays=ledger.outcomes["cross_replays"],
        oauth_grants=ledger.outcomes["oauth_grants"],
        oauth_tool_calls=ledger.outcomes["oauth_tool_calls"],
        oauth_writes_acknowledged=oauth_acks,
        oauth_refreshes=ledger.outcomes["oauth_refreshes"],
        oauth_revocations=ledger.outcomes["oauth_revocations"],
        oauth_grant_lists=ledger.outcomes["oauth_grant_lists"],
        oauth_api_revocations=ledger.outcomes["oauth_api_revocations"],
        thread_puts=ledger.outcomes["thread_puts"],
        thread_writes=ledger.outcomes["thread_writes"],
        thread_reads_checked=ledger.outcomes["thread_reads_checked"],
        thread_deletes=ledger.outcomes["thread_deletes"],
        whoami=ledger.outcomes["whoami"],
        console_files=ledger.outcomes["console_files"],
        console_not_modified=ledger.outcomes["console_not_modified"],
        console_redirects=ledger.outcomes["console_redirects"],
        rate_limited_calls_served=ledger.outcomes["rate_limited_calls_served"],
        rate_limited_answers=ledger.outcomes["rate_limited_answers"],
        rate_limited_429s=ledger.outcomes["rate_limited_429s"],
        limits_set=ledger.outcomes["limits_set"],
        limits_read=ledger.outcomes["limits_read"],
        limits_refused=ledger.outcomes["limits_refused"],
    )
    print(
        f"\nsoak: seed {seed}, {threads} clients for {elapsed:.1f} s: {requests} requests "
        f"({requests / max(elapsed, 0.001):.0f}/s), statuses {dict(sorted(ledger.statuses.items()))}, "
        f"{len(ledger.acks)} writes acknowledged over {checkpoints} checkpoints, {len(ledger.deleted)} deletes, "
        f"outcomes {dict(ledger.outcomes)}, {len(ledger.seen)} reads checked"
    )
    print(
        f"soak MCP: {mcp_workers} clients, {ledger.outcomes['mcp_tool_calls']} tool calls, {mcp_acks} writes "
        f"acknowledged, {ledger.outcomes['mcp_replays']} replays through the tool"
    )
    print(
        f"soak OAuth: {oauth_workers} clients, {ledger.outcomes['oauth_grants']} grants, "
        f"{ledger.outcomes['oauth_tool_calls']} tool calls with an access token, {oauth_acks} writes acknowledged, "
        f"{ledger.outcomes['oauth_refreshes']} refreshes, {ledger.outcomes['oauth_revocations']} revocations, "
        f"{ledger.outcomes['oauth_grant_lists']} grant listings, {ledger.outcomes['oauth_api_revocations']} grants "
        "revoked through the API"
    )
    print(
        f"soak threads: {thread_workers} clients, {ledger.outcomes['thread_puts']} puts, "
        f"{ledger.outcomes['thread_writes']} put_writes, {ledger.outcomes['thread_reads_checked']} tuples read back, "
        f"{ledger.outcomes['thread_deletes']} threads deleted"
    )
    print(
        f"soak leases: {lease_workers} workers, {len(leases.grants)} leases granted over {len(shared)} checkpoints, "
        f"{sum(1 for w in leases.writes if w.status == 200 and not w.stale)} holders' writes accepted, "
        f"{sum(1 for w in leases.writes if w.stale)} writes with a stale token ({ledger.outcomes['stale_refused']} "
        f"refused, {ledger.outcomes['stale_accepted']} accepted), {len(fencing_gaps)} fencing gaps"
    )
    print(
        f"soak rate limits: {limited_workers} clients of a tenant limited to {LIMITED_RPM} a minute "
        f"({LIMITED_BURST} at once), {ledger.outcomes['rate_limited_calls_served']} calls served in "
        f"{ledger.outcomes['rate_limited_answers']} answers, {ledger.outcomes['rate_limited_429s']} of them 429s "
        f"waited out; {limits_workers} operators set a tenant's limits {ledger.outcomes['limits_set']} times, "
        f"read them {ledger.outcomes['limits_read']} times, {ledger.outcomes['limits_refused']} invalid ones refused"
    )
    assert not stuck, f"clients still running after the deadline: {stuck}"
    assert not ledger.server_errors, f"5xx answers (seed {seed}):\n" + "\n".join(ledger.server_errors[:20])
    assert not problems, f"{len(problems)} problems (seed {seed}):\n" + "\n".join(problems[:40])
    # The run proves something only if the clients really collided (they went on past the deadline until they had).
    missing = shortfalls(
        ledger, leases, mcp_workers, lease_workers, thread_workers, oauth_workers, limited_workers, limits_workers
    )
    assert not missing, f"after {elapsed:.0f} s the run had not shown {missing}: {ledger.statuses}, {ledger.outcomes}"
    # The probes after the run: a takeover on purpose, and a replay each way between the tool and the route.
    if lease_workers:
        assert ledger.outcomes["stale_refused"] > 0, ledger.outcomes
    if mcp_workers:
        assert ledger.outcomes["cross_replays"] == 2, ledger.outcomes
    assert not fencing_gaps, f"{len(fencing_gaps)} fencing gaps (seed {seed}):\n" + "\n".join(fencing_gaps[:10])


def own_keys(http: httpx.Client, clients: int, run: str) -> list[OwnKey]:
    """A key for each plain client: the operator's tenant, agent and scopes (so the client does what it did with
    the operator's key), a key id of its own."""
    me = http.get("/v1/whoami")
    assert me.status_code == 200, me.text
    operator = me.json()["data"]
    keys = []
    for number in range(clients):
        body = {"agent_id": operator["agent_id"], "scopes": operator["scopes"], "description": f"soak {run} {number}"}
        created = http.post("/v1/keys", json=body)
        assert created.status_code == 201, created.text
        data = created.json()["data"]
        keys.append(OwnKey(data["secret"], data["key_id"], data["tenant_id"], data["agent_id"]))
    return keys


def approving_key(http: httpx.Client, run: str) -> str:
    """The key a person signs in with on the consent form for the OAuth clients: the operator's agent (so that their
    writes land in the slots the others write), holding what their tools need."""
    agent = http.get("/v1/whoami").json()["data"]["agent_id"]
    body = {"agent_id": agent, "scopes": list(OAUTH_SCOPES), "description": f"soak {run} OAuth approval"}
    created = http.post("/v1/keys", json=body)
    assert created.status_code == 201, created.text
    return plant_secret(str(created.json()["data"]["secret"]))


def grants_manager_key(http: httpx.Client, run: str) -> str:
    """The key the OAuth clients list and revoke their agent's grants with: the operator's agent, keys:manage only
    (no `*`: it sees that agent's grants alone)."""
    agent = http.get("/v1/whoami").json()["data"]["agent_id"]
    body = {"agent_id": agent, "scopes": ["keys:manage"], "description": f"soak {run} OAuth grants"}
    created = http.post("/v1/keys", json=body)
    assert created.status_code == 201, created.text
    return plant_secret(str(created.json()["data"]["secret"]))


def takeover_probe(http: httpx.Client, ledger: Ledger) -> None:
    """One takeover made on purpose, whatever the racing workers happened to do on a slow machine: a holder's lease
    released and another's granted, then a write with the first token, which must be refused as stale."""
    subject = f"soak-takeover-{uuid.uuid4().hex[:12]}"
    body = {"subject_id": subject, "kind": "task_state", "state": {"probe": 0}}
    created = http.post("/v1/checkpoints", json=body)
    if created.status_code != 201:
        ledger.problem(f"the takeover probe's checkpoint answered {created.status_code}: {created.text[:300]}")
        return
    lease_url = f"/v1/checkpoints/{created.json()['data']['checkpoint_id']}/lease"
    first = http.post(lease_url, json={"ttl_seconds": 10, "holder": "probe-first"}).json()["data"]["lease_token"]
    http.request("DELETE", lease_url, headers={"Lease-Token": first})
    second = http.post(lease_url, json={"ttl_seconds": 10, "holder": "probe-second"}).json()["data"]["lease_token"]
    stale = http.post("/v1/checkpoints", json={**body, "state": {"probe": 1}, "lease_token": first})
    if stale.status_code == 409 and stale.json()["error"]["code"] == "LEASE_LOST":
        ledger.count("stale_refused")
    else:
        ledger.problem(f"a write with a token taken over answered {stale.status_code}: {stale.text[:300]}")
    held = http.post("/v1/checkpoints", json={**body, "state": {"probe": 2}, "lease_token": second})
    if held.status_code != 200:
        ledger.problem(f"the new holder's write answered {held.status_code}: {held.text[:300]}")
    http.request("DELETE", lease_url, headers={"Lease-Token": second})


def tool_save_message(arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC request of a `baton_checkpoint_save` call."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "baton_checkpoint_save", "arguments": arguments},
    }


def mcp_replay_probe(http: httpx.Client, ledger: Ledger) -> None:
    """The one key whichever way a save came, made on purpose whatever the racing clients happened to do: a save
    made through the tool with an `idempotency_key` replays through the route with that Idempotency-Key (its status,
    data and ETag, `Idempotent-Replayed: true`), and one made through the route replays through the tool (its data).
    Neither writes again."""
    subject = f"soak-mcp-replay-{uuid.uuid4().hex[:12]}"
    for kind, first_by_tool in (("task_state", True), ("workflow", False)):
        body = {"subject_id": subject, "kind": kind, "state": {"probe": kind}}
        key = f"soak-mcp-probe-{uuid.uuid4()}"
        by_tool = http.post("/mcp", json=tool_save_message({**body, "idempotency_key": key}), headers=MCP_HEADERS)
        by_route = http.post("/v1/checkpoints", json=body, headers={"Idempotency-Key": key})
        if by_tool.status_code != 200 or "result" not in by_tool.json():
            ledger.problem(f"the MCP replay probe's tool call answered {by_tool.status_code}: {by_tool.text[:300]}")
            return
        tool_result = by_tool.json()["result"]
        if by_route.status_code not in (200, 201) or tool_result.get("isError"):
            ledger.problem(f"the MCP replay probe answered {by_route.text[:300]} and {tool_result}")
            return
        tool_data, route_data = tool_result["structuredContent"], by_route.json()["data"]
        replayed = by_route.headers.get("Idempotent-Replayed") if first_by_tool else "true"
        if tool_data != route_data or replayed != "true" or route_data["revision"] != 1:
            ledger.problem(
                f"a save {'by the tool' if first_by_tool else 'by the route'} and its replay by the other answered "
                f"{tool_data} and {by_route.status_code} {dict(by_route.headers)} {route_data}"
            )
        elif first_by_tool and (by_route.status_code, by_route.headers.get("ETag")) != (
            201,
            etag(route_data["checkpoint_id"], 1),
        ):
            ledger.problem(f"the route's replay of a tool's create answered {by_route.status_code} {by_route.headers}")
        ledger.count("cross_replays")
    listed = http.get(f"/v1/subjects/{quote(subject, safe='')}/checkpoints").json()["data"]
    if sorted((c["kind"], c["revision"]) for c in listed) != [("task_state", 1), ("workflow", 1)]:
        ledger.problem(f"the MCP replay probe's replays wrote again: {listed}")


def leased_checkpoints(http: httpx.Client, ledger: Ledger, leases: LeaseLedger, run: str) -> list[tuple[Slot, str]]:
    """The checkpoints the lease workers race for, each keeping its last 100 revisions, created before they start."""
    shared: list[tuple[Slot, str]] = []
    for number in range(LEASED_CHECKPOINTS):
        slot = (f"soak-{run}-leased-{number}", "task_state")
        state = {"worker": "setup", "token": None, "counter": 0, "seq": number}
        body = {"subject_id": slot[0], "kind": slot[1], "state": state, "keep_revisions": LEASE_KEEP}
        response = http.post("/v1/checkpoints", json=body)
        assert response.status_code == 201, response.text
        data = response.json()["data"]
        ledger.acks.append(Ack(slot, data["checkpoint_id"], 1, data["state_hash"], 201, "active", "leased setup"))
        leases.written[data["state_hash"]] = {**state, "checkpoint_id": data["checkpoint_id"]}
        shared.append((slot, data["checkpoint_id"]))
    return shared


def test_the_lease_counter_grows_across_a_save_made_while_no_lease_is_live(http: httpx.Client) -> None:
    subject = f"soak-counter-{uuid.uuid4().hex[:12]}"
    body = {"subject_id": subject, "kind": "task_state", "state": {"n": 0}, "keep_revisions": 3}
    created = http.post("/v1/checkpoints", json=body)
    assert created.status_code == 201, created.text
    lease_url = f"/v1/checkpoints/{created.json()['data']['checkpoint_id']}/lease"
    # Given lease 1, released, and then a save (which keeps a revision: one transaction)
    first = http.post(lease_url, json={"ttl_seconds": 10, "holder": "holder-a"})
    assert first.status_code == 201, first.text
    assert http.request("DELETE", lease_url, headers={"Lease-Token": first.json()["data"]["lease_token"]}).is_success
    assert http.post("/v1/checkpoints", json={**body, "state": {"n": 1}}).status_code == 200
    # When another holder acquires the lease
    second = http.post(lease_url, json={"ttl_seconds": 10, "holder": "holder-b"})
    assert second.status_code == 201, second.text
    # Then its counter is past the first's: the counter grows with every new lease (api-v1.md, Leases)
    assert token_counter(second.json()["data"]["lease_token"]) == 2, second.text


def test_a_token_is_refused_once_a_newer_lease_was_granted_even_after_that_one_ended(http: httpx.Client) -> None:
    subject = f"soak-fencing-{uuid.uuid4().hex[:12]}"
    created = http.post("/v1/checkpoints", json={"subject_id": subject, "kind": "task_state", "state": {"n": 0}})
    assert created.status_code == 201, created.text
    lease_url = f"/v1/checkpoints/{created.json()['data']['checkpoint_id']}/lease"
    # Given holder A's lease 1, released, then holder B's lease 2, released: no lease is live
    tokens = []
    for holder in ("holder-a", "holder-b"):
        granted = http.post(lease_url, json={"ttl_seconds": 10, "holder": holder})
        assert granted.status_code == 201, granted.text
        tokens.append(granted.json()["data"]["lease_token"])
        assert http.request("DELETE", lease_url, headers={"Lease-Token": tokens[-1]}).status_code == 200
    # When A, which paused, writes with its token of lease 1
    late = http.post(
        "/v1/checkpoints",
        json={"subject_id": subject, "kind": "task_state", "state": {"n": 1}, "lease_token": tokens[0]},
    )
    # Then it is refused: its lease was taken over by lease 2
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "LEASE_LOST"
