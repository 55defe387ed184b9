"""The package as a user installs it: the wheel built from this repository, each extra installed into a clean
virtualenv of its own (nothing of the repository's `.venv`), and the README's snippet for that audience run with
it against `baton serve`.

Installing needs the package registry (the extras' dependencies), as `make test` does for its own `.venv`. Each
virtualenv is made with `--without-pip` plus the repository's pip run against it (`pip --python`), which keeps a
fresh one to about a second.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.readme import readme_block
from tests.e2e.server_process import BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTION = "baton-checkpoints"
SUITE = "install (e2e)"
INSTALL_SECONDS = 600
"""How long one `pip install` may take: a cold cache downloads the server extra's boto3 and pydantic."""


SOURCE_IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", "node_modules", "build", "dist", "*.egg-info", "__pycache__", "cdk.out", ".cache", "results"
)
"""What is not the package's source: a build from the working tree would write `build/` and an egg-info into it, and
pack files a former build left in `build/lib` into the wheel."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of the repository's source (what `pip install baton-checkpoints`
    would fetch)."""
    source = tmp_path_factory.mktemp("source") / "baton"
    shutil.copytree(REPO, source, ignore=SOURCE_IGNORED)
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)])
    (built,) = out.glob("baton_checkpoints-*.whl")
    return built


def _run(command: list[str], env: dict[str, str] | None = None, timeout: float = INSTALL_SECONDS) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0, f"{shlex.join(command)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


class Venv:
    """A clean virtualenv with the wheel installed, with `extra` (None: no extra at all)."""

    def __init__(self, root: Path, wheel: Path, extra: str | None) -> None:
        self.root = root
        _run([sys.executable, "-m", "venv", "--without-pip", str(root)])
        self.python = root / "bin" / "python"
        target = f"{DISTRIBUTION}[{extra}] @ {wheel.as_uri()}" if extra else str(wheel)
        _run([sys.executable, "-m", "pip", "--python", str(self.python), "install", "--quiet", target])

    def env(self, baton: BatonServe | None) -> dict[str, str]:
        """A clean environment: the virtualenv's bin first, the server's two variables, nothing of the repository."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "PYTHON", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if baton is not None:
            env.update(BATON_URL=baton.url, BATON_API_KEY=baton.key)
        return env

    def run(self, command: list[str], baton: BatonServe | None, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, capture_output=True, text=True, env=self.env(baton), cwd=cwd, timeout=120, check=False
        )

    def modules(self, *names: str) -> dict[str, bool]:
        """Which of `names` the virtualenv can import."""
        code = "import importlib.util, sys; print(*(importlib.util.find_spec(n) is not None for n in sys.argv[1:]))"
        found = _run([str(self.python), "-c", code, *names]).split()
        return dict(zip(names, (f == "True" for f in found), strict=True))


def test_no_extra_installs_the_command_which_says_which_extra_it_needs(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    venv = Venv(tmp_path_factory.mktemp("bare"), wheel, None)
    done = venv.run(["baton", "--help"], None, tmp_path)
    record(SUITE, venvs=1, commands=1)
    # One line naming the extra, no traceback
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"baton: the command line needs the cli extra (typer is not installed): pip install '{DISTRIBUTION}[cli]'"
    ]


def test_the_client_extra_runs_the_readme_sdk_snippet(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, baton: BatonServe, tmp_path: Path
) -> None:
    install = f'pip install "{DISTRIBUTION}[client]"'
    venv = Venv(tmp_path_factory.mktemp("client"), wheel, "client")
    snippet = readme_block("## Python SDK", install, "python")[1]
    done = venv.run([str(venv.python), "-c", snippet], baton, tmp_path)
    record(SUITE, venvs=1, snippets=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1)[0] == "ready", done.stdout
    # The SDK alone: nothing of the server came with it
    assert venv.modules("httpx", "pydantic", "boto3", "aws_lambda_powertools", "typer") == {
        "httpx": True,
        "pydantic": False,
        "boto3": False,
        "aws_lambda_powertools": False,
        "typer": False,
    }
    # and without a key it says which variable to set, before sending anything
    no_key = venv.env(baton)
    del no_key["BATON_API_KEY"]
    missing = subprocess.run(
        [str(venv.python), "-c", snippet], capture_output=True, text=True, env=no_key, timeout=120, check=False
    )
    assert missing.returncode == 1
    assert "MissingApiKeyError" in missing.stderr
    assert "BATON_API_KEY" in missing.stderr


def test_the_cli_extra_runs_the_readme_commands(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, baton: BatonServe, tmp_path: Path
) -> None:
    install = f'pip install "{DISTRIBUTION}[cli]"'
    venv = Venv(tmp_path_factory.mktemp("cli"), wheel, "cli")
    # The README's commands that need no file and no id of an earlier answer, in order
    commands = [
        shlex.split(line.split("#", 1)[0])
        for line in readme_block("## The `baton` command", install, "sh")[1].splitlines()
        if line.startswith("baton ") and not re.search(r"\.\.\.|…|\$|\.json|\.log|;", line)
    ]
    assert len(commands) >= 3, commands
    for command in commands:
        done = venv.run(command, baton, tmp_path)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    record(SUITE, venvs=1, commands=len(commands) + 1)
    # and `baton serve`, which needs the server, names the extra that brings it
    serve = venv.run(["baton", "serve"], None, tmp_path)
    assert serve.returncode == 1
    assert f"pip install '{DISTRIBUTION}[local]'" in serve.stderr
    assert "Traceback" not in serve.stderr


def test_the_langgraph_extra_runs_the_readme_graph(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, baton: BatonServe, tmp_path: Path
) -> None:
    install = f"pip install '{DISTRIBUTION}[langgraph]'"
    venv = Venv(tmp_path_factory.mktemp("langgraph"), wheel, "langgraph")
    snippet = readme_block("## LangGraph on Baton", install, "python")[1]
    done = venv.run([str(venv.python), "-c", snippet], baton, tmp_path)
    record(SUITE, venvs=1, snippets=1)
    assert done.returncode == 0, done.stderr
    # The history the snippet prints: steps newest first, the last one finished (nothing next)
    steps = [line.split(maxsplit=1) for line in done.stdout.splitlines()]
    assert steps, done.stdout
    assert steps[0] == [steps[0][0], "()"]
    assert [int(step) for step, _ in steps] == sorted((int(step) for step, _ in steps), reverse=True)


def test_the_server_extra_loads_the_lambda_handlers(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    venv = Venv(tmp_path_factory.mktemp("server"), wheel, "server")
    env = {"BATON_TABLE_NAME": "baton", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_LOG_LEVEL": "WARNING"}
    handlers = ("api", "reaper", "snapstart")  # (snapstart: its hooks' library comes with the server extra)
    code = f"import {', '.join(f'baton_checkpoints.handlers.{name}' for name in handlers)}; print('loaded')"
    done = subprocess.run(
        [str(venv.python), "-c", code],
        capture_output=True,
        text=True,
        env={**venv.env(None), **env},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    record(SUITE, venvs=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded"
    # The Lambda set only: botocore (not boto3), no command line, no SDK transport, no local emulator
    assert venv.modules("botocore", "boto3", "pydantic", "aws_lambda_powertools", "httpx", "typer", "moto") == {
        "botocore": True,
        "boto3": False,
        "pydantic": True,
        "aws_lambda_powertools": True,
        "httpx": False,
        "typer": False,
        "moto": False,
    }
