"""`baton`: the command line of Baton, on typer (click) and rich.

`baton serve` runs the whole API locally; every other command speaks HTTP to an API through the SDK
(`baton_checkpoints.client`). Exit codes: 0 success, 1 an API error or no answer, 2 a usage error, 3 not found, 4 a
conflict.
Only `serve` and `keys create --table` import the server's code, and only when they run.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from baton_checkpoints import __version__
from baton_checkpoints.cli import audit, blobs, checkpoints, keys, require

app = typer.Typer(
    name="baton",
    help=(
        "Baton: a checkpoint API for AI agents.\n\n"
        "Every command but [bold]serve[/bold] calls an API: --url (or BATON_URL) and --api-key (or BATON_API_KEY). "
        "Output is for people (tables, colours on a terminal) unless --json asks for the route's data as JSON.\n\n"
        "Exit codes: 0 success, 1 API error or no answer, 2 usage error, 3 not found, 4 conflict (stale revision, "
        "closed checkpoint, held lease, idempotency)."
    ),
    epilog=(
        "[bold]Examples[/bold]\n\n"
        "  baton serve --port 8787\n\n"
        "  export BATON_URL=http://127.0.0.1:8787 BATON_API_KEY=btn_...\n\n"
        "  baton save ticket-42 '{\"step\": 3}' --kind task_state\n\n"
        "  baton resume ticket-42 --json"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"baton {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Baton: a checkpoint API for AI agents."""


SERVE_EPILOG = """\
[bold]Examples[/bold]

  baton serve

  baton serve --port 9000 --dev-key btn_my_fixed_development_key

  baton serve --aws-endpoint http://127.0.0.1:5000 --table baton-dev

  baton serve --dynamodb-endpoint http://127.0.0.1:8000

  baton serve --events print
"""


@app.command("serve", epilog=SERVE_EPILOG)
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; 0 picks a free one.")] = 8787,
    aws_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Use this AWS-compatible endpoint (a moto server, DynamoDB Local) instead of embedded moto.",
        ),
    ] = None,
    dynamodb_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Keep the table, and the reaper's reads of its stream, on this DynamoDB endpoint (DynamoDB Local); "
            "S3 stays on embedded moto (or --aws-endpoint).",
        ),
    ] = None,
    table: Annotated[str, typer.Option(help="Table name (created if missing).")] = "baton-local",
    bucket: Annotated[str, typer.Option(help="Blob bucket name (created if missing).")] = "baton-local",
    region: Annotated[str, typer.Option(help="AWS region when AWS_REGION is unset.")] = "us-east-1",
    dev_key: Annotated[
        str | None,
        typer.Option(metavar="VALUE", help="Use this development key instead of a random one (or set BATON_DEV_KEY)."),
    ] = None,
    containers: Annotated[
        int, typer.Option(help="How many Lambda containers (processes) serve requests concurrently.")
    ] = 4,
    no_reaper: Annotated[
        bool,
        typer.Option(
            "--no-reaper",
            help="Do not run the reaper on the table's stream (dropped states, blobs and revisions then stay).",
        ),
    ] = False,
    events: Annotated[
        str | None,
        typer.Option(
            metavar="print|URL",
            help="Also print the change events (checkpoint saved, closed, deleted; leases; threads deleted), or POST "
            "each batch of them as a JSON array to an http(s) URL. They always go to the local event bus.",
        ),
    ] = None,
) -> None:
    """Run the whole API locally on embedded moto (or an AWS-compatible endpoint); prints a development key."""
    require("local", "baton serve", "moto", "boto3", "aws_lambda_powertools", "pydantic")
    from baton_checkpoints.local.serve import ServeOptions, check_dev_key
    from baton_checkpoints.local.serve import serve as run
    from baton_checkpoints.settings import EVENTS_ECHO  # what the reaper's setting accepts, checked before serving

    if events is not None and not EVENTS_ECHO.match(events):
        print(f"baton serve: --events must be print or an http(s) URL, got {events!r}", file=sys.stderr)
        raise typer.Exit(2)
    if dev_key is not None:
        try:
            check_dev_key(dev_key)
        except ValueError as exc:
            print(f"baton serve: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
    status = run(
        ServeOptions(
            host=host,
            port=port,
            aws_endpoint=aws_endpoint,
            dynamodb_endpoint=dynamodb_endpoint,
            table=table,
            bucket=bucket,
            region=region,
            dev_key=dev_key,
            containers=max(1, containers),
            reaper=not no_reaper,
            events=events,
        )
    )
    raise typer.Exit(status)


checkpoints.register(app)
app.command("whoami", epilog=keys.WHOAMI_EPILOG)(keys.whoami)
app.add_typer(blobs.blob_app)
app.add_typer(keys.keys_app)
app.add_typer(audit.audit_app)


def plain_metavars(command: Any, help_names: list[str] | None = None) -> Any:
    """`command` (typer's click command for `app`) with help that shows what to type, never a Python type: a flag
    shows nothing after its name (typer 0.29 wrote `<bool>`), an option a name in capitals (`--lease-token
    LEASE_TOKEN`, not `<str>`; a number `N`), a choice its choices, and an argument its name alone."""
    for param in command.params:
        kind = getattr(param, "param_type_name", "")
        if kind == "argument":
            param.display_type_rich = lambda ctx: None
        elif kind == "option" and param.metavar is None:
            if getattr(param, "is_flag", False):
                param.metavar = ""
            elif getattr(param, "type_descriptor", None) is not None and param.type_descriptor.is_choice:
                continue
            elif param.display_type(None) in ("<int>", "<int range>"):
                param.metavar = "N"
            else:
                param.metavar = param.name.upper()
    # The help option is made per command on first use, with the names its context inherits from the app's (`-h` and
    # `--help`): made here, once, with those names, to be plain too.
    settings = dict(command.context_settings)
    names = settings.setdefault("help_option_names", help_names or ["--help"])
    help_option = command.get_help_option(command.context_class(command, **settings))
    if help_option is not None:
        help_option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub, names)
    return command


def run_app(argv: list[str] | None) -> None:
    """Run `app` on `argv` as typer's `app(...)` does, with `plain_metavars` in its help."""
    plain_metavars(typer.main.get_command(app))(args=argv, prog_name="baton")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `baton` command: run it on `argv` (default: the process's) and return the exit status.

    An exception no command expected is a defect: the user reads one line naming its type, exit 1, and never a
    traceback, whose frames' text can hold a request's headers (the bearer key) or a state's content. Ctrl-C is
    exit 130 (128 + SIGINT), quietly, as shells expect.
    """
    try:
        run_app(argv)
    except SystemExit as done:
        if done.code is None:
            return 0
        return done.code if isinstance(done.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the last line of defence: one line, never the exception's text
        print(f"baton: internal error: {type(error).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
