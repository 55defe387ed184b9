"""`baton blob upload | download | info`: files streamed through the SDK, with rich's progress bar on a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton_checkpoints.cli.common import (
    EXIT_ERROR,
    ApiKeyOption,
    JsonOption,
    UrlOption,
    emit_json,
    fail_usage,
    printable,
    say,
    session,
)

if TYPE_CHECKING:
    from rich.console import Console

blob_app = typer.Typer(
    name="blob",
    help="Upload and download blobs: files too big for a state, attached to a save with --resource.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def progress_wanted(as_json: bool) -> bool:
    """A progress bar only for a person: stdout on a terminal, and no `--json`."""
    return not as_json and sys.stdout.isatty()


@contextmanager
def transfer_progress(
    description: str, *, enabled: bool, console: Console | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """rich's transfer bar (bytes, speed, time left) on stderr, or None when it is not wanted. Yields the SDK's
    `progress(done_bytes, total_bytes)` callback."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
    ) as bar:
        task = bar.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


@contextmanager
def file_errors(path: Path) -> Iterator[None]:
    """A failure of the local file (disk full, permission, removed meanwhile) as one stderr line and exit 1."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or type(error).__name__
        print(printable(f"baton: cannot use {str(path)!r}: {reason}"), file=sys.stderr)
        raise typer.Exit(EXIT_ERROR) from None


UPLOAD_EPILOG = """\
[bold]Examples[/bold]

  baton blob upload build.log

  BLOB=$(baton blob upload model.bin --media-type application/octet-stream --json | jq -r .blob_id)

  baton save ticket-42 '{"step": 4}' --kind task_state --resource model.bin=$BLOB
"""


@blob_app.command("upload", epilog=UPLOAD_EPILOG)
def upload(
    path: Annotated[Path, typer.Argument(help="The file to upload (streamed; up to 5 GiB).")],
    media_type: Annotated[str | None, typer.Option(help="Its media type (default: guessed from the name).")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Upload a file as a blob: hash it, declare it, PUT it to its presigned URL. Prints the blob_id."""
    if not path.is_file() or not os.access(path, os.R_OK):
        fail_usage(f"{str(path)!r} is not a readable file.")
    bar = transfer_progress(f"upload {path.name}", enabled=progress_wanted(as_json))
    with file_errors(path), session(url, api_key) as baton, bar as progress:
        blob = baton.upload_blob(path, media_type=media_type, progress=progress)
    if as_json:
        emit_json(blob.raw)
        return
    from baton_checkpoints.cli.render import print_fields

    say(f"Uploaded {path} as {blob.blob_id}; attach it with --resource {path.name}={blob.blob_id}.")
    print_fields(blob.raw, ("blob_id", "sha256", "size", "media_type", "created_at"), skip=("upload",))


DOWNLOAD_EPILOG = """\
[bold]Examples[/bold]

  baton blob download blob_0123... build.log

  baton get ckpt_6d41... --json | jq -r '.resources[0].blob_id' | xargs -I{} baton blob download {} out.bin
"""


@blob_app.command("download", epilog=DOWNLOAD_EPILOG)
def download(
    blob_id: Annotated[str, typer.Argument(help="The blob_id.")],
    path: Annotated[Path, typer.Argument(help="Where to write it (it appears only once its SHA-256 is checked).")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Download a blob to a file, checking its SHA-256."""
    if path.is_dir():
        fail_usage(f"{str(path)!r} is a directory: give the file's path.")
    folder = path.parent
    if not folder.is_dir():
        fail_usage(f"the folder {str(folder)!r} does not exist: create it first, or give another path.")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail_usage(f"the folder {str(folder)!r} is not writable.")
    with file_errors(path), session(url, api_key) as baton:
        info = baton.get_blob(blob_id)
        with transfer_progress(f"download {path.name}", enabled=progress_wanted(as_json)) as progress:
            baton.download_blob(info, path, progress=progress)
    if as_json:
        emit_json(info.raw)
        return
    say(f"Downloaded {info.blob_id} ({info.size} bytes, sha256 {info.sha256}) to {path}.")


INFO_EPILOG = """\
[bold]Examples[/bold]

  baton blob info blob_0123...
"""


@blob_app.command("info", epilog=INFO_EPILOG)
def info(
    blob_id: Annotated[str, typer.Argument(help="The blob_id.")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a blob's metadata and a download URL valid 15 minutes."""
    with session(url, api_key) as baton:
        found = baton.get_blob(blob_id)
    if as_json:
        emit_json(found.raw)
        return
    from baton_checkpoints.cli.render import print_fields

    print_fields(found.raw, ("blob_id", "sha256", "size", "media_type", "created_at"))
