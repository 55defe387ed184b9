"""OAuth's items in the Baton table: registered clients, secrets (codes and tokens, by the SHA-256 of each) and
grants. Every item expires by TTL; every check of a secret is one consistent GetItem.

- An authorization code is marked used (with the grant it made) in the same transaction that writes the grant and
  its first token pair, so a code is exchanged once: a second exchange finds it used and revokes that grant.
- A refresh rotates in one transaction: the old refresh token marked rotated, the grant moved to the new pair (on
  the condition that it still names the old pair and is not revoked), the new pair written and the old access token
  deleted. So a grant has one live access token, and revoking the grant (marking it and deleting its pair, on the
  condition that it still names that pair) leaves no token working.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from baton_checkpoints.domain.access import KeyRecord, hash_secret
from baton_checkpoints.domain.clock import format_ms, parse_time
from baton_checkpoints.domain.limits import MAX_KEY_LIST_READS
from baton_checkpoints.domain.oauth import (
    ACCESS_SECONDS,
    CLIENT_SECONDS,
    CODE_SECONDS,
    REFRESH_SECONDS,
    REGISTERED_CLIENT_ID,
    UNUSED_CLIENT_SECONDS,
    USED_REFRESH_SECONDS,
    Approval,
    Client,
    Code,
    Grant,
    OAuthError,
    Token,
)
from baton_checkpoints.store import layout, schema
from baton_checkpoints.store.attributes import Item, from_item, names_in, to_attr, to_item
from baton_checkpoints.store.batch import batch_get
from baton_checkpoints.store.cursors import query_binding
from baton_checkpoints.store.errors import (
    Failure,
    cancellation_reasons,
    classify,
    reraise,
    translated_errors,
    was_retried,
)
from baton_checkpoints.store.index_pages import index_page
from baton_checkpoints.store.items import ttl_epoch
from baton_checkpoints.store.keys import readable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_REVOKE_ROUNDS = 3
"""Attempts at revoking a grant that a refresh moves to a new pair at the same moment."""

_INVALID_GRANT = "The authorization code or refresh token is not valid, was used already, or has expired."


def _approval_attributes(approval: Approval) -> dict[str, Any]:
    return {
        "client_id": approval.client_id,
        "redirect_uri": approval.redirect_uri,
        "code_challenge": approval.code_challenge,
        "resource": approval.resource,
        "scopes": list(approval.scopes),
        "tenant_id": approval.tenant_id,
        "agent_id": approval.agent_id,
        "key_id": approval.key_id,
        "key_hash": approval.key_hash,
        "client_name": approval.client_name,
    }


def _approval_from(values: dict[str, Any]) -> Approval:
    return Approval(
        client_id=values["client_id"],
        redirect_uri=values["redirect_uri"],
        code_challenge=values["code_challenge"],
        resource=values["resource"],
        scopes=tuple(values["scopes"]),
        tenant_id=values["tenant_id"],
        agent_id=values["agent_id"],
        key_id=values["key_id"],
        key_hash=values["key_hash"],
        client_name=values.get("client_name"),
    )


class OAuthStore:
    """Clients, codes, tokens and grants of Baton's authorization server."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    # ---- clients ------------------------------------------------------------------------------------------------

    def register(self, registered: Client, now_ms: int) -> None:
        """Store a client registered at `now_ms` (its id is new and random: no condition is needed)."""
        item = to_item(
            {
                "client_id": registered.client_id,
                "redirect_uris": list(registered.redirect_uris),
                "client_name": registered.client_name,
                "created_at": format_ms(now_ms),
                schema.TTL_ATTRIBUTE: ttl_epoch(now_ms + UNUSED_CLIENT_SECONDS * 1000),
            }
        )
        item.update(layout.oauth_client_key(registered.client_id))
        with translated_errors():
            self._client.put_item(TableName=self._table, Item=item)

    def client(self, client_id: str, now_ms: int) -> Client | None:
        """A registered client that has not lapsed (one GetItem), or None."""
        with translated_errors():
            found = self._client.get_item(
                TableName=self._table, Key=layout.oauth_client_key(client_id), ConsistentRead=True
            ).get("Item")
        if found is None or int(found[schema.TTL_ATTRIBUTE]["N"]) * 1000 <= now_ms:
            return None
        values = from_item(found)
        return Client(
            client_id=values["client_id"],
            redirect_uris=tuple(values["redirect_uris"]),
            client_name=values.get("client_name"),
        )

    # ---- codes --------------------------------------------------------------------------------------------------

    def put_code(self, code: str, approval: Approval, now_ms: int) -> None:
        """Store a new authorization code for `approval` (its secret is new and random)."""
        expires_ms = now_ms + CODE_SECONDS * 1000
        item = to_item(
            {
                "kind": "code",
                **_approval_attributes(approval),
                "expires_ms": expires_ms,
                schema.TTL_ATTRIBUTE: ttl_epoch(expires_ms),
            }
        )
        item.update(layout.oauth_secret_key(hash_secret(code)))
        with translated_errors():
            self._client.put_item(TableName=self._table, Item=item)

    def code(self, code: str) -> Code | None:
        """An authorization code as stored (used or not, expired or not), or None."""
        values = self._secret(code, "code")
        if values is None:
            return None
        return Code(
            approval=_approval_from(values), expires_ms=int(values["expires_ms"]), grant_id=values.get("grant_id")
        )

    def exchange(self, code: str, found: Code, grant_id: str, access: str, refresh: str, now_ms: int) -> None:
        """Mark `code` used and write its grant and first token pair, in one transaction; a code used meanwhile is
        `invalid_grant`."""
        approval = found.approval
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": layout.oauth_secret_key(hash_secret(code)),
                    "UpdateExpression": "SET #grant_id = :grant",
                    "ConditionExpression": "attribute_exists(#kind) AND attribute_not_exists(#grant_id)",
                    "ExpressionAttributeNames": names_in("#grant_id #kind"),
                    "ExpressionAttributeValues": {":grant": to_attr(grant_id)},
                }
            },
            {"Put": {"TableName": self._table, "Item": self._grant_item(grant_id, approval, access, refresh, now_ms)}},
            *self._pair_puts(grant_id, approval, access, refresh, now_ms),
        ]
        if REGISTERED_CLIENT_ID.match(approval.client_id):
            # A registered client with a grant is kept a year (until then, a day: registration needs no key).
            writes.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": layout.oauth_client_key(approval.client_id),
                        "UpdateExpression": "SET #ttl = :ttl",
                        "ConditionExpression": "attribute_exists(#client_id)",
                        "ExpressionAttributeNames": names_in("#ttl #client_id"),
                        "ExpressionAttributeValues": {":ttl": to_attr(ttl_epoch(now_ms + CLIENT_SECONDS * 1000))},
                    }
                }
            )
        self._transact(
            writes,
            on_refusal=lambda reasons: OAuthError("invalid_grant", _INVALID_GRANT),
            landed=lambda: (self.code(code) or found).grant_id == grant_id,
        )

    # ---- tokens -------------------------------------------------------------------------------------------------

    def token(self, secret: str, kind: str) -> Token | None:
        """An access or refresh token as stored, or None (unknown, or of another kind)."""
        values = self._secret(secret, kind)
        if values is None:
            return None
        return Token(
            kind=kind,
            grant_id=values["grant_id"],
            approval=_approval_from(values),
            expires_ms=int(values["expires_ms"]),
            rotated="rotated_at" in values,
        )

    def rotate(self, old: str, found: Token, access: str, refresh: str, now_ms: int) -> None:
        """Exchange refresh token `old` for a new pair, in one transaction (see the module's notes); a token
        rotated or a grant revoked meanwhile is `invalid_grant`."""
        approval = found.approval
        grant_key = layout.oauth_grant_key(approval.tenant_id, found.grant_id)
        with translated_errors():
            grant = self._client.get_item(TableName=self._table, Key=grant_key, ConsistentRead=True).get("Item")
        if grant is None or "revoked_at" in grant:
            raise OAuthError("invalid_grant", _INVALID_GRANT)
        old_access = grant["access_hash"]["S"]
        refresh_expires = now_ms + REFRESH_SECONDS * 1000
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": layout.oauth_secret_key(hash_secret(old)),
                    "UpdateExpression": "SET #rotated_at = :now, #ttl = :ttl",
                    "ConditionExpression": "attribute_exists(#kind) AND attribute_not_exists(#rotated_at)",
                    "ExpressionAttributeNames": names_in("#rotated_at #ttl #kind"),
                    "ExpressionAttributeValues": {
                        ":now": to_attr(format_ms(now_ms)),
                        ":ttl": to_attr(ttl_epoch(now_ms + USED_REFRESH_SECONDS * 1000)),
                    },
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": grant_key,
                    "UpdateExpression": "SET #access_hash = :access, #refresh_hash = :refresh, #ttl = :ttl",
                    "ConditionExpression": (
                        "#refresh_hash = :old AND #access_hash = :old_access AND attribute_not_exists(#revoked_at)"
                    ),
                    "ExpressionAttributeNames": names_in("#access_hash #refresh_hash #ttl #revoked_at"),
                    "ExpressionAttributeValues": {
                        ":access": to_attr(hash_secret(access)),
                        ":refresh": to_attr(hash_secret(refresh)),
                        ":ttl": to_attr(ttl_epoch(refresh_expires)),
                        ":old": to_attr(hash_secret(old)),
                        ":old_access": to_attr(old_access),
                    },
                }
            },
            *self._pair_puts(found.grant_id, approval, access, refresh, now_ms),
            {"Delete": {"TableName": self._table, "Key": layout.oauth_secret_key(old_access)}},
        ]
        self._transact(
            writes,
            on_refusal=lambda reasons: OAuthError("invalid_grant", _INVALID_GRANT),
            landed=lambda: self._grant_names(grant_key, hash_secret(refresh)),
        )

    # ---- grants -------------------------------------------------------------------------------------------------

    def revoke_grant(self, tenant_id: str, grant_id: str, now_ms: int) -> bool:
        """Revoke a grant and delete its live tokens (one transaction, on the condition that the grant still names
        the pair it deletes); False when there was no live grant to revoke."""
        grant_key = layout.oauth_grant_key(tenant_id, grant_id)
        for _ in range(_REVOKE_ROUNDS):
            with translated_errors():
                grant = self._client.get_item(TableName=self._table, Key=grant_key, ConsistentRead=True).get("Item")
            if grant is None or "revoked_at" in grant:
                return False
            access_hash, refresh_hash = grant["access_hash"]["S"], grant["refresh_hash"]["S"]
            revoked_at = format_ms(now_ms)
            writes: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": grant_key,
                        "UpdateExpression": "SET #revoked_at = :now",
                        "ConditionExpression": (
                            "#access_hash = :access AND #refresh_hash = :refresh AND attribute_not_exists(#revoked_at)"
                        ),
                        "ExpressionAttributeNames": names_in("#revoked_at #access_hash #refresh_hash"),
                        "ExpressionAttributeValues": {
                            ":now": to_attr(revoked_at),
                            ":access": to_attr(access_hash),
                            ":refresh": to_attr(refresh_hash),
                        },
                    }
                },
                {"Delete": {"TableName": self._table, "Key": layout.oauth_secret_key(access_hash)}},
                {"Delete": {"TableName": self._table, "Key": layout.oauth_secret_key(refresh_hash)}},
            ]
            try:
                # A transaction the SDK sent again after its answer was lost is judged against its own first copy
                # (revoked already): read back whether that copy was this revocation's.
                self._transact(
                    writes,
                    on_refusal=lambda reasons: _Moved(),
                    landed=partial(self._grant_revoked_at, grant_key, revoked_at, access_hash),
                )
            except _Moved:
                continue  # a refresh moved the grant to a new pair: read it again
            return True
        return False  # pragma: no cover - three refreshes of one grant within one revoke

    def grants(
        self, tenant_id: str, agent_id: str | None, now_ms: int, limit: int, cursor: str | None
    ) -> tuple[list[Grant], str | None]:
        """One page of a tenant's live grants (optionally one agent's), oldest first, read under a budget: the
        index (which projects the key's attributes: agent, revocation) finds the page's grants, one consistent
        BatchGetItem reads them whole. A grant past its expiry that TTL has not removed yet is left out, so a page
        may come back short."""
        filters = ["attribute_not_exists(#revoked_at)"]
        values: dict[str, Any] = {}
        if agent_id is not None:
            values[":agent"] = agent_id
            filters.append("#agent_id = :agent")
        entries, next_cursor = index_page(
            self._client,
            self._table,
            layout.tenant_grants_pk(tenant_id),
            filters,
            values,
            read=lambda item: str(item[schema.GSI1_SK]["S"]),
            id_of=lambda grant_id: grant_id,
            binding=query_binding("grants", tenant_id, agent_id),
            limit=limit,
            cursor=cursor,
            budget=MAX_KEY_LIST_READS,
        )
        if not entries:
            return [], next_cursor
        keys = [layout.oauth_grant_key(tenant_id, grant_id) for grant_id in entries]
        with translated_errors():
            found = batch_get(self._client, self._table, keys)
        grants = []
        for key in keys:
            item = found.get((key[schema.PK]["S"], key[schema.SK]["S"]))
            if item is None or "revoked_at" in item or int(item[schema.TTL_ATTRIBUTE]["N"]) * 1000 <= now_ms:
                continue
            grant = _grant_from(item)
            if grant is not None:
                grants.append(grant)
        # A grant lives only while the key that approved it works: the page's keys, read in the same way.
        approving = {layout.key_pk(g.approval.key_hash) for g in grants}
        with translated_errors():
            records = batch_get(self._client, self._table, [layout.key(pk, layout.KEY_SK) for pk in sorted(approving)])
        working = {pk for (pk, _), item in records.items() if _key_works(readable(item), now_ms)}
        return [g for g in grants if layout.key_pk(g.approval.key_hash) in working], next_cursor

    def grant(self, tenant_id: str, grant_id: str, now_ms: int) -> Grant | None:
        """A tenant's live grant by id (one GetItem), or None (unknown, revoked, lapsed)."""
        with translated_errors():
            item = self._client.get_item(
                TableName=self._table, Key=layout.oauth_grant_key(tenant_id, grant_id), ConsistentRead=True
            ).get("Item")
        if item is None or "revoked_at" in item or int(item[schema.TTL_ATTRIBUTE]["N"]) * 1000 <= now_ms:
            return None
        return _grant_from(item)

    # ---- plumbing -----------------------------------------------------------------------------------------------

    def _grant_names(self, grant_key: Item, refresh_hash: str) -> bool:
        """True when the grant's live refresh token is the one of that hash (a rotation to it landed)."""
        with translated_errors():
            grant = self._client.get_item(TableName=self._table, Key=grant_key, ConsistentRead=True).get("Item")
        return grant is not None and grant.get("refresh_hash", {}).get("S") == refresh_hash

    def _grant_revoked_at(self, grant_key: Item, revoked_at: str, access_hash: str) -> bool:
        """True when the grant was revoked at `revoked_at` while naming the pair of `access_hash` (a revocation of
        it landed)."""
        with translated_errors():
            grant = self._client.get_item(TableName=self._table, Key=grant_key, ConsistentRead=True).get("Item")
        return (
            grant is not None
            and grant.get("revoked_at", {}).get("S") == revoked_at
            and grant.get("access_hash", {}).get("S") == access_hash
        )

    def _secret(self, secret: str, kind: str) -> dict[str, Any] | None:
        with translated_errors():
            found = self._client.get_item(
                TableName=self._table, Key=layout.oauth_secret_key(hash_secret(secret)), ConsistentRead=True
            ).get("Item")
        if found is None or found.get("kind", {}).get("S") != kind:
            return None
        return from_item(found)

    def _grant_item(self, grant_id: str, approval: Approval, access: str, refresh: str, now_ms: int) -> Item:
        item = to_item(
            {
                "grant_id": grant_id,
                **_approval_attributes(approval),
                "created_at": format_ms(now_ms),
                "access_hash": hash_secret(access),
                "refresh_hash": hash_secret(refresh),
                schema.GSI1_PK: layout.tenant_grants_pk(approval.tenant_id),
                schema.GSI1_SK: grant_id,
                schema.TTL_ATTRIBUTE: ttl_epoch(now_ms + REFRESH_SECONDS * 1000),
            }
        )
        item.update(layout.oauth_grant_key(approval.tenant_id, grant_id))
        return item

    def _pair_puts(self, grant_id: str, approval: Approval, access: str, refresh: str, now_ms: int) -> list[Any]:
        puts = []
        for kind, secret, seconds in (("access", access, ACCESS_SECONDS), ("refresh", refresh, REFRESH_SECONDS)):
            expires_ms = now_ms + seconds * 1000
            item = to_item(
                {
                    "kind": kind,
                    "grant_id": grant_id,
                    **_approval_attributes(approval),
                    "expires_ms": expires_ms,
                    schema.TTL_ATTRIBUTE: ttl_epoch(expires_ms),
                }
            )
            item.update(layout.oauth_secret_key(hash_secret(secret)))
            puts.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": item,
                        "ConditionExpression": f"attribute_not_exists({schema.PK})",
                    }
                }
            )
        return puts

    def _transact(
        self, writes: list[dict[str, Any]], on_refusal: Any, landed: Callable[[], bool] | None = None
    ) -> None:
        """One TransactWriteItems. A refusal is `on_refusal`, unless `landed` says the refused transaction is this
        one's own, already applied: the SDK sent it again after an answer that was lost, and DynamoDB (or an
        emulator that ignores the request token) judged the second copy against the first's writes."""
        with translated_errors():
            try:
                self._client.transact_write_items(TransactItems=cast(Any, writes))
            except Exception as exc:
                if classify(exc) is Failure.CONDITION_FAILED:
                    if landed is not None and was_retried(exc) and landed():
                        return
                    raise on_refusal(cancellation_reasons(exc)) from None
                reraise(exc)


def _key_works(record: KeyRecord | None, now_ms: int) -> bool:
    """True for a key neither revoked nor expired (a not-yet-valid key's grants are listed: they wait for it)."""
    if record is None or record.revoked_ms is not None:
        return False
    return record.expires_ms is None or record.expires_ms > now_ms


def _grant_from(item: Item) -> Grant | None:
    """A grant item as a record; None (logged) for one that cannot be read, which is never listed."""
    try:
        values = from_item(item)
        return Grant(
            grant_id=values["grant_id"],
            approval=_approval_from(values),
            created_ms=parse_time(values["created_at"]),
            expires_ms=int(values[schema.TTL_ATTRIBUTE]) * 1000,
        )
    except (KeyError, TypeError, ValueError) as exc:
        from baton_checkpoints.observability import logger

        logger().error("skipped an unreadable grant", extra={"cause": f"{type(exc).__name__}: {exc}"})
        return None


class _Moved(Exception):
    """A grant changed between its read and the transaction that revokes it."""
