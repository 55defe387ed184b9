"""The installed `baton` command, run as a subprocess against `baton serve`: every command, its `--json` output
checked against what the API holds, its exit codes, and a blob's round trip."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.server_process import REPO, BatonServe
from tests.proof_counts import record

pytestmark = pytest.mark.e2e

BATON = Path(sys.executable).with_name("baton")


@dataclass(frozen=True)
class Done:
    """A finished `baton` run."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout as one JSON document (fails when anything else is there)."""
        return json.loads(self.out)


class Cli:
    """Runs the installed command with BATON_URL and BATON_API_KEY of the test server."""

    def __init__(self, server: BatonServe) -> None:
        self.env = {**os.environ, "BATON_URL": server.url, "BATON_API_KEY": server.key}
        self.runs = 0

    def __call__(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Done:
        self.runs += 1
        done = subprocess.run(
            [str(BATON), *args],
            cwd=REPO,
            env={**self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def many(self, *commands: tuple[str, ...]) -> list[Done]:
        """Independent runs at once (each run is mostly interpreter start-up, which overlaps well)."""
        with ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(lambda args: self(*args), commands))

    def ok(self, *args: str, stdin: str | None = None) -> Done:
        """A run that must succeed."""
        done = self(*args, stdin=stdin)
        assert done.code == 0, f"baton {' '.join(args)} -> {done.code}\n{done.out}\n{done.err}"
        return done


@pytest.fixture(scope="module")
def cli(baton: BatonServe) -> Any:
    assert BATON.exists(), f"the installed command is missing: {BATON}"
    runner = Cli(baton)
    yield runner
    record("cli e2e", subprocess_runs=runner.runs)


def subject() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"


def api_save(http: httpx.Client, subject_id: str, kind: str, state: Any, **fields: Any) -> dict[str, Any]:
    """A save through the API itself (setting the scene for the command under test)."""
    answer = http.post("/v1/checkpoints", json={"subject_id": subject_id, "kind": kind, "state": state, **fields})
    assert answer.status_code in (200, 201), answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def assert_one_error_line(done: Done, code: str) -> None:
    """An API error: nothing on stdout, one stderr line naming the code and the request id."""
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert code in lines[0]
    assert "[request " in lines[0]


def test_save_from_an_argument_a_file_and_stdin_and_get_it_back(cli: Cli, http: httpx.Client, tmp_path: Path) -> None:
    # Given a subject, and a state in a file
    subj = subject()
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"step": 2, "todo": ["reply", "close"]}), encoding="utf-8")
    # When it is saved from a JSON argument, then a file, then stdin
    first = cli.ok("save", subj, '{"step": 1}', "--kind", "task_state", "--json", "--keep-revisions", "5").json()
    second = cli.ok("save", subj, str(state_file), "--kind", "task_state", "--json").json()
    third = cli.ok("save", subj, "-", "--kind", "task_state", "--json", stdin='{"step": 3}').json()
    # Then --json printed each save's data, one checkpoint at revisions 1, 2, 3
    assert (first["revision"], first["updated"]) == (1, False)
    assert (second["checkpoint_id"], second["revision"]) == (first["checkpoint_id"], 2)
    assert (third["checkpoint_id"], third["revision"], third["updated"]) == (first["checkpoint_id"], 3, True)
    # And the API holds the last state; `get` by id and by subject/kind print exactly its data
    held = http.get(f"/v1/checkpoints/{first['checkpoint_id']}").json()["data"]
    assert held["state"] == {"step": 3}
    assert held["state_hash"] == third["state_hash"]
    by_id, by_subject, kept = cli.many(
        ("get", first["checkpoint_id"], "--json"),
        ("get", "--subject", subj, "--kind", "task_state", "--json"),
        ("get", first["checkpoint_id"], "--revision", "2", "--json"),
    )
    assert by_id.json() == held
    assert by_subject.json() == held
    # And the file's state is revision 2, readable as a kept revision
    assert kept.json()["state"] == {"step": 2, "todo": ["reply", "close"]}


