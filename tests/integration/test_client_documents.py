"""Client ID Metadata Documents, fetched for real over HTTPS from a server on 127.0.0.1 whose certificate a test CA
(trustme) signs: the document read and checked, and every bound held (addresses, status, size, media type,
redirects, the name the document gives itself), each refusal before or instead of trusting anything."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme

from baton_checkpoints.domain.oauth import OAuthError
from baton_checkpoints.store.client_documents import ClientDocuments
from tests.proof_counts import record

HOST = "client.example"
SUITE = "client metadata documents (integration)"


class Documents:
    """What the test server answers, path by path: (status, media type, body, extra headers)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes, dict[str, str]]] = {}
        self.requests: list[str] = []


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server(ca: trustme.CA) -> Iterator[tuple[int, Documents]]:
    documents = Documents()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            documents.requests.append(self.path)
            if self.path.startswith("/slow/"):
                # Headers at once, then a byte every 0.2 s: each read is quick, the whole never ends in time
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "4000")
                self.end_headers()
                try:
                    for _ in range(4000):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    return
                return
            status, media, body, headers = documents.routes.get(self.path, (404, "text/plain", b"no", {}))
            self.send_response(status)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST).configure_cert(context)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], documents
    httpd.shutdown()


@pytest.fixture
def fetcher(ca: trustme.CA, tmp_path: Any) -> ClientDocuments:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    return ClientDocuments(loopback=True, resolver=lambda host, port: ["127.0.0.1"], ca_certs=str(bundle))


def url(port: int, path: str) -> str:
    return f"https://{HOST}:{port}{path}"


def serve(
    documents: Documents, path: str, body: Any, status: int = 200, media: str = "application/json", **headers: str
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    documents.routes[path] = (status, media, raw, dict(headers))


def test_a_document_naming_itself_describes_its_client(server: tuple[int, Documents], fetcher: ClientDocuments) -> None:
    port, documents = server
    client_id = url(port, "/oauth/client.json")
    serve(
        documents,
        "/oauth/client.json",
        {
            "client_id": client_id,
            "client_name": "A hosted platform",
            "redirect_uris": ["https://platform.example/cb"],
        },
    )
    client = fetcher.client(client_id)
    assert client.client_id == client_id
    assert client.client_name == "A hosted platform"
    assert client.redirect_uris == ("https://platform.example/cb",)
    before = len(documents.requests)
    fetcher.client(client_id)  # kept: a consent page and its form read it once
    assert len(documents.requests) == before
    record(SUITE, fetched=1)


@pytest.mark.parametrize(
    ("label", "body", "status", "media", "headers", "says"),
    [
        ("names another client", {"client_id": "https://other.example/c.json", "redirect_uris": ["https://a.example/cb"]},
         200, "application/json", {}, "its own URL"),
        ("no redirect URIs", "SELF", 200, "application/json", {}, "redirect_uris"),
        ("a confidential client", "SECRET", 200, "application/json", {}, "none"),
        ("an http redirect URI", "HTTP", 200, "application/json", {}, "loopback"),
        ("a redirect, not followed", b"", 302, "text/plain", {"Location": "/elsewhere.json"}, "HTTP 302"),
        ("not found", b"", 404, "text/plain", {}, "HTTP 404"),
        ("served as HTML", "SELF_OK", 200, "text/html", {}, "application/json"),
        ("over 5 KB", "BIG", 200, "application/json", {}, "5120 bytes"),
        ("not JSON", b"{nope", 200, "application/json", {}, "not JSON"),
    ],
)  # fmt: skip
def test_a_document_that_breaks_a_rule_is_refused(
    server: tuple[int, Documents],
    fetcher: ClientDocuments,
    label: str,
    body: Any,
    status: int,
    media: str,
    headers: dict[str, str],
    says: str,
) -> None:
    port, documents = server
    path = "/refused/" + label.replace(" ", "-").replace(",", "") + ".json"
    client_id = url(port, path)
    bodies = {
        "SELF": {"client_id": client_id},
        "SECRET": {
            "client_id": client_id,
            "redirect_uris": ["https://a.example/cb"],
            "token_endpoint_auth_method": "client_secret_basic",
        },
        "HTTP": {"client_id": client_id, "redirect_uris": ["http://a.example/cb"]},
        "SELF_OK": {"client_id": client_id, "redirect_uris": ["https://a.example/cb"]},
        "BIG": {"client_id": client_id, "redirect_uris": ["https://a.example/cb"], "client_name": "x" * 6000},
    }
    serve(documents, path, bodies.get(body, body) if isinstance(body, str) else body, status, media, **headers)
    with pytest.raises(OAuthError) as refused:
        fetcher.client(client_id)
    assert refused.value.error == "invalid_client"
    assert says in refused.value.description, (label, refused.value.description)
    record(SUITE, refused=1)


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.7",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "fd00::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "0.0.0.0",
    ],
)
def test_a_host_at_a_private_address_is_never_fetched(server: tuple[int, Documents], address: str) -> None:
    port, documents = server
    before = len(documents.requests)
    fetcher = ClientDocuments(loopback=True, resolver=lambda host, port: [address])
    with pytest.raises(OAuthError, match="does not fetch from"):
        fetcher.client(url(port, "/oauth/client.json"))
    assert len(documents.requests) == before
    record(SUITE, private_addresses=1)


