"""One measured client per process: Baton's api handler, or a LangGraph DynamoDB saver, driven over stdin/stdout.

`python -m bench.harness.clients <client> --endpoint URL --table NAME [--secret S] [--bucket B] [--sizes 1000,...]`
runs in the client's own environment (Baton from the repository's .venv, each saver from its bench environment:
their dependencies conflict; the repository's root on `PYTHONPATH`, `bench.paths.with_repo_path`) and answers one
JSON line per command line:

    {"cmd": "save", "key": "...", "size": 4000, "step": 1}   -> {"ok": true, "cpu_ms": ..., "detail": ...}
    {"cmd": "read", "key": "...", "size": 4000}              -> {"ok": true, "cpu_ms": ..., "detail": ...}
    {"cmd": "info"}                                           -> versions and the states' sizes and digests
    {"cmd": "quit"}

`cpu_ms` is `time.process_time()` of this process around the one call (the handler, `put`, `get_tuple`): DynamoDB
is a moto server in another process, so its time is left out, and everything this process does for the call
(routing, validation, serializing, compressing, botocore's signing and parsing) is in. Everything else (building
the state, the event, the checkpoint dict) happens before the clock starts.

Baton is driven through its public entry points only: `baton_checkpoints.handlers.api.handler` with an API Gateway
HTTP API (payload 2.0) event built from `events/`, configured by its environment variables. The savers through their
documented synchronous API. With `--bucket`, Baton spills big states to that bucket (`BATON_BUCKET_NAME`, on the
same endpoint) and the aws saver offloads checkpoints over 350 KB to it (`s3_offload_config`); the amazon saver
has no offload.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import sys
import time
from importlib import metadata
from typing import Any

from bench.harness.states import canonical_size, conversation_state
from bench.paths import REPO

SEED = 7
REGION = "us-east-1"
# A fixed timestamp in the savers' checkpoints: every repetition then stores the same bytes.
TIMESTAMP = "2026-12-01T00:00:00.000000+00:00"


def states_for(size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first and the second state of a thread: the seeded conversation, then the same with its last message
    reworded (same length): a second save over an existing checkpoint writes a state that changed."""
    first = conversation_state(target_bytes=size, seed=SEED)
    second = copy.deepcopy(first)
    last = second["messages"][-1]
    last["content"] = " ".join(reversed(last["content"].split(" ")))
    return first, second


def canonical(state: dict[str, Any]) -> bytes:
    """The state as sorted, compact UTF-8 JSON (what its size and digest are taken on)."""
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")


# -- Baton ----------------------------------------------------------------------------------------------------------


def _template(name: str) -> dict[str, Any]:
    template: dict[str, Any] = json.loads((REPO / "events" / f"{name}.json").read_text(encoding="utf-8"))
    return template


def save_body(subject: str, state: dict[str, Any]) -> str:
    """A save request body as a client sends it (ordinary `json.dumps`)."""
    body = {
        "subject_id": subject,
        "kind": "conversation",
        "state": state,
        "ttl_seconds": 86_400,
        "format": "openai.chat.v1",
        "source": {"host": "bench-host", "model": "claude-sonnet-4"},
    }
    return json.dumps(body)


