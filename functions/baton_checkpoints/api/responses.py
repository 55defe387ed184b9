"""Building HTTP responses: the `{data, meta}` envelope, pages and errors, as JSON (written by `api/jsontext.py`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel

from baton_checkpoints.api.errors import error_fields
from baton_checkpoints.api.jsontext import dumps, fit_page, model_json, record_json

JSON = "application/json"
T = TypeVar("T")


def ok(
    data: BaseModel | str, request_id: str, status: int = 200, headers: dict[str, str] | None = None
) -> Response[str]:
    """A success envelope (`data`: a response model, or one already written as JSON)."""
    text = data if isinstance(data, str) else model_json(data)
    return Response(
        status_code=status,
        content_type=JSON,
        body=f'{{"data":{text},"meta":{dumps({"request_id": request_id})}}}',
        headers=headers or {},
    )


def plain(data: Any, request_id: str, next_cursor: Any = ...) -> Response[str]:
    """A success envelope around data that is already plain JSON (lists and dicts), without a response model: for
    answers too large to build as models cheaply (a page of LangGraph tuples). With `next_cursor`, a page's."""
    meta: dict[str, Any] = {"request_id": request_id}
    if next_cursor is not ...:
        meta["next_cursor"] = next_cursor
    return Response(status_code=200, content_type=JSON, body=dumps({"data": data, "meta": meta}))


def record(
    summary: BaseModel | str, state_text: bytes, request_id: str, headers: dict[str, str] | None = None
) -> Response[str]:
    """A success envelope of a checkpoint record (`record_json`; `summary` a model, or one already written as
    JSON)."""
    return Response(
        status_code=200,
        content_type=JSON,
        body=f'{{"data":{record_json(summary, state_text)},"meta":{dumps({"request_id": request_id})}}}',
        headers=headers or {},
    )


def page(items: list[BaseModel], request_id: str, next_cursor: str | None) -> Response[str]:
    """A page envelope: `meta.next_cursor` is null on the last page."""
    data = ",".join(model_json(item) for item in items)
    meta = dumps({"request_id": request_id, "next_cursor": next_cursor})
    return Response(status_code=200, content_type=JSON, body=f'{{"data":[{data}],"meta":{meta}}}')


def fitted_page(
    found: Sequence[T],
    shown: Callable[[T], BaseModel],
    request_id: str,
    next_cursor: str | None,
    cursor_after: Callable[[T], str | None] | None,
) -> Response[str]:
    """A page envelope of `shown(item)` for each of `found`, stopping before its `data` passes
    `limits.MAX_ANSWER_DATA_BYTES` of UTF-8 JSON (what one answer carries through Lambda): the items left out start
    the next page (`cursor_after` the last one shown). A page always shows its first item; a summary is far smaller
    than the budget (100 resources of 200 four-byte characters each come to about 120 KB)."""
    return fitted_json_page(found, lambda item: model_json(shown(item)), request_id, next_cursor, cursor_after)


def fitted_json_page(
    found: Sequence[T],
    encoded: Callable[[T], str],
    request_id: str,
    next_cursor: str | None,
    cursor_after: Callable[[T], str | None] | None,
) -> Response[str]:
    """`fitted_page` of items `encoded` as compact JSON text each (plain dicts or models): the page is cut by the
    UTF-8 bytes of what it sends, never by characters."""
    parts, next_cursor = fit_page(found, encoded, next_cursor, cursor_after)
    meta = dumps({"request_id": request_id, "next_cursor": next_cursor})
    return Response(status_code=200, content_type=JSON, body=f'{{"data":[{",".join(parts)}],"meta":{meta}}}')


def error(
    status: int,
    code: str,
    message: str,
    request_id: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[str]:
    """An error envelope; `details` is left out when there is nothing to add."""
    return Response(
        status_code=status,
        content_type=JSON,
        body=dumps({"error": error_fields(code, message, details), "meta": {"request_id": request_id}}),
        headers=headers or {},
    )


def not_modified(etag: str) -> Response[str]:
    """`304 Not Modified`: no body, the current tag."""
    return Response(status_code=304, content_type=None, body="", headers={"ETag": etag})
