"""The session list's view of the table: what each state write carries for the sessions index,
the index's pages, and erasing a session.

The ``STATE`` item of a session carries, beside its JSON, the fields a session list shows
(``shared.core.session_index``) and the index keys: ``owner`` (the person) and ``last_active``.
The global secondary index ``by-owner`` projects only those, so a page of sessions is one Query
of small items, and keeping it current costs no request of its own: it is written with the state.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from shared.core import devices
from shared.core.session_index import is_listed, owner_of, status_of
from shared.core.state import SessionState
from shared.wire.session_api_models import Status

SESSIONS_INDEX = "by-owner"
SESSION_KEY_PREFIX = "SESSION#"
SESSIONS_INDEX_PROJECTED = ("session_id", "title", "created_at", "turns", "status", "origin", "last_said")
BATCH_DELETE_MAX = 25  # DynamoDB's BatchWriteItem limit
ERASE_ATTEMPTS = 8


def session_id_of(item: dict[str, Any]) -> str:
    """The session of a ``STATE`` item or its index entry: from its key (an index entry carries the
    table's key; items of earlier releases also hold ``session_id``)."""
    if "session_id" in item:
        return str(item["session_id"]["S"])
    return str(item["pk"]["S"]).removeprefix(SESSION_KEY_PREFIX)


def index_attributes(state: SessionState) -> dict[str, dict[str, str]]:
    """The index keys and listed fields of ``state``, as attributes of its ``STATE`` item. An empty
    session (``is_listed`` false) has no ``owner``: the sparse ``by-owner`` index leaves it out."""
    attributes: dict[str, dict[str, str]] = {
        "last_active": {"N": f"{state.last_active_at or state.created_at:.3f}"},
        "created_at": {"N": f"{state.created_at:.3f}"},
        "turns": {"N": str(state.turn_count)},
        "status": {"S": status_of(state)},
        "origin": {"S": state.origin},
    }
    if is_listed(state):
        attributes["owner"] = {"S": owner_of(state)}
    if state.title:
        attributes["title"] = {"S": state.title}
    if state.last_utterance:
        attributes["last_said"] = {"S": state.last_utterance}
    # How many devices are present (not projected into the index: the list reads it for the active).
    attributes["devices_n"] = {"N": str(len(devices.seen(state)))}
    return attributes


@dataclass(frozen=True)
class SessionRow:
    """One session as the index lists it."""

    session_id: str
    title: str | None
    created_at: float
    last_active_at: float
    turns: int
    status: Status
    origin: str
    last_utterance: str | None
    devices: int = 0  # present now (0 for a session no connection is open on)

    @classmethod
    def of_item(cls, item: dict[str, Any]) -> SessionRow:
        return cls(
            session_id=session_id_of(item),
            title=item.get("title", {}).get("S"),
            created_at=float(item["created_at"]["N"]),
            last_active_at=float(item["last_active"]["N"]),
            turns=int(item["turns"]["N"]),
            status=item["status"]["S"],
            origin=item["origin"]["S"],
            last_utterance=item.get("last_said", {}).get("S"),
            devices=int(item.get("devices_n", {}).get("N", "0")),
        )

    @classmethod
    def of_state(cls, state: SessionState) -> SessionRow:
        return cls.of_item({"pk": {"S": f"{SESSION_KEY_PREFIX}{state.session_id}"}, **index_attributes(state)})


@dataclass(frozen=True)
class SessionPage:
    rows: list[SessionRow]
    last_key: dict[str, Any] | None  # the index key the next page starts after, or None at the end


class SessionRecords:
    """Listing a person's sessions and erasing one, through the low-level boto3 client."""

    def __init__(self, client: Any, table_name: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._client = client
        self._table = table_name
        self._sleep = sleep

    def open_session_ids(self, owner: str, limit: int) -> list[str]:
        """The ids of ``owner``'s sessions not ended, newest activity first (at most ``limit`` read)."""
        return [row.session_id for row in self.page(owner, limit=limit).rows if row.status != "ended"]

    def page(
        self, owner: str, *, limit: int, start_key: dict[str, Any] | None = None, status: Status | None = None
    ) -> SessionPage:
        """Up to ``limit`` of ``owner``'s sessions, newest activity first, after the index key
        ``start_key`` (one of ``owner``'s: the caller checks it); with ``status``, only those (read
        on until the page is full or the index ends)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": SESSIONS_INDEX,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": {"S": owner}},
            "ScanIndexForward": False,
        }
        if status is not None:
            kwargs["FilterExpression"] = "#status = :status"
            kwargs["ExpressionAttributeNames"]["#status"] = "status"
            kwargs["ExpressionAttributeValues"][":status"] = {"S": status}
        if start_key is not None:
            kwargs["ExclusiveStartKey"] = start_key
        rows: list[SessionRow] = []
        while True:
            kwargs["Limit"] = limit - len(rows)
            response = self._client.query(**kwargs)
            items = response.get("Items", [])
            rows.extend(SessionRow.of_item(item) for item in items)
            last = response.get("LastEvaluatedKey")
            if not last:
                return SessionPage(self._with_devices(rows), None)
            if len(rows) >= limit:
                key = {"pk": last["pk"], "sk": last["sk"], "owner": last["owner"], "last_active": last["last_active"]}
                return SessionPage(self._with_devices(rows), key)
            kwargs["ExclusiveStartKey"] = last

    def _with_devices(self, rows: list[SessionRow]) -> list[SessionRow]:
        """The active sessions' device counts, read from their state items in one batch (the
        index does not hold them: a count changes with every connection)."""
        active = [row.session_id for row in rows if row.status == "active"]
        if not active:
            return rows
        keys = [{"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": "STATE"}} for session_id in active[:100]]
        request = {self._table: {"Keys": keys, "ProjectionExpression": "pk, devices_n"}}
        counts: dict[str, int] = {}
        for attempt in range(ERASE_ATTEMPTS):
            response = self._client.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(self._table, []):
                counts[session_id_of(item)] = int(item.get("devices_n", {}).get("N", "0"))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            self._sleep(min(2.0, 0.05 * 2**attempt))
        return [dataclasses.replace(row, devices=counts.get(row.session_id, row.devices)) for row in rows]

    def erase(self, session_pk: str, connection_ids: list[str]) -> int:
        """Delete every item of the session: its state first (so no writer can commit after it:
        every state write is conditional on the stored version), then all the rest under its key,
        then the connections' mappings. Returns how many items were deleted."""
        self._client.delete_item(TableName=self._table, Key={"pk": {"S": session_pk}, "sk": {"S": "STATE"}})
        keys = [{"pk": {"S": f"CONN#{connection_id}"}, "sk": {"S": "CONN"}} for connection_id in connection_ids]
        keys.extend(self.session_keys(session_pk))
        for start in range(0, len(keys), BATCH_DELETE_MAX):
            self._delete_batch(keys[start : start + BATCH_DELETE_MAX])
        return len(keys) + 1

    def session_keys(self, session_pk: str) -> list[dict[str, Any]]:
        """The keys of every item under the session's partition (state, history, outbox, event ids)."""
        keys: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": session_pk}},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        while True:
            response = self._client.query(**kwargs)
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in response.get("Items", []))
            if not response.get("LastEvaluatedKey"):
                return keys
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def set_expiry(self, session_pk: str, expires_at: int) -> int:
        """Rewrite the time to live of every item of the session (an ended session's retention);
        an item deleted meanwhile is not written back. Returns how many items were updated."""
        updated = 0
        for key in self.session_keys(session_pk):
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET expires_at = :expires",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":expires": {"N": str(expires_at)}},
                )
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue
            updated += 1
        return updated

    def _delete_batch(self, keys: list[dict[str, Any]]) -> None:
        requests = [{"DeleteRequest": {"Key": key}} for key in keys]
        for attempt in range(ERASE_ATTEMPTS):
            response = self._client.batch_write_item(RequestItems={self._table: requests})
            requests = response.get("UnprocessedItems", {}).get(self._table, [])
            if not requests:
                return
            self._sleep(min(2.0, 0.05 * 2**attempt))
        raise RuntimeError(f"{len(requests)} items of the session could not be deleted")