def test_loopback_is_refused_when_deployed(server: tuple[int, Documents]) -> None:
    _, documents = server
    before = len(documents.requests)
    deployed = ClientDocuments(loopback=False, resolver=lambda host, port: ["127.0.0.1"])
    with pytest.raises(OAuthError, match="does not fetch from"):
        deployed.client(f"https://{HOST}/oauth/client.json")
    # one public and one private address: refused too (the connection could be steered to either)
    mixed = ClientDocuments(loopback=False, resolver=lambda host, port: ["93.184.216.34", "10.1.1.1"])
    with pytest.raises(OAuthError, match="does not fetch from"):
        mixed.client(f"https://{HOST}/oauth/client.json")
    assert len(documents.requests) == before


def test_a_certificate_for_another_name_is_refused(
    server: tuple[int, Documents], ca: trustme.CA, tmp_path: Any
) -> None:
    port, _ = server
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    fetcher = ClientDocuments(loopback=True, resolver=lambda host, port: ["127.0.0.1"], ca_certs=str(bundle))
    with pytest.raises(OAuthError, match="could not be read"):
        fetcher.client(f"https://another.example:{port}/oauth/client.json")


@pytest.mark.parametrize(
    "client_id",
    ["http://client.example/c.json", "https://client.example", "https://client.example/", "https://client.example/c#f",
     "https://u:p@client.example/c.json"],
)  # fmt: skip
def test_a_client_id_url_that_is_not_one_is_refused_without_a_fetch(client_id: str) -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("resolved")

    with pytest.raises(OAuthError, match="client_id, as a URL"):
        ClientDocuments(loopback=True, resolver=never).client(client_id)


def test_a_server_that_dribbles_is_cut_off_by_the_whole_fetchs_deadline(
    server: tuple[int, Documents], ca: trustme.CA, tmp_path: Any
) -> None:
    port, _ = server
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    fetcher = ClientDocuments(
        loopback=True, resolver=lambda host, port: ["127.0.0.1"], ca_certs=str(bundle), fetch_seconds=1.0
    )
    started = time.monotonic()
    with pytest.raises(OAuthError, match="could not be read"):
        fetcher.client(url(port, "/slow/client.json"))
    assert time.monotonic() - started < 3.0
    # The refusal is kept a while: asking again does not fetch again
    started = time.monotonic()
    with pytest.raises(OAuthError, match="could not be read"):
        fetcher.client(url(port, "/slow/client.json"))
    assert time.monotonic() - started < 0.1
    record(SUITE, deadlines=1)


def test_only_port_443_when_deployed(server: tuple[int, Documents]) -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("resolved")

    with pytest.raises(OAuthError, match="port 443"):
        ClientDocuments(loopback=False, resolver=never).client("https://client.example:8443/c.json")


@pytest.mark.parametrize(
    "client_id",
    ["https://client.example:99999/x", "https://client.example:abc/x", "https://[::1/x", "https://ü.example/c.json",
     "https://client.example/" + "a" * 1000],
)  # fmt: skip
def test_a_malformed_client_id_url_is_refused_never_a_500(client_id: str) -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("resolved")

    with pytest.raises(OAuthError) as refused:
        ClientDocuments(loopback=True, resolver=never).client(client_id)
    assert refused.value.error == "invalid_client"
