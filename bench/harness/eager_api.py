"""Baton's api handler without its lean cold path: what the lean path defers, loaded by the import.

The second target of `coldstart.py` ("without the lean path"). Importing this module imports
`baton_checkpoints.handlers.api` and then, before the import ends (so inside the cold request's clock), everything
the lean path leaves to the first request that needs it:

* the deferred routers (every family's but the checkpoints': keys, blobs, history, leases, resume, threads with
  their models and the thread planner, MCP, OAuth, tenants, usage, audit, the console;
  `BatonResolver.include_router_when_asked`), included as their first requests would include them
  (`include_deferred_routers()`);
* the repositories `Services` makes on first use (`LAZY_STORES`: blobs, history, leases, the purger, the audit
  trail, threads);
* the service logger, which every request made before the lean path (the access line now writes without it);
* powertools' packages as their own `__init__.py` files load them (the root package with its Logger, Metrics and
  Tracer; the whole `event_handler` package, every resolver it re-exports, AppSync, Bedrock agents, VPC Lattice, ...
  and asyncio with them; every event source's data class): every module they import their re-exports from, named
  by `baton_checkpoints.api.lazy_powertools.exports` from those very files.

Then the handler's `gc.freeze()` again, as if the handler's own import had loaded all of it. Its `handler` is the api
handler itself: the request is the same, only the import differs. The cold request's figure with this module beside
the one with the handler's own is what the lean path saves.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
from pathlib import Path

from baton_checkpoints.api import lazy_powertools
from baton_checkpoints.api.app import app
from baton_checkpoints.handlers.api import handler
from baton_checkpoints.observability import logger

__all__ = ["handler", "loaded"]

LAZY_STORES = tuple(
    f"baton_checkpoints.store.{name}" for name in ("blobs", "history", "leases", "purge", "audit", "threads")
)
"""The modules of the repositories `Services` makes on their first use (OAuth's was made lazily before the lean path
began, and stays out)."""


def powertools_modules() -> list[str]:
    """The modules powertools' lazily loaded packages' `__init__.py` files import their re-exports from, in order."""
    modules: list[str] = []
    for package in lazy_powertools.PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{package} is not installed")
        where = lazy_powertools.exports(Path(spec.origin).read_text(encoding="utf-8"), package)
        modules.extend(module for module, _ in where.values())
    return list(dict.fromkeys(modules))


def load_what_the_lean_path_defers() -> list[str]:
    """Include the deferred routers, import the repositories' modules and powertools' packages whole; the modules
    imported, in order."""
    deferred = app.deferred_routers()
    app.include_deferred_routers()
    modules = [*deferred, *LAZY_STORES, *powertools_modules()]
    for module in modules[len(deferred) :]:
        importlib.import_module(module)
    logger()  # (made by every request's logging before the lean path, the first request's included)
    gc.freeze()
    return modules


loaded = load_what_the_lean_path_defers()
"""What this import loaded beyond the handler's own import."""
