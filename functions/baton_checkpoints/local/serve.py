"""`baton serve`: the whole API on this machine, on embedded moto or any AWS-compatible endpoint; its tables
optionally on a DynamoDB endpoint of their own (DynamoDB Local, AWS's own engine), S3 staying where it was."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from baton_checkpoints.domain.access import issue_key, new_secret
from baton_checkpoints.domain.clock import format_ms, now_ms

if TYPE_CHECKING:
    from baton_checkpoints.local.stream import StreamReaper

DEV_TENANT = "dev"
DEV_AGENT = "operator"
DEV_SCOPES = frozenset({"*", "tenants:manage"})
DEFAULT_TABLE = "baton-local"
DEFAULT_BUCKET = "baton-local"
DEV_KEY_LIFETIME_SECONDS = 12 * 3600
"""How long the development key lives in a table other than embedded moto's (restarting renews it)."""
STOP_GRACE_SECONDS = 5.0
"""How long requests in flight at Ctrl-C may take to finish, before and after embedded moto refuses their calls."""
_DEV_KEY_PATTERN = re.compile(r"[\x21-\x7e]{16,200}\Z")
EVENT_BUS: Final = "baton-local-changes"
"""The change events' bus `baton serve` creates on its endpoint (the deployed stack's is `baton-<stage>-changes`)."""
LOCAL_CREDENTIAL = "batonlocal"
"""The access key id and secret given to a local endpoint when there are no others: letters and digits only, since
DynamoDB Local (2.0 and later) refuses an access key id holding anything else ("The Access Key ID or security token
is invalid"), where moto takes any."""


@dataclass(frozen=True)
class ServeOptions:
    """What `baton serve` was asked for."""

    host: str = "127.0.0.1"
    port: int = 8787
    aws_endpoint: str | None = None
    dynamodb_endpoint: str | None = None
    """DynamoDB's endpoint (the table and its stream), when it is not `aws_endpoint`'s (nor embedded moto's)."""
    table: str = DEFAULT_TABLE
    bucket: str = DEFAULT_BUCKET
    region: str = "us-east-1"
    dev_key: str | None = None
    containers: int = 4
    reaper: bool = True
    """Consume the table's stream with the reaper function, as the deployed stack does (`--no-reaper`: not)."""
    events: str | None = None
    """The change events the reaper publishes (to `EVENT_BUS` on the endpoint, always) are also printed (`print`)
    or POSTed to an http(s) URL as a JSON array per batch (`--events`)."""


def check_dev_key(value: str) -> str:
    """A fixed development key must be 16 to 200 printable characters without spaces."""
    if not _DEV_KEY_PATTERN.match(value):
        raise ValueError("--dev-key must be 16 to 200 printable characters without spaces")
    return value


def _prepare_environment(options: ServeOptions, endpoint: str, embedded: bool) -> None:
    """The containers' configuration, given as Lambda gives it: in the environment, which they inherit."""
    os.environ["BATON_TABLE_NAME"] = options.table
    os.environ["BATON_BUCKET_NAME"] = options.bucket
    os.environ["BATON_AWS_ENDPOINT_URL"] = endpoint
    os.environ["BATON_ORIGIN_SCHEME"] = "http"  # clients call http://<host>: OAuth's issuer and resource say so
    if options.dynamodb_endpoint is None:
        # Not from the shell either: the containers' DynamoDB is the one this server created the table on.
        os.environ.pop("BATON_DYNAMODB_ENDPOINT_URL", None)
    else:
        os.environ["BATON_DYNAMODB_ENDPOINT_URL"] = options.dynamodb_endpoint
    os.environ["BATON_EVENT_BUS_NAME"] = EVENT_BUS
    if options.events is None:
        os.environ.pop("BATON_EVENTS_ECHO", None)
    else:
        os.environ["BATON_EVENTS_ECHO"] = options.events
    # A developer reads usage as it happens: each request's counts are written at its end (unless told otherwise).
    os.environ.setdefault("BATON_USAGE_FLUSH_REQUESTS", "1")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "baton")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Baton")
    os.environ["AWS_DEFAULT_REGION"] = os.environ.get("AWS_REGION", options.region)
    if embedded:
        # moto (and DynamoDB Local) accept any credentials of this form; never let a developer's real ones reach them
        # (or anything else).
        os.environ["AWS_ACCESS_KEY_ID"] = LOCAL_CREDENTIAL
        os.environ["AWS_SECRET_ACCESS_KEY"] = LOCAL_CREDENTIAL
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.pop("AWS_PROFILE", None)
    else:
        import boto3

        if boto3.session.Session().get_credentials() is None:
            os.environ["AWS_ACCESS_KEY_ID"] = LOCAL_CREDENTIAL
            os.environ["AWS_SECRET_ACCESS_KEY"] = LOCAL_CREDENTIAL


