"""Every key and prefix of the single table, built and read back in one place.

Each key starts with a type letter and then the tenant, so nothing of one tenant can be addressed from another.
Tenant and agent ids cannot contain `#` and a kind is one of a fixed set, and a free-form part (a subject, an
idempotency key) always comes last, so every key parses back one way only: no two inputs collide.

| item          | pk                                  | sk                   | gpk (index gsi1)          | gsk         |
|---------------|-------------------------------------|----------------------|---------------------------|-------------|
| checkpoint    | `C#<tenant>#<subject>`              | `C#<agent>#<kind>`   | `I#<tenant>#<checkpoint>` | `C`         |
| revision      | `C#<tenant>#<subject>`              | `V#<agent>#<kind>#<checkpoint>#<n>` |            |             |
| api key       | `K#<sha256 of secret>`              | `K`                  | `T#<tenant>#keys`         | `<key_id>`  |
| idempotency   | `D#<tenant>#<agent>#<key>`          | `D`                  | `P#<tenant>#<subject>`(*) | `D`         |

| blob          | `B#<tenant>#<blob_id>`              | `B`                  |                           |             |
| tenant        | `L#<tenant>`                        | `L`                  |                           |             |
| oauth client  | `A#<client_id>`                     | `A`                  |                           |             |
| oauth secret  | `S#<sha256 of code or token>`       | `S`                  |                           |             |
| oauth grant   | `G#<tenant>#<grant_id>`             | `G`                  | `T#<tenant>#grants`       | `<grant_id>`|
| thread head   | `H#<tenant>#<agent>#<thread>`       | `H`                  |                           |             |
| thread ckpt   | `H#<tenant>#<agent>#<thread>`       | `K#<ns>#<id>`        | `R#<tenant>#<agent>#<run>` | its sk     |
| channel value | `H#<tenant>#<agent>#<thread>`       | `V#<gen>#<ns>#<channel>#<version>` |             |             |
| write value   | `H#<tenant>#<agent>#<thread>`       | `W#<ns>#<id>#<value id>` |                       |             |

(A thread checkpoint has a gsi1 entry only when its metadata names a `run_id`.)

(*) An idempotency record of a checkpoint write (a save, a restore, a lease acquire) is entered in gsi1 under the
subject it wrote, so that a purge finds a subject's records with a Query of the index (no Scan) although their keys
name only the tenant, the agent and the key. A blob declaration's record names no subject (a blob has none until a
save attaches it) and has no entry.

A LangGraph thread is one partition: its head item (the thread's generation and expiry), its checkpoints (pending
writes are attributes of their checkpoint's item), and the values too large to ride in a checkpoint item. Namespaces,
channels and checkpoint ids are free-form, so inside a sort key each is written length-first (`<len>:<text>`): every
sort key parses back one way, and a namespace's checkpoints share a prefix and sort by id (LangGraph's ids sort by
time). A value's key holds the generation of the thread that wrote it, so that a thread deleted and written again
never reads (or has the reaper delete) a value of its former life.

A revision's number `<n>` is written with 16 digits (any revision up to 2^53 fits), so its checkpoint's revisions
sort by number; the checkpoint id in its key makes a re-created checkpoint (a new id) start with none. A lease is
attributes of its checkpoint's item, so that every write checks it in the same request.

A subject's checkpoints (and their revisions) share a partition, so listing them is one Query on the table itself
(no local index: an index whose sort key is `updated_at` would delete and re-put its entry on every save), and a
purge finds everything of a subject in one partition.

Objects in the bucket live under `schema.BLOB_PREFIX`, then the tenant, so a tenant's objects share one prefix:

| object                      | key                                        |
|-----------------------------|--------------------------------------------|
| an uploaded blob            | `blobs/<tenant>/<blob_id>`                 |
| a checkpoint's spilled state| `blobs/<tenant>/states/<object_id>`        |

A spilled state gets a new object on every write (never overwritten in place): the reaper deletes an old one
while a later save may already have written the next, so one key must never name two states.
"""

from __future__ import annotations

import hashlib
from typing import Final

from baton_checkpoints.store import schema
from baton_checkpoints.store.attributes import Item

