"""Properties of every parser of client input (times, entity tags, cursors, ids, JSON bodies, headers): whatever a
client sends, nothing comes out but a value the rest of Baton can use or the domain's own error.

Each property runs a bounded number of examples (see `tests/unit/hypothesis_profiles.py`); the strategies mix
arbitrary text with inputs shaped like the real thing at its edges (years 0001 and 9999, offsets of ±23:59,
revisions past 2^53, cursors of nested JSON, bodies with dozens of unknown fields), where parsers break.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from types import FrameType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import pytest
import rfc8785
from hypothesis import given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from baton_checkpoints.api.auth import bearer_secret
from baton_checkpoints.api.errors import field_errors
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.access import SCOPES, key_validity
from baton_checkpoints.domain.canonical import canonical_json, parse_document, parse_strict
from baton_checkpoints.domain.checkpoints import etag_for, parse_etag, parse_etag_list, plan_save
from baton_checkpoints.domain.clock import format_ms, parse_time
from baton_checkpoints.domain.errors import BatonError, PayloadTooLarge, Unauthenticated, ValidationFailed
from baton_checkpoints.domain.ids import CHECKPOINT_ID_PATTERN, KEY_ID_PATTERN, new_checkpoint_id, new_key_id
from baton_checkpoints.domain.lifecycle import KINDS, STATUSES
from baton_checkpoints.domain.models import CreateKeyRequest, ResourceRef, SaveCheckpointRequest, Source
from baton_checkpoints.local.gateway import build_event
from baton_checkpoints.store.checkpoints import read_position, write_position
from baton_checkpoints.store.cursors import decode_after, encode_after, query_binding
from tests import proof_counts
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
TRIED: Counter[str] = Counter()
"""Examples run per property (shrinking included), recorded for the suite's summary line."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS = (datetime(1, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
LAST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
NOW_MS = 1_785_412_084_652  # 2026-07-30T11:48:04.652Z


def tried(name: str, **shown: Any) -> None:
    """Count one example of the property `name`, and note its input, which a failure report then shows."""
    TRIED[name] += 1
    note(", ".join(f"{label}={value!r}" for label, value in shown.items()))


T = TypeVar("T")


def attempt(call: Callable[[], T], refusal: type[Exception]) -> tuple[T | None, Exception | None]:
    """What `call` returns, or the `refusal` it raised; any other exception propagates and fails the property."""
    try:
        return call(), None
    except refusal as exc:
        return None, exc


# Hypothesis raises the recursion limit while it runs a test, which would hide a parser that recurses once per level
# of nesting. The api handler runs with Python's default limit (1,000 frames) and a few dozen frames below it
# (Lambda's runtime, powertools' resolver, the route): `lambda_stack` gives a parser the same room.
LAMBDA_FREE_FRAMES = 900


@contextmanager
def lambda_stack() -> Iterator[None]:
    """Run the body with about the stack depth the api handler has left on Lambda."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + LAMBDA_FREE_FRAMES)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


@pytest.fixture(autouse=True, scope="module")
def _record_counts() -> Iterator[None]:
    yield
    proof_counts.record("properties", examples=sum(TRIED.values()), properties=len(TRIED))


# --- strategies -------------------------------------------------------------------------------------------------

LATIN_1 = st.characters(max_codepoint=255)
DIGITS = st.text("0123456789", min_size=1, max_size=12)


def json_values(finite: bool = False, max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """JSON as Python: any nesting of null, booleans, integers of any size, floats, text, arrays and objects."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=not finite, allow_infinity=not finite),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
        ),
        max_leaves=max_leaves,
    )


def _two_digits(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(lambda n: f"{n:02d}")


# Times shaped like RFC 3339, with every part allowed a little past its range, and the years at the ends.
_YEARS = st.one_of(st.sampled_from([0, 1, 2, 1969, 1970, 2026, 9998, 9999]), st.integers(0, 9999)).map(
    lambda y: f"{y:04d}"
)
_ZONES = st.one_of(
    st.sampled_from(["Z", "z", "", "+00:00", "-00:00"]),
    st.builds(lambda sign, h, m: f"{sign}{h}:{m}", st.sampled_from("+-"), _two_digits(0, 29), _two_digits(0, 69)),
)
RFC3339_LIKE = st.builds(
    lambda y, mo, d, sep, h, mi, s, frac, zone: f"{y}-{mo}-{d}{sep}{h}:{mi}:{s}{frac}{zone}",
    _YEARS,
    _two_digits(0, 19),
    _two_digits(0, 39),
    st.sampled_from(["T", "t", " ", "_"]),
    _two_digits(0, 29),
    _two_digits(0, 69),
    _two_digits(0, 69),
    st.one_of(st.just(""), DIGITS.map(lambda d: "." + d)),
    _ZONES,
)
_OFFSET_MINUTES = 23 * 60 + 59
ZONES = st.one_of(
    st.sampled_from([-_OFFSET_MINUTES, -1, 0, 1, _OFFSET_MINUTES]), st.integers(-_OFFSET_MINUTES, _OFFSET_MINUTES)
).map(lambda m: timezone(timedelta(minutes=m)))
# Local times whose instant is within 0001-9999 in UTC whatever their offset, and local times on the first and last
# day of that range, whose instant may fall outside it.
SAFE_MOMENTS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=ZONES)
EDGE_MOMENTS = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(1, 1, 1, 23, 59, 59, 999999), timezones=ZONES),
    st.datetimes(
        min_value=datetime(9999, 12, 31), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999), timezones=ZONES
    ),
)
TIMES = st.one_of(
    RFC3339_LIKE,
    st.one_of(SAFE_MOMENTS, EDGE_MOMENTS).map(lambda m: m.isoformat(timespec="milliseconds")),
    st.text(max_size=40),
)