def test_human_output_is_lines_a_table_and_the_state_as_json(cli: Cli, http: httpx.Client) -> None:
    # Given a saved checkpoint with a nested state
    subj = subject()
    saved = api_save(http, subj, "workflow", {"plan": {"next": "rollback smoke"}})
    # When it is shown, listed and resumed without --json
    shown, listed, resumed = cli.many(("get", saved["checkpoint_id"]), ("list", subj), ("resume", subj))
    assert (shown.code, listed.code, resumed.code) == (0, 0, 0), (shown, listed, resumed)
    # Then the record is key/value lines and the state is pretty JSON; the list is a table; piped, no colour codes
    assert re.search(rf"^checkpoint_id +{saved['checkpoint_id']}$", shown.out, re.MULTILINE), shown.out
    assert '"next": "rollback smoke"' in shown.out
    assert "\x1b[" not in shown.out + listed.out + resumed.out
    assert saved["checkpoint_id"] in listed.out
    assert "workflow" in listed.out
    # a table: a header line of the columns, a rule under it (no borders: at 80 columns they would cost the cells)
    assert re.search(r"^checkpoint_id +agent +kind +rev +status", listed.out, re.MULTILINE), listed.out
    assert "───" in listed.out
    assert "ready" in resumed.out.splitlines()[0]


def test_list_filters_and_follows_cursors_with_all(cli: Cli, http: httpx.Client) -> None:
    # Given three checkpoints of one subject, one of them completed
    subj = subject()
    for kind in ("task_state", "workflow", "cursor"):
        api_save(http, subj, kind, {"k": 1})
    closed = cli.ok("save", subj, '{"k": 2}', "--kind", "cursor", "--status", "completed", "--json").json()
    # When one page of one is asked, then every page
    page, every, done = cli.many(
        ("list", subj, "--limit", "1", "--json"),
        ("list", subj, "--limit", "1", "--all", "--json"),
        ("list", subj, "--status", "completed", "--json"),
    )
    everything, completed = every.json(), done.json()
    assert closed["status"] == "completed"
    # Then the page says where the next one starts (stderr), --all gives what the API lists, and filters apply
    assert len(page.json()) == 1
    assert "--cursor" in page.err
    api = http.get(f"/v1/subjects/{subj}/checkpoints").json()["data"]
    assert everything == api
    assert len(everything) == 3
    assert [item["kind"] for item in completed] == ["cursor"]


def test_resume_answers_ready_ambiguous_and_none(cli: Cli, http: httpx.Client) -> None:
    # Given a subject with one checkpoint, then two
    subj, other = subject(), subject()
    saved = api_save(http, subj, "task_state", {"step": 1})
    api_save(http, other, "task_state", {"step": 1})
    api_save(http, other, "workflow", {"step": 1})
    ready, ambiguous, nothing = (
        done.json()
        for done in cli.many(("resume", subj, "--json"), ("resume", other, "--json"), ("resume", subject(), "--json"))
    )
    # Then the statuses are the API's
    assert ready["status"] == "ready"
    assert ready["checkpoint"]["checkpoint_id"] == saved["checkpoint_id"]
    assert ready["checkpoint"]["state"] == {"step": 1}
    assert ambiguous["status"] == "ambiguous"
    assert len(ambiguous["candidates"]) == 2
    assert nothing["status"] == "none"


def test_exit_codes_for_not_found_conflict_bad_key_and_usage(cli: Cli, http: httpx.Client) -> None:
    # Given a checkpoint at revision 1
    subj = subject()
    saved = api_save(http, subj, "task_state", {"step": 1})
    missing = f"ckpt_{uuid.uuid4().hex}"
    # When: a missing id, a stale --expected-revision, a bad key, usage errors
    not_found, stale, bad_key, no_kind, bad_kind, no_target, not_json, unknown = cli.many(
        ("get", missing),
        ("save", subj, '{"step": 9}', "-k", "task_state", "--expected-revision", "7"),
        ("list", subj, "--api-key", "btn_not_a_key_of_this_server_0000"),
        ("save", subj, '{"step": 1}'),
        ("save", subj, '{"step": 1}', "--kind", "diary"),
        ("get",),
        ("save", subj, "{not json", "-k", "task_state"),
        ("frobnicate",),
    )
    # Then 3, 4, 1, and 2 for each usage error, with one error line naming the code on stderr
    assert not_found.code == 3
    assert_one_error_line(not_found, "NOT_FOUND")
    assert stale.code == 4
    assert_one_error_line(stale, "REVISION_CONFLICT")
    assert bad_key.code == 1
    assert_one_error_line(bad_key, "UNAUTHENTICATED")
    for usage in (no_kind, bad_kind, no_target, not_json, unknown):
        assert usage.code == 2, usage
        assert usage.out == ""
    # And nothing was written by the refused save
    assert http.get(f"/v1/checkpoints/{saved['checkpoint_id']}").json()["data"]["revision"] == 1


def test_no_answer_exits_1_naming_the_connection(cli: Cli) -> None:
    # When the URL points where nothing listens
    done = cli("resume", subject(), env={"BATON_URL": "http://127.0.0.1:9"})
    # Then exit 1, one line
    assert done.code == 1
    assert "CONNECTION_ERROR" in done.err
    assert len(done.err.strip().splitlines()) == 1


