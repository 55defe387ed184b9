"""`baton save | get | list | resume | delete | revisions | restore` and `baton lease acquire | release`."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from baton_checkpoints.cli.common import (
    AgentOption,
    AllPagesOption,
    ApiKeyOption,
    CursorOption,
    IdempotencyKeyOption,
    JsonOption,
    UrlOption,
    YesOption,
    collect_pages,
    confirm,
    emit_json,
    fail_usage,
    note,
    parse_if_match,
    say,
    session,
)


class Kind(StrEnum):
    """The closed set of checkpoint kinds."""

    task_state = "task_state"
    conversation = "conversation"
    workflow = "workflow"
    cursor = "cursor"


class Status(StrEnum):
    """A checkpoint's status."""

    active = "active"
    completed = "completed"
    cancelled = "cancelled"


def read_state(value: str) -> Any:
    """The state a `STATE` argument names: `-` reads stdin, `@path` a file; otherwise JSON text if it parses, else
    the path of a file holding JSON. Anything else is a usage error (exit 2)."""
    if value == "-":
        return _parse(sys.stdin.read(), "stdin")
    if value.startswith("@"):
        return _parse(_read_file(value[1:]), value[1:])
    try:
        json.loads(value)  # JSON text at all? (then strictly, below)
    except ValueError:
        pass
    else:
        return _checked(value, "the STATE argument")
    if not Path(value).is_file():
        fail_usage(f"STATE {_short(value)!r} is neither JSON nor a readable file (use - for stdin, @FILE for a file).")
    return _parse(_read_file(value), value)


def _read_file(name: str) -> str:
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail_usage(f"cannot read the state file {name!r}: {error}")


def _parse(text: str, where: str) -> Any:
    try:
        return _strict_json(text)
    except ValueError as error:
        fail_usage(f"the state in {where} is not JSON: {error}")


def _checked(text: str, where: str) -> Any:
    """`text` (which Python's parser accepts) parsed strictly, or a usage error naming `where`."""
    try:
        return _strict_json(text)
    except ValueError as error:
        fail_usage(f"{where} is not JSON the API accepts: {error}")


def _strict_json(text: str) -> Any:
    """JSON as the API reads it (RFC 8259, I-JSON): Python's parser also takes NaN and Infinity, strings with lone
    surrogates (not UTF-8), and a key named twice (keeping the last, silently dropping the user's other value); each
    is a `ValueError` here, so the user hears of it before anything is sent."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, item in pairs:
            if key in result:
                raise ValueError(f"the key {key!r} appears twice in one object")
            result[key] = item
        return result

    parsed = json.loads(text, parse_constant=no_constant, object_pairs_hook=unique_keys)
    try:
        # A lone surrogate (from a \\ud800 escape) has no UTF-8 form: the API could never store it.
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone surrogate (\\ud800-\\udfff): it is not Unicode text") from None
    return parsed


def _short(value: str) -> str:
    return value if len(value) <= 60 else value[:57] + "..."


def parse_resource(value: str) -> tuple[str, str]:
    """`--resource NAME=BLOB_ID` as `(name, blob_id)`."""
    name, sep, blob_id = value.partition("=")
    if not sep or not name or not blob_id:
        fail_usage(f"--resource {value!r}: expected NAME=BLOB_ID, e.g. build.log=blob_0123...")
    return name, blob_id


SAVE_EPILOG = """\
[bold]Examples[/bold]

  baton save ticket-42 '{"step": 3, "todo": ["reply"]}' --kind task_state

  baton save ticket-42 state.json --kind workflow --expected-revision 2

  jq .state run.json | baton save ticket-42 - --kind task_state --json

  baton save ticket-42 @state.json --kind task_state --lease-token 1.9f0c... --resource build.log=blob_0123...
