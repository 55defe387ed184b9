"""Isolation, route by route and caller by caller, over real HTTP against `baton serve`.

A victim tenant holds checkpoints and keys full of distinctive marker strings (tenant, agent, subject, checkpoint
and key ids, state content, key descriptions); so does a second tenant. Every route is called by every kind of
caller (another tenant's key, another agent's key, a key missing the route's scope, revoked, expired, not yet valid
and unknown keys, no key, an OAuth access token, the tenant's own `*` key and the operator key), and each answer must
have the status the contract gives (docs: /work/shared/design/api-v1.md) and must not hold a byte of what that
caller may not see: not in the status line, the headers, the body, nor inside a page cursor. Lists are read with
`limit=1`, so every page and every cursor is looked at.

Positive controls (the `*` key reading the victim's state, the operator listing the victim's keys) prove that the
markers are found where they are shown, so their absence elsewhere means something.

OAuth's routes (issue 13) hold no tenant's data in their answers, and what their forms decide depends on the form
(the key signed in with on the consent form, a code, a token), never on the Authorization header: each caller gets
the answer a request without a key gets. An access token is refused on every route but /mcp (the `access_token`
caller), and at /mcp it acts only as the agent whose key approved it, with no `*`
(`test_an_access_token_acts_only_as_the_agent_whose_key_approved_it`).

The grants those approvals made are listed and revoked through /v1/oauth/grants (keys:manage), as keys are through
/v1/keys: each grant of the set-up is approved for a client of its own whose id and name are markers of the grant's
(tenant, agent), as are the grant's id and its approving key's id, so a listing shows exactly whose grants it
lists. Another tenant's key sees and revokes none of the victim's (its own tenant's only; naming the victim's is
403), another agent's key without `*` only its own agent's (naming another agent in a list is 403, revoking another
agent's grant the 404 of a missing one); the tenant's `*` key and the operator (naming the tenant) list them all.

A tenant's limits (`/v1/tenants/{tenant_id}/limits`) are the operator's alone: `tenants:manage`, which `*` does not
grant. Every other key is refused 403 whichever tenant it names, its own included, and the limits it asked for (the
highest there are, so that none would throttle anyone if let through) are not set; the operator reads them and sets a
scratch tenant's, or the victim's to what they are. Every answer to a key carries `RateLimit`, its own tenant's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest

from tests import proof_counts
from tests.builders import OAUTH_SCOPE, client_registration, code_exchange_form, refresh_form
from tests.e2e.oauth_flow import MCP_ACCEPT, OAuthFlow, mcp_message
from tests.e2e.planted import plant_secret, plant_state_marker
from tests.e2e.server_process import REPO, BatonServe

T_PUT, T_WRITES = "POST /v1/threads/{thread_id}/checkpoints", "POST /v1/threads/{thread_id}/writes"
T_GET, T_LIST = "GET /v1/threads/{thread_id}/checkpoint", "GET /v1/threads/{thread_id}/checkpoints"
T_DELETE, T_COPY = "DELETE /v1/threads/{thread_id}", "POST /v1/threads/{thread_id}/copy"
T_PRUNE, T_RUNS = "POST /v1/threads:prune", "POST /v1/threads:delete-for-runs"
"""The LangGraph thread routes (issue 11)."""
WHOAMI = "GET /v1/whoami"
CONSOLE_PAGE, CONSOLE_ASSET, CONSOLE_SLASH = "GET /console", "GET /console/{asset}", "GET /console/"
ROOT = "GET /"
"""The API's address: a redirect to the console (public)."""
"""The caller's own identity (any valid key) and the console's page and files (public; issue 12)."""
O_RESOURCE, O_RESOURCE_ROOT = (
    "GET /.well-known/oauth-protected-resource/mcp",
    "GET /.well-known/oauth-protected-resource",
)
O_SERVER, O_REGISTER = "GET /.well-known/oauth-authorization-server", "POST /oauth/register"
O_PAGE, O_DECISION = "GET /oauth/authorize", "POST /oauth/authorize"
O_TOKEN, O_REVOKE = "POST /oauth/token", "POST /oauth/revoke"
OAUTH_ROUTES = (O_RESOURCE, O_RESOURCE_ROOT, O_SERVER, O_REGISTER, O_PAGE, O_DECISION, O_TOKEN, O_REVOKE)
"""OAuth's discovery documents and endpoints (public; issue 13)."""
G_LIST, G_REVOKE = "GET /v1/oauth/grants", "DELETE /v1/oauth/grants/{grant_id}"
"""OAuth grants, listed and revoked by whoever manages keys."""
L_GET, L_PUT = "GET /v1/tenants/{tenant_id}/limits", "PUT /v1/tenants/{tenant_id}/limits"
"""A tenant's limits, read and set by the operator alone (`tenants:manage`; `*` does not grant it)."""
A_GET = "GET /v1/audit"
"""A tenant's audit trail: its own (`audit:read`, which `*` grants); another's with `tenants:manage` too."""
U_GET = "GET /v1/usage"
"""A tenant's usage by day: its own (`usage:read`, which `*` grants); another's with `tenants:manage` alone."""
LIMIT_SETTINGS = ("requests_per_minute", "burst", "storage_bytes", "checkpoints")
HARMLESS_LIMITS = {
    "requests_per_minute": 6_000_000,
    "burst": 1_000_000,
    "storage_bytes": 2**53 - 1,
    "checkpoints": 2**53 - 1,
}
"""What the refused PUTs ask for the victim's and the other tenant's limits: the highest each may be, so that a PUT
wrongly let through throttles no one, and still shows (test_refused_and_foreign_calls_changed_nothing: each of those
tenants' settings is still null, the stage's default)."""
RATE_LIMIT_HEADER = re.compile(r'"tenant";r=[0-9]+;t=[0-9]+')
"""What every authenticated answer's `RateLimit` is (its caller's own tenant's requests left, and seconds to full)."""
HOLDING_NO_DATA = (
    "GET /v1/health",
    "GET /v1/openapi.json",
    "GET /v1/schemas/{name}",
    CONSOLE_PAGE,
    CONSOLE_ASSET,
    CONSOLE_SLASH,
    ROOT,
    *OAUTH_ROUTES,
)
"""Routes whose answers hold nothing of any tenant, whoever calls them."""
NOT_FOUND_BODY = {"error": {"code": "NOT_FOUND", "message": "Resource was not found."}}
REVISION_3_NOT_KEPT = {
    "error": {
        "code": "NOT_FOUND",
        "message": (
            "Revision 3 is not kept: this checkpoint keeps revisions 1 to 2, each until it expires; its current "
            "revision is 3."
        ),
        "details": {"current_revision": 3, "kept_revisions": [1, 2]},
    }
}
"""What the caller who may see a checkpoint at revision 3 keeping two is told of its current revision (others: the
plain 404, NOT_FOUND_BODY)."""
ROUTES = (
    "POST /v1/checkpoints",
    "GET /v1/checkpoints",
    "GET /v1/checkpoints/{checkpoint_id}",
    "DELETE /v1/checkpoints/{checkpoint_id}",
    "GET /v1/subjects/{subject_id}/checkpoints",
    "POST /v1/keys",
    "GET /v1/keys",
    "DELETE /v1/keys/{key_id}",
    "POST /v1/blobs",
    "GET /v1/blobs/{blob_id}",
    "GET /v1/checkpoints/{checkpoint_id}/revisions",
    "GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}",
    "POST /v1/checkpoints/{checkpoint_id}/restore",
    "POST /v1/checkpoints/{checkpoint_id}/lease",
    "DELETE /v1/checkpoints/{checkpoint_id}/lease",
    "POST /v1/resume",
    "DELETE /v1/subjects/{subject_id}",
    "GET /v1/health",
    "GET /v1/openapi.json",
    "GET /v1/schemas/{name}",
    T_PUT,
    T_WRITES,
    T_GET,
    T_LIST,
    T_DELETE,
    T_COPY,
    T_PRUNE,
    T_RUNS,
    WHOAMI,
    CONSOLE_PAGE,
    CONSOLE_ASSET,
    CONSOLE_SLASH,
    ROOT,
    *OAUTH_ROUTES,
    G_LIST,
    G_REVOKE,
    L_GET,
    L_PUT,
    U_GET,
    A_GET,
)
CALLERS = (
    "other_tenant",
    "other_agent",
    "missing_scope",
    "revoked",
    "expired",
    "not_yet_valid",
    "unknown",
    "no_key",
    "access_token",
    "own_wildcard",
    "operator",
)
REFUSED = ("revoked", "expired", "not_yet_valid", "unknown", "no_key", "access_token")
"""Callers refused on every route that needs a key: an OAuth access token among them (it works at /mcp alone)."""
EXPIRING_SECONDS = 3.0
MAX_PAGES = 100
KEEP_REVISIONS = 3
LEASE_SECONDS = 3600
"""Leases of the set-up: they outlast the module."""


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the world: two tenants full of markers ---------------------------------------------------------------------


@dataclass
class Party:
    """Markers owned by one (tenant, agent); agent None holds the tenant's own id."""

    tenant: str
    agent: str | None
    markers: set[str] = field(default_factory=set)


@dataclass
class World:
    """Everything the matrix needs: ids, secrets, and who owns which marker."""

    run: str
    victim: str
    other: str
    owner: str
    admin: str
    intruder: str
    stranger: str
    victim_subject: str
    shared_subject: str
    delete_subject: str
    other_subject: str
    history_subject: str
    lease_subject: str
    purge_subject: str
    wildcard_purge_subject: str
    secrets: dict[str, str | None] = field(default_factory=dict)
    """Caller name -> bearer secret (None: no Authorization header)."""
    parties: dict[tuple[str, str | None], Party] = field(default_factory=dict)
    checkpoints: dict[str, str] = field(default_factory=dict)
    """Label -> checkpoint id."""
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Label -> the key as POST /v1/keys answered it (secret included)."""
    blobs: dict[str, str] = field(default_factory=dict)
    """Label -> blob id."""
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Label of a checkpoint -> its lease as POST .../lease answered it (token included)."""
    threads: dict[str, PlantedThread] = field(default_factory=dict)
    """Label -> a LangGraph thread and what was put into it."""
    expiring_at: float = 0.0
    base_url: str = ""
    oauth_client_id: str = ""
    """The OAuth client registered in the set-up, whose grants the matrix asks for."""
    grants: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Label -> a grant of the set-up as the operator's listing shows it (its client a client of its own), with its
    refresh token."""

    def party(self, tenant: str, agent: str | None) -> Party:
        return self.parties.setdefault((tenant, agent), Party(tenant, agent))

    def mark(self, tenant: str, agent: str | None, *markers: str) -> None:
        self.party(tenant, agent).markers.update(markers)


@dataclass
class PlantedThread:
    """A LangGraph thread of the set-up: its owner, its checkpoints (oldest first) and its markers."""

    tenant: str
    agent: str
    thread_id: str
    run_id: str
    checkpoint_ids: list[str]
    task_id: str
    value_marker: str


def thread_value(marker: str) -> dict[str, str]:
    """A typed value whose bytes hold `marker` (the answer carries them base64-encoded)."""
    return {"type": "json", "data": base64.b64encode(json.dumps({"note": marker}).encode()).decode()}


class Api:
    """One HTTP client on the server; every call names its caller."""

    def __init__(self, baton: BatonServe) -> None:
        self.baton = baton
        self.client = httpx.Client(base_url=baton.url, timeout=30)

    def call(
        self,
        secret: str | None,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        form: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request as `secret` (None: no Authorization header), with a JSON `body` or a `form`."""
        sent = dict(headers or {})
        if secret is not None:
            sent["Authorization"] = f"Bearer {secret}"
        return self.client.request(method, path, params=params, json=body, data=form, headers=sent)

    def mint(self, world: World, label: str, tenant: str, agent: str, scopes: list[str], **extra: Any) -> str:
        """A key minted by the operator; its id, description and agent become markers of (tenant, agent)."""
        description = f"desc-{label}-{world.run}"
        body = {"tenant_id": tenant, "agent_id": agent, "scopes": scopes, "description": description, **extra}
        answer = self.call(self.baton.key, "POST", "/v1/keys", body=body)
        assert answer.status_code == 201, answer.text
        data: dict[str, Any] = answer.json()["data"]
        plant_secret(data["secret"])
        world.keys[label] = data
        world.mark(tenant, agent, data["key_id"], description, agent)
        return str(data["secret"])

    def grant(self, world: World, label: str, approving: str, tenant: str, agent: str) -> dict[str, Any]:
        """A grant approved on the consent form with `approving` (a key of (tenant, agent) holding mcp:call) for a
        client registered for it alone; its id and its client's id and name become markers of (tenant, agent)."""
        flow = OAuthFlow(self.client)
        client_name = f"grant-client-{label}-{world.run}"
        flow.register(client_name=client_name)
        tokens = flow.grant(approving)
        plant_secret(tokens["access_token"])
        plant_secret(tokens["refresh_token"])
        # Its id, as the operator lists the tenant's grants (the token answer does not say it)
        params = {"tenant_id": tenant, "agent_id": agent, "limit": 200}
        listed = self.call(self.baton.key, "GET", "/v1/oauth/grants", params=params)
        assert listed.status_code == 200, listed.text
        (grant,) = [g for g in listed.json()["data"] if g["client_id"] == flow.client_id]
        assert grant["client_name"] == client_name, grant
        world.grants[label] = {**grant, "refresh_token": tokens["refresh_token"]}
        world.mark(tenant, agent, grant["grant_id"], flow.client_id, client_name)
        return grant

    def save(
        self, world: World, label: str, secret: str, tenant: str, agent: str, subject: str, kind: str, **extra: Any
    ) -> str:
        """A checkpoint whose state carries a marker of (tenant, agent); its id becomes one too."""
        state_marker = plant_state_marker(f"state-{label}-{world.run}")
        state = {"note": state_marker, "steps": [{"done": state_marker}], "agent": agent}
        body = {"subject_id": subject, "kind": kind, "state": state, "agent_id": agent, **extra}
        answer = self.call(secret, "POST", "/v1/checkpoints", body=body)
        assert answer.status_code in (200, 201), answer.text
        checkpoint_id = str(answer.json()["data"]["checkpoint_id"])
        world.checkpoints[label] = checkpoint_id
        world.mark(tenant, agent, checkpoint_id, state_marker)
        return checkpoint_id

    def declare(self, world: World, label: str, secret: str, tenant: str, agent: str) -> str:
        """A blob whose media type and SHA-256 are markers of (tenant, agent); its id becomes one too."""
        media_type = f"application/x-blob-{label}-{world.run}"
        sha256 = hashlib.sha256(f"blob-{label}-{world.run}".encode()).hexdigest()
        answer = self.call(secret, "POST", "/v1/blobs", body={"sha256": sha256, "size": 1, "media_type": media_type})
        assert answer.status_code == 201, answer.text
        blob_id = str(answer.json()["data"]["blob_id"])
        world.blobs[label] = blob_id
        world.mark(tenant, agent, blob_id, media_type, sha256)
        return blob_id

    def lease(self, world: World, label: str, secret: str, tenant: str, agent: str) -> None:
        """A lease on the checkpoint `label`, whose holder and token are markers of (tenant, agent)."""
        holder = f"holder-{label}-{world.run}"
        body = {"ttl_seconds": LEASE_SECONDS, "holder": holder}
        answer = self.call(secret, "POST", f"/v1/checkpoints/{world.checkpoints[label]}/lease", body=body)
        assert answer.status_code == 201, answer.text
        data: dict[str, Any] = answer.json()["data"]
        world.leases[label] = data
        world.mark(tenant, agent, holder, data["lease_token"])

    def thread(
        self, world: World, label: str, secret: str, tenant: str, agent: str, checkpoints: int = 2
    ) -> PlantedThread:
        """A LangGraph thread of (tenant, agent), put by `secret` for `agent`: a chain of checkpoints whose metadata
        names a run, with a channel value and pending writes; its ids, run, task, metadata and the value's bytes (and
        their base64) become markers of (tenant, agent)."""
        thread = PlantedThread(
            tenant=tenant,
            agent=agent,
            thread_id=f"thread-{label}-{world.run}",
            run_id=f"run-{label}-{world.run}",
            checkpoint_ids=[f"1f0-{label}-{world.run}-{n:03d}" for n in range(checkpoints)],
            task_id=f"task-{label}-{world.run}",
            value_marker=plant_state_marker(f"thread-value-{label}-{world.run}"),
        )
        meta_marker = f"thread-meta-{label}-{world.run}"
        path = f"/v1/threads/{thread.thread_id}"
        parent = None
        for n, checkpoint_id in enumerate(thread.checkpoint_ids):
            value = thread_value(f"{thread.value_marker}-{n}")
            body: dict[str, Any] = {
                "checkpoint": {"v": 4, "id": checkpoint_id, "channel_versions": {"messages": n + 1}},
                "metadata": {"source": "loop", "step": n, "run_id": thread.run_id, "marker": meta_marker},
                "values": {"messages": value},
                "parent_checkpoint_id": parent,
            }
            answer = self.call(secret, "POST", f"{path}/checkpoints", params={"agent_id": agent}, body=body)
            assert answer.status_code == 201, answer.text
            world.mark(tenant, agent, checkpoint_id, value["data"])
            parent = checkpoint_id
        write = thread_value(f"{thread.value_marker}-write")
        writes = {"checkpoint_id": parent, "task_id": thread.task_id, "writes": [{"channel": "messages", **write}]}
        answer = self.call(secret, "POST", f"{path}/writes", params={"agent_id": agent}, body=writes)
        assert answer.status_code == 200, answer.text
        world.mark(tenant, agent, thread.thread_id, thread.run_id, thread.task_id, thread.value_marker, meta_marker)
        world.mark(tenant, agent, write["data"])
        world.threads[label] = thread
        return thread


