"""`baton keys create`: write a key record straight into a table, with the operator's own AWS credentials.

This is how the first operator key of a deployment is made (no key exists yet to call `POST /v1/keys` with).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from baton.domain.access import SCOPES, issue_key, key_validity
from baton.domain.clock import now_ms
from baton.domain.errors import ValidationFailed
from baton.domain.models import CreateKeyRequest


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `baton keys ...`."""
    keys = commands.add_parser("keys", help="manage API keys directly in a table (operator credentials)")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a key and print its secret (shown once)")
    create.add_argument("--table", required=True, help="the table name (the stack's TableName output)")
    create.add_argument("--tenant", required=True, help="tenant id, e.g. acme")
    create.add_argument("--agent", required=True, help="agent id, e.g. operator")
    create.add_argument(
        "--scopes",
        default="*,tenants:manage",
        help=f"comma-separated scopes (default: *,tenants:manage); any of {', '.join(SCOPES)}",
    )
    create.add_argument("--description", help="what the key is for")
    create.add_argument("--expires-at", help="RFC 3339 time after which the key stops working")
    create.add_argument("--region", help="AWS region of the table (default: your AWS configuration's)")
    create.add_argument("--aws-endpoint", metavar="URL", help="an AWS-compatible endpoint instead of AWS")


def create_key(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Validate the request as the API would, write the record, print the key as the API answers it (JSON)."""
    from pydantic import ValidationError

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
    import boto3

    from baton.api.schemas import CreatedKey
    from baton.store.keys import KeyStore

    client = boto3.session.Session().client("dynamodb", region_name=args.region, endpoint_url=args.aws_endpoint)
    issued = issue_key(
        request.tenant_id or args.tenant,
        request.agent_id,
        request.scopes,
        now_ms(),
        expires_ms=expires,
        description=request.description,
    )
    KeyStore(client, args.table).put(issued.record)
    created = CreatedKey.of(issued.record, secret=issued.secret)
    print(json.dumps(created.model_dump(), indent=2), file=out)
    return 0
