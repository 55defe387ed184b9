"""A spilled state whose object is gone (deleted by hand, by a lifecycle rule, by a defect) while its item still names
it: every read path that meets it answers the contract's `503 UNAVAILABLE` with a `Retry-After`, never a 500 (nor a
404 for a checkpoint that is there), and writes one ERROR line with the stable field `defect: state_object_missing`
that names the checkpoint and the object without its tenant, never the state. Against in-process moto.

The read paths: the lookup and the read by id, a kept revision, a restore, resume (by kind, by id, by subject), and
the MCP tools that stand for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from baton_checkpoints.api.services import Services
from baton_checkpoints.store import items, layout
from tests import proof_counts
from tests.builders import KIND, SUBJECT, lookup, save
from tests.conftest import Lines
from tests.integration.conftest import BUCKET, TABLE
from tests.integration.driver import ApiDriver, Result
from tests.integration.test_big_states import state_of
from tests.integration.test_mcp import call_tool

SUITE = "missing state object"
FIRST, SECOND = state_of(200_000, seed=1), state_of(200_000, seed=2)
"""Two states too large for an item: each is spilled to its own object."""
AGENT = "operator"


def checkpoint_with_a_kept_revision(api: ApiDriver) -> str:
    """A checkpoint at revision 2 keeping revision 1, both states spilled (to two objects); its id."""
    first = save(api, state=FIRST, keep_revisions=2)
    assert first.status == 201, first.raw_body
    assert save(api, state=SECOND).status == 200
    return str(first.data["checkpoint_id"])


def object_of(aws: Any, sk: str) -> str:
    """The object key an item of the test subject's partition names."""
    item = aws.get_item(
        TableName=TABLE, Key=layout.key(layout.checkpoint_pk("acme", SUBJECT), sk), ConsistentRead=True
    )["Item"]
    key = items.state_object_of(item)
    assert key is not None, "the state was not spilled"
    return key


def delete_object(services: Services, key: str) -> None:
    assert services.objects is not None
    services.objects.client.delete_object(Bucket=BUCKET, Key=key)


def assert_unavailable(answer: Result) -> None:
    assert answer.status == 503, answer.raw_body
    assert answer.error["code"] == "UNAVAILABLE"
    # A missing object does not come back by itself: a Retry-After past the SDK's patience (30 s) ends its retries
    retry_after = answer.header("Retry-After") or ""
    assert retry_after.isdigit(), retry_after
    assert int(retry_after) > 30


def assert_one_defect_line(lines: list[dict[str, Any]], key: str, checkpoint_id: str, revision: int) -> None:
    """Exactly one ERROR line, and it names the defect, the checkpoint and the object without tenant or state."""
    errors = [line for line in lines if line["level"] == "ERROR"]
    assert len(errors) == 1, errors
    (line,) = errors
    assert line["defect"] == "state_object_missing"
    assert line["object"] == key.removeprefix(layout.tenant_prefix("acme"))
    assert line["object"].startswith(f"{layout.STATES}/")
    assert (line["checkpoint_id"], line["revision"]) == (checkpoint_id, revision)
    assert line["request_id"]
    written = json.dumps(line)
    assert "acme/" not in written
    assert FIRST["noise"][:40] not in written
    assert SECOND["noise"][:40] not in written


CURRENT_READS: dict[str, Callable[[ApiDriver, str], Result]] = {
    "lookup": lambda api, _: lookup(api),
    "get_by_id": lambda api, checkpoint_id: api.invoke("get_checkpoint", path=f"/v1/checkpoints/{checkpoint_id}"),
    "resume_by_kind": lambda api, _: api.invoke(
        "resume", body={"subject_id": SUBJECT, "kind": KIND, "agent_id": AGENT}
    ),
    "resume_by_id": lambda api, checkpoint_id: api.invoke(
        "resume", body={"subject_id": SUBJECT, "checkpoint_id": checkpoint_id}
    ),
    "resume_by_subject": lambda api, _: api.invoke("resume", body={"subject_id": SUBJECT}),
}


@pytest.mark.parametrize("path", sorted(CURRENT_READS))
def test_a_read_of_a_checkpoint_whose_object_is_gone_is_a_503_and_one_error_line(
    api: ApiDriver, aws: Any, services: Services, logged: Lines, path: str
) -> None:
    # Given a checkpoint whose current state's object was deleted behind its item
    checkpoint_id = checkpoint_with_a_kept_revision(api)
    key = object_of(aws, layout.checkpoint_sk(AGENT, KIND))
    delete_object(services, key)
    before = len(logged())
    # When it is read
    answer = CURRENT_READS[path](api, checkpoint_id)
    # Then the answer is the contract's 503, and one ERROR line says what is wrong
    assert_unavailable(answer)
    assert_one_defect_line(logged()[before:], key, checkpoint_id, 2)
    proof_counts.record(SUITE, read_paths=1)


