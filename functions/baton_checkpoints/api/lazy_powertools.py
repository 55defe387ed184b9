"""Powertools' packages without what Baton does not use, each name loaded only when asked for.

Three of powertools' `__init__.py` files import far more than the api function uses, to re-export it:

- `aws_lambda_powertools` itself: the Logger (and with it jmespath and the formatter), Metrics and the Tracer, which
  every import of any powertools module runs first, though a request that logs nothing but its access line needs
  none of them (`observability.py` makes the Logger when something is first logged through it);
- `aws_lambda_powertools.event_handler`: every resolver it offers (AppSync, AppSync events, Bedrock agents, VPC
  Lattice, Lambda function URLs...) and `asyncio` with them;
- `aws_lambda_powertools.utilities.data_classes`: every event source's data class (Kinesis, S3, SES, CodePipeline...),
  when the HTTP API's resolver reads its own and a few others.

`install` puts in place of each a package module of the same name, path and spec whose names are those very
re-exports, each imported from its own submodule the first time it is read (PEP 562). The names and where each comes
from are read from the package's own `__init__.py` (its `from ... import ...` lines), so a powertools release that
adds or moves one is followed as it is. The root package's `__init__.py` also acts when imported: it quiets the
package's own logger (unless `POWERTOOLS_DEBUG` is set: then the real package is imported as it is) and adds
powertools' mark to the AWS SDK's User-Agent; the stand-in does both, as it does. Nothing changes for code that
imports a package after `install`: the same names, the same objects; only what nobody reads is never imported.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any, Final

ROOT: Final = "aws_lambda_powertools"
PACKAGES: Final = (ROOT, f"{ROOT}.event_handler", f"{ROOT}.utilities.data_classes")
"""The packages `install` replaces, parents first (finding a subpackage imports its parent)."""


def exports(init_source: str, package: str) -> dict[str, tuple[str, str | None]]:
    """The names the `__init__.py` of `package` imports (to re-export them): for each, the module it comes from and
    its name there (None: the name is that module itself, a submodule the package imports)."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(init_source).body:
        if not isinstance(node, ast.ImportFrom) or node.level > 1:
            continue
        for alias in node.names:
            name = alias.asname or alias.name
            if node.level == 0 and node.module:
                found[name] = (node.module, alias.name)
            elif node.module:  # `from .alb_event import ALBEvent`
                found[name] = (f"{package}.{node.module}", alias.name)
            else:  # `from . import shared`
                found[name] = (f"{package}.{alias.name}", None)
    return found


def declared_all(init_source: str) -> list[str] | None:
    """The `__all__` a package's `__init__.py` declares as a list of names, if it does."""
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
                return list(value)
    return None


def install() -> list[str]:
    """Put the lazy packages in place, each unless it is imported already; those put in place."""
    if _debugging() and ROOT not in sys.modules:
        return []  # the real root package sets powertools' debug logging up: leave it all to the real packages
    return [name for name in PACKAGES if _install(name)]


def _debugging() -> bool:
    """`POWERTOOLS_DEBUG` is set to a true value (read here: powertools' own reader is in a module of the package,
    whose import would run the real root package)."""
    return os.getenv("POWERTOOLS_DEBUG", "0").strip().lower() in {"1", "y", "yes", "t", "true", "on"}


def _install(name: str) -> bool:
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)  # (imports the parent package, the lazy one when it is in place)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return False
    source = Path(spec.origin).read_text(encoding="utf-8")
    where = exports(source, name)
    package = types.ModuleType(name, f"Powertools' {name}, each name imported when first read (Baton).")
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    package.__spec__ = spec
    package.__all__ = declared_all(source) or sorted(where)  # type: ignore[attr-defined]

    def read(attribute: str) -> Any:
        if attribute not in where:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        module, original = where[attribute]
        imported = importlib.import_module(module)
        value = imported if original is None else getattr(imported, original)
        setattr(package, attribute, value)
        return value

    def names() -> list[str]:
        return sorted(set(package.__dict__) | set(where))

    package.__getattr__ = read  # type: ignore[method-assign]
    package.__dir__ = names  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, package)
    if name == ROOT:
        _as_the_root_package_does(package, Path(spec.origin).parent)
    return True


def _as_the_root_package_does(package: types.ModuleType, path: Path) -> None:
    """What `aws_lambda_powertools/__init__.py` does besides importing: its module attributes, its package logger
    quieted (`set_package_logger_handler` without debugging, whose module imports the Logger's), powertools' mark
    on the AWS SDK's User-Agent (`inject_user_agent`)."""
    from aws_lambda_powertools.shared.user_agent import inject_user_agent
    from aws_lambda_powertools.shared.version import VERSION

    package.__version__ = VERSION  # type: ignore[attr-defined]
    package.__author__ = "Amazon Web Services"  # type: ignore[attr-defined]
    package.PACKAGE_PATH = path  # type: ignore[attr-defined]
    quiet = logging.getLogger(ROOT)
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    inject_user_agent()
