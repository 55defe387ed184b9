"""MCP at `POST /mcp`: JSON-RPC over streamable HTTP, stateless, JSON answers only.

Imported by the `/mcp` route alone, on its first request: the other routes' cold start never pays for it (nor for
`mcp_types`, the protocol's published models, which take ~0.45 s to import).

- `protocol`: the JSON-RPC messages (initialize, notifications, ping, tools/list, tools/call) and their errors;
- `tools`: the tool catalogue, each tool running its HTTP route's operation (`api/operations/`), with the input schema
  a model fills;
- `arguments`: the input schemas, derived from the routes' own request models where there is one.
"""