def save_event(secret: str, subject: str, state: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The API Gateway HTTP API event of a plain save (no Idempotency-Key) of `state` for `subject`."""
    event = _template("save_checkpoint")
    event["headers"].pop("idempotency-key", None)
    event["headers"]["authorization"] = f"Bearer {secret}"
    event["requestContext"]["requestId"] = request_id
    event["body"] = save_body(subject, state)
    return event


def lookup_event(secret: str, subject: str, request_id: str) -> dict[str, Any]:
    """The event of the lookup of the subject's conversation checkpoint (its latest state)."""
    event = _template("lookup_checkpoint")
    event["headers"]["authorization"] = f"Bearer {secret}"
    event["requestContext"]["requestId"] = request_id
    event["rawQueryString"] = f"subject_id={subject}&kind=conversation"
    event["queryStringParameters"] = {"subject_id": subject, "kind": "conversation"}
    return event


class Baton:
    """Baton's api handler, configured as Lambda configures it (environment variables), against the endpoint."""

    def __init__(self, endpoint: str, table: str, secret: str, bucket: str | None) -> None:
        os.environ["BATON_TABLE_NAME"] = table
        os.environ["BATON_AWS_ENDPOINT_URL"] = endpoint
        if bucket:
            # The bucket exists already (run.py creates it with `baton_checkpoints.store.schema.ensure_bucket`).
            os.environ["BATON_BUCKET_NAME"] = bucket
        self.secret = secret
        self.requests = 0
        from baton_checkpoints.handlers.api import handler

        self.handler = handler

    def _request_id(self) -> str:
        self.requests += 1
        return f"bench-{os.getpid()}-{self.requests}"

    def prepare_save(self, key: str, state: dict[str, Any], step: int) -> dict[str, Any]:
        """The save's event (built outside the clock: Lambda hands the function an event already parsed)."""
        return save_event(self.secret, key, state, self._request_id())

    def prepare_read(self, key: str) -> dict[str, Any]:
        """The lookup's event."""
        return lookup_event(self.secret, key, self._request_id())

    def run_save(self, event: dict[str, Any]) -> tuple[bool, str]:
        """Handle the save; ok on 200 or 201."""
        return self._run(event, (200, 201))

    def run_read(self, event: dict[str, Any]) -> tuple[bool, str]:
        """Handle the lookup; ok on 200."""
        return self._run(event, (200,))

    def _run(self, event: dict[str, Any], expected: tuple[int, ...]) -> tuple[bool, str]:
        answer = self.handler(event, None)
        status = int(answer["statusCode"])
        detail = str(status)
        if status not in expected:
            try:
                error = json.loads(answer.get("body") or "{}")["error"]
                detail += f" {error['code']}: {error['message']}"
            except (ValueError, KeyError, TypeError):
                detail += " " + str(answer.get("body", ""))[:300]
        return status in expected, detail

    def versions(self) -> dict[str, str]:
        """Versions that decide the figures."""
        return {
            name: metadata.version(name) for name in ("baton-checkpoints", "boto3", "botocore", "aws-lambda-powertools")
        }


# -- LangGraph savers -------------------------------------------------------------------------------------------------


def checkpoint_for(state: dict[str, Any], step: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The checkpoint, metadata and new channel versions LangGraph hands `put` after a step whose channels hold the
    state's top-level fields (a graph state of `thread_id`, `model`, ..., `messages`)."""
    from langgraph.checkpoint.base import LATEST_VERSION
    from langgraph.checkpoint.base.id import uuid6

    version = f"{step:032}.{0:016}"
    channels = dict(state)
    checkpoint = {
        "v": LATEST_VERSION,
        "id": str(uuid6(clock_seq=step)),
        "ts": TIMESTAMP,
        "channel_values": channels,
        "channel_versions": dict.fromkeys(channels, version),
        "versions_seen": {"agent": dict.fromkeys(channels, f"{step - 1:032}.{0:016}")},
        "updated_channels": ["messages"],
    }
    metadata_ = {"source": "loop", "step": step, "parents": {}}
    return checkpoint, metadata_, dict.fromkeys(channels, version)


class Saver:
    """A LangGraph checkpoint saver: a save is `put` of the thread's next checkpoint, a read `get_tuple` of the
    latest. A second save is the next step's checkpoint, whose parent is the first (LangGraph's steady state)."""

    package = ""

    def __init__(self) -> None:
        self.saver: Any = None
        self.latest: dict[str, str] = {}

    def prepare_save(self, key: str, state: dict[str, Any], step: int) -> Any:
        """The arguments of `put`."""
        configurable = {"thread_id": key, "checkpoint_ns": ""}
        if key in self.latest:
            configurable["checkpoint_id"] = self.latest[key]
        checkpoint, meta, versions = checkpoint_for(state, step)
        return ({"configurable": configurable}, checkpoint, meta, versions)

    def prepare_read(self, key: str) -> Any:
        """The config of `get_tuple` for the thread's latest checkpoint."""
        return {"configurable": {"thread_id": key, "checkpoint_ns": ""}}

    def run_save(self, arguments: Any) -> tuple[bool, str]:
        """`put`; remembers the checkpoint id for the next step's parent."""
        config, checkpoint, meta, versions = arguments
        stored = self.saver.put(config, checkpoint, meta, versions)
        self.latest[config["configurable"]["thread_id"]] = stored["configurable"]["checkpoint_id"]
        return True, "put"

    def run_read(self, config: Any) -> tuple[bool, str]:
        """`get_tuple` of the latest; ok when it returns the last checkpoint put."""
        found = self.saver.get_tuple(config)
        if found is None:
            return False, "get_tuple returned None"
        expected = self.latest.get(config["configurable"]["thread_id"])
        got = found.checkpoint["id"]
        return got == expected, "latest" if got == expected else f"returned {got}, not the latest {expected}"

    def versions(self) -> dict[str, str]:
        """Versions that decide the figures."""
        return {name: metadata.version(name) for name in (self.package, "langgraph-checkpoint", "boto3", "botocore")}


class AmazonSaver(Saver):
    """`langgraph-checkpoint-amazon-dynamodb`: creates its own table (`deploy=True`), one item per checkpoint."""

    package = "langgraph-checkpoint-amazon-dynamodb"

    def __init__(self, endpoint: str, table: str) -> None:
        super().__init__()
        from langgraph_checkpoint_dynamodb import DynamoDBConfig, DynamoDBSaver, DynamoDBTableConfig

        config = DynamoDBConfig(
            table_config=DynamoDBTableConfig(table_name=table), region_name=REGION, endpoint_url=endpoint
        )
        self.saver = DynamoDBSaver(config, deploy=True)


class AwsSaver(Saver):
    """`langgraph-checkpoint-aws` `DynamoDBSaver`: expects a table with string keys `PK`, `SK` (its CloudFormation
    sample's schema, created here); a metadata item plus a payload item per checkpoint; gzip when asked; with a
    bucket, a payload over 350 KB (after gzip, when on) goes to an S3 object and its item keeps the key."""

    package = "langgraph-checkpoint-aws"

    def __init__(self, endpoint: str, table: str, gzip: bool, bucket: str | None) -> None:
        super().__init__()
        import boto3
        from langgraph_checkpoint_aws import DynamoDBSaver

        client = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
        try:
            client.describe_table(TableName=table)
        except client.exceptions.ResourceNotFoundException:
            client.create_table(
                TableName=table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK")],
                KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            )
        offload = None
        if bucket:
            s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
            try:
                s3.head_bucket(Bucket=bucket)
            except s3.exceptions.ClientError:
                s3.create_bucket(Bucket=bucket)
            offload = {"bucket_name": bucket, "endpoint_url": endpoint}
        self.saver = DynamoDBSaver(
            table_name=table,
            region_name=REGION,
            endpoint_url=endpoint,
            enable_checkpoint_compression=gzip,
            s3_offload_config=offload,
        )


# -- the loop -------------------------------------------------------------------------------------------------------


def build(name: str, endpoint: str, table: str, secret: str | None, bucket: str | None) -> Any:
    """The client called `name`."""
    if name == "baton":
        if not secret:
            raise SystemExit("baton needs --secret")
        return Baton(endpoint, table, secret, bucket)
    if name == "amazon":
        if bucket:
            raise SystemExit("langgraph-checkpoint-amazon-dynamodb has no S3 offload: no --bucket")
        return AmazonSaver(endpoint, table)
    if name in ("aws", "aws-gzip"):
        return AwsSaver(endpoint, table, gzip=name == "aws-gzip", bucket=bucket)
    raise SystemExit(f"unknown client {name}")


def timed(call: Any, argument: Any) -> dict[str, Any]:
    """Run `call(argument)` between two readings of this process's CPU clock (and the wall clock, for context)."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        ok, detail = call(argument)
    except Exception as exc:  # a peer failing is a finding, not a crash of the benchmark
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:500]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"ok": ok, "cpu_ms": cpu * 1000, "wall_ms": wall * 1000, "detail": detail}


def main() -> int:
    """Serve commands until `quit` or end of input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("client", choices=("baton", "amazon", "aws", "aws-gzip"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--secret")
    parser.add_argument("--bucket", help="the client's bucket for big states (Baton's spill, the aws saver's offload)")
    parser.add_argument("--sizes", default="1000,4000,32000,256000,2000000")
    args = parser.parse_args()

    # Answers go to the real stdout; anything the client prints (Baton's access log) goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    states = {int(size): states_for(int(size)) for size in args.sizes.split(",")}
    client = build(args.client, args.endpoint, args.table, args.secret, args.bucket)
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "quit":
            break
        if command["cmd"] == "info":
            facts = {
                str(size): {
                    "canonical_bytes": [canonical_size(s) for s in pair],
                    "sha256": hashlib.sha256(canonical(pair[0])).hexdigest(),
                }
                for size, pair in states.items()
            }
            answer: dict[str, Any] = {"versions": client.versions(), "python": platform.python_version()}
            answer["states"] = facts
        elif command["cmd"] == "save":
            state = states[command["size"]][command["step"] - 1]
            prepared = client.prepare_save(command["key"], state, command["step"])
            answer = timed(client.run_save, prepared)
        elif command["cmd"] == "read":
            prepared = client.prepare_read(command["key"])
            answer = timed(client.run_read, prepared)
        else:
            answer = {"ok": False, "detail": f"unknown command {command['cmd']}"}
        answers.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
