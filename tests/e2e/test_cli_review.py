"""Review of the `baton` command: what a user hits at the edges. The installed command runs as a subprocess against
`baton serve`, as in tests/e2e/test_cli.py (whose helpers it reuses): names and states that rich could read as
markup or a terminal as escapes, a state JSON can parse but the API cannot take, an API key that is not a header
value, bad URLs, files that change under an upload, a download into a missing folder, big states in human mode,
every error class's exit code, and the help's examples."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.server_process import REPO, BatonServe
from tests.e2e.test_cli import BATON, Cli, Done, api_save, assert_one_error_line, subject
from tests.proof_counts import record

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cli(baton: BatonServe) -> Iterator[Cli]:
    assert BATON.exists(), f"the installed command is missing: {BATON}"
    runner = Cli(baton)
    yield runner
    record("cli review e2e", subprocess_runs=runner.runs)


def assert_one_plain_line(done: Done) -> None:
    """A failure the README promises as one stderr line: no traceback, nothing on stdout."""
    assert "Traceback" not in done.err, done.err
    assert done.out == "", done.out
    assert len(done.err.strip().splitlines()) == 1, done.err


def test_list_prints_a_subject_with_brackets_as_written(cli: Cli, http: httpx.Client) -> None:
    # Given subjects whose names rich would read as markup (a closing tag alone, a style tag)
    closing, styled = f"{subject()}[/]", f"[bold]{subject()}[/bold]"
    api_save(http, closing, "task_state", {"step": 1})
    api_save(http, styled, "task_state", {"step": 1})
    # When they are listed for a person
    listed_closing, listed_styled = cli.many(("list", closing), ("list", styled))
    # Then the table is printed and its title names the subject exactly as written (no MarkupError, no lost tags)
    assert listed_closing.code == 0, listed_closing.err
    assert closing in listed_closing.out
    assert listed_styled.code == 0, listed_styled.err
    assert styled in listed_styled.out


def test_control_characters_in_a_key_description_never_reach_the_terminal(cli: Cli, http: httpx.Client) -> None:
    # Given a key whose description carries terminal escapes (clear the screen, turn text red, set the title)
    agent = f"rv-{uuid.uuid4().hex[:8]}"
    description = "nightly \x1b[2J\x1b[31mred\x1b]0;title\x07 done"
    try:
        created = cli("keys", "create", "--agent", agent, "--scopes", "checkpoints:read", "--description", description)
        # When the keys are listed for a person
        listed = cli("keys", "list", "--agent", agent)
    finally:
        for key in http.get("/v1/keys", params={"agent_id": agent}).json()["data"]:
            http.delete(f"/v1/keys/{key['key_id']}")
    # Then both commands succeed and neither writes an escape character to the terminal
    assert (created.code, listed.code) == (0, 0), (created, listed)
    assert "\x1b" not in created.out, repr(created.out)
    assert "\x1b" not in listed.out, repr(listed.out)
    assert "\x07" not in created.out + listed.out


def test_an_api_key_that_is_no_header_value_is_never_printed(cli: Cli, baton: BatonServe) -> None:
    # Given the server's key with a trailing carriage return (a key file saved with CRLF, read by $(cat key)),
    # with a trailing space, and a key with a non-ASCII letter
    subj = subject()
    crlf, spaced, accented = baton.key + "\r", baton.key + " ", baton.key[:-1] + "é"
    runs = [
        cli("list", subj, "--json", env={"BATON_API_KEY": crlf}),
        *cli.many(("list", subj, "--json", "--api-key", spaced), ("list", subj, "--json", "--api-key", accented)),
    ]
    # Then no run prints the secret (stderr reaches CI logs and terminals), and each says one line, no traceback
    for done in runs:
        assert baton.key[8:] not in done.out + done.err, done.err
        if done.code != 0:
            assert_one_plain_line(done)


@pytest.mark.parametrize(
    "state",
    ['{"ratio": NaN}', '{"limit": Infinity}', '{"limit": -Infinity}', '{"text": "\\ud800"}'],
    ids=["nan", "infinity", "minus-infinity", "lone-surrogate"],
)
def test_a_state_python_parses_but_json_cannot_carry_is_a_usage_error(cli: Cli, state: str) -> None:
    # When the state is JSON text Python's parser accepts, but that is not JSON (NaN, Infinity) or not UTF-8
    done = cli("save", subject(), state, "-k", "task_state", "--json")
    # Then it is a usage error like any state that is not JSON: 2, one line, not a traceback
    assert done.code == 2, done
    assert_one_plain_line(done)


def test_a_state_with_a_duplicate_key_is_refused_not_cut(cli: Cli, http: httpx.Client) -> None:
    # When a state names one key twice (the API answers 400 for that; json.loads keeps the last silently)
    subj = subject()
    done = cli("save", subj, '{"todo": ["reply"], "todo": []}', "-k", "task_state", "--json")
    # Then nothing is saved with half the user's state gone: a usage error, and no checkpoint
    assert done.code == 2, done
    assert_one_plain_line(done)
    assert http.get(f"/v1/subjects/{subj}/checkpoints").json()["data"] == []


def test_a_malformed_url_is_a_usage_error_at_once(cli: Cli) -> None:
    # When --url has no scheme, or is not a URL at all
    no_scheme, broken = cli.many(
        ("resume", subject(), "--url", "127.0.0.1:8787"),
        ("resume", subject(), "--url", "http://[::1"),
    )
    # Then each is a usage error in one line (not four attempts and "no answer", not a traceback)
    for done in (no_scheme, broken):
        assert done.code == 2, done
        assert_one_plain_line(done)
        assert "CONNECTION_ERROR" not in done.err


def test_a_download_into_a_missing_folder_is_one_line(cli: Cli, tmp_path: Path) -> None:
    # Given an uploaded blob
    source = tmp_path / "note.txt"
    source.write_text("hello\n", encoding="utf-8")
    blob = cli.ok("blob", "upload", str(source), "--json").json()
    # When it is downloaded into a folder that does not exist
    done = cli("blob", "download", blob["blob_id"], str(tmp_path / "missing" / "note.txt"))
    # Then it is a usage error like a directory given as the path: 2, one line
    assert done.code == 2, done
    assert_one_plain_line(done)


def test_a_file_growing_during_its_upload_fails_in_one_line(cli: Cli, tmp_path: Path) -> None:
    # Given a log file that another process keeps appending to (a running build's log)
    log = tmp_path / "build.log"
    log.write_bytes(os.urandom(1_000_000))
    stop = threading.Event()

    def keep_writing() -> None:
        with log.open("ab") as sink:
            while not stop.is_set():
                sink.write(b"x" * 4096)
                sink.flush()
                time.sleep(0.002)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        # When it is uploaded
        done = subprocess.run(
            [str(BATON), "blob", "upload", str(log), "--json"],
            cwd=REPO,
            env=cli.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop.set()
        writer.join()
    cli.runs += 1
    # Then the upload cannot succeed (the declared size and SHA-256 no longer hold); the user reads one line
    result = Done(done.returncode, done.stdout, done.stderr)
    assert result.code == 1, result
    assert_one_plain_line(result)


def test_a_big_state_in_human_mode_prints_about_as_fast_as_json(cli: Cli, http: httpx.Client) -> None:
    # Given a checkpoint with a 1 MB state (the API takes up to 3 MB)
    subj = subject()
    state = {"items": [{"i": i, "text": "café 漢字 " * 3, "pair": [i, [None, True]]} for i in range(12_000)]}
    saved = api_save(http, subj, "task_state", state)
    assert saved["state_bytes"] > 1_000_000
    # When it is shown as JSON, then for a person (piped, as in a pager or a log)
    started = time.monotonic()
    as_json = cli.ok("get", saved["checkpoint_id"], "--json")
    json_seconds = time.monotonic() - started
    started = time.monotonic()
    human = cli.ok("get", saved["checkpoint_id"])
    human_seconds = time.monotonic() - started
    # Then both print the state, and the person does not wait many times longer (rich's JSON highlighter took ~7 s)
    assert as_json.json()["state"] == state
    assert '"i": 11999' in human.out
    assert human_seconds < max(5.0, 4 * json_seconds), (human_seconds, json_seconds)


def test_every_save_example_in_the_help_names_the_required_kind(cli: Cli) -> None:
    # When `save --help` is read
    shown = cli("save", "--help", env={"COLUMNS": "200"})
    assert shown.code == 0, shown.err
    examples = [line.strip() for line in shown.out.splitlines() if line.strip().startswith("baton save ")]
    # Then each example would run as printed: --kind is required
    assert len(examples) >= 3, shown.out
    missing = [line for line in examples if "--kind" not in line and " -k " not in line]
    assert missing == [], missing


def test_exit_codes_of_the_other_error_classes_and_url_precedence(cli: Cli, http: httpx.Client, tmp_path: Path) -> None:
    # Given a completed checkpoint, a read-only key, a save made under an idempotency key, and an empty state file
    subj = subject()
    ckpt = api_save(http, subj, "task_state", {"step": 1}, status="completed")["checkpoint_id"]
    reader = http.post("/v1/keys", json={"agent_id": "operator", "scopes": ["checkpoints:read"]}).json()["data"]
    idem = f"rv-{uuid.uuid4().hex}"
    other = subject()
    cli.ok("save", other, '{"v": 1}', "-k", "task_state", "--idempotency-key", idem)
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    # When: a write to the closed checkpoint, a write with a read-only key, the idempotency key reused for another
    # body, a forged cursor, a missing kept revision, empty states, and --url against a BATON_URL that is down
    closed, forbidden, reused, cursor, no_revision, empty_file = cli.many(
        ("save", subj, '{"step": 2}', "-k", "task_state"),
        ("save", subject(), '{"step": 1}', "-k", "task_state", "--api-key", reader["secret"]),
        ("save", other, '{"v": 2}', "-k", "task_state", "--idempotency-key", idem),
        ("list", subj, "--cursor", "not-a-cursor"),
        ("get", ckpt, "--revision", "7"),
        ("save", subj, str(empty), "-k", "task_state"),
    )
    empty_stdin = cli("save", subj, "-", "-k", "task_state", stdin="")
    http.delete(f"/v1/keys/{reader['key_id']}")
    precedence = cli("resume", subj, "--json", "--url", cli.env["BATON_URL"], env={"BATON_URL": "http://127.0.0.1:9"})
    # Then 4 for conflicts (closed, idempotency key reused), 1 for 403 and 400, 3 for not found, 2 for usage,
    # and --url wins over BATON_URL
    assert closed.code == 4
    assert_one_error_line(closed, "CHECKPOINT_CLOSED")
    assert forbidden.code == 1
    assert_one_error_line(forbidden, "FORBIDDEN")
    assert reader["secret"] not in forbidden.err
    assert reused.code == 4
    assert_one_error_line(reused, "IDEMPOTENCY_KEY_REUSED")
    assert cursor.code == 1
    assert_one_error_line(cursor, "VALIDATION_ERROR")
    assert no_revision.code == 3
    for usage in (empty_file, empty_stdin):
        assert usage.code == 2, usage
        assert_one_plain_line(usage)
    assert precedence.code == 0, precedence
