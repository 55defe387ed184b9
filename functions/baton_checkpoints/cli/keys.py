"""`baton keys create | list | revoke`: API keys over HTTP (`POST/GET/DELETE /v1/keys`).

`baton keys create --table ...` is the other way in: it writes a key record straight into a table with the
operator's own AWS credentials. That is how the first operator key of a deployment is made (no key exists yet to
call `POST /v1/keys` with). Only that form imports the server's code (pydantic models, botocore), and only when it runs.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Protocol, TextIO, cast

import typer

from baton_checkpoints.cli import require
from baton_checkpoints.cli.common import (
    AllPagesOption,
    ApiKeyOption,
    CursorOption,
    JsonOption,
    UrlOption,
    YesOption,
    collect_pages,
    confirm,
    emit_json,
    fail_usage,
    say,
    session,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from baton_checkpoints.domain.access import KeyRecord

SERVER_MODULES = (
    "pydantic",
    "botocore",
    "rfc8785",
    "aws_lambda_powertools",
    "orjson",
    "cachetools",
    "jsonschema",
    "msgspec",
)
"""What `keys create --table` imports of the server extra (its validation, the key store)."""
OPERATOR_SCOPES = "*,tenants:manage"
TABLE_FORM = "Direct to a table (--table: the first operator key, with AWS credentials)"

keys_app = typer.Typer(
    name="keys",
    help="Issue, list and revoke API keys.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


class TableKeyRequest(Protocol):
    """What `create_key` reads: the options of `keys create --table`."""

    table: str
    tenant: str
    agent: str
    scopes: str
    description: str | None
    expires_at: str | None
    region: str | None
    aws_endpoint: str | None


def create_key(args: TableKeyRequest, out: TextIO | None = None) -> int:
    """Validate the request as the API would, write the record, print the key as the API answers it (JSON) on
    `out` (default: the current stdout)."""
    require("server", "baton keys create --table", *SERVER_MODULES)
    from pydantic import ValidationError

    from baton_checkpoints.domain.access import issue_key, key_validity
    from baton_checkpoints.domain.clock import now_ms
    from baton_checkpoints.domain.errors import ValidationFailed
    from baton_checkpoints.domain.models import CreateKeyRequest

    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    try:
        request = CreateKeyRequest.model_validate(
            {
                "agent_id": args.agent,
                "tenant_id": args.tenant,
                "scopes": scopes,
                "description": args.description,
                "expires_at": args.expires_at,
            }
        )
        _, expires = key_validity(None, request.expires_at, now_ms())
    except ValidationError as exc:
        problems = "; ".join(f"{'/'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        print(f"baton keys create: {problems}", file=sys.stderr)
        return 2
    except ValidationFailed as exc:
        print(f"baton keys create: {exc.message}", file=sys.stderr)
        return 2
    from baton_checkpoints.api.schemas_keys import CreatedKey

    issued = issue_key(
        request.tenant_id or args.tenant,
        request.agent_id,
        request.scopes,
        now_ms(),
        expires_ms=expires,
        description=request.description,
    )
    failure = _write_key(args, issued.record)
    if failure is not None:
        print(f"baton keys create: {failure}", file=sys.stderr)
        return 1
    created = CreatedKey.of(issued.record, secret=issued.secret)
    print(json.dumps(created.model_dump(), indent=2), file=out or sys.stdout)
    return 0


def _write_key(args: TableKeyRequest, record: KeyRecord) -> str | None:
    """Store `record` in the table with the caller's AWS credentials; None, or what went wrong and what to do."""
    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from baton_checkpoints.domain.errors import Unavailable
    from baton_checkpoints.store.keys import KeyStore

    try:
        session = botocore.session.Session()  # credentials and profile as the AWS CLI reads them
        client = session.create_client("dynamodb", region_name=args.region, endpoint_url=args.aws_endpoint)
        KeyStore(cast("DynamoDBClient", client), args.table).put(record)
    except NoRegionError:
        return "no AWS region: pass --region (the stack's region) or set AWS_REGION."
    except NoCredentialsError:
        return (
            "no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as for the AWS CLI "
            "(they need dynamodb:PutItem on the table)."
        )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code == "ResourceNotFoundException":
            region = client.meta.region_name
            return f"no table {args.table!r} in {region}: use the stack's TableName output and its region (--region)."
        return f"AWS refused the write: {code}: {message}"
    except Unavailable:  # the store's name for a connection that failed, or DynamoDB throttling, after retries
        return "AWS could not be reached, or throttled the write: check --region and the network, then try again."
    except BotoCoreError as exc:
        return f"AWS could not be reached: {type(exc).__name__}: {exc}"
    return None


@dataclass
class TableRequest:
    """The options of `keys create --table`, as `create_key` reads them."""

    table: str
    tenant: str
    agent: str
    scopes: str
    description: str | None
    expires_at: str | None
    region: str | None
    aws_endpoint: str | None


CREATE_EPILOG = """\
[bold]Examples[/bold]

  baton keys create --agent planner --scopes checkpoints:read,checkpoints:write

  baton keys create --tenant customer-42 --agent planner --scopes '*' --expires-at 2027-01-01T00:00:00Z --json

  The first operator key of a deployment, with your AWS credentials (prints JSON):

  baton keys create --table <TableName output> --tenant mycompany --agent operator --region eu-west-1
"""


