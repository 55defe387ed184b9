"""Every limit decided by the count of the service that enforces it: UTF-8 bytes of JSON, never characters (issue 20).

Each property builds inputs exactly at a limit and one past it out of a long run of one character and a short tail of
others: characters of 1, 2, 3 and 4 UTF-8 bytes, and characters JSON escapes (`"`, `\\`, control characters, which
canonical JSON writes as `\\u00XX`), U+2028 and U+2029, and lone surrogates where a JSON body can carry them. Limits
stated in characters by the contract (`subject_id`, `source`, …) are checked in characters, and every key or item
built from such a field is checked against DynamoDB's byte limits whatever its characters. Pure: no AWS, no socket.

Sizes stay near the limits with long runs of one character, so the whole file runs in well under 30 s.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, get_args
from urllib.parse import quote

import pytest
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from hypothesis import given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from baton_checkpoints.api.idempotency import idempotency_claim
from baton_checkpoints.api.jsontext import model_json
from baton_checkpoints.api.openapi import CursorParameter
from baton_checkpoints.api.paths import subject_from_path, thread_from_path
from baton_checkpoints.api.resolver import BatonResolver, Call
from baton_checkpoints.api.schemas import CheckpointSummary
from baton_checkpoints.api.schemas_resume import ResumeAmbiguous, ready_json
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import Principal
from baton_checkpoints.domain.canonical import parse_document
from baton_checkpoints.domain.checkpoints import plan_save
from baton_checkpoints.domain.errors import PayloadTooLarge, ValidationFailed
from baton_checkpoints.domain.models import (
    AcquireLeaseRequest,
    CreateBlobRequest,
    CreateKeyRequest,
    ResourceRef,
    SaveCheckpointRequest,
    Source,
)
from baton_checkpoints.domain.resume import Decision, ResumeRequest, lift, within_budget
from baton_checkpoints.domain.threads import (
    MAX_CHECKPOINT_BYTES,
    MAX_METADATA_BYTES,
    CheckpointBody,
    CheckpointId,
    Name,
    Namespace,
    PutCheckpointRequest,
    ThreadId,
    compact,
    version_key,
)
from baton_checkpoints.store import layout, sizes
from baton_checkpoints.store.checkpoints import write_position
from baton_checkpoints.store.cursors import MAX_POSITION_BYTES, decode_after, encode_after, query_binding
from tests import proof_counts
from tests.builders import NOW_MS, stored_checkpoint
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
TRIED: Counter[str] = Counter()


@pytest.fixture(autouse=True, scope="module")
def _record_counts() -> Iterator[None]:
    yield
    proof_counts.record("size limits", examples=sum(TRIED.values()), properties=len(TRIED))


def tried(property_name: str, **shown: Any) -> None:
    """Count one example of the property `property_name`, and note its input (abridged), which a failure report
    shows."""
    TRIED[property_name] += 1
    note(", ".join(f"{label}={_short(value)!r}" for label, value in shown.items()))


def _short(value: Any) -> Any:
    return value if not isinstance(value, str) or len(value) <= 80 else f"{value[:40]}…{value[-40:]} ({len(value)})"


# --- characters at the edges of every count ---------------------------------------------------------------------

ONE_BYTE = "a~ "
TWO_BYTES = "\u0080éß\u07ff"
THREE_BYTES = "\u0800€中\ufeff\uffff\u2028\u2029"
FOUR_BYTES = "\U00010000😀\U0010ffff"
ESCAPED = '"\\\x00\x01\x08\t\n\x0b\x0c\r\x1f'
"""What JSON writes escaped: `\\"`, `\\\\`, `\\b`, `\\t`, `\\n`, `\\f`, `\\r` (2 bytes), other C0 as `\\u00XX` (6)."""
CONTROL = "\x7f\x80\x9f"
"""DEL and C1: one or two bytes in JSON (not escaped), refused where a field refuses control characters."""

PRINTABLE = ONE_BYTE + TWO_BYTES[1:] + THREE_BYTES + FOUR_BYTES
"""Characters every text field accepts (no C0, DEL or C1: U+0080 is C1)."""
ANY = PRINTABLE + TWO_BYTES[:1] + ESCAPED + CONTROL


def runs(alphabet: str) -> st.SearchStrategy[str]:
    """One character of `alphabet`: what a long run is made of."""
    return st.sampled_from(alphabet)


def tails(alphabet: str, max_size: int = 8) -> st.SearchStrategy[str]:
    """A short text of `alphabet`'s characters and of any other valid one (no surrogate; no control character when
    `alphabet` has none)."""
    if any(c in alphabet for c in ESCAPED + CONTROL):
        others = st.characters(codec="utf-8")
    else:
        others = st.characters(codec="utf-8", exclude_categories=["Cc"])
    return st.text(st.one_of(st.sampled_from(alphabet), others), max_size=max_size)


def utf8(text: str) -> int:
    """UTF-8 bytes of `text`."""
    return len(text.encode("utf-8"))


def in_json(text: str) -> int:
    """Bytes `text` takes inside a JSON string as canonical JSON (RFC 8785) writes it: UTF-8, with its escapes."""
    return utf8(json.dumps(text, ensure_ascii=False)) - 2


def compact_bytes(value: Any) -> int:
    """UTF-8 bytes of the compact JSON of `value` (an independent reading of what Baton measures)."""
    return utf8(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def filled(run: str, tail: str, size: int, measure: Callable[[str], int]) -> str:
    """`run` repeated, then as many `a` as needed, then `tail`: exactly `size` long by `measure`."""
    room = size - measure(tail)
    width = measure(run)
    return run * (room // width) + "a" * (room % width) + tail


def of_length(run: str, tail: str, characters: int) -> str:
    """`run` repeated, then `tail`: exactly `characters` characters (code points)."""
    return run * (characters - len(tail)) + tail


def accepts(model: type[BaseModel], body: dict[str, Any]) -> bool:
    """True when `model` validates `body`; False when it refuses it (any other error propagates)."""
    try:
        model.model_validate(body)
    except ValidationError:
        return False
    return True


def accepts_text(annotation: Any, text: str) -> bool:
    """True when the annotated type (`ThreadId`, `Namespace`, …) validates `text` strictly."""
    try:
        TypeAdapter(annotation).validate_python(text, strict=True)
    except ValidationError:
        return False
    return True


TENANT = "t" * 64
AGENT = "a" * 64
"""The longest identifiers (`[a-z0-9][a-z0-9_-]{0,63}`): every key built with them is as long as keys get."""
PARTITION_KEY_BYTES = 2048
SORT_KEY_BYTES = 1024
"""DynamoDB's key limits, in UTF-8 bytes (partition keys and sort keys, of the table and of its indexes alike)."""
CURSOR_CHARS = next(m.max_length for m in get_args(CursorParameter)[1].metadata if hasattr(m, "max_length"))
"""Longest cursor a route accepts (`api.openapi.CursorParameter`)."""


