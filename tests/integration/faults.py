"""Fault injection at the wire of the handler's DynamoDB client, in front of moto.

moto answers a botocore client on its `before-send` event. `FaultInjector` takes moto's place on the handler's
client and hands each request to moto itself, so it decides per request what the client sees:

- a fault BEFORE the request reaches moto: moto never sees it, nothing lands, the client gets an error answer
  (throttling, 5xx, a cancelled transaction) or a transport failure (timeout, dropped or refused connection);
- a fault AFTER moto processed it: the write landed, then its answer is lost (a timeout, a dropped connection, a
  5xx), and botocore's standard retry sends the same request again, as it does against DynamoDB.

Everything else is real: botocore serialises, signs, parses the error answers and retries them by its own rules;
moto applies conditions and transactions.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, cast

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import BotoCoreError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

# A persistent fault stops after this many attempts: a store that loops on it forever fails its test instead of
# hanging the run.
PERSISTENT_CAP = 30

TAKE = "TakeShare"
"""The name the injector gives a container's take of its tenant's rate-limit share: a conditional UpdateItem of the
tenant's item (`L#<tenant>`). The operator's write of a tenant's limits (`PUT /v1/tenants/{tenant_id}/limits`, an
UpdateItem of that item with no condition) keeps the name UpdateItem: it is the route's own write."""
SINGLE_WRITES = frozenset({"UpdateItem", "PutItem", "DeleteItem", TAKE})
TRANSACTION = "TransactWriteItems"
BATCH_WRITE = "BatchWriteItem"
WRITES = SINGLE_WRITES | {TRANSACTION, BATCH_WRITE}
"""Operations that change the table: a fault after one landed loses the answer of a write."""


class Phase(Enum):
    """Where the fault strikes a request."""

    BEFORE = "before"
    """Before the request reaches DynamoDB: nothing landed."""
    AFTER = "after"
    """After DynamoDB applied it: the write landed and its answer was lost."""


class Duration(Enum):
    """How many attempts the fault strikes."""

    ONCE = "once"
    """The first attempt only: botocore's retry (or the store's) may absorb it."""
    EVERY = "every"
    """Every attempt (up to `PERSISTENT_CAP`). Before landing, nothing can get through, so the answer must be a
    503; after landing, every answer is lost, so a 503 is ambiguous: the write landed once."""


@dataclass(frozen=True)
class FaultKind:
    """One way DynamoDB or the network fails a request."""

    name: str
    code: str | None = None
    """The AWS error code of the answer; None for a transport failure."""
    status: int = 400
    reasons: tuple[str, ...] = ()
    """For `TransactionCanceledException`: the cancellation reason of the transaction's first item."""
    transport: type[BotoCoreError] | None = None
    """The exception botocore raises for a failure of the connection itself."""
    retried_by_botocore: bool = True
    """Whether botocore's standard retry mode retries it (throttling codes, 5xx, transport failures)."""
    unprocessed: bool = False
    """A batch answered 200 with every request left unprocessed (what DynamoDB does when throttled): a BatchGetItem's
    keys in `UnprocessedKeys`, a BatchWriteItem's puts and deletes in `UnprocessedItems`, none of them applied."""


THROTTLING = FaultKind("throttling", "ThrottlingException")
THROUGHPUT = FaultKind("throughput_exceeded", "ProvisionedThroughputExceededException")
REQUEST_LIMIT = FaultKind("request_limit", "RequestLimitExceeded")
INTERNAL_500 = FaultKind("internal_500", "InternalServerError", status=500)
UNAVAILABLE_503 = FaultKind("unavailable_503", "ServiceUnavailable", status=503)
TRANSACTION_CONFLICT = FaultKind("transaction_conflict", "TransactionConflictException", retried_by_botocore=False)
CANCELLED_THROTTLING = FaultKind(
    "cancelled_throttling", "TransactionCanceledException", reasons=("ThrottlingError",), retried_by_botocore=False
)
CANCELLED_THROUGHPUT = FaultKind(
    "cancelled_throughput",
    "TransactionCanceledException",
    reasons=("ProvisionedThroughputExceeded",),
    retried_by_botocore=False,
)
READ_TIMEOUT = FaultKind("read_timeout", transport=ReadTimeoutError)
CONNECTION_DROPPED = FaultKind("connection_dropped", transport=ConnectionClosedError)
UNREACHABLE = FaultKind("unreachable", transport=EndpointConnectionError)
UNPROCESSED_KEYS = FaultKind("unprocessed_keys", unprocessed=True, retried_by_botocore=False)
UNPROCESSED_ITEMS = FaultKind("unprocessed_items", unprocessed=True, retried_by_botocore=False)

