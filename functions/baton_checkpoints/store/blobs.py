"""The blob repository: a blob's record (one conditional PutItem to declare it, one GetItem to read it), its
idempotent declaration, and the presigned requests that move its bytes (through `ObjectStore`, no S3 request).

A declaration with an `Idempotency-Key` writes the record and the key's idempotency record in one transaction,
without reading first: the idempotency record's condition (absent, or older than 24 hours) asks DynamoDB for the
record it found (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so a replay or a reused key costs that one
request too. The idempotency record keeps the first answer whole, upload URL included, so a replay repeats it;
its answer lives in its own attribute (`BLOB_ANSWER`), beside the fingerprint and request id every idempotency
record has.

A write whose answer was lost is recognised, never applied twice: a blob id is new and random, so a record found
at it on the SDK's retry is this request's own write; an idempotency record holding this request's id is too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from msgspec import Struct

from baton_checkpoints.domain import limits
from baton_checkpoints.domain.blobs import Blob
from baton_checkpoints.domain.checkpoints import IdempotencyClaim
from baton_checkpoints.domain.clock import ms_to_seconds
from baton_checkpoints.domain.errors import IdempotencyKeyReused, NotFound, QuotaExceeded, Unavailable
from baton_checkpoints.domain.ids import BLOB_ID_PATTERN
from baton_checkpoints.domain.models import Presigned
from baton_checkpoints.store import items, layout, schema
from baton_checkpoints.store.attributes import Item, from_item, names_in, to_attr, to_item
from baton_checkpoints.store.dynamo import refusal
from baton_checkpoints.store.errors import (
    UNAVAILABLE_MESSAGE,
    Failure,
    cancellation_reasons,
    classify,
    may_have_landed,
    reraise,
    translated_errors,
)
from baton_checkpoints.store.objects import ObjectStore, upload_headers

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_WRITE_ATTEMPTS: Final = 5
"""Rounds of a declaration whose write met another transaction or lost its answer; past them, a 503."""
NO_BUCKET_MESSAGE: Final = (
    "Blobs are not available: this deployment has no bucket to hold them. Nothing was written; ask the operator to "
    "configure one."
)
NO_BUCKET_RETRY_SECONDS: Final = 3600

BLOB_ANSWER: Final = "ba"
"""The attribute of an idempotency record that holds a blob declaration's first answer (a checkpoint save's answer
is `items.ANSWER`), as a map of the attributes below."""
_ID: Final = "id"
_UPLOAD_URL: Final = "url"
_UPLOAD_EXPIRES: Final = "ux"

_NEW: Final = f"attribute_not_exists(#{schema.PK})"
_KEY_FREE: Final = f"attribute_not_exists(#{schema.PK}) OR #{items.EXPIRES} <= :now_s"
"""An idempotency key may be written when it was never used, or its record is older than 24 hours (absent by
the contract, though TTL may not have removed it yet)."""


class Declared(Struct, frozen=True):
    """A declared blob, the upload its first answer handed out, and whether this answer is a replay of it."""

    blob: Blob
    upload: Presigned
    replayed: bool = False


class BlobStore:
    """Blob records in the Baton table, and presigned requests for their objects."""

    def __init__(self, client: DynamoDBClient, table_name: str, objects: ObjectStore | None) -> None:
        """`objects`: the bucket (None: a deployment without one, where every blob route answers 503)."""
        self._client = client
        self._table = table_name
        self._objects = objects

    @property
    def bucket(self) -> ObjectStore:
        """The bucket, or `Unavailable` where the deployment has none."""
        if self._objects is None:
            raise Unavailable(NO_BUCKET_MESSAGE, retry_after=NO_BUCKET_RETRY_SECONDS)
        return self._objects

    # -- declare --------------------------------------------------------------------------------------------

    def declare(
        self,
        blob: Blob,
        request_id: str,
        now_ms: int,
        claim: IdempotencyClaim | None = None,
        refused: QuotaExceeded | None = None,
    ) -> Declared:
        """Write the record of a new blob and presign its upload; with a claim, once per idempotency key (a replay
        answers the first declaration, a reused key `IdempotencyKeyReused`). `refused`: the tenant's quota refuses
        the blob, which is raised unless the claim's key replays a declaration (one read)."""
        bucket = self.bucket
        upload = _upload(blob, bucket)
        with translated_errors():
            if refused is not None:
                if claim is not None:
                    key = layout.idempotency_key(blob.tenant_id, claim.agent_id, claim.key)
                    found = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
                    if found is not None and _live(found, now_ms):
                        return _answer_of(found, claim, request_id, blob.tenant_id)
                raise refused
            if claim is None:
                return self._declare_plain(blob, upload)
            return self._declare_idempotent(blob, upload, claim, request_id, now_ms)

    def _declare_plain(self, blob: Blob, upload: Presigned) -> Declared:
        item = items.blob_item(blob)
        for _ in range(MAX_WRITE_ATTEMPTS):
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression=_NEW,
                    ExpressionAttributeNames=names_in(_NEW),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return Declared(blob, upload)
            except Exception as exc:
                refused = refusal(exc)
                if refused is not None:
                    # A record at a new random id is our own write, landed on an attempt whose answer was lost.
                    if refused.found and _same_blob(refused.item, item):
                        return Declared(blob, upload)
                    reraise(exc, Failure.DEFECT)  # another blob at a fresh 128-bit id: not a thing to retry
                failure = classify(exc)
                if failure is Failure.RACE:
                    continue
                if may_have_landed(exc) and self._landed(item):
                    return Declared(blob, upload)
                reraise(exc, failure)
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def _landed(self, item: Item) -> bool:
        """True when the record `item` is in the table (a write whose answer was lost landed); False when it is
        not, or cannot be read now."""
        try:
            found = self._client.get_item(TableName=self._table, Key=_key_of(item), ConsistentRead=True).get("Item")
        except Exception:
            return False
        return found is not None and _same_blob(found, item)

    def _declare_idempotent(
        self, blob: Blob, upload: Presigned, claim: IdempotencyClaim, request_id: str, now_ms: int
    ) -> Declared:
        record_key = layout.idempotency_key(blob.tenant_id, claim.agent_id, claim.key)
        record = {**record_key, **_record_values(blob, upload, claim, request_id, now_ms)}
        request: dict[str, Any] = {
            "TransactItems": [
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": items.blob_item(blob),
                        "ConditionExpression": _NEW,
                        "ExpressionAttributeNames": names_in(_NEW),
                    }
                },
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": record,
                        "ConditionExpression": _KEY_FREE,
                        "ExpressionAttributeNames": names_in(_KEY_FREE),
                        "ExpressionAttributeValues": {":now_s": to_attr(ms_to_seconds(now_ms))},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        }
        ambiguous: Exception | None = None
        for _ in range(MAX_WRITE_ATTEMPTS):
            try:
                self._client.transact_write_items(**request)
                return Declared(blob, upload)
            except Exception as exc:
                failure = classify(exc)
                if failure is Failure.CONDITION_FAILED:
                    found = _record_found(exc)
                    if found is None:
                        reraise(exc, Failure.DEFECT)  # the new blob id was taken: 128 random bits say never
                    return _answer_of(found, claim, request_id, blob.tenant_id)
                if failure is Failure.RACE:
                    continue
                if not may_have_landed(exc):
                    reraise(exc, failure)
                # No answer came back: one read of the idempotency record tells whether the transaction landed.
                ambiguous = exc
                found = self._read_record(record_key)
                if found is not None and _live(found, now_ms):
                    return _answer_of(found, claim, request_id, blob.tenant_id)
        if ambiguous is not None:
            reraise(ambiguous)
        raise Unavailable(UNAVAILABLE_MESSAGE)

    def _read_record(self, key: Item) -> Item | None:
        try:
            return self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
        except Exception:
            return None  # still unreachable: the transaction is tried again, or the caller gets a 503

    # -- read -----------------------------------------------------------------------------------------------

    def get(self, tenant_id: str, blob_id: str, now_ms: int) -> Blob:
        """The live record of a blob of this tenant (one consistent GetItem); NotFound when it is missing, expired
        unattached, or the id is not a blob id."""
        if not BLOB_ID_PATTERN.match(blob_id):
            raise NotFound()
        with translated_errors():
            found = self._client.get_item(
                TableName=self._table, Key=layout.blob_key(tenant_id, blob_id), ConsistentRead=True
            ).get("Item")
        if found is None:
            raise NotFound()
        blob = items.blob_from_item(found)
        if blob.expires_ms is not None and blob.expires_ms <= now_ms:
            raise NotFound()  # TTL removes an expired record within days; until then it is as absent as a missing one
        return blob

    def download(self, blob: Blob) -> Presigned:
        """The presigned GET of a blob's bytes (no request is sent): an attachment named by the blob's id, served as
        its declared media type only when that type is passive (`objects.served_media_type`)."""
        return self.download_of(blob.tenant_id, blob.blob_id, media_type=blob.media_type)

    def download_of(
        self, tenant_id: str, blob_id: str, *, name: str | None = None, media_type: str | None = None
    ) -> Presigned:
        """The presigned GET of the bytes of a blob a checkpoint holds (no request is sent: the checkpoint's
        resources already say what the blob is). It downloads as an attachment named `name` (the resource's name;
        default: the blob id), served as `media_type` when that is a passive type and as `application/octet-stream`
        otherwise, or when it is not given: no download is ever rendered on the bucket's origin."""
        return self.bucket.presign_get(
            layout.blob_object(tenant_id, blob_id), filename=name or blob_id, media_type=media_type
        )


