"""What every API command of `baton` shares: the connection and output options, the client, JSON output, and the
translation of the SDK's errors into one stderr line and an exit code.

Import discipline: this module imports typer only. The SDK (httpx) is imported when a command runs, and nothing of
the server (baton_checkpoints.domain, baton_checkpoints.local, boto3) is imported by any API command, so `baton --help`
starts fast and the
commands work with only `baton-checkpoints[cli]` installed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from baton_checkpoints.client import Baton, BatonError

EXIT_OK = 0
EXIT_ERROR = 1
"""Any API error but not-found and conflicts, and no answer at all (connection failure)."""
EXIT_USAGE = 2
"""click's own code for usage errors: a missing or malformed option or argument."""
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
"""A 409 (`REVISION_CONFLICT`, `CHECKPOINT_CLOSED`, `LEASE_HELD`, `LEASE_LOST`, `IDEMPOTENCY_IN_PROGRESS`) or a 422
`IDEMPOTENCY_KEY_REUSED`: the request was sound but the state of the checkpoint (or of the key) stands in its way."""
EXIT_BROKEN_CHAIN = 5
"""`baton audit verify`: the tenant's audit trail is not a whole chain."""

CONNECTION = "Connection"
OUTPUT = "Output"

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="BATON_URL",
        show_envvar=True,
        help="The API's base URL, e.g. http://127.0.0.1:8787 for `baton serve`.",
        rich_help_panel=CONNECTION,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="BATON_API_KEY",
        show_envvar=True,
        show_default=False,
        help="The bearer key (prefer the environment variable: arguments show in `ps`).",
        rich_help_panel=CONNECTION,
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print exactly the route's `data` as JSON on stdout, and nothing else there.",
        rich_help_panel=OUTPUT,
    ),
]
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Do it without asking (it asks when stdin and stderr are a terminal; never from a pipe, CI or cron).",
    ),
]
CursorOption = Annotated[str | None, typer.Option(help="Continue from a previous page's next cursor.")]
AllPagesOption = Annotated[bool, typer.Option("--all", help="Follow the cursors to the last page.")]
AgentOption = Annotated[
    str | None, typer.Option("--agent", "-a", help="The agent_id (a `*` key may act for any agent of its tenant).")
]
IdempotencyKeyOption = Annotated[
    str | None,
    typer.Option(
        "--idempotency-key",
        help="Make a repeated command a replay of the first (one is generated per run otherwise).",
    ),
]


def connect(url: str | None, api_key: str | None) -> Baton:
    """The SDK's client for `url` and `api_key` (each already taken from the environment by typer when absent).

    Both are checked here, so a mistake is a usage error (exit 2) at once rather than four attempts and "no answer":
    the URL must be an http(s) URL with a host, and the key a header value. The key is never echoed: stderr reaches
    terminals and CI logs.
    """
    import httpx

    from baton_checkpoints.client import Baton

    if not url:
        fail_usage("no API URL: pass --url or set BATON_URL (e.g. http://127.0.0.1:8787 for `baton serve`).")
    url = url.strip()
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        fail_usage(f"the API URL {printable(url)!r} is not a URL (e.g. http://127.0.0.1:8787).")
    if parsed.scheme not in ("http", "https") or not parsed.host:
        fail_usage(f"the API URL {printable(url)!r} needs http:// or https:// and a host (e.g. http://127.0.0.1:8787).")
    # A key file saved with CRLF, read by $(cat key), ends in "\r": whitespace around a key is never part of it.
    key = (api_key or "").strip() or None
    if key is not None and not _header_safe(key):
        fail_usage("the API key holds a character a key cannot have (non-ASCII or a control character); check it.")
    if key is None:
        fail_usage(
            "no API key: set BATON_API_KEY or pass --api-key (`make serve` prints one; `baton keys create` makes more)."
        )
    return Baton(url, key)


def _header_safe(value: str) -> bool:
    """True when `value` can travel as an HTTP header value: visible ASCII and spaces only."""
    return all(32 <= ord(char) < 127 for char in value)


