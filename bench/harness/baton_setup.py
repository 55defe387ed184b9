"""Baton's table, bucket and first API key on the metered moto server: what every run against it starts from.

The table from `baton_checkpoints.store.schema.ensure_table`, the bucket from
`baton_checkpoints.store.schema.ensure_bucket`, the key from `baton keys create` (Baton's public command, in a child
process). `bench/run.py` and `python -m bench.harness.langgraph_steps` (alone) start from here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.harness.sidebyside import client_env

TABLE = "baton-bench"
REGION = "us-east-1"


def issue_key(endpoint: str, table: str = TABLE) -> str:
    """A Baton API key in the benchmark's table, through `baton keys create` (its public command)."""
    command = [sys.executable, "-m", "baton_checkpoints.cli.main", "keys", "create", "--table", table]
    command += ["--tenant", "bench", "--agent", "bench", "--scopes", "*", "--aws-endpoint", endpoint]
    command += ["--region", REGION]
    done = subprocess.run(command, capture_output=True, text=True, env=client_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"baton keys create failed:\n{done.stderr[-2000:]}")
    secret: str = json.loads(done.stdout)["secret"]
    return secret


def prepare(endpoint: str, table: str, bucket: str) -> str:
    """Baton's table and bucket on the moto server at `endpoint`, and a key in that table: its secret."""
    import boto3

    from baton_checkpoints.store.aws import s3_client
    from baton_checkpoints.store.schema import ensure_bucket, ensure_table

    ensure_table(boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION), table)
    ensure_bucket(s3_client(endpoint), bucket)
    return issue_key(endpoint, table)
