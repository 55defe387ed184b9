"""The `baton` command (not deployed).

`run` is the installed script's entry point. It imports nothing beyond the standard library before the command line
itself, so that an install without the `cli` extra (`pip install baton-checkpoints[client]`, say) gets one line
naming the extra to install instead of a traceback; `require` does the same for the commands that run the server's
code (`serve`, `keys create --table`).
"""

from __future__ import annotations

import importlib.util
import sys

DISTRIBUTION = "baton-checkpoints"


def _needs(extra: str, what: str, module: str) -> str:
    return f"baton: {what} needs the {extra} extra ({module} is not installed): pip install '{DISTRIBUTION}[{extra}]'"


def require(extra: str, what: str, *modules: str) -> None:
    """Exit 1 with one line naming `extra` unless every one of `modules` (the extra's packages) is installed."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            print(_needs(extra, what, module), file=sys.stderr)
            raise SystemExit(1)


def run() -> int:
    """The `baton` script: the command line, or, without the `cli` extra, one line saying how to install it."""
    try:
        from baton_checkpoints.cli.main import main
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if not missing or missing == __name__.split(".")[0]:
            raise  # Baton's own module missing: a broken install, not a missing extra
        print(_needs("cli", "the command line", missing), file=sys.stderr)
        return 1
    return main()