# Entity tags: ours, with revisions of any length, and anything else.
_TAG_IDS = st.one_of(st.builds(new_checkpoint_id), st.text(max_size=40))
ETAGS = st.one_of(
    st.builds(
        lambda weak, cid, rev, pad: f'{pad}{weak}"{cid}:{rev}"{pad}',
        st.sampled_from(["", "W/", "w/"]),
        _TAG_IDS,
        st.text("0123456789", max_size=60),
        st.sampled_from(["", " ", "\t"]),
    ),
    st.text(max_size=60),
)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


BINDING = query_binding("subject", "tenant-1", "ticket-42", None, None, None)
# Cursors as a client can send them (the routes accept up to 2,048 characters): any text, and base64 of any bytes,
# of JSON shaped like a cursor, and of deeply nested JSON.
_CURSOR_PAYLOADS = st.one_of(
    st.binary(max_size=300),
    json_values().map(lambda v: json.dumps(v).encode("utf-8")),
    st.builds(
        lambda b, k, a: json.dumps({"b": b, "k": k, "a": a}).encode("utf-8"),
        st.sampled_from([BINDING, "other"]),
        json_values(),
        json_values(),
    ),
    # Nesting up to the deepest a cursor of 2,048 characters carries (1,536 bytes of `[`).
    st.builds(
        lambda n, bracket: bracket * n,
        st.one_of(st.just(1536), st.integers(0, 1536)),
        st.sampled_from([b"[", b'{"a":']),
    ),
)
CURSORS = st.one_of(st.text(max_size=2048), _CURSOR_PAYLOADS.map(_b64)).filter(lambda c: len(c) <= 2048)

# Documents for the strict parser: JSON text (with NaN and Infinity), duplicated keys, deep nesting, long numbers,
# arbitrary text, and bytes that may not be UTF-8.
_JSON_TEXTS = st.one_of(
    json_values().map(json.dumps),
    json_values().map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.builds(
        lambda k, a, b: f'{{"{k}": {json.dumps(a)}, "{k}": {json.dumps(b)}}}',
        st.sampled_from("ab"),
        json_values(max_leaves=3),
        json_values(max_leaves=3),
    ),
    st.integers(1, 200).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 200).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(1, 5000).map(lambda n: "1" * n),
    st.text(max_size=200),
)
DOCUMENTS = st.one_of(
    _JSON_TEXTS,
    _JSON_TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
)


def _fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _objects(names: list[str], values: st.SearchStrategy[Any], max_size: int = 8) -> st.SearchStrategy[Any]:
    """Objects whose keys are mostly the model's own field names, sometimes anything else."""
    keys = st.one_of(st.sampled_from(names), st.text(max_size=12))
    return st.dictionaries(keys, values, max_size=max_size)


_FIELD_VALUES = st.one_of(
    json_values(max_leaves=8),
    st.lists(_objects(_fields(ResourceRef), json_values(max_leaves=3)), max_size=4),
    _objects(_fields(Source), json_values(max_leaves=3)),
)
# Arbitrary JSON objects for the request models, with their fields' names, and bodies a real client could send.
SAVE_OBJECTS = _objects(_fields(SaveCheckpointRequest), _FIELD_VALUES, max_size=12)
KEY_OBJECTS = _objects(_fields(CreateKeyRequest), _FIELD_VALUES, max_size=10)
IDENTIFIERS = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9_-]{0,63}", fullmatch=True), st.text(max_size=70))
SAVE_BODIES = st.fixed_dictionaries(
    {
        "subject_id": st.text(min_size=0, max_size=210),
        "kind": st.sampled_from([*KINDS, "other"]),
        "state": json_values(),
    },
    optional={
        "ttl_seconds": st.one_of(st.integers(0, 3_000_000), json_values(max_leaves=2)),
        "agent_id": IDENTIFIERS,
        "expected_revision": st.integers(-1, 2**60),
        "status": st.sampled_from([*STATUSES, "done"]),
        "format": st.text(max_size=120),
        "resources": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=20),
                    "blob_id": st.text(max_size=20),
                    "sha256": st.one_of(st.text("0123456789abcdef", min_size=64, max_size=64), st.text()),
                    "size": st.integers(-1, 2**40),
                    "media_type": st.text(max_size=20),
                }
            ),
            max_size=3,
        ),
        "source": st.fixed_dictionaries(
            {}, optional={name: st.one_of(st.none(), st.text(max_size=210)) for name in _fields(Source)}
        ),
        "lease_token": st.text(max_size=210),
        "keep_revisions": st.integers(-1, 101),
    },
)
KEY_BODIES = st.fixed_dictionaries(
    {"agent_id": IDENTIFIERS, "scopes": st.lists(st.sampled_from([*SCOPES, "admin"]), max_size=12)},
    optional={
        "tenant_id": IDENTIFIERS,
        "not_before": TIMES,
        "expires_at": TIMES,
        "description": st.text(max_size=510),
    },
)


