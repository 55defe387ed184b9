"""The `baton` command's import discipline: help and the API commands never load the server's code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER_MODULES = (
    "pydantic",
    "boto3",
    "botocore",
    "msgspec",
    "baton_checkpoints.domain",
    "baton_checkpoints.local",
    "baton_checkpoints.store",
    "baton_checkpoints.api",
)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """`python -c code` in a fresh interpreter (sys.modules of this one is no evidence)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def help_codes(blocked: tuple[str, ...], commands: list[list[str]]) -> subprocess.CompletedProcess[str]:
    """In a fresh interpreter where importing any of `blocked` fails, `main(command + ["--help"])` for each."""
    return run_python(
        f"""
        import sys
        for name in {blocked!r}:
            sys.modules[name] = None
        from baton_checkpoints.cli.main import main
        print("codes", [main([*command, "--help"]) for command in {commands!r}])
        """
    )


def test_help_works_when_pydantic_boto3_and_the_server_cannot_be_imported() -> None:
    # Given an interpreter where importing pydantic, boto3 or any server package fails
    # When the CLI prints its help
    done = help_codes(SERVER_MODULES, [[]])
    # Then it succeeds
    assert "codes [0]" in done.stdout, done.stdout + done.stderr
    assert "Usage: baton" in done.stdout


def test_each_command_help_works_without_boto3_and_the_server() -> None:
    # Given an interpreter where boto3 and the server's packages cannot be imported (pydantic can: typer 0.29
    # depends on it and imports it to process any parameter of a subcommand, even `--help`)
    blocked = tuple(name for name in SERVER_MODULES if name != "pydantic")
    # When the commands print their help
    done = help_codes(blocked, [["save"], ["get"], ["blob", "upload"], ["keys", "create"], ["serve"]])
    # Then each succeeds
    assert "codes [0, 0, 0, 0, 0]" in done.stdout, done.stdout + done.stderr


def test_the_api_commands_load_neither_the_server_nor_httpx_until_they_run() -> None:
    # When the CLI's modules are imported (what every `baton ...` start-up pays)
    done = run_python(
        """
        import sys
        import baton_checkpoints.cli.main
        print(sorted(name for name in sys.modules if name.startswith(
            ("pydantic", "boto3", "botocore", "baton_checkpoints.domain", "baton_checkpoints.local",
             "baton_checkpoints.store", "baton_checkpoints.api", "httpx"))))
        """
    )
    # Then nothing of the server and not even the SDK's httpx is loaded
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_api_command_runs_without_the_server_packages() -> None:
    # Given the server's packages blocked (pydantic stays: typer 0.29 needs it to convert option values)
    blocked = ", ".join(repr(name) for name in SERVER_MODULES if name != "pydantic")
    done = run_python(
        f"""
        import os, sys
        for name in ({blocked}):
            sys.modules[name] = None
        os.environ.pop("BATON_URL", None)
        from baton_checkpoints.cli.main import main
        # Without a URL the command stops right after loading the SDK: no socket is opened.
        code = main(["get", "ckpt_0", "--api-key", "k"])
        print("code", code, "sdk" if "baton_checkpoints.client.sync" in sys.modules else "no sdk")
        """
    )
    # Then it got through its options and the SDK's import to its usage error
    assert "code 2 sdk" in done.stdout, done.stdout + done.stderr
    assert "BATON_URL" in done.stderr


def test_an_api_command_without_a_key_names_the_variable() -> None:
    done = run_python(
        """
        import os
        os.environ.pop("BATON_API_KEY", None)
        from baton_checkpoints.cli.main import main
        # A URL where nothing listens: a request sent would fail otherwise, after retries
        print("code", main(["list", "ticket-1", "--url", "http://127.0.0.1:9"]))
        """
    )
    # Then it stops before any request, with a usage error naming the variable and where a key comes from
    assert "code 2" in done.stdout, done.stdout + done.stderr
    assert "BATON_API_KEY" in done.stderr
    assert "--api-key" in done.stderr
    assert "make serve" in done.stderr


def test_the_first_key_without_aws_region_or_credentials_says_what_to_set() -> None:
    # Given no AWS region, no credentials anywhere (no files, no instance metadata)
    done = run_python(
        """
        import os
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            del os.environ[name]
        os.environ.update(AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                          AWS_EC2_METADATA_DISABLED="true")
        from baton_checkpoints.cli.main import main
        base = ["keys", "create", "--table", "baton-prod", "--tenant", "acme", "--agent", "operator"]
        print("codes", main(base), main([*base, "--region", "eu-west-1"]))
        # and with credentials but nothing listening where AWS should be
        os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
        print("unreachable", main([*base, "--region", "eu-west-1", "--aws-endpoint", "http://127.0.0.1:9"]))
        """
    )
    # When the operator creates the first key, Then each run says, in one line, what is missing and how to give it
    assert "codes 1 1" in done.stdout, done.stdout + done.stderr
    assert "unreachable 1" in done.stdout, done.stdout + done.stderr
    region, credentials, unreachable = done.stderr.strip().splitlines()
    assert unreachable.startswith("baton keys create: AWS could not be reached")
    assert region == "baton keys create: no AWS region: pass --region (the stack's region) or set AWS_REGION."
    assert credentials.startswith("baton keys create: no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID")
    assert "internal error" not in done.stderr
