"""The README's MCP set-up, client by client, against `baton serve`: the key its command line makes, and for each
client's snippet the URL and `Authorization` header that client would send (its own placeholders filled in the way
the client fills them), which must initialize an MCP session and list Baton's tools; and the Python snippet, run as
printed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.e2e.readme import readme_block
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

MCP_SECTION = "## MCP: Baton as tools for agents"
CLIENTS = ("Claude Code", "Cursor", "VS Code", "Claude Desktop", "The OpenAI Responses API")
PLACEHOLDER_URL = "https://<your-api-id>.execute-api.<region>.amazonaws.com/mcp"


def _what_the_client_sends(client: str, language: str, block: str, key: str) -> tuple[str, str]:
    """The URL and `Authorization` value `client` sends, from its README snippet, with its placeholders filled."""
    if language == "sh":
        words = shlex.split(block.replace("\\\n", " "))
        assert words[:5] == ["claude", "mcp", "add", "--transport", "http"], words
        url = words[6]
        header = words[words.index("--header") + 1]
        name, _, value = header.partition(":")
        assert name == "Authorization", header
        return url, value.strip().replace("btn_…", key)
    config: dict[str, Any] = json.loads(block)
    if client == "The OpenAI Responses API":
        assert config["type"] == "mcp", config
        return config["server_url"], config["headers"]["Authorization"].replace("btn_…", key)
    servers = config["servers" if client == "VS Code" else "mcpServers"]
    server = servers["baton"]
    if client == "Claude Desktop":
        # mcp-remote's arguments: the URL, then `--header Name:${VAR}` with VAR from the server's env
        args, env = server["args"], server["env"]
        assert args[:2] == ["-y", "mcp-remote"], args
        name, _, value = args[args.index("--header") + 1].partition(":")
        assert name == "Authorization", args
        value = re.sub(r"\$\{(\w+)\}", lambda found: env[found.group(1)], value)
        return args[2], value.replace("btn_…", key)
    if client == "VS Code":
        # VS Code asks for each `${input:id}` once (a password prompt) and sends what was typed
        (prompt,) = config["inputs"]
        assert prompt["type"] == "promptString", prompt
        assert prompt["password"] is True, prompt
        value = server["headers"]["Authorization"].replace("${input:" + prompt["id"] + "}", key)
        assert server["type"] == "http", server
        return server["url"], value
    return server["url"], server["headers"]["Authorization"].replace("btn_…", key)


def test_each_clients_snippet_connects_with_a_scoped_agent_key(baton: BatonServe, http: httpx.Client) -> None:
    # Given the agent key the README's command line makes (its scopes, created here over the API)
    language, command = readme_block(MCP_SECTION, "First make a key for the agent")
    assert language == "sh"
    words = shlex.split(command.splitlines()[0])
    assert words[:3] == ["baton", "keys", "create"], words
    scopes = words[words.index("--scopes") + 1].split(",")
    assert "*" not in scopes
    assert "mcp:call" in scopes
    created = http.post("/v1/keys", json={"agent_id": words[words.index("--agent") + 1], "scopes": scopes})
    assert created.status_code == 201, created.text
    key = created.json()["data"]["secret"]
    for client in CLIENTS:
        # When the client sends what its snippet says (the placeholder URL being this server's)
        language, block = readme_block(MCP_SECTION, f"**{client}**")
        url, authorization = _what_the_client_sends(client, language, block, key)
        assert url == PLACEHOLDER_URL, (client, url)
        assert authorization == f"Bearer {key}", client
        headers = {"Authorization": authorization, "Accept": "application/json, text/event-stream"}
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": client, "version": "1"},
            },
        }
        started = httpx.post(f"{baton.url}/mcp", json=initialize, headers=headers, timeout=30)
        listed = httpx.post(
            f"{baton.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers, timeout=30
        )
        # Then Baton answers its handshake and lists its tools to it
        assert started.status_code == 200, (client, started.text)
        assert started.json().get("result", {}).get("serverInfo", {}).get("name") == "baton", (client, started.text)
        assert listed.status_code == 200, (client, listed.text)
        assert "baton_checkpoint_save" in {tool["name"] for tool in listed.json()["result"]["tools"]}, client
        record("readme mcp (e2e)", clients=1)


def test_the_python_snippet_runs_as_printed(baton: BatonServe, http: httpx.Client, tmp_path: Any) -> None:
    # Given an agent key with the README's scopes, and the snippet exactly as the README prints it
    created = http.post(
        "/v1/keys",
        json={"agent_id": "readme-python", "scopes": ["mcp:call", "checkpoints:read", "checkpoints:write"]},
    )
    assert created.status_code == 201, created.text
    language, snippet = readme_block(MCP_SECTION, "From Python, with the official SDK")
    assert language == "python"
    script = tmp_path / "snippet.py"
    script.write_text(snippet, encoding="utf-8")
    # When it runs as a script, with the two variables the README names
    environment = {**os.environ, "BATON_URL": baton.url, "BATON_API_KEY": created.json()["data"]["secret"]}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=environment, timeout=120, check=False
    )
    # Then it saves through MCP and prints the tool's result
    assert done.returncode == 0, done.stderr
    assert "'subject_id': 'ticket-42'" in done.stdout, done.stdout
    record("readme mcp (e2e)", snippets=1)