def test_leases_hold_off_other_holders_and_writes_without_the_token(cli: Cli, http: httpx.Client) -> None:
    # Given a checkpoint leased by worker-1
    subj = subject()
    ckpt = api_save(http, subj, "task_state", {"step": 1})["checkpoint_id"]
    lease = cli.ok("lease", "acquire", ckpt, "--ttl", "120", "--holder", "worker-1", "--json").json()
    # When worker-2 asks for it, a save comes without the token, a delete too, then with the token
    other, tokenless, delete_tokenless = cli.many(
        ("lease", "acquire", ckpt, "--ttl", "120", "--holder", "worker-2", "--json"),
        ("save", subj, '{"step": 2}', "-k", "task_state"),
        ("delete", ckpt),
    )
    with_token, renewal = cli.many(
        ("save", subj, '{"step": 2}', "-k", "task_state", "--lease-token", lease["lease_token"], "--json"),
        ("lease", "acquire", ckpt, "--ttl", "120", "--holder", "worker-1", "--json"),
    )
    renewed = renewal.json()
    # Then the lease is the API's, others get 4 (LEASE_HELD), the token-bearing save lands
    held = http.get(f"/v1/checkpoints/{ckpt}").json()["data"]
    assert held["lease"] == {"holder": "worker-1", "expires_at": renewed["expires_at"]}
    assert renewed["lease_token"] == lease["lease_token"]
    assert other.code == 4
    assert_one_error_line(other, "LEASE_HELD")
    assert tokenless.code == 4
    assert delete_tokenless.code == 4
    assert with_token.json()["revision"] == 2
    # And after release, the lease is gone
    assert cli.ok("lease", "release", ckpt, lease["lease_token"], "--json").json()["checkpoint_id"] == ckpt
    assert http.get(f"/v1/checkpoints/{ckpt}").json()["data"].get("lease") is None


def test_delete_then_get_is_not_found_and_a_stale_if_match_is_a_conflict(cli: Cli, http: httpx.Client) -> None:
    # Given a checkpoint at revision 2
    subj = subject()
    ckpt = api_save(http, subj, "task_state", {"step": 1})["checkpoint_id"]
    api_save(http, subj, "task_state", {"step": 2})
    # When it is deleted at a stale revision, then at the current one
    stale = cli("delete", ckpt, "--if-match", "1")
    deleted = cli.ok("delete", ckpt, "--if-match", "2", "--json").json()
    # Then 4, then the API's answer; it is gone (3 for get and for a second delete)
    assert stale.code == 4
    assert deleted == {"checkpoint_id": ckpt, "deleted": True}
    assert http.get(f"/v1/checkpoints/{ckpt}").status_code == 404
    assert [done.code for done in cli.many(("get", ckpt), ("delete", ckpt))] == [3, 3]


def test_revisions_and_restore(cli: Cli, http: httpx.Client) -> None:
    # Given a checkpoint keeping 3 revisions, written 3 times
    subj = subject()
    ckpt = api_save(http, subj, "task_state", {"v": 1}, keep_revisions=3)
    for value in (2, 3):
        api_save(http, subj, "task_state", {"v": value})
    # When its revisions are listed and revision 1 restored
    listed, human = cli.many(
        ("revisions", ckpt["checkpoint_id"], "--all", "--json"), ("revisions", ckpt["checkpoint_id"])
    )
    kept = listed.json()
    api = http.get(f"/v1/checkpoints/{ckpt['checkpoint_id']}/revisions").json()["data"]
    restored = cli.ok("restore", ckpt["checkpoint_id"], "1", "--json").json()
    # Then the list is the API's, and the restore wrote revision 4 with revision 1's state
    assert kept == api
    assert [item["revision"] for item in kept] == [2, 1]
    assert "state_hash" in human.out
    assert restored["revision"] == 4
    assert http.get(f"/v1/checkpoints/{ckpt['checkpoint_id']}").json()["data"]["state"] == {"v": 1}