_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """`text` with its control characters (C0, DEL, C1) and lone surrogates shown as escapes (`\\x1b`, `\\n`), so
    text a server or a user chose can never move the cursor, clear the screen, set the title or break a line."""
    if all(" " <= char < "\x7f" or "\xa0" <= char < "\ud800" or char > "\udfff" for char in text):
        return text  # the common case: nothing to escape
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code < 32 or 0x7F <= code < 0xA0:
            out.append(_ESCAPES.get(char) or f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def fail_usage(message: str) -> NoReturn:
    """Stop with a usage error (exit 2), as click does for its own."""
    print(f"baton: {printable(message)}", file=sys.stderr)
    raise typer.Exit(EXIT_USAGE)


def exit_code_of(error: BatonError) -> int:
    """The exit status of an SDK error: 3 not found, 4 conflict, 1 anything else."""
    from baton_checkpoints.client import ConflictError, IdempotencyKeyReusedError, NotFoundError

    if isinstance(error, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(error, ConflictError | IdempotencyKeyReusedError):
        return EXIT_CONFLICT
    return EXIT_ERROR


def error_line(error: BatonError) -> str:
    """One line for stderr: the code, the HTTP status, the message and the request id."""
    status = f" ({error.status})" if error.status else ""
    # One line, whatever the server or a proxy sent, and no escape sequence reaching the terminal.
    message = printable(" ".join(str(error.message).split()))
    where = f" [request {error.request_id}]" if error.request_id else ""
    return f"baton: {printable(str(error.code))}{status}: {message}{printable(where)}"


@contextmanager
def session(url: str | None, api_key: str | None) -> Iterator[Baton]:
    """A connected client; an SDK error inside becomes its stderr line and exit code."""
    from baton_checkpoints.client import BatonError

    client = connect(url, api_key)
    try:
        with client:
            yield client
    except BatonError as error:
        print(error_line(error), file=sys.stderr)
        raise typer.Exit(exit_code_of(error)) from None


def interactive() -> bool:
    """True when stdin and stderr are both terminals (a person, or a script run from their terminal); never with stdin
    closed or from a pipe, in CI or cron."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stderr))


def confirm(question: str, yes: bool) -> None:
    """Ask `question` on a terminal unless `yes`; a no (or no answer) stops the command, exit 1, having done nothing.
    Input from a pipe (or none), CI and cron are never asked: they act as told. A script run from a terminal is asked:
    it passes `--yes`."""
    if yes or not interactive():
        return
    if not typer.confirm(printable(question), default=False, err=True):
        print("baton: nothing done.", file=sys.stderr)
        raise typer.Exit(1)


def emit_json(data: Any) -> None:
    """One JSON document on stdout (no colours, no wrapping): what `--json` prints."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def stdout_console() -> Console:
    """The console of human output: colours only on a terminal, and no wrapping of long ids when piped."""
    from rich.console import Console

    interactive = sys.stdout.isatty()
    return Console(soft_wrap=False, width=None if interactive else 200, highlight=interactive)


def say(message: str) -> None:
    """A sentence of human output, on stdout (plain text: nothing in it is read as markup)."""
    from rich.text import Text

    stdout_console().print(Text(printable(message)), soft_wrap=True)


def note(message: str) -> None:
    """A remark for the person at the terminal: on stderr, so stdout stays the data."""
    print(printable(message), file=sys.stderr)


def parse_if_match(value: str | None) -> str | int | None:
    """`--if-match`: a revision number or an ETag as given."""
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def collect_pages(
    fetch: Callable[[str | None], Any], cursor: str | None, all_pages: bool
) -> tuple[list[Any], str | None]:
    """The items (as the API sent them) of the page at `cursor`, or of it and every page after it with `all_pages`,
    and the cursor of the page after the last one read (None at the end). `fetch(cursor)` reads one page."""
    items: list[Any] = []
    while True:
        page = fetch(cursor)
        items.extend(item.raw for item in page.items)
        cursor = page.next_cursor
        if cursor is None or not all_pages:
            return items, cursor