@keys_app.command("create", epilog=CREATE_EPILOG)
def create(
    agent: Annotated[str, typer.Option("--agent", "-a", help="The key's agent_id, e.g. planner.")],
    scopes: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated scopes, e.g. checkpoints:read,checkpoints:write (with --table, default "
            f"{OPERATOR_SCOPES})."
        ),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="The tenant_id (default: the caller's; required with --table).")
    ] = None,
    description: Annotated[str | None, typer.Option(help="What the key is for.")] = None,
    not_before: Annotated[str | None, typer.Option(help="RFC 3339 time before which the key does not work.")] = None,
    expires_at: Annotated[str | None, typer.Option(help="RFC 3339 time after which the key stops working.")] = None,
    table: Annotated[
        str | None,
        typer.Option(
            help="Write straight into this table (the stack's TableName output) instead of calling the API.",
            rich_help_panel=TABLE_FORM,
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(help="With --table: the AWS region (default: your configuration's).", rich_help_panel=TABLE_FORM),
    ] = None,
    aws_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="With --table: an AWS-compatible endpoint instead of AWS.", rich_help_panel=TABLE_FORM
        ),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Issue a key and print its secret (shown this once)."""
    if table is not None:
        if tenant is None:
            fail_usage("keys create --table needs --tenant.")
        if not_before is not None:
            fail_usage("keys create --table does not take --not-before.")
        request = TableRequest(
            table=table,
            tenant=tenant,
            agent=agent,
            scopes=scopes or OPERATOR_SCOPES,
            description=description,
            expires_at=expires_at,
            region=region,
            aws_endpoint=aws_endpoint,
        )
        raise typer.Exit(create_key(request))
    if region is not None or aws_endpoint is not None:
        fail_usage("--region and --aws-endpoint go with --table.")
    if not scopes:
        fail_usage("keys create needs --scopes (e.g. checkpoints:read,checkpoints:write).")
    wanted = [s.strip() for s in scopes.split(",") if s.strip()]
    with session(url, api_key) as baton:
        created = baton.create_key(
            agent, wanted, tenant_id=tenant, not_before=not_before, expires_at=expires_at, description=description
        )
    if as_json:
        emit_json(created.raw)
        return
    from baton_checkpoints.cli.render import print_fields

    say(f"Created key {created.key_id}. Its secret is shown this once:")
    print_fields(created.raw, ("secret", "key_id", "tenant_id", "agent_id", "scopes"))


LIST_EPILOG = """\
[bold]Examples[/bold]

  baton keys list

  baton keys list --tenant customer-42 --agent planner --all --json
"""


@keys_app.command("list", epilog=LIST_EPILOG)
def list_keys(
    tenant: Annotated[str | None, typer.Option(help="Another tenant's keys (needs tenants:manage).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's keys.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, max=200, help="Keys per page (1-200).")] = None,
    cursor: CursorOption = None,
    all_pages: AllPagesOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List live keys (oldest first; never their secrets)."""
    with session(url, api_key) as baton:
        items, cursor = collect_pages(
            lambda at: baton.list_keys(tenant_id=tenant, agent_id=agent, limit=limit, cursor=at), cursor, all_pages
        )
    if as_json:
        emit_json(items)
    else:
        from baton_checkpoints.cli.render import KEY_COLUMNS, KEY_NARROWING, print_table

        print_table(items, KEY_COLUMNS, title="API keys", empty="No keys.", narrowing=KEY_NARROWING)
    if cursor is not None:
        print(f"More on the next page: --cursor {cursor} (or --all).", file=sys.stderr)


REVOKE_EPILOG = """\
[bold]Examples[/bold]

  baton keys revoke key_0123...

  baton keys revoke key_0123... --tenant customer-42 --json

  On a terminal it asks first; --yes does not ask.
"""


WHOAMI_EPILOG = """\
[bold]Examples[/bold]

  baton whoami

  baton whoami --json | jq -r .agent_id
"""


def whoami(url: UrlOption = None, api_key: ApiKeyOption = None, as_json: JsonOption = False) -> None:
    """The key in use: its tenant, agent, scopes and expiry (any valid key may ask)."""
    with session(url, api_key) as baton:
        identity = baton.whoami()
    if as_json:
        emit_json(identity.raw)
        return
    from baton_checkpoints.cli.render import print_fields

    print_fields(identity.raw, ("key_id", "tenant_id", "agent_id", "scopes", "effective_scopes", "expires_at"))


@keys_app.command("revoke", epilog=REVOKE_EPILOG)
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key_id (from keys list).")],
    tenant: Annotated[str | None, typer.Option(help="The key's tenant, when not the caller's.")] = None,
    yes: YesOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key (checkpoint routes stop accepting it within 60 s, key management at once)."""
    confirm(f"Revoke {key_id}? Whatever uses it stops working.", yes)
    with session(url, api_key) as baton:
        revoked = baton.revoke_key(key_id, tenant_id=tenant)
    if as_json:
        emit_json(revoked.raw)
        return
    say(f"Revoked {revoked.key_id}.")