"""


def save(
    subject: Annotated[str, typer.Argument(help="The subject_id: who or what the work is about.")],
    state: Annotated[
        str,
        typer.Argument(help="The state: JSON text, a JSON file's path (or @FILE), or - to read stdin."),
    ],
    kind: Annotated[Kind, typer.Option("--kind", "-k", help="The checkpoint's kind.")],
    agent: AgentOption = None,
    expected_revision: Annotated[
        int | None,
        typer.Option(min=0, help="Write only if this is the current revision (0: only if it does not exist yet)."),
    ] = None,
    status: Annotated[Status | None, typer.Option(help="Set the status; completed and cancelled are final.")] = None,
    format: Annotated[str | None, typer.Option(help="Validate the state as this format, e.g. opencheckpoint/0.1.")] = (
        None
    ),
    ttl: Annotated[int | None, typer.Option("--ttl", help="Seconds the checkpoint lives after this write.")] = None,
    keep_revisions: Annotated[int | None, typer.Option(help="How many superseded revisions stay readable.")] = None,
    lease_token: Annotated[str | None, typer.Option(help="The token of the checkpoint's live lease.")] = None,
    resource: Annotated[
        list[str] | None,
        typer.Option("--resource", "-r", help="Attach an uploaded blob as NAME=BLOB_ID (repeatable)."),
    ] = None,
    idempotency_key: IdempotencyKeyOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Save (create or update) the checkpoint of a subject, agent and kind."""
    value = read_state(state)
    wanted = [parse_resource(item) for item in resource or []]
    with session(url, api_key) as baton:
        resources = [baton.get_blob(blob_id).as_resource(name) for name, blob_id in wanted]
        saved = baton.save(
            subject,
            kind.value,
            value,
            agent_id=agent,
            expected_revision=expected_revision,
            status=status.value if status else None,
            format=format,
            resources=resources or None,
            lease_token=lease_token,
            ttl_seconds=ttl,
            keep_revisions=keep_revisions,
            idempotency_key=idempotency_key,
        )
    if as_json:
        emit_json(saved.raw)
        return
    from baton_checkpoints.cli.render import RECORD_FIELDS, print_fields

    verb = "Updated" if saved.updated else "Created"
    replay = " (a replay of an earlier identical save)" if saved.meta.replayed else ""
    say(f"{verb} {saved.checkpoint_id} at revision {saved.revision}{replay}.")
    print_fields(saved.raw, RECORD_FIELDS)


GET_EPILOG = """\
[bold]Examples[/bold]

  baton get ckpt_6d41...

  baton get --subject ticket-42 --kind task_state --agent planner

  baton get ckpt_6d41... --revision 2

  baton get ckpt_6d41... --json | jq .state
"""