# --- state and body ---------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(12))
@given(run=runs(ANY), tail=tails(ANY), over=st.booleans(), escaped_body=st.booleans())
def test_a_state_is_refused_only_past_3_000_000_bytes_of_canonical_json(
    run: str, tail: str, over: bool, escaped_body: bool
) -> None:
    # Given a state of exactly 3,000,000 (or 3,000,001) bytes of canonical JSON, its characters of every width and
    # escape, sent in a body written as UTF-8 or with every non-ASCII character escaped (\uXXXX)
    target = limits.MAX_STATE_BYTES + over
    state = {"s": filled(run, tail, target - len('{"s":""}'), in_json)}
    tried("state", run=run, tail=tail, over=over, escaped_body=escaped_body)
    assert compact_bytes(state) == target
    body = json.dumps({"subject_id": "s", "kind": "task_state", "state": state}, ensure_ascii=escaped_body)
    # When the body is parsed and planned as a save
    document = parse_document(body)
    request = SaveCheckpointRequest.model_validate(document.value)
    plan = plan_save(request, TENANT, AGENT, "req-1", NOW_MS, plain=document.plain)
    # Then the state's size is its canonical bytes however the body spelled it, and only one byte over is refused
    if over:
        assert isinstance(plan.oversize, PayloadTooLarge)
        assert (plan.oversize.limit_bytes, plan.oversize.actual_bytes) == (3_000_000, 3_000_001)
    else:
        assert plan.oversize is None
        assert plan.state.size == 3_000_000
        canonical = json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        assert plan.state.sha256 == hashlib.sha256(canonical).hexdigest()


