"""The thread requests' values: base64 accepted only in its one canonical spelling, decoded once, never shown."""

from __future__ import annotations

import base64
import binascii
import itertools

import pytest

from baton_checkpoints.domain.threads import (
    PutCheckpointRequest,
    PutWritesRequest,
    TypedValue,
    decode_data,
    is_canonical_base64,
)

CHARACTERS = "AQgwBR+/=é\n"
"""Letters that may and may not end a padded group, the other two symbols, padding, and what base64 never holds."""


def _canonical(data: str) -> bool:
    """The rule as the standard library states it: decodes strictly, and its bytes encode to the same text."""
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return False
    return base64.b64encode(raw).decode("ascii") == data


@pytest.mark.parametrize("length", range(9))
def test_canonical_base64_is_exactly_what_the_standard_library_decodes_and_encodes_back(length: int) -> None:
    # Every text of up to five of these characters (longer ones: four of them after a full group)
    prefix = "QUJD" if length > 5 else ""
    for chars in itertools.product(CHARACTERS, repeat=length - len(prefix)):
        data = prefix + "".join(chars)
        assert is_canonical_base64(data) == _canonical(data), data


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xfe", b"abc", b"\xfb\xff\xbf", bytes(range(256))])
def test_a_values_bytes_are_decoded_from_its_canonical_text(raw: bytes) -> None:
    data = base64.b64encode(raw).decode("ascii")
    assert decode_data(data) == raw
    assert TypedValue.model_validate({"type": "bytes", "data": data}).raw() == raw


@pytest.mark.parametrize("data", ["QR==", "QUI", "QUJD=", "====", "QU=D", "QUJ\n", "QUJé"])
def test_a_text_that_is_not_canonical_base64_is_refused_with_the_contracts_sentence(data: str) -> None:
    with pytest.raises(ValueError, match="must be standard base64"):
        decode_data(data)
    with pytest.raises(ValueError, match="must be standard base64"):
        TypedValue.model_validate({"type": "bytes", "data": data})


def test_a_thread_puts_repr_shows_neither_its_values_nor_its_checkpoint() -> None:
    data = base64.b64encode(b"somebody's state").decode("ascii")
    request = PutCheckpointRequest.model_validate(
        {
            "checkpoint": {"id": "c1", "channel_versions": {"messages": 2}, "versions_seen": {"agent": {"x": 1}}},
            "metadata": {"step": 1},
            "values": {"messages": {"type": "bytes", "data": data}},
        }
    )
    shown = repr(request)
    assert data not in shown
    assert "values='<dict of 1>'" in shown
    assert "checkpoint='<CheckpointBody>'" in shown
    assert "versions_seen" not in shown


def test_a_put_writes_repr_shows_its_writes_by_number() -> None:
    data = base64.b64encode(b"somebody's write").decode("ascii")
    request = PutWritesRequest.model_validate(
        {"checkpoint_id": "c1", "task_id": "t1", "writes": [{"channel": "a", "type": "bytes", "data": data}] * 2}
    )
    shown = repr(request)
    assert data not in shown
    assert "writes='<list of 2>'" in shown
    assert "task_id='t1'" in shown