def get(
    checkpoint_id: Annotated[str | None, typer.Argument(help="The checkpoint_id (or use --subject and --kind).")] = (
        None
    ),
    subject: Annotated[str | None, typer.Option("--subject", "-s", help="Look up by subject_id (with --kind).")] = (
        None
    ),
    kind: Annotated[Kind | None, typer.Option("--kind", "-k", help="The kind of the lookup.")] = None,
    agent: AgentOption = None,
    revision: Annotated[
        int | None, typer.Option(min=1, help="A kept earlier revision instead of the current one (by id only).")
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a checkpoint, state included: by id, or by subject, kind (and agent)."""
    if checkpoint_id is None and (subject is None or kind is None):
        fail_usage("give a CHECKPOINT_ID, or --subject and --kind.")
    if checkpoint_id is not None and (subject is not None or kind is not None or agent is not None):
        fail_usage("give either a CHECKPOINT_ID or --subject/--kind/--agent, not both.")
    if revision is not None and checkpoint_id is None:
        fail_usage("--revision needs a CHECKPOINT_ID.")
    with session(url, api_key) as baton:
        if checkpoint_id is None:
            assert subject is not None
            assert kind is not None
            record = baton.lookup(subject, kind.value, agent_id=agent)
        elif revision is not None:
            record = baton.get_revision(checkpoint_id, revision)
        else:
            record = baton.get(checkpoint_id)
    if as_json:
        emit_json(record.raw)
        return
    from baton_checkpoints.cli.render import print_record

    print_record(record.raw)


LIST_EPILOG = """\
[bold]Examples[/bold]

  baton list ticket-42

  baton list ticket-42 --kind workflow --status active --agent planner

  baton list ticket-42 --all --json | jq -r '.[].checkpoint_id'
"""


def list_checkpoints(
    subject: Annotated[str, typer.Argument(help="The subject_id.")],
    kind: Annotated[Kind | None, typer.Option("--kind", "-k", help="Only this kind.")] = None,
    status: Annotated[Status | None, typer.Option(help="Only this status.")] = None,
    agent: AgentOption = None,
    limit: Annotated[int | None, typer.Option(min=1, max=200, help="Checkpoints per page (1-200).")] = None,
    cursor: CursorOption = None,
    all_pages: AllPagesOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a subject's checkpoints (summaries, newest first)."""
    with session(url, api_key) as baton:
        items, cursor = collect_pages(
            lambda at: baton.list_checkpoints(
                subject,
                kind=kind.value if kind else None,
                status=status.value if status else None,
                agent_id=agent,
                limit=limit,
                cursor=at,
            ),
            cursor,
            all_pages,
        )
    _print_page(items, cursor, as_json, f"Checkpoints of {subject}", "summary")


def _print_page(items: list[Any], cursor: str | None, as_json: bool, title: str, columns: str) -> None:
    """A list's `data` (`--json`) or its table; the next cursor, when there is one, on stderr."""
    if as_json:
        emit_json(items)
    else:
        from baton_checkpoints.cli import render

        chosen = {"summary": render.SUMMARY_COLUMNS, "revision": render.REVISION_COLUMNS}[columns]
        render.print_table(items, chosen, title=title)
    if cursor is not None:
        note(f"More on the next page: --cursor {cursor} (or --all).")


RESUME_EPILOG = """\
[bold]Examples[/bold]

  baton resume ticket-42

  baton resume ticket-42 --kind task_state --agent planner --budget-bytes 200000

  baton resume ticket-42 --json | jq -r .status
"""


def resume(
    subject: Annotated[str, typer.Argument(help="The subject_id.")],
    kind: Annotated[Kind | None, typer.Option("--kind", "-k", help="Only this kind.")] = None,
    agent: AgentOption = None,
    checkpoint_id: Annotated[str | None, typer.Option("--checkpoint", help="Only this checkpoint_id.")] = None,
    budget_bytes: Annotated[
        int | None, typer.Option(min=1024, max=6_000_000, help="Answer `omitted` rather than more bytes than this.")
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """What to pick up for a subject: ready, ambiguous, none, closed or omitted (read-only; claims nothing)."""
    with session(url, api_key) as baton:
        result = baton.resume(
            subject,
            kind=kind.value if kind else None,
            agent_id=agent,
            checkpoint_id=checkpoint_id,
            budget_bytes=budget_bytes,
        )
    if as_json:
        emit_json(result.raw)
        return
    from rich.text import Text

    from baton_checkpoints.cli import render
    from baton_checkpoints.cli.common import printable, stdout_console

    data = result.raw
    console = stdout_console()
    console.print(
        Text.assemble(("resume", "bold cyan"), "  ", (printable(str(data.get("status"))), "bold")), soft_wrap=True
    )
    for name in ("pending_operations", "stop_conditions", "required_bytes"):
        if data.get(name):
            render.print_fields({name: data[name]}, console=console)
    checkpoint = data.get("checkpoint")
    if isinstance(checkpoint, dict):
        render.print_record(checkpoint, console=console)
    candidates = data.get("candidates") or []
    if candidates:
        title = "Candidates (Baton never guesses)"
        render.print_table(candidates, render.SUMMARY_COLUMNS, title=title, console=console)
    if data.get("status") == "none":
        console.print(Text(printable(f"Nothing to resume for {subject}."), style="dim"))


DELETE_EPILOG = """\
[bold]Examples[/bold]

  baton delete ckpt_6d41...

  baton delete ckpt_6d41... --if-match 3 --lease-token 1.9f0c...

  On a terminal it asks first; --yes does not ask.
"""


def delete(
    checkpoint_id: Annotated[str, typer.Argument(help="The checkpoint_id.")],
    if_match: Annotated[
        str | None, typer.Option(help="Delete only at this revision (a number) or ETag; 4 when stale.")
    ] = None,
    lease_token: Annotated[str | None, typer.Option(help="The token of the checkpoint's live lease.")] = None,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a checkpoint (its revisions and blobs go with it)."""
    confirm(f"Delete {checkpoint_id}, its revisions and its blobs?", yes)
    with session(url, api_key) as baton:
        deleted = baton.delete(checkpoint_id, if_match=parse_if_match(if_match), lease_token=lease_token)
    if as_json:
        emit_json(deleted.raw)
        return
    say(f"Deleted {deleted.checkpoint_id}.")


REVISIONS_EPILOG = """\
[bold]Examples[/bold]

  baton revisions ckpt_6d41...

  baton revisions ckpt_6d41... --all --json

  baton get ckpt_6d41... --revision 2
"""


def revisions(
    checkpoint_id: Annotated[str, typer.Argument(help="The checkpoint_id.")],
    limit: Annotated[int | None, typer.Option(min=1, max=200, help="Revisions per page (1-200).")] = None,
    cursor: CursorOption = None,
    all_pages: AllPagesOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a checkpoint's kept earlier revisions (newest first; saves keep them with --keep-revisions)."""
    with session(url, api_key) as baton:
        items, cursor = collect_pages(
            lambda at: baton.list_revisions(checkpoint_id, limit=limit, cursor=at), cursor, all_pages
        )
    _print_page(items, cursor, as_json, f"Kept revisions of {checkpoint_id}", "revision")


RESTORE_EPILOG = """\
[bold]Examples[/bold]

  baton restore ckpt_6d41... 2

  baton restore ckpt_6d41... 2 --expected-revision 5 --json
"""


def restore(
    checkpoint_id: Annotated[str, typer.Argument(help="The checkpoint_id.")],
    revision: Annotated[int, typer.Argument(min=1, help="The kept revision whose state to write again.")],
    expected_revision: Annotated[
        int | None, typer.Option(min=0, help="Write only if this is the current revision.")
    ] = None,
    lease_token: Annotated[str | None, typer.Option(help="The token of the checkpoint's live lease.")] = None,
    idempotency_key: IdempotencyKeyOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a kept revision's state as the next revision (never a rewind)."""
    with session(url, api_key) as baton:
        saved = baton.restore(
            checkpoint_id,
            revision,
            expected_revision=expected_revision,
            lease_token=lease_token,
            idempotency_key=idempotency_key,
        )
    if as_json:
        emit_json(saved.raw)
        return
    from baton_checkpoints.cli.render import RECORD_FIELDS, print_fields

    say(f"Restored revision {revision} of {saved.checkpoint_id} as revision {saved.revision}.")
    print_fields(saved.raw, RECORD_FIELDS)


lease_app = typer.Typer(
    name="lease",
    help="Acquire, renew or release a checkpoint's lease (one holder writes at a time).",
    no_args_is_help=True,
    rich_markup_mode="rich",
)

ACQUIRE_EPILOG = """\
[bold]Examples[/bold]

  baton lease acquire ckpt_6d41... --ttl 300 --holder worker-7

  TOKEN=$(baton lease acquire ckpt_6d41... --ttl 300 --json | jq -r .lease_token)
"""


@lease_app.command("acquire", epilog=ACQUIRE_EPILOG)
def lease_acquire(
    checkpoint_id: Annotated[str, typer.Argument(help="The checkpoint_id.")],
    ttl: Annotated[int, typer.Option("--ttl", min=10, max=86_400, help="Seconds the lease lasts (10-86400).")] = 300,
    holder: Annotated[str | None, typer.Option(help="Who holds it (default: the calling key's key_id).")] = None,
    idempotency_key: IdempotencyKeyOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Acquire a lease, or renew it when the same holder has it (exit 4 when another holder does)."""
    with session(url, api_key) as baton:
        granted = baton.acquire_lease(checkpoint_id, ttl, holder=holder, idempotency_key=idempotency_key)
    if as_json:
        emit_json(granted.raw)
        return
    from baton_checkpoints.cli.render import print_fields

    say(f"{'Renewed' if granted.renewed else 'Acquired'} the lease of {granted.checkpoint_id}.")
    print_fields(granted.raw, ("checkpoint_id", "holder", "lease_token", "expires_at"))


RELEASE_EPILOG = """\
[bold]Examples[/bold]

  baton lease release ckpt_6d41... 1.9f0c...
"""


@lease_app.command("release", epilog=RELEASE_EPILOG)
def lease_release(
    checkpoint_id: Annotated[str, typer.Argument(help="The checkpoint_id.")],
    lease_token: Annotated[str, typer.Argument(help="The token `lease acquire` printed.")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Release a lease by its token."""
    with session(url, api_key) as baton:
        released = baton.release_lease(checkpoint_id, lease_token)
    if as_json:
        emit_json(released.raw)
        return
    say(f"Released the lease of {checkpoint_id}.")


def register(app: typer.Typer) -> None:
    """Add the checkpoint and lease commands to `app`."""
    app.command("save", epilog=SAVE_EPILOG)(save)
    app.command("get", epilog=GET_EPILOG)(get)
    app.command("list", epilog=LIST_EPILOG)(list_checkpoints)
    app.command("resume", epilog=RESUME_EPILOG)(resume)
    app.command("delete", epilog=DELETE_EPILOG)(delete)
    app.command("revisions", epilog=REVISIONS_EPILOG)(revisions)
    app.command("restore", epilog=RESTORE_EPILOG)(restore)
    app.add_typer(lease_app)
