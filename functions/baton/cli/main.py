"""`baton`: run the API locally (`baton serve`), create keys in a table (`baton keys create`)."""

from __future__ import annotations

import argparse
import sys

from baton import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="baton", description="Baton: a checkpoint API for AI agents.")
    parser.add_argument("--version", action="version", version=f"baton {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the whole API locally on embedded moto")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8787, help="port to listen on; 0 picks a free one (default 8787)")
    serve.add_argument(
        "--aws-endpoint",
        metavar="URL",
        help="use this AWS-compatible endpoint (a moto server, DynamoDB Local) instead of embedded moto",
    )
    serve.add_argument("--table", default="baton-local", help="table name (created if missing; default baton-local)")
    serve.add_argument(
        "--bucket", default="baton-local", help="blob bucket name (created if missing; default baton-local)"
    )
    serve.add_argument("--region", default="us-east-1", help="AWS region when AWS_REGION is unset (default us-east-1)")
    serve.add_argument(
        "--dev-key",
        metavar="VALUE",
        help="use this development key instead of a random one (or set BATON_DEV_KEY)",
    )
    serve.add_argument(
        "--containers",
        type=int,
        default=4,
        help="how many Lambda containers (processes) serve requests concurrently (default 4)",
    )
    from baton.cli.keys import add_commands

    add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `baton` command."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        from baton.local.serve import ServeOptions, check_dev_key, serve

        if args.dev_key is not None:
            try:
                check_dev_key(args.dev_key)
            except ValueError as exc:
                print(f"baton serve: {exc}", file=sys.stderr)
                return 2
        return serve(
            ServeOptions(
                host=args.host,
                port=args.port,
                aws_endpoint=args.aws_endpoint,
                table=args.table,
                bucket=args.bucket,
                region=args.region,
                dev_key=args.dev_key,
                containers=max(1, args.containers),
            )
        )
    if args.command == "keys" and args.action == "create":
        from baton.cli.keys import create_key

        return create_key(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