def _ensure_event_bus(options: ServeOptions, endpoint: str, out: TextIO) -> str:
    """Create the change events' bus on the endpoint (embedded moto's, or the one given) if it is not there; what
    the reaper does with the events, for the banner."""
    if not options.reaper:
        return "none (--no-reaper publishes nothing)"
    from baton_checkpoints.store.aws import events_client

    client = events_client(endpoint)
    try:
        client.describe_event_bus(Name=EVENT_BUS)
    except Exception:
        try:
            client.create_event_bus(Name=EVENT_BUS)
        except Exception as exc:  # an endpoint without EventBridge (DynamoDB Local): echo only, if asked
            os.environ.pop("BATON_EVENT_BUS_NAME", None)
            print(f"baton serve: no event bus at {endpoint} ({type(exc).__name__})", file=out)
            return {None: "none", "print": "printed"}.get(options.events, f"posted to {options.events}")
    echoed = {None: "", "print": "; printed here"}.get(options.events, f"; posted to {options.events}")
    return f"bus {EVENT_BUS} on {endpoint}{echoed}"


def _start_reaper(
    options: ServeOptions, client: Any, endpoint: str, bucket: str | None, out: TextIO
) -> tuple[StreamReaper | None, str]:
    """The reaper's worker on the table's stream, read at `endpoint` (the table's), or None when it does not run;
    and what the banner says of it.

    Without a stream (a table created without one, DynamoDB Local without streams) or a bucket (the reaper keeps the
    bucket in step with the table) the server runs without it, saying so once.
    """
    if not options.reaper:
        return None, "off (--no-reaper): dropped states, blobs and revisions stay"
    if bucket is None:
        return None, "off (no bucket)"
    from baton_checkpoints.local.stream import NoStream, start_reaper

    try:
        worker = start_reaper(client, endpoint, options.table)
    except NoStream as exc:
        print(f"baton serve: no reaper: {exc}; dropped states, blobs and revisions stay", file=out)
        return None, "off (no stream)"
    return worker, "on (the table's stream, handed to baton_checkpoints.handlers.reaper as on AWS)"