def _wide_body(base: dict[str, Any], count: int, length: int) -> dict[str, Any]:
    """`base` with `count` unknown fields whose names are `length` characters or more."""
    return {**base, **{f"{'x' * length}{i}": i for i in range(count)}}


# --- times --------------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(500))
@given(text=TIMES)
def test_a_time_parses_to_an_instant_within_years_0001_to_9999_or_is_refused(text: str) -> None:
    tried("parse_time", text=text)
    try:
        parsed = parse_time(text)
    except ValueError:
        return
    # Every time accepted lies within years 0001-9999 in UTC, and is written back without error.
    assert FIRST_MS <= parsed <= LAST_MS, (text, parsed)
    formatted = format_ms(parsed)
    assert parse_time(formatted) == parsed


@settings(PROFILE, max_examples=examples(300))
@given(moment=SAFE_MOMENTS)
def test_a_valid_time_parses_to_its_exact_millisecond(moment: datetime) -> None:
    tried("parse_time_exact", moment=moment)
    text = moment.isoformat(timespec="milliseconds")
    assert parse_time(text) == (moment - EPOCH) // timedelta(milliseconds=1)
    assert parse_time(text.replace("+00:00", "Z")) == parse_time(text)


@settings(PROFILE, max_examples=examples(300))
@given(epoch_ms=st.integers(FIRST_MS, LAST_MS))
def test_every_millisecond_of_years_0001_to_9999_formats_and_parses_back(epoch_ms: int) -> None:
    tried("format_ms", epoch_ms=epoch_ms)
    assert parse_time(format_ms(epoch_ms)) == epoch_ms


@settings(PROFILE, max_examples=examples(300))
@given(
    not_before=st.one_of(st.none(), TIMES),
    expires_at=st.one_of(st.none(), TIMES),
    now_ms=st.integers(0, 2**45),
)
def test_a_key_validity_window_is_usable_or_refused_with_a_validation_error(
    not_before: str | None, expires_at: str | None, now_ms: int
) -> None:
    tried("key_validity", not_before=not_before, expires_at=expires_at, now_ms=now_ms)
    window, refused = attempt(lambda: key_validity(not_before, expires_at, now_ms), ValidationFailed)
    if isinstance(refused, ValidationFailed):
        assert {e.pointer for e in refused.errors} <= {"/not_before", "/expires_at"}
        return
    assert window is not None
    start, end = window
    # What was accepted is shown back on the key (format_ms), so it must format.
    for accepted in (start, end):
        if accepted is not None:
            assert FIRST_MS <= accepted <= LAST_MS, (not_before, expires_at, accepted)
            format_ms(accepted)
    assert end is None or end > now_ms
    assert end is None or start is None or end > start


# --- entity tags --------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(500))
@given(value=ETAGS)
def test_an_entity_tag_is_ours_with_a_storable_revision_or_none(value: str) -> None:
    tried("parse_etag", value=value)
    parsed = parse_etag(value)
    if parsed is None:
        return
    checkpoint_id, revision = parsed
    assert isinstance(checkpoint_id, str)
    # Whatever reaches DynamoDB must be a number it stores (38 digits), and in fact one a checkpoint can have or -1.
    assert -1 <= revision <= limits.MAX_SAFE_INTEGER, (value, revision)


@settings(PROFILE, max_examples=examples(200))
@given(members=st.lists(ETAGS, max_size=5), separator=st.sampled_from([",", ", ", " ,"]))
def test_an_entity_tag_list_is_a_list_of_ours_or_none(members: list[str], separator: str) -> None:
    tried("parse_etag_list", members=members, separator=separator)
    parsed = parse_etag_list(separator.join(members))
    if parsed is None:
        return
    assert parsed
    assert all(-1 <= revision <= limits.MAX_SAFE_INTEGER for _, revision in parsed)


@settings(PROFILE, max_examples=examples(200))
@given(revision=st.integers(0, limits.MAX_SAFE_INTEGER), weak=st.booleans())
def test_an_entity_tag_of_ours_round_trips(revision: int, weak: bool) -> None:
    tried("etag_round_trip", revision=revision, weak=weak)
    checkpoint_id = new_checkpoint_id()
    tag = etag_for(checkpoint_id, revision)
    assert parse_etag(tag if weak else tag.removeprefix("W/")) == (checkpoint_id, revision)


