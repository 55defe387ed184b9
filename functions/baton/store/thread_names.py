"""The attribute names of thread items (`store/threads.py` writes them, `store/thread_reaping.py` reads them): one
vocabulary, importing nothing, so the reaper's cold start loads no domain model to learn them."""

from __future__ import annotations

from typing import Final

# The head (`H`).
GENERATION: Final = "g"
"""The thread's life: on the head, and on each checkpoint item of that life."""
TTL_MS: Final = "tms"
TTL_S: Final = "tts"
EXPIRES_MS: Final = "exp"
CREATED: Final = "ca"
UPDATED: Final = "ua"

# A checkpoint (`K#<ns>#<id>`).
DOCUMENT: Final = "cp"
PARENT: Final = "par"
INLINE: Final = "iv"
SIZES: Final = "vz"
WRITES: Final = "w"
WRITE_BYTES: Final = "wb"
WRITE_INLINE: Final = "wi"
NAMESPACE: Final = "ns"
"""The namespace in full, on a checkpoint item whose key holds the namespace's digest (a long one)."""

# A value (`V#...`), a write value (`W#...`), and the entries of `INLINE` and `WRITES`.
TYPE: Final = "t"
BYTES: Final = "b"
PACKED: Final = "z"
OBJECT: Final = "so"
SIZE: Final = "n"
VERSION: Final = "v"
CHANNEL: Final = "c"
TASK_PATH: Final = "p"
REFERENCE: Final = "r"
