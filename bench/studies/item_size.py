"""The stored size of a checkpoint of a 32 KB conversation state, counted the way DynamoDB bills it.

A count, not a timing, so a test asserts it (`tests/unit/test_item_size.py`). Baton is driven only through its
public entry points, so that the figure holds whatever the store's attribute names and indexes become: a fresh
interpreter starts in-process moto, creates the table with `baton_checkpoints.store.schema.ensure_table`, issues a key
with
`baton keys create`, saves the seeded state with `baton_checkpoints.handlers.api.handler`, and sizes the items the save
added
to the table (`capacity.py`), index entries included.

`python -m bench.studies.item_size` prints the figures as JSON; `measure_item()` runs that in a child interpreter (the
handler keeps its settings and client for the life of a process; a test process must not inherit them).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from bench.paths import with_repo_path

STATE_BYTES = 32_000
SEED = 7
TABLE = "baton-item-size"


@dataclass(frozen=True)
class ItemFigures:
    """The items a first save of the state added, sized as DynamoDB bills them."""

    canonical_bytes: int
    item_bytes: int
    """Every item the save added (normally the checkpoint alone)."""
    items: int
    largest_attribute: str
    largest_attribute_type: str
    largest_attribute_bytes: int
    """The attribute holding the state: its name, DynamoDB type ("B" when compressed) and size with its name."""
    index_entries: dict[str, int]
    """Index name -> bytes of the item's entry in it (attributes + 100 bytes)."""
    write_units: int
    """Write units of the save, index maintenance included."""

    @property
    def ratio(self) -> float:
        """Item bytes over canonical JSON bytes."""
        return self.item_bytes / self.canonical_bytes


def _measure_here(state_bytes: int, seed: int) -> ItemFigures:
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "BATON_TABLE_NAME": TABLE,
        }
    )
    os.environ.pop("BATON_AWS_ENDPOINT_URL", None)
    from moto import mock_aws

    from bench.billing import capacity
    from bench.harness.clients import save_event
    from bench.harness.states import canonical_size, conversation_state

    with mock_aws():
        import boto3

        from baton_checkpoints.cli.main import main as baton_cli
        from baton_checkpoints.store.schema import ensure_table

        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, TABLE)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = baton_cli(
                ["keys", "create", "--table", TABLE, "--tenant", "bench", "--agent", "bench", "--scopes", "*"]
            )
        if status != 0:
            raise RuntimeError(f"baton keys create exited {status}")
        secret = json.loads(printed.getvalue())["secret"]
        table = capacity.Table.from_description(client.describe_table(TableName=TABLE)["Table"])
        before = {table.key_of(item): item for item in _scan(client)}
        state = conversation_state(target_bytes=state_bytes, seed=seed)
        from baton_checkpoints.handlers.api import handler

        with contextlib.redirect_stdout(io.StringIO()):  # the access log line
            answer = handler(save_event(secret, "item-size", state, "item-size-1"), None)
        if answer["statusCode"] != 201:
            raise RuntimeError(f"the save answered {answer['statusCode']}: {answer.get('body')}")
        # The tenant's own item (its rate limit's bucket) is no part of what a save stores.
        added = [
            item for item in _scan(client) if table.key_of(item) not in before and not item["pk"]["S"].startswith("L#")
        ]
    if not added:
        raise RuntimeError("the save added no item to the table")
    checkpoint = max(added, key=capacity.item_bytes)
    name, value = max(checkpoint.items(), key=lambda kv: capacity.value_bytes(kv[1]))
    entries = {}
    for index in table.indexes:
        entry = capacity.index_entry(checkpoint, table, index)
        if entry is not None:
            entries[index.name] = capacity.index_entry_bytes(entry)
    units = sum(capacity.item_write(None, item, table).units for item in added)
    return ItemFigures(
        canonical_bytes=canonical_size(state),
        item_bytes=sum(capacity.item_bytes(item) for item in added),
        items=len(added),
        largest_attribute=name,
        largest_attribute_type=next(iter(value)),
        largest_attribute_bytes=len(name.encode("utf-8")) + capacity.value_bytes(value),
        index_entries=entries,
        write_units=units,
    )


def _scan(client: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(TableName=TABLE):
        items.extend(page["Items"])
    return items


def measure_item(state_bytes: int = STATE_BYTES, seed: int = SEED) -> ItemFigures:
    """Measure in a fresh interpreter (this one's Python) and return the figures."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.studies.item_size", str(state_bytes), str(seed)],
        capture_output=True,
        text=True,
        env=with_repo_path(os.environ),
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"measuring the item failed:\n{done.stderr[-3000:]}")
    return ItemFigures(**json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else STATE_BYTES
    chosen_seed = int(sys.argv[2]) if len(sys.argv) > 2 else SEED
    figures = _measure_here(size, chosen_seed)
    print(json.dumps(figures.__dict__))