CHECKPOINT: Final = "C#"
"""Sort-key prefix of every checkpoint in a subject's partition."""
REVISION: Final = "V#"
"""Sort-key prefix of every kept revision in a subject's partition."""
REVISION_DIGITS: Final = 16
CHECKPOINT_INDEX_SK: Final = "C"
"""gsi1 sort key of a checkpoint (the index finds a checkpoint by id; one entry per id)."""
IDEMPOTENCY_SK: Final = "D"
KEY_SK: Final = "K"
BLOB_SK: Final = "B"
CHECKPOINT_PK_PREFIX: Final = "C#"
BLOB_PK_PREFIX: Final = "B#"
STATES: Final = "states"
"""The folder of a tenant's prefix that holds spilled states (blob ids start with `blob_`, so none is named so)."""


def checkpoint_pk(tenant_id: str, subject_id: str) -> str:
    """Partition key of a subject's checkpoints (the subject comes last, so any characters are safe)."""
    return f"C#{tenant_id}#{subject_id}"


def checkpoint_sk(agent_id: str, kind: str) -> str:
    """Sort key of one agent's checkpoint of one kind."""
    return f"{CHECKPOINT}{agent_id}#{kind}"


def agent_checkpoints(agent_id: str | None) -> str:
    """The sort-key prefix of one agent's checkpoints in a subject, or of every agent's (None)."""
    return CHECKPOINT if agent_id is None else f"{CHECKPOINT}{agent_id}#"


def revisions_prefix(agent_id: str, kind: str, checkpoint_id: str | None = None) -> str:
    """The sort-key prefix of one checkpoint's kept revisions (None: of every checkpoint that held this slot)."""
    slot = f"{REVISION}{agent_id}#{kind}#"
    return slot if checkpoint_id is None else f"{slot}{checkpoint_id}#"


def revision_sk(agent_id: str, kind: str, checkpoint_id: str, revision: int) -> str:
    """Sort key of a checkpoint's kept revision `revision`."""
    return f"{revisions_prefix(agent_id, kind, checkpoint_id)}{revision:0{REVISION_DIGITS}d}"


def read_revision_sk(sk: str) -> tuple[str, str, str, int]:
    """(agent, kind, checkpoint_id, revision) back from a revision's sort key."""
    agent_id, kind, checkpoint_id, number = sk.removeprefix(REVISION).split("#")
    return agent_id, kind, checkpoint_id, int(number)


def checkpoint_index_pk(tenant_id: str, checkpoint_id: str) -> str:
    """gsi1 partition key that finds a checkpoint by id, only within its tenant."""
    return f"I#{tenant_id}#{checkpoint_id}"


def checkpoint_key(tenant_id: str, subject_id: str, agent_id: str, kind: str) -> Item:
    """The table key of one checkpoint."""
    return key(checkpoint_pk(tenant_id, subject_id), checkpoint_sk(agent_id, kind))


def read_checkpoint_keys(pk: str, sk: str, index_pk: str) -> tuple[str, str, str, str, str]:
    """(tenant, subject, agent, kind, checkpoint_id) back from a checkpoint's keys."""
    tenant_id, _, subject_id = pk.removeprefix("C#").partition("#")
    agent_id, _, kind = sk.removeprefix(CHECKPOINT).partition("#")
    checkpoint_id = index_pk.rpartition("#")[2]
    return tenant_id, subject_id, agent_id, kind, checkpoint_id


def idempotency_key(tenant_id: str, agent_id: str, idempotency_key: str) -> Item:
    """The table key of an idempotency record: keys belong to (tenant, agent)."""
    return key(f"D#{tenant_id}#{agent_id}#{idempotency_key}", IDEMPOTENCY_SK)


SUBJECT_RECORDS_PREFIX: Final = "P#"


def subject_records_pk(tenant_id: str, subject_id: str) -> str:
    """gsi1 partition key under which the idempotency records of a subject's writes are found (by a purge)."""
    return f"{SUBJECT_RECORDS_PREFIX}{tenant_id}#{subject_id}"


def key_pk(secret_hash: str) -> str:
    """Partition key of an API key record: the SHA-256 of its secret, never the secret."""
    return f"K#{secret_hash}"


