"""Starts `baton serve` as its own process, on a free port, and stops it."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STOP_SECONDS = 60.0
"""How long a stop waits for the process to exit before killing it: `baton serve` stops within a second on an idle
machine, and a loaded runner (load 10 on 2 cores) has taken several; a test that promises a bound asserts it apart
(`stop_timed`)."""
OUTPUT_SECONDS = 30.0
"""How long a stop waits, once the process has exited, for the last of its output to be read."""


class BatonServe:
    """A running `baton serve` process: its URL, its development key and its output."""

    def __init__(self, *args: str, dev_key: str | None = None, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "baton_checkpoints.cli.main", "serve", "--port", "0", *args]
        if dev_key is not None:
            command += ["--dev-key", dev_key]
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        self.url = self._wait_for(r"Baton is serving on (http://\S+)")
        self.key = self._wait_for(r"export BATON_API_KEY=(\S+)")
        # The lines it prints to paste name the URL it serves on, under the names the SDK, CLI and saver read.
        assert self._wait_for(r"export BATON_URL=(\S+)") == self.url

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)

    def _wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        for line in self.lines:
            found = re.search(pattern, line)
            if found:
                return found.group(1)
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise RuntimeError("baton serve exited:\n" + "\n".join(self.lines)) from None
                continue
            found = re.search(pattern, line)
            if found:
                return found.group(1)
        raise TimeoutError(f"baton serve did not print {pattern!r}:\n" + "\n".join(self.lines))

    def stop(self, sig: int = signal.SIGINT, timeout: float = STOP_SECONDS) -> int:
        """Stop it the way a developer does (Ctrl-C) and return its exit status (negative: it did not exit within
        `timeout` seconds and was killed). Once it has exited, `lines` holds all it printed."""
        return self.stop_timed(sig, timeout)[0]

    def stop_timed(self, sig: int = signal.SIGINT, timeout: float = STOP_SECONDS) -> tuple[int, float]:
        """Stop it (Ctrl-C by default), waiting at most `timeout` seconds before killing it; its exit status
        (negative: it was killed) and the seconds from the signal to its exit. Once it has exited, `lines` holds all
        it printed."""
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        took = time.monotonic() - started
        # Its output ends when every process holding the pipe has ended (its containers too): then all is read.
        self._pump_thread.join(OUTPUT_SECONDS)
        return self.process.returncode, took

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """Wait (at most `timeout` seconds) for a line of its output matching `pattern`, among those printed so far
        or to come; the pattern's first group."""
        return self._wait_for(pattern, timeout)

    def wait_until(self, condition: Callable[[list[str]], bool], timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until `condition` holds of its output so far, looked at again as each line
        arrives; True when it holds, False when the time is up or the process ended without it."""
        deadline = time.monotonic() + timeout
        while not condition(self.lines):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self._queue.get(timeout=min(left, 1.0))
            except queue.Empty:
                if self.process.poll() is not None:
                    return condition(self.lines)
        return True


def serve_table(endpoint: str, name: str, *options: str, containers: int = 1) -> BatonServe:
    """`baton serve` with `containers` containers (one by default) on the table and bucket `name` of the AWS at
    `endpoint`, and a development key of its own (a server apart from the session's, for suites that need the reaper
    or their own table)."""
    return BatonServe(
        "--aws-endpoint",
        endpoint,
        "--table",
        name,
        "--bucket",
        name,
        "--containers",
        str(containers),
        *options,
        dev_key=f"btn_{name.replace('-', '_')}_key_0001",
    )
