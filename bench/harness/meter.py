"""A moto server on 127.0.0.1 that meters every DynamoDB and S3 request its clients make, without their knowing.

The benchmark's clients (Baton's handler, each LangGraph saver) run in their own processes and talk to this server
over HTTP like to DynamoDB. A WSGI middleware in front of moto records each request: its operation, bytes in and
out, and, read through moto's own API before and after the request is served, the old and new image of every item
it writes and the full items it reads. `bench.billing.capacity` turns those into what DynamoDB would bill, with the
indexes taken from DescribeTable. The extra reads happen in this process while the client waits on its socket, so
they never count in the client's CPU time.

S3 requests reach the same server, path-style (`/<bucket>/<key>`, as Baton's client and any client of a loopback
endpoint address them), signed for the `s3` service. Each is counted by operation (told by its method, its path and
its query: PUT of a key is a PutObject, PUT `?tagging` a PutObjectTagging, GET a GetObject, HEAD a HeadObject,
DELETE a DeleteObject), with the bytes sent and received and, for an object written, the bytes it stores.

Requests are served one at a time (moto is not atomic under threads; the benchmark drives one client at a time).
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.billing import capacity
from bench.billing.capacity import Item, ItemWrite, Table

StartResponse = Callable[..., Any]
TARGET_PREFIX = "DynamoDB_20120810."
S3_SCOPE = "/s3/aws4_request"
"""The end of a SigV4 credential scope for S3: in the Authorization header, or in a presigned URL's query."""
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
# Headers an internal request copies from the metered one: moto reads the region and account from the signature.
_COPIED_HEADERS = ("HTTP_AUTHORIZATION", "HTTP_X_AMZ_DATE", "HTTP_HOST", "HTTP_X_AMZ_SECURITY_TOKEN")
_PLACEHOLDER = re.compile(r"[:#][A-Za-z0-9_]+")


@dataclass
class Call:
    """One metered DynamoDB request."""

    operation: str
    status: int
    request_bytes: int
    response_bytes: int
    writes: list[ItemWrite] = field(default_factory=list)
    """One entry per item written (a failed conditional write is billed as a write of the item it checked)."""
    written: dict[tuple[str, tuple[str, ...]], Item | None] = field(default_factory=dict)
    """(table, key) -> the item's image after the request."""
    read_units: float = 0.0
    read_bytes: int = 0
    """Bytes of the items the request read, as DynamoDB sizes them (what read units are billed on)."""
    conditional: bool = False
    """The request carried a condition (`ConditionExpression`, or a ConditionCheck in a transaction)."""
    consistent: bool = False
    """A read asked for strong consistency."""
    error: str | None = None

    @property
    def write_units(self) -> int:
        """Write units of the request, index maintenance included."""
        return sum(w.units for w in self.writes)


@dataclass
class S3Call:
    """One metered S3 request."""

    operation: str
    status: int
    request_bytes: int
    """Bytes of the request's body (the object's bytes for a PutObject)."""
    response_bytes: int
    """Bytes of the answer's body (the object's bytes for a GetObject)."""
    stored_bytes: int = 0
    """Bytes of the object a successful PutObject or UploadPart stored."""
    error: str | None = None


def s3_operation(method: str, path: str, query: str, headers: dict[str, Any]) -> str:
    """The S3 operation of a path-style request, from its method, path (`/<bucket>[/<key>]`) and query."""
    parameters = {part.split("=", 1)[0] for part in query.split("&") if part}
    has_key = "/" in path.strip("/")
    if not has_key:
        bucket_operations = {
            "PUT": "CreateBucket",
            "GET": "ListObjects",
            "HEAD": "HeadBucket",
            "DELETE": "DeleteBucket",
        }
        if method == "POST" and "delete" in parameters:
            return "DeleteObjects"
        if method == "PUT" and parameters:
            return "PutBucketConfiguration"
        if method == "GET" and parameters - {"list-type", "prefix", "delimiter", "continuation-token", "max-keys"}:
            return "GetBucketConfiguration"
        return bucket_operations.get(method, f"{method} bucket")
    if "tagging" in parameters:
        return {"PUT": "PutObjectTagging", "GET": "GetObjectTagging", "DELETE": "DeleteObjectTagging"}.get(
            method, f"{method} ?tagging"
        )
    if method == "PUT":
        if "uploadId" in parameters:
            return "UploadPart"
        return "CopyObject" if "HTTP_X_AMZ_COPY_SOURCE" in headers else "PutObject"
    if method == "POST":
        return "CompleteMultipartUpload" if "uploadId" in parameters else "CreateMultipartUpload"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in parameters else "DeleteObject"
    return {"GET": "GetObject", "HEAD": "HeadObject"}.get(method, f"{method} object")