def secret_hash_of(pk: str) -> str:
    """The secret's hash back from an API key record's partition key."""
    return pk.removeprefix("K#")


def tenant_keys_pk(tenant_id: str) -> str:
    """gsi1 partition key under which a tenant's keys are listed, ordered by key id."""
    return f"T#{tenant_id}#keys"


TENANT_SK: Final = "L"


TENANT_PK_PREFIX: Final = "L#"
"""Partition-key prefix of tenants' own items: the only items the reaper updates (its usage counts)."""


def tenant_key(tenant_id: str) -> Item:
    """The table key of a tenant's own item: its limits and its rate limit's bucket."""
    return key(f"{TENANT_PK_PREFIX}{tenant_id}", TENANT_SK)


USAGE_DAY_PREFIX: Final = "U#"
"""Sort-key prefix of a tenant's usage of one day (`store/usage.py`), in the tenant's own partition."""


def usage_day_key(tenant_id: str, day: str) -> Item:
    """The table key of a tenant's usage on `day` (`YYYY-MM-DD`, UTC)."""
    return key(f"{TENANT_PK_PREFIX}{tenant_id}", f"{USAGE_DAY_PREFIX}{day}")


AUDIT_PK_PREFIX: Final = "E#"
"""Partition-key prefix of a tenant's audit trail (`store/audit.py`): its head and its events."""
AUDIT_HEAD_SK: Final = "H"
AUDIT_EVENT_PREFIX: Final = "E#"


def audit_pk(tenant_id: str) -> str:
    """The partition of a tenant's audit trail."""
    return f"{AUDIT_PK_PREFIX}{tenant_id}"


def audit_event_sk(seq: int) -> str:
    """An audit event's sort key: its number (its time grows with it along the chain)."""
    return f"{AUDIT_EVENT_PREFIX}{seq:012d}"


OAUTH_CLIENT_SK: Final = "A"
OAUTH_SECRET_SK: Final = "S"
OAUTH_GRANT_SK: Final = "G"


def oauth_client_key(client_id: str) -> Item:
    """The table key of a registered OAuth client (clients belong to no tenant until a person approves one)."""
    return key(f"A#{client_id}", OAUTH_CLIENT_SK)


def oauth_secret_key(secret_hash: str) -> Item:
    """The table key of an authorization code, access token or refresh token: the SHA-256 of the secret."""
    return key(f"S#{secret_hash}", OAUTH_SECRET_SK)


def oauth_grant_key(tenant_id: str, grant_id: str) -> Item:
    """The table key of a grant: what a person approved for a client, in their key's tenant."""
    return key(f"G#{tenant_id}#{grant_id}", OAUTH_GRANT_SK)


def tenant_grants_pk(tenant_id: str) -> str:
    """gsi1 partition key under which a tenant's grants are listed, ordered by grant id."""
    return f"T#{tenant_id}#grants"


def blob_key(tenant_id: str, blob_id: str) -> Item:
    """The table key of a blob's record."""
    return key(f"{BLOB_PK_PREFIX}{tenant_id}#{blob_id}", BLOB_SK)


def read_blob_key(pk: str) -> tuple[str, str]:
    """(tenant, blob_id) back from a blob record's partition key."""
    tenant_id, _, blob_id = pk.removeprefix(BLOB_PK_PREFIX).partition("#")
    return tenant_id, blob_id


def tenant_prefix(tenant_id: str) -> str:
    """Where every object of a tenant lives (presigned URLs and grants never reach outside it)."""
    return f"{schema.BLOB_PREFIX}{tenant_id}/"


def blob_object(tenant_id: str, blob_id: str) -> str:
    """The object key of an uploaded blob."""
    return f"{tenant_prefix(tenant_id)}{blob_id}"


def state_object(tenant_id: str, object_id: str) -> str:
    """The object key of one write's spilled state."""
    return f"{tenant_prefix(tenant_id)}{STATES}/{object_id}"


def tenant_free_object(key: str) -> str:
    """An object key without the blob prefix and the tenant (`states/<object_id>`, `<blob_id>`): what a log line may
    name of it."""
    return key.removeprefix(schema.BLOB_PREFIX).partition("/")[2]


