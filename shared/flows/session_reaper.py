"""The session reaper: when DynamoDB's time to live deletes a session's state, the rest of the
session goes with it.

A session's ``STATE`` item expires a while after the session's last change (every commit moves its
``expires_at``), and nothing else of a session in use expires before it: so a session keeps all of
its history for as long as it is used. The table's stream reports the state's deletion, and this
flow deletes everything that remains under the session's key (history, outbox, event ids, parts).

Only deletions made by the time to live count: DynamoDB records them in the stream with the
``userIdentity`` ``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}`` (AWS, DynamoDB
developer guide, "DynamoDB TTL and DynamoDB Streams"). A session erased through the sessions API
deletes its own items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
SESSION_PREFIX = "SESSION#"
STATE_SK = "STATE"


class ReaperStore(Protocol):
    def expired_session_keys(self, session_id: str) -> list[dict[str, Any]]: ...

    def delete_items(self, keys: list[dict[str, Any]]) -> int: ...


def _string(value: Any) -> str | None:
    return value.get("S") if isinstance(value, Mapping) and isinstance(value.get("S"), str) else None


def expired_session(record: Mapping[str, Any]) -> str | None:
    """The id of the session whose state DynamoDB's time to live deleted, from one stream record;
    None for any other record."""
    if record.get("eventName") != "REMOVE":
        return None
    identity = record.get("userIdentity")
    if not isinstance(identity, Mapping) or identity.get("type") != "Service":
        return None
    if identity.get("principalId") != TTL_PRINCIPAL:
        return None
    change = record.get("dynamodb")
    keys = change.get("Keys") if isinstance(change, Mapping) else None
    if not isinstance(keys, Mapping):
        return None
    pk, sk = _string(keys.get("pk")), _string(keys.get("sk"))
    if sk != STATE_SK or pk is None or not pk.startswith(SESSION_PREFIX) or len(pk) == len(SESSION_PREFIX):
        return None
    return pk.removeprefix(SESSION_PREFIX)


@dataclass(frozen=True)
class Reaped:
    session_id: str
    deleted: int


class SessionReaper:
    def __init__(self, store: ReaperStore) -> None:
        self.store = store

    def reap(self, records: Iterable[Mapping[str, Any]]) -> list[Reaped]:
        """Delete what remains of each session whose state expired in ``records`` (each once)."""
        reaped: list[Reaped] = []
        seen: set[str] = set()
        for record in records:
            session_id = expired_session(record)
            if session_id is None or session_id in seen:
                continue
            seen.add(session_id)
            keys = self.store.expired_session_keys(session_id)
            reaped.append(Reaped(session_id, self.store.delete_items(keys)))
        return reaped
