"""Limits that need the store to decide, counted the way the enforcing service counts (issue 20): an item's size by
DynamoDB's rules, a state's place (in the item or spilled) by its stored bytes, an answer by what Lambda carries, a
page's cursor by what a route accepts. Each case pits characters against bytes: the same count in characters falls
on the other side of the limit in bytes. Against in-process moto, through the api handler.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import uuid
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.domain import limits
from baton_checkpoints.store import items, layout, schema, sizes
from baton_checkpoints.store.cursors import query_binding
from tests.builders import KIND, save
from tests.integration.conftest import TABLE, services_on, serving, table_items
from tests.integration.driver import ApiDriver, body_text, load_event
from tests.integration.test_resources import declare
from tests.integration.test_threads import list_page, put, typed

pytestmark = pytest.mark.engines
"""Every test of this module that uses the world runs on in-process moto and on DynamoDB Local (`conftest.py`)."""

ITEM_LIMIT_BYTES = 400 * 1024
"""DynamoDB's item size limit, counted its way (`baton_checkpoints.store.sizes.item_bytes`)."""
LAMBDA_RESPONSE_LIMIT_BYTES = 6_291_556
"""Lambda's limit on a synchronous function's result, in bytes of the result as its python3.13 runtime serializes it
(UTF-8, characters unescaped; simplejson escapes U+2028 and U+2029)."""


def lambda_bytes(result: dict[str, Any]) -> int:
    """The bytes Lambda counts for a handler's result."""
    text = json.dumps(result, ensure_ascii=False)
    return len(text.encode("utf-8")) + 3 * (text.count("\u2028") + text.count("\u2029"))