THROTTLE_CODES = (THROTTLING, THROUGHPUT, REQUEST_LIMIT)
SERVER_ERRORS = (INTERNAL_500, UNAVAILABLE_503)
TRANSPORT_FAILURES = (READ_TIMEOUT, CONNECTION_DROPPED, UNREACHABLE)


def kinds_for(operation: str) -> tuple[FaultKind, ...]:
    """The faults DynamoDB or the network can answer `operation` with, before it reaches the table."""
    common = (*THROTTLE_CODES, *SERVER_ERRORS, *TRANSPORT_FAILURES)
    if operation == "BatchGetItem":
        return (*common, UNPROCESSED_KEYS)
    if operation == BATCH_WRITE:
        return (*common, UNPROCESSED_ITEMS)
    if operation in SINGLE_WRITES:
        return (*common, TRANSACTION_CONFLICT)
    if operation == TRANSACTION:
        return (*common, TRANSACTION_CONFLICT, CANCELLED_THROTTLING, CANCELLED_THROUGHPUT)
    return common


FAULT_KINDS: Final = os.environ.get("BATON_FAULT_KINDS") or "every"
if FAULT_KINDS not in ("every", "classes"):
    raise ValueError(f"BATON_FAULT_KINDS is every or classes, not {FAULT_KINDS!r}")
KIND_BY_KIND: Final = FAULT_KINDS == "every"
"""Whether a step's faults that botocore retries are tried kind by kind (`every`, what `make test` runs), or one kind
of each class botocore treats alike (`BATON_FAULT_KINDS=classes`, what `make check` runs: 601 of the module's 921
tests, and each class of fault still meets every step). Each kind's classification is then proven by the full run."""

# One of each class botocore's standard retry treats alike (a throttling code, a 5xx, a transport failure): a
# fault of one attempt never reaches the store, so the others of its class would test the same thing again.
ONE_ATTEMPT_REPRESENTATIVES = frozenset({THROTTLING, INTERNAL_500, CONNECTION_DROPPED})


def fault_plan(operation: str) -> list[tuple[FaultKind, Phase, Duration]]:
    """The faults worth injecting at one step.

    Before the request lands: every kind on every attempt (the store must classify each code it can meet), and
    on one attempt one representative of each class botocore retries, plus every kind it does not retry. After a
    write landed: its answer lost once (a timeout, a dropped connection, a 500 after the commit), and lost on
    every attempt (timeouts, 500s).
    """
    plan: list[tuple[FaultKind, Phase, Duration]] = []
    for kind in kinds_for(operation):
        plan.append((kind, Phase.BEFORE, Duration.EVERY))
        if kind in ONE_ATTEMPT_REPRESENTATIVES or not kind.retried_by_botocore:
            plan.append((kind, Phase.BEFORE, Duration.ONCE))
    if operation in WRITES:
        plan += [(kind, Phase.AFTER, Duration.ONCE) for kind in (READ_TIMEOUT, CONNECTION_DROPPED, INTERNAL_500)]
        plan += [(kind, Phase.AFTER, Duration.EVERY) for kind in (READ_TIMEOUT, INTERNAL_500)]
    return plan


@dataclass
class Fault:
    """A fault armed on one operation."""

    operation: str
    kind: FaultKind
    phase: Phase
    duration: Duration
    between: Callable[[], None] | None = None
    """Run once, after the first struck attempt landed and before botocore's retry goes out (another writer)."""
    skip: int = 0
    """Requests of `operation` let through untouched before the fault strikes: 1 strikes a route's second Query
    (say, the one after the id index's), or a purge's second page."""
    remaining: int = 0
    struck: int = 0

    def __post_init__(self) -> None:
        self.remaining = 1 if self.duration is Duration.ONCE else PERSISTENT_CAP

    @property
    def exhausted(self) -> bool:
        """True when a persistent fault ran out: the store kept retrying past any sensible bound."""
        return self.duration is Duration.EVERY and self.remaining == 0


_TENANT_KEY = re.compile(rb'"pk":\s*\{"S":\s*"L#')
_CONDITION = re.compile(rb'"ConditionExpression":')
_USAGE_DAY = re.compile(rb'"sk":\s*\{"S":\s*"U#')
"""A tenant's usage of a day (`store/usage.py`): in the tenant's partition, written by the usage meter, no take."""


def is_take(operation: str, body: bytes | str | None) -> bool:
    """True for a request that is a rate-limit take (`TAKE`): a conditional UpdateItem of a tenant's own item (not
    one of its usage days)."""
    if operation != "UpdateItem":
        return False
    raw = body.encode() if isinstance(body, str) else body or b""
    return bool(_TENANT_KEY.search(raw)) and bool(_CONDITION.search(raw)) and not _USAGE_DAY.search(raw)