# --- cursors ------------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(300))
@given(cursor=CURSORS)
def test_a_checkpoint_listing_cursor_decodes_to_a_position_or_is_refused(cursor: str) -> None:
    tried("checkpoint_cursor", cursor=cursor)
    with lambda_stack():
        position, refused = attempt(lambda: read_position(decode_after(cursor, BINDING)), ValidationFailed)
    if isinstance(refused, ValidationFailed):
        assert [(e.pointer, e.location) for e in refused.errors] == [("/cursor", "query")]
        return
    assert position is not None
    updated, agent_id, kind = position
    assert -(10**16) < updated <= 0
    assert agent_id
    assert kind
    assert "#" not in agent_id


@settings(PROFILE, max_examples=examples(200))
@given(cursor=CURSORS)
def test_a_key_listing_cursor_decodes_to_a_position_or_is_refused(cursor: str) -> None:
    tried("decode_after", cursor=cursor)
    with lambda_stack():
        position, refused = attempt(lambda: decode_after(cursor, BINDING), ValidationFailed)
    if isinstance(refused, ValidationFailed):
        assert [(e.pointer, e.location) for e in refused.errors] == [("/cursor", "query")]
        return
    assert isinstance(position, str)


@settings(PROFILE, max_examples=examples(200))
@given(
    updated_ms=st.integers(min_value=0, max_value=253_402_300_799_999),
    agent_id=st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True),
    kind=st.sampled_from(["task_state", "conversation", "workflow", "cursor"]),
    position=st.text(max_size=80),
)
def test_a_cursor_round_trips_and_is_bound_to_its_query(
    updated_ms: int, agent_id: str, kind: str, position: str
) -> None:
    tried("cursor_round_trip", updated_ms=updated_ms, agent_id=agent_id, kind=kind, position=position)
    listing = (-updated_ms, agent_id, kind)
    cursor = encode_after(write_position(listing), BINDING)
    assert cursor is not None
    assert read_position(decode_after(cursor, BINDING)) == listing
    after = encode_after(position, BINDING)
    assert after is not None
    assert decode_after(after, BINDING) == position
    other_query = query_binding("subject", "tenant-2", "ticket-42", None, None, None)
    with pytest.raises(ValidationFailed):
        decode_after(cursor, other_query)
    with pytest.raises(ValidationFailed):
        decode_after(after, other_query)


# --- ids ----------------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(300))
@given(text=st.one_of(st.text(max_size=45), st.builds(lambda t: "ckpt_" + t, st.text(string.hexdigits, max_size=34))))
def test_only_ckpt_and_32_lowercase_hex_digits_is_a_checkpoint_id(text: str) -> None:
    tried("checkpoint_id_pattern", text=text)
    expected = len(text) == 37 and text.startswith("ckpt_") and all(c in "0123456789abcdef" for c in text[5:])
    assert bool(CHECKPOINT_ID_PATTERN.match(text)) == expected
    assert CHECKPOINT_ID_PATTERN.match(new_checkpoint_id())


@settings(PROFILE, max_examples=examples(200))
@given(earlier=st.integers(0, 16**12 - 2), later_by=st.integers(1, 16**12))
def test_a_key_id_matches_its_pattern_and_sorts_by_creation_time(earlier: int, later_by: int) -> None:
    tried("key_id", earlier=earlier, later_by=later_by)
    later = min(earlier + later_by, 16**12 - 1)
    first, second = new_key_id(earlier), new_key_id(later)
    assert KEY_ID_PATTERN.match(first)
    assert KEY_ID_PATTERN.match(second)
    assert first[:16] < second[:16]


# --- JSON bodies --------------------------------------------------------------------------------------------------


@settings(PROFILE, max_examples=examples(300))
@given(document=DOCUMENTS)
def test_any_body_parses_strictly_to_a_value_or_a_validation_error(document: str | bytes) -> None:
    tried("parse_strict", document=document)
    with lambda_stack():
        value, refused = attempt(lambda: parse_strict(document), ValidationFailed)
    if refused is not None:
        return
    # What was accepted can be canonicalized (hash, size) or is refused the same way, never with another error.
    try:
        canonical_json(value)
    except ValidationFailed:
        return


@settings(PROFILE, max_examples=examples(400))
@given(value=json_values(finite=True))
def test_canonical_json_is_a_fixed_point_of_parse_and_canonicalize(value: Any) -> None:
    tried("canonical_fixed_point", value=value)
    try:
        document = parse_document(json.dumps(value))  # what a state goes through before it is canonicalized
        canonical = canonical_json(document.value, plain=document.plain)
    except ValidationFailed:
        return
    assert canonical == rfc8785.dumps(document.value)
    # A state Baton accepted is served as its canonical text; sending that text back must be accepted unchanged.
    assert canonical_json(parse_strict(canonical)) == canonical, canonical


# --- authorization header -----------------------------------------------------------------------------------------

_SECRETS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=60)


