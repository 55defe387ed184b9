"""The tools' input schemas, taken from the routes' request models and the contract's parameter rules, so that a
model filling a tool's arguments sees exactly the rules the route will check."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, TypeAdapter

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.lifecycle import Kind, Status
from baton_checkpoints.domain.models import Identifier, SubjectId

Schema = dict[str, Any]

CHECKPOINT_ID: Schema = {
    "type": "string",
    "pattern": r"^ckpt_[0-9a-f]{32}$",
    "description": "The checkpoint's id (ckpt_ and 32 lowercase hex digits), as a save or a list returned it.",
}
LEASE_TOKEN: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "The token baton_lease_acquire returned for this checkpoint's live lease.",
}
IDEMPOTENCY_KEY: Schema = {
    "type": "string",
    "pattern": rf"^[\x20-\x7e]{{1,{limits.IDEMPOTENCY_KEY_MAX_CHARS}}}$",
    "description": (
        "Optional: the same key on a retry of the same call answers the first call's result again instead of "
        "writing twice (remembered 24 hours; the same key with other arguments is an IDEMPOTENCY_KEY_REUSED error)."
    ),
}


def _plain(schema: Schema, definitions: dict[str, Schema]) -> Schema:
    """`schema` with its `$ref`s inlined, `X | None` written as `X` (leaving a field out is what a model should
    do; null is accepted all the same), and pydantic's titles left out."""
    if "$ref" in schema:
        return _plain(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        kept = [branch for branch in branches if branch != {"type": "null"}]
        if len(kept) == 1:
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default", "title")}
            return {**_plain(kept[0], definitions), **rest} if rest else _plain(kept[0], definitions)
    plain: Schema = {}
    for key, value in schema.items():
        if key in ("title", "$defs") or (key == "default" and value is None):
            continue
        if key == "properties":
            plain[key] = {name: _plain(prop, definitions) for name, prop in value.items()}
        elif key == "items" and isinstance(value, dict):
            plain[key] = _plain(value, definitions)
        else:
            plain[key] = copy.deepcopy(value)
    return plain


def of_model(model: type[BaseModel], descriptions: dict[str, str]) -> Schema:
    """The input schema of a request model (its required fields, ranges, enums and patterns), with
    `descriptions` for the fields the model does not describe itself."""
    generated = model.model_json_schema()
    schema = _plain(generated, generated.get("$defs", {}))
    schema.pop("description", None)
    for name, text in descriptions.items():
        schema["properties"][name].setdefault("description", text)
    return schema


def of_type(annotation: Any, description: str) -> Schema:
    """The schema of one parameter's type (an id, an enum), with its description."""
    return {**_plain(TypeAdapter(annotation).json_schema(), {}), "description": description}


def subject_id(description: str = "Who or what the work is about (1-200 characters, no control characters).") -> Schema:
    """A subject id parameter."""
    return of_type(SubjectId, description)


def agent_id(description: str) -> Schema:
    """An agent id parameter."""
    return of_type(Identifier, description)


def kind(description: str) -> Schema:
    """A checkpoint kind parameter."""
    return of_type(Kind, description)


def status(description: str) -> Schema:
    """A checkpoint status parameter."""
    return of_type(Status, description)


def page_limit() -> Schema:
    """The page size of a list."""
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": limits.MAX_PAGE_LIMIT,
        "description": f"How many checkpoints per page (default {limits.DEFAULT_PAGE_LIMIT}).",
    }


def cursor() -> Schema:
    """The opaque cursor of a list's next page."""
    return {
        "type": "string",
        "maxLength": 2048,
        "description": "next_cursor of the previous call with the same arguments, unchanged, for the next page.",
    }


def closed(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """An object of exactly these arguments."""
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema
