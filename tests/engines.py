"""AWS's own DynamoDB engine (DynamoDB Local) for the tests: found, started on a loopback port, stopped.

moto is not DynamoDB: it accepts requests DynamoDB refuses and its ConsumedCapacity is not DynamoDB's. The
integration tests that run on both engines (`tests/integration/conftest.py`) and `baton serve --dynamodb-endpoint`'s
e2e test use the engine started here: one per test process (under pytest-xdist, each worker starts its own), started
on first use and stopped when the process exits.

The engine is `make dynamodb-local`'s (in `.cache/dynamodb-local/`, or `BATON_DYNAMODB_LOCAL_DIR`). A test that needs
it fails when it is missing, saying so: CI must run these tests, never skip them for lack of the engine.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
DIRECTORY_VARIABLE: Final = "BATON_DYNAMODB_LOCAL_DIR"
DEFAULT_DIRECTORY: Final = REPO / ".cache" / "dynamodb-local"
READY_SECONDS: Final = 60.0
"""How long a start may take before it fails: it takes about 2.5 s, far more on a loaded machine."""
STOP_SECONDS: Final = 10.0
"""How long a stop waits after SIGTERM before it kills."""
HEAP: Final = "-Xmx512m"
"""The JVM's heap: the tables are SQLite in native memory; the heap holds requests and answers (a few MB each)."""
JIT: Final = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""The quick compiler only, and one GC thread: a test run is short, and on 2 cores the optimizing compiler's and the
parallel collector's threads took more than they gave back (test_routes and test_threads on DynamoDB Local: about a
quarter less CPU, and of wall time, with these)."""
REGION: Final = "us-east-1"
CREDENTIAL: Final = "batonlocal"
"""The access key id and secret of the tests' own clients: the engine takes any made of letters and digits only."""


class EngineMissing(RuntimeError):
    """DynamoDB Local is not installed where the tests look for it."""


def engine_directory() -> Path:
    """Where DynamoDB Local's jar and libraries are (`BATON_DYNAMODB_LOCAL_DIR`, default `.cache/dynamodb-local`)."""
    configured = os.environ.get(DIRECTORY_VARIABLE)
    return Path(configured) if configured else DEFAULT_DIRECTORY


def require_engine() -> Path:
    """The engine's directory, or `EngineMissing` saying how to install it (and Java, when that is what is missing)."""
    directory = engine_directory()
    jar = directory / "DynamoDBLocal.jar"
    if not jar.is_file() or not (directory / "DynamoDBLocal_lib").is_dir():
        raise EngineMissing(
            f"DynamoDB Local is not installed: {jar} is missing. Run `make dynamodb-local` (or set "
            f"{DIRECTORY_VARIABLE} to a directory holding DynamoDBLocal.jar and DynamoDBLocal_lib/)."
        )
    if shutil.which("java") is None:
        raise EngineMissing("DynamoDB Local needs Java 17 and `java` is not on PATH. Run `make dynamodb-local`.")
    return directory


def free_port() -> int:
    """A loopback port nothing listens on now (the engine is told to listen there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""An HTTP opener that never goes through a proxy from the environment: the engine is on this machine."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to stop the engine when the test process dies, however it dies (a killed pytest leaves no JVM)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class DynamoDBLocal:
    """One DynamoDB Local process: in memory, one database for every credential and region (`-sharedDb`: a client
    made inside `mock_aws`, which swaps in its own fake credentials, sees the same tables as one made outside), on a
    loopback port of its own, telemetry off (the tests are offline)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or require_engine()
        self.port = 0
        self.endpoint = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (what it prints, read back when a start fails)
        self._lock = threading.Lock()

    def command(self, port: int) -> list[str]:
        """The command line that starts the engine on `port`."""
        return [
            "java",
            HEAP,
            *JIT,
            f"-Djava.library.path={self.directory / 'DynamoDBLocal_lib'}",
            "-jar",
            str(self.directory / "DynamoDBLocal.jar"),
            "-inMemory",
            "-sharedDb",
            "-disableTelemetry",
            "-port",
            str(port),
        ]

    def start(self, timeout: float = READY_SECONDS, attempts: int = 3) -> str:
        """Start it and wait until it answers HTTP (at most `timeout` seconds); its endpoint URL. A start whose
        process exits at once (the free port taken meanwhile by another process) is tried again on another port."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start(timeout)
            except RuntimeError:
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> str:
        self.port = free_port()
        self._process = subprocess.Popen(
            self.command(self.port),
            cwd=self.directory,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # the child only calls prctl before exec
        )
        self.endpoint = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(f"DynamoDB Local exited with status {self._process.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                printed = self.output()
                self.stop()
                raise TimeoutError(f"DynamoDB Local did not answer within {timeout:.0f} s:\n{printed}")
            time.sleep(0.1)
        return self.endpoint

    def _answers(self) -> bool:
        """True once the engine answers HTTP at all (a GET of `/` is a 400: not a DynamoDB request)."""
        try:
            with _NO_PROXY.open(self.endpoint + "/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def output(self) -> str:
        """What the engine printed so far (its last 4,000 characters)."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def running(self) -> bool:
        """True while its process runs."""
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop it: SIGTERM, then SIGKILL after `timeout` seconds. Idempotent."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def client(self, service: str = "dynamodb", **config: Any) -> Any:
        """A boto3 client of `service` (`dynamodb`, `dynamodbstreams`) on the engine (`config`: botocore `Config`
        arguments), with credentials of its own: the engine takes any, and a test's must never be real ones."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=CREDENTIAL,
            aws_secret_access_key=CREDENTIAL,
            config=Config(**config) if config else None,
        )


_SHARED: DynamoDBLocal | None = None
_SHARED_FAILURE: list[Exception] = []
"""Why the process's engine could not start: every later call fails at once with it (a start can take 60 s)."""
_SHARED_LOCK = threading.Lock()


def shared_engine() -> DynamoDBLocal:
    """This process's engine, started on the first call (`EngineMissing` when it is not installed) and stopped when
    the process exits; an engine that died is started again."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED_FAILURE:
            raise _SHARED_FAILURE[0]
        if _SHARED is None or not _SHARED.running():
            try:
                engine = DynamoDBLocal()
                atexit.register(engine.stop)
                engine.start()
            except (EngineMissing, RuntimeError, TimeoutError) as exc:
                _SHARED_FAILURE.append(exc)
                raise
            _SHARED = engine
        return _SHARED


def engine_for_test() -> DynamoDBLocal:
    """`shared_engine()` for a test that needs it: when the engine is missing (or cannot start), the test fails with
    the reason and what to do, one line in pytest's summary; it is never skipped."""
    import pytest

    try:
        return shared_engine()
    except (EngineMissing, RuntimeError, TimeoutError) as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)


def fresh_table(client: Any, table: str) -> None:
    """`table` as Baton creates it (`baton_checkpoints.store.schema.create_table_request`, TTL on), empty: deleted
    first if it
    exists. Three requests where DynamoDB Local deletes and creates at once (it does), instead of `ensure_table`'s
    six with its describes and waiters: every test on DynamoDB Local starts with this."""
    from baton_checkpoints.store.schema import create_table

    with contextlib.suppress(client.exceptions.ResourceNotFoundException):
        client.delete_table(TableName=table)
    try:
        create_table(client, table)
    except client.exceptions.ResourceInUseException:  # still being deleted: wait for it, then create
        client.get_waiter("table_not_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        create_table(client, table)
