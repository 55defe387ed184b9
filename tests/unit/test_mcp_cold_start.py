"""MCP and OAuth stay off the cold path: the api handler, imported and serving a save, loads neither `mcp_types`
(~0.45 s) nor Baton's MCP package, nor OAuth's rules and endpoints (~3 ms of dataclasses and pages); only a request
to /mcp (or to OAuth's routes) does. Nor does it load any other family's router (`DEFERRED_ROUTERS`), nor the
repositories only those families use, nor the models of their answers (each family's `api/schemas_<family>.py`;
with `domain.audit`, which only the audit answers name, ~5 ms of import), nor powertools' logging (its access line
is all it logs)."""

from __future__ import annotations

import pkgutil
from typing import Any

from baton_checkpoints import api
from baton_checkpoints.api.app import DEFERRED_ROUTERS
from tests.unit import cold_probe

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
# A save, then an MCP call, served by a cold container (`cold_probe`): what each step loaded.
PROBE = """
after_import = [m for m in MODULES if m in sys.modules]
status = handler(event("save_checkpoint"), None)["statusCode"]
after_save = [m for m in MODULES if m in sys.modules]
if CALL_MCP:
    handler(event("mcp_tools_call"), None)
after_mcp = [m for m in MODULES if m in sys.modules]
print(json.dumps({"status": status, "import": after_import, "save": after_save, "mcp": after_mcp}))
"""


def probe(call_mcp: bool) -> dict[str, Any]:
    """Run the probe in a fresh interpreter and return what it saw."""
    return cold_probe.run(PROBE, MODULES=(*MCP_MODULES, *OTHER_FAMILIES), CALL_MCP=call_mcp)


def test_the_api_handler_imports_and_saves_without_loading_mcp() -> None:
    seen = probe(call_mcp=True)
    assert seen["status"] == 201, seen
    assert seen["import"] == [], seen
    assert seen["save"] == [], seen
    # the probe is able to see them: a call to /mcp loads them
    assert {"mcp_types", "baton_checkpoints.api.mcp.protocol", "baton_checkpoints.domain.oauth"} <= set(seen["mcp"])
