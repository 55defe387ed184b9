"""`baton serve` as a developer runs it: embedded moto, the printed key, Ctrl-C, its log, API Gateway's limits."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.server_process import REPO, BatonServe

GATEWAY_BODY_LIMIT = 10 * 1024 * 1024


LINE_SECONDS = 60.0
"""How long a line the server writes after answering (its per-request line) may take to be read: milliseconds on an
idle machine; the bound is a loaded runner's."""


def wait_for_line(server: BatonServe, pattern: str, timeout: float = LINE_SECONDS) -> str:
    """The first output line matching `pattern`, waiting (bounded) for the output to arrive."""
    deadline = time.monotonic() + timeout
    while True:
        for line in list(server.lines):
            if re.search(pattern, line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no line matches {pattern!r}:\n" + "\n".join(server.lines))
        time.sleep(0.02)


def start_without_dev_key_env(monkeypatch: pytest.MonkeyPatch, *args: str, dev_key: str | None = None) -> BatonServe:
    """`baton serve` with a clean environment: a BATON_DEV_KEY of the developer's must not leak in."""
    monkeypatch.delenv("BATON_DEV_KEY", raising=False)
    return BatonServe(*args, dev_key=dev_key)


@pytest.fixture(scope="module")
def embedded() -> Iterator[BatonServe]:
    """`baton serve` as `make serve` runs it: no --aws-endpoint (embedded moto), a random key."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("BATON_DEV_KEY", raising=False)
        server = BatonServe()
    yield server
    server.stop()


def test_serve_on_embedded_moto_prints_a_url_and_a_key_that_works(embedded: BatonServe) -> None:
    # Given `baton serve` started without --aws-endpoint
    # Then it says it runs on embedded moto on loopback, and printed a key
    assert urlsplit(embedded.url).hostname == "127.0.0.1"
    assert re.fullmatch(r"btn_[A-Za-z0-9_-]{20,}", embedded.key), embedded.key
    wait_for_line(embedded, r"\(embedded moto\)")
    # When the health route is called without a key and a checkpoint is saved with the printed key
    health = httpx.get(f"{embedded.url}/v1/health", timeout=30)
    saved = httpx.post(
        f"{embedded.url}/v1/checkpoints",
        json={"subject_id": f"serve-{uuid.uuid4().hex}", "kind": "task_state", "state": {"step": 1}},
        headers={"Authorization": f"Bearer {embedded.key}"},
        timeout=30,
    )
    # Then both work
    assert health.status_code == 200, health.text
    assert health.json()["data"]["status"] == "ok"
    assert saved.status_code == 201, saved.text
    assert saved.json()["data"]["agent_id"] == "operator"


def test_serve_writes_one_log_line_per_request(embedded: BatonServe) -> None:
    # Given a running server and a path no other request uses
    marker = f"/v1/subjects/log-{uuid.uuid4().hex}/checkpoints"
    # When that path is requested once, and a route answers 401
    listed = httpx.get(f"{embedded.url}{marker}", headers={"Authorization": f"Bearer {embedded.key}"}, timeout=30)
    refused = httpx.delete(f"{embedded.url}/v1/checkpoints/ckpt_{uuid.uuid4().hex}", timeout=30)
    assert (listed.status_code, refused.status_code) == (200, 401)
    # Then exactly one line names the method, the path and the status of each
    wait_for_line(embedded, re.escape(f"GET {marker} 200"))
    assert len([line for line in embedded.lines if marker in line]) == 1
    wait_for_line(embedded, re.escape(f"DELETE {urlsplit(str(refused.url)).path} 401"))


def test_a_body_over_10_mb_gets_api_gateways_413(embedded: BatonServe) -> None:
    # Given a request whose headers announce one byte more than API Gateway's 10 MB
    host, port = urlsplit(embedded.url).hostname, urlsplit(embedded.url).port
    assert host == "127.0.0.1"
    assert port is not None
    head = (
        "POST /v1/checkpoints HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        f"Authorization: Bearer {embedded.key}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {GATEWAY_BODY_LIMIT + 1}\r\n"
        "\r\n"
    ).encode("ascii")
    # When only the headers are sent (the gateway answers without reading a body that large)
    with socket.create_connection((host, port), timeout=15) as sock:
        sock.sendall(head)
        received = b""
        while b"\r\n\r\n" not in received or not response_complete(received):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    # Then API Gateway's own 413 answers, with its {"message": ...} body
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"413", received
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert json.loads(body) == {"message": "Request Entity Too Large"}
    assert b"content-type: application/json" in headers.lower()
    wait_for_line(embedded, r"POST /v1/checkpoints 413")


def response_complete(received: bytes) -> bool:
    headers, _, body = received.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length:\s*(\d+)", headers)
    return found is not None and len(body) >= int(found.group(1))


def test_a_client_that_resets_its_connection_leaves_no_traceback(embedded: BatonServe) -> None:
    # Given a client that connects, sends half a request line, and resets the connection (SO_LINGER 0: an RST, as a
    # process exiting with unread data on a keep-alive connection sends)
    host, port = urlsplit(embedded.url).hostname, urlsplit(embedded.url).port
    before = len(embedded.lines)
    for partial in (b"", b"GET /v1/hea"):
        with socket.create_connection((host or "127.0.0.1", port or 80), timeout=10) as raw:
            if partial:
                raw.sendall(partial)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    # When the next client asks something
    answer = httpx.get(f"{embedded.url}/v1/health", timeout=30)
    # Then it is served, and the server logged no traceback for the ones that went away
    assert answer.status_code == 200
    assert not [line for line in embedded.lines[before:] if "Traceback" in line or "ConnectionReset" in line]


def test_an_unknown_path_answers_the_not_found_envelope(embedded: BatonServe) -> None:
    # When a path no route has is requested
    response = httpx.get(
        f"{embedded.url}/v1/nothing-here", headers={"Authorization": f"Bearer {embedded.key}"}, timeout=30
    )
    # Then it is the contract's 404 envelope
    assert response.status_code == 404, response.text
    body = response.json()
    assert body["error"] == {
        "code": "NOT_FOUND",
        "message": "No route matches GET /v1/nothing-here; the routes are listed at /v1/openapi.json.",
    }
    assert body["meta"]["request_id"]


def test_a_known_path_with_another_method_answers_405_with_allow(embedded: BatonServe) -> None:
    # When PUT is sent to the checkpoints collection
    response = httpx.put(
        f"{embedded.url}/v1/checkpoints",
        json={"subject_id": "x", "kind": "task_state", "state": {}},
        headers={"Authorization": f"Bearer {embedded.key}"},
        timeout=30,
    )
    # Then it is 405, and Allow lists the methods the path has
    assert response.status_code == 405, response.text
    assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "POST"}
    for method in ("GET", "POST"):
        assert method in response.json()["error"]["message"]


def assert_ctrl_c_stops(server: Any) -> None:
    """A running server that answered a request exits with status 0 on SIGINT (as from Ctrl-C) and says it stopped
    (its last line); it is killed in any case."""
    try:
        assert httpx.get(f"{server.url}/v1/health", timeout=30).status_code == 200
        status, took = server.stop_timed(signal.SIGINT)
    finally:
        server.stop(signal.SIGKILL)
    assert status == 0, f"status {status} after {took:.1f} s:\n" + "\n".join(server.lines)
    assert server.lines[-1] == "Baton stopped.", server.lines[-10:]


def test_ctrl_c_stops_serve_with_status_0(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a running `baton serve` on embedded moto that has answered a request, when it gets SIGINT, then it exits
    # with status 0 and says it stopped
    server = start_without_dev_key_env(monkeypatch)
    assert_ctrl_c_stops(server)
    # And it no longer listens
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/v1/health", timeout=5)


def test_ctrl_c_stops_a_serve_that_inherited_sigint_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given `baton serve` started the way a script starts a background job (`baton serve &` without job control:
    # CI runners, nohup), so that it begins with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        server = start_without_dev_key_env(monkeypatch)
    finally:
        signal.signal(signal.SIGINT, previous)
    # Then SIGINT stops it as from Ctrl-C (had it kept SIGINT ignored, it would be killed after the test's wait)
    assert_ctrl_c_stops(server)


def test_a_fixed_dev_key_from_the_command_line_works(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given `baton serve --dev-key <value>`
    secret = f"btn_cli_{uuid.uuid4().hex}"
    server = start_without_dev_key_env(
        monkeypatch, "--aws-endpoint", moto_endpoint, "--table", "baton-e2e-devkey", dev_key=secret
    )
    try:
        # When a checkpoint is saved with that value
        saved = httpx.post(
            f"{server.url}/v1/checkpoints",
            json={"subject_id": f"devkey-{uuid.uuid4().hex}", "kind": "task_state", "state": {"step": 1}},
            headers={"Authorization": f"Bearer {secret}"},
            timeout=30,
        )
    finally:
        server.stop()
    # Then the server printed that key and accepted it
    assert server.key == secret
    assert saved.status_code == 201, saved.text


def test_a_fixed_dev_key_from_the_environment_works(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given `BATON_DEV_KEY=<value> baton serve` on embedded moto
    secret = f"btn_env_{uuid.uuid4().hex}"
    server = BatonServe(env={"BATON_DEV_KEY": secret})
    try:
        # When a checkpoint is saved with that value, and with another one
        body = {"subject_id": f"envkey-{uuid.uuid4().hex}", "kind": "task_state", "state": {"step": 1}}
        saved = httpx.post(
            f"{server.url}/v1/checkpoints", json=body, headers={"Authorization": f"Bearer {secret}"}, timeout=30
        )
        wrong = httpx.post(
            f"{server.url}/v1/checkpoints", json=body, headers={"Authorization": f"Bearer {secret}x"}, timeout=30
        )
    finally:
        server.stop()
    # Then the server printed that key, accepted it, and refused the other
    assert server.key == secret
    assert saved.status_code == 201, saved.text
    assert wrong.status_code == 401, wrong.text


def test_an_invalid_dev_key_is_refused_at_start() -> None:
    # Given a development key too short to be a key
    # When `baton serve --dev-key short` is started
    done = subprocess.run(
        [sys.executable, "-m", "baton_checkpoints.cli.main", "serve", "--port", "0", "--dev-key", "short"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    # Then it exits with an error that names the option, without serving
    assert done.returncode != 0
    assert "--dev-key" in done.stderr
    assert "Baton is serving" not in done.stdout


def test_a_table_name_the_api_cannot_use_is_refused_at_start(moto_endpoint: str) -> None:
    # Given a table name of one character (DynamoDB's names are 3 to 255)
    # When `baton serve --table x` is started
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "baton_checkpoints.cli.main",
            "serve",
            "--port",
            "0",
            "--aws-endpoint",
            moto_endpoint,
            "--table",
            "x",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then it exits at once naming the setting and the rule, rather than serving a 500 to every request
    assert done.returncode == 2, done.stderr
    assert "BATON_TABLE_NAME: must be 3 to 255 characters, got 1" in done.stderr
    assert "Baton is serving" not in done.stdout


def test_a_chunked_request_body_reaches_the_api_whole(http: httpx.Client) -> None:
    # Given a save whose body is sent in chunks (as `curl -T -` or a streaming client does)
    body = json.dumps({"subject_id": f"chunked-{uuid.uuid4()}", "kind": "task_state", "state": {"step": 1}}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 7):
            yield body[start : start + 7]

    # When it is posted without a Content-Length
    response = http.post("/v1/checkpoints", content=chunks(), headers={"Content-Type": "application/json"})
    # Then it is saved as if it had been sent in one piece
    assert response.status_code == 201, response.text


def test_the_dev_key_in_a_table_that_outlives_serve_expires(baton: BatonServe, table: Any) -> None:
    # Given baton serve running against an endpoint it does not own (the session's moto server)
    from baton_checkpoints.domain.access import hash_secret
    from tests.e2e.conftest import TABLE

    # When its development key record is read from the table
    item = table.get_item(TableName=TABLE, Key={"pk": {"S": f"K#{hash_secret(baton.key)}"}, "sk": {"S": "K"}})["Item"]
    # Then it carries an expiry (12 hours), and serve said so when it printed the key
    assert "key_expires_at" in item
    assert any("expires" in line and "Development key" in line for line in baton.lines)