def _upload(blob: Blob, bucket: ObjectStore) -> Presigned:
    """The presigned PUT of a blob's bytes (signing is local: no request)."""
    return bucket.presign_put(layout.blob_object(blob.tenant_id, blob.blob_id), blob.sha256, blob.size, blob.media_type)


# -- the idempotency record of a declaration --------------------------------------------------------------------


def _record_values(
    blob: Blob, upload: Presigned, claim: IdempotencyClaim, request_id: str, now_ms: int
) -> dict[str, Any]:
    """The attributes of a declaration's idempotency record: those of every idempotency record (`items`), and the
    first answer: the blob (its id; the rest as its record has it) and the upload URL with its expiry."""
    expires_ms = now_ms + limits.IDEMPOTENCY_TTL_SECONDS * 1000
    return to_item(
        {
            items.FINGERPRINT: bytes.fromhex(claim.fingerprint),
            items.REQUEST: request_id,
            BLOB_ANSWER: {
                _ID: blob.blob_id,
                items.AGENT: blob.agent_id,
                items.HASH: bytes.fromhex(blob.sha256),
                items.SIZE: blob.size,
                items.MEDIA_TYPE: blob.media_type,
                items.CREATED: blob.created_ms,
                _UPLOAD_URL: upload.url,
                _UPLOAD_EXPIRES: upload.expires_ms,
            },
            items.EXPIRES: ms_to_seconds(expires_ms),
            schema.TTL_ATTRIBUTE: items.ttl_epoch(expires_ms),
        }
    )