@settings(PROFILE, max_examples=examples(300))
@given(
    header=st.one_of(
        st.none(),
        st.text(max_size=80),
        st.builds(
            lambda scheme, gap, secret: f"{scheme}{gap}{secret}",
            st.sampled_from(["Bearer", "bearer", "BEARER", "Basic", ""]),
            st.text(" \t\n\u00a0\u2003", max_size=3),
            st.text(max_size=60),
        ),
    )
)
def test_a_bearer_header_gives_a_secret_or_unauthenticated(header: str | None) -> None:
    tried("bearer_secret", header=header)
    try:
        secret = bearer_secret(header)
    except Unauthenticated:
        return
    assert secret
    assert " " not in secret
    assert secret == secret.strip()


@settings(PROFILE, max_examples=examples(200))
@given(scheme=st.sampled_from(["Bearer", "bearer", "BEARER"]), secret=_SECRETS)
def test_a_bearer_secret_round_trips(scheme: str, secret: str) -> None:
    tried("bearer_round_trip", scheme=scheme, secret=secret)
    assert bearer_secret(f"{scheme} {secret}") == secret
    assert bearer_secret(f"  {scheme}  {secret}  ") == secret


# --- request models and their errors ------------------------------------------------------------------------------


def _resolve(document: Any, where: str) -> tuple[bool, Any]:
    """Whether the RFC 6901 pointer `where` names a place in `document`, and what is there."""
    node = document
    if where == "":
        return True, node
    for token in (t.replace("~1", "/").replace("~0", "~") for t in where.split("/")[1:]):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False, None
    return True, node


M = TypeVar("M", bound=BaseModel)