def test_a_kept_revision_whose_object_is_gone_is_a_503_not_a_404(
    api: ApiDriver, aws: Any, services: Services, logged: Lines
) -> None:
    # Given a kept revision still in the window whose object was deleted behind its item
    checkpoint_id = checkpoint_with_a_kept_revision(api)
    key = object_of(aws, layout.revision_sk(AGENT, KIND, checkpoint_id, 1))
    delete_object(services, key)
    before = len(logged())
    # When it is read
    answer = api.invoke("get_revision", path=f"/v1/checkpoints/{checkpoint_id}/revisions/1")
    # Then it is a 503 and one ERROR line (a 404 would tell the caller the revision is gone: it is listed)
    assert_unavailable(answer)
    assert_one_defect_line(logged()[before:], key, checkpoint_id, 1)
    listed = api.invoke("list_revisions", path=f"/v1/checkpoints/{checkpoint_id}/revisions", query={})
    assert [r["revision"] for r in listed.data] == [1]
    proof_counts.record(SUITE, read_paths=1)


def test_a_restore_of_a_revision_whose_object_is_gone_is_a_503_that_writes_nothing(
    api: ApiDriver, aws: Any, services: Services, logged: Lines
) -> None:
    checkpoint_id = checkpoint_with_a_kept_revision(api)
    key = object_of(aws, layout.revision_sk(AGENT, KIND, checkpoint_id, 1))
    delete_object(services, key)
    before = len(logged())
    answer = api.invoke(
        "restore_checkpoint",
        path=f"/v1/checkpoints/{checkpoint_id}/restore",
        body={"revision": 1},
        headers={"idempotency-key": "restore-missing-1"},
    )
    assert_unavailable(answer)
    assert_one_defect_line(logged()[before:], key, checkpoint_id, 1)
    # And nothing was written: the checkpoint is still at revision 2, and the key was not consumed
    assert lookup(api).data["revision"] == 2
    record = aws.get_item(TableName=TABLE, Key=layout.idempotency_key("acme", AGENT, "restore-missing-1"))
    assert "Item" not in record
    proof_counts.record(SUITE, read_paths=1)


MCP_READS: dict[str, Callable[[str], tuple[str, dict[str, Any]]]] = {
    "get_by_id": lambda checkpoint_id: ("baton_checkpoint_get", {"checkpoint_id": checkpoint_id}),
    "get_by_subject": lambda _: ("baton_checkpoint_get", {"subject_id": SUBJECT, "kind": KIND}),
    "resume": lambda _: ("baton_resume", {"subject_id": SUBJECT}),
}


@pytest.mark.parametrize("path", sorted(MCP_READS))
def test_an_mcp_read_of_a_checkpoint_whose_object_is_gone_is_an_unavailable_tool_error(
    api: ApiDriver, aws: Any, services: Services, logged: Lines, path: str
) -> None:
    checkpoint_id = checkpoint_with_a_kept_revision(api)
    key = object_of(aws, layout.checkpoint_sk(AGENT, KIND))
    delete_object(services, key)
    before = len(logged())
    tool, arguments = MCP_READS[path](checkpoint_id)
    result = call_tool(api, tool, arguments)
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "UNAVAILABLE", result
    assert_one_defect_line(logged()[before:], key, checkpoint_id, 2)
    proof_counts.record(SUITE, read_paths=1)


def test_a_state_replaced_while_it_was_read_is_read_anew_and_logs_no_defect(
    api: ApiDriver, aws: Any, services: Services, logged: Lines
) -> None:
    # Given a checkpoint read while a save replaced its state and the reaper deleted the old object (the race the
    # store reads again for: not a defect)
    checkpoint_with_a_kept_revision(api)
    old_key = object_of(aws, layout.checkpoint_sk(AGENT, KIND))
    assert services.objects is not None
    real_get = services.objects.get
    raced: list[str] = []

    def get_after_a_save(key: str) -> bytes | None:
        if key == old_key and not raced:
            raced.append(key)
            assert save(api, state=FIRST).status == 200  # a third save: the item names a new object
            delete_object(services, old_key)
        return real_get(key)

    services.objects.get = get_after_a_save  # type: ignore[method-assign]
    try:
        before = len(logged())
        answer = lookup(api)
    finally:
        del services.objects.get
    # Then the read answers the new state, and nothing is logged as a defect
    assert raced
    assert answer.status == 200, answer.raw_body
    assert (answer.data["revision"], answer.data["state"]) == (3, FIRST)
    assert [line for line in logged()[before:] if line["level"] == "ERROR"] == []
