"""Powertools' event handler package, loaded lazily (`api/lazy_event_handler.py`): the same names as the real
package, the same objects behind them, and none of the resolvers Baton does not use loaded by a cold start."""

from __future__ import annotations

import json
import subprocess
import sys

REAL = """
import json, aws_lambda_powertools.event_handler as package
print(json.dumps({name: f"{getattr(package, name).__module__}.{getattr(package, name).__qualname__}"
                  for name in package.__all__}))
"""
LAZY = """
import json, sys
import baton_checkpoints.api
import aws_lambda_powertools.event_handler as package
loaded_before = sorted(m for m in ("asyncio", "aws_lambda_powertools.event_handler.appsync") if m in sys.modules)
names = {name: f"{getattr(package, name).__module__}.{getattr(package, name).__qualname__}" for name in package.__all__}
print(json.dumps({"names": names, "loaded_before": loaded_before}))
"""
COLD = """
import json, sys
import baton_checkpoints.handlers.api
unused = ("asyncio", "aws_lambda_powertools.event_handler.appsync", "aws_lambda_powertools.event_handler.bedrock_agent",
          "aws_lambda_powertools.event_handler.vpc_lattice", "aws_lambda_powertools.event_handler.events_appsync")
print(json.dumps(sorted(m for m in unused if m in sys.modules)))
"""


def _run(code: str) -> object:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_lazy_package_names_what_the_real_one_does_and_each_name_is_the_same_object() -> None:
    real = _run(REAL)
    lazy = _run(LAZY)
    assert isinstance(real, dict)
    assert isinstance(lazy, dict)
    assert lazy["names"] == real
    assert lazy["loaded_before"] == []


def test_the_api_handlers_import_loads_none_of_the_resolvers_it_does_not_use() -> None:
    assert _run(COLD) == []