@pytest.fixture(scope="module")
def world(baton: BatonServe) -> Iterator[World]:
    """Two tenants with checkpoints and keys, and one key per kind of caller."""
    run = uuid.uuid4().hex[:12]
    w = World(
        run=run,
        victim=f"tv{run}",
        other=f"to{run}",
        owner=f"owner-{run}",
        admin=f"admin-{run}",
        intruder=f"intruder-{run}",
        stranger=f"stranger-{run}",
        victim_subject=f"subject-victim-{run}",
        shared_subject=f"subject-shared-{run}",
        delete_subject=f"subject-delete-{run}",
        other_subject=f"subject-other-{run}",
        history_subject=f"subject-history-{run}",
        lease_subject=f"subject-lease-{run}",
        purge_subject=f"subject-purge-{run}",
        wildcard_purge_subject=f"subject-wildcard-purge-{run}",
    )
    api = Api(baton)
    w.base_url = baton.url
    victim, other = w.victim, w.other
    w.mark(victim, None, victim)
    w.mark(other, None, other)
    w.mark(victim, w.owner, w.victim_subject, w.delete_subject, w.history_subject, w.lease_subject)
    w.mark(victim, w.owner, w.purge_subject, w.wildcard_purge_subject)
    w.mark(other, w.stranger, w.other_subject)
    # The expiring key first: the rest of the set-up is time it needs to run out anyway.
    expires = datetime.now(UTC) + timedelta(seconds=EXPIRING_SECONDS)
    w.secrets["expired"] = api.mint(w, "expiring", victim, w.owner, ["*"], expires_at=rfc3339(expires))
    w.expiring_at = expires.timestamp()
    # Keys of the victim tenant, agents interleaved so that key-list pages and cursors mix them.
    admin_secret = api.mint(w, "admin", victim, w.admin, ["*"])
    owner_secret = api.mint(w, "owner-1", victim, w.owner, ["checkpoints:read", "checkpoints:write"])
    intruder_secret = api.mint(
        w,
        "intruder-1",
        victim,
        w.intruder,
        ["checkpoints:read", "checkpoints:write", "checkpoints:delete", "leases:write", "keys:manage"],
    )
    api.mint(w, "owner-2", victim, w.owner, ["checkpoints:read"])
    api.mint(w, "intruder-2", victim, w.intruder, ["checkpoints:read"])
    w.secrets["missing_scope:read_only"] = api.mint(w, "owner-read-only", victim, w.owner, ["checkpoints:read"])
    w.secrets["missing_scope:write_only"] = api.mint(w, "owner-write-only", victim, w.owner, ["checkpoints:write"])
    api.mint(w, "owner-3", victim, w.owner, ["checkpoints:read"])
    api.mint(w, "target-of-wildcard", victim, w.owner, ["checkpoints:read"])
    api.mint(w, "target-of-operator", victim, w.owner, ["checkpoints:read"])
    w.secrets["not_yet_valid"] = api.mint(
        w, "future", victim, w.owner, ["*"], not_before=rfc3339(datetime.now(UTC) + timedelta(hours=1))
    )
    # Revoked before it is ever used: no container can have it cached.
    w.secrets["revoked"] = api.mint(w, "revoked", victim, w.owner, ["*"])
    revoked = api.call(baton.key, "DELETE", f"/v1/keys/{w.keys['revoked']['key_id']}", params={"tenant_id": victim})
    assert revoked.status_code == 200, revoked.text
    # OAuth: the owner's key that approves grants (mcp:call and what the tools need), a registered client, and the
    # access token of a grant it approved (the `access_token` caller).
    owner_mcp = api.mint(w, "owner-mcp", victim, w.owner, ["mcp:call", "checkpoints:read", "checkpoints:write"])
    flow = OAuthFlow(api.client)
    w.oauth_client_id = flow.register(client_name=f"isolation {run}")
    tokens = flow.grant(owner_mcp)
    w.secrets["access_token"] = plant_secret(tokens["access_token"])
    plant_secret(tokens["refresh_token"])
    # The other tenant.
    stranger_secret = api.mint(w, "stranger", other, w.stranger, ["*"])
    api.mint(w, "stranger-2", other, w.stranger, ["checkpoints:read"])
    # OAuth grants, each for a client of its own: the owner's (one that stays, one the `*` key revokes, one the
    # operator revokes), the intruder's (one that stays, one it revokes itself) and the other tenant's.
    intruder_mcp = api.mint(w, "intruder-mcp", victim, w.intruder, ["mcp:call", "checkpoints:read"])
    for label in ("owner", "owner-target-of-wildcard", "owner-target-of-operator"):
        api.grant(w, label, owner_mcp, victim, w.owner)
    for label in ("intruder", "intruder-target-of-intruder"):
        api.grant(w, label, intruder_mcp, victim, w.intruder)
    api.grant(w, "stranger", stranger_secret, other, w.stranger)
    # Checkpoints: the owner's (saved by the `*` key on its behalf), the intruder's, the other tenant's.
    for kind in ("task_state", "conversation", "workflow"):
        api.save(w, f"victim-{kind}", admin_secret, victim, w.owner, w.victim_subject, kind)
    for kind in ("task_state", "workflow"):
        api.save(w, f"victim-shared-{kind}", admin_secret, victim, w.owner, w.shared_subject, kind)
    api.save(w, "victim-delete", admin_secret, victim, w.owner, w.delete_subject, "task_state")
    for kind in ("task_state", "conversation"):
        api.save(w, f"intruder-shared-{kind}", intruder_secret, victim, w.intruder, w.shared_subject, kind)
    api.save(w, "stranger-own", stranger_secret, other, w.stranger, w.other_subject, "task_state")
    # Blobs: the owner's (declared with a key of its own: a blob belongs to the agent that declares it), the other
    # tenant's.
    owner_blobs = api.mint(w, "owner-blobs", victim, w.owner, ["blobs:write", "checkpoints:read"])
    api.declare(w, "victim", owner_blobs, victim, w.owner)
    api.declare(w, "stranger", stranger_secret, other, w.stranger)
    for kind in ("task_state", "conversation"):
        api.save(w, f"stranger-shared-{kind}", stranger_secret, other, w.stranger, w.shared_subject, kind)
    # History: the owner's checkpoint at revision 3 keeps revisions 1 and 2 (each state with a marker of its own);
    # another one, at revision 2, is the one the `*` key restores.
    history = {"keep_revisions": KEEP_REVISIONS}
    for label in ("victim-history-r1", "victim-history-r2", "victim-history"):
        api.save(w, label, admin_secret, victim, w.owner, w.history_subject, "task_state", **history)
    for label in ("victim-wildcard-history-r1", "victim-wildcard-history"):
        api.save(w, label, admin_secret, victim, w.owner, w.history_subject, "workflow", **history)
    # Leases: two leased checkpoints of the owner (the `*` key releases the second), one free for the `*` key.
    for label, kind in (("victim-leased", "task_state"), ("victim-wildcard-leased", "workflow")):
        api.save(w, label, admin_secret, victim, w.owner, w.lease_subject, kind)
        api.lease(w, label, admin_secret, victim, w.owner)
    api.save(w, "victim-lease-target", admin_secret, victim, w.owner, w.lease_subject, "conversation")
    # Purges: a subject of both agents of the victim and of the other tenant, and one the `*` key purges.
    for kind in ("task_state", "conversation"):
        api.save(w, f"victim-purge-{kind}", admin_secret, victim, w.owner, w.purge_subject, kind)
    api.save(w, "intruder-purge", intruder_secret, victim, w.intruder, w.purge_subject, "task_state")
    api.save(w, "stranger-purge", stranger_secret, other, w.stranger, w.purge_subject, "task_state")
    api.save(w, "victim-wildcard-purge", admin_secret, victim, w.owner, w.wildcard_purge_subject, "task_state")
    api.save(w, "intruder-wildcard-purge", intruder_secret, victim, w.intruder, w.wildcard_purge_subject, "workflow")
    # LangGraph threads: the owner's (put by the `*` key on its behalf; the `*` key deletes, prunes, copies and
    # deletes the runs of the dedicated ones), the intruder's and the other tenant's own.
    for label in ("victim", "victim-delete", "victim-prune", "victim-runs", "victim-writes"):
        api.thread(w, label, admin_secret, victim, w.owner, checkpoints=3 if label == "victim-prune" else 2)
    api.thread(w, "intruder", intruder_secret, victim, w.intruder)
    api.thread(w, "stranger", stranger_secret, other, w.stranger)
    w.secrets.update(
        other_tenant=stranger_secret,
        other_agent=intruder_secret,
        own_wildcard=admin_secret,
        operator=baton.key,
        unknown=f"btn_{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}",
        no_key=None,
        owner=owner_secret,
        missing_scope=w.secrets["missing_scope:read_only"],
    )
    yield w
    api.client.close()


# -- reading answers for markers --------------------------------------------------------------------------------


def decoded_cursor(cursor: str) -> str:
    """The text inside an opaque cursor (base64url of JSON today); the cursor itself when it is not base64."""
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return cursor


def everything_in(response: httpx.Response) -> str:
    """Status line, headers, body and decoded cursor of an answer, as one text to search."""
    parts = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    parts.extend(f"{name}: {value}" for name, value in response.headers.items())
    parts.append(response.content.decode("utf-8", "replace"))
    try:
        cursor = response.json().get("meta", {}).get("next_cursor")
    except (ValueError, AttributeError):
        cursor = None
    if isinstance(cursor, str):
        parts.append(decoded_cursor(cursor))
    return "\n".join(parts)


def asked_in(request: httpx.Request) -> str:
    """What the caller itself sent: echoing it back is no leak."""
    return f"{request.method} {request.url}\n{request.content.decode('utf-8', 'replace')}"


def without_request_id(response: httpx.Response) -> Any:
    body = response.json()
    if isinstance(body, dict) and isinstance(body.get("meta"), dict):
        body["meta"] = {k: v for k, v in body["meta"].items() if k != "request_id"}
        if not body["meta"]:
            body.pop("meta")
    return body


def comparable_headers(response: httpx.Response) -> list[tuple[str, str]]:
    """The headers two answers must share: not the date, the request id, nor `RateLimit` (the caller's own tenant's
    requests left and seconds to a full bucket, which move between any two requests; `run_case` checks its form)."""
    return sorted(
        (k.lower(), v) for k, v in response.headers.items() if k.lower() not in ("date", "apigw-requestid", "ratelimit")
    )


def without_code(response: httpx.Response) -> str:
    """A consent form's answer but for the code it minted: its redirect without `code`, or its page."""
    location = response.headers.get("location")
    if location is None:
        return response.text
    parts = urlsplit(location)
    return str(parts._replace(query=urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "code"])).geturl())


# -- the cases --------------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One request of one caller, the statuses it may answer and what else must hold."""

    route: str
    method: str
    path: str
    expect: tuple[int, ...]
    code: str | None = None
    params: dict[str, Any] | None = None
    body: Any = None
    secret_of: str | None = None
    """Which of the world's secrets sends it (default: the caller's own)."""
    paginate: bool = False
    must_show: tuple[str, ...] = ()
    """Positive controls: markers the answer (any page) must contain."""
    check: Callable[[Any], str | None] | None = None
    """Extra check on each page's `data`; returns a problem or None."""
    same_as_missing: tuple[str, str, dict[str, Any] | None] | None = None
    """(method, path, params) of the same request for something that does not exist: the answer must be identical."""
    headers: dict[str, str] | None = None
    """Request headers besides Authorization (sent with the missing one's request too)."""
    missing_body: Any = None
    """The body of the missing one's request, when it is not the same as this one's."""
    own_markers: tuple[str, ...] = ()
    """Markers of the caller's own key the answer may show (whoami names its key, tenant and agent)."""
    not_found: Any = None
    """The body a 404 must be (without its request id): the contract's plain one unless said (a revision not kept of
    a checkpoint the caller can see says which are)."""
    same_without_key: bool = False
    """The answer must be byte for byte the one a request without a key gets (status, headers, body)."""
    form: dict[str, str] | Callable[[Api], dict[str, str]] | None = None
    """A form body (`application/x-www-form-urlencoded`), or what makes it when the case is sent (a fresh code)."""
    answer_check: Callable[[httpx.Response], str | None] | None = None
    """Extra check on the whole answer (OAuth's answers are not the contract's envelope); a problem or None."""
    same_status_without_key: bool = False
    """The same request without a key gets the same status, and the same answer but for a new code (a form whose
    key decides, not the Authorization header)."""
    never_shows: tuple[str, ...] = ()
    """What the answer must not hold even though the request carried it (a form's key)."""


def visible(world: World, caller: str, route: str, params: dict[str, Any] | None) -> set[tuple[str, str | None]]:
    """The (tenant, agent) parties whose markers `caller` may see in the answer of `route`."""
    if route in HOLDING_NO_DATA or route == WHOAMI:
        return set()  # whoami shows the caller's own key only: its `own_markers`
    every = set(world.parties)
    victim = {p for p in every if p[0] == world.victim}
    other = {p for p in every if p[0] == world.other}
    if caller == "other_tenant":
        return other
    if caller == "other_agent":
        return {(world.victim, None), (world.victim, world.intruder)}
    if caller == "own_wildcard":
        return victim
    if caller == "operator" and route in ("POST /v1/keys", "GET /v1/keys", "DELETE /v1/keys/{key_id}"):
        return victim if (params or {}).get("tenant_id") == world.victim or route == "POST /v1/keys" else set()
    if caller == "operator" and route in (G_LIST, G_REVOKE, U_GET, A_GET):
        return victim if (params or {}).get("tenant_id") == world.victim else set()
    return set()  # refused callers see nothing; the operator's checkpoints live in its own tenant


def state_of(caller: str, world: World) -> dict[str, Any]:
    """A state for `caller` to save, with a marker the log audit looks for."""
    marker = plant_state_marker(f"state-by-{caller}-{world.run}")
    return {"note": marker}