def validated(body: Any, model: type[M]) -> M | None:
    """Validate `body` with `model` as the api does: the request, or None after checking that the error answer is
    what the contract describes (every violation named by a pointer into the body, at most 50 listed)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raw = [{**err, "loc": ("body", *err["loc"])} for err in exc.errors()]
    found = field_errors(raw)
    assert len(found) == len(raw)
    for error, cause in zip(found, raw, strict=True):
        assert error.pointer == "" or error.pointer.startswith("/"), error
        # The field is named by its pointer, and the pointer names a place in the body (or its parent, if missing).
        assert error.message
        assert error.pointer[:200] in error.message, error
        resolvable = error.pointer.rpartition("/")[0] if cause["type"] == "missing" else error.pointer
        assert _resolve(body, resolvable)[0], (error, cause["type"], body)
    answer = ValidationFailed(found)
    details = answer.details()
    # At most 50 violations are listed, and `more` counts the rest: no answer grows with a hostile request.
    assert len(details["errors"]) <= 50, len(details["errors"])  # type: ignore[arg-type]
    if len(found) > 50:
        assert details.get("more") == len(found) - 50
    assert len(answer.message) + len(json.dumps(details)) <= 64 * 1024
    return None


@settings(PROFILE, max_examples=examples(200))
@given(body=st.one_of(SAVE_OBJECTS, SAVE_BODIES, json_values(max_leaves=5)))
def test_a_save_body_becomes_a_plan_or_errors_the_contract_describes(body: Any) -> None:
    tried("save_body", body=body)
    request = validated(body, SaveCheckpointRequest)
    if request is None:
        return
    plan, refused = attempt(
        lambda: plan_save(request, "tenant-1", request.agent_id or "agent-1", "req-1", NOW_MS), BatonError
    )
    if refused is not None:
        assert isinstance(refused, ValidationFailed | PayloadTooLarge), refused
        return
    assert plan is not None
    canonical = rfc8785.dumps(request.state)
    assert plan.state.sha256 == hashlib.sha256(canonical).hexdigest()
    assert plan.state.size == len(canonical)


@settings(PROFILE, max_examples=examples(200))
@given(body=st.one_of(KEY_OBJECTS, KEY_BODIES, json_values(max_leaves=5)))
def test_a_key_body_becomes_a_validity_window_or_errors_the_contract_describes(body: Any) -> None:
    tried("key_body", body=body)
    request = validated(body, CreateKeyRequest)
    if request is None:
        return
    window, refused = attempt(lambda: key_validity(request.not_before, request.expires_at, NOW_MS), ValidationFailed)
    if refused is not None:
        return
    assert window is not None
    for accepted in window:
        if accepted is not None:
            format_ms(accepted)


@settings(PROFILE, max_examples=examples(60))
@given(
    model=st.sampled_from([SaveCheckpointRequest, CreateKeyRequest]),
    count=st.integers(1, 120),
    length=st.integers(1, 400),
)
def test_the_error_answer_to_a_body_with_many_long_unknown_fields_is_bounded(
    model: type[BaseModel], count: int, length: int
) -> None:
    tried("wide_bodies", model=model.__name__, count=count, length=length)
    base: dict[str, Any] = (
        {"subject_id": "s", "kind": "task_state", "state": {}}
        if model is SaveCheckpointRequest
        else {"agent_id": "a", "scopes": ["checkpoints:read"]}
    )
    assert validated(_wide_body(base, count, length), model) is None


# --- the local gateway --------------------------------------------------------------------------------------------

_HEADER_NAMES = st.one_of(
    st.sampled_from(["Cookie", "Content-Type", "Host", "User-Agent", "Authorization", "If-Match", "X-Repeated"]),
    st.text(string.ascii_letters + string.digits + "-_!#$%&'*+.^`|~", min_size=1, max_size=20),
)
_CONTENT_TYPES = st.sampled_from(
    ["application/json", "text/plain; charset=utf-8", "application/octet-stream", "application/problem+json", ""]
)
HEADERS = st.lists(
    st.one_of(
        st.tuples(_HEADER_NAMES, st.text(LATIN_1, max_size=40)),
        st.tuples(st.just("Content-Type"), _CONTENT_TYPES),
    ),
    max_size=8,
)
# Request targets as http.server hands them over (decoded as Latin-1, and `//` at the start collapsed to `/`): the
# origin form, the absolute form, and odd ones.
_TARGET_TEXT = st.text(st.one_of(LATIN_1, st.sampled_from("[]?#&=%/:@")), max_size=40)
# The absolute form names a host, IPv6 literals in brackets included (`http://[::1]:8787/v1/health`).
_HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1:8787", "[::1]:8787", "localhost"]), st.text("[]:.0123456789abcdef", max_size=12)
)
TARGETS = st.one_of(
    st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(["/", "/v1/checkpoints", "*", ""]), _TARGET_TEXT),
    st.builds(
        lambda scheme, host, rest: f"{scheme}//{host}/{rest}",
        st.sampled_from(["http:", "https:"]),
        _HOSTS,
        _TARGET_TEXT,
    ),
)
BODIES = st.one_of(st.binary(max_size=200), st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass")))


@settings(PROFILE, max_examples=examples(400))
@given(
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"]),
    target=TARGETS,
    headers=HEADERS,
    body=BODIES,
)
def test_the_gateway_builds_an_event_for_any_request(
    method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> None:
    tried("build_event", method=method, target=target, headers=headers, body=body)
    try:
        split = urlsplit(target)
    except ValueError:
        # A target no URL parser reads (`http://[/`): the gateway answers it 400 itself (tests/e2e framing).
        with pytest.raises(ValueError, match=r"IPv4|IPv6"):
            build_event(method, target, headers, body, "127.0.0.1", request_id="req-1", now=NOW_MS / 1000)
        return
    event = build_event(method, target, headers, body, "127.0.0.1", request_id="req-1", now=NOW_MS / 1000)
    json.dumps(event)  # the gateway measures the event this way before invoking
    assert event["rawPath"] == (split.path or "/")
    assert event["rawQueryString"] == split.query
    assert event["requestContext"]["http"]["method"] == method
    for name, value in parse_qsl(split.query, keep_blank_values=True):
        assert value in event["queryStringParameters"][name]
    merged: dict[str, str] = event["headers"]
    assert all(name == name.lower() for name in merged)
    assert "cookie" not in merged
    for name, value in headers:
        if name.lower() != "cookie":
            assert value in merged[name.lower()]
    if not body:
        assert "body" not in event
    elif event["isBase64Encoded"]:
        assert base64.b64decode(event["body"]) == body
    else:
        assert event["body"].encode("utf-8") == body


# -- the fast canonical path writes exactly what RFC 8785 does -------------------------------------------------

_PLAIN_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
)
_ANY_SCALARS = _PLAIN_SCALARS | st.floats(allow_nan=False, allow_infinity=False) | st.integers()
_KEYS = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)


def _json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=30
    )


@settings(PROFILE, max_examples=examples(400))
@given(_json_values(_ANY_SCALARS))
def test_a_plain_document_canonicalizes_the_same_on_both_paths(value: Any) -> None:
    """Wherever parsing says a document is plain, the standard library's encoder writes its RFC 8785 form."""
    tried("plain canonical path", value=value)
    text = json.dumps(value)
    try:
        document = parse_document(text)
    except ValidationFailed:
        return
    try:
        slow = rfc8785.dumps(document.value)
    except rfc8785.CanonicalizationError:
        assert not document.plain  # what RFC 8785 refuses is never plain
        return
    if document.plain:
        assert canonical_json(document.value, plain=True) == slow


@settings(PROFILE, max_examples=examples(300))
@given(_json_values(_PLAIN_SCALARS))
def test_documents_without_doubles_big_integers_or_astral_keys_are_plain(value: Any) -> None:
    """The fast path is taken for the documents agents actually send (no doubles), not just allowed."""
    tried("plain documents", value=value)
    keys_are_bmp = all(ord(c) <= 0xFFFF for c in json.dumps(value, ensure_ascii=False))
    try:
        document = parse_document(json.dumps(value))
    except ValidationFailed:
        return
    if keys_are_bmp:
        assert document.plain
        assert canonical_json(document.value, plain=True) == rfc8785.dumps(document.value)


# --- lease tokens and revision numbers ------------------------------------------------------------------------------