@settings(PROFILE, max_examples=examples(6))
@given(run=runs(ANY), surrogate=st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]), over=st.booleans())
def test_a_state_holding_a_lone_surrogate_is_invalid_whatever_its_size(run: str, surrogate: str, over: bool) -> None:
    # Given a state at the limit (or one past it) holding a lone surrogate, which a body can carry as an escape
    state = {"s": filled(run, "", limits.MAX_STATE_BYTES + over - len('{"s":""}') - 6, in_json) + surrogate}
    tried("state_surrogate", run=run, surrogate=surrogate, over=over)
    body = json.dumps({"subject_id": "s", "kind": "task_state", "state": state})
    document = parse_document(body)
    request = SaveCheckpointRequest.model_validate(document.value)
    # Then it is a validation error (400), never counted as a size: it has no UTF-8 form at all
    with pytest.raises(ValidationFailed):
        plan_save(request, TENANT, AGENT, "req-1", NOW_MS, plain=document.plain)


def _body_gate(body: str, base64_encoded: bool) -> str | bytes:
    """What the gate's body check (`BatonResolver._raw_body`) makes of an event carrying `body` (UTF-8 text, or its
    bytes base64-encoded as API Gateway sends a body it does not take for text)."""
    event = {
        "version": "2.0",
        "rawPath": "/v1/checkpoints",
        "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/v1/checkpoints"}},
        "body": base64.b64encode(body.encode("utf-8")).decode("ascii") if base64_encoded else body,
        "isBase64Encoded": base64_encoded,
    }
    resolver = BatonResolver(lambda: None)  # type: ignore[arg-type,return-value]  # the body check needs no service
    missing = object()
    previous = BaseRouter.__dict__.get("current_event", missing)
    BaseRouter.current_event = APIGatewayProxyEventV2(event)
    try:
        return resolver._raw_body()
    finally:
        if previous is missing:
            del BaseRouter.current_event
        else:
            BaseRouter.current_event = previous


@settings(PROFILE, max_examples=examples(16))
@given(run=runs(PRINTABLE + ESCAPED), tail=tails(ANY), over=st.booleans(), base64_encoded=st.booleans())
def test_a_body_is_refused_only_past_3_100_000_utf8_bytes(
    run: str, tail: str, over: bool, base64_encoded: bool
) -> None:
    # Given a body of exactly 3,100,000 (or 3,100,001) UTF-8 bytes, its characters of every width
    target = limits.MAX_BODY_BYTES + over
    body = '{"s":"' + filled(run, tail, target - len('{"s":""}'), utf8) + '"}'
    tried("body", run=run, tail=tail, over=over, base64_encoded=base64_encoded)
    assert utf8(body) == target
    # When the gate checks it, as text or base64 (4 characters per 3 bytes) in the event
    if over:
        with pytest.raises(PayloadTooLarge) as refused:
            _body_gate(body, base64_encoded)
        # Then one byte over is refused naming the UTF-8 bytes, never its characters or its base64
        assert (refused.value.limit_bytes, refused.value.actual_bytes) == (3_100_000, 3_100_001)
    else:
        assert _body_gate(body, base64_encoded) == body


# --- fields the contract limits in characters, and the keys and items built from them ---------------------------