def cases_for(caller: str, w: World) -> list[Case]:
    """Every route, called by `caller`."""
    return (
        checkpoint_key_and_blob_cases_for(caller, w)
        + workflow_cases_for(caller, w)
        + thread_cases_for(caller, w)
        + identity_and_console_cases_for(caller, w)
        + oauth_cases_for(caller, w)
        + grant_cases_for(caller, w)
        + limits_cases_for(caller, w)
        + usage_cases_for(caller, w)
        + audit_cases_for(caller, w)
    )


WILDCARD_GRANTS = {"checkpoints:read", "checkpoints:write", "checkpoints:delete", "leases:write", "keys:manage"}
"""Scopes a `*` key holds (docs: api-v1.md, Scopes), whatever else it holds too."""
CALLER_KEYS = {"other_tenant": "stranger", "other_agent": "intruder-1", "missing_scope": "owner-read-only"}
"""The world's key (its label) behind each caller's secret; `own_wildcard` is `admin`, the operator is none of them."""


def identity_and_console_cases_for(caller: str, w: World) -> list[Case]:
    """GET /v1/whoami (the caller's own identity, nothing else) and the console's page and files (the same bytes as
    without a key, for every caller: they hold no data)."""
    console = [
        Case(CONSOLE_PAGE, "GET", "/console", (200,), same_without_key=True),
        Case(CONSOLE_SLASH, "GET", "/console/", (308,), same_without_key=True),
        Case(ROOT, "GET", "/", (302,), same_without_key=True),
        Case(CONSOLE_ASSET, "GET", "/console/app.js", (200,), same_without_key=True),
        Case(CONSOLE_ASSET, "GET", "/console/console.css", (200,), same_without_key=True),
        Case(CONSOLE_ASSET, "GET", f"/console/missing-{uuid.uuid4().hex[:8]}.js", (404,), "NOT_FOUND"),
        Case(CONSOLE_ASSET, "GET", "/console/index.html", (404,), "NOT_FOUND"),
    ]
    if caller in REFUSED:
        return [Case(WHOAMI, "GET", "/v1/whoami", (401,), "UNAUTHENTICATED"), *console]
    if caller == "operator":
        world_keys = {key["key_id"] for key in w.keys.values()}

        def is_the_operator(data: Any) -> str | None:
            if data["key_id"] in world_keys or data["tenant_id"] in (w.victim, w.other):
                return f"the operator's whoami names a key or tenant of the world: {data}"
            return None if "tenants:manage" in data["scopes"] else f"the operator's key without tenants:manage: {data}"

        return [Case(WHOAMI, "GET", "/v1/whoami", (200,), check=is_the_operator), *console]
    key = w.keys[CALLER_KEYS.get(caller, "admin")]
    expected = {name: key[name] for name in ("key_id", "tenant_id", "agent_id", "expires_at")}
    expected["scopes"] = sorted(key["scopes"])

    def is_the_caller(data: Any) -> str | None:
        shown = {name: data.get(name) for name in expected}
        if shown != expected:
            return f"whoami answered {shown}, not the caller's key {expected}"
        effective = set(data.get("effective_scopes", []))
        scopes = set(key["scopes"])
        # `*` grants every scope but tenants:manage; any other key exactly the scopes it was issued with
        wanted_ok = (WILDCARD_GRANTS | scopes) <= effective if "*" in scopes else effective == scopes
        if not wanted_ok or ("tenants:manage" in effective) != ("tenants:manage" in scopes):
            return f"effective scopes {sorted(effective)} for scopes {sorted(scopes)}"
        return None

    own = (key["key_id"], key["tenant_id"], key["agent_id"])
    return [Case(WHOAMI, "GET", "/v1/whoami", (200,), check=is_the_caller, own_markers=own), *console]


FORM_KEY_OUTCOME = {
    "other_tenant": 302,
    "own_wildcard": 302,
    "operator": 302,
    "other_agent": 403,
    "missing_scope": 403,
    "revoked": 401,
    "expired": 401,
    "not_yet_valid": 401,
    "unknown": 401,
    "no_key": 401,
    "access_token": 401,
}
"""What the consent form answers when the caller signs in on it with its own secret: a grant (302) for a key holding
mcp:call (`*` does), the page again refusing a key without it (403) or one that does not work (401): an access token
is no key, and no key at all is a page asking for one."""


def oauth_cases_for(caller: str, w: World) -> list[Case]:
    """OAuth's discovery documents and endpoints, called by `caller`: the answer a request without a key gets, for
    every caller. The consent form's outcome is its key's (the caller's own secret signed in with, or the owner's
    key that holds mcp:call), never the Authorization header's; a code and a grant are the form's and the token's."""
    base = w.base_url
    flow = OAuthFlow(httpx.Client(base_url=base), client_id=w.oauth_client_id)
    _, page_request = flow.authorization(state=f"page-{caller}")
    _, denied = flow.authorization(state=f"deny-{caller}")
    _, own_key_request = flow.authorization(state=f"own-key-{caller}")
    _, owner_request = flow.authorization(state=f"owner-{caller}")
    flow.http.close()
    own_secret = w.secrets[caller] or ""
    owner_mcp = str(w.keys["owner-mcp"]["secret"])
    own_key = w.keys.get(CALLER_KEYS.get(caller, "admin" if caller == "own_wildcard" else ""), {})

    def a_code(api: Api) -> dict[str, str]:
        """A code the owner's key approves now, as the token request exchanging it."""
        code, verifier = OAuthFlow(api.client, client_id=w.oauth_client_id).code(owner_mcp)
        return code_exchange_form(code, w.oauth_client_id, verifier)

    def a_refresh(api: Api) -> dict[str, str]:
        tokens = OAuthFlow(api.client, client_id=w.oauth_client_id).grant(owner_mcp)
        plant_secret(tokens["access_token"])
        plant_secret(tokens["refresh_token"])
        return refresh_form(tokens["refresh_token"], w.oauth_client_id)

    def a_token(api: Api) -> dict[str, str]:
        tokens = OAuthFlow(api.client, client_id=w.oauth_client_id).grant(owner_mcp)
        plant_secret(tokens["access_token"])
        plant_secret(tokens["refresh_token"])
        return {"token": tokens["access_token"]}

    def tokens_of_the_owner(response: httpx.Response) -> str | None:
        answer = response.json()
        for name in ("access_token", "refresh_token"):
            plant_secret(answer.get(name, ""))
        ok = answer.get("scope") == OAUTH_SCOPE and answer.get("token_type") == "Bearer"
        return None if ok and response.headers.get("cache-control") == "no-store" else f"tokens {sorted(answer)}"

    def oauth_error(error: str) -> Callable[[httpx.Response], str | None]:
        return lambda response: None if response.json().get("error") == error else f"not {error}: {response.text}"

    def redirected(decision: str, state: str) -> Callable[[httpx.Response], str | None]:
        def check(response: httpx.Response) -> str | None:
            location = response.headers.get("location", "")
            query = dict(parse_qsl(urlsplit(location).query))
            if not location.startswith(page_request["redirect_uri"]) or query.get("state") != state:
                return f"redirected to {location!r}"
            if query.get("iss") != base:
                return f"an iss of {query.get('iss')!r}"
            if decision == "approve":
                return None if query.get("code", "").startswith("btc_") else f"no code: {location!r}"
            return None if query.get("error") == "access_denied" and "code" not in query else f"{location!r}"

        return check

    def a_page(response: httpx.Response) -> str | None:
        policy = response.headers.get("content-security-policy", "")
        if (
            not response.headers.get("content-type", "").startswith("text/html")
            or "frame-ancestors 'none'" not in policy
        ):
            return f"not the page: {response.headers}"
        return None if "location" not in response.headers else f"a page that redirects: {response.headers}"

    registered = client_registration(client_name=f"isolation {caller}")
    own_outcome = FORM_KEY_OUTCOME[caller]
    return [
        Case(O_RESOURCE, "GET", "/.well-known/oauth-protected-resource/mcp", (200,), same_without_key=True),
        Case(O_RESOURCE_ROOT, "GET", "/.well-known/oauth-protected-resource", (200,), same_without_key=True),
        Case(O_SERVER, "GET", "/.well-known/oauth-authorization-server", (200,), same_without_key=True),
        Case(O_REGISTER, "POST", "/oauth/register", (201,), body=registered,
             answer_check=lambda response: None if response.json()["redirect_uris"] == registered["redirect_uris"]
             else response.text),
        Case(O_PAGE, "GET", "/oauth/authorize", (200,), params=page_request, same_without_key=True,
             answer_check=a_page),
        Case(O_DECISION, "POST", "/oauth/authorize", (302,), form={**denied, "key": owner_mcp, "decision": "deny"},
             same_without_key=True, answer_check=redirected("deny", denied["state"]), never_shows=(owner_mcp,)),
        # Signed in on the form with the caller's own secret: the outcome is that secret's, with a key or without.
        Case(O_DECISION, "POST", "/oauth/authorize", (own_outcome,),
             form={**own_key_request, "key": own_secret, "decision": "approve"}, same_status_without_key=True,
             answer_check=redirected("approve", own_key_request["state"]) if own_outcome == 302 else a_page,
             own_markers=(own_key["key_id"],) if own_key else (),
             never_shows=(own_secret,) if own_secret else ()),
        Case(O_DECISION, "POST", "/oauth/authorize", (302,),
             form={**owner_request, "key": owner_mcp, "decision": "approve"}, same_status_without_key=True,
             answer_check=redirected("approve", owner_request["state"]), never_shows=(owner_mcp,)),
        Case(O_TOKEN, "POST", "/oauth/token", (200,), form=a_code, answer_check=tokens_of_the_owner),
        Case(O_TOKEN, "POST", "/oauth/token", (200,), form=a_refresh, answer_check=tokens_of_the_owner),
        Case(O_TOKEN, "POST", "/oauth/token", (400,), same_without_key=True, answer_check=oauth_error("invalid_grant"),
             form={"grant_type": "authorization_code", "code": f"btc_unknown_{caller}", "client_id": w.oauth_client_id,
                   "code_verifier": "v" * 43}),
        Case(O_REVOKE, "POST", "/oauth/revoke", (200,), form=a_token,
             answer_check=lambda response: None if not response.content else response.text),
        Case(O_REVOKE, "POST", "/oauth/revoke", (200,), form={"token": f"bta_unknown_{caller}"}, same_without_key=True),
    ]  # fmt: skip


GRANT_FIELDS = {
    "grant_id", "client_id", "client_name", "tenant_id", "agent_id", "key_id", "scopes", "resource", "created_at",
    "expires_at",
}  # fmt: skip
"""What a listed grant holds (docs/api.md): never a token."""


def listed_grants_of(tenant: str | None, *agents: str, never: tuple[str, ...] = ()) -> Callable[[Any], str | None]:
    """A check that a page of grants holds only grants of `tenant` (None: any tenant but those `never` names), and
    of `agents` when named, each with exactly the fields of a listed grant (no token)."""

    def check(data: Any) -> str | None:
        for grant in data:
            if set(grant) != GRANT_FIELDS:
                return f"a grant listed with the fields {sorted(grant)}"
            wrong_tenant = grant["tenant_id"] in never or tenant not in (None, grant["tenant_id"])
            if wrong_tenant or (agents and grant["agent_id"] not in agents):
                return f"a grant of {grant['tenant_id']}/{grant['agent_id']}"
        return None

    return check


def grant_cases_for(caller: str, w: World) -> list[Case]:
    """GET /v1/oauth/grants and DELETE /v1/oauth/grants/{grant_id}, called by `caller`: as the key routes answer
    it. A listing shows only the caller's tenant (with `*`, every agent's; without, its own agent's), and a grant the
    caller may not see is as absent as a missing one (404) to a revocation."""
    owner_grant = w.grants["owner"]["grant_id"]
    revoke_owner = f"/v1/oauth/grants/{owner_grant}"
    missing = f"/v1/oauth/grants/grant_{uuid.uuid4().hex}"
    victim = {"tenant_id": w.victim}
    if caller in REFUSED:
        return [
            Case(G_LIST, "GET", "/v1/oauth/grants", (401,), "UNAUTHENTICATED"),
            Case(G_REVOKE, "DELETE", revoke_owner, (401,), "UNAUTHENTICATED"),
        ]
    if caller == "missing_scope":
        return [
            Case(G_LIST, "GET", "/v1/oauth/grants", (403,), "FORBIDDEN"),
            Case(G_REVOKE, "DELETE", revoke_owner, (403,), "FORBIDDEN"),
            Case(G_REVOKE, "DELETE", revoke_owner, (403,), "FORBIDDEN", secret_of="missing_scope:write_only"),
        ]
    if caller == "other_tenant":
        stranger = w.grants["stranger"]
        return [
            Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"limit": 1}, paginate=True,
                 check=listed_grants_of(w.other), must_show=(stranger["grant_id"], stranger["client_name"])),
            Case(G_LIST, "GET", "/v1/oauth/grants", (403,), "FORBIDDEN", params=victim),
            Case(G_LIST, "GET", "/v1/oauth/grants", (403,), "FORBIDDEN", params={**victim, "agent_id": w.owner}),
            Case(G_REVOKE, "DELETE", revoke_owner, (404,), "NOT_FOUND", same_as_missing=("DELETE", missing, None)),
            Case(G_REVOKE, "DELETE", revoke_owner, (403,), "FORBIDDEN", params=victim),
        ]  # fmt: skip
    if caller == "other_agent":
        intruder, own_target = w.grants["intruder"], w.grants["intruder-target-of-intruder"]
        return [
            Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"limit": 1}, paginate=True,
                 check=listed_grants_of(w.victim, w.intruder),
                 must_show=(intruder["grant_id"], intruder["client_name"], own_target["grant_id"])),
            Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"agent_id": w.intruder, "limit": 1},
                 paginate=True, check=listed_grants_of(w.victim, w.intruder), must_show=(intruder["grant_id"],)),
            # Naming another agent in a list: refused, as a key listing is (keys are not work a 404 would hide).
            Case(G_LIST, "GET", "/v1/oauth/grants", (403,), "FORBIDDEN", params={"agent_id": w.owner}),
            Case(G_REVOKE, "DELETE", revoke_owner, (404,), "NOT_FOUND", same_as_missing=("DELETE", missing, None)),
            Case(G_REVOKE, "DELETE", revoke_owner, (404,), "NOT_FOUND", params=victim,
                 same_as_missing=("DELETE", missing, victim)),
            # Its own agent's grant it revokes; once revoked, the 404 of a missing one.
            Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{own_target['grant_id']}", (200,),
                 check=lambda data: None if data == {"grant_id": own_target["grant_id"], "revoked": True} else "no"),
            Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{own_target['grant_id']}", (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", missing, None)),
        ]  # fmt: skip
    if caller == "own_wildcard":
        target = w.grants["owner-target-of-wildcard"]["grant_id"]
        return [
            Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"limit": 1}, paginate=True,
                 check=listed_grants_of(w.victim),
                 must_show=(owner_grant, w.grants["owner"]["client_name"], w.keys["owner-mcp"]["key_id"],
                            w.grants["intruder"]["grant_id"], w.grants["intruder"]["client_name"])),
            Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"agent_id": w.owner, "limit": 1}, paginate=True,
                 check=listed_grants_of(w.victim, w.owner), must_show=(owner_grant,)),
            Case(G_LIST, "GET", "/v1/oauth/grants", (403,), "FORBIDDEN", params={"tenant_id": w.other}),
            Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{target}", (200,),
                 check=lambda data: None if data == {"grant_id": target, "revoked": True} else f"answered {data}"),
            Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{target}", (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", missing, None)),
            Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{w.grants['stranger']['grant_id']}", (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", missing, None)),
            Case(G_REVOKE, "DELETE", "/v1/oauth/grants/grant_not-a-grant-id", (400,), "VALIDATION_ERROR"),
        ]  # fmt: skip
    assert caller == "operator", caller
    target = w.grants["owner-target-of-operator"]["grant_id"]
    return [
        # tenants:manage acts in its own tenant unless it names another: the victim's grants only when named.
        Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={"limit": 200}, paginate=True,
             check=listed_grants_of(None, never=(w.victim, w.other))),
        Case(G_LIST, "GET", "/v1/oauth/grants", (200,), params={**victim, "limit": 1}, paginate=True,
             check=listed_grants_of(w.victim),
             must_show=(owner_grant, w.grants["owner"]["client_name"], w.grants["intruder"]["grant_id"])),
        Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{target}", (404,), "NOT_FOUND",
             same_as_missing=("DELETE", missing, None)),
        Case(G_REVOKE, "DELETE", f"/v1/oauth/grants/{target}", (200,), params=victim,
             check=lambda data: None if data == {"grant_id": target, "revoked": True} else f"answered {data}"),
    ]  # fmt: skip


