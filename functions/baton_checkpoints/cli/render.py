"""Human-readable output: key/value lines for one thing, rich tables for lists, the state as pretty JSON.

Everything a user or the server chose (subjects, states, descriptions) is printed as `Text`, never as rich markup,
so a subject named `[bold]x` prints as written, and through `printable`, so control characters it holds (ESC, BEL)
show as escapes instead of driving the terminal. Rich drops colours by itself when stdout is not a terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from baton_checkpoints.cli.common import printable, stdout_console

if TYPE_CHECKING:
    from rich.console import Console

RECORD_FIELDS = (
    "checkpoint_id",
    "subject_id",
    "agent_id",
    "kind",
    "revision",
    "status",
    "format",
    "state_bytes",
    "state_hash",
    "ttl_seconds",
    "keep_revisions",
    "expires_at",
    "created_at",
    "updated_at",
)

PLAIN_STATE_BYTES = 64 * 1024
"""Above this, a state is printed without rich's JSON highlighter (it takes seconds on a megabyte)."""


def _value(value: Any) -> str:
    """A field's value on one line: strings as they are, the rest as compact JSON; control characters escaped."""
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def print_fields(
    data: Mapping[str, Any], order: Sequence[str] = (), *, skip: Iterable[str] = (), console: Console | None = None
) -> None:
    """`name  value` lines: the names of `order` first, then the others as the server sent them."""
    from rich.text import Text

    out = console or stdout_console()
    skipped = set(skip)
    names = [name for name in order if name in data] + [name for name in data if name not in order]
    width = max((len(name) for name in names if name not in skipped), default=0)
    for name in names:
        if name in skipped or data[name] is None:
            continue
        out.print(Text.assemble((name.ljust(width), "bold cyan"), "  ", _value(data[name])), soft_wrap=True)


def print_record(data: Mapping[str, Any], console: Console | None = None) -> None:
    """A checkpoint record: its fields, its lease and resources, then its state as indented JSON."""
    from rich.text import Text

    out = console or stdout_console()
    print_fields(data, RECORD_FIELDS, skip=("state", "resources", "lease", "source"), console=out)
    lease = data.get("lease")
    if isinstance(lease, Mapping):
        out.print(
            Text.assemble(
                ("lease", "bold yellow"),
                printable(f"  held by {lease.get('holder')} until {lease.get('expires_at')}"),
            ),
            soft_wrap=True,
        )
    source = data.get("source")
    if isinstance(source, Mapping) and source:
        out.print(Text.assemble(("source", "bold cyan"), "  ", _value(source)), soft_wrap=True)
    resources = data.get("resources") or []
    for resource in resources:
        out.print(
            Text.assemble(
                ("resource", "bold cyan"),
                printable(
                    f"  {resource.get('name')}  {resource.get('blob_id')}  {resource.get('size')} bytes  "
                    f"{resource.get('media_type')}"
                ),
            ),
            soft_wrap=True,
        )
    if "state" in data:
        out.print(Text("state", style="bold cyan"))
        print_state(data["state"], out)


def print_state(state: Any, console: Console | None = None) -> None:
    """A state as indented JSON: highlighted by rich on a terminal when small; otherwise plain text, because rich's
    JSON highlighter takes seconds on a large state and colours nobody sees when piped. No control character reaches
    the terminal: JSON escapes C0 itself, and `_JSON_UNSAFE` the rest."""
    from rich.json import JSON

    out = console or stdout_console()
    compact = json.dumps(state, ensure_ascii=False)
    risky = _JSON_UNSAFE.search(compact) is not None
    if out.is_terminal and not risky and len(compact.encode("utf-8")) <= PLAIN_STATE_BYTES:
        out.print(JSON(compact, indent=2), soft_wrap=True)
        return
    text = json.dumps(state, indent=2, ensure_ascii=False)
    if risky:
        text = _JSON_UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    # Straight to the console's file: even a plain `Text` costs rich seconds per megabyte (line splitting, cells),
    # and there is nothing to style. Every `print` before has already been written, so the order holds.
    out.file.write(text + "\n")
    out.file.flush()


_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff]")
"""What `json.dumps(ensure_ascii=False)` leaves raw but a terminal must not get: DEL, C1 controls, lone surrogates
(it escapes C0 itself). Replaced by their `\\uXXXX` escapes, the text stays the same JSON."""


