"""A cold container in a fresh interpreter, for the tests of what a cold start loads and builds: the api handler
imported and wired to services on in-process moto (no socket), with an operator's key, before the probe's own code
runs; `run` gives back the last JSON line the probe prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
SECRET = "btn_probe_secret"

CONTAINER = f"""
import json, sys
from moto import mock_aws
mock_aws().start()
import boto3
from baton_checkpoints.store.schema import ensure_table
ensure_table(boto3.client("dynamodb", region_name="us-east-1"), "baton-probe")
from baton_checkpoints.api.services import build_services
from baton_checkpoints.domain.access import issue_key
from baton_checkpoints.settings import load_settings
services = build_services(load_settings({{"BATON_TABLE_NAME": "baton-probe"}}))
key = issue_key("t", "a", {{"*"}}, 1_700_000_000_000, secret={SECRET!r}, key_id="key_" + "b" * 32)
services.keys.put(key.record)
from baton_checkpoints.handlers.api import handler
from baton_checkpoints.api.app import app
from baton_checkpoints.api.resolver import wired
app.dependency_overrides[wired] = lambda: services

def event(name):
    loaded = json.loads(open({str(EVENTS)!r} + "/" + name + ".json").read())
    loaded["headers"]["authorization"] = "Bearer " + {SECRET!r}
    loaded["headers"].pop("idempotency-key", None)
    return loaded
"""
"""What runs before a probe: `handler`, `app` and `services` are there, and `event(name)` reads one of `events/`
with the probe's key."""


def run(probe: str, **constants: object) -> dict[str, Any]:
    """Run `probe` in a fresh interpreter after `CONTAINER`, with `constants` defined first; what it printed last."""
    source = "".join(f"{name} = {value!r}\n" for name, value in constants.items()) + CONTAINER + probe
    env = {
        "PATH": "",
        "PYTHONPATH": str(REPO / "functions"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    done = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found