def limits_are(tenant: str, settings: Mapping[str, int | None]) -> Callable[[Any], str | None]:
    """A check that a tenant's limits are `tenant`'s, with exactly `settings` (a setting left out: null, the stage's
    default), and that what applies is each setting, or a default where there is none."""
    expected = {name: settings.get(name) for name in LIMIT_SETTINGS}

    def check(data: Any) -> str | None:
        shown = {name: data.get(name) for name in LIMIT_SETTINGS}
        if data.get("tenant_id") != tenant or shown != expected:
            return f"the limits of {data.get('tenant_id')} are {shown}, expected {tenant}'s {expected}"
        effective = data.get("effective") or {}
        for name, value in expected.items():
            applied = effective.get(name)
            if not isinstance(applied, int) or (value is not None and applied != value):
                return f"{name} {value} applies as {applied}"
        return None

    return check


def names_the_path_tenant(response: httpx.Response) -> str | None:
    """A check that a 400 names the path parameter `/tenant_id` (in: path)."""
    errors = response.json()["error"].get("details", {}).get("errors", [])
    named = [(e.get("pointer"), e.get("in")) for e in errors]
    return None if named == [("/tenant_id", "path")] else f"the 400 names {named}: {response.text}"


def lacks_tenants_manage(response: httpx.Response) -> str | None:
    """A check that a 403 says which scope the key lacks: tenants:manage (whatever else it holds, `*` included)."""
    message = response.json()["error"]["message"]
    return None if "tenants:manage" in message else f"a 403 that does not name tenants:manage: {message}"


def limits_cases_for(caller: str, w: World) -> list[Case]:
    """GET and PUT /v1/tenants/{tenant_id}/limits, called by `caller`: the operator's alone (`tenants:manage`, which
    `*` does not grant); every other key is refused 403 whichever tenant it names (its own too), no key or an access
    token 401. The refused PUTs ask the victim's and the other tenant's limits to be `HARMLESS_LIMITS`, and change
    nothing (test_refused_and_foreign_calls_changed_nothing); the operator's PUTs set a scratch tenant's limits (no
    one's requests), or the victim's to what they are already (null)."""
    victim, other = f"/v1/tenants/{w.victim}/limits", f"/v1/tenants/{w.other}/limits"
    scratch_id = f"isolation-limits-{w.run}"
    scratch = f"/v1/tenants/{scratch_id}/limits"
    if caller in REFUSED:
        return [
            Case(L_GET, "GET", victim, (401,), "UNAUTHENTICATED"),
            Case(L_PUT, "PUT", victim, (401,), "UNAUTHENTICATED", body=HARMLESS_LIMITS),
        ]

    def refused(path: str, body: Any = None, secret_of: str | None = None) -> Case:
        """A GET (no body) or a PUT of `body`, refused 403 for want of tenants:manage."""
        route, method = (L_GET, "GET") if body is None else (L_PUT, "PUT")
        return Case(route, method, path, (403,), "FORBIDDEN", body=body, secret_of=secret_of,
                    answer_check=lacks_tenants_manage)  # fmt: skip

    if caller == "missing_scope":
        read_only, write_only = "missing_scope:read_only", "missing_scope:write_only"
        return [
            refused(victim, secret_of=read_only),
            refused(victim, secret_of=write_only),
            refused(victim, HARMLESS_LIMITS, secret_of=read_only),
            refused(victim, HARMLESS_LIMITS, secret_of=write_only),
        ]
    if caller in ("other_tenant", "other_agent", "own_wildcard"):
        # Another tenant's `*` key, another agent's key managing keys, the tenant's own `*` key: its own tenant,
        # the other one, and a tenant no one has, all alike.
        return [
            *(refused(path) for path in (victim, other, scratch)),
            *(refused(path, HARMLESS_LIMITS) for path in (victim, other, scratch)),
        ]
    assert caller == "operator", caller
    low = {"requests_per_minute": 1, "burst": 1, "storage_bytes": 0, "checkpoints": 0}
    unset = dict.fromkeys(LIMIT_SETTINGS)
    return [
        # The victim's, never set: null, the stage's defaults apply; set again to what they are (null).
        Case(L_GET, "GET", victim, (200,), check=limits_are(w.victim, {})),
        Case(L_PUT, "PUT", victim, (200,), body={}, check=limits_are(w.victim, {})),
        Case(L_PUT, "PUT", victim, (200,), body=unset, check=limits_are(w.victim, {})),
        Case(L_GET, "GET", other, (200,), check=limits_are(w.other, {})),
        # A scratch tenant's: set low, read back; the body replaces every setting (one left out goes back to null).
        Case(L_PUT, "PUT", scratch, (200,), body=low, check=limits_are(scratch_id, low)),
        Case(L_GET, "GET", scratch, (200,), check=limits_are(scratch_id, low)),
        Case(L_PUT, "PUT", scratch, (200,), body={"burst": 5}, check=limits_are(scratch_id, {"burst": 5})),
        Case(L_GET, "GET", scratch, (200,), check=limits_are(scratch_id, {"burst": 5})),
        # No tenant id but one of its form in the path; no other setting in the body (a tenant_id neither).
        Case(L_GET, "GET", "/v1/tenants/Isolation-Limits/limits", (400,), "VALIDATION_ERROR",
             answer_check=names_the_path_tenant),
        Case(L_PUT, "PUT", f"/v1/tenants/{'t' * 65}/limits", (400,), "VALIDATION_ERROR", body=low,
             answer_check=names_the_path_tenant),
        Case(L_PUT, "PUT", scratch, (400,), "VALIDATION_ERROR", body={**low, "tenant_id": w.victim}),
        Case(L_PUT, "PUT", scratch, (400,), "VALIDATION_ERROR", body={"burst": 0}),
        Case(L_GET, "GET", scratch, (200,), check=limits_are(scratch_id, {"burst": 5})),
    ]  # fmt: skip


def usage_of(tenant: str) -> Callable[[Any], str | None]:
    """A check that a usage answer is `tenant`'s, over the 30 days ending today (the session's server writes its
    counts every 100 requests: the figures themselves are tests/e2e/test_usage.py's)."""

    def check(data: Any) -> str | None:
        days = data.get("days") or []
        if data.get("tenant_id") != tenant or len(days) != 30:
            return f"the usage of {data.get('tenant_id')} over {len(days)} days, expected {tenant}'s over 30"
        if days[-1].get("date") != datetime.now(UTC).date().isoformat():
            return f"the days end at {days[-1].get('date')}, not today"
        return None

    return check


def lacks(scope: str) -> Callable[[httpx.Response], str | None]:
    """A check that a 403 names the scope the key lacks."""

    def check(response: httpx.Response) -> str | None:
        message = response.json()["error"]["message"]
        return None if scope in message else f"a 403 that does not name {scope}: {message}"

    return check


def usage_cases_for(caller: str, w: World) -> list[Case]:
    """GET /v1/usage, called by `caller`: a key with `usage:read` (`*` grants it) reads its own tenant's figures,
    naming it or not; naming another tenant is 403 without `tenants:manage`; the operator reads the victim's."""
    if caller in REFUSED:
        return [Case(U_GET, "GET", "/v1/usage", (401,), "UNAUTHENTICATED")]
    if caller in ("missing_scope", "other_agent"):
        secrets = ("missing_scope:read_only", "missing_scope:write_only") if caller == "missing_scope" else (None,)
        return [
            Case(U_GET, "GET", "/v1/usage", (403,), "FORBIDDEN", params=params, secret_of=secret,
                 answer_check=lacks("usage:read"))
            for secret in secrets
            for params in (None, {"tenant_id": w.victim})
        ]  # fmt: skip
    if caller in ("other_tenant", "own_wildcard"):
        own, foreign = (w.other, w.victim) if caller == "other_tenant" else (w.victim, w.other)
        return [
            Case(U_GET, "GET", "/v1/usage", (200,), check=usage_of(own)),
            Case(U_GET, "GET", "/v1/usage", (200,), params={"tenant_id": own}, check=usage_of(own)),
            Case(U_GET, "GET", "/v1/usage", (403,), "FORBIDDEN", params={"tenant_id": foreign},
                 answer_check=lacks_tenants_manage),
        ]  # fmt: skip
    assert caller == "operator", caller
    return [
        Case(U_GET, "GET", "/v1/usage", (200,), params={"tenant_id": w.victim}, check=usage_of(w.victim)),
        Case(U_GET, "GET", "/v1/usage", (400,), "VALIDATION_ERROR",
             params={"tenant_id": w.victim, "from": "2026-02-30"}),
    ]  # fmt: skip


def whole_trail(at_least: int) -> Callable[[Any], str | None]:
    """A check that a page of audit events is a whole stretch of the caller's chain: newest first, numbered one
    after another, each naming the one before, each hash its content's (`client/audit.py`); and at least this many."""
    from baton_checkpoints.client.audit import event_hash

    def check(data: Any) -> str | None:
        if len(data) < at_least:
            return f"{len(data)} events, expected at least {at_least}"
        for newer, older in itertools.pairwise(data):
            if newer["seq"] != older["seq"] + 1 or newer["prev_hash"] != older["hash"]:
                return f"event {newer['seq']} does not follow event {older['seq']}"
        altered = [e["seq"] for e in data if event_hash(e) != e["hash"]]
        return f"events whose hash is not their content's: {altered}" if altered else None

    return check


def audit_cases_for(caller: str, w: World) -> list[Case]:
    """GET /v1/audit, called by `caller`: a key with `audit:read` (`*` grants it) reads its own tenant's trail, naming
    it or not; naming another tenant is 403 without `tenants:manage`; the operator reads the victim's; a key without
    `audit:read` is refused. The victim's trail holds its keys' issuing (the set-up's), so the tenant's own `*` key
    and the operator read a whole stretch of it, and no one else sees any of it."""
    if caller in REFUSED:
        return [Case(A_GET, "GET", "/v1/audit", (401,), "UNAUTHENTICATED")]
    if caller in ("missing_scope", "other_agent"):
        secrets = ("missing_scope:read_only", "missing_scope:write_only") if caller == "missing_scope" else (None,)
        return [
            Case(A_GET, "GET", "/v1/audit", (403,), "FORBIDDEN", params=params, secret_of=secret,
                 answer_check=lacks("audit:read"))
            for secret in secrets
            for params in (None, {"tenant_id": w.victim})
        ]  # fmt: skip
    if caller == "own_wildcard":
        return [
            Case(A_GET, "GET", "/v1/audit", (200,), params={"limit": 100}, check=whole_trail(5)),
            Case(A_GET, "GET", "/v1/audit", (200,), params={"limit": 100, "tenant_id": w.victim}, check=whole_trail(5)),
            Case(A_GET, "GET", "/v1/audit", (403,), "FORBIDDEN", params={"tenant_id": w.other},
                 answer_check=lacks_tenants_manage),
        ]  # fmt: skip
    # Another tenant's `*` key, the operator: their own tenants' trails, which hold nothing of the victim's but the
    # subject id they themselves purged in their own tenant (the matrix sends each caller the victim's subject)
    own = (w.purge_subject,)
    cases = [
        Case(A_GET, "GET", "/v1/audit", (200,), params={"limit": 100}, check=whole_trail(0), own_markers=own),
        Case(A_GET, "GET", "/v1/audit", (200,), params={"limit": 1, "action": "key.issued"}, paginate=True),
    ]
    if caller == "other_tenant":
        return [
            *cases,
            Case(A_GET, "GET", "/v1/audit", (403,), "FORBIDDEN", params={"tenant_id": w.victim},
                 answer_check=lacks_tenants_manage),
        ]  # fmt: skip
    assert caller == "operator", caller
    return [
        *cases,
        Case(A_GET, "GET", "/v1/audit", (200,), params={"limit": 100, "tenant_id": w.victim}, check=whole_trail(5)),
        Case(A_GET, "GET", "/v1/audit", (400,), "VALIDATION_ERROR", params={"tenant_id": "Not A Tenant"}),
    ]