def _is_s3(environ: dict[str, Any]) -> bool:
    """Whether a request is signed for S3 (header or presigned query)."""
    if S3_SCOPE in str(environ.get("HTTP_AUTHORIZATION", "")):
        return True
    query = str(environ.get("QUERY_STRING", ""))
    return "X-Amz-Credential=" in query and ("%2Fs3%2Faws4_request" in query or S3_SCOPE in query)


@dataclass
class Operation:
    """Every request one client operation (a save, a read) made, and what they cost."""

    calls: list[Call]
    s3_calls: list[S3Call] = field(default_factory=list)

    @property
    def requests(self) -> Counter[str]:
        """Requests by DynamoDB operation."""
        return Counter(c.operation for c in self.calls)

    @property
    def write_units(self) -> int:
        """Write units, index maintenance included."""
        return sum(c.write_units for c in self.calls)

    @property
    def index_write_units(self) -> int:
        """The part of `write_units` spent on secondary indexes."""
        return sum(w.index_units for c in self.calls for w in c.writes)

    @property
    def index_actions(self) -> Counter[str]:
        """What the writes did to index entries (put, delete, delete+put), counted."""
        return Counter(i.action for c in self.calls for w in c.writes for i in w.indexes if i.action != "none")

    @property
    def read_units(self) -> float:
        """Read units."""
        return sum(c.read_units for c in self.calls)

    @property
    def item_bytes(self) -> int:
        """Bytes of the items this operation left written (each item once, its last image)."""
        final: dict[tuple[str, tuple[str, ...]], Item | None] = {}
        for call in self.calls:
            final.update(call.written)
        return sum(capacity.item_bytes(item) for item in final.values())

    @property
    def request_bytes(self) -> int:
        """Bytes the client sent to DynamoDB (request bodies)."""
        return sum(c.request_bytes for c in self.calls)

    @property
    def response_bytes(self) -> int:
        """Bytes DynamoDB sent back (response bodies)."""
        return sum(c.response_bytes for c in self.calls)

    @property
    def shape(self) -> list[str]:
        """The requests in order, each marked conditional (`?`) or consistent (`!`): `UpdateItem?`, `Query!`."""
        return [c.operation + ("?" if c.conditional else "") + ("!" if c.consistent else "") for c in self.calls]

    def figures(self) -> dict[str, Any]:
        """Everything metered, as plain JSON values."""
        return {
            "requests": dict(self.requests),
            "shape": self.shape,
            "write_units": self.write_units,
            "index_write_units": self.index_write_units,
            "index_actions": dict(self.index_actions),
            "read_units": self.read_units,
            "item_bytes": self.item_bytes,
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
            "errors": self.errors,
            "s3_requests": dict(self.s3_requests),
            "s3_errors": [f"{c.operation}: {c.error}" for c in self.s3_calls if c.error],
            "s3_request_bytes": sum(c.request_bytes for c in self.s3_calls),
            "s3_response_bytes": sum(c.response_bytes for c in self.s3_calls),
            "s3_stored_bytes": sum(c.stored_bytes for c in self.s3_calls),
        }

    @property
    def s3_requests(self) -> Counter[str]:
        """S3 requests by operation."""
        return Counter(c.operation for c in self.s3_calls)

    @property
    def errors(self) -> list[str]:
        """Requests DynamoDB refused, as `Operation: message`."""
        return [f"{c.operation}: {c.error}" for c in self.calls if c.error]


