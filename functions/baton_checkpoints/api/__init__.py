"""The HTTP surface: one resolver, a router per resource, one error map, the MCP endpoint."""

from baton_checkpoints.api import lazy_event_handler

# Before anything imports powertools' event handler: its package's unused resolvers stay unloaded.
lazy_event_handler.install()