THREAD_PK_PREFIX: Final = "H#"
THREAD_HEAD_SK: Final = "H"
THREAD_CHECKPOINT: Final = "K#"
THREAD_VALUE: Final = "V#"
THREAD_WRITE_VALUE: Final = "W#"


def thread_pk(tenant_id: str, agent_id: str, thread_id: str) -> str:
    """Partition key of one agent's LangGraph thread (the thread id comes last, so any characters are safe)."""
    return f"{THREAD_PK_PREFIX}{tenant_id}#{agent_id}#{thread_id}"


def read_thread_pk(pk: str) -> tuple[str, str, str]:
    """(tenant, agent, thread_id) back from a thread's partition key."""
    tenant_id, agent_id, thread_id = pk.removeprefix(THREAD_PK_PREFIX).split("#", 2)
    return tenant_id, agent_id, thread_id


KEY_PART_BYTES: Final = 100
"""Longest free-form part written as itself in a thread sort key; a longer one is written as its digest, so that no
sort key passes DynamoDB's 1,024 bytes whatever the characters (the item then names it in full)."""
HASHED: Final = "h:"


def sized(text: str) -> str:
    """A free-form part of a sort key, written length-first so that it parses back one way."""
    return f"{len(text)}:{text}"


def part(text: str) -> str:
    """A free-form part of a thread sort key: length-first, or `h:` and its SHA-256 when over `KEY_PART_BYTES`
    (a length starts with a digit, so the two forms never meet)."""
    raw = text.encode("utf-8")
    return sized(text) if len(raw) <= KEY_PART_BYTES else HASHED + hashlib.sha256(raw).hexdigest()


def read_sized(text: str) -> tuple[str | None, str]:
    """(part, rest after its `#`) back from a part at the start of `text`; the part is None when it was written as
    its digest."""
    if text.startswith(HASHED):
        end = len(HASHED) + 64
        return None, text[end + 1 :]
    length, _, rest = text.partition(":")
    size = int(length)
    return rest[:size], rest[size + 1 :]


def thread_checkpoints(namespace: str | None) -> str:
    """Sort-key prefix of a namespace's checkpoints (None: of every namespace's)."""
    return THREAD_CHECKPOINT if namespace is None else f"{THREAD_CHECKPOINT}{part(namespace)}#"


def thread_checkpoint_sk(namespace: str, checkpoint_id: str) -> str:
    """Sort key of one checkpoint of a thread."""
    return f"{thread_checkpoints(namespace)}{checkpoint_id}"


def read_thread_checkpoint_sk(sk: str) -> tuple[str | None, str]:
    """(namespace, checkpoint_id) back from a thread checkpoint's sort key (the namespace None when the key holds its
    digest: the item names it)."""
    return read_sized(sk.removeprefix(THREAD_CHECKPOINT))


def thread_value_sk(generation: str, namespace: str, channel: str, version: str) -> str:
    """Sort key of the value of one version of a channel (`version` as `threads.version_key` writes it)."""
    return f"{THREAD_VALUE}{generation}#{part(namespace)}#{part(channel)}#{part(version)}"


def thread_values(generation: str) -> str:
    """Sort-key prefix of every value one generation of a thread wrote."""
    return f"{THREAD_VALUE}{generation}#"


def thread_write_value_sk(namespace: str, checkpoint_id: str, value_id: str) -> str:
    """Sort key of a pending write's value too large to ride in its checkpoint's item."""
    return f"{THREAD_WRITE_VALUE}{part(namespace)}#{sized(checkpoint_id)}#{value_id}"


def run_index_pk(tenant_id: str, agent_id: str, run_id: str) -> str:
    """gsi1 partition key under which an agent's thread checkpoints of one run are found."""
    return f"R#{tenant_id}#{agent_id}#{part(run_id)}"


def key(pk: str, sk: str) -> Item:
    """A table key in DynamoDB's typed form."""
    return {schema.PK: {"S": pk}, schema.SK: {"S": sk}}


def identity(item: Item) -> tuple[str, str]:
    """(pk, sk) of a typed item or key."""
    return item[schema.PK]["S"], item[schema.SK]["S"]