def _record_found(exc: BaseException) -> Item | None:
    """The idempotency record a cancelled declaration found in its way (the transaction's second item), if any."""
    response: Any = getattr(exc, "response", None)
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    if not reasons or len(reasons) < 2 or cancellation_reasons(exc)[1] != "ConditionalCheckFailed":
        return None
    return cast(Item | None, reasons[1].get("Item"))


def _live(record: Item, now_ms: int) -> bool:
    """True while an idempotency record counts (24 hours from its first answer)."""
    return items.seconds_to_ms(record[items.EXPIRES]["N"]) > now_ms


def _answer_of(record: Item, claim: IdempotencyClaim, request_id: str, tenant_id: str) -> Declared:
    """What an idempotency record found in the way answers: the first declaration (a replay, unless it is this
    request's own write whose answer was lost), or `IdempotencyKeyReused` when it answered another request."""
    values = from_item(record)
    if bytes(values[items.FINGERPRINT]).hex() != claim.fingerprint or BLOB_ANSWER not in values:
        raise IdempotencyKeyReused()
    answer = values[BLOB_ANSWER]
    blob = Blob(
        tenant_id=tenant_id,
        blob_id=answer[_ID],
        agent_id=answer[items.AGENT],
        sha256=bytes(answer[items.HASH]).hex(),
        size=int(answer[items.SIZE]),
        media_type=answer[items.MEDIA_TYPE],
        created_ms=int(answer[items.CREATED]),
        expires_ms=None,
    )
    upload = _upload_of(blob, answer)
    return Declared(blob, upload, replayed=values[items.REQUEST] != request_id)


def _upload_of(blob: Blob, answer: dict[str, Any]) -> Presigned:
    """The first answer's upload: its URL and expiry as stored, its headers as the blob determines them."""
    return Presigned(
        url=answer[_UPLOAD_URL],
        method="PUT",
        headers=upload_headers(blob.sha256, blob.size, blob.media_type),
        expires_ms=int(answer[_UPLOAD_EXPIRES]),
    )


def _key_of(item: Item) -> Item:
    return {schema.PK: item[schema.PK], schema.SK: item[schema.SK]}


def _same_blob(found: Item, mine: Item) -> bool:
    """True when the record `found` is the one `mine` wrote (same agent, hash and creation time)."""
    return all(found.get(name) == mine.get(name) for name in (items.AGENT, items.HASH, items.CREATED))
