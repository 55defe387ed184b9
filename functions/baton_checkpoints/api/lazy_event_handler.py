"""Powertools' `event_handler` package without the resolvers Baton does not use, loaded only when asked for.

`aws_lambda_powertools/event_handler/__init__.py` imports every resolver it offers (AppSync, AppSync events, Bedrock
agents, VPC Lattice, Lambda function URLs...) to re-export them, and with them `asyncio`: a fifth of the event
handler's import, paid by every cold start of a function that uses the HTTP API's resolver alone. `install` puts in
its place a package module of the same name, path and spec whose names are those very re-exports, each imported from
its own submodule the first time it is read (PEP 562). The names and where each comes from are read from the
package's own `__init__.py` (its `from ... import ...` lines), so a powertools release that adds or moves one is
followed as it is. Nothing changes for code that imports the package after `install`: the same names, the same
objects; only what nobody reads is never imported.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any, Final

PACKAGE: Final = "aws_lambda_powertools.event_handler"


def exports(init_source: str) -> dict[str, tuple[str, str]]:
    """The names a package's `__init__.py` re-exports: for each, the module it comes from and its name there."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


def install() -> bool:
    """Put the lazy package in place, unless the package is imported already; whether it was put in place."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)  # (imports `aws_lambda_powertools` itself, not this package)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return False
    where = exports(Path(spec.origin).read_text(encoding="utf-8"))
    package = types.ModuleType(PACKAGE, "Powertools' event handlers, each imported when first read (Baton).")
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = PACKAGE
    package.__spec__ = spec
    package.__all__ = sorted(where)  # type: ignore[attr-defined]

    def read(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        module, original = where[name]
        value = getattr(importlib.import_module(module), original)
        setattr(package, name, value)
        return value

    def names() -> list[str]:
        return sorted(set(package.__dict__) | set(where))

    package.__getattr__ = read  # type: ignore[method-assign]
    package.__dir__ = names  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package
    parent = sys.modules.get("aws_lambda_powertools")
    if parent is not None:
        parent.event_handler = package  # type: ignore[attr-defined]
    return True