@settings(PROFILE, max_examples=examples(60))
@given(run=runs(PRINTABLE), tail=tails(PRINTABLE), over=st.booleans())
def test_a_subject_id_is_200_characters_of_any_width_and_its_keys_fit_dynamodb(run: str, tail: str, over: bool) -> None:
    subject = of_length(run, tail, limits.MAX_SUBJECT_ID_CHARS + over)
    tried("subject_id", subject=subject, over=over)
    body = {"subject_id": subject, "kind": "task_state", "state": {"a": 1}}
    # The body, the resume body and the path decide alike, in characters
    decided = {
        "save": accepts(SaveCheckpointRequest, body),
        "resume": accepts(ResumeRequest, {"subject_id": subject}),
        "path": _path_accepts(subject),
    }
    assert decided == dict.fromkeys(decided, not over), decided
    if over:
        return
    # Whatever the characters, the partition key it makes (the longest tenant's) fits DynamoDB's 2,048 bytes (at most
    # 2 + 64 + 1 + 4 × 200 = 867) and reads back as the same subject
    pk = layout.checkpoint_pk(TENANT, subject)
    assert utf8(pk) <= 867 < PARTITION_KEY_BYTES
    sk = layout.checkpoint_sk(AGENT, "task_state")
    assert layout.read_checkpoint_keys(pk, sk, layout.checkpoint_index_pk(TENANT, "ckpt_" + "0" * 32))[1] == subject


def _path_accepts(subject: str) -> bool:
    try:
        return subject_from_path(quote(subject, safe="")) == subject
    except ValidationFailed:
        return False


@settings(PROFILE, max_examples=examples(40))
@given(run=runs(PRINTABLE), tail=tails(PRINTABLE), position=st.integers(0, 199))
def test_a_subject_id_with_a_control_character_or_a_lone_surrogate_is_refused_at_any_length(
    run: str, tail: str, position: int
) -> None:
    base = of_length(run, tail, limits.MAX_SUBJECT_ID_CHARS)
    for odd in ("\x00", "\x1f", "\x7f", "\x85", "\ud800", "\udfff"):
        subject = base[:position] + odd + base[position + 1 :]
        tried("subject_id_control", subject=subject)
        assert not accepts(SaveCheckpointRequest, {"subject_id": subject, "kind": "task_state", "state": 1})
        assert not accepts(ResumeRequest, {"subject_id": subject})


def _claim(key: str) -> bool:
    call = Call("req-1", Principal(TENANT, AGENT, "key_1", frozenset({"*"})), {"a": 1}, NOW_MS)
    try:
        idempotency_claim(call, "POST", "/v1/checkpoints", key)
    except ValidationFailed:
        return False
    return True


@settings(PROFILE, max_examples=examples(60))
@given(
    run=st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    tail=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8),
    over=st.booleans(),
    other=st.sampled_from(TWO_BYTES + THREE_BYTES + FOUR_BYTES + ESCAPED[2:] + CONTROL),
    position=st.integers(0, 199),
)
def test_an_idempotency_key_is_1_to_200_printable_ascii_characters_and_its_record_key_fits(
    run: str, tail: str, over: bool, other: str, position: int
) -> None:
    key = of_length(run, tail, limits.IDEMPOTENCY_KEY_MAX_CHARS + over)
    tried("idempotency_key", key=key, over=over, other=other)
    assert _claim(key) is not over
    # Printable ASCII only: one character of any other kind is refused, even where its bytes would fit 200
    short = of_length(run, tail, 100)
    assert not _claim(short[:position] + other + short[position + 1 :])
    if not over:
        # Its record's partition key is at most 2 + 64 + 1 + 64 + 1 + 200 = 332 bytes
        pk = layout.identity(layout.idempotency_key(TENANT, AGENT, key))[0]
        assert utf8(pk) <= 332 < PARTITION_KEY_BYTES


