"""The pieces of `baton` that guard the edges without a server: escaping control characters, strict state JSON,
checking the URL and the key before any request, printing a state plainly, and the last line of defence."""

from __future__ import annotations

import io
import json

import pytest
import typer
from rich.console import Console

from baton_checkpoints.cli import main as cli_main
from baton_checkpoints.cli.checkpoints import read_state
from baton_checkpoints.cli.common import EXIT_USAGE, connect, error_line, printable
from baton_checkpoints.cli.render import print_state, print_table
from baton_checkpoints.client import ValidationError
from tests.proof_counts import record

SUITE = "cli edges (unit)"


def test_printable_escapes_controls_and_keeps_text() -> None:
    cases = {
        "plain café 漢字 [bold]": "plain café 漢字 [bold]",
        "a\x1b[2Jb": "a\\x1b[2Jb",
        "bell\x07": "bell\\x07",
        "c1\x9bX": "c1\\x9bX",
        "del\x7f": "del\\x7f",
        "two\nlines\r\t": "two\\nlines\\r\\t",
        "lone\ud800": "lone\\ud800",
    }
    record(SUITE, cases=len(cases))
    for given, shown in cases.items():
        assert printable(given) == shown


def test_an_error_line_never_carries_an_escape() -> None:
    error = ValidationError("bad \x1b]0;title\x07 value", status=400, code="VALIDATION_ERROR", request_id="r\x1b1")
    line = error_line(error)
    record(SUITE, cases=1)
    assert "\x1b" not in line
    assert "\x07" not in line
    assert line.startswith("baton: VALIDATION_ERROR (400): bad ")


@pytest.mark.parametrize(
    "state",
    ['{"a": NaN}', '{"a": -Infinity}', '["\\udc00"]', '{"a": 1, "a": 2}', '{"o": {"k": [], "k": []}}'],
    ids=["nan", "minus-infinity", "lone-surrogate", "duplicate-key", "nested-duplicate"],
)
def test_a_state_the_api_cannot_take_is_a_usage_error(state: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as stopped:
        read_state(state)
    record(SUITE, cases=1)
    assert stopped.value.exit_code == EXIT_USAGE
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_strict_state_still_reads_what_json_allows() -> None:
    record(SUITE, cases=1)
    assert read_state('{"a": {"a": 1}, "b": [1.5e300, "\\ud83d\\ude00"]}') == {"a": {"a": 1}, "b": [1.5e300, "😀"]}


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("127.0.0.1:8787", "btn_x"),
        ("http://[::1", "btn_x"),
        ("ftp://host", "btn_x"),
        ("http://", "btn_x"),
        ("http://127.0.0.1:8787", "btn_\x1bsecret"),
        ("http://127.0.0.1:8787", "btn_sécret"),
    ],
    ids=["no-scheme", "broken", "ftp", "no-host", "control-in-key", "non-ascii-key"],
)
def test_connect_refuses_a_bad_url_or_key_without_echoing_the_key(
    url: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as stopped:
        connect(url, key)
    record(SUITE, cases=1)
    err = capsys.readouterr().err
    assert stopped.value.exit_code == EXIT_USAGE
    assert len(err.strip().splitlines()) == 1
    assert "ecret" not in err


def test_connect_strips_the_whitespace_around_a_key() -> None:
    client = connect(" http://127.0.0.1:8787 ", "  btn_abc\r\n")
    record(SUITE, cases=1)
    with client:
        assert client._http.headers["authorization"] == "Bearer btn_abc"


def test_a_piped_state_is_printed_as_plain_json_with_c1_escaped() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    state = {"text": "x\x9by", "n": [1, None]}
    print_state(state, console)
    record(SUITE, cases=1)
    assert "\x9b" not in out.getvalue()
    assert json.loads(out.getvalue()) == state


def test_a_table_title_with_markup_prints_as_written() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    print_table([{"a": "v\x1b"}], (("a", "a"),), title="Checkpoints of s[/]", console=console)
    record(SUITE, cases=1)
    assert "Checkpoints of s[/]" in out.getvalue()
    assert "\x1b" not in out.getvalue()


def test_an_unexpected_exception_is_one_line_without_its_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object) -> None:
        raise RuntimeError("Authorization: Bearer btn_secret")

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "run_app", boom)
    status = cli_main.main([])
    err = capsys.readouterr().err
    monkeypatch.setattr(cli_main, "run_app", interrupted)
    record(SUITE, cases=2)
    assert (status, err) == (1, "baton: internal error: RuntimeError\n")
    assert cli_main.main([]) == 130
    assert capsys.readouterr().err == ""
