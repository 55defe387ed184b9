"""A steady tenant's run against the metered moto server: what rate limiting and usage metering add per API request.

The tenant saves `--saves` times, one request after another, through Baton's own handler; then the table's stream is
read and handed to the reaper function as Lambda's event source would at that rate: batches of its deployed
`BatchSize` (100 records; a tenant writing 20 times a second fills a batch within the 5 s batching window). Counted
are the DynamoDB requests of each side, by kind: the api's takes of the tenant's share (`TakeShare`) and writes of its
usage counts (`CountUsage`, every 100 requests), and the reaper's count of each batch (`TransactWriteItems`, one per
batch for every tenant in it, its days' figures included).

Usage: `python -m bench.harness.steady --endpoint URL --table T --bucket B --secret S --saves N --json OUT` (run by
`bench/run.py` in a process of its own: it sets the environment Baton's handlers read).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

SAVES = 400


def measure(endpoint: str, table: str, bucket: str, secret: str, saves: int) -> dict[str, Any]:
    """Run the saves, reap their records in deployed-size batches; the requests each side made, by operation."""
    import boto3
    import botocore.handlers

    from bench.harness.clients import save_event
    from bench.harness.replay import named

    os.environ.update({"BATON_TABLE_NAME": table, "BATON_BUCKET_NAME": bucket, "BATON_AWS_ENDPOINT_URL": endpoint})
    made: Counter[str] = Counter()
    sent: list[bytes] = []

    def keep_request(request: Any, **_: Any) -> None:
        body = request.body
        sent.append(body if isinstance(body, bytes) else str(body or "").encode("utf-8"))

    def count(model: Any, **_: Any) -> None:
        made[named(model.name, sent.pop() if sent else b"")] += 1

    botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", keep_request))
    botocore.handlers.BUILTIN_HANDLERS.append(("after-call.dynamodb", count))
    from baton_checkpoints.handlers.api import handler as api
    from baton_checkpoints.handlers.reaper import handler as reaper

    # BATCH_SIZE: the deployed event source's BatchSize, which `baton serve`'s stream mirrors (a unit test holds it)
    from baton_checkpoints.local.stream import BATCH_SIZE, lambda_record, stream_of, streams_client, wanted

    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    streams = streams_client(endpoint)
    arn = stream_of(dynamodb, streams, table)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][-1]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]

    subjects = 5
    for step in range(saves):
        answer = api(save_event(secret, f"steady-{step % subjects}", {"step": step}, f"steady-{step}"), None)
        if answer["statusCode"] not in (200, 201):
            raise RuntimeError(f"steady save {step}: {answer['statusCode']} {str(answer.get('body'))[:300]}")
    by_api, made = dict(made), Counter()

    records: list[dict[str, Any]] = []
    while True:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        records += [lambda_record(r, arn) for r in page["Records"] if wanted(r)]
        iterator = page.get("NextShardIterator")
        if not page["Records"] or not iterator:
            break
    for start in range(0, len(records), BATCH_SIZE):
        answer = reaper({"Records": records[start : start + BATCH_SIZE]}, None)
        if answer["batchItemFailures"]:
            raise RuntimeError(f"the reaper failed records: {answer['batchItemFailures']}")
    return {"saves": saves, "records": len(records), "api": by_api, "reaper": dict(made)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--saves", type=int, default=SAVES)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    figures = measure(args.endpoint, args.table, args.bucket, args.secret, args.saves)
    args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