def checkpoint_key_and_blob_cases_for(caller: str, w: World) -> list[Case]:
    """The checkpoint, key, blob and public routes, called by `caller`."""
    victim, other = w.victim, w.other
    victim_checkpoint = w.checkpoints["victim-task_state"]
    missing_checkpoint = f"ckpt_{uuid.uuid4().hex}"
    missing_key = f"key_{uuid.uuid4().hex}"
    owner_key = w.keys["owner-1"]["key_id"]
    lookup = {"subject_id": w.victim_subject, "kind": "workflow"}
    missing_lookup = {"subject_id": f"subject-missing-{uuid.uuid4().hex}", "kind": "workflow"}
    by_id = f"/v1/checkpoints/{victim_checkpoint}"
    missing_by_id = f"/v1/checkpoints/{missing_checkpoint}"
    victim_list = f"/v1/subjects/{w.victim_subject}/checkpoints"
    shared_list = f"/v1/subjects/{w.shared_subject}/checkpoints"
    public = [
        Case("GET /v1/health", "GET", "/v1/health", (200,)),
        Case("GET /v1/openapi.json", "GET", "/v1/openapi.json", (200,)),
        Case("GET /v1/schemas/{name}", "GET", "/v1/schemas/opencheckpoint-0.1.json", (200,)),
    ]
    save_body = {"subject_id": w.shared_subject, "kind": "task_state", "state": state_of(caller, w)}
    blob_body = {"sha256": hashlib.sha256(caller.encode()).hexdigest(), "size": 1, "media_type": "text/plain"}
    victim_blob = f"/v1/blobs/{w.blobs['victim']}"
    stranger_blob = f"/v1/blobs/{w.blobs['stranger']}"
    missing_blob = f"/v1/blobs/blob_{uuid.uuid4().hex}"

    def only_agents(*agents: str) -> Callable[[Any], str | None]:
        def check(data: Any) -> str | None:
            seen = {item.get("agent_id") for item in data}
            return None if seen <= set(agents) else f"items of agents {sorted(seen - set(agents))}"

        return check

    def only_tenant(tenant: str) -> Callable[[Any], str | None]:
        def check(data: Any) -> str | None:
            seen = {item.get("tenant_id") for item in data}
            return None if seen <= {tenant} else f"keys of tenants {sorted(seen - {tenant})}"

        return check

    if caller in REFUSED:
        everything = [
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (401,), "UNAUTHENTICATED", body=save_body),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (401,), "UNAUTHENTICATED", params=lookup),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (401,), "UNAUTHENTICATED"),
            Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE", by_id, (401,), "UNAUTHENTICATED"),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (401,), "UNAUTHENTICATED"),
            Case(
                "POST /v1/keys",
                "POST",
                "/v1/keys",
                (401,),
                "UNAUTHENTICATED",
                body={"agent_id": w.owner, "scopes": ["checkpoints:read"]},
            ),
            Case("GET /v1/keys", "GET", "/v1/keys", (401,), "UNAUTHENTICATED"),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{owner_key}", (401,), "UNAUTHENTICATED"),
            Case("POST /v1/blobs", "POST", "/v1/blobs", (401,), "UNAUTHENTICATED", body=blob_body),
            Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (401,), "UNAUTHENTICATED"),
        ]
        return everything + public

    if caller == "missing_scope":
        read_only, write_only = "missing_scope:read_only", "missing_scope:write_only"
        return [
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (403,), "FORBIDDEN", body=save_body,
                 secret_of=read_only),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (403,), "FORBIDDEN",
                 params={**lookup, "agent_id": w.owner}, secret_of=write_only),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (403,), "FORBIDDEN", secret_of=write_only),
            Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE", by_id, (403,), "FORBIDDEN",
                 secret_of=read_only),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (403,), "FORBIDDEN",
                 secret_of=write_only),
            Case("POST /v1/keys", "POST", "/v1/keys", (403,), "FORBIDDEN",
                 body={"agent_id": w.owner, "scopes": ["checkpoints:read"]}, secret_of=read_only),
            Case("GET /v1/keys", "GET", "/v1/keys", (403,), "FORBIDDEN", secret_of=read_only),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{owner_key}", (403,), "FORBIDDEN",
                 secret_of=read_only),
            Case("POST /v1/blobs", "POST", "/v1/blobs", (403,), "FORBIDDEN", body=blob_body, secret_of=read_only),
            Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (403,), "FORBIDDEN", secret_of=write_only),
            *public,
        ]  # fmt: skip

    if caller == "other_tenant":
        return [
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (200, 201), body=save_body),
            # `tenant_id` is no field of a save: the unknown-field 400 whichever tenant it names.
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
                 body={**save_body, "tenant_id": victim}),
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
                 body={**save_body, "tenant_id": other}),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND", params=lookup,
                 same_as_missing=("GET", "/v1/checkpoints", missing_lookup)),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND",
                 params={**lookup, "agent_id": w.owner}),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (404,), "NOT_FOUND",
                 same_as_missing=("GET", missing_by_id, None)),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", f"/v1/checkpoints/{w.checkpoints['stranger-own']}",
                 (200,), must_show=(w.checkpoints["stranger-own"],)),
            Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE", by_id, (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", missing_by_id, None)),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (200,),
                 check=lambda data: None if data == [] else "a non-empty list"),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", shared_list, (200,), params={"limit": 1},
                 paginate=True, check=only_agents(w.stranger),
                 must_show=(w.checkpoints["stranger-shared-task_state"],
                            w.checkpoints["stranger-shared-conversation"])),
            Case("POST /v1/keys", "POST", "/v1/keys", (403,), "FORBIDDEN",
                 body={"tenant_id": victim, "agent_id": w.stranger, "scopes": ["checkpoints:read"]}),
            Case("POST /v1/keys", "POST", "/v1/keys", (201,),
                 body={"agent_id": w.stranger, "scopes": ["checkpoints:read"]}),
            Case("GET /v1/keys", "GET", "/v1/keys", (200,), params={"limit": 1}, paginate=True,
                 check=only_tenant(other), must_show=(w.keys["stranger"]["key_id"],)),
            Case("GET /v1/keys", "GET", "/v1/keys", (403,), "FORBIDDEN", params={"tenant_id": victim}),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{owner_key}", (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", f"/v1/keys/{missing_key}", None)),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{owner_key}", (403,), "FORBIDDEN",
                 params={"tenant_id": victim}),
            Case("POST /v1/blobs", "POST", "/v1/blobs", (201,), body=blob_body),
            Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (404,), "NOT_FOUND",
                 same_as_missing=("GET", missing_blob, None)),
            Case("GET /v1/blobs/{blob_id}", "GET", stranger_blob, (200,), must_show=(w.blobs["stranger"],)),
            *public,
        ]  # fmt: skip

    if caller == "other_agent":
        return [
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (200, 201), body=save_body),
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (403,), "FORBIDDEN",
                 body={**save_body, "agent_id": w.owner}),
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
                 body={**save_body, "tenant_id": victim}),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND", params=lookup,
                 same_as_missing=("GET", "/v1/checkpoints", missing_lookup)),
            # Naming another agent in a read: the same 404 as a missing checkpoint.
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND",
                 params={**lookup, "agent_id": w.owner},
                 same_as_missing=("GET", "/v1/checkpoints", missing_lookup)),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (404,), "NOT_FOUND",
                 same_as_missing=("GET", missing_by_id, None)),
            Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE", by_id, (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", missing_by_id, None)),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (200,),
                 check=lambda data: None if data == [] else "a non-empty list"),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", shared_list, (200,), params={"limit": 1},
                 paginate=True, check=only_agents(w.intruder),
                 must_show=(w.checkpoints["intruder-shared-task_state"],
                            w.checkpoints["intruder-shared-conversation"])),
            # Naming another agent in a list: the 404 of an agent that has nothing (issue 9), never a 403.
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", shared_list, (404,), "NOT_FOUND",
                 params={"agent_id": w.owner},
                 same_as_missing=("GET", shared_list, {"agent_id": f"agent-missing-{uuid.uuid4().hex[:8]}"})),
            Case("POST /v1/keys", "POST", "/v1/keys", (403,), "FORBIDDEN",
                 body={"agent_id": w.owner, "scopes": ["checkpoints:read"]}),
            Case("POST /v1/keys", "POST", "/v1/keys", (403,), "FORBIDDEN",
                 body={"agent_id": w.intruder, "scopes": ["*"]}),
            Case("POST /v1/keys", "POST", "/v1/keys", (201,),
                 body={"agent_id": w.intruder, "scopes": ["checkpoints:read"]}),
            Case("GET /v1/keys", "GET", "/v1/keys", (200,), params={"limit": 1}, paginate=True,
                 check=only_agents(w.intruder),
                 must_show=(w.keys["intruder-1"]["key_id"], w.keys["intruder-2"]["key_id"])),
            Case("GET /v1/keys", "GET", "/v1/keys", (403,), "FORBIDDEN", params={"agent_id": w.owner}),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{owner_key}", (404,), "NOT_FOUND",
                 same_as_missing=("DELETE", f"/v1/keys/{missing_key}", None)),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{w.keys['admin']['key_id']}", (404,),
                 "NOT_FOUND"),
            # Without blobs:write it declares nothing; another agent's blob is as absent as a missing one.
            Case("POST /v1/blobs", "POST", "/v1/blobs", (403,), "FORBIDDEN", body=blob_body),
            Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (404,), "NOT_FOUND",
                 same_as_missing=("GET", missing_blob, None)),
            *public,
        ]  # fmt: skip

    if caller == "own_wildcard":
        victim_ids = tuple(w.checkpoints[f"victim-{kind}"] for kind in ("task_state", "conversation", "workflow"))
        return [
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (200, 201),
                 body={**save_body, "kind": "cursor", "agent_id": w.owner}),
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
                 body={**save_body, "tenant_id": victim}),
            Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
                 body={**save_body, "tenant_id": other}),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (200,), params={**lookup, "agent_id": w.owner},
                 must_show=(w.checkpoints["victim-workflow"], f"state-victim-workflow-{w.run}")),
            Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND", params=lookup),
            Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (200,),
                 must_show=(f"state-victim-task_state-{w.run}",)),
            Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE",
                 f"/v1/checkpoints/{w.checkpoints['victim-delete']}", (200,)),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (200,), params={"limit": 1},
                 paginate=True, must_show=victim_ids, check=only_agents(w.owner)),
            Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", shared_list, (200,), params={"limit": 1},
                 paginate=True, check=only_agents(w.owner, w.intruder),
                 must_show=(w.checkpoints["victim-shared-workflow"],
                            w.checkpoints["intruder-shared-conversation"])),
            Case("POST /v1/keys", "POST", "/v1/keys", (201,),
                 body={"agent_id": w.owner, "scopes": ["checkpoints:read"]}),
            Case("POST /v1/keys", "POST", "/v1/keys", (403,), "FORBIDDEN",
                 body={"tenant_id": other, "agent_id": w.owner, "scopes": ["checkpoints:read"]}),
            Case("GET /v1/keys", "GET", "/v1/keys", (200,), params={"limit": 1}, paginate=True,
                 check=only_tenant(victim), must_show=(owner_key, w.keys["intruder-1"]["key_id"])),
            Case("GET /v1/keys", "GET", "/v1/keys", (403,), "FORBIDDEN", params={"tenant_id": other}),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{w.keys['target-of-wildcard']['key_id']}",
                 (200,)),
            Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{w.keys['stranger']['key_id']}", (404,),
                 "NOT_FOUND"),
            Case("POST /v1/blobs", "POST", "/v1/blobs", (201,), body=blob_body),
            Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (200,),
                 must_show=(w.blobs["victim"], f"application/x-blob-victim-{w.run}")),
            Case("GET /v1/blobs/{blob_id}", "GET", stranger_blob, (404,), "NOT_FOUND",
                 same_as_missing=("GET", missing_blob, None)),
            *public,
        ]  # fmt: skip

    assert caller == "operator", caller
    return [
        Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (200, 201), body=save_body),
        # tenants:manage or not, `tenant_id` is no field of a save.
        Case("POST /v1/checkpoints", "POST", "/v1/checkpoints", (400,), "VALIDATION_ERROR",
             body={**save_body, "tenant_id": victim}),
        Case("GET /v1/checkpoints", "GET", "/v1/checkpoints", (404,), "NOT_FOUND",
             params={**lookup, "agent_id": w.owner}),
        Case("GET /v1/checkpoints/{checkpoint_id}", "GET", by_id, (404,), "NOT_FOUND",
             same_as_missing=("GET", missing_by_id, None)),
        Case("DELETE /v1/checkpoints/{checkpoint_id}", "DELETE", by_id, (404,), "NOT_FOUND",
             same_as_missing=("DELETE", missing_by_id, None)),
        Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", victim_list, (200,),
             check=lambda data: None if data == [] else "a non-empty list"),
        Case("GET /v1/subjects/{subject_id}/checkpoints", "GET", shared_list, (200,), params={"limit": 1},
             paginate=True, check=only_agents("operator")),
        Case("POST /v1/keys", "POST", "/v1/keys", (201,),
             body={"tenant_id": victim, "agent_id": w.owner, "scopes": ["checkpoints:read"]}),
        Case("GET /v1/keys", "GET", "/v1/keys", (200,), params={"tenant_id": victim, "limit": 1}, paginate=True,
             check=only_tenant(victim), must_show=(owner_key, w.keys["owner-2"]["description"])),
        Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{w.keys['target-of-operator']['key_id']}", (404,),
             "NOT_FOUND"),
        Case("DELETE /v1/keys/{key_id}", "DELETE", f"/v1/keys/{w.keys['target-of-operator']['key_id']}", (200,),
             params={"tenant_id": victim}),
        Case("POST /v1/blobs", "POST", "/v1/blobs", (201,), body=blob_body),
        Case("GET /v1/blobs/{blob_id}", "GET", victim_blob, (404,), "NOT_FOUND",
             same_as_missing=("GET", missing_blob, None)),
        *public,
    ]  # fmt: skip


def resume_answer(status: str, *agents: str) -> Callable[[Any], str | None]:
    """A check that a resume answered `status`, and (ambiguous) only candidates of `agents`."""

    def check(data: Any) -> str | None:
        if data.get("status") != status:
            return f"resume answered {data.get('status')!r}, expected {status!r}"
        seen = {candidate.get("agent_id") for candidate in data.get("candidates", [])}
        return None if seen <= set(agents) else f"candidates of agents {sorted(seen - set(agents))}"

    return check


def purge_answer(subject: str, deleted: int) -> Callable[[Any], str | None]:
    """A check that a purge of `subject` deleted `deleted` checkpoints, and all it had to."""
    expected = {"subject_id": subject, "deleted_checkpoints": deleted, "complete": True}
    return lambda data: None if data == expected else f"the purge answered {data}, expected {expected}"


def revisions_are(*revisions: int) -> Callable[[Any], str | None]:
    """A check that a list of kept revisions holds exactly `revisions`, newest first."""
    return lambda data: None if [r.get("revision") for r in data] == list(revisions) else f"revisions {data}"