LEASE_TOKENS = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda counter, secret, dot: f"{counter}{dot}{secret}",
        st.one_of(st.integers(min_value=0, max_value=10**20).map(str), st.text(max_size=5)),
        st.one_of(st.text(alphabet="0123456789abcdefABCDEF", min_size=30, max_size=34), st.text(max_size=40)),
        st.sampled_from([".", "", "..", ". "]),
    ),
)


@settings(PROFILE, max_examples=examples(500))
@given(token=LEASE_TOKENS)
def test_a_lease_token_is_ours_with_a_storable_counter_or_matches_no_lease(token: str) -> None:
    from baton_checkpoints.domain.leases import Lease, parse_token

    tried("parse_token", token=token)
    parsed = parse_token(token)
    if parsed is None:
        return
    counter, secret = parsed
    # A counter DynamoDB stores exactly, and a token that writes back as itself (nothing else matches the lease)
    assert 0 <= counter < 10**16
    assert Lease("h", counter, secret, 0).admits(token) == (token == f"{counter}.{secret}")


@settings(PROFILE, max_examples=examples(300))
@given(raw=st.one_of(st.text(max_size=20), st.integers(min_value=-5, max_value=2**60).map(str)))
def test_a_revision_path_parameter_is_a_storable_revision_or_a_validation_error(raw: str) -> None:
    from baton_checkpoints.api.routers.history import revision_from_path

    tried("revision_from_path", raw=raw)
    valid = raw.isascii() and raw.isdigit() and not raw.startswith("0") and 1 <= int(raw) <= limits.MAX_SAFE_INTEGER
    if not valid:
        with pytest.raises(ValidationFailed) as refused:
            revision_from_path(raw)
        assert refused.value.errors[0].pointer == "/revision"
        return
    assert revision_from_path(raw) == int(raw)


_PERCENT_ESCAPES = st.lists(
    st.one_of(
        st.integers(min_value=0, max_value=255).map(lambda b: f"%{b:02X}"),
        st.sampled_from(["%", "%2", "%zz", "+", "=", "&", "caf", "%C3%A9", "%F0%9F%98%80", "%ED%A0%80", "%C0%AF"]),
        st.text(max_size=4),
    ),
    max_size=8,
).map("".join)


@settings(PROFILE, max_examples=examples(400))
@given(name=st.sampled_from(["subject_id", "thread_id", "blob_id"]), raw=_PERCENT_ESCAPES, query=_PERCENT_ESCAPES)
def test_path_and_query_parameters_are_utf8_or_refused_naming_them(name: str, raw: str, query: str) -> None:
    """Whatever bytes a path parameter or a query string percent-encodes, the gate either accepts them (they decode
    as UTF-8, so no two different byte strings name the same thing, and no parameter is repeated) or refuses them
    naming the parameter."""
    from urllib.parse import unquote, unquote_plus

    from baton_checkpoints.api.paths import check_encoding

    tried("check_encoding", raw=raw, query=query)

    def strict(text: str, decode: Callable[..., str]) -> bool:
        try:
            decode(text, errors="strict")
        except UnicodeDecodeError:
            return False
        return True

    path_ok = strict(raw, unquote)
    query_ok = all(strict(part, unquote_plus) for pair in query.split("&") for part in pair.partition("=")[::2])
    if query_ok:
        names = [unquote_plus(pair.partition("=")[0]) for pair in query.split("&")]
        query_ok = len([n for n in names if n]) == len({n for n in names if n})
    _, refusal = attempt(lambda: check_encoding({name: raw}, query), ValidationFailed)
    assert (refusal is None) == (path_ok and query_ok)
    if isinstance(refusal, ValidationFailed):
        error = refusal.errors[0]
        if not path_ok:
            assert (error.pointer, error.location) == (f"/{name}", "path")
            assert "UTF-8" in error.message
        else:
            assert error.location == "query"
            assert "UTF-8" in error.message or "given once" in error.message


@settings(PROFILE, max_examples=examples(200))
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=30))
def test_any_text_percent_encoded_passes_the_gate_and_decodes_to_itself(text: str) -> None:
    from urllib.parse import quote, unquote, urlencode

    from baton_checkpoints.api.paths import check_encoding

    tried("check_encoding_round_trip", text=text)
    check_encoding({"subject_id": quote(text, safe="")}, urlencode({"subject_id": text, "kind": "task_state"}))
    assert unquote(quote(text, safe=""), errors="strict") == text


# -- LangGraph threads -------------------------------------------------------------------------------------------

