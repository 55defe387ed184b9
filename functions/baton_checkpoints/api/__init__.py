"""The HTTP surface: one resolver, a router per resource, one error map, the MCP endpoint."""
