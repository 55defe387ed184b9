"""Schemathesis hooks for the run against `baton serve` (loaded through tests/e2e/schemathesis.toml).

The run may revoke only the keys it created itself: listing keys shows other key ids (its own key's among them),
and revoking its own key would turn the rest of the run into 401s, or another key into a broken test elsewhere.

A case with a negative part is judged negative, as schemathesis' own revalidation judges it (its 4.32.5 coverage
phase can label one positive), and must then be refused. (An integer written with a fraction, `3600.0`, is an
integer to JSON Schema and to Baton alike: JSON has one number type.)

Real resources. A generated id is almost never one that exists, so an id route would otherwise only ever answer
404 and never reach its rules. Every other positive case of an id route (the first one included) of the coverage and
fuzzing phases is pointed at a real resource of the fuzz tenant, made through the API itself on first use:
- a checkpoint with `keep_revisions` and kept revisions (by id, revisions, one kept revision, restore), and an
  OpenCheckpoint document in the same subject (by id, resume: ready, ambiguous or omitted by what the case asks);
- a checkpoint of its own for the lease routes, so that a lease never blocks the restores;
- a fresh checkpoint for each such DELETE by id, and a fresh subject (two checkpoints, one with kept revisions) for
  each such purge: destructive cases never take away what the others read;
- a LangGraph thread of three checkpoints (values in the checkpoint's item and in items of their own, pending
  writes) for get_tuple, list and copy (into a fresh target); a fresh checkpoint of another thread for each
  put_writes; a fresh thread of two checkpoints (and its run) for each thread delete, prune and delete-for-runs;
- OAuth: a registered client of the fuzz key's own, whose authorization request (query or form) the consent page and
  its form are sent (approved with the fuzz key, or denied); a fresh code (with its PKCE verifier) or a fresh grant's
  refresh token for each token request; a fresh grant's token for each revocation; registrations with redirect URIs
  Baton takes. Each success is followed up: the access token works at /mcp, a revoked grant's refresh token is refused.
- OAuth grants: a grant of the fuzz key's agent, for a client of its own, that stays (a listing of the tenant's or
  the agent's grants must show it, on some page, and never a token), and a fresh grant for each revocation through
  `DELETE /v1/oauth/grants/{grant_id}` (followed up: its refresh token refused, a second revocation 404, the grant no
  longer listed).
- tenant limits: a scratch tenant no key belongs to (`LIMITS_TENANT`), whose limits the real PUTs set (whatever
  they ask, however low) and the real GETs read back (each must show what the last real PUT set); and the fuzz
  tenant's own, which some real GETs read: never set, so null (the stage's generous defaults) to the end.
Nothing else reaches those fixtures: a write, lease or delete naming one (schemathesis reuses ids it saw in answers)
is pointed at an id, subject or thread that nothing has. Every other PUT of a tenant's limits, in every phase, is
pointed at a scratch tenant of its own (`LIMITS_ELSEWHERE`) when its path names a tenant at all: the fuzz key holds
tenants:manage, and a PUT of low limits for its own tenant (an id schemathesis may reuse from an answer) would turn
the rest of the run into 429s, or another suite's tenant's, on the same `baton serve`, into a broken test there.

A put's `values` may name only channels of its `channel_versions`, a rule between fields that no schema states:
positive puts are sent without the others (`leave_out_values_without_a_version`).

The run counts its cases per operation and answer, those sent to real resources apart, and what it sent of the
request headers Baton reads; it writes the counts to the file named by `BATON_SCHEMATHESIS_COUNTS` when it ends,
for the test to print and check (each real resource answered with success at least once, each purge deleted what
it was given, each real thread answered what it holds). Every answer of an OAuth route, real or generated, is held to
what the document cannot say: a redirect only to the registered redirect URI (with `iss`), a page never a redirect,
the pages' strict headers, `no-store` on what holds a secret.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import schemathesis
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.generation.meta import ComponentInfo

from tests.builders import (
    OAUTH_REDIRECT,
    OAUTH_SCOPE,
    SEED_DOCUMENT,
    code_exchange_form,
    refresh_form,
)
from tests.e2e.oauth_flow import MCP_ACCEPT, OAuthFlow, mcp_message

KEY_ID = re.compile(r"key_[0-9a-f]{32}\Z")
CREATED_KEYS: set[str] = set()
"""Key ids this run minted with `POST /v1/keys`."""
FUZZED_HEADERS = ("If-Match", "If-None-Match", "Idempotency-Key")
HEADER_COUNTS: Counter[str] = Counter()
"""`<header> sent`, `<header> <status>` and `Idempotent-Replayed`: how often each was sent, and its answers."""
OPERATION_COUNTS: Counter[str] = Counter()
"""`<METHOD path> <status>` of every case sent."""
REAL_COUNTS: Counter[str] = Counter()
"""`<METHOD path> <status>` of the cases pointed at a real resource."""
RESUME_ANSWERS: Counter[str] = Counter()
"""`data.status` of the resumes of the real subject that succeeded: ready, ambiguous, none, closed or omitted."""
OAUTH_ANSWERS: Counter[str] = Counter()
"""`<what> <status>` of the real OAuth cases (a code exchanged, a grant refreshed, a decision approved or denied, ...)
and of their follow-ups (the access token at /mcp, a revoked grant's refresh token)."""
LIMITS_ANSWERS: Counter[str] = Counter()
"""`<what> <status>` of the real limits cases (`set`, `read back`, `read the fuzz tenant's`) and of each set's
follow-up (`set: read back`)."""
PROBLEMS: list[str] = []
"""What a real resource answered against the contract that schemathesis cannot see (a purge that missed some)."""

URL_VARIABLE = "BATON_SCHEMATHESIS_URL"
KEY_VARIABLE = "BATON_SCHEMATHESIS_KEY"
COUNTS_VARIABLE = "BATON_SCHEMATHESIS_COUNTS"
REAL_EVERY = 2
"""One positive case in this many of an id route goes to a real resource."""
KEEP_REVISIONS = 5
FIXTURE_AGENT = "fuzzer"
"""The fuzz key's agent (tests/e2e/test_schemathesis.py)."""
PURGED_CHECKPOINTS = 2
"""Checkpoints of a fresh purge subject."""

GET_BY_ID = "GET /v1/checkpoints/{checkpoint_id}"
DELETE_BY_ID = "DELETE /v1/checkpoints/{checkpoint_id}"
REVISIONS = "GET /v1/checkpoints/{checkpoint_id}/revisions"
REVISION = "GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}"
RESTORE = "POST /v1/checkpoints/{checkpoint_id}/restore"
ACQUIRE = "POST /v1/checkpoints/{checkpoint_id}/lease"
RELEASE = "DELETE /v1/checkpoints/{checkpoint_id}/lease"
RESUME = "POST /v1/resume"
PURGE = "DELETE /v1/subjects/{subject_id}"
SAVE = "POST /v1/checkpoints"
THREAD_PUT = "POST /v1/threads/{thread_id}/checkpoints"
THREAD_WRITES = "POST /v1/threads/{thread_id}/writes"
THREAD_GET = "GET /v1/threads/{thread_id}/checkpoint"
THREAD_LIST = "GET /v1/threads/{thread_id}/checkpoints"
THREAD_DELETE = "DELETE /v1/threads/{thread_id}"
THREAD_COPY = "POST /v1/threads/{thread_id}/copy"
THREAD_PRUNE = "POST /v1/threads:prune"
THREAD_RUNS = "POST /v1/threads:delete-for-runs"
THREAD_OPERATIONS = (THREAD_WRITES, THREAD_GET, THREAD_LIST, THREAD_DELETE, THREAD_COPY, THREAD_PRUNE, THREAD_RUNS)
"""The thread operations whose positive cases are sometimes pointed at a real thread (a put needs none)."""
CONSOLE_PAGE = "GET /console"
CONSOLE_ASSET = "GET /console/{asset}"
CONSOLE_OPERATIONS = (CONSOLE_PAGE, CONSOLE_ASSET)
"""The console's routes: public, no key needed; their real cases name a file the console ships."""
OAUTH_REGISTER = "POST /oauth/register"
OAUTH_PAGE = "GET /oauth/authorize"
OAUTH_DECISION = "POST /oauth/authorize"
OAUTH_TOKEN = "POST /oauth/token"
OAUTH_REVOKE = "POST /oauth/revoke"
OAUTH_OPERATIONS = (OAUTH_REGISTER, OAUTH_PAGE, OAUTH_DECISION, OAUTH_TOKEN, OAUTH_REVOKE)
"""OAuth's endpoints (public): their real cases carry a registered client's request, a fresh code or grant."""
GRANT_LIST = "GET /v1/oauth/grants"
GRANT_REVOKE = "DELETE /v1/oauth/grants/{grant_id}"
GRANT_OPERATIONS = (GRANT_LIST, GRANT_REVOKE)
"""OAuth grants (keys:manage): their real cases list the fuzz tenant's grants, or revoke a fresh grant of its own."""
LIMITS_GET = "GET /v1/tenants/{tenant_id}/limits"
LIMITS_PUT = "PUT /v1/tenants/{tenant_id}/limits"
LIMITS_OPERATIONS = (LIMITS_GET, LIMITS_PUT)
"""A tenant's limits (tenants:manage, which the fuzz key holds): their real cases name a scratch tenant."""
LIMITS_TENANT = "fuzz-limits"
"""The scratch tenant of the real limits cases: no key belongs to it, so limits however low throttle no request."""
LIMITS_ELSEWHERE = "fuzz-limits-elsewhere"
"""Where every other PUT of a tenant's limits goes (see `keep_away_from_the_fixtures`)."""
LIMIT_SETTINGS = ("requests_per_minute", "burst", "storage_bytes", "checkpoints")
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
"""A tenant id (docs/openapi.json, the limits routes' path parameter)."""
GRANT_FIELDS = frozenset(
    {"grant_id", "client_id", "client_name", "tenant_id", "agent_id", "key_id", "scopes", "resource", "created_at",
     "expires_at"}
)  # fmt: skip
"""What a listed grant holds (docs/api.md): never a token."""
FIXTURE_TENANT = "schemathesis"
"""The fuzz key's tenant (tests/e2e/test_schemathesis.py)."""
OAUTH_DISCOVERY = (
    "GET /.well-known/oauth-protected-resource/mcp",
    "GET /.well-known/oauth-protected-resource",
    "GET /.well-known/oauth-authorization-server",
)
OAUTH_PARAMETERS = frozenset(
    {
        "response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method",
        "resource", "key", "decision", "grant_type", "code", "code_verifier", "refresh_token", "token",
        "token_type_hint",
    }
)  # fmt: skip
"""The parameters OAuth's forms and the consent page's query carry."""
OAUTH_PRIVATE_USE_REDIRECT = "com.example.baton:/callback"
"""A native app's redirect URI (RFC 8252, 7.1), which some real registrations ask for besides the loopback one."""
CONSOLE_DIRECTORY = Path(__file__).resolve().parents[2] / "functions" / "baton_checkpoints" / "console"
CONSOLE_MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
"""The console's files besides its page (served at /console itself), by suffix: what each must be served as."""
THREAD_CHECKPOINTS = 3
"""Checkpoints of the shared thread; a fresh thread (for a delete, prune or delete-for-runs) has 2."""
REAL_OPERATIONS = (
    GET_BY_ID,
    DELETE_BY_ID,
    REVISIONS,
    REVISION,
    RESTORE,
    ACQUIRE,
    RELEASE,
    RESUME,
    PURGE,
    *THREAD_OPERATIONS,
    *CONSOLE_OPERATIONS,
    *OAUTH_OPERATIONS,
    *GRANT_OPERATIONS,
    *LIMITS_OPERATIONS,
)
"""The operations whose positive cases are sometimes pointed at a real resource."""
CHANGING_BY_ID = (DELETE_BY_ID, RESTORE, ACQUIRE, RELEASE)


def _write_counts() -> None:
    path = os.environ.get(COUNTS_VARIABLE)
    if path:
        counts = {
            "headers": HEADER_COUNTS,
            "operations": OPERATION_COUNTS,
            "real": REAL_COUNTS,
            "resume": RESUME_ANSWERS,
            "oauth": OAUTH_ANSWERS,
            "limits": LIMITS_ANSWERS,
            "problems": PROBLEMS,
        }
        with open(path, "w", encoding="utf-8") as written:
            json.dump(counts, written)


atexit.register(_write_counts)


def label_of(case: Any) -> str:
    """`METHOD path`, as the config's `include-name` spells an operation."""
    return f"{case.method.upper()} {case.path}"


# -- real resources ---------------------------------------------------------------------------------------------


@dataclass
class Fixtures:
    """The fuzz tenant's real resources, and what the run has done to them."""

    client: httpx.Client
    run: str
    subject: str
    lease_subject: str
    history_id: str = ""
    document_id: str = ""
    lease_id: str = ""
    current_revision: int = 0
    """The history checkpoint's revision: its kept ones are the `KEEP_REVISIONS` before it."""
    lease_token: str | None = None
    """The token of the last lease a real acquire was granted."""
    thread_id: str = ""
    """The shared LangGraph thread: `THREAD_CHECKPOINTS` checkpoints, values inline and in items, pending writes."""
    thread_checkpoints: list[str] = field(default_factory=list)
    writes_thread: str = ""
    """The thread whose fresh checkpoints take the pending writes of the real cases."""
    fresh_threads: dict[str, str] = field(default_factory=dict)
    """Thread id -> run id of each fresh thread handed to a delete, prune or delete-for-runs."""
    console_tags: dict[str, str] = field(default_factory=dict)
    """The console's current ETag by file name ("" for the page), as `GET /console[/name]` answers it."""
    made: int = 0
    positives: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    key: str = ""
    """The fuzz key's secret: the consent form's sign-in (it holds mcp:call through `*`)."""
    oauth_client: OAuthFlow | None = None
    """The fuzz tenant's registered OAuth client (its HTTP client sends no key: OAuth's routes read none)."""
    kept_grant: Grant | None = None
    """The grant that stays: every listing of the fuzz agent's grants shows it."""
    limits: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(LIMIT_SETTINGS))
    """The scratch tenant's settings as the last real PUT set them (none yet: null, the stage's default)."""

    def save(self, subject: str, kind: str, state: Any, **fields: Any) -> dict[str, Any]:
        """Save through the API; the save's answer."""
        body = {"subject_id": subject, "kind": kind, "state": state, **fields}
        answer = self.client.post("/v1/checkpoints", json=body)
        if answer.status_code not in (200, 201):
            raise RuntimeError(f"a fixture save answered {answer.status_code}: {answer.text}")
        data: dict[str, Any] = answer.json()["data"]
        return data

    def build(self) -> None:
        """The history checkpoint (with `KEEP_REVISIONS` kept), the OpenCheckpoint document, the leased one."""
        for step in range(1, KEEP_REVISIONS + 2):
            saved = self.save(self.subject, "task_state", {"step": step}, keep_revisions=KEEP_REVISIONS)
        self.history_id, self.current_revision = saved["checkpoint_id"], saved["revision"]
        self.document_id = self.save(self.subject, "workflow", SEED_DOCUMENT, format="opencheckpoint/0.1")[
            "checkpoint_id"
        ]
        self.lease_id = self.save(self.lease_subject, "task_state", {"lease": "fixture"})["checkpoint_id"]
        self.thread_id = f"schemathesis-thread-{self.run}"
        self.writes_thread = f"schemathesis-writes-{self.run}"
        for step in range(THREAD_CHECKPOINTS):
            parent = self.thread_checkpoints[-1] if self.thread_checkpoints else None
            self.thread_checkpoints.append(
                self.put_checkpoint(self.thread_id, step, parent, run_id=f"run-{self.run}", n=step)
            )
        self.put_writes(self.thread_id, self.thread_checkpoints[-1])

    def put_checkpoint(self, thread_id: str, step: int, parent: str | None, **metadata: Any) -> str:
        """A LangGraph put through the API of checkpoint `step`: a small channel value (in the checkpoint's item) and
        a large one (an item of its own) at new versions; the checkpoint's id."""
        checkpoint_id = f"1f0-{step:06d}"
        body = {
            "checkpoint": {"v": 4, "id": checkpoint_id, "channel_versions": {"small": step, "large": f"{step}.x"}},
            "metadata": {"source": "loop", **metadata},
            "parent_checkpoint_id": parent,
            "values": {
                "small": {"type": "msgpack", "data": base64.b64encode(b"small" * 8).decode()},
                "large": {"type": "bytes", "data": base64.b64encode(secrets.token_bytes(2_000)).decode()},
            },
        }
        answer = self.client.post(f"/v1/threads/{quote(thread_id, safe='')}/checkpoints", json=body)
        if answer.status_code != 201:
            raise RuntimeError(f"a fixture put answered {answer.status_code}: {answer.text}")
        return checkpoint_id

    def put_writes(self, thread_id: str, checkpoint_id: str) -> None:
        """Pending writes of one task on a checkpoint, through the API."""
        writes = [{"channel": "small", "type": "json", "data": base64.b64encode(b'{"w": 1}').decode()}]
        body = {"checkpoint_id": checkpoint_id, "task_id": "fixture-task", "writes": writes}
        answer = self.client.post(f"/v1/threads/{quote(thread_id, safe='')}/writes", json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"a fixture put_writes answered {answer.status_code}: {answer.text}")

    def oauth(self) -> OAuthFlow:
        """The registered OAuth client, registered on first use."""
        if self.oauth_client is None:
            flow = OAuthFlow(httpx.Client(base_url=str(self.client.base_url), timeout=30))
            flow.register(client_name=f"schemathesis {self.run}")
            self.oauth_client = flow
        return self.oauth_client

    def fresh_code(self) -> tuple[str, str]:
        """A new authorization code approved with the fuzz key, and its PKCE verifier."""
        return self.oauth().code(self.key)

    def fresh_grant(self) -> dict[str, Any]:
        """A new grant approved with the fuzz key: its token answer."""
        return self.oauth().grant(self.key)

    def grant_of_its_own(self, purpose: str) -> Grant:
        """A new grant approved with the fuzz key for a client registered for it alone, its id read from the
        listing of the fuzz agent's grants."""
        self.made += 1
        flow = OAuthFlow(self.oauth().http)
        flow.register(client_name=f"schemathesis {purpose} {self.run}-{self.made}")
        tokens = flow.grant(self.key)
        listed = self.listed_grant(flow.client_id, {"agent_id": FIXTURE_AGENT})
        if listed is None:
            raise RuntimeError(f"the grant of client {flow.client_id} is not listed")
        return Grant(listed["grant_id"], flow, tokens)

    def listed_grant(self, client_id: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The live grant of `client_id` as `GET /v1/oauth/grants` with `params` lists it, every page followed (None:
        not listed)."""
        query = {**params, "limit": params.get("limit", 200)}
        while True:
            answer = self.client.get("/v1/oauth/grants", params=query)
            if answer.status_code != 200:
                raise RuntimeError(f"a grant listing answered {answer.status_code}: {answer.text}")
            page = answer.json()
            found = [grant for grant in page["data"] if grant["client_id"] == client_id]
            if found:
                return dict(found[0])
            if not page["meta"]["next_cursor"]:
                return None
            query["cursor"] = page["meta"]["next_cursor"]

    def the_kept_grant(self) -> Grant:
        """The grant that stays, made on first use."""
        if self.kept_grant is None:
            self.kept_grant = self.grant_of_its_own("kept grant")
        return self.kept_grant

    def console_tag(self, name: str) -> str:
        """The current ETag of the console's file `name` ("" for the page), asked of Baton once."""
        if name not in self.console_tags:
            base = str(self.client.base_url).rstrip("/")
            answer = httpx.get(f"{base}/console{'/' + name if name else ''}", timeout=30)  # without a key
            if answer.status_code != 200 or not answer.headers.get("etag"):
                raise RuntimeError(f"the console's {name or 'page'} answered {answer.status_code}: {answer.headers}")
            self.console_tags[name] = answer.headers["etag"]
        return self.console_tags[name]

    def fresh_writes_checkpoint(self) -> str:
        """A new checkpoint of the writes thread, for a case's pending writes to land on."""
        self.made += 1
        return self.put_checkpoint(self.writes_thread, self.made, None)

    def fresh_thread(self) -> tuple[str, str]:
        """A thread of 2 checkpoints whose metadata names a run of its own: (thread id, run id)."""
        thread_id = self.fresh_subject("thread")
        run_id = f"run-{thread_id}"
        parent = self.put_checkpoint(thread_id, 0, None, run_id=run_id)
        self.put_checkpoint(thread_id, 1, parent, run_id=run_id)
        self.fresh_threads[thread_id] = run_id
        return thread_id, run_id

    def owns_thread(self, thread_id: Any) -> bool:
        """A shared thread of the fixtures (a fresh one may be taken by the case it was made for)."""
        return thread_id in (self.thread_id, self.writes_thread)

    def fresh_subject(self, purpose: str) -> str:
        """A subject id of this run that nothing has used yet."""
        self.made += 1
        return f"schemathesis-{purpose}-{self.run}-{self.made}"

    def fresh_checkpoint(self) -> str:
        """A checkpoint nothing else uses, for a DELETE to take."""
        return str(self.save(self.fresh_subject("delete"), "task_state", {"doomed": True})["checkpoint_id"])

    def fresh_purge_subject(self) -> str:
        """A subject of `PURGED_CHECKPOINTS` checkpoints, one of them with kept revisions, for a purge to take."""
        subject = self.fresh_subject("purge")
        for step in (1, 2):
            self.save(subject, "task_state", {"step": step}, keep_revisions=2)
        self.save(subject, "conversation", {"turns": []})
        return subject

    def kept_revision(self, draw: int) -> int:
        """One of the history checkpoint's kept revisions, picked by `draw`."""
        oldest = max(1, self.current_revision - KEEP_REVISIONS)
        return oldest + draw % max(1, self.current_revision - oldest)

    @property
    def ids(self) -> set[str]:
        """The checkpoints the cases share."""
        return {self.history_id, self.document_id, self.lease_id}

    def owns_subject(self, subject: Any) -> bool:
        """A subject the fixtures made (the shared ones, and each fresh one)."""
        return isinstance(subject, str) and subject.startswith("schemathesis-") and self.run in subject


@dataclass(frozen=True)
class Grant:
    """A grant of the fuzz key's agent: its id, its client's flow, its tokens."""

    grant_id: str
    flow: OAuthFlow
    tokens: dict[str, Any]


_FIXTURES: list[Fixtures] = []
_FIXTURES_LOCK = threading.Lock()


def fixtures() -> Fixtures | None:
    """The run's real resources, made on first use; None when the run was not told where Baton is."""
    url, key = os.environ.get(URL_VARIABLE), os.environ.get(KEY_VARIABLE)
    if not url or not key:
        return None
    with _FIXTURES_LOCK:
        if not _FIXTURES:
            run = secrets.token_hex(4)
            client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
            made = Fixtures(client, run, f"schemathesis-fixture-{run}", f"schemathesis-lease-{run}", key=key)
            made.build()
            _FIXTURES.append(made)
        return _FIXTURES[0]


def point_at_a_real_resource(case: Any, real: Fixtures) -> bool:
    """Point every `REAL_EVERY`-th positive case of an id route at a real resource; True when it did."""
    label = label_of(case)
    meta = case.meta
    if label not in REAL_OPERATIONS or meta is None or not meta.generation.mode.is_positive:
        return False
    if meta.phase.name not in ("examples", "coverage", "fuzzing"):
        return False  # stateful scenarios follow their own links
    draw = real.positives[label]
    real.positives[label] += 1
    if draw % REAL_EVERY:
        return False
    path = case.path_parameters
    body = case.body if isinstance(case.body, dict) else None
    if label == GET_BY_ID:
        path["checkpoint_id"] = (real.history_id, real.document_id)[draw // REAL_EVERY % 2]
    elif label == DELETE_BY_ID:
        path["checkpoint_id"] = real.fresh_checkpoint()
    elif label in (REVISIONS, REVISION, RESTORE):
        path["checkpoint_id"] = real.history_id
        if label == REVISION:
            path["revision"] = str(real.kept_revision(draw))
        if label == RESTORE and body is not None:
            body = {**body, "revision": real.kept_revision(draw)}
            if "expected_revision" in body:
                body["expected_revision"] = real.current_revision
            case.body = body
    elif label in (ACQUIRE, RELEASE):
        path["checkpoint_id"] = real.lease_id
        if label == RELEASE and real.lease_token is not None:
            case.headers = {**(case.headers or {}), "Lease-Token": real.lease_token}
    elif label == RESUME and body is not None:
        body = {**body, "subject_id": real.subject}
        if "agent_id" in body:
            body["agent_id"] = FIXTURE_AGENT
        if "checkpoint_id" in body:
            body["checkpoint_id"] = (real.history_id, real.document_id)[draw // REAL_EVERY % 2]
        case.body = body
    elif label == PURGE:
        path["subject_id"] = real.fresh_purge_subject()
    elif label in THREAD_OPERATIONS:
        return point_at_a_real_thread(case, real, label, draw)
    elif label in CONSOLE_OPERATIONS:
        point_at_a_console_file(case, real, label, draw)
    elif label in OAUTH_OPERATIONS:
        point_at_oauth(case, real, label, draw // REAL_EVERY)
    elif label in GRANT_OPERATIONS:
        point_at_grants(case, real, label, draw // REAL_EVERY)
    elif label in LIMITS_OPERATIONS:
        point_at_limits(case, label, draw // REAL_EVERY)
    else:
        return False
    return True


LIMITS_CASES: dict[int, str] = {}
"""The real limits cases (by `id()`), between `before_call` and `after_call`: the tenant each names."""


def point_at_limits(case: Any, label: str, turn: int) -> None:
    """A real PUT sets the scratch tenant's limits to what it asks; a real GET reads them back, or (every other one)
    the fuzz tenant's own."""
    tenant = FIXTURE_TENANT if label == LIMITS_GET and turn % 2 else LIMITS_TENANT
    case.path_parameters["tenant_id"] = tenant
    LIMITS_CASES[id(case)] = tenant


def set_no_real_tenants_limits(case: Any) -> None:
    """Point a PUT of a tenant's limits that is not a real case at `LIMITS_ELSEWHERE` when its path names a tenant
    (one that does not is refused 400, setting nothing): whatever it asks, it then throttles no one."""
    path = case.path_parameters or {}
    if label_of(case) == LIMITS_PUT and id(case) not in LIMITS_CASES and names_a_tenant(path.get("tenant_id", "")):
        path["tenant_id"] = LIMITS_ELSEWHERE


def names_a_tenant(value: Any) -> bool:
    """True when a path's `tenant_id` is a tenant id, as sent or decoded once or twice."""
    text = str(value)
    return any(TENANT_ID.match(form) for form in (text, unquote(text), unquote(unquote(text))))


def limits_problem(data: Any, tenant: str, expected: dict[str, Any]) -> str | None:
    """What is wrong with a limits answer (`data`) that should show `tenant`'s settings `expected`; None when
    nothing: each setting as expected, and what applies the setting or, where it is null, a default."""
    shown = {name: data.get(name) for name in LIMIT_SETTINGS}
    if data.get("tenant_id") != tenant or shown != expected:
        return f"the limits of {data.get('tenant_id')} are {shown}, expected {tenant}'s {expected}"
    effective = data.get("effective") or {}
    wrong = {
        name: effective.get(name)
        for name, value in expected.items()
        if not isinstance(effective.get(name), int) or (value is not None and effective.get(name) != value)
    }
    return f"what applies is not what is set: {wrong} for {expected}" if wrong else None


def judge_a_real_limits_answer(case: Any, label: str, response: Any, real: Fixtures) -> str | None:
    """What a real limits answer must hold that the document does not say: a PUT sets what it asked (a setting left
    out: null), which a GET then reads back; a GET of the scratch tenant shows what the last real PUT set, of the fuzz
    tenant nothing set (null)."""
    tenant = LIMITS_CASES.pop(id(case), "")
    reading = "read back" if tenant == LIMITS_TENANT else "read the fuzz tenant's"
    what = "set" if label == LIMITS_PUT else reading
    LIMITS_ANSWERS[f"{what} {response.status_code}"] += 1
    if response.status_code != 200 or not tenant:
        return None
    data = response.json().get("data") or {}
    if label == LIMITS_GET:
        expected = real.limits if tenant == LIMITS_TENANT else dict.fromkeys(LIMIT_SETTINGS)
        return limits_problem(data, tenant, expected)
    body = case.body if isinstance(case.body, dict) else {}
    asked = {name: body.get(name) for name in LIMIT_SETTINGS}
    problem = limits_problem(data, tenant, asked)
    real.limits = asked
    again = real.client.get(f"/v1/tenants/{tenant}/limits")
    LIMITS_ANSWERS[f"set: read back {again.status_code}"] += 1
    if problem is None and again.status_code == 200:
        problem = limits_problem(again.json()["data"], tenant, asked)
    elif problem is None:
        problem = f"a read of the limits just set answered {again.status_code}: {again.text[:300]}"
    return problem


GRANT_CASES: dict[int, Grant] = {}
"""The real grant revocations (by `id()`), between `before_call` and `after_call`: the grant each revokes."""


def point_at_grants(case: Any, real: Fixtures, label: str, turn: int) -> None:
    """A real listing of the fuzz tenant's grants (naming the tenant and the agent, or not: the same grants; no
    generated cursor, which Baton never wrote), the kept grant made first; or the revocation of a fresh grant of the
    fuzz agent (naming the tenant, or not)."""
    query = dict(case.query) if isinstance(case.query, dict) else {}
    query.pop("tenant_id", None)
    if turn % 2:
        query["tenant_id"] = FIXTURE_TENANT
    if label == GRANT_LIST:
        real.the_kept_grant()
        query.pop("cursor", None)
        query.pop("agent_id", None)
        if turn // 2 % 2:
            query["agent_id"] = FIXTURE_AGENT
    else:
        grant = real.grant_of_its_own("revoked grant")
        case.path_parameters["grant_id"] = grant.grant_id
        GRANT_CASES[id(case)] = grant
    case.query = query


def judge_a_real_grant_answer(case: Any, label: str, response: Any, real: Fixtures) -> str | None:
    """What a real grant listing or revocation must hold that the document does not say: a listing shows only the
    fuzz tenant's grants (the agent's, when named), no token, and the kept grant on some page; a revoked grant's
    refresh token is refused, a second revocation is a 404, and it is no longer listed."""
    grant = GRANT_CASES.pop(id(case), None)
    what = "grants list" if label == GRANT_LIST else "grant revoke"
    OAUTH_ANSWERS[f"{what} {response.status_code}"] += 1
    if response.status_code != 200:
        return None
    if label == GRANT_LIST:
        kept = real.the_kept_grant()
        query = dict(case.query or {})
        whose = (FIXTURE_TENANT, FIXTURE_AGENT)  # the fuzz key alone approves grants in its tenant
        for listed in response.json()["data"]:
            if set(listed) != GRANT_FIELDS or (listed["tenant_id"], listed["agent_id"]) != whose:
                return f"a listing of the fuzz agent's grants shows {listed}"
        if any(kept.tokens[name] in response.text for name in ("access_token", "refresh_token")):
            return "a listing shows a token"
        found = real.listed_grant(kept.flow.client_id, {k: v for k, v in query.items() if k != "cursor"})
        OAUTH_ANSWERS[f"grants list: the kept grant {'listed' if found else 'missing'}"] += 1
        if found is None or found["grant_id"] != kept.grant_id:
            return f"the kept grant {kept.grant_id} is not listed by {query}: {found}"
        return None
    if grant is None:
        return None  # a revocation of a grant the run did not make for it (a generated id that exists: none)
    if response.json().get("data") != {"grant_id": grant.grant_id, "revoked": True}:
        return f"the revocation of {grant.grant_id} answered {response.text[:300]}"
    refused = grant.flow.refresh(grant.tokens["refresh_token"])
    OAUTH_ANSWERS[f"grant revoke: its refresh token {refused.status_code}"] += 1
    again = real.client.delete(f"/v1/oauth/grants/{grant.grant_id}")
    OAUTH_ANSWERS[f"grant revoke: again {again.status_code}"] += 1
    still = real.listed_grant(grant.flow.client_id, {"agent_id": FIXTURE_AGENT})
    OAUTH_ANSWERS[f"grant revoke: {'still' if still else 'no longer'} listed"] += 1
    if refused.status_code != 400 or refused.json().get("error") != "invalid_grant":
        return f"the revoked grant's refresh token answered {refused.status_code}: {refused.text[:300]}"
    if again.status_code != 404 or still is not None:
        return f"the revoked grant, revoked again, answered {again.status_code}; listed: {still}"
    return None


def console_files() -> list[str]:
    """The console's files served under /console/ (its page is served at /console only), sorted."""
    return sorted(p.name for p in CONSOLE_DIRECTORY.iterdir() if p.suffix in CONSOLE_MEDIA_TYPES and p.is_file())


def point_at_a_console_file(case: Any, real: Fixtures, label: str, draw: int) -> None:
    """A real file of the console: the page with its current ETag (a 304); or a file, each in turn, half the time
    with its current ETag (a 304), else with none (a 200)."""
    turn = draw // REAL_EVERY
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "if-none-match"}
    if label == CONSOLE_PAGE:
        headers["If-None-Match"] = real.console_tag("")
    else:
        files = console_files()
        name = files[turn // 2 % len(files)]
        case.path_parameters["asset"] = name
        if turn % 2:  # each file twice in a row: without a tag (200), then with its current one (304)
            headers["If-None-Match"] = real.console_tag(name)
    case.headers = headers


def header(response: Any, name: str) -> str:
    """A response header's value ("" when absent): schemathesis keeps each header as a list of its values."""
    value = response.headers.get(name) or response.headers.get(name.title()) or ""
    return str(value[0] if isinstance(value, list) and value else value or "")


def judge_a_console_answer(case: Any, label: str, response: Any) -> str | None:
    """What a real console file's answer must hold that the document does not say: the CSP, its media type and a
    body on a 200, an empty body on a 304."""
    policy = header(response, "content-security-policy")
    if "default-src 'none'" not in policy or "frame-ancestors 'none'" not in policy:
        return f"no strict Content-Security-Policy: {policy!r}"
    media_type = header(response, "content-type").split(";")[0].strip()
    if response.status_code == 304:
        return None if not response.content else f"a 304 with a body of {len(response.content)} bytes"
    asset = (case.path_parameters or {}).get("asset", "")
    expected = "text/html" if label == CONSOLE_PAGE else CONSOLE_MEDIA_TYPES[Path(asset).suffix]
    if media_type != expected or not response.content:
        return f"served as {media_type!r} with {len(response.content)} bytes, expected {expected!r} and a body"
    return None


OAUTH_CASES: dict[int, tuple[str, dict[str, Any]]] = {}
"""The real OAuth cases (by `id()`), between `before_call` and `after_call`: what each is (`approve`, `deny`,
`authorization_code`, `refresh_token`, `revoke access`, ...) and what its follow-up needs (a grant's tokens)."""


def point_at_oauth(case: Any, real: Fixtures, label: str, turn: int) -> None:
    """A real OAuth request, the generated one's other members kept (a form's unknown parameters are ignored): a
    registration with redirect URIs Baton takes; the registered client's authorization request, its form approved
    with the fuzz key or denied; a fresh code (with its verifier) or a fresh grant's refresh token to exchange; a
    fresh grant's refresh or access token to revoke."""
    flow = real.oauth()
    generated = case.body if isinstance(case.body, dict) else {}
    if label != OAUTH_REGISTER:
        # A form's parameter is sent once (a list would repeat it: invalid_request), and a generated one of OAuth's
        # own names (a resource, a scope) would make a request of another meaning: only the others' scalars stay.
        generated = {
            name: value
            for name, value in generated.items()
            if name not in OAUTH_PARAMETERS and isinstance(value, (str, int, float))
        }
    if label == OAUTH_REGISTER:
        uris = [OAUTH_REDIRECT, OAUTH_PRIVATE_USE_REDIRECT][: 1 + turn % 2]
        case.body = {**generated, "redirect_uris": uris}
        what = "register"
    elif label == OAUTH_PAGE:
        # Every other one without a scope: that asks for every scope a grant may hold.
        _, params = flow.authorization()
        if turn % 2:
            params.pop("scope")
        case.query = params
        what = "consent page"
    elif label == OAUTH_DECISION:
        what = ("approve", "deny")[turn % 2]
        _, params = flow.authorization()
        case.body = {**generated, **params, "key": real.key, "decision": what}
    elif label == OAUTH_TOKEN and turn % 2 == 0:
        code, verifier = real.fresh_code()
        case.body = {**generated, **code_exchange_form(code, flow.client_id, verifier)}
        what = "authorization_code"
    elif label == OAUTH_TOKEN:
        grant = real.fresh_grant()
        case.body = {**generated, **refresh_form(grant["refresh_token"], flow.client_id)}
        what = "refresh_token"
    else:
        grant = real.fresh_grant()
        kind = ("refresh_token", "access_token")[turn % 2]
        case.body = {**generated, "token": grant[kind]}
        if turn % 4 >= 2:
            case.body["token_type_hint"] = kind
        else:
            case.body.pop("token_type_hint", None)
        OAUTH_CASES[id(case)] = (f"revoke {kind}", grant)
        return
    OAUTH_CASES[id(case)] = (what, {})


def judge_a_real_oauth_answer(case: Any, label: str, response: Any, real: Fixtures) -> str | None:
    """What a real OAuth success must hold that the document does not say, and its follow-up: the consent page
    names the client and posts to the authorization endpoint; an approval redirects with a code, a denial with
    access_denied, both with the state and iss; tokens work at /mcp; a revoked grant's refresh token is refused."""
    what, context = OAUTH_CASES.pop(id(case), ("", {}))
    OAUTH_ANSWERS[f"{what} {response.status_code}"] += 1
    flow = real.oauth()
    if label == OAUTH_REGISTER and response.status_code == 201:
        data = response.json()
        if data.get("redirect_uris") != case.body["redirect_uris"] or data.get("token_endpoint_auth_method") != "none":
            return f"registered as {data}, asked {case.body['redirect_uris']}"
    elif label == OAUTH_PAGE and response.status_code == 200:
        page = response.text
        if flow.client_id not in page or 'action="/oauth/authorize"' not in page or 'name="key"' not in page:
            return "the consent page does not name the client, or holds no sign-in form to the authorization endpoint"
    elif label == OAUTH_DECISION and response.status_code == 302:
        query = redirect_query(response)
        sent = case.body
        expected = {"state": sent["state"], "iss": flow.origin}
        if {name: query.get(name) for name in expected} != expected:
            return f"the decision's redirect carries {query}, not the state and iss {expected}"
        if what == "approve" and not query.get("code", "").startswith("btc_"):
            return f"an approval redirected without a code: {query}"
        if what == "deny" and (query.get("error") != "access_denied" or "code" in query):
            return f"a denial redirected with {query}"
    elif label == OAUTH_TOKEN and response.status_code == 200:
        tokens = response.json()
        if set(tokens.get("scope", "").split()) != set(OAUTH_SCOPE.split()) or tokens.get("token_type") != "Bearer":
            return f"the grant holds {tokens.get('scope')!r} as {tokens.get('token_type')}, asked {OAUTH_SCOPE!r}"
        listed = flow.http.post(
            "/mcp",
            json=mcp_message("tools/list"),
            headers={**MCP_ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"},
        )
        OAUTH_ANSWERS[f"{what} access token at /mcp {listed.status_code}"] += 1
        if listed.status_code != 200 or "baton_checkpoint_save" not in listed.text:
            return f"the access token it gave answered {listed.status_code} at /mcp: {listed.text[:300]}"
    elif label == OAUTH_REVOKE and response.status_code == 200:
        if response.content:
            return f"a revocation answered a body: {response.text[:300]}"
        refused = flow.refresh(context["refresh_token"])
        OAUTH_ANSWERS[f"{what}: its refresh token {refused.status_code}"] += 1
        if refused.status_code != 400 or refused.json().get("error") != "invalid_grant":
            return f"the revoked grant's refresh token answered {refused.status_code}: {refused.text[:300]}"
    return None


def redirect_query(response: Any) -> dict[str, str]:
    """The parameters of a 302's Location (each once)."""
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(header(response, "location")).query))


PAGE_HEADERS = {"x-frame-options": "DENY", "x-content-type-options": "nosniff", "cache-control": "no-store"}


def judge_an_oauth_answer(case: Any, label: str, response: Any, base_url: str) -> str | None:
    """What any answer of an OAuth route, real or generated, must hold beyond the document: the authorization
    endpoint redirects only to the registered redirect URI, with `iss`, and a page is never a redirect, with its
    strict headers; the token endpoint's and registration's answers are `no-store`; discovery names this origin."""
    status = response.status_code
    media_type = header(response, "content-type").split(";")[0].strip()
    if label in (OAUTH_PAGE, OAUTH_DECISION):
        location = header(response, "location")
        if status == 302:
            if not location.startswith(f"{OAUTH_REDIRECT}?") or redirect_query(response).get("iss") != base_url:
                return f"redirected to {location!r}"
        elif location:
            return f"a {status} with a Location: {location!r}"
        if media_type == "text/html":
            policy = header(response, "content-security-policy")
            shown = {name: header(response, name) for name in PAGE_HEADERS}
            if shown != PAGE_HEADERS or "default-src 'none'" not in policy or "frame-ancestors 'none'" not in policy:
                return f"a page with the headers {shown}, CSP {policy!r}"
    if (
        label in (OAUTH_TOKEN, OAUTH_REGISTER)
        and status in (200, 201)
        and header(response, "cache-control") != "no-store"
    ):
        return f"a {status} that may be cached: {header(response, 'cache-control')!r}"
    is_oauth_error = media_type == "application/json" and isinstance(response.json().get("error"), str)
    if label == OAUTH_TOKEN and is_oauth_error and header(response, "cache-control") != "no-store":
        return "an OAuth error of the token endpoint that may be cached"
    if label in OAUTH_DISCOVERY and status == 200:
        document = response.json()
        named = document.get("issuer") or (document.get("authorization_servers") or [""])[0]
        if named != base_url or header(response, "access-control-allow-origin") != "*":
            return f"a discovery document naming {named!r} (this origin is {base_url}), or not readable cross-origin"
    return None


def point_at_a_real_thread(case: Any, real: Fixtures, label: str, draw: int) -> bool:
    """Point a positive case of a thread operation at a real thread of the fixture agent: the shared one for reads
    and copies (what they ask stays as generated but the namespace, the agent and the cursor), a fresh checkpoint
    for pending writes, a fresh thread for a delete, a prune or a delete-for-runs."""
    path = case.path_parameters
    query = case.query if isinstance(case.query, dict) else {}
    body = case.body if isinstance(case.body, dict) else None
    for name in ("agent_id", "checkpoint_ns", "cursor"):
        query.pop(name, None)
    if label in (THREAD_GET, THREAD_LIST, THREAD_COPY):
        path["thread_id"] = real.thread_id
    if label == THREAD_GET:
        query.pop("checkpoint_id", None)
        if draw // REAL_EVERY % 2:
            query["checkpoint_id"] = real.thread_checkpoints[draw % THREAD_CHECKPOINTS]
    elif label == THREAD_LIST:
        # `filter` is a JSON object inside a string: a generated one rarely is.
        query.pop("filter", None)
        if draw // REAL_EVERY % 2:
            query["filter"] = json.dumps({"source": "loop", "run_id": f"run-{real.run}"})
    elif label == THREAD_WRITES and body is not None:
        path["thread_id"] = real.writes_thread
        body.pop("checkpoint_ns", None)
        # A generated blob_id names no blob this run uploaded (a 400 by a rule on server-side state): real cases
        # carry their bytes as data.
        writes = [
            {**{k: v for k, v in w.items() if k != "blob_id"}, "data": w.get("data") or ""}
            if isinstance(w, dict)
            else w
            for w in body.get("writes", [])
        ]
        case.body = {**body, "writes": writes, "checkpoint_id": real.fresh_writes_checkpoint()}
    elif label == THREAD_COPY and body is not None:
        case.body = {**body, "target_thread_id": real.fresh_subject("copy")}
    elif label == THREAD_DELETE:
        path["thread_id"] = real.fresh_thread()[0]
    elif label == THREAD_PRUNE and body is not None:
        case.body = {**body, "thread_ids": [real.fresh_thread()[0]]}
    elif label == THREAD_RUNS and body is not None:
        case.body = {**body, "run_ids": [real.fresh_thread()[1]]}
    else:
        return False
    case.query = query
    return True


def keep_away_from_the_fixtures(case: Any, real: Fixtures) -> None:
    """A case not pointed at a fixture that would change one (an id or subject schemathesis saw in an answer) is
    sent to an id or a subject that nothing has instead."""
    label = label_of(case)
    path = case.path_parameters or {}
    if label in CHANGING_BY_ID and path.get("checkpoint_id") in real.ids:
        path["checkpoint_id"] = "ckpt_" + secrets.token_hex(16)
    if label == PURGE and real.owns_subject(path.get("subject_id")):
        path["subject_id"] = real.fresh_subject("nothing")
    if label == SAVE and isinstance(case.body, dict) and real.owns_subject(case.body.get("subject_id")):
        case.body = {**case.body, "subject_id": real.fresh_subject("elsewhere")}
    changes_its_thread = (THREAD_PUT, THREAD_WRITES, THREAD_DELETE)
    if label in changes_its_thread and real.owns_thread(unquote(str(path.get("thread_id", "")))):
        path["thread_id"] = real.fresh_subject("thread-elsewhere")
    if label == GRANT_REVOKE and real.kept_grant is not None and path.get("grant_id") == real.kept_grant.grant_id:
        path["grant_id"] = "grant_" + secrets.token_hex(16)
    body = case.body if isinstance(case.body, dict) else {}
    if label == THREAD_COPY and real.owns_thread(body.get("target_thread_id")):
        case.body = {**body, "target_thread_id": real.fresh_subject("copy-elsewhere")}
    if label == THREAD_PRUNE and isinstance(body.get("thread_ids"), list):
        case.body = {**body, "thread_ids": [t for t in body["thread_ids"] if not real.owns_thread(t)] or ["none"]}
    if label == THREAD_RUNS and isinstance(body.get("run_ids"), list):
        case.body = {**body, "run_ids": [r for r in body["run_ids"] if r != f"run-{real.run}"] or ["none"]}


REAL_CASES: dict[int, Fixtures] = {}
"""The cases (by `id()`) pointed at a real resource, between `before_call` and `after_call`."""


def note_what_a_real_resource_answered(case: Any, response: Any, real: Fixtures) -> None:
    """Count the answer; follow the history checkpoint's revision and the lease's token; check a purge's count."""
    label = label_of(case)
    REAL_COUNTS[f"{label} {response.status_code}"] += 1
    if label in CONSOLE_OPERATIONS:
        problem = judge_a_console_answer(case, label, response)
        if problem:
            PROBLEMS.append(f"{label} ({case.path_parameters or {}}): {problem}")
        return
    if label in OAUTH_OPERATIONS:
        problem = judge_a_real_oauth_answer(case, label, response, real)
        if problem:
            PROBLEMS.append(f"{label}: {problem}")
        return
    if label in GRANT_OPERATIONS:
        problem = judge_a_real_grant_answer(case, label, response, real)
        if problem:
            PROBLEMS.append(f"{label} {response.status_code}: {problem}")
        return
    if label in LIMITS_OPERATIONS:
        problem = judge_a_real_limits_answer(case, label, response, real)
        if problem:
            PROBLEMS.append(f"{label} {response.status_code}: {problem}")
        return
    if response.status_code >= 300:
        return
    data = response.json().get("data") or {}
    if response.headers.get("idempotent-replayed"):
        return  # the first answer again: it says nothing of the resource now
    with real.lock:
        if label == RESTORE:
            real.current_revision = max(real.current_revision, int(data["revision"]))
        elif label == ACQUIRE:
            real.lease_token = data["lease_token"]
        elif label == RELEASE:
            real.lease_token = None
    if label == RESUME:
        RESUME_ANSWERS[str(data.get("status"))] += 1
    if label == PURGE:
        expected = {"subject_id": case.path_parameters["subject_id"], "deleted_checkpoints": PURGED_CHECKPOINTS}
        if {name: data.get(name) for name in expected} != expected or data.get("complete") is not True:
            PROBLEMS.append(f"a purge of {PURGED_CHECKPOINTS} checkpoints answered {response.text}")
    if label in THREAD_OPERATIONS:
        problem = judge_a_real_thread_answer(case, label, data, real)
        if problem:
            PROBLEMS.append(f"{label}: {problem}: {response.text[:500]}")


def judge_a_real_thread_answer(case: Any, label: str, data: Any, real: Fixtures) -> str | None:
    """What a real thread's success must hold that schemathesis cannot see; a problem, or None."""
    body = case.body if isinstance(case.body, dict) else {}
    asked = (case.query or {}).get("checkpoint_id")
    if label == THREAD_GET:
        expected = asked or real.thread_checkpoints[-1]
        if data.get("checkpoint_id") != expected or set(data.get("channel_values", {})) != {"small", "large"}:
            return f"a get_tuple of {expected} answered another tuple, or without both its values"
        writes = [w["task_id"] for w in data.get("pending_writes", [])]
        if expected == real.thread_checkpoints[-1] and writes != ["fixture-task"]:
            return f"the latest checkpoint's pending writes are {writes}"
    elif label == THREAD_LIST:
        ids = [item.get("checkpoint_id") for item in data]
        if ids != sorted(ids, reverse=True) or not set(ids) <= set(real.thread_checkpoints):
            return f"a list answered {ids}, not newest first among {real.thread_checkpoints}"
    elif label == THREAD_WRITES:
        if data.get("writes") != len(body.get("writes", [])):
            return f"{len(body.get('writes', []))} writes sent, {data.get('writes')} kept"
    elif label == THREAD_COPY:
        if data.get("copied_checkpoints") != THREAD_CHECKPOINTS:
            return f"a copy of {THREAD_CHECKPOINTS} checkpoints copied {data.get('copied_checkpoints')}"
    elif label == THREAD_PRUNE:
        deleted = 1 if body.get("strategy", "keep_latest") == "keep_latest" else 2
        if data != {"pruned_threads": 1, "deleted_checkpoints": deleted, "complete": True}:
            return f"a prune ({body.get('strategy')}) of a thread of 2 checkpoints deleted {deleted} expected"
    elif label == THREAD_RUNS and data != {"deleted_checkpoints": 2, "complete": True}:
        return "a delete-for-runs of a run of 2 checkpoints"
    return None


# -- labels -----------------------------------------------------------------------------------------------------


def judge_a_case_with_a_negative_part_as_negative(case: Any) -> None:
    """Label a case negative when any of its parts is, as schemathesis' own revalidation of a case does.

    The coverage phase draws header values from letters and digits only, so a header whose pattern needs another
    character (If-Match needs `*` or `"`) gets no positive value there; it then seeds that optional header with a
    negative value (`If-Match: 0`) and still labels the case built on it positive: the "Default positive test case"
    (whose metadata says the header part is negative) and "All required properties and optional 'If-Match'" (whose
    metadata says every part is positive). Judged as what it is, the request must be refused (it is, with 400).
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if any(not part.mode.is_positive for part in meta.components.values()):
        meta.generation.mode = GenerationMode.NEGATIVE
        return
    sent = {name.lower(): value for name, value in (case.headers or {}).items()}
    for header in case.operation.headers:
        value = sent.get(header.name.lower())
        if isinstance(value, str) and not header.is_valid(value):
            # The part too: schemathesis recomputes the case's mode from its parts when it revalidates one.
            meta.components[ParameterLocation.HEADER] = ComponentInfo(mode=GenerationMode.NEGATIVE)
            meta.generation.mode = GenerationMode.NEGATIVE
            return


def leave_out_resources_of_a_positive_save(case: Any) -> None:
    """A save's `resources` must name blobs declared and uploaded before (server-side state, api-v1.md Blobs), with
    unique names and ids: no generated value does, so a schema-valid save with resources is rightly a 400. Positive
    cases are sent without them (negative ones keep theirs: those must be refused); attaching is proven by the blob
    suites (tests/integration/test_resources.py, tests/e2e/test_blobs.py)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    is_save = case.method.upper() == "POST" and case.path == "/v1/checkpoints"
    if is_save and isinstance(case.body, dict) and case.body.get("resources"):
        case.body = {**case.body, "resources": []}


def leave_out_values_without_a_version(case: Any) -> None:
    """A put's `values` may only name channels of its `checkpoint.channel_versions` (docs/api.md, LangGraph threads):
    a rule between two fields, which no schema states, so a schema-valid put naming others is rightly a 400. Positive
    cases are sent without those values (negative ones keep them: those must be refused); the rule itself is proven
    by the thread suites."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or label_of(case) != THREAD_PUT:
        return
    body = case.body if isinstance(case.body, dict) else None
    checkpoint = body.get("checkpoint") if body is not None else None
    if body is None or not isinstance(checkpoint, dict) or not isinstance(body.get("values"), dict):
        return
    versions = checkpoint.get("channel_versions")
    versions = versions if isinstance(versions, dict) else {}
    case.body = {**body, "values": {c: v for c, v in body["values"].items() if c in versions}}


# -- the hooks --------------------------------------------------------------------------------------------------


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    """Judge mislabelled cases as what they are; point some at real resources and keep the rest away from them (a
    PUT of limits at a scratch tenant, whether the run knows where Baton is or not); point a revocation of a key the
    run did not create at a well-formed id no key has (a 404 instead)."""
    judge_a_case_with_a_negative_part_as_negative(case)
    leave_out_resources_of_a_positive_save(case)
    leave_out_values_without_a_version(case)
    real = fixtures()
    if real is not None:
        with real.lock:
            if point_at_a_real_resource(case, real):
                REAL_CASES[id(case)] = real
            else:
                keep_away_from_the_fixtures(case, real)
    set_no_real_tenants_limits(case)
    if case.method.upper() != "DELETE" or case.path != "/v1/keys/{key_id}":
        return
    key_id = (case.path_parameters or {}).get("key_id")
    if isinstance(key_id, str) and KEY_ID.match(key_id) and key_id not in CREATED_KEYS:
        case.path_parameters["key_id"] = "key_" + secrets.token_hex(16)


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Remember every key the run creates; count the cases, those sent to real resources, the fuzzed request headers
    and their answers; hold every OAuth answer to what the document cannot say."""
    label = label_of(case)
    OPERATION_COUNTS[f"{label} {response.status_code}"] += 1
    if label in OAUTH_OPERATIONS or label in OAUTH_DISCOVERY:
        base_url = os.environ.get(URL_VARIABLE, "").rstrip("/")
        problem = judge_an_oauth_answer(case, label, response, base_url)
        if problem:
            PROBLEMS.append(f"{label} {response.status_code}: {problem}")
    real = REAL_CASES.pop(id(case), None)
    if real is not None:
        note_what_a_real_resource_answered(case, response, real)
    sent = {name.lower() for name in (case.headers or {})}
    for name in FUZZED_HEADERS:
        if name.lower() in sent:
            HEADER_COUNTS[f"{name} sent"] += 1
            HEADER_COUNTS[f"{name} {response.status_code}"] += 1
    if response.headers.get("idempotent-replayed"):
        HEADER_COUNTS["Idempotent-Replayed"] += 1
    if case.method.upper() == "POST" and case.path == "/v1/keys" and response.status_code == 201:
        CREATED_KEYS.add(response.json()["data"]["key_id"])