def test_a_blob_round_trips_byte_for_byte_and_attaches_to_a_save(cli: Cli, http: httpx.Client, tmp_path: Path) -> None:
    # Given a 2.5 MB file of random bytes
    source = tmp_path / "model.bin"
    source.write_bytes(os.urandom(2_500_000))
    # When it is uploaded, downloaded elsewhere and attached to a save
    blob = cli.ok("blob", "upload", str(source), "--json").json()
    target = tmp_path / "copy.bin"
    downloaded, info_shown, save_done = cli.many(
        ("blob", "download", blob["blob_id"], str(target), "--json"),
        ("blob", "info", blob["blob_id"], "--json"),
        ("save", subject(), '{"step": 1}', "-k", "task_state", "--resource", f"model.bin={blob['blob_id']}", "--json"),
    )
    info, shown, saved = downloaded.json(), info_shown.json(), save_done.json()
    # Then the bytes are equal, the metadata is the API's, and the record names the blob
    assert target.read_bytes() == source.read_bytes()
    assert blob["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert (info["blob_id"], info["size"], info["sha256"]) == (blob["blob_id"], 2_500_000, blob["sha256"])
    assert shown["blob_id"] == blob["blob_id"]
    assert not (tmp_path / "copy.bin.part").exists()
    resources = http.get(f"/v1/checkpoints/{saved['checkpoint_id']}").json()["data"]["resources"]
    assert [(r["name"], r["blob_id"]) for r in resources] == [("model.bin", blob["blob_id"])]


def test_the_progress_bar_shows_on_a_terminal_only(cli: Cli, tmp_path: Path) -> None:
    # Given a file, and a pseudo-terminal as the command's stdout and stderr
    import pty

    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(3_000_000))
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [str(BATON), "blob", "upload", str(source)],
            cwd=REPO,
            env={**cli.env, "COLUMNS": "120"},
            stdout=follower,
            stderr=follower,
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed when the command exited
                break
            if not chunk:
                break
            seen += chunk
        assert process.wait(timeout=60) == 0, seen
    finally:
        os.close(leader)
    cli.runs += 1
    # Then on a terminal, rich's transfer bar was drawn (bytes, of the whole size); piped, it is not
    text = seen.decode("utf-8", "replace")
    assert "upload big.bin" in text
    assert "3.0 MB" in text or "3.0/3.0 MB" in text
    piped = cli.ok("blob", "upload", str(source))
    assert "upload big.bin" not in piped.out + piped.err


def test_keys_create_list_and_revoke_over_http(cli: Cli, http: httpx.Client) -> None:
    # Given the operator key of the server
    agent = f"cli-{uuid.uuid4().hex[:8]}"
    # When a key is created, used, listed and revoked
    created = cli.ok(
        "keys", "create", "--agent", agent, "--scopes", "checkpoints:read,checkpoints:write", "--json"
    ).json()
    used, listing, table, usage = cli.many(
        ("save", subject(), '{"step": 1}', "-k", "task_state", "--json", "--api-key", created["secret"]),
        ("keys", "list", "--agent", agent, "--all", "--json"),
        ("keys", "list", "--agent", agent),
        ("keys", "create", "--agent", agent),
    )
    listed = listing.json()
    identity, shown = cli.many(
        ("whoami", "--json", "--api-key", created["secret"]), ("whoami", "--api-key", created["secret"])
    )
    revoked = cli.ok("keys", "revoke", created["key_id"], "--json").json()
    after = http.get("/v1/keys", params={"agent_id": agent}).json()["data"]
    # Then the new key works and belongs to its agent; the listings are the API's; revoked, it is gone
    assert created["secret"].startswith("btn_")
    assert created["scopes"] == ["checkpoints:read", "checkpoints:write"]
    assert used.code == 0, used.err
    assert used.json()["agent_id"] == agent
    assert [key["key_id"] for key in listed] == [created["key_id"]]
    assert "secret" not in listed[0]
    # and whoami tells the key in use: whose it is and what it may do
    assert identity.code == 0, identity.err
    assert identity.json()["key_id"] == created["key_id"]
    assert identity.json()["agent_id"] == agent
    assert identity.json()["effective_scopes"] == ["checkpoints:read", "checkpoints:write"]
    assert re.search(rf"^agent_id +{agent}$", shown.out, re.MULTILINE), shown.out
    assert created["key_id"] in table.out
    assert revoked == {"key_id": created["key_id"], "deleted": True}
    assert after == []
    assert usage.code == 2
    assert "--scopes" in usage.err


def test_help_and_version_of_the_installed_command(cli: Cli) -> None:
    # When the installed command is asked for its help and version (every command's help: tests/unit/test_cli_help.py)
    top = cli.ok("--help")
    version = cli.ok("--version")
    # Then the help lists the commands, with examples and the exit codes
    commands = ("serve", "save", "get", "list", "resume", "delete", "revisions", "restore", "lease", "blob", "keys")
    for name in (*commands, "whoami"):
        assert name in top.out
    assert "Examples" in top.out
    assert "3 not found" in top.out
    assert version.out.startswith("baton ")