def serve(options: ServeOptions, out: TextIO = sys.stdout) -> int:
    """Run until Ctrl-C (or SIGTERM), then end the process (status 0, or 1 when requests in flight did not finish);
    returns the exit status only when it does not start serving."""
    from baton_checkpoints.local.gateway import Gateway, make_server
    from baton_checkpoints.local.moto_server import LocalMotoServer

    secret = options.dev_key or os.environ.get("BATON_DEV_KEY") or new_secret()
    try:
        check_dev_key(secret)
    except ValueError as exc:
        print(f"baton serve: {exc} (from --dev-key or BATON_DEV_KEY)", file=sys.stderr)
        return 2
    moto = None
    if options.aws_endpoint is None:
        moto = LocalMotoServer()
        endpoint = moto.start()
    else:
        endpoint = options.aws_endpoint
    _prepare_environment(options, endpoint, embedded=moto is not None)
    from baton_checkpoints.settings import SettingsError, load_settings

    try:
        # What every request's container will read: refused here, before serving, not as a 500 per request.
        load_settings(dict(os.environ))
    except SettingsError as exc:
        print(f"baton serve: {exc} (from --table, --bucket or the environment)", file=sys.stderr)
        if moto is not None:
            moto.stop()
        return 2

    from baton_checkpoints.store.aws import dynamodb_client, s3_client
    from baton_checkpoints.store.keys import KeyStore
    from baton_checkpoints.store.schema import ensure_bucket, ensure_table

    # The table's endpoint; its stream is served beside it (DynamoDB Local serves DynamoDB Streams on its own).
    table_endpoint = options.dynamodb_endpoint or endpoint
    client = dynamodb_client(table_endpoint)
    ensure_table(client, options.table)
    # The bucket is on the same endpoint: embedded moto answers S3 on its loopback port too, so the presigned URLs
    # the API hands out work for any client on this machine (curl, a browser, another process).
    bucket: str | None = options.bucket
    try:
        ensure_bucket(s3_client(endpoint), options.bucket)
    except Exception as exc:  # an endpoint without S3 (DynamoDB Local): serve without a bucket
        if moto is not None:
            raise
        print(f"baton serve: no bucket at {endpoint} ({exc}); states must fit in an item, blobs are off", file=out)
        os.environ.pop("BATON_BUCKET_NAME", None)
        bucket = None
    events = _ensure_event_bus(options, endpoint, out)
    reaper, reaping = _start_reaper(options, client, table_endpoint, bucket, out)
    created = now_ms()
    # On embedded moto the key dies with the process; in a table that outlives `baton serve` (another endpoint's,
    # DynamoDB Local's) it must not stay an operator key forever.
    table_embedded = moto is not None and options.dynamodb_endpoint is None
    expires = None if table_embedded else created + DEV_KEY_LIFETIME_SECONDS * 1000
    dev_key = issue_key(
        DEV_TENANT,
        DEV_AGENT,
        DEV_SCOPES,
        created,
        expires_ms=expires,
        description="baton serve development key",
        secret=secret,
    )
    KeyStore(client, options.table).put(dev_key.record, overwrite=True)

    gateway = Gateway("baton_checkpoints.handlers.api:handler", containers=options.containers)
    gateway.warm(options.containers)
    server = make_server(gateway, options.host, options.port)
    host, port = server.server_address[:2]
    url = f"http://{host!s}:{port}"

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and SIGTERM stop it, whatever it inherited: a process started in the background by a script (`cmd &`
    # in a shell without job control: CI runners, `nohup`) begins with SIGINT ignored, and Python then leaves it
    # ignored, so Ctrl-C did nothing and only SIGKILL ended the server.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(f"Baton is serving on {url}", file=out)
    print(
        f"AWS endpoint: {endpoint}{' (embedded moto)' if moto else ''}; table: {options.table}; "
        f"bucket: {bucket or 'none'}",
        file=out,
    )
    if options.dynamodb_endpoint is not None:
        print(f"DynamoDB endpoint: {options.dynamodb_endpoint} (the table and its stream)", file=out)
    print(f"Change events: {events}", file=out)
    print(f"Reaper: {reaping}", file=out)
    lifetime = "" if expires is None else f"; expires {format_ms(expires)}"
    print(f"Development key (tenant {DEV_TENANT}, agent {DEV_AGENT}, scopes * tenants:manage{lifetime}):", file=out)
    print(f"  export BATON_URL={url}", file=out)
    print(f"  export BATON_API_KEY={secret}", file=out)
    print(
        '  curl -s "$BATON_URL/v1/checkpoints" -H "Authorization: Bearer $BATON_API_KEY" '
        "-H 'Content-Type: application/json' "
        '-d \'{"subject_id":"demo","kind":"task_state","state":{"step":1}}\'',
        file=out,
    )
    print(f"Console: {url}/console (sign in with the key above)", file=out)
    print("Press Ctrl-C to stop.", file=out, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        finished = _shut_down(server, reaper, gateway, moto, out)
        print("Baton stopped.", file=out, flush=True)
    # End here, whether or not requests were left in flight. With some left, the pool's threads would hold the
    # interpreter's exit for as long as they run. Without, its exit would only tear down every module loaded
    # (moto's, botocore's): about half a second of CPU, which a loaded machine stretches to seconds, for a server
    # already stopped (its containers ended, its threads stopped or abandoned, its output flushed).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if finished else 1)


def _shut_down(server: Any, reaper: StreamReaper | None, gateway: Any, moto: Any, out: TextIO) -> bool:
    """Stop everything, each step bounded, whatever the reaper or a request is doing: within `STOP_SECONDS` of the
    reaper, then `STOP_GRACE_SECONDS` for requests in flight, then (embedded moto) their calls still waiting for
    moto are refused, and `STOP_GRACE_SECONDS` more. False when requests in flight did not finish even then.

    Ctrl-C (or SIGTERM) again meanwhile is ignored: an interrupt in the middle of a step would skip the rest, and the
    interpreter's exit would then wait without bound for the containers' pool.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if reaper is not None:
        reaper.request_stop()
    server.server_close()
    if reaper is not None and not reaper.stop():
        print(
            "baton serve: the reaper did not stop in time; its batch was abandoned (the next start reads it again)",
            file=out,
            flush=True,
        )
        # The abandoned reaper thread says nothing more (its calls now fail): the serve process has no other logger.
        logging.disable(logging.CRITICAL)
    closing = threading.Thread(target=gateway.close, name="gateway-close", daemon=True)
    closing.start()
    closing.join(STOP_GRACE_SECONDS)
    if moto is not None:
        moto.stop()  # calls still waiting for moto are answered 503 at once: the requests making them end
    closing.join(STOP_GRACE_SECONDS)
    if closing.is_alive():
        print("baton serve: requests in flight did not finish in time; stopping without them", file=out, flush=True)
        return False
    return True
