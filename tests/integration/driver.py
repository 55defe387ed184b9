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
    """Invokes `baton_checkpoints.handlers.api.handler` with a sample event, reshaped for the request at hand."""

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
        from baton_checkpoints.handlers.api import handler

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
    """Counts the DynamoDB operations a client makes (botocore `before-call` events).

    A container's take of its tenant's rate-limit share (an UpdateItem of the tenant's item, `L#<tenant>`) is counted
    apart, in `takes`: it is made once per share (at most 20 requests), whatever the request, so the operations'
    own counts stay exact; `tests/integration/test_rate_limits.py` asserts what the takes add. So are the requests of
    an audit event's append (`audits`: its tenant's trail, `E#<tenant>`), which follows each management action
    (`tests/integration/test_audit.py`)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.takes = 0
        self.audits = 0

    def __call__(self, model: Any, params: Any = None, **_: Any) -> None:
        if model.name == "UpdateItem" and _is_take(params):
            self.takes += 1
            return
        if _is_audit(params):
            self.audits += 1
            return
        self.calls[model.name] += 1

    def reset(self) -> None:
        self.calls.clear()
        self.takes = 0
        self.audits = 0

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def _addresses_a_tenant(params: dict[str, Any]) -> bool:
    """True when API parameters (before serialization) are a rate-limit take: a conditional write of a tenant's item
    (the limits route's own write has no condition)."""
    key = params.get("Key") or {}
    pk = key.get("pk") or {}
    sk = key.get("sk") or {}
    return str(pk.get("S", "")).startswith("L#") and sk.get("S") == "L" and "ConditionExpression" in params


def _is_audit(params: Any) -> bool:
    """True when a request's parameters (botocore's, the body serialized) address a tenant's audit trail."""
    body = params.get("body") if isinstance(params, dict) else None
    if not body:
        return False
    text = (body.decode() if isinstance(body, bytes) else str(body)).replace(" ", "")
    return '"pk":{"S":"E#' in text or '":pk":{"S":"E#' in text


def _is_take(params: Any) -> bool:
    """True when a request's parameters (botocore's, the body serialized) are a rate-limit take: a conditional write
    of a tenant's item (the limits route's own write has no condition)."""
    body = params.get("body") if isinstance(params, dict) else None
    if not body:
        return False
    text = (body.decode() if isinstance(body, bytes) else str(body)).replace(" ", "")
    return '"pk":{"S":"L#' in text and '"sk":{"S":"L"}' in text and '"ConditionExpression"' in text


CAPACITY_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
"""The operations that take `ReturnConsumedCapacity`."""
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class CapacityMeter:
    """What DynamoDB says a client's requests consumed: registered on its botocore events, it asks every request that
    can say for `ReturnConsumedCapacity` (`INDEXES`: the table's and each index's share) and adds up the answers'
    `ConsumedCapacity`. Only a real engine's figures mean anything (DynamoDB Local's; moto's are not DynamoDB's); a
    request that fails (a refused condition) answers none."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, list[dict[str, Any]]]] = []
        self._takes: list[bool] = []
        """Per request asked and not yet answered: whether it is a rate-limit take (answers come in order)."""
        """Per request answered, its operation and the `ConsumedCapacity` entries (one per table) it carried."""
        self.asked = 0

    def ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        """`before-parameter-build`: ask for the consumed capacity (unless the request already does)."""
        if model.name in CAPACITY_OPERATIONS:
            params["ReturnConsumedCapacity"] = "INDEXES"  # (over the usage meter's TOTAL: its figure is in both)
            self.asked += 1
            self._takes.append(model.name == "UpdateItem" and _addresses_a_tenant(params))

    def collect(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        """`after-call`: keep what the answer says it consumed (a rate-limit take's apart: `CallCounter`)."""
        take = self._takes.pop(0) if model.name in CAPACITY_OPERATIONS and self._takes else False
        if model.name not in CAPACITY_OPERATIONS or "Error" in parsed or take:
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        self.answers.append((model.name, entries))

    def reset(self) -> None:
        self.answers.clear()
        self.asked = 0

    def units(self, operations: frozenset[str] | None = None) -> float:
        """Capacity units of the answered requests (of `operations`: all when None), indexes included."""
        return sum(
            float(entry.get("CapacityUnits", 0))
            for name, entries in self.answers
            if operations is None or name in operations
            for entry in entries
        )

    @property
    def write_units(self) -> float:
        """Write units of the answered writes, index maintenance included."""
        return self.units(WRITE_OPERATIONS)

    @property
    def read_units(self) -> float:
        """Read units of the answered reads."""
        return self.units(CAPACITY_OPERATIONS - WRITE_OPERATIONS)

    def index_units(self, index: str) -> float:
        """Units the answered requests consumed in the global index `index`."""
        return sum(
            float(entry.get("GlobalSecondaryIndexes", {}).get(index, {}).get("CapacityUnits", 0))
            for _, entries in self.answers
            for entry in entries
        )

    def attach(self, client: Any) -> None:
        """Register on `client`'s events."""
        client.meta.events.register("before-parameter-build.dynamodb", self.ask)
        client.meta.events.register("after-call.dynamodb", self.collect)

    def detach(self, client: Any) -> None:
        """Unregister from `client`'s events."""
        client.meta.events.unregister("before-parameter-build.dynamodb", self.ask)
        client.meta.events.unregister("after-call.dynamodb", self.collect)
