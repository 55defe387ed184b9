"""`baton audit verify`: read a tenant's whole audit trail over HTTP (`GET /v1/audit`, page by page) and check its
hash chain (`client/audit.py`): exit 0 when it is whole, 5 when an event was removed, altered or inserted."""

from __future__ import annotations

from typing import Annotated

import typer

from baton_checkpoints.cli.common import EXIT_BROKEN_CHAIN, ApiKeyOption, JsonOption, UrlOption, emit_json, say, session

audit_app = typer.Typer(
    name="audit",
    help="The tenant's audit trail: management events in a hash chain.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)

VERIFY_EPILOG = """\
[bold]Examples[/bold]

  baton audit verify

  baton audit verify --json

  baton audit verify --tenant customer-42

  Needs a key with audit:read (and tenants:manage for --tenant). Reads every kept event (100 a request) and the
  head, recomputes each event's hash, and checks that each names the one before it and that the newest is the
  head. Exit 0: whole; 5: an event was removed, altered or inserted (each problem on stderr).
"""


TenantOption = Annotated[
    str | None,
    typer.Option("--tenant", help="Another tenant's trail (needs a key with tenants:manage: an operator's)."),
]


@audit_app.command("verify", epilog=VERIFY_EPILOG)
def verify(
    url: UrlOption = None, api_key: ApiKeyOption = None, tenant: TenantOption = None, as_json: JsonOption = False
) -> None:
    """Check the hash chain of the key's tenant's audit trail (or, for an operator, another tenant's)."""
    from baton_checkpoints.client.audit import problems_of

    with session(url, api_key) as baton:
        tenant = tenant or baton.whoami().tenant_id
        events, head = baton.read_audit_trail(tenant_id=tenant)
    problems = problems_of(events, head)
    seqs = sorted(int(e["seq"]) for e in events)
    if as_json:
        emit_json(
            {"tenant_id": tenant, "events": len(events), "head": head, "whole": not problems, "problems": problems}
        )
    elif not problems:
        span = f"events {seqs[0]} to {seqs[-1]}" if seqs else "no event yet"
        say(f"The audit trail of {tenant} is whole: {span}, ending at the head.")
    for problem in problems:
        typer.echo(f"baton: audit trail of {tenant}: {problem}", err=True)
    if problems:
        raise typer.Exit(EXIT_BROKEN_CHAIN)