class Meter:
    """The WSGI middleware: serves every request through moto, one at a time, and meters DynamoDB's and S3's."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._tables: dict[str, Table] = {}
        self._calls: list[Call] | None = None
        self._s3_calls: list[S3Call] = []

    # -- what the orchestrator sees ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start recording requests (one client operation)."""
        with self._lock:
            self._calls = []
            self._s3_calls = []

    def stop(self) -> Operation:
        """Stop recording; every request recorded since `start`."""
        with self._lock:
            calls, self._calls = self._calls or [], None
            s3_calls, self._s3_calls = self._s3_calls, []
        return Operation(calls, s3_calls)

    # -- WSGI -------------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        with self._lock:
            target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
            if self._calls is not None and not target and _is_s3(environ):
                return self._meter_s3(environ, start_response)
            if self._calls is None or not target.startswith(TARGET_PREFIX):
                return list(self._app(environ, start_response))
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            operation = target.removeprefix(TARGET_PREFIX)
            request = json.loads(body or b"{}")
            old = self._images(operation, request, environ) if operation in WRITES else {}
            status, headers, chunks = self._serve(environ)
            start_response(status, headers)
            code = int(status.split()[0])
            call = Call(operation, code, len(body), sum(len(c) for c in chunks))
            call.conditional = _conditional(request)
            call.consistent = bool(request.get("ConsistentRead"))
            if code >= 400:
                call.error = self._error(chunks)
            self._meter(call, request, old, environ)
            self._calls.append(call)
            return chunks

    def _meter_s3(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        """Serve an S3 request and record it (the caller holds the lock)."""
        method = str(environ.get("REQUEST_METHOD", "GET"))
        operation = s3_operation(
            method, str(environ.get("PATH_INFO", "/")), str(environ.get("QUERY_STRING", "")), environ
        )
        # An aws-chunked body (a streamed upload with a trailing checksum) says its payload's length apart.
        sent = int(environ.get("HTTP_X_AMZ_DECODED_CONTENT_LENGTH") or environ.get("CONTENT_LENGTH") or 0)
        status, headers, chunks = self._serve(environ)
        start_response(status, headers)
        code = int(status.split()[0])
        call = S3Call(operation, code, sent, 0 if method == "HEAD" else sum(len(c) for c in chunks))
        if code >= 400:
            call.error = _s3_error(chunks, code)
        elif operation in ("PutObject", "UploadPart"):
            call.stored_bytes = sent
        self._s3_calls.append(call)
        return chunks

    def _serve(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], list[bytes]]:
        answer: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            answer["status"], answer["headers"] = status, headers
            return lambda _: None

        chunks = list(self._app(environ, capture))
        return answer["status"], answer["headers"], chunks

    @staticmethod
    def _error(chunks: list[bytes]) -> str:
        try:
            document = json.loads(b"".join(chunks))
        except ValueError:
            return "unreadable error"
        kind = str(document.get("__type", "")).rsplit("#", 1)[-1]
        return f"{kind}: {document.get('message') or document.get('Message') or ''}".strip()

    def _internal(self, operation: str, payload: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
        """Call moto's own API directly (not metered, not over the network), signed like the metered request."""
        from werkzeug.test import EnvironBuilder

        headers = [("X-Amz-Target", TARGET_PREFIX + operation), ("Content-Type", "application/x-amz-json-1.0")]
        builder = EnvironBuilder(path="/", method="POST", headers=headers, data=json.dumps(payload))
        environ = builder.get_environ()
        for name in _COPIED_HEADERS:
            if name in template:
                environ[name] = template[name]
        status, _, chunks = self._serve(environ)
        document: dict[str, Any] = json.loads(b"".join(chunks) or b"{}")
        if not status.startswith("2"):
            raise RuntimeError(f"internal {operation} failed: {status} {document}")
        return document

    def table(self, name: str, template: dict[str, Any]) -> Table:
        """The table's key schema and indexes, from DescribeTable (cached)."""
        if name not in self._tables:
            description = self._internal("DescribeTable", {"TableName": name}, template)["Table"]
            self._tables[name] = Table.from_description(description)
        return self._tables[name]

    def _get(self, table: str, key: Item, template: dict[str, Any]) -> Item | None:
        answer = self._internal("GetItem", {"TableName": table, "Key": key, "ConsistentRead": True}, template)
        item: Item | None = answer.get("Item")
        return item

    # -- which items a request touches --------------------------------------------------------------------------

    def _touched(
        self, operation: str, request: dict[str, Any], template: dict[str, Any]
    ) -> list[tuple[str, Item, str]]:
        """(table, key, kind) of every item a write request names; kind is "put", "update", "delete" or "check"."""

        def key(table: str, item: Item) -> Item:
            return {name: item[name] for name in self.table(table, template).keys}

        if operation == "PutItem":
            return [(request["TableName"], key(request["TableName"], request["Item"]), "put")]
        if operation == "UpdateItem":
            return [(request["TableName"], request["Key"], "update")]
        if operation == "DeleteItem":
            return [(request["TableName"], request["Key"], "delete")]
        touched: list[tuple[str, Item, str]] = []
        if operation == "BatchWriteItem":
            for table, requests in request["RequestItems"].items():
                for entry in requests:
                    if "PutRequest" in entry:
                        touched.append((table, key(table, entry["PutRequest"]["Item"]), "put"))
                    else:
                        touched.append((table, entry["DeleteRequest"]["Key"], "delete"))
        if operation == "TransactWriteItems":
            for entry in request["TransactItems"]:
                ((kind, spec),) = entry.items()
                table = spec["TableName"]
                named = spec["Item"] if kind == "Put" else spec["Key"]
                touched.append((table, key(table, named), {"Put": "put", "Update": "update"}.get(kind, kind.lower())))
        return touched

    def _images(self, operation: str, request: dict[str, Any], template: dict[str, Any]) -> dict[Any, Item | None]:
        return {
            (table, self.table(table, template).key_of(key)): self._get(table, key, template)
            for table, key, _ in self._touched(operation, request, template)
        }

    # -- what DynamoDB would bill -------------------------------------------------------------------------------

    def _meter(
        self, call: Call, request: dict[str, Any], old: dict[Any, Item | None], template: dict[str, Any]
    ) -> None:
        operation = call.operation
        if operation in WRITES:
            transactional = operation == "TransactWriteItems"
            for table_name, key, kind in self._touched(operation, request, template):
                table = self.table(table_name, template)
                before = old[(table_name, table.key_of(key))]
                if kind == "conditioncheck" or call.status >= 400:
                    # A refused or checking write is billed as a write of the item it looked at, and changes nothing.
                    call.writes.append(capacity.ItemWrite(*_unchanged_cost(before, table, transactional)))
                    continue
                after = self._get(table_name, key, template)
                call.writes.append(capacity.item_write(before, after, table, transactional))
                call.written[(table_name, table.key_of(key))] = after
            return
        if call.status >= 400:
            return
        if operation in ("GetItem", "TransactGetItems", "BatchGetItem"):
            self._meter_gets(call, request, template)
        elif operation in ("Query", "Scan"):
            self._meter_query(call, request, template)

    def _meter_gets(self, call: Call, request: dict[str, Any], template: dict[str, Any]) -> None:
        if call.operation == "GetItem":
            gets = [(request["TableName"], request["Key"], bool(request.get("ConsistentRead")), 1)]
        elif call.operation == "TransactGetItems":
            gets = [(g["Get"]["TableName"], g["Get"]["Key"], True, 2) for g in request["TransactItems"]]
        else:
            gets = [
                (table, key, bool(spec.get("ConsistentRead")), 1)
                for table, spec in request["RequestItems"].items()
                for key in spec["Keys"]
            ]
        for table, key, consistent, factor in gets:
            # Billed on the whole item, whatever the projection returned.
            size = capacity.item_bytes(self._get(table, key, template))
            call.read_bytes += size
            call.read_units += capacity.read_units(size, consistent) * factor

    def _meter_query(self, call: Call, request: dict[str, Any], template: dict[str, Any]) -> None:
        # The same request without projection or filter returns every item it read, whole: what it is billed on.
        read = {k: v for k, v in request.items() if k not in ("ProjectionExpression", "FilterExpression", "Select")}
        read.pop("AttributesToGet", None)
        read.pop("QueryFilter", None)
        read.pop("ScanFilter", None)
        read["Select"] = "ALL_PROJECTED_ATTRIBUTES" if "IndexName" in request else "ALL_ATTRIBUTES"
        used = set(_PLACEHOLDER.findall(str(read.get("KeyConditionExpression", ""))))
        for name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            if name in read:
                kept = {k: v for k, v in read[name].items() if k in used}
                if kept:
                    read[name] = kept
                else:
                    del read[name]
        answer = self._internal(call.operation, read, template)
        size = sum(capacity.item_bytes(item) for item in answer.get("Items", []))
        call.read_bytes += size
        call.read_units += capacity.read_units(size, bool(request.get("ConsistentRead")))


def _s3_error(chunks: list[bytes], status: int) -> str:
    """The code of an S3 error answer (an XML document), or its status."""
    found = re.search(rb"<Code>([^<]+)</Code>", b"".join(chunks))
    return found.group(1).decode("utf-8", "replace") if found else str(status)


def _conditional(request: dict[str, Any]) -> bool:
    """Whether a request carries a write condition (a Query's key condition is not one)."""
    if "ConditionExpression" in request or "Expected" in request:
        return True
    return any(
        "ConditionCheck" in entry or any("ConditionExpression" in spec for spec in entry.values())
        for entry in request.get("TransactItems") or ()
    )


def _unchanged_cost(item: Item | None, table: Table, transactional: bool) -> tuple[int, int, int, tuple[Any, ...]]:
    size = capacity.item_bytes(item)
    return size, size, capacity.write_units(size) * (2 if transactional else 1), ()


class MeteredMotoServer:
    """moto's server app behind a `Meter`, on `127.0.0.1:<free port>`, in a daemon thread of this process."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self.meter = Meter(DomainDispatcherApplication(create_backend_app))
        self._host, self._port = host, port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Serve; returns the endpoint URL."""
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = make_server(
            self._host, self._port, self.meter, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
