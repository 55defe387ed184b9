"""The HTTP surface: one resolver, a router per resource, one error map, the MCP endpoint."""

from baton_checkpoints.api import lazy_powertools

# Before anything imports powertools: what its packages re-export and Baton does not use stays unloaded.
lazy_powertools.install()
