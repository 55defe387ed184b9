"""The official `mcp` client identified by a Client ID Metadata Document (its `client_metadata_url`) against a
`baton serve` of its own: Baton advertises the documents, the client skips registration, Baton fetches the document
over HTTPS from the loopback server that hosts it (allowed only because `baton serve` serves plain-HTTP origins;
the certificate is checked, against a test CA the server is told to trust), the person approves, and the client
saves through MCP with its token."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import trustme

from tests.e2e.log_audit import stop_audited
from tests.e2e.oauth_flow import MemoryTokenStorage
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def document_host(ca: trustme.CA) -> Iterator[tuple[str, list[str]]]:
    """An HTTPS server on 127.0.0.1 (a certificate for `localhost`) serving the client's document; its base URL
    and the paths asked of it."""
    asked: list[str] = []
    port_box: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            client_id = f"https://localhost:{port_box[0]}/oauth/client.json"
            document = {
                "client_id": client_id,
                "client_name": "A client known by its document",
                "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
            body = json.dumps(document).encode()
            self.send_response(200 if self.path == "/oauth/client.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_box.append(httpd.server_address[1])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://localhost:{port_box[0]}", asked
    httpd.shutdown()


@pytest.fixture(scope="module")
def trusting_baton(
    moto_endpoint: str, ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BatonServe]:
    """A `baton serve` that trusts the test CA (as a deployed one trusts the public ones)."""
    bundle = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    server = BatonServe(
        "--aws-endpoint", moto_endpoint, "--table", "baton-cimd", "--no-reaper", env={"SSL_CERT_FILE": str(bundle)}
    )
    yield server
    stop_audited(server, "log audit (client documents)")


def test_the_official_client_known_by_its_document_is_approved_and_saves(
    trusting_baton: BatonServe, document_host: tuple[str, list[str]]
) -> None:
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    baton = trusting_baton
    base, asked = document_host
    with httpx.Client(base_url=baton.url, headers={"Authorization": f"Bearer {baton.key}"}) as operator:
        created = operator.post(
            "/v1/keys", json={"agent_id": "cimd-agent", "scopes": ["mcp:call", "checkpoints:read", "checkpoints:write"]}
        )
    assert created.status_code == 201, created.text
    key = created.json()["data"]["secret"]
    decided: dict[str, str] = {}
    registrations: list[str] = []

    async def person(url: str) -> None:
        params = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        async with httpx.AsyncClient() as browser:
            page = await browser.get(url)
            assert page.status_code == 200, page.text
            assert "A client known by its document" in page.text
            answer = await browser.post(
                f"{baton.url}/oauth/authorize", data={**params, "key": key, "decision": "approve"}
            )
        assert answer.status_code == 302, answer.text
        decided.update({k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=decided["code"], state=decided.get("state"), iss=decided.get("iss"))

    async def watch(request: httpx2.Request) -> None:
        if request.url.path == "/oauth/register":
            registrations.append(str(request.url))

    provider = OAuthClientProvider(
        server_url=f"{baton.url}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT], client_name="A client known by its document", token_endpoint_auth_method="none"
        ),
        storage=MemoryTokenStorage(),
        redirect_handler=person,
        callback_handler=callback,
        client_metadata_url=f"{base}/oauth/client.json",
    )
    subject = f"cimd-{uuid.uuid4().hex[:8]}"

    async def session() -> Any:
        http = httpx2.AsyncClient(auth=provider, event_hooks={"request": [watch]})
        async with http, Client(streamable_http_client(f"{baton.url}/mcp", http_client=http)) as mcp:
            await mcp.call_tool("baton_checkpoint_save", {"subject_id": subject, "kind": "task_state", "state": 1})
            return await mcp.call_tool("baton_checkpoint_get", {"subject_id": subject, "kind": "task_state"})

    got = asyncio.run(session())
    assert not got.is_error, got
    assert got.structured_content["state"] == 1
    assert got.structured_content["agent_id"] == "cimd-agent"
    assert registrations == []  # the document stood in for a registration
    # Read by the page and its form at most (each container keeps what it read; they may be two containers)
    assert set(asked) == {"/oauth/client.json"}
    assert len(asked) <= 2, asked
    record("oauth (e2e)", client_documents=1)


def test_a_document_at_a_private_address_is_refused_on_the_page(trusting_baton: BatonServe) -> None:
    # 10.0.0.1 is never fetched from, even by baton serve (which allows loopback alone)
    answer = httpx.get(
        f"{trusting_baton.url}/oauth/authorize",
        params={
            "response_type": "code",
            "client_id": "https://10.0.0.1/oauth/client.json",
            "redirect_uri": REDIRECT,
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
        },
    )
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert "does not fetch from" in answer.text
    record("oauth (e2e)", refusals=1)
