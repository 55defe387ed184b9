"""Write the OpenAPI document: `python -m baton_checkpoints.api.openapi_export docs/openapi.json`."""

from __future__ import annotations

import sys
from pathlib import Path


def render() -> str:
    """The document as committed: the generated JSON and a final newline."""
    from baton_checkpoints.api.app import openapi_json

    return openapi_json() + "\n"


def main(argv: list[str]) -> int:
    """Write the document to the path given."""
    if len(argv) != 1:
        print("usage: python -m baton_checkpoints.api.openapi_export PATH", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
