"""Answers as JSON text, written the same way for an HTTP answer and a tool's result (no transport here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from baton_checkpoints.domain import limits

T = TypeVar("T")


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 characters kept as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def model_json(model: BaseModel) -> str:
    """A response model as compact JSON: the fields its builder set, in the model's order (pydantic writes it)."""
    return model.model_dump_json(exclude_unset=True)


def record_json(summary: BaseModel | str, state_text: bytes) -> str:
    """A checkpoint record as compact JSON: its summary's fields (a model, or already written as JSON), then `state`
    written as the canonical JSON the store holds, spliced in as it is (parsing a 2 MB state only to serialize it
    again cost ~25 ms a read)."""
    summary_json = summary if isinstance(summary, str) else model_json(summary)
    if not summary_json.endswith("}"):
        raise ValueError("a record's summary must be a JSON object")
    return f'{summary_json[:-1]},"state":{state_text.decode("utf-8")}}}'


def fit_page(
    found: Sequence[T],
    encoded: Callable[[T], str],
    next_cursor: str | None,
    cursor_after: Callable[[T], str | None] | None,
) -> tuple[list[str], str | None]:
    """The items of a page `encoded` as compact JSON text each, stopping before the page passes
    `limits.MAX_ANSWER_DATA_BYTES` of UTF-8 JSON (what one answer carries through Lambda), and the cursor of what
    follows: the items left out start the next page (`cursor_after` the last one kept). A page always keeps its
    first item. The page is cut by the UTF-8 bytes of what it sends, never by characters."""
    parts: list[str] = []
    size = 2  # the brackets
    for position, item in enumerate(found):
        text = encoded(item)
        size += 1 + (len(text) if text.isascii() else len(text.encode("utf-8")))
        if parts and size > limits.MAX_ANSWER_DATA_BYTES and cursor_after is not None:
            return parts, cursor_after(found[position - 1])
        parts.append(text)
    return parts, next_cursor