TEXT_FIELDS: list[tuple[str, type[BaseModel], Callable[[str], dict[str, Any]], int, str]] = [
    ("source.host", Source, lambda text: {"host": text}, limits.MAX_SOURCE_FIELD_CHARS, ANY),
    ("source.session", Source, lambda text: {"session": text}, limits.MAX_SOURCE_FIELD_CHARS, ANY),
    ("source.model", Source, lambda text: {"model": text}, limits.MAX_SOURCE_FIELD_CHARS, ANY),
    (
        "format",
        SaveCheckpointRequest,
        lambda text: {"subject_id": "s", "kind": "task_state", "state": 1, "format": text},
        limits.MAX_FORMAT_CHARS,
        ANY,
    ),
    (
        "description",
        CreateKeyRequest,
        lambda text: {"agent_id": "a", "scopes": ["checkpoints:read"], "description": text},
        limits.MAX_DESCRIPTION_CHARS,
        ANY,
    ),
    (
        "resource name",
        ResourceRef,
        lambda text: {"name": text, "blob_id": "blob_" + "0" * 32, "sha256": "0" * 64, "size": 1, "media_type": "a/b"},
        200,
        ANY,
    ),
    (
        "lease holder",
        AcquireLeaseRequest,
        lambda text: {"ttl_seconds": 60, "holder": text},
        limits.MAX_HOLDER_CHARS,
        PRINTABLE,
    ),
]


@pytest.mark.parametrize(("field", "model", "body", "limit", "alphabet"), TEXT_FIELDS, ids=[f[0] for f in TEXT_FIELDS])
def test_a_text_field_limited_in_characters_counts_characters_of_any_width(
    field: str, model: type[BaseModel], body: Callable[[str], dict[str, Any]], limit: int, alphabet: str
) -> None:
    @settings(PROFILE, max_examples=examples(25))
    @given(run=runs(alphabet), tail=tails(alphabet), over=st.booleans())
    def check(run: str, tail: str, over: bool) -> None:
        text = of_length(run, tail, limit + over)
        tried(f"text {field}", text=text, over=over)
        assert accepts(model, body(text)) is not over
        if not over:
            # What the item stores of it is at most 4 bytes a character, whatever the characters: far inside
            # DynamoDB's 400 KB item (the checkpoint's and the key record's sizes are checked with moto)
            assert sizes.value_bytes({"S": text}) == utf8(text) <= 4 * limit

    check()


@settings(PROFILE, max_examples=examples(40))
@given(
    head=st.integers(73, 127),
    parameter=st.booleans(),
    over=st.booleans(),
    other=st.sampled_from(TWO_BYTES + THREE_BYTES + FOUR_BYTES),
)
def test_a_blob_media_type_is_at_most_200_ascii_characters(head: int, parameter: bool, over: bool, other: str) -> None:
    # Given a media type of exactly 200 (or 201) characters: type/subtype (each token at most 127), or with a quoted
    # parameter
    length = 200 + over
    if parameter:
        prefix = "text/plain; p="
        media_type = prefix + '"' + "q" * (length - len(prefix) - 2) + '"'
    else:
        media_type = "a" * head + "/" + "b" * (length - head - 1)
    tried("media_type", media_type=media_type, over=over)
    assert len(media_type) == length
    body = {"sha256": "0" * 64, "size": 1, "media_type": media_type}
    assert accepts(CreateBlobRequest, body) is not over
    # Any character outside printable ASCII is refused (S3 keeps it as a header, ASCII): its characters are its bytes
    assert not accepts(CreateBlobRequest, {**body, "media_type": "text/plain; p=" + other})


# --- LangGraph threads: ids, namespaces, channels, versions and their keys ---------------------------------------