def workflow_cases_for(caller: str, w: World) -> list[Case]:
    """The history, lease, resume and purge routes, called by `caller`.

    Foreign callers (another tenant, another agent without `*`, the operator) aim at the owner's checkpoints, and
    with everything right but the caller (the lease's own token, a kept revision): each answer must be the 404 of a
    checkpoint that does not exist, and change nothing (test_refused_and_foreign_calls_changed_nothing). A purge is
    tenant-wide: another tenant's purges only its own checkpoints of the same subject id.
    """
    history = w.checkpoints["victim-history"]
    missing = f"ckpt_{uuid.uuid4().hex}"
    revisions, missing_revisions = f"/v1/checkpoints/{history}/revisions", f"/v1/checkpoints/{missing}/revisions"
    revision, missing_revision = f"{revisions}/1", f"{missing_revisions}/1"
    restore, missing_restore = f"/v1/checkpoints/{history}/restore", f"/v1/checkpoints/{missing}/restore"
    restore_body = {"revision": 1}
    leased = w.checkpoints["victim-leased"]
    lease_token = {"Lease-Token": w.leases["victim-leased"]["lease_token"]}
    acquire_body = {"ttl_seconds": 60}
    missing_lease = f"/v1/checkpoints/{missing}/lease"
    resume_victim = {"subject_id": w.victim_subject}
    resume_owner = {"subject_id": w.victim_subject, "agent_id": w.owner, "kind": "task_state"}
    resume_by_id = {"subject_id": w.victim_subject, "checkpoint_id": w.checkpoints["victim-task_state"]}
    resume_missing_id = {"subject_id": w.victim_subject, "checkpoint_id": missing}
    purge = f"/v1/subjects/{w.purge_subject}"

    if caller in REFUSED:
        return [
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions", "GET", revisions, (401,), "UNAUTHENTICATED"),
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}", "GET", revision, (401,),
                 "UNAUTHENTICATED"),
            Case("POST /v1/checkpoints/{checkpoint_id}/restore", "POST", restore, (401,), "UNAUTHENTICATED",
                 body=restore_body),
            Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST", f"/v1/checkpoints/{history}/lease", (401,),
                 "UNAUTHENTICATED", body=acquire_body),
            Case("DELETE /v1/checkpoints/{checkpoint_id}/lease", "DELETE", f"/v1/checkpoints/{leased}/lease", (401,),
                 "UNAUTHENTICATED", headers=lease_token),
            Case("POST /v1/resume", "POST", "/v1/resume", (401,), "UNAUTHENTICATED", body=resume_owner),
            Case("DELETE /v1/subjects/{subject_id}", "DELETE", purge, (401,), "UNAUTHENTICATED"),
        ]  # fmt: skip

    if caller == "missing_scope":
        read_only, write_only = "missing_scope:read_only", "missing_scope:write_only"
        return [
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions", "GET", revisions, (403,), "FORBIDDEN",
                 secret_of=write_only),
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}", "GET", revision, (403,), "FORBIDDEN",
                 secret_of=write_only),
            Case("POST /v1/checkpoints/{checkpoint_id}/restore", "POST", restore, (403,), "FORBIDDEN",
                 body=restore_body, secret_of=read_only),
            Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST", f"/v1/checkpoints/{history}/lease", (403,),
                 "FORBIDDEN", body=acquire_body, secret_of=read_only),
            Case("DELETE /v1/checkpoints/{checkpoint_id}/lease", "DELETE", f"/v1/checkpoints/{leased}/lease", (403,),
                 "FORBIDDEN", headers=lease_token, secret_of=read_only),
            Case("POST /v1/resume", "POST", "/v1/resume", (403,), "FORBIDDEN", body=resume_owner,
                 secret_of=write_only),
            Case("DELETE /v1/subjects/{subject_id}", "DELETE", purge, (403,), "FORBIDDEN", secret_of=read_only),
        ]  # fmt: skip

    # Another tenant, another agent without `*`, and the operator (whose own checkpoints live in its own tenant):
    # the owner's checkpoints are as absent as missing ones, whatever the request carries.
    foreign = [
        Case("GET /v1/checkpoints/{checkpoint_id}/revisions", "GET", revisions, (404,), "NOT_FOUND",
             same_as_missing=("GET", missing_revisions, None)),
        Case("GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}", "GET", revision, (404,), "NOT_FOUND",
             same_as_missing=("GET", missing_revision, None)),
        Case("POST /v1/checkpoints/{checkpoint_id}/restore", "POST", restore, (404,), "NOT_FOUND", body=restore_body,
             same_as_missing=("POST", missing_restore, None)),
        # A free checkpoint and a leased one: no lease granted, no 409 telling that a lease exists.
        Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST", f"/v1/checkpoints/{history}/lease", (404,),
             "NOT_FOUND", body=acquire_body, same_as_missing=("POST", missing_lease, None)),
        Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST", f"/v1/checkpoints/{leased}/lease", (404,),
             "NOT_FOUND", body={**acquire_body, "holder": w.leases["victim-leased"]["holder"]},
             same_as_missing=("POST", missing_lease, None)),
        # Even the lease's own token releases nothing; a checkpoint with no lease is no "released" 200 either.
        Case("DELETE /v1/checkpoints/{checkpoint_id}/lease", "DELETE", f"/v1/checkpoints/{leased}/lease", (404,),
             "NOT_FOUND", headers=lease_token, same_as_missing=("DELETE", missing_lease, None)),
        Case("DELETE /v1/checkpoints/{checkpoint_id}/lease", "DELETE", f"/v1/checkpoints/{history}/lease", (404,),
             "NOT_FOUND", headers=lease_token, same_as_missing=("DELETE", missing_lease, None)),
        # A checkpoint id the caller cannot see is no match, exactly as a missing one.
        Case("POST /v1/resume", "POST", "/v1/resume", (200,), body=resume_by_id, check=resume_answer("none"),
             same_as_missing=("POST", "/v1/resume", None), missing_body=resume_missing_id),
        Case("POST /v1/resume", "POST", "/v1/resume", (200,), body=resume_victim, check=resume_answer("none")),
    ]  # fmt: skip

    if caller == "other_tenant":
        return [
            *foreign,
            # The subject's and the agent's names in another tenant: nothing of theirs there.
            Case("POST /v1/resume", "POST", "/v1/resume", (200,), body=resume_owner, check=resume_answer("none")),
            Case("POST /v1/resume", "POST", "/v1/resume", (200,), body={"subject_id": w.shared_subject},
                 check=resume_answer("ambiguous", w.stranger),
                 must_show=(w.checkpoints["stranger-shared-task_state"],
                            w.checkpoints["stranger-shared-conversation"])),
            # Its own checkpoint of the same subject id goes; the victim's stay (test_refused_and_foreign_...).
            Case("DELETE /v1/subjects/{subject_id}", "DELETE", purge, (200,), check=purge_answer(w.purge_subject, 1)),
        ]  # fmt: skip

    if caller == "other_agent":
        missing_agent = f"agent-missing-{uuid.uuid4().hex[:8]}"
        return [
            *foreign,
            # Naming another agent without `*`: the 404 of an agent that has nothing, never a 403.
            Case("POST /v1/resume", "POST", "/v1/resume", (404,), "NOT_FOUND", body=resume_owner,
                 same_as_missing=("POST", "/v1/resume", None),
                 missing_body={**resume_owner, "agent_id": missing_agent}),
            Case("POST /v1/resume", "POST", "/v1/resume", (200,), body={"subject_id": w.shared_subject},
                 check=resume_answer("ambiguous", w.intruder),
                 must_show=(w.checkpoints["intruder-shared-task_state"],
                            w.checkpoints["intruder-shared-conversation"])),
            # A purge is a tenant's act: without subjects:purge, refused whoever's checkpoints the subject holds.
            Case("DELETE /v1/subjects/{subject_id}", "DELETE", purge, (403,), "FORBIDDEN"),
        ]  # fmt: skip

    if caller == "own_wildcard":
        wildcard_history = w.checkpoints["victim-wildcard-history"]
        wildcard_leased = w.checkpoints["victim-wildcard-leased"]
        return [
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions", "GET", revisions, (200,), check=revisions_are(2, 1),
                 must_show=(history,)),
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions", "GET", revisions, (200,), params={"limit": 1},
                 paginate=True, must_show=(history,)),
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}", "GET", revision, (200,),
                 must_show=(f"state-victim-history-r1-{w.run}",)),
            Case("GET /v1/checkpoints/{checkpoint_id}/revisions/{revision}", "GET", f"{revisions}/3", (404,),
                 "NOT_FOUND", not_found=REVISION_3_NOT_KEPT),
            Case("POST /v1/checkpoints/{checkpoint_id}/restore", "POST",
                 f"/v1/checkpoints/{wildcard_history}/restore", (200,), body=restore_body,
                 check=lambda data: None if data.get("revision") == 3 else f"restored as {data}"),
            Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST",
                 f"/v1/checkpoints/{w.checkpoints['victim-lease-target']}/lease", (201,), body=acquire_body),
            Case("POST /v1/checkpoints/{checkpoint_id}/lease", "POST", f"/v1/checkpoints/{leased}/lease", (409,),
                 "LEASE_HELD", body=acquire_body),
            Case("DELETE /v1/checkpoints/{checkpoint_id}/lease", "DELETE", f"/v1/checkpoints/{wildcard_leased}/lease",
                 (200,), headers={"Lease-Token": w.leases["victim-wildcard-leased"]["lease_token"]},
                 check=lambda data: None if data == {"checkpoint_id": wildcard_leased, "released": True} else "no"),
            Case("POST /v1/resume", "POST", "/v1/resume", (200,), body=resume_owner, check=resume_answer("ready"),
                 must_show=(f"state-victim-task_state-{w.run}",)),
            Case("POST /v1/resume", "POST", "/v1/resume", (200,), body={"subject_id": w.shared_subject},
                 check=resume_answer("ambiguous", w.owner, w.intruder),
                 must_show=(w.checkpoints["victim-shared-workflow"], w.checkpoints["intruder-shared-conversation"])),
            # Every agent's checkpoints of the subject, and none of another tenant's.
            Case("DELETE /v1/subjects/{subject_id}", "DELETE", f"/v1/subjects/{w.wildcard_purge_subject}", (200,),
                 check=purge_answer(w.wildcard_purge_subject, 2)),
        ]  # fmt: skip

    assert caller == "operator", caller
    return [
        *foreign,
        # tenants:manage acts in the operator's own tenant: the victim's checkpoints of the subject stay.
        Case("DELETE /v1/subjects/{subject_id}", "DELETE", purge, (200,), check=purge_answer(w.purge_subject, 0)),
    ]


def thread_answer(expected: dict[str, Any]) -> Callable[[Any], str | None]:
    """A check that a thread write answered exactly `expected`."""
    return lambda data: None if data == expected else f"answered {data}, expected {expected}"


def tuples_of(thread: PlantedThread, *indexes: int) -> Callable[[Any], str | None]:
    """A check that a tuple (or a page of them) shows only checkpoints `indexes` of `thread`."""
    wanted = {thread.checkpoint_ids[n] for n in indexes}

    def check(data: Any) -> str | None:
        shown = [data] if isinstance(data, dict) else data
        ids = {item.get("checkpoint_id") for item in shown}
        threads = {item.get("thread_id") for item in shown}
        return None if ids <= wanted and threads <= {thread.thread_id} else f"tuples {ids} of {threads}"

    return check


def thread_cases_for(caller: str, w: World) -> list[Case]:
    """The LangGraph thread routes, called by `caller`.

    Foreign callers (another tenant, another agent without `*`, the operator) aim at the owner's threads with
    everything right but the caller (the thread's own checkpoint ids, run ids): reads, writes, deletes and copies are
    the 404 of a missing thread, byte for byte (pending writes are kept for the caller's own thread of that id, as
    for any thread whose checkpoint has not come yet); prune and delete-for-runs act on the caller's own agent only, so
    naming the owner's threads or runs answers what naming missing ones answers, and the owner's threads survive
    (test_refused_and_foreign_calls_changed_nothing). A put under the owner's thread id makes a thread of the
    caller's own, and leaves the owner's as it was.
    """
    victim = w.threads["victim"]
    path = f"/v1/threads/{victim.thread_id}"
    missing_thread = f"thread-missing-{uuid.uuid4().hex}"
    missing = f"/v1/threads/{missing_thread}"
    latest = victim.checkpoint_ids[-1]
    checkpoint = {"v": 4, "id": latest, "channel_versions": {"messages": 9}}
    put_body = {
        "checkpoint": checkpoint,
        "metadata": {"run_id": victim.run_id, "by": caller},
        "values": {"messages": thread_value(f"thread-put-by-{caller}-{w.run}")},
        "parent_checkpoint_id": victim.checkpoint_ids[0],
    }
    writes_body = {
        "checkpoint_id": latest,
        "task_id": victim.task_id,
        "writes": [{"channel": "messages", **thread_value(f"thread-write-by-{caller}-{w.run}")}],
    }
    copy_body = {"target_thread_id": f"thread-copy-by-{caller}-{w.run}"}
    prune_body = {"thread_ids": [victim.thread_id, w.threads["victim-prune"].thread_id], "strategy": "delete"}
    missing_prune = {"thread_ids": [missing_thread], "strategy": "delete"}
    runs_body = {"run_ids": [victim.run_id, w.threads["victim-runs"].run_id]}
    missing_runs = {"run_ids": [f"run-missing-{uuid.uuid4().hex}"]}
    by_id = {"checkpoint_id": victim.checkpoint_ids[0]}
    if caller in REFUSED:
        return [
            Case(T_PUT, "POST", f"{path}/checkpoints", (401,), "UNAUTHENTICATED", body=put_body),
            Case(T_WRITES, "POST", f"{path}/writes", (401,), "UNAUTHENTICATED", body=writes_body),
            Case(T_GET, "GET", f"{path}/checkpoint", (401,), "UNAUTHENTICATED"),
            Case(T_LIST, "GET", f"{path}/checkpoints", (401,), "UNAUTHENTICATED"),
            Case(T_DELETE, "DELETE", path, (401,), "UNAUTHENTICATED"),
            Case(T_COPY, "POST", f"{path}/copy", (401,), "UNAUTHENTICATED", body=copy_body),
            Case(T_PRUNE, "POST", "/v1/threads:prune", (401,), "UNAUTHENTICATED", body=prune_body),
            Case(T_RUNS, "POST", "/v1/threads:delete-for-runs", (401,), "UNAUTHENTICATED", body=runs_body),
        ]  # fmt: skip

    if caller == "missing_scope":
        read_only, write_only = "missing_scope:read_only", "missing_scope:write_only"
        return [
            Case(T_PUT, "POST", f"{path}/checkpoints", (403,), "FORBIDDEN", body=put_body, secret_of=read_only),
            Case(T_WRITES, "POST", f"{path}/writes", (403,), "FORBIDDEN", body=writes_body, secret_of=read_only),
            Case(T_GET, "GET", f"{path}/checkpoint", (403,), "FORBIDDEN", secret_of=write_only),
            Case(T_LIST, "GET", f"{path}/checkpoints", (403,), "FORBIDDEN", secret_of=write_only),
            # Neither holds checkpoints:delete.
            Case(T_DELETE, "DELETE", path, (403,), "FORBIDDEN", secret_of=write_only),
            Case(T_COPY, "POST", f"{path}/copy", (403,), "FORBIDDEN", body=copy_body, secret_of=read_only),
            Case(T_PRUNE, "POST", "/v1/threads:prune", (403,), "FORBIDDEN", body=prune_body, secret_of=write_only),
            Case(T_RUNS, "POST", "/v1/threads:delete-for-runs", (403,), "FORBIDDEN", body=runs_body,
                 secret_of=write_only),
        ]  # fmt: skip

    if caller == "own_wildcard":
        owner = {"agent_id": w.owner}
        written = w.threads["victim-writes"]
        pruned = w.threads["victim-prune"]
        runs = w.threads["victim-runs"]
        deleted = w.threads["victim-delete"]
        return [
            Case(T_GET, "GET", f"{path}/checkpoint", (200,), params=owner, check=tuples_of(victim, 1),
                 must_show=(latest, f"thread-meta-victim-{w.run}", victim.task_id)),
            Case(T_GET, "GET", f"{path}/checkpoint", (200,), params={**owner, **by_id}, check=tuples_of(victim, 0),
                 must_show=(victim.checkpoint_ids[0],)),
            # Without agent_id it reads its own agent's thread of that id: there is none.
            Case(T_GET, "GET", f"{path}/checkpoint", (404,), "NOT_FOUND",
                 same_as_missing=("GET", f"{missing}/checkpoint", None)),
            Case(T_LIST, "GET", f"{path}/checkpoints", (200,), params={**owner, "limit": 1}, paginate=True,
                 check=tuples_of(victim, 0, 1), must_show=tuple(victim.checkpoint_ids)),
            Case(T_LIST, "GET", f"{path}/checkpoints", (404,), "NOT_FOUND",
                 same_as_missing=("GET", f"{missing}/checkpoints", None)),
            Case(T_WRITES, "POST", f"/v1/threads/{written.thread_id}/writes", (200,), params=owner,
                 body={**writes_body, "checkpoint_id": written.checkpoint_ids[-1], "task_id": "task-by-wildcard"},
                 check=thread_answer({"thread_id": written.thread_id, "checkpoint_ns": "",
                                      "checkpoint_id": written.checkpoint_ids[-1], "task_id": "task-by-wildcard",
                                      "writes": 1})),
            Case(T_PUT, "POST", f"/v1/threads/{written.thread_id}/checkpoints", (201,), params=owner,
                 body={**put_body, "checkpoint": {**checkpoint, "id": f"1f1-by-wildcard-{w.run}"},
                       "parent_checkpoint_id": written.checkpoint_ids[-1]}),
            Case(T_COPY, "POST", f"{path}/copy", (200,), params=owner, body=copy_body,
                 check=thread_answer({"thread_id": victim.thread_id, "copied_checkpoints": 2,
                                      "target_thread_id": copy_body["target_thread_id"]})),
            Case(T_PRUNE, "POST", "/v1/threads:prune", (200,), params=owner,
                 body={"thread_ids": [pruned.thread_id, missing_thread], "strategy": "keep_latest"},
                 check=thread_answer({"pruned_threads": 1, "deleted_checkpoints": 2, "complete": True})),
            Case(T_RUNS, "POST", "/v1/threads:delete-for-runs", (200,), params=owner,
                 body={"run_ids": [runs.run_id]}, check=thread_answer({"deleted_checkpoints": 2, "complete": True})),
            Case(T_DELETE, "DELETE", f"/v1/threads/{deleted.thread_id}", (200,), params=owner,
                 check=thread_answer({"thread_id": deleted.thread_id, "deleted": True})),
            Case(T_DELETE, "DELETE", f"/v1/threads/{deleted.thread_id}", (404,), "NOT_FOUND", params=owner,
                 same_as_missing=("DELETE", missing, owner)),
        ]  # fmt: skip

    # Another tenant, another agent without `*`, and the operator (in its own tenant).
    foreign = [
        Case(T_GET, "GET", f"{path}/checkpoint", (404,), "NOT_FOUND",
             same_as_missing=("GET", f"{missing}/checkpoint", None)),
        Case(T_GET, "GET", f"{path}/checkpoint", (404,), "NOT_FOUND", params=by_id,
             same_as_missing=("GET", f"{missing}/checkpoint", by_id)),
        Case(T_LIST, "GET", f"{path}/checkpoints", (404,), "NOT_FOUND", params={"limit": 1},
             same_as_missing=("GET", f"{missing}/checkpoints", {"limit": 1})),
        Case(T_LIST, "GET", f"{path}/checkpoints", (404,), "NOT_FOUND",
             params={"filter": json.dumps({"run_id": victim.run_id})},
             same_as_missing=("GET", f"{missing}/checkpoints", {"filter": json.dumps({"run_id": victim.run_id})})),
        # Writes to the owner's own checkpoint: kept for a checkpoint of the caller's own thread of that id, which
        # may come later (writes often arrive before their checkpoint), exactly as for a thread that does not
        # exist; none lands in the owner's thread (test_refused_and_foreign_calls_changed_nothing).
        Case(T_WRITES, "POST", f"{path}/writes", (200,), body=writes_body,
             check=thread_answer({"thread_id": victim.thread_id, "checkpoint_ns": "", "checkpoint_id": latest,
                                  "task_id": victim.task_id, "writes": 1})),
        Case(T_DELETE, "DELETE", path, (404,), "NOT_FOUND", same_as_missing=("DELETE", missing, None)),
        Case(T_COPY, "POST", f"{path}/copy", (404,), "NOT_FOUND", body=copy_body,
             same_as_missing=("POST", f"{missing}/copy", None)),
        # The caller's own agent has none of these threads or runs: the answer of missing ones.
        Case(T_PRUNE, "POST", "/v1/threads:prune", (200,), body=prune_body,
             check=thread_answer({"pruned_threads": 0, "deleted_checkpoints": 0, "complete": True}),
             same_as_missing=("POST", "/v1/threads:prune", None), missing_body=missing_prune),
        Case(T_PRUNE, "POST", "/v1/threads:prune", (200,), body={**prune_body, "strategy": "keep_latest"},
             check=thread_answer({"pruned_threads": 0, "deleted_checkpoints": 0, "complete": True})),
        Case(T_RUNS, "POST", "/v1/threads:delete-for-runs", (200,), body=runs_body,
             check=thread_answer({"deleted_checkpoints": 0, "complete": True}),
             same_as_missing=("POST", "/v1/threads:delete-for-runs", None), missing_body=missing_runs),
    ]  # fmt: skip
    # Last: a put under the owner's thread and checkpoint ids makes the caller's own thread (the reads above would
    # find it otherwise), and the owner's is untouched.
    own_put = Case(
        T_PUT,
        "POST",
        f"{path}/checkpoints",
        (201,),
        body=put_body,
        check=lambda data: None if data.get("checkpoint_id") == latest else f"put answered {data}",
    )

    if caller == "other_tenant":
        stranger = w.threads["stranger"]
        return [
            *foreign,
            Case(T_GET, "GET", f"/v1/threads/{stranger.thread_id}/checkpoint", (200,), check=tuples_of(stranger, 1),
                 must_show=(stranger.checkpoint_ids[-1], stranger.task_id)),
            own_put,
        ]  # fmt: skip

    if caller == "other_agent":
        intruder = w.threads["intruder"]
        owner = {"agent_id": w.owner}
        return [
            *foreign,
            # Naming the owner without `*`: a read is the 404 of a missing thread, a write is refused.
            Case(T_GET, "GET", f"{path}/checkpoint", (404,), "NOT_FOUND", params=owner,
                 same_as_missing=("GET", f"{missing}/checkpoint", owner)),
            Case(T_LIST, "GET", f"{path}/checkpoints", (404,), "NOT_FOUND", params=owner,
                 same_as_missing=("GET", f"{missing}/checkpoints", owner)),
            Case(T_DELETE, "DELETE", path, (404,), "NOT_FOUND", params=owner,
                 same_as_missing=("DELETE", missing, owner)),
            Case(T_PRUNE, "POST", "/v1/threads:prune", (403,), "FORBIDDEN", params=owner, body=prune_body),
            Case(T_RUNS, "POST", "/v1/threads:delete-for-runs", (403,), "FORBIDDEN", params=owner, body=runs_body),
            Case(T_WRITES, "POST", f"{path}/writes", (403,), "FORBIDDEN", params=owner, body=writes_body),
            Case(T_COPY, "POST", f"{path}/copy", (403,), "FORBIDDEN", params=owner, body=copy_body),
            Case(T_PUT, "POST", f"{path}/checkpoints", (403,), "FORBIDDEN", params=owner, body=put_body),
            Case(T_GET, "GET", f"/v1/threads/{intruder.thread_id}/checkpoint", (200,), check=tuples_of(intruder, 1),
                 must_show=(intruder.checkpoint_ids[-1], intruder.task_id)),
            own_put,
        ]  # fmt: skip

    assert caller == "operator", caller
    return [*foreign, own_put]