@dataclass
class FaultInjector:
    """Stands in for moto on one client's `before-send` event, and passes every request on to moto."""

    moto: Callable[..., AWSResponse | None]
    faults: list[Fault] = field(default_factory=list)
    attempts: Counter[str] = field(default_factory=Counter)
    """Requests per operation that reached the wire, retries included."""

    def arm(self, fault: Fault) -> Fault:
        """Strike `fault.operation` from now on."""
        self.faults.append(fault)
        return fault

    def __call__(self, request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        if is_take(operation, cast("bytes | str | None", request.body)):
            operation = TAKE  # a rate-limit take: a step of its own, so that a route's own UpdateItems count alike
        self.attempts[operation] += 1
        fault = next((f for f in self.faults if f.operation == operation and f.remaining > 0), None)
        if fault is not None and fault.skip > 0:
            fault.skip -= 1
            fault = None
        if fault is None:
            return self.moto(event_name=event_name, request=request, **kwargs)
        fault.remaining -= 1
        fault.struck += 1
        if fault.phase is Phase.AFTER:
            landed = self.moto(event_name=event_name, request=request, **kwargs)
            if landed is not None:
                landed.content  # noqa: B018 - read the answer, as the network would have delivered it
            if fault.between is not None:
                between, fault.between = fault.between, None
                between()
        return _strike(fault.kind, request)


def _strike(kind: FaultKind, request: AWSPreparedRequest) -> AWSResponse:
    """Raise the transport failure of `kind`, or return DynamoDB's error answer for it."""
    if kind.transport is not None:
        raise kind.transport(endpoint_url=request.url, error=f"Injected fault: {kind.name}")
    sent = json.loads(cast(bytes, request.body or b"{}"))
    if kind.unprocessed and all(isinstance(writes, list) for writes in sent["RequestItems"].values()):
        # A BatchWriteItem (its tables hold lists of puts and deletes; a BatchGetItem's hold {"Keys": ...}).
        return _answer(request, 200, {"UnprocessedItems": sent["RequestItems"]})
    if kind.unprocessed:
        return _answer(
            request, 200, {"Responses": {t: [] for t in sent["RequestItems"]}, "UnprocessedKeys": sent["RequestItems"]}
        )
    body: dict[str, Any] = {
        "__type": f"com.amazonaws.dynamodb.v20120810#{kind.code}",
        "message": f"Injected fault: {kind.name}",
    }
    if kind.reasons:
        # One reason per item of the transaction, in order: the first item was throttled, the others passed.
        items = len(sent.get("TransactItems", [])) or 1
        first = [{"Code": reason, "Message": f"Injected fault: {kind.name}"} for reason in kind.reasons]
        body["CancellationReasons"] = first + [{"Code": "None"}] * (items - len(first))
        body["message"] = (
            f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(kind.reasons)}]"
        )
    return _answer(request, kind.status, body)


class _Body:
    """The raw body of a fake answer, as botocore reads it."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


def _answer(request: AWSPreparedRequest, status: int, body: dict[str, Any]) -> AWSResponse:
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "injected-fault"}
    return AWSResponse(request.url, status, headers, _Body(json.dumps(body).encode()))  # type: ignore[arg-type]


def onward(moto: Callable[..., AWSResponse | None]) -> Callable[..., AWSResponse]:
    """What a request not struck reaches: in-process moto when it answers the request's endpoint, else the endpoint
    itself over the network (DynamoDB Local on a loopback port: moto lets requests to it through), so that a fault
    AFTER a request lands on either engine."""
    from botocore.httpsession import URLLib3Session

    network: list[URLLib3Session] = []

    def send(request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse:
        answered = moto(request=request, **kwargs)
        if answered is not None:
            return answered
        if not network:
            network.append(URLLib3Session(timeout=30))
        return network[0].send(request)

    return send


@contextmanager
def injected(client: Any) -> Iterator[FaultInjector]:
    """Put a `FaultInjector` between `client` and its engine (moto in-process, or DynamoDB Local) for the block's
    duration."""
    from moto.core.models import botocore_stubber

    events = client.meta.events
    injector = FaultInjector(moto=onward(botocore_stubber))
    events.unregister("before-send", botocore_stubber)
    events.register("before-send.dynamodb", injector)
    try:
        yield injector
    finally:
        events.unregister("before-send.dynamodb", injector)
        events.register("before-send", botocore_stubber)