@settings(PROFILE, max_examples=examples(60))
@given(
    run=runs(PRINTABLE),
    tail=tails(PRINTABLE),
    sizes_=st.tuples(
        st.sampled_from([0, 1, 25, 26, 100, 101, 999, 1000]),  # namespace: around the 100-byte hashing threshold
        st.sampled_from([1, 127, 128]),  # checkpoint id
        st.sampled_from([1, 199, 200]),  # thread id, channel, task and run id, version
    ),
)
def test_thread_keys_fit_dynamodb_and_read_back_whatever_the_characters(
    run: str, tail: str, sizes_: tuple[int, int, int]
) -> None:
    ns_chars, id_chars, name_chars = sizes_
    namespace = of_length(run, tail[:ns_chars], ns_chars) if ns_chars else ""
    checkpoint_id = of_length(run, tail[:id_chars], id_chars)
    name = of_length(run, tail[:name_chars], name_chars)
    tried("thread_keys", namespace=namespace, checkpoint_id=checkpoint_id, name=name)
    # The domain accepts every one of them at its length in characters
    assert accepts_text(Namespace, namespace)
    assert accepts_text(CheckpointId, checkpoint_id)
    assert accepts_text(Name, name)
    assert accepts_text(ThreadId, name)
    assert thread_from_path(quote(name, safe="")) == name
    # And every key built of them fits DynamoDB's limits and reads back
    pk = layout.thread_pk(TENANT, AGENT, name)
    assert utf8(pk) <= PARTITION_KEY_BYTES
    assert layout.read_thread_pk(pk) == (TENANT, AGENT, name)
    checkpoint_sk = layout.thread_checkpoint_sk(namespace, checkpoint_id)
    assert utf8(checkpoint_sk) <= SORT_KEY_BYTES
    read_namespace, read_id = layout.read_thread_checkpoint_sk(checkpoint_sk)
    assert read_id == checkpoint_id
    assert read_namespace in (namespace, None)  # None: a long namespace is written as its digest
    assert (read_namespace is None) is (utf8(namespace) > layout.KEY_PART_BYTES)
    value_sk = layout.thread_value_sk("g" * 32, namespace, name, version_key(name))
    assert utf8(value_sk) <= SORT_KEY_BYTES
    assert utf8(layout.thread_write_value_sk(namespace, checkpoint_id, "f" * 32)) <= SORT_KEY_BYTES
    assert utf8(layout.run_index_pk(TENANT, AGENT, name)) <= PARTITION_KEY_BYTES


@settings(PROFILE, max_examples=examples(30))
@given(run=runs(PRINTABLE + ESCAPED), tail=tails(ANY), over=st.booleans())
def test_thread_metadata_and_checkpoint_are_limited_in_bytes_of_compact_json(run: str, tail: str, over: bool) -> None:
    # Metadata of exactly 32,768 (or 32,769) bytes of compact JSON
    metadata = {"m": filled(run, tail, MAX_METADATA_BYTES + over - len('{"m":""}'), in_json)}
    tried("thread_metadata", run=run, tail=tail, over=over)
    assert compact_bytes(metadata) == len(compact(metadata)) == MAX_METADATA_BYTES + over
    assert accepts(PutCheckpointRequest, {"checkpoint": {"id": "c1"}, "metadata": metadata}) is not over
    # A checkpoint (without its values) of exactly 163,840 (or 163,841) bytes of compact JSON
    overhead = len(compact(CheckpointBody.model_validate({"id": "c1", "x": ""}).document()))
    document = {"id": "c1", "x": filled(run, tail, MAX_CHECKPOINT_BYTES + over - overhead, in_json)}
    assert accepts(PutCheckpointRequest, {"checkpoint": document}) is not over


# --- cursors ------------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(60))
@given(
    run=runs(PRINTABLE + '"\\'),
    tail=tails(PRINTABLE + '"\\'),
    ns_chars=st.sampled_from([0, 25, 26, 50, 100, 1000]),
    id_chars=st.sampled_from([1, 64, 128]),
)
def test_every_position_a_store_writes_makes_a_cursor_a_route_accepts(
    run: str, tail: str, ns_chars: int, id_chars: int
) -> None:
    # Given the sort key of a thread's checkpoint, the widest a cursor carries, of any characters
    namespace = of_length(run, tail[:ns_chars], ns_chars) if ns_chars else ""
    checkpoint_id = of_length(run, tail[:id_chars], id_chars)
    position = layout.thread_checkpoint_sk(namespace, checkpoint_id)
    binding = query_binding("threads", TENANT, AGENT, "thread", namespace, None, None)
    tried("cursor", position=position)
    # When a page's cursor is made of it
    cursor = encode_after(position, binding)
    # Then a route accepts it (at most 2,048 characters) and it reads back to the same position
    assert cursor is not None
    assert len(cursor) <= CURSOR_CHARS, (len(cursor), utf8(position))
    assert decode_after(cursor, binding) == position
    # So do the other listings' positions: (updated, agent, kind), key ids, revision numbers
    for other in (write_position((2**53 - 1, AGENT, "task_state")), "key_" + "f" * 32, "9" * 16):
        again = encode_after(other, binding)
        assert again is not None
        assert len(again) <= CURSOR_CHARS
        assert decode_after(again, binding) == other