_TYPED = st.fixed_dictionaries(
    {
        "type": st.one_of(st.sampled_from(["msgpack", "json", "null", "empty", "msgpack+aes"]), st.text(max_size=45)),
        "data": st.one_of(st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()), st.text(max_size=20)),
    }
)
_VERSIONS = st.one_of(
    st.integers(-(2**60), 2**60), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)
)
THREAD_PUT_BODIES = st.fixed_dictionaries(
    {
        "checkpoint": st.one_of(
            st.fixed_dictionaries(
                {
                    "id": st.text(max_size=210),
                    "channel_versions": st.dictionaries(st.text(max_size=5), _VERSIONS, max_size=4),
                },
                optional={
                    "v": st.integers(0, 5),
                    "channel_values": json_values(max_leaves=2),
                    "ts": st.text(max_size=5),
                },
            ),
            json_values(max_leaves=3),
        ),
    },
    optional={
        "metadata": st.one_of(
            st.dictionaries(st.text(max_size=6), json_values(max_leaves=3), max_size=4), json_values(max_leaves=2)
        ),
        "values": st.one_of(st.dictionaries(st.text(max_size=5), _TYPED, max_size=4), json_values(max_leaves=2)),
        "checkpoint_ns": st.text(max_size=20),
        "parent_checkpoint_id": st.one_of(st.none(), st.text(max_size=20)),
        "ttl_seconds": st.one_of(st.integers(0, 3_000_000), json_values(max_leaves=1)),
    },
)


@settings(PROFILE, max_examples=examples(400))
@given(body=st.one_of(THREAD_PUT_BODIES, json_values(max_leaves=5)))
def test_a_thread_put_body_is_a_request_or_errors_naming_their_fields(body: Any) -> None:
    from baton_checkpoints.domain.threads import PutCheckpointRequest, version_key

    tried("thread_put_body", body=body)
    request = validated(body, PutCheckpointRequest)
    if request is None:
        return
    # An accepted put stores every value it names under a version key that reads back one way.
    for channel, value in request.values.items():
        assert channel in request.checkpoint.channel_versions
        assert base64.b64encode(value.raw()).decode() == value.data
        version_key(request.checkpoint.channel_versions[channel])


@settings(PROFILE, max_examples=examples(400))
@given(data=st.one_of(st.text(max_size=30), st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode())))
def test_base64_data_is_its_bytes_canonical_encoding_or_refused(data: str) -> None:
    from baton_checkpoints.domain.threads import decode_data

    tried("thread_base64", data=data)
    raw, refused = attempt(lambda: decode_data(data), ValueError)
    if refused is None:
        assert raw is not None
        assert base64.b64encode(raw).decode("ascii") == data


@settings(PROFILE, max_examples=examples(300))
@given(first=_VERSIONS, second=_VERSIONS)
def test_two_versions_share_a_key_only_when_they_are_the_same_number_or_text(first: Any, second: Any) -> None:
    from baton_checkpoints.domain.threads import version_key

    tried("thread_version_key", first=first, second=second)
    same_value = type(first) is type(second) and first == second
    same_number = isinstance(first, int | float) and isinstance(second, int | float) and first == second
    if version_key(first) == version_key(second):
        assert same_value or same_number
    elif same_value:
        raise AssertionError("one version, two keys")


@settings(PROFILE, max_examples=examples(300))
@given(version=st.one_of(_VERSIONS, st.text(alphabet=st.characters(max_codepoint=0x7F)), st.text()))
def test_a_text_version_key_is_its_json_whatever_path_writes_it(version: Any) -> None:
    from baton_checkpoints.domain.threads import version_key

    tried("thread_version_json", version=version)
    if isinstance(version, str):
        assert version_key(version) == json.dumps(version, ensure_ascii=False)
        assert json.loads(version_key(version)) == version


@settings(PROFILE, max_examples=examples(300))
@given(raw=st.one_of(st.none(), st.text(max_size=40), json_values(max_leaves=4).map(json.dumps)))
def test_a_filter_parameter_is_an_object_or_refused(raw: str | None) -> None:
    from baton_checkpoints.domain.threads import parse_filter

    tried("thread_filter", raw=raw)
    with lambda_stack():
        found, refused = attempt(lambda: parse_filter(raw), ValueError)
    if refused is None:
        assert found is None or isinstance(found, dict)


@settings(PROFILE, max_examples=examples(300))
@given(namespace=st.text(max_size=400), checkpoint_id=st.text(min_size=1, max_size=30))
def test_a_thread_checkpoint_key_reads_back_to_its_namespace_and_id(namespace: str, checkpoint_id: str) -> None:
    from baton_checkpoints.store import layout

    tried("thread_keys", namespace=namespace, checkpoint_id=checkpoint_id)
    sk = layout.thread_checkpoint_sk(namespace, checkpoint_id)
    # A namespace over 100 bytes is written as its digest (the item names it): the id reads back either way.
    short = len(namespace.encode()) <= layout.KEY_PART_BYTES
    assert layout.read_thread_checkpoint_sk(sk) == (namespace if short else None, checkpoint_id)
    assert len(sk.encode()) <= 2 + 5 + layout.KEY_PART_BYTES + 1 + 4 * len(checkpoint_id)
    assert sk.startswith(layout.thread_checkpoints(namespace))
    # No other namespace's prefix covers it (a namespace's Query never reads another's checkpoints).
    other = namespace + "x"
    assert not sk.startswith(layout.thread_checkpoints(other))
