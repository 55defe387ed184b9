"""Path parameters that several routers share: their documentation and the check each route makes of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated
from urllib.parse import unquote, unquote_plus

from aws_lambda_powertools.event_handler.openapi.params import Path

from baton_checkpoints.api.operations.inputs import Named, checkpoint_id
from baton_checkpoints.domain import limits
from baton_checkpoints.domain.canonical import pointer
from baton_checkpoints.domain.errors import ValidationFailed


def check_encoding(path_arguments: Mapping[str, str], raw_query: str | None) -> None:
    """Refuse a request whose path parameters or query string percent-encode bytes that are not UTF-8, or that
    repeats a query parameter (400 naming the parameter): a lenient decoder would replace bad bytes with U+FFFD, so
    that `caf%E9` and `caf%E8` would name one subject; API Gateway joins a repeated parameter's values with commas.
    Run by the gate before any route, so every route's parameters are one text each once it runs."""
    for name, raw in path_arguments.items():
        if not _is_utf8(raw, unquote):
            raise ValidationFailed.single(
                pointer(name),
                f"The path parameter {name} must be percent-encoded UTF-8; it holds bytes that are not UTF-8.",
                "path",
            )
    seen: set[str] = set()
    for pair in (raw_query or "").split("&"):
        raw_name, _, raw_value = pair.partition("=")
        if _is_utf8(raw_name, unquote_plus) and _is_utf8(raw_value, unquote_plus):
            name = unquote_plus(raw_name)
            if name and name in seen:
                # API Gateway joins repeated parameters with commas: subject_id=a&subject_id=b would name "a,b".
                raise ValidationFailed.single(pointer(name), f"The query parameter {name} must be given once.", "query")
            seen.add(name)
            continue
        name = unquote_plus(raw_name) if _is_utf8(raw_name, unquote_plus) else raw_name
        raise ValidationFailed.single(
            pointer(name),
            f"The query parameter {name} must be percent-encoded UTF-8; it holds bytes that are not UTF-8.",
            "query",
        )


def _is_utf8(raw: str, decode: Callable[..., str]) -> bool:
    """True when `raw`'s percent-escapes decode as UTF-8 (a text without escapes always does)."""
    if "%" not in raw:
        return True
    try:
        decode(raw, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


# Path parameters are checked by the routes themselves, after percent-decoding and with their own messages; the
# document states the same rules (json_schema_extra documents without validating the raw value again).
SubjectIdParameter = Annotated[
    str,
    Path(
        description=(
            f"1 to {limits.MAX_SUBJECT_ID_CHARS} characters without control characters, percent-encoded; "
            "anything else answers 400."
        ),
        json_schema_extra={
            "minLength": 1,
            "maxLength": limits.MAX_SUBJECT_ID_CHARS,
            "pattern": r"^[^\x00-\x1f\x7f-\x9f]+$",
        },
    ),
]


def subject_from_path(raw: str) -> str:
    """The subject a path names: `raw` percent-decoded, 1 to `MAX_SUBJECT_ID_CHARS` characters without control
    characters (C0, DEL, C1), else 400 naming `subject_id`."""
    subject = unquote(raw)
    if (
        not subject
        or len(subject) > limits.MAX_SUBJECT_ID_CHARS
        or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in subject)
    ):
        raise ValidationFailed.single(
            pointer("subject_id"),
            f"The path parameter subject_id must be 1 to {limits.MAX_SUBJECT_ID_CHARS} characters without control "
            "characters.",
            "path",
        )
    return subject


CheckpointIdParameter = Annotated[
    str,
    Path(
        description="ckpt_ and 32 lowercase hex digits; anything else answers 400.",
        json_schema_extra={"pattern": r"^ckpt_[0-9a-f]{32}$"},
    ),
]


def checkpoint_id_from_path(raw: str) -> str:
    """The checkpoint id of a path parameter, percent-decoded; 400 naming it when it is not an id."""
    return checkpoint_id(unquote(raw), Named.path("checkpoint_id"))


ThreadIdParameter = Annotated[
    str,
    Path(
        description="1 to 200 characters without control characters, percent-encoded; anything else answers 400.",
        json_schema_extra={"minLength": 1, "maxLength": 200, "pattern": r"^[^\x00-\x1f\x7f-\x9f]+$"},
    ),
]


def thread_from_path(raw: str) -> str:
    """The thread a path names: `raw` percent-decoded, 1 to 200 characters without control characters, else 400
    naming `thread_id`."""
    thread_id = unquote(raw)
    if not thread_id or len(thread_id) > 200 or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in thread_id):
        raise ValidationFailed.single(
            "/thread_id",
            "The path parameter thread_id must be 1 to 200 characters without control characters.",
            "path",
        )
    return thread_id