# -- running them -----------------------------------------------------------------------------------------------


def run_case(api: Api, w: World, caller: str, case: Case) -> tuple[list[str], int]:
    """Send the case (every page of it), and return its problems and the number of requests it made."""
    secret = w.secrets[case.secret_of or caller]
    allowed = visible(w, caller, case.route, case.params)
    forbidden = {m for party, p in w.parties.items() if party not in allowed for m in p.markers}
    forbidden -= set(case.own_markers)
    problems: list[str] = []
    shown = ""
    params = dict(case.params or {})
    requests = 0
    label = f"{caller}: {case.method} {case.path} {case.params or ''} {json.dumps(case.body) if case.body else ''}"
    form = case.form(api) if callable(case.form) else case.form
    if form:
        label += f" form {sorted(form)}"
    for page_number in range(MAX_PAGES):
        response = api.call(
            secret, case.method, case.path, params=params or None, body=case.body, headers=case.headers, form=form
        )
        requests += 1
        if response.status_code not in case.expect:
            problems.append(f"{label}: answered {response.status_code}, expected {case.expect}: {response.text}")
            break
        text = everything_in(response)
        shown += text
        asked = asked_in(response.request)
        leaked = sorted(m for m in forbidden if m in text and m not in asked)
        if leaked:
            problems.append(f"{label}: page {page_number + 1} holds {leaked}: {text}")
        echoed = [f"{sent[:8]}…" for sent in case.never_shows if sent in text]
        if echoed:
            problems.append(f"{label}: the answer shows what the form carried: {echoed}")
        if case.answer_check is not None:
            problem = case.answer_check(response)
            if problem:
                problems.append(f"{label}: {problem}")
        if case.same_status_without_key:
            again = api.call(None, case.method, case.path, params=params or None, headers=case.headers, form=form)
            requests += 1
            if (again.status_code, without_code(again)) != (response.status_code, without_code(response)):
                with_key, without_key = without_code(response)[:300], without_code(again)[:300]
                problems.append(
                    f"{label}: the Authorization header changed the answer: {response.status_code} {with_key!r} vs, "
                    f"without it, {again.status_code} {without_key!r}"
                )
        is_json = response.headers.get("content-type", "").startswith("application/json")
        body = response.json() if response.content and is_json else None
        if case.same_without_key:
            anonymous = api.call(
                None, case.method, case.path, params=params or None, body=case.body, headers=case.headers, form=form
            )
            requests += 1
            if (anonymous.status_code, comparable_headers(anonymous), anonymous.content) != (
                response.status_code,
                comparable_headers(response),
                response.content,
            ):
                problems.append(
                    f"{label}: answers differently than without a key: {response.status_code} "
                    f"{comparable_headers(response)} vs {anonymous.status_code} {comparable_headers(anonymous)}"
                )
        if case.route not in HOLDING_NO_DATA and secret is not None and response.status_code != 401:
            # Admitted: its answer says what is left of its caller's own tenant's requests, whatever it answers
            rate_limit = response.headers.get("ratelimit", "")
            if not RATE_LIMIT_HEADER.fullmatch(rate_limit):
                problems.append(f"{label}: a {response.status_code} whose RateLimit is {rate_limit!r}")
        if case.code is not None:
            code = (body or {}).get("error", {}).get("code")
            if code != case.code:
                problems.append(f"{label}: error code {code}, expected {case.code}")
        if case.expect == (404,) and without_request_id(response) != (case.not_found or NOT_FOUND_BODY):
            problems.append(f"{label}: the 404 is not the contract's: {response.text}")
        if case.same_as_missing is not None:
            method, path, missing_params = case.same_as_missing
            missing_body = case.body if case.missing_body is None else case.missing_body
            missing = api.call(secret, method, path, params=missing_params, body=missing_body, headers=case.headers)
            requests += 1
            if (missing.status_code, without_request_id(missing), comparable_headers(missing)) != (
                response.status_code,
                without_request_id(response),
                comparable_headers(response),
            ):
                problems.append(
                    f"{label}: answers differently from a missing one: {response.status_code} "
                    f"{comparable_headers(response)} {response.text} vs {missing.status_code} "
                    f"{comparable_headers(missing)} {missing.text}"
                )
        if body and response.status_code == 201 and isinstance(body.get("data"), dict) and "secret" in body["data"]:
            plant_secret(body["data"]["secret"])
        data = (body or {}).get("data")
        if case.check is not None and response.status_code == 200:
            problem = case.check(data)
            if problem:
                problems.append(f"{label}: page {page_number + 1}: {problem}")
        cursor = (body or {}).get("meta", {}).get("next_cursor") if body else None
        if not case.paginate or not cursor:
            break
        if data == []:
            problems.append(f"{label}: page {page_number + 1} is empty but has a next_cursor")
        params["cursor"] = cursor
    else:
        problems.append(f"{label}: more than {MAX_PAGES} pages")
    for marker in case.must_show:
        if marker not in shown:
            problems.append(f"{label}: the positive control {marker!r} is missing from the answer")
    return problems, requests


@pytest.mark.parametrize("caller", CALLERS)
def test_every_route_answers_each_caller_as_the_contract_says_and_leaks_nothing(
    baton: BatonServe, world: World, caller: str
) -> None:
    if caller == "expired":
        time.sleep(max(0.0, world.expiring_at + 0.5 - time.time()))
    api = Api(baton)
    problems: list[str] = []
    cases = cases_for(caller, world)
    requests = 0
    try:
        for case in cases:
            found, sent = run_case(api, world, caller, case)
            problems.extend(found)
            requests += sent
    finally:
        api.client.close()
    proof_counts.record("isolation", cases=len(cases), requests=requests)
    if caller == CALLERS[0]:
        proof_counts.record("isolation", routes=len(ROUTES), callers=len(CALLERS))
    assert {case.route for case in cases} == set(ROUTES)
    assert not problems, "\n\n".join(problems)


def test_the_matrix_calls_every_route_the_document_declares() -> None:
    # Every operation of docs/openapi.json is one of the matrix's routes (the document does not declare itself);
    # /mcp's tools are each called by every foreign caller below.
    document = json.loads((REPO / "docs" / "openapi.json").read_text(encoding="utf-8"))
    methods = ("get", "put", "post", "delete", "patch")
    declared = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
                if method in methods}  # fmt: skip
    assert declared - {"POST /mcp"} <= set(ROUTES), sorted(declared - {"POST /mcp"} - set(ROUTES))


MCP_CALLERS = ("other_tenant", "other_agent", "operator")


def mcp_tool(api: Api, secret: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
    """One tools/call to /mcp."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return api.call(secret, "POST", "/mcp", body=message, headers={"Accept": "application/json, text/event-stream"})


def tool_against_route(
    label: str, name: str, arguments: Any, answer: httpx.Response, route: httpx.Response, forbidden: set[str]
) -> list[str]:
    """What is wrong with a tool's answer held against its route's to the same caller: a JSON-RPC answer that is no
    200, a result that is not the route's data (or its error), or a marker of a party the caller may not see."""
    if answer.status_code != 200:
        return [f"{label}: /mcp answered {answer.status_code}: {answer.text}"]
    problems: list[str] = []
    result = answer.json()["result"]
    if route.status_code >= 400:
        expected = route.json()["error"]
    elif name == "baton_checkpoint_list":
        expected = {"checkpoints": route.json()["data"], "next_cursor": route.json()["meta"]["next_cursor"]}
    else:
        expected = route.json()["data"]
    if result["structuredContent"] != expected or result["isError"] != (route.status_code >= 400):
        problems.append(f"{label}: the tool says {result}, the route {route.status_code} {route.text}")
    asked = json.dumps(arguments)
    leaked = sorted(m for m in forbidden if m in everything_in(answer) and m not in asked)
    if leaked:
        problems.append(f"{label}: the answer holds {leaked}: {answer.text}")
    return problems


@pytest.mark.parametrize("caller", MCP_CALLERS)
def test_every_mcp_tool_shows_a_foreign_caller_what_its_route_shows(
    baton: BatonServe, world: World, caller: str
) -> None:
    # Given a caller of another tenant, another agent of the victim's tenant (a key of its own with mcp:call), or
    # the operator, aiming each tool at the owner's checkpoints
    api = Api(baton)
    if caller == "other_agent":
        scopes = ["mcp:call", "checkpoints:read", "checkpoints:write", "checkpoints:delete", "leases:write"]
        secret = api.mint(world, f"intruder-mcp-{uuid.uuid4().hex[:6]}", world.victim, world.intruder, scopes)
    else:
        secret = str(world.secrets[caller])
    victim = world.checkpoints["victim-task_state"]
    leased = world.checkpoints["victim-leased"]
    token = world.leases["victim-leased"]["lease_token"]
    subject = world.victim_subject
    cases: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None, Any, dict[str, str] | None]] = [
        ("baton_checkpoint_get", {"checkpoint_id": victim}, "GET", f"/v1/checkpoints/{victim}", None, None, None),
        ("baton_checkpoint_get", {"subject_id": subject, "kind": "workflow"}, "GET", "/v1/checkpoints",
         {"subject_id": subject, "kind": "workflow"}, None, None),
        ("baton_checkpoint_get", {"subject_id": subject, "kind": "workflow", "agent_id": world.owner}, "GET",
         "/v1/checkpoints", {"subject_id": subject, "kind": "workflow", "agent_id": world.owner}, None, None),
        ("baton_checkpoint_list", {"subject_id": subject}, "GET", f"/v1/subjects/{subject}/checkpoints", None, None,
         None),
        ("baton_checkpoint_delete", {"checkpoint_id": victim}, "DELETE", f"/v1/checkpoints/{victim}", None, None,
         None),
        ("baton_resume", {"subject_id": subject, "checkpoint_id": victim}, "POST", "/v1/resume", None,
         {"subject_id": subject, "checkpoint_id": victim}, None),
        ("baton_resume", {"subject_id": subject}, "POST", "/v1/resume", None, {"subject_id": subject}, None),
        ("baton_lease_acquire", {"checkpoint_id": leased, "ttl_seconds": 60}, "POST",
         f"/v1/checkpoints/{leased}/lease", None, {"ttl_seconds": 60}, None),
        ("baton_lease_release", {"checkpoint_id": leased, "lease_token": token}, "DELETE",
         f"/v1/checkpoints/{leased}/lease", None, None, {"Lease-Token": token}),
        ("baton_checkpoint_save", {"subject_id": subject, "kind": "task_state", "state": {"x": 1},
                                   "agent_id": world.owner}, "POST", "/v1/checkpoints", None,
         {"subject_id": subject, "kind": "task_state", "state": {"x": 1}, "agent_id": world.owner}, None),
    ]  # fmt: skip
    if caller != "other_agent":
        cases.pop()  # naming the victim's agent is no authority question in another tenant (it saves its own)
    forbidden = {
        m for party, p in world.parties.items() if party not in visible(world, caller, "", None) for m in p.markers
    }
    problems: list[str] = []
    try:
        for name, arguments, method, path, params, body, headers in cases:
            # When the tool is called, and its route with the same request
            answer = mcp_tool(api, secret, name, arguments)
            route = api.call(secret, method, path, params=params, body=body, headers=headers)
            label = f"{caller}: {name} {arguments}"
            # Then the tool shows exactly what the route shows, and not a byte of the victim's
            problems += tool_against_route(label, name, arguments, answer, route, forbidden)
    finally:
        api.client.close()
    proof_counts.record("isolation mcp", cases=len(cases))
    assert not problems, "\n\n".join(problems)


