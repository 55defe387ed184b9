"""Where the benchmark's files are, and how a child interpreter finds the `bench` package.

Standard library only: every child imports it, a peer's environment (no Baton there) and a cold-start child too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
"""Every run's figures and logs (gitignored)."""


def with_repo_path(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the repository's root first on `PYTHONPATH`: a child interpreter started with `-m bench...` (or
    `-c` code importing `bench`) then finds the package from any working directory, in any environment (the
    repository's .venv installs Baton, not `bench`; a peer's installs neither). A `PYTHONPATH` already there stays
    after it (to measure another checkout of Baton, say: the root holds no `baton_checkpoints`)."""
    kept = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), kept]))}