def _forged(position: str, binding: str) -> str:
    raw = json.dumps({"a": position, "b": binding}).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@settings(PROFILE, max_examples=examples(30))
@given(run=runs(ONE_BYTE + TWO_BYTES + THREE_BYTES + FOUR_BYTES), over=st.booleans())
def test_a_cursor_position_is_refused_past_1024_utf8_bytes_and_when_it_is_not_unicode(run: str, over: bool) -> None:
    binding = query_binding("threads", TENANT, AGENT, "thread", None, None, None)
    position = filled(run, "", MAX_POSITION_BYTES + over, utf8)
    tried("cursor_position", run=run, over=over)
    # A position longer than any sort key, counted in bytes (1,024 of them may be 256 characters)
    if over:
        with pytest.raises(ValidationFailed):
            decode_after(_forged(position, binding), binding)
    else:
        assert decode_after(_forged(position, binding), binding) == position
    # A lone surrogate, which no key holds (and no store could send to DynamoDB): refused, never a 500
    with pytest.raises(ValidationFailed):
        decode_after(_forged("K#" + run + "\ud800", binding), binding)


# --- resume -------------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(30))
@given(run=runs(ANY), tail=tails(ANY), document=st.booleans())
def test_resume_budget_counts_the_compact_utf8_bytes_of_the_ready_data(run: str, tail: str, document: bool) -> None:
    # Given a checkpoint whose state (an OpenCheckpoint document or not) holds characters of every width and escape
    text = filled(run, tail, 3_000, in_json)
    state: dict[str, Any] = {"notes": text}
    format_name = None
    if document:
        format_name = "opencheckpoint/0.1"
        state = {
            "opencheckpoint": "0.1",
            "task": {"title": text[:10] or "t", "status": "open"},
            "operations": [{"kind": "k", "status": "pending", "description": text}],
            "continuation": {"stop_conditions": [{"description": tail or "x"}]},
        }
    state_text = json.dumps(state, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    cp = stored_checkpoint(
        state_text=state_text, state_bytes=len(state_text), subject_id="é" + tail, format=format_name
    )
    tried("resume_budget", run=run, tail=tail, document=document)
    # When its ready data is built and measured as the route does
    data = ready_json(CheckpointSummary.of(cp, NOW_MS), state_text, lift(cp.format, state_text))
    required = utf8(data)
    # Then the count is the compact UTF-8 JSON of `data` (not its characters, not \uXXXX escapes) and decides alone
    assert required == compact_bytes(json.loads(data))
    assert within_budget(required, required)
    assert not within_budget(required, required - 1)
    assert accepts(ResumeRequest, {"subject_id": "s", "budget_bytes": limits.MIN_RESUME_BUDGET_BYTES})
    assert not accepts(ResumeRequest, {"subject_id": "s", "budget_bytes": limits.MIN_RESUME_BUDGET_BYTES - 1})
    assert accepts(ResumeRequest, {"subject_id": "s", "budget_bytes": limits.MAX_RESUME_BUDGET_BYTES})
    assert not accepts(ResumeRequest, {"subject_id": "s", "budget_bytes": limits.MAX_RESUME_BUDGET_BYTES + 1})


@pytest.mark.parametrize("budget", [None, limits.MAX_RESUME_BUDGET_BYTES, limits.MAX_ANSWER_DATA_BYTES])
def test_a_ready_data_past_what_one_answer_carries_is_omitted_whatever_the_budget(budget: int | None) -> None:
    # A ready answer repeats a document's pending operations beside its state: near 6 MB for a 3 MB state, which
    # base64-encoded would pass Lambda's 6 MB answer. Past 4,500,000 bytes of data, it is omitted, budget or not.
    assert within_budget(limits.MAX_ANSWER_DATA_BYTES, budget)
    assert not within_budget(limits.MAX_ANSWER_DATA_BYTES + 1, budget)


def _heavy_candidate(index: int, character: str) -> Any:
    """A live active checkpoint holding 100 resources whose names are 200 `character`s and whose media types are 200
    ASCII characters: the largest summary a checkpoint can have."""
    resources = [
        {
            "name": f"{index:03d}{n:03d}" + character * 194,
            "blob_id": "blob_" + f"{index:016x}{n:016x}",
            "sha256": "0" * 64,
            "size": 5 * 1024**3,
            "media_type": "a" * 100 + "/" + "b" * 99,
        }
        for n in range(limits.MAX_RESOURCES)
    ]
    return stored_checkpoint(
        checkpoint_id=f"ckpt_{index:032x}",
        agent_id=f"agent-{index}",
        subject_id=character * limits.MAX_SUBJECT_ID_CHARS,
        resources=resources,
        source={"host": character * 200, "session": character * 200, "model": character * 200},
        format=character * limits.MAX_FORMAT_CHARS,
        updated_ms=NOW_MS - index,
    )


@pytest.mark.parametrize(
    "character", ["a", '"', "é", "€", "😀"], ids=["1-byte", "escaped", "2-byte", "3-byte", "4-byte"]
)
def test_ambiguous_candidates_stop_before_what_one_answer_carries(character: str) -> None:
    # Given 50 matching checkpoints, each with the largest summary there is (100 resources of 200-character names)
    candidates = tuple(_heavy_candidate(i, character) for i in range(limits.MAX_RESUME_CANDIDATES))
    decision = Decision("ambiguous", candidates=candidates, candidate_count=60)
    TRIED["ambiguous"] += 1
    # When the ambiguous answer is built
    answer = ResumeAmbiguous.of(decision, NOW_MS)
    data = model_json(answer)
    # Then its data fits what one answer carries, counted in UTF-8 bytes, with as many candidates as fit, newest
    # first, and the count of every match
    assert utf8(data) <= limits.MAX_ANSWER_DATA_BYTES, utf8(data)
    shown = [c.checkpoint_id for c in answer.candidates]
    assert shown == [cp.checkpoint_id for cp in candidates[: len(shown)]]
    assert answer.candidate_count == 60
    assert shown, "the first candidate always fits"
    if len(shown) < len(candidates):
        following = utf8(model_json(CheckpointSummary.of(candidates[len(shown)], NOW_MS)))
        assert utf8(data) + following + 1 > limits.MAX_ANSWER_DATA_BYTES - 100
    # Whether all 50 fit is decided by bytes (the same 200 characters a name): 1- and 2-byte characters and escaped
    # quotes do, 3- and 4-byte ones do not
    assert (len(shown) == len(candidates)) is (utf8(json.dumps(character, ensure_ascii=False)) <= 4)


# --- DynamoDB's item size -----------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(100))
@given(
    names=st.lists(tails(PRINTABLE, 12).filter(bool), min_size=1, max_size=5, unique=True),
    texts=st.lists(tails(ANY, 40), min_size=5, max_size=5),
    raw=st.binary(max_size=50),
    number=st.sampled_from(["1", "12", "-123", "1785412084.652", "100000", "0.000120", "-0.5", "12345678901234567"]),
)
def test_an_item_is_sized_by_the_utf8_bytes_of_its_names_and_strings(
    names: list[str], texts: list[str], raw: bytes, number: str
) -> None:
    tried("item_bytes", names=names, texts=texts)
    item = {name: {"S": text} for name, text in zip(names, texts, strict=False)}
    expected = sum(utf8(name) + utf8(text) for name, text in zip(names, texts, strict=False))
    assert sizes.item_bytes(item) == expected
    # a map's keys count as names, its values as values, plus 3 bytes and one per element; binary by its bytes
    nested = {"m": {"M": {name: {"S": text} for name, text in zip(names, texts, strict=False)}}, "b": {"B": raw}}
    assert sizes.item_bytes(nested) == 1 + 3 + len(item) + expected + 1 + len(raw)
    # a number by its significant digits (one byte per two, plus one), however its text is written
    significant = number.lstrip("-").replace(".", "").strip("0")
    assert sizes.value_bytes({"N": number}) == -(-len(significant) // 2) + 1