APPROVERS = ("owner", "admin")
"""Whose key approves the grant: the owner's (mcp:call, read and write) or the tenant's `*` key (the admin's)."""


@pytest.mark.parametrize("approver", APPROVERS)
def test_an_access_token_acts_only_as_the_agent_whose_key_approved_it(
    baton: BatonServe, world: World, approver: str
) -> None:
    # Given an access token of a grant approved on the consent form with the owner's key, or with the tenant's `*` key
    # (whose grant holds no `*`: at most mcp:call and the checkpoint and lease scopes), and a key of that same agent
    # without `*` holding what the grant holds besides mcp:call; and checkpoints of another agent and another tenant
    api = Api(baton)
    w = world
    run = uuid.uuid4().hex[:8]
    if approver == "owner":
        approving, plain, agent = str(w.keys["owner-mcp"]["secret"]), str(w.secrets["owner"]), w.owner
    else:
        approving, agent = str(w.secrets["own_wildcard"]), w.admin
        plain = api.mint(w, f"admin-plain-{run}", w.victim, w.admin, ["checkpoints:read", "checkpoints:write"])
    tokens = OAuthFlow(api.client, client_id=w.oauth_client_id).grant(approving)
    token = plant_secret(tokens["access_token"])
    plant_secret(tokens["refresh_token"])
    assert tokens["scope"] == OAUTH_SCOPE, tokens
    subject = f"subject-oauth-{approver}-{run}"
    intruder = api.save(w, f"oauth-intruder-{run}", w.secrets["other_agent"] or "", w.victim, w.intruder, subject,
                        "task_state")  # fmt: skip
    stranger = api.save(w, f"oauth-stranger-{run}", w.secrets["other_tenant"] or "", w.other, w.stranger, subject,
                        "task_state")  # fmt: skip
    shared = w.shared_subject
    # What the tool is asked with the token, and the same request of its route with the agent's own key
    cases: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None, Any]] = [
        ("baton_checkpoint_get", {"checkpoint_id": w.checkpoints["victim-task_state"]}, "GET",
         f"/v1/checkpoints/{w.checkpoints['victim-task_state']}", None, None),
        ("baton_checkpoint_get", {"checkpoint_id": intruder}, "GET", f"/v1/checkpoints/{intruder}", None, None),
        ("baton_checkpoint_get", {"checkpoint_id": stranger}, "GET", f"/v1/checkpoints/{stranger}", None, None),
        ("baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"}, "GET", "/v1/checkpoints",
         {"subject_id": subject, "kind": "task_state"}, None),
        ("baton_checkpoint_get", {"subject_id": subject, "kind": "task_state", "agent_id": w.intruder}, "GET",
         "/v1/checkpoints", {"subject_id": subject, "kind": "task_state", "agent_id": w.intruder}, None),
        ("baton_checkpoint_get", {"subject_id": shared, "kind": "task_state", "agent_id": w.owner}, "GET",
         "/v1/checkpoints", {"subject_id": shared, "kind": "task_state", "agent_id": w.owner}, None),
        ("baton_checkpoint_list", {"subject_id": shared}, "GET", f"/v1/subjects/{shared}/checkpoints", None, None),
        ("baton_checkpoint_list", {"subject_id": subject}, "GET", f"/v1/subjects/{subject}/checkpoints", None, None),
        ("baton_checkpoint_list", {"subject_id": shared, "agent_id": w.intruder}, "GET",
         f"/v1/subjects/{shared}/checkpoints", {"agent_id": w.intruder}, None),
        ("baton_resume", {"subject_id": shared}, "POST", "/v1/resume", None, {"subject_id": shared}),
        ("baton_resume", {"subject_id": subject, "checkpoint_id": intruder}, "POST", "/v1/resume", None,
         {"subject_id": subject, "checkpoint_id": intruder}),
        ("baton_checkpoint_delete", {"checkpoint_id": intruder}, "DELETE", f"/v1/checkpoints/{intruder}", None, None),
        ("baton_checkpoint_save", {"subject_id": subject, "kind": "task_state", "state": {"x": 1},
                                   "agent_id": w.intruder}, "POST", "/v1/checkpoints", None,
         {"subject_id": subject, "kind": "task_state", "state": {"x": 1}, "agent_id": w.intruder}),
    ]  # fmt: skip
    allowed = {(w.victim, None), (w.victim, agent)}
    forbidden = {m for party, p in w.parties.items() if party not in allowed for m in p.markers}
    problems: list[str] = []
    try:
        for number, (name, arguments, method, path, params, body) in enumerate(cases):
            # When the tool is called with the access token, and its route with the agent's own key
            message = mcp_message("tools/call", {"name": name, "arguments": arguments}, number + 1)
            answer = api.call(token, "POST", "/mcp", body=message, headers=MCP_ACCEPT)
            route = api.call(plain, method, path, params=params, body=body)
            label = f"{approver}'s token: {name} {arguments}"
            # Then the tool shows exactly what the route shows that agent's key without `*`, and nothing of another
            # agent's or tenant's
            problems += tool_against_route(label, name, arguments, answer, route, forbidden)
        # And what it writes is its agent's own: a save naming no agent is that agent's, in the approving key's tenant
        saved = api.call(token, "POST", "/mcp", body=mcp_message("tools/call", {
            "name": "baton_checkpoint_save",
            "arguments": {"subject_id": subject, "kind": "conversation", "state": {"by": "token"}},
        }), headers=MCP_ACCEPT).json()["result"]  # fmt: skip
        mine = api.call(plain, "GET", "/v1/checkpoints", params={"subject_id": subject, "kind": "conversation"})
        # And the token is no key anywhere else; the other agent's and tenant's checkpoints are as they were
        refused = api.call(token, "GET", "/v1/whoami")
        still = [api.call(w.secrets[who], "GET", f"/v1/checkpoints/{checkpoint}").status_code
                 for who, checkpoint in (("other_agent", intruder), ("other_tenant", stranger))]  # fmt: skip
    finally:
        api.client.close()
    proof_counts.record("isolation oauth", cases=len(cases) + 3)
    assert not problems, "\n\n".join(problems)
    assert not saved["isError"], saved
    assert saved["structuredContent"]["agent_id"] == agent, saved
    assert mine.status_code == 200, mine.text
    assert mine.json()["data"]["checkpoint_id"] == saved["structuredContent"]["checkpoint_id"]
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "UNAUTHENTICATED"
    assert still == [200, 200]


def test_a_revoked_key_manager_cannot_mint_or_revoke_from_a_container_that_cached_it(
    baton: BatonServe, world: World
) -> None:
    # Given a `*` key every container has authenticated (concurrent requests spread over the containers)
    api = Api(baton)
    secret = api.mint(world, "cached-manager", world.victim, world.admin, ["*"])
    target = api.mint(world, "target-of-revoked-manager", world.victim, world.admin, ["checkpoints:read"])
    target_id = world.keys["target-of-revoked-manager"]["key_id"]

    def concurrently(send: Callable[[int], httpx.Response], times: int = 16) -> list[httpx.Response]:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(send, range(times)))

    try:
        warmed = concurrently(lambda _: api.call(secret, "GET", "/v1/keys", params={"limit": 1}))
        assert {r.status_code for r in warmed} == {200}
        # When the operator revokes it
        revoked = api.call(
            baton.key,
            "DELETE",
            f"/v1/keys/{world.keys['cached-manager']['key_id']}",
            params={"tenant_id": world.victim},
        )
        assert revoked.status_code == 200, revoked.text
        # Then key management reads the key fresh, in every container: no mint, no revoke
        minted = concurrently(
            lambda _: api.call(
                secret, "POST", "/v1/keys", body={"agent_id": world.admin, "scopes": ["checkpoints:read"]}
            )
        )
        for response in minted:
            if response.status_code == 201:
                plant_secret(response.json()["data"]["secret"])
        revoking = concurrently(lambda _: api.call(secret, "DELETE", f"/v1/keys/{target_id}"), times=8)
        proof_counts.record("isolation", cases=len(minted) + len(revoking))
        assert [r.status_code for r in minted] == [401] * len(minted), [r.text for r in minted if r.status_code != 401]
        assert [r.status_code for r in revoking] == [401] * len(revoking), [r.text for r in revoking]
        assert api.call(target, "GET", "/v1/subjects/x/checkpoints").status_code == 200
    finally:
        api.client.close()


@pytest.mark.parametrize("asked", ["no expires_at", "a later expires_at"])
def test_a_minted_key_never_outlives_its_issuer(baton: BatonServe, world: World, asked: str) -> None:
    # Given a `*` key that expires in an hour
    api = Api(baton)
    issuer_expiry = datetime.now(UTC) + timedelta(hours=1)
    label = f"expiring-issuer-{uuid.uuid4().hex[:6]}"
    issuer = api.mint(world, label, world.victim, world.admin, ["*"], expires_at=rfc3339(issuer_expiry))
    issuer_expires_at = parse_rfc3339(world.keys[label]["expires_at"])
    body: dict[str, Any] = {"agent_id": world.admin, "scopes": ["checkpoints:read"]}
    if asked == "a later expires_at":
        body["expires_at"] = rfc3339(issuer_expiry + timedelta(hours=1))
    try:
        # When it mints a key asking for no expiry, or a later one
        minted = api.call(issuer, "POST", "/v1/keys", body=body)
    finally:
        api.client.close()
    proof_counts.record("isolation", cases=1)
    # Then the new key expires no later than its issuer (or the request is refused, naming /expires_at)
    if minted.status_code == 400:
        assert "/expires_at" in minted.text, minted.text
        return
    assert minted.status_code == 201, minted.text
    data = minted.json()["data"]
    plant_secret(data["secret"])
    assert data["expires_at"] is not None, f"the minted key never expires, its issuer does at {issuer_expires_at}"
    assert parse_rfc3339(data["expires_at"]) <= issuer_expires_at, (data["expires_at"], issuer_expires_at)


def test_refused_and_foreign_calls_changed_nothing(baton: BatonServe, world: World) -> None:
    # After the matrix: the victim's checkpoints are as they were saved (revisions, leases and purged subject
    # included), the victim's keys still work, and its limits and the other tenant's are still unset. (Nothing here
    # compares whole tables: every request advances its tenant's rate-limit bucket, item `L#<tenant>`.)
    api = Api(baton)
    admin = world.secrets["own_wildcard"]
    try:
        victim = api.call(admin, "GET", f"/v1/checkpoints/{world.checkpoints['victim-task_state']}")
        owner = api.call(world.secrets["owner"], "GET", f"/v1/subjects/{world.victim_subject}/checkpoints")
        intruder_listing = api.call(world.secrets["other_agent"], "GET", "/v1/keys", params={"limit": 200})
        history = api.call(admin, "GET", f"/v1/checkpoints/{world.checkpoints['victim-history']}")
        kept = api.call(admin, "GET", f"/v1/checkpoints/{world.checkpoints['victim-history']}/revisions")
        leased = api.call(admin, "GET", f"/v1/checkpoints/{world.checkpoints['victim-leased']}")
        purged = api.call(admin, "GET", f"/v1/subjects/{world.purge_subject}/checkpoints")
        for_owner = {"agent_id": world.owner}
        victim_thread = world.threads["victim"]
        thread_pages = api.call(admin, "GET", f"/v1/threads/{victim_thread.thread_id}/checkpoints", params=for_owner)
        by_run = api.call(
            admin,
            "GET",
            f"/v1/threads/{victim_thread.thread_id}/checkpoints",
            params={**for_owner, "filter": json.dumps({"run_id": victim_thread.run_id})},
        )
        pruned_thread = world.threads["victim-prune"]
        pruned_latest = api.call(admin, "GET", f"/v1/threads/{pruned_thread.thread_id}/checkpoint", params=for_owner)
        grants_listed = api.call(admin, "GET", "/v1/oauth/grants", params={"limit": 200})
        tenants = (world.victim, world.other)
        limits = {tenant: api.call(baton.key, "GET", f"/v1/tenants/{tenant}/limits") for tenant in tenants}
        # the grants no one of theirs revoked still work: their refresh tokens are taken
        refreshed = {
            label: OAuthFlow(api.client, client_id=world.grants[label]["client_id"]).refresh(
                world.grants[label]["refresh_token"]
            )
            for label in ("owner", "intruder", "stranger")
        }
    finally:
        api.client.close()
    # no limit of the victim or the other tenant set by a PUT refused (or the operator's own, of what was there)
    for tenant, answer in limits.items():
        assert answer.status_code == 200, answer.text
        assert limits_are(tenant, {})(answer.json()["data"]) is None, answer.text
    # no grant revoked by another tenant or another agent: the owner's and the intruder's still listed, still working
    assert grants_listed.status_code == 200, grants_listed.text
    live = {grant["grant_id"] for grant in grants_listed.json()["data"]}
    assert {world.grants[label]["grant_id"] for label in ("owner", "intruder")} <= live, grants_listed.text
    for label, answer in refreshed.items():
        assert answer.status_code == 200, f"{label}'s grant: {answer.text}"
        plant_secret(answer.json()["access_token"])
        plant_secret(answer.json()["refresh_token"])
    # the owner's thread: no put, write, delete, prune, copy or delete-for-runs of another caller reached it
    assert thread_pages.status_code == 200, thread_pages.text
    tuples = thread_pages.json()["data"]
    assert [t["checkpoint_id"] for t in tuples] == victim_thread.checkpoint_ids[::-1], thread_pages.text
    latest = tuples[0]
    assert latest["metadata"]["run_id"] == victim_thread.run_id, latest
    assert "by" not in latest["metadata"], latest
    assert latest["channel_values"] == {"messages": thread_value(f"{victim_thread.value_marker}-1")}, latest
    assert latest["pending_writes"] == [
        {"task_id": victim_thread.task_id, "idx": 0, "channel": "messages", "task_path": "",
         **thread_value(f"{victim_thread.value_marker}-write")}
    ], latest  # fmt: skip
    assert by_run.status_code == 200, by_run.text
    assert len(by_run.json()["data"]) == 2, by_run.text
    # another agent's and another tenant's prune (strategy delete) left the latest checkpoint of the pruned one
    assert pruned_latest.status_code == 200, pruned_latest.text
    assert pruned_latest.json()["data"]["checkpoint_id"] == pruned_thread.checkpoint_ids[-1]
    assert victim.status_code == 200, victim.text
    assert victim.json()["data"]["revision"] == 1
    assert victim.json()["data"]["state"]["note"] == f"state-victim-task_state-{world.run}"
    assert victim.json()["data"].get("lease") is None, victim.text
    assert owner.status_code == 200, owner.text
    assert len(owner.json()["data"]) == 3
    assert intruder_listing.status_code == 200
    # no restore, no lease
    assert history.status_code == 200, history.text
    assert history.json()["data"]["revision"] == 3
    assert history.json()["data"]["state"]["note"] == f"state-victim-history-{world.run}"
    assert history.json()["data"].get("lease") is None, history.text
    assert [item["revision"] for item in kept.json()["data"]] == [2, 1], kept.text
    # the lease neither released nor taken over
    lease = world.leases["victim-leased"]
    assert leased.status_code == 200, leased.text
    assert leased.json()["data"].get("lease") == {"holder": lease["holder"], "expires_at": lease["expires_at"]}
    # the subject another tenant and the operator purged still holds every checkpoint of the victim's agents
    assert purged.status_code == 200, purged.text
    assert {item["checkpoint_id"] for item in purged.json()["data"]} == {
        world.checkpoints[label] for label in ("victim-purge-task_state", "victim-purge-conversation", "intruder-purge")
    }