def handler_answer(event_name: str, secret: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The api handler's raw result for the sample event `event_name` with `body` (JSON), as Lambda gets it."""
    from baton_checkpoints.handlers.api import handler

    event = copy.deepcopy(load_event(event_name))
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    event["headers"]["authorization"] = f"Bearer {secret}"
    event["headers"].pop("idempotency-key", None)
    event["headers"].pop("accept-encoding", None)
    event["headers"].update(headers or {})
    event["body"] = json.dumps(body)
    result: dict[str, Any] = handler(event, None)
    return result


def random_text(characters: str, count: int, seed: int) -> str:
    """`count` characters drawn from `characters`: text that barely compresses."""
    chooser = random.Random(seed)
    return "".join(chooser.choices(characters, k=count))


ASTRAL = "".join(chr(c) for c in range(0x20000, 0x20000 + 4096))
"""4,096 four-byte characters (CJK Extension B): 12 bits of randomness per 4 bytes."""
ASCII = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"\\')


# --- resume: an answer never passes what Lambda carries ----------------------------------------------------------


@pytest.mark.parametrize("budget", [None, limits.MAX_RESUME_BUDGET_BYTES], ids=["no budget", "largest budget"])
def test_a_ready_resume_too_large_for_one_answer_is_omitted_and_the_record_still_reads_whole(
    api: ApiDriver, budget: int | None
) -> None:
    # Given an OpenCheckpoint document of 2.5 MB whose only pending operation holds nearly all of it: its ready data
    # repeats the operation beside the state (about 5 MB), more than Lambda carries once base64-encoded
    description = random_text(ASCII, 2_500_000, seed=20)
    state = {
        "opencheckpoint": "0.1",
        "task": {"title": "migrate", "status": "in_progress"},
        "operations": [{"kind": "tool_call", "status": "pending", "description": description}],
    }
    saved = save(api, subject_id="big-document", state=state, format="opencheckpoint/0.1")
    assert saved.status == 201, saved.raw_body[:300]
    body: dict[str, Any] = {"subject_id": "big-document"}
    if budget is not None:
        body["budget_bytes"] = budget
    # When it is resumed, without gzip
    answer = handler_answer("resume", api.secret, body)
    # Then the answer fits Lambda's limit, and says `omitted` with the bytes the ready data would take: never a 500,
    # never a partial checkpoint
    assert lambda_bytes(answer) <= LAMBDA_RESPONSE_LIMIT_BYTES, lambda_bytes(answer)
    assert answer["statusCode"] == 200, body_text(answer)[:300]
    data = json.loads(body_text(answer))["data"]
    assert data["status"] == "omitted"
    assert data["required_bytes"] > limits.MAX_ANSWER_DATA_BYTES
    assert "state" not in data["checkpoint"]
    # And the record itself reads whole
    by_id = api.invoke("get_checkpoint", path=f"/v1/checkpoints/{saved.data['checkpoint_id']}")
    assert by_id.status == 200
    assert by_id.data["state"] == state


# --- where a state goes: decided by its stored bytes ------------------------------------------------------------


def test_a_state_of_few_wide_characters_is_spilled_by_its_bytes_not_its_characters(api: ApiDriver, aws: Any) -> None:
    # Given two states of 10,000 random characters each: ASCII (about 10 KB, which packs small) and four-byte
    # characters (40 KB of canonical JSON, which packs to about 20 KB): under 16 KiB characters, only one under
    # 16 KiB bytes stored
    narrow = {"t": random_text(ASCII, 10_000, seed=1)}
    wide = {"t": random_text(ASTRAL, 10_000, seed=2)}
    assert save(api, subject_id="narrow", state=narrow).status == 201
    assert save(api, subject_id="wide", state=wide).status == 201
    stored = {i[schema.PK]["S"].rpartition("#")[2]: i for i in table_items(aws) if i[schema.PK]["S"].startswith("C#")}
    # Then the narrow one stays in the item and the wide one is spilled to the bucket, by their stored bytes
    assert items.STATE_OBJECT not in stored["narrow"]
    assert items.STATE_OBJECT in stored["wide"]
    assert api.invoke("lookup_checkpoint", query={"subject_id": "wide", "kind": KIND}).data["state"] == wide


def test_without_a_bucket_a_state_is_refused_by_its_stored_bytes_not_its_characters(aws: Any) -> None:
    # Given a deployment without a bucket, and a state of 250,000 random four-byte characters: fewer characters than
    # the 350,000 bytes an item keeps of a state, but about 1 MB of canonical JSON that packs to more than that
    from baton_checkpoints.settings import load_settings
    from tests.integration.conftest import OPERATOR_SECRET, put_key

    full = services_on(TABLE)
    bare = Services(
        settings=load_settings({"BATON_TABLE_NAME": TABLE}),
        dynamodb=full.dynamodb,
        checkpoints=type(full.checkpoints)(full.dynamodb, TABLE, None),
        keys=full.keys,
        authenticator=full.authenticator,
        objects=None,
    )
    state = {"t": random_text(ASTRAL, 250_000, seed=3)}
    with serving(lambda: bare):
        put_key(bare, OPERATOR_SECRET, "acme", "operator", {"*"}, "key_" + "b" * 32)
        refused = save(ApiDriver(OPERATOR_SECRET), state=state)
    # Then it is 413 naming the item's room and the state's stored bytes, and nothing is written
    assert refused.status == 413, refused.raw_body[:300]
    details = refused.error["details"]
    assert details["limit_bytes"] == items.INLINE_LIMIT_BYTES
    assert details["actual_bytes"] > items.INLINE_LIMIT_BYTES > len(state["t"])
    assert [i for i in table_items(aws) if i[schema.PK]["S"].startswith("C#")] == []


# --- the largest record there is still fits an item --------------------------------------------------------------


def test_the_widest_checkpoint_and_its_kept_revision_fit_dynamodbs_item_limit(
    api: ApiDriver, aws: Any, services: Services
) -> None:
    # Given every text field of a checkpoint at its limit in four-byte characters: subject, source, format, 100
    # resources with 200-character names, a lease holder, and an incompressible state just under the spill threshold
    wide = "😀"
    subject = wide * limits.MAX_SUBJECT_ID_CHARS
    resources = []
    for n, resource in enumerate(declare(services, f"blob {n}".encode()) for n in range(limits.MAX_RESOURCES)):
        resources.append({**resource, "name": f"{n:03d}" + wide * 197})
    fields: dict[str, Any] = {
        "subject_id": subject,
        "source": {"host": wide * 200, "session": wide * 200, "model": wide * 200},
        "format": wide * limits.MAX_FORMAT_CHARS,
        "keep_revisions": 5,
    }
    state = {"t": random_text(ASCII, 15_000, seed=4)}
    assert save(api, state=state, resources=resources[:98], **fields).status == 201
    checkpoint_id = api.invoke("lookup_checkpoint", query={"subject_id": subject, "kind": KIND}).data["checkpoint_id"]
    lease = api.invoke(
        "acquire_lease",
        path=f"/v1/checkpoints/{checkpoint_id}/lease",
        body={"ttl_seconds": 600, "holder": wide * limits.MAX_HOLDER_CHARS},
    )
    assert lease.status == 201, lease.raw_body[:300]
    token = lease.data["lease_token"]
    # When it is saved again (its first revision kept) with an idempotency key, and with all 100 resources
    again = save(
        api, "k" * limits.IDEMPOTENCY_KEY_MAX_CHARS, state=state, resources=resources, lease_token=token, **fields
    )
    assert again.status == 200, again.raw_body[:300]
    # Then every item it made (the checkpoint, its kept revision, the idempotency record, the blobs' records) fits
    # DynamoDB's 400 KB, counted in UTF-8 bytes
    found = table_items(aws)
    kinds = {item[schema.PK]["S"][:2] + item[schema.SK]["S"][:2] for item in found}
    assert {"C#C#", "C#V#", "D#D"} <= kinds, kinds
    largest = max(found, key=sizes.item_bytes)
    assert sizes.item_bytes(largest) < ITEM_LIMIT_BYTES, (sizes.item_bytes(largest), largest[schema.SK])
    # And its keys fit DynamoDB's key limits
    assert all(len(item[schema.PK]["S"].encode()) <= 2048 for item in found)
    assert all(len(item[schema.SK]["S"].encode()) <= 1024 for item in found)


# --- LangGraph threads: a page's cursor is one the route accepts ------------------------------------------------


def test_a_thread_listed_page_by_page_with_the_widest_checkpoint_ids_reaches_its_last_page(api: ApiDriver) -> None:
    # Given a thread whose checkpoint ids are 128 four-byte characters (512 bytes each in the sort key)
    thread = "wide-ids"
    ids = [f"{n}" + "\U00010000" * 127 for n in range(3)]
    for n, checkpoint_id in enumerate(ids):
        assert put(api, thread, checkpoint_id, {"a": n + 1}, {"a": typed(b"x")}).status == 201
    # When it is listed one checkpoint a page, following each page's cursor
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(len(ids) + 1):
        page = list_page(api, thread, limit=1, cursor=cursor)
        assert page.status == 200, page.raw_body[:300]
        seen.extend(item["checkpoint_id"] for item in page.data)
        cursor = page.body["meta"]["next_cursor"]
        if cursor is None:
            break
        # Then every cursor is one a route accepts (at most 2,048 characters)
        assert len(cursor) <= 2048, len(cursor)
    assert seen == sorted(ids, reverse=True)


def test_a_forged_thread_cursor_holding_a_lone_surrogate_is_400_not_500(api: ApiDriver) -> None:
    # Given a thread, and a cursor bound to its listing (the binding is a plain digest a caller can compute) whose
    # position holds a lone surrogate, which no sort key can
    assert put(api, "forged", "c1", {"a": 1}, {"a": typed(b"x")}).status == 201
    binding = query_binding("threads", "acme", "operator", "forged", None, None, None)
    raw = json.dumps({"a": layout.THREAD_CHECKPOINT + "\ud800", "b": binding}).encode("utf-8")
    cursor = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    # When it is presented
    answer = list_page(api, "forged", limit=1, cursor=cursor)
    # Then it is refused naming the cursor, as any cursor the listing did not make
    assert answer.status == 400, answer.raw_body[:300]
    assert answer.error["details"]["errors"][0]["pointer"] == "/cursor"
