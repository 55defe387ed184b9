"""The pieces of `baton` that need no server: reading a state argument, exit codes, error lines, the progress bar."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console

from baton_checkpoints.cli.blobs import progress_wanted, transfer_progress
from baton_checkpoints.cli.checkpoints import parse_resource, read_state
from baton_checkpoints.cli.common import (
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    error_line,
    exit_code_of,
    parse_if_match,
)
from baton_checkpoints.cli.render import print_fields, print_record
from baton_checkpoints.client import (
    BatonConnectionError,
    CheckpointClosedError,
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    InternalError,
    LeaseHeldError,
    NotFoundError,
    RateLimitedError,
    RevisionConflictError,
    UnauthenticatedError,
    ValidationError,
)
from tests.proof_counts import record


def test_a_state_argument_is_json_text(tmp_path: Path) -> None:
    assert read_state('{"step": 3}') == {"step": 3}
    assert read_state("[1, 2]") == [1, 2]
    assert read_state('"text"') == "text"


def test_a_state_argument_names_a_file_with_or_without_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a JSON file named like a number (which as text would parse as JSON)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "state.json").write_text('{"from": "file"}', encoding="utf-8")
    (tmp_path / "42").write_text('{"from": "42"}', encoding="utf-8")
    # Then a path reads the file, and @ forces the file over the JSON reading
    assert read_state("state.json") == {"from": "file"}
    assert read_state("@state.json") == {"from": "file"}
    assert read_state("42") == 42
    assert read_state("@42") == {"from": "42"}


def test_a_state_argument_of_dash_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"from": "stdin"}'))
    assert read_state("-") == {"from": "stdin"}


@pytest.mark.parametrize("value", ["{not json", "missing.json", "@missing.json"])
def test_a_bad_state_argument_is_a_usage_error(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(typer.Exit) as stopped:
        read_state(value)
    assert stopped.value.exit_code == 2
    assert capsys.readouterr().err.startswith("baton: ")


def test_a_file_that_is_not_json_is_a_usage_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not json", encoding="utf-8")
    with pytest.raises(typer.Exit) as stopped:
        read_state(str(bad))
    assert stopped.value.exit_code == 2
    assert "notes.txt" in capsys.readouterr().err


def test_resources_and_if_match() -> None:
    assert parse_resource("build.log=blob_1") == ("build.log", "blob_1")
    assert parse_resource("a=b=c") == ("a", "b=c")
    with pytest.raises(typer.Exit):
        parse_resource("blob_1")
    assert parse_if_match("3") == 3
    assert parse_if_match('W/"ckpt_1:3"') == 'W/"ckpt_1:3"'
    assert parse_if_match(None) is None


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NotFoundError("Resource was not found.", status=404), EXIT_NOT_FOUND),
        (RevisionConflictError("stale", status=409), EXIT_CONFLICT),
        (CheckpointClosedError("closed", status=409), EXIT_CONFLICT),
        (LeaseHeldError("held", status=409), EXIT_CONFLICT),
        (IdempotencyInProgressError("in progress", status=409), EXIT_CONFLICT),
        (IdempotencyKeyReusedError("reused", status=422), EXIT_CONFLICT),
        (ValidationError("bad", status=400), EXIT_ERROR),
        (UnauthenticatedError("no key", status=401), EXIT_ERROR),
        (ForbiddenError("scope", status=403), EXIT_ERROR),
        (RateLimitedError("slow down", status=429), EXIT_ERROR),
        (InternalError("defect", status=500), EXIT_ERROR),
        (BatonConnectionError("refused", outcome_unknown=False), EXIT_ERROR),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, int) else str(value),
)
def test_exit_codes_tell_not_found_from_conflict_from_the_rest(error: Exception, code: int) -> None:
    from baton_checkpoints.client import BatonError

    assert isinstance(error, BatonError)
    assert exit_code_of(error) == code
    record("cli exit codes", errors=1)


def test_an_error_is_one_line_with_code_status_message_and_request_id() -> None:
    error = RevisionConflictError(
        "The revision is 3,\nnot 2.", status=409, code="REVISION_CONFLICT", request_id="req-1"
    )
    line = error_line(error)
    assert line == "baton: REVISION_CONFLICT (409): The revision is 3, not 2. [request req-1]"
    assert "\n" not in error_line(BatonConnectionError("no\nanswer", outcome_unknown=True))


def test_the_progress_bar_draws_bytes_on_a_terminal_and_nothing_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a console that is a terminal
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    # When a transfer reports its progress
    with transfer_progress("upload big.bin", enabled=True, console=console) as progress:
        assert progress is not None
        for done in range(0, 3_000_001, 1_000_000):
            progress(done, 3_000_000)
    # Then the bar shows the name and the bytes
    drawn = screen.getvalue()
    assert "upload big.bin" in drawn
    assert "3.0/3.0 MB" in drawn
    # And with --json, or stdout not a terminal, there is no bar at all
    with transfer_progress("x", enabled=False) as nothing:
        assert nothing is None
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert progress_wanted(as_json=False) is False
    assert progress_wanted(as_json=True) is False


def test_user_text_is_printed_as_written_never_as_markup() -> None:
    # Given a record whose subject and state look like rich markup
    screen = io.StringIO()
    console = Console(file=screen, width=200)
    data = {"checkpoint_id": "ckpt_1", "subject_id": "[bold]x[/bold]", "state": {"note": "[red]hi"}}
    # When it is printed
    print_record(data, console=console)
    print_fields({"description": "[link=x]y"}, console=console)
    # Then the brackets are all there
    out = screen.getvalue()
    assert "[bold]x[/bold]" in out
    assert '"note": "[red]hi"' in out
    assert "[link=x]y" in out
    assert json.loads(out[out.index("{") : out.rindex("}") + 1]) == {"note": "[red]hi"}


_CHECKPOINT = {
    "checkpoint_id": "ckpt_" + "0123456789abcdef" * 2,
    "agent_id": "operator",
    "kind": "conversation",
    "revision": 12,
    "status": "active",
    "state_bytes": 31_998,
    "lease": {"holder": "worker-7", "expires_at": "2026-12-03T12:00:00.000Z"},
    "updated_at": "2026-12-03T11:36:00.123Z",
}
_KEY = {
    "key_id": "key_" + "fedcba9876543210" * 2,
    "tenant_id": "customer-42",
    "agent_id": "planner",
    "scopes": ["checkpoints:read", "checkpoints:write", "mcp:call"],
    "expires_at": "2027-01-01T00:00:00.000Z",
    "description": "the planner's key for production",
}
_REVISION = {
    "revision": 3,
    "status": "active",
    "state_bytes": 1234,
    "state_hash": "sha256:" + "ab" * 32,
    "updated_at": "2026-12-03T11:36:00.123Z",
}


@pytest.mark.parametrize(
    ("rows", "columns", "narrowing", "whole", "kept"),
    [
        ([_CHECKPOINT] * 3, "SUMMARY_COLUMNS", "NARROWING", "checkpoint_id", ["kind", "rev", "status", "updated_at"]),
        ([_KEY] * 2, "KEY_COLUMNS", "KEY_NARROWING", "key_id", ["tenant", "agent", "scopes"]),
        ([_REVISION], "REVISION_COLUMNS", "NARROWING", "revision", ["rev", "status", "updated_at"]),
    ],
    ids=["checkpoints", "keys", "revisions"],
)
def test_tables_fit_80_columns_with_ids_whole(
    rows: list[dict[str, object]],
    columns: str,
    narrowing: str,
    whole: str,
    kept: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from baton_checkpoints.cli import render

    for width in (80, 200):
        # Given a terminal of `width` columns
        screen = io.StringIO()
        console = Console(file=screen, force_terminal=True, width=width, color_system=None)
        # When a list is printed
        render.print_table(
            rows, getattr(render, columns), console=console, narrowing=getattr(render, narrowing), title="List"
        )
        lines = screen.getvalue().splitlines()
        note = capsys.readouterr().err
        # Then no line is wider than the terminal, every id is whole on one line, and the main columns are there
        assert max(len(line) for line in lines) <= width
        ids = [str(row[whole]) for row in rows]
        assert all(any(line.split()[:1] == [value] for line in lines) for value in ids), lines
        header = lines[1].split()
        assert all(name in header for name in kept), header
        if width == 200:
            # And a wide terminal shows every column, with nothing said about it
            assert len(header) == len(getattr(render, columns))
            assert note == ""
        else:
            # while a narrow one says on stderr which it left out
            assert note.startswith("Not shown at 80 columns: ")


@pytest.mark.parametrize(
    ("command", "path", "answer"),
    [
        (["delete", "ckpt_1"], "/v1/checkpoints/ckpt_1", {"checkpoint_id": "ckpt_1", "deleted": True}),
        (["keys", "revoke", "key_1"], "/v1/keys/key_1", {"key_id": "key_1", "deleted": True}),
    ],
    ids=["delete", "keys-revoke"],
)
def test_delete_and_revoke_ask_on_a_terminal_unless_yes(
    command: list[str], path: str, answer: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    import respx
    from typer.testing import CliRunner

    from baton_checkpoints.cli import common
    from baton_checkpoints.cli.main import app

    url = "http://baton.test"
    args = [*command, "--url", url, "--api-key", "btn_k"]
    runner = CliRunner()
    with respx.mock(base_url=url, assert_all_called=False) as router:
        route = router.delete(path).respond(200, json={"data": answer, "meta": {"request_id": "r"}})
        # Given a person at a terminal
        monkeypatch.setattr(common, "interactive", lambda: True)
        # When they answer no (or just Enter), Then nothing is sent and the command says so, exit 1
        refused = [runner.invoke(app, args, input=reply) for reply in ("n\n", "\n")]
        assert [done.exit_code for done in refused] == [1, 1]
        assert all("nothing done" in done.output for done in refused), [done.output for done in refused]
        assert route.call_count == 0
        # When they answer yes, it is done
        assert runner.invoke(app, args, input="y\n").exit_code == 0
        assert route.call_count == 1
        # With --yes nothing is asked, and a script (no terminal) is never asked either
        assert runner.invoke(app, [*args, "--yes"]).exit_code == 0
        monkeypatch.setattr(common, "interactive", lambda: False)
        assert runner.invoke(app, args).exit_code == 0
        assert route.call_count == 3


def test_no_question_without_a_terminal_even_with_stdin_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from baton_checkpoints.cli import common

    # Given stdin closed (`baton delete X <&-`: sys.stdin is None), Then nothing asks and nothing fails
    monkeypatch.setattr("sys.stdin", None)
    assert common.interactive() is False
    common.confirm("Delete?", yes=False)


def test_serve_refuses_an_events_target_the_reaper_would_refuse() -> None:
    from typer.testing import CliRunner

    from baton_checkpoints.cli.main import app

    for value in ("http://", "ftp://example.com/x", "https://a b", "printed"):
        answer = CliRunner().invoke(app, ["serve", "--events", value])
        assert answer.exit_code == 2, (value, answer.output)
        assert "--events must be print or an http(s) URL" in answer.output
