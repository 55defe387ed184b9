"""MCP and OAuth stay off the cold path: the api handler, imported and serving a save, loads neither `mcp_types`
(~0.45 s) nor Baton's MCP package, nor OAuth's rules and endpoints (~3 ms of dataclasses and pages); only a request
to /mcp (or to OAuth's routes) does. Nor does it load any other family's router (`DEFERRED_ROUTERS`), nor the
repositories only those families use, nor the models of their answers (each family's `api/schemas_<family>.py`;
with `domain.audit`, which only the audit answers name, ~5 ms of import)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from baton_checkpoints import api
from baton_checkpoints.api.app import DEFERRED_ROUTERS

REPO = Path(__file__).resolve().parents[2]
MCP_MODULES = (
    "mcp_types",
    "baton_checkpoints.api.mcp",
    "baton_checkpoints.api.mcp.protocol",
    "baton_checkpoints.api.mcp.tools",
    "baton_checkpoints.domain.oauth",
    "baton_checkpoints.api.oauth_endpoints",
)
OTHER_FAMILIES = (
    "aws_lambda_powertools.logging.logger",  # (a request that logs only its access line makes no Logger)
    *(f"baton_checkpoints.api.routers.{module}" for module, *_ in DEFERRED_ROUTERS),
    *(f"baton_checkpoints.store.{name}" for name in ("blobs", "history", "leases", "purge", "audit", "threads")),
    *(f"baton_checkpoints.api.{m.name}" for m in pkgutil.iter_modules(api.__path__) if m.name.startswith("schemas_")),
    "baton_checkpoints.domain.audit",
)
# A save served against in-process moto (no socket): the handler's whole path, then what it loaded.
PROBE = """
import json, sys
from moto import mock_aws
with mock_aws():
    import boto3
    from baton_checkpoints.store.schema import ensure_table
    ensure_table(boto3.client("dynamodb", region_name="us-east-1"), "baton-probe")
    from baton_checkpoints.api.services import build_services
    from baton_checkpoints.domain.access import issue_key
    from baton_checkpoints.settings import load_settings
    from baton_checkpoints.handlers.api import handler
    from baton_checkpoints.api.app import app
    from baton_checkpoints.api.resolver import wired
    services = build_services(load_settings({"BATON_TABLE_NAME": "baton-probe"}))
    key = issue_key("t", "a", {"*"}, 1_700_000_000_000, secret="btn_probe_secret", key_id="key_" + "b" * 32)
    services.keys.put(key.record)
    app.dependency_overrides[wired] = lambda: services
    after_import = [m for m in MODULES if m in sys.modules]
    event = json.loads(open(EVENT).read())
    event["headers"]["authorization"] = "Bearer btn_probe_secret"
    event["headers"].pop("idempotency-key")
    status = handler(event, None)["statusCode"]
    after_save = [m for m in MODULES if m in sys.modules]
    if CALL_MCP:
        event = json.loads(open(MCP_EVENT).read())
        event["headers"]["authorization"] = "Bearer btn_probe_secret"
        handler(event, None)
    after_mcp = [m for m in MODULES if m in sys.modules]
print(json.dumps({"status": status, "import": after_import, "save": after_save, "mcp": after_mcp}))
"""


def probe(call_mcp: bool) -> dict[str, Any]:
    """Run the probe in a fresh interpreter and return what it saw."""
    source = (
        f"MODULES = {(*MCP_MODULES, *OTHER_FAMILIES)!r}\nEVENT = {str(REPO / 'events' / 'save_checkpoint.json')!r}\n"
        f"MCP_EVENT = {str(REPO / 'events' / 'mcp_tools_call.json')!r}\nCALL_MCP = {call_mcp!r}\n" + PROBE
    )
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


def test_the_api_handler_imports_and_saves_without_loading_mcp() -> None:
    seen = probe(call_mcp=True)
    assert seen["status"] == 201, seen
    assert seen["import"] == [], seen
    assert seen["save"] == [], seen
    # the probe is able to see them: a call to /mcp loads them
    assert {"mcp_types", "baton_checkpoints.api.mcp.protocol", "baton_checkpoints.domain.oauth"} <= set(seen["mcp"])
