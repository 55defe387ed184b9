"""The contract's limits, in one place."""

from typing import Final

MAX_JSON_DEPTH: Final = 64
"""Deepest nesting accepted anywhere in a body (the root counts as one level)."""

MAX_BODY_BYTES: Final = 3_100_000
"""Largest request body accepted, before any parsing."""

MAX_STATE_BYTES: Final = 3_000_000
"""Largest canonical state accepted. The bound holds for any content: a body carries the state as JSON, and API
Gateway hands the body to Lambda inside a JSON event, where escaping can double it; Lambda takes at most 6 MB.
Where the bytes live (in the item, packed, or in the bucket) is the store's business, never the caller's."""

MIN_TTL_SECONDS: Final = 60
MAX_TTL_SECONDS: Final = 2_592_000
DEFAULT_TTL_SECONDS: Final = 86_400

MIN_KEEP_REVISIONS: Final = 0
MAX_KEEP_REVISIONS: Final = 100

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Largest integer canonical JSON (RFC 8785) carries exactly; bounds counters a client sends."""
MAX_BLOB_BYTES: Final = 5 * 1024**3
"""Largest blob (S3's single PUT)."""

MAX_SUBJECT_ID_CHARS: Final = 200
MAX_SOURCE_FIELD_CHARS: Final = 200
MAX_RESOURCES: Final = 100
MAX_FORMAT_CHARS: Final = 100
MAX_DESCRIPTION_CHARS: Final = 500

IDENTIFIER_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""Client-chosen identifiers: `agent_id`, `tenant_id`."""

IDEMPOTENCY_KEY_MAX_CHARS: Final = 200
IDEMPOTENCY_TTL_SECONDS: Final = 86_400

MAX_IF_MATCH_TAGS: Final = 50
"""Most revisions one `If-Match` list may name for a checkpoint (DynamoDB's `IN` takes at most 100 operands)."""

DEFAULT_PAGE_LIMIT: Final = 50
MAX_PAGE_LIMIT: Final = 200

MIN_RESUME_BUDGET_BYTES: Final = 1_024
MAX_RESUME_BUDGET_BYTES: Final = 6_000_000
"""Bounds of a resume's `budget_bytes`: the most bytes of `data` a caller will take for a `ready` answer."""
MAX_RESUME_CANDIDATES: Final = 50
"""Most candidates an `ambiguous` resume lists (`candidate_count` says how many matched)."""
MAX_ANSWER_DATA_BYTES: Final = 4_500_000
"""Most bytes of compact UTF-8 JSON one answer's `data` may take, whatever the caller's budget: an answer over 1 MB
goes back base64-encoded (4 bytes per 3), so 4,500,000 bytes of `data` and its envelope make about 6,000,100 bytes,
under Lambda's 6 MB response (6,291,556 bytes) with room for the headers. A full record always fits (a state of
3,000,000 bytes and a summary); a `ready` resume, which repeats an OpenCheckpoint document's pending operations and
stop conditions beside its state, may not, and is then `omitted`; `ambiguous` candidates stop before passing it."""

KEY_CACHE_SECONDS: Final = 60
"""How long a container trusts a key record it read: the bound on how late a revocation takes effect."""

MIN_LEASE_SECONDS: Final = 10
MAX_LEASE_SECONDS: Final = 86_400
MAX_HOLDER_CHARS: Final = 200
"""Longest lease `holder` (an agent's session, a worker: free text without control characters)."""

PURGE_SECONDS: Final = 20
"""How long one purge request starts new pages, from the route's start, before it answers `complete: false`: API
Gateway gives up on a request after 30 s (the function's timeout is 29 s), and the page in flight when time runs out
(one Query and one BatchWriteItem, tens of milliseconds unless DynamoDB is failing) must still finish and answer."""

MAX_KEY_LIST_READS: Final = 2_000
"""Most key records one keys list request reads, kept or dropped (revoked, expired, another agent's): about 1 MB, in
at most ten Queries (each reads twice the one before, from `limit + 1` up to 1,000). A page that reaches it comes
back short, or empty, with a cursor past what it read."""
