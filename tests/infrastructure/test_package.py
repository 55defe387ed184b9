"""The api function's Lambda package, built as `make synth` and `make deploy` build it (`PipBundling`: pip fetches
the runtime set's arm64 wheels for Python 3.13 from the package registry, then Baton's package is copied and the
whole compiled for the runtime's Python). What it holds is listed here: the runtime set and what it brings, and of
Baton's own package only what the functions import (an import-linter contract, `deployed`, keeps them from importing
what is left out)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from infra.components.functions import NOT_DEPLOYED, PipBundling, runtime_python

TOP_LEVEL = {
    # Baton, and its runtime set (pyproject.toml's `server` extra)
    "baton_checkpoints",
    "aws_lambda_powertools",
    "botocore",
    "brotli.py",
    "_brotli.cpython-313-aarch64-linux-gnu.so",
    "cachetools",
    "jsonschema",
    "mcp_types",
    "msgspec",
    "orjson",
    "pybase64",
    "pydantic",
    "rfc8785",
    "snapshot_restore_py.py",
    "urllib3",
    "zstandard",
    # What those bring: pydantic's, botocore's, jsonschema's
    "annotated_types",
    "pydantic_core",
    "typing_extensions.py",
    "typing_inspection",
    "dateutil",
    "jmespath",
    "six.py",
    "attr",
    "attrs",
    "jsonschema_specifications",
    "referencing",
    "rpds",
}
BATON = {"__init__.py", "py.typed", "settings.py", "observability.py", "api", "console", "domain", "handlers", "store"}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The api function's package, bundled as a deployment bundles it (the wheels come from the registry)."""
    out = tmp_path_factory.mktemp("asset")
    assert PipBundling().try_bundle(str(out)) is True
    return out


def test_the_package_holds_the_runtime_set_and_what_it_brings_nothing_else(package: Path) -> None:
    entries = {p.name for p in package.iterdir() if not p.name.endswith(".dist-info") and p.name != "__pycache__"}
    assert entries == TOP_LEVEL, (sorted(entries - TOP_LEVEL), sorted(TOP_LEVEL - entries))
    # Not boto3 (the store is on botocore), nor the packages' scripts, nor zstandard's backend for PyPy
    assert not list(package.glob("boto3*"))
    assert not list(package.glob("s3transfer*"))
    assert not (package / "bin").exists()
    assert not list(package.glob("zstandard/_cffi*"))
    assert not (package / "zstandard" / "backend_cffi.py").exists()


def test_batons_own_package_leaves_out_the_cli_the_emulator_the_sdk_and_the_saver(package: Path) -> None:
    shipped = {p.name for p in (package / "baton_checkpoints").iterdir() if p.name != "__pycache__"}
    assert shipped == BATON
    assert not set(NOT_DEPLOYED) & shipped
    assert not list((package / "baton_checkpoints").rglob("*.pyc.*"))
    # Its data files: the state codec's dictionary, and botocore's endpoint data trimmed to Baton's services, made
    # from the very botocore the package ships (else the function would parse botocore's whole file at cold start)
    assert (package / "baton_checkpoints" / "store" / "state.zdict").is_file()
    kept = json.loads((package / "baton_checkpoints" / "store" / "endpoints.json").read_text(encoding="utf-8"))
    shipped_botocore = re.search(r"__version__ = '([^']+)'", (package / "botocore" / "__init__.py").read_text())
    assert shipped_botocore is not None
    assert kept["botocore"] == shipped_botocore.group(1)


def test_every_module_ships_bytecode_for_the_runtimes_python(package: Path) -> None:
    if runtime_python() is None:
        pytest.skip("no Python 3.13 on this machine: the asset ships sources alone (docs/operations.md)")
    sources = list(package.rglob("*.py"))
    missing = [
        source for source in sources if not (source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc").exists()
    ]
    assert sources
    assert not missing, missing[:5]
    # Checked against nothing (the zip's normalized times would make time-checked bytecode look stale): PEP 552's
    # flags word says "hash-based, unchecked" (0b01)
    pyc = package / "baton_checkpoints" / "handlers" / "__pycache__" / "api.cpython-313.pyc"
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b01
    assert os.path.getsize(pyc) > 0
