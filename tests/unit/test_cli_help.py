"""Every `baton` command answers `--help` with its usage and examples, and never shows the key's value."""

from __future__ import annotations

import re

import pytest

from baton_checkpoints.cli.main import app, main
from tests.proof_counts import record


def command_paths() -> list[list[str]]:
    """Every command and subcommand of the app, as argv prefixes."""
    import typer

    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(group: object, prefix: list[str]) -> None:
        for name, command in sorted(getattr(group, "commands", {}).items()):
            if getattr(command, "commands", None):
                walk(command, [*prefix, name])
            else:
                paths.append([*prefix, name])

    walk(root, [])
    return paths


EXPECTED = [
    ["audit", "verify"],
    ["blob", "download"],
    ["blob", "info"],
    ["blob", "upload"],
    ["delete"],
    ["get"],
    ["keys", "create"],
    ["keys", "list"],
    ["keys", "revoke"],
    ["lease", "acquire"],
    ["lease", "release"],
    ["list"],
    ["restore"],
    ["resume"],
    ["revisions"],
    ["save"],
    ["serve"],
    ["whoami"],
]


def test_the_commands_are_the_ones_documented() -> None:
    # The brief's list (and the README's): nothing missing, nothing undocumented added
    assert command_paths() == EXPECTED


@pytest.mark.parametrize("path", EXPECTED, ids=" ".join)
def test_each_command_has_help_with_examples(
    path: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a key in the environment
    monkeypatch.setenv("BATON_API_KEY", "btn_secret_that_must_not_show_000")
    monkeypatch.setenv("COLUMNS", "120")
    # When the command's help is asked
    code = main([*path, "--help"])
    out = capsys.readouterr().out
    # Then it answers 0 with its usage, its examples, and no key value
    assert code == 0
    assert "Usage: baton " + " ".join(path) in out
    assert "Examples" in out
    assert "baton " + path[0] in out.split("Examples", 1)[1]
    assert "btn_secret_that_must_not_show_000" not in out
    # and what to type is named, never a Python type (flags show nothing after their name)
    assert not re.search(r"<(bool|str|int|float|list\[|int range)", out), out
    record("cli help", pages=1)


def test_no_arguments_shows_the_help_and_an_unknown_command_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When baton is run bare, and with a command that does not exist
    bare = main([])
    bare_out = capsys.readouterr()
    unknown = main(["frobnicate"])
    unknown_err = capsys.readouterr().err
    # Then the bare run shows the commands (click exits 2 there: no command was given) and the unknown one is 2
    assert "save" in bare_out.out + bare_out.err
    assert bare in (0, 2)
    assert unknown == 2
    assert "frobnicate" in unknown_err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from baton_checkpoints import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"baton {__version__}"


@pytest.mark.parametrize("path", EXPECTED, ids=" ".join)
def test_short_h_is_help_on_every_command(
    path: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # When a command is asked for `-h` (as its own usage error tells people to)
    monkeypatch.setenv("COLUMNS", "120")
    code = main([*path, "-h"])
    # Then it is its help, as with --help
    assert code == 0
    assert "Usage: baton " + " ".join(path) in capsys.readouterr().out
