"""Powertools' packages, loaded lazily (`api/lazy_powertools.py`): each replaced package names what the real one
does, with the same objects behind the names; the root package does what its own `__init__.py` does (its package
logger quieted, powertools' mark on the AWS SDK's User-Agent); and none of what Baton does not use is loaded by a
cold start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from baton_checkpoints.api.lazy_powertools import PACKAGES

NAMES = """
import json, sys, importlib, logging
PACKAGES = {packages!r}
if {lazy!r}:
    import baton_checkpoints.api
found = {{}}
for name in PACKAGES:
    package = importlib.import_module(name)
    found[name] = {{attr: getattr(package, attr).__module__ + "." + getattr(package, attr).__qualname__
                   for attr in package.__all__}}
root = importlib.import_module("aws_lambda_powertools")
quiet = logging.getLogger("aws_lambda_powertools")
import botocore.session
client = botocore.session.get_session().create_client(
    "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
)
agents = []
def stop(request, **_):
    agents.append(request.headers["User-Agent"].decode() if isinstance(request.headers["User-Agent"], bytes)
                  else request.headers["User-Agent"])
    raise RuntimeError("sent nothing")
client.meta.events.register("before-send.dynamodb", stop)
try:
    client.list_tables()
except RuntimeError:
    pass
print(json.dumps({{
    "names": found,
    "version": root.__version__,
    "path": str(root.PACKAGE_PATH),
    "quiet": [type(h).__name__ for h in quiet.handlers] + [quiet.propagate],
    "mark": [part for part in agents[0].split() if part.startswith(("PT/", "PTEnv/"))],
    "loaded": sorted(m for m in sys.modules if m in (
        "asyncio", "aws_lambda_powertools.event_handler.appsync", "aws_lambda_powertools.logging.logger",
        "aws_lambda_powertools.utilities.data_classes.kinesis_firehose_event")),
}}))
"""
COLD = """
import json, sys
import baton_checkpoints.handlers.api
unused = ("asyncio", "jmespath", "aws_lambda_powertools.logging.logger", "aws_lambda_powertools.metrics",
          "aws_lambda_powertools.tracing", "aws_lambda_powertools.event_handler.appsync",
          "aws_lambda_powertools.event_handler.bedrock_agent", "aws_lambda_powertools.event_handler.vpc_lattice",
          "aws_lambda_powertools.event_handler.events_appsync",
          "aws_lambda_powertools.utilities.data_classes.kinesis_firehose_event",
          "aws_lambda_powertools.utilities.data_classes.code_pipeline_job_event")
print(json.dumps(sorted(m for m in unused if m in sys.modules)))
"""


def _run(code: str, **env: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, env={**os.environ, **env}
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_lazy_package_names_what_the_real_one_does_and_acts_as_it_does() -> None:
    real = _run(NAMES.format(packages=PACKAGES, lazy=False))
    lazy = _run(NAMES.format(packages=PACKAGES, lazy=True))
    # the same names, each the same object (named by its module and qualified name)
    assert lazy["names"] == real["names"]
    assert set(lazy["names"]) == set(PACKAGES)
    assert all(lazy["names"][name] for name in PACKAGES)
    # the root package's attributes and what its __init__ does when imported
    assert (lazy["version"], lazy["path"], lazy["quiet"]) == (real["version"], real["path"], real["quiet"])
    assert lazy["quiet"] == ["NullHandler", False]
    assert lazy["mark"] == real["mark"]
    assert lazy["mark"], "powertools marks the AWS SDK's User-Agent"
    # and nothing was loaded that only reading the names loads (the lazy probe read every name: all of it now)
    assert real["loaded"]


def test_the_api_handlers_import_loads_none_of_what_it_does_not_use() -> None:
    assert _run(COLD) == []


@pytest.mark.parametrize("value", ["1", "true"])
def test_with_powertools_debugging_on_the_real_packages_are_imported(value: str) -> None:
    code = (
        "import json, sys\nfrom baton_checkpoints.api import lazy_powertools\n"
        "import aws_lambda_powertools\n"
        "print(json.dumps(['aws_lambda_powertools.logging.logger' in sys.modules]))"
    )
    assert _run(code, POWERTOOLS_DEBUG=value) == [True]


def test_exports_names_where_each_re_export_comes_from() -> None:
    from baton_checkpoints.api.lazy_powertools import exports

    source = "from a.b import C as D\nfrom .e import F\nfrom . import g\nfrom ..h import I\nimport j\nK = 1\n"
    assert exports(source, "pkg") == {"D": ("a.b", "C"), "F": ("pkg.e", "F"), "g": ("pkg.g", None)}


def test_a_lazy_package_reads_a_name_its_init_imports_and_a_submodule_it_imports(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton_checkpoints.api import lazy_powertools

    package = tmp_path / "lazy_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .mod import VALUE\nfrom . import sub\n", encoding="utf-8")
    (package / "mod.py").write_text("VALUE = 42\n", encoding="utf-8")
    (package / "sub.py").write_text("NAME = 'sub'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert lazy_powertools._install("lazy_probe_pkg")
        lazy = sys.modules["lazy_probe_pkg"]
        assert "lazy_probe_pkg.mod" not in sys.modules  # nothing imported until read
        assert lazy.VALUE == 42
        assert lazy.sub.NAME == "sub"
    finally:
        for name in [m for m in sys.modules if m.startswith("lazy_probe_pkg")]:
            del sys.modules[name]
