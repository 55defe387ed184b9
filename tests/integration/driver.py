"""Drives the api handler with the sample events of `events/`, against moto, and counts AWS calls."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str) -> dict[str, Any]:
    """A sample event from `events/<name>.json`."""
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))


@dataclass
class Result:
    """A handler's answer, with the JSON body parsed."""

    status: int
    headers: dict[str, str]
    raw_body: str

    @property
    def body(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None

    @property
    def data(self) -> Any:
        return self.body["data"]

    @property
    def error(self) -> dict[str, Any]:
        return self.body["error"]

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


class ApiDriver:
    """Invokes `baton.handlers.api.handler` with a sample event, reshaped for the request at hand."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def invoke(
        self,
        event_name: str,
        *,
        path: str | None = None,
        query: dict[str, str] | None = None,
        body: Any = None,
        raw_body: str | None = None,
        headers: dict[str, str | None] | None = None,
        secret: str | None = None,
    ) -> Result:
        """Send the sample event `event_name`, with the path, query, body and headers replaced where given.

        A header given as None is removed. The bearer secret defaults to the driver's.
        """
        from baton.handlers.api import handler

        event = copy.deepcopy(load_event(event_name))
        event["requestContext"]["requestId"] = str(uuid.uuid4())
        event["headers"]["authorization"] = f"Bearer {secret or self.secret}"
        if path is not None:
            event["rawPath"] = path
            event["requestContext"]["http"]["path"] = path
        if query is not None:
            event["rawQueryString"] = urlencode(query)
            if query:
                event["queryStringParameters"] = dict(query)
            else:
                event.pop("queryStringParameters", None)
        if body is not None:
            event["body"] = json.dumps(body)
        if raw_body is not None:
            event["body"] = raw_body
        for name, value in (headers or {}).items():
            if value is None:
                event["headers"].pop(name.lower(), None)
            else:
                event["headers"][name.lower()] = value
        answer = handler(event, None)
        return Result(answer["statusCode"], dict(answer.get("headers") or {}), body_text(answer))


def body_text(answer: dict[str, Any]) -> str:
    """A handler answer's body as text, as API Gateway hands it on: base64 decoded, then gunzipped when the answer
    says `Content-Encoding: gzip` (what a client's HTTP library does)."""
    body = answer.get("body") or ""
    if not answer.get("isBase64Encoded"):
        return str(body)
    raw = base64.b64decode(body)
    headers = {k.lower(): v for k, v in (answer.get("headers") or {}).items()}
    if headers.get("content-encoding") == "gzip":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


class CallCounter:
    """Counts the DynamoDB operations a client makes (botocore `before-call` events)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __call__(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())