WHOLE_FIELDS = frozenset({"checkpoint_id", "key_id", "revision", "state_hash"})
"""Columns never cut or folded, whatever the width: ids are copied from tables into the next command."""
NARROWING = ("lease", "description", "minutes", "state_bytes", "agent_id", "tenant_id", "state_hash", "expires_at")
"""What a table gives up, in this order, while it is wider than the terminal: a column (a note on stderr names it;
`--json` has every field), or, at `minutes`, the seconds of its times (`2026-12-03 11:36`, UTC)."""


def print_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    title: str | None = None,
    empty: str = "Nothing found.",
    console: Console | None = None,
    narrowing: Sequence[str] = NARROWING,
) -> None:
    """A rich table of `rows`, one column per `(field, heading)`; `empty` when there are no rows.

    It fits the console's width (80 columns included) with its ids whole (`WHOLE_FIELDS`): while it cannot fit even
    with its other cells wrapped between words, it gives up what `NARROWING` lists, in order, and says which columns
    it left out on stderr.
    """
    from rich.text import Text

    out = console or stdout_console()
    if not rows:
        out.print(Text(empty, style="dim"))
        return
    if title is not None:
        # A line of its own, as Text: a string title is parsed as markup (a subject `x[/]` crashed it), and a
        # table's title wraps at the table's width (a long subject broke over lines).
        out.print(Text(printable(title), style="italic"), soft_wrap=True)
    shown, minutes = list(columns), False
    dropped: list[str] = []
    table = _table(rows, shown, minutes)
    for step in narrowing:
        if _width(out, table) <= out.width:
            break
        if step == "minutes":
            minutes = True
        elif any(field == step for field, _ in shown):
            dropped += [heading for field, heading in shown if field == step]
            shown = [(field, heading) for field, heading in shown if field != step]
        else:
            continue
        table = _table(rows, shown, minutes)
    out.print(table)
    if dropped:
        from baton_checkpoints.cli.common import note

        note(f"Not shown at {out.width} columns: {', '.join(dropped)} (a wider terminal or --json shows them).")


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], minutes: bool) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # No outer border and no lines between columns: at 80 columns every character goes to the cells.
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for name, heading in columns:
        if name in WHOLE_FIELDS:
            table.add_column(heading, no_wrap=True, overflow="ignore")
        else:
            table.add_column(heading, overflow="fold")
    for row in rows:
        table.add_row(*(Text(_minutes(cell) if minutes else cell) for cell in (_cell(row, n) for n, _ in columns)))
    return table


_TIME = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d):\d\d(?:\.\d+)?Z")


def _minutes(text: str) -> str:
    """`text` with its times to the minute: `2026-12-03T11:36:00.123Z` as `2026-12-03 11:36`."""
    return _TIME.sub(r"\1 \2", text)


def _width(console: Console, table: Any) -> int:
    """The least width `table` takes with its cells wrapped between words (ids never), however wide `console` is."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(100_000), table).minimum


def _cell(row: Mapping[str, Any], name: str) -> str:
    return printable(_cell_text(row, name))


def _cell_text(row: Mapping[str, Any], name: str) -> str:
    if name == "lease":
        lease = row.get("lease")
        return f"{lease.get('holder')} until {lease.get('expires_at')}" if isinstance(lease, Mapping) else ""
    value = row.get(name)
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return str(value)


SUMMARY_COLUMNS = (
    ("checkpoint_id", "checkpoint_id"),
    ("agent_id", "agent"),
    ("kind", "kind"),
    ("revision", "rev"),
    ("status", "status"),
    ("state_bytes", "bytes"),
    ("lease", "lease"),
    ("updated_at", "updated_at"),
)
REVISION_COLUMNS = (
    ("revision", "rev"),
    ("status", "status"),
    ("state_bytes", "bytes"),
    ("state_hash", "state_hash"),
    ("updated_at", "updated_at"),
)
KEY_NARROWING = ("description", "minutes", "expires_at", "tenant_id", "agent_id")
"""A key table keeps whose key it is longest (`NARROWING` for others)."""
KEY_COLUMNS = (
    ("key_id", "key_id"),
    ("tenant_id", "tenant"),
    ("agent_id", "agent"),
    ("scopes", "scopes"),
    ("expires_at", "expires_at"),
    ("description", "description"),
)
