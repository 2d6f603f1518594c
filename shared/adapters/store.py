"""DynamoDB store: connections, session state, history, outbox — one table, generic keys.

Items (``pk`` / ``sk``):

* ``CONN#<connectionId>`` / ``CONN`` — the session a connection belongs to (and its principal).
* ``SESSION#<id>`` / ``STATE`` — the core's ``SessionState`` as JSON plus ``version``; every
  change is a conditional write on that version (and on ``incarnation``, made when the state is
  first written: a session erased and started again never takes a write meant for the old one).
  It also carries what the sessions index lists (``shared.adapters.session_records``).
* ``SESSION#<id>`` / ``MSG#<seq>`` — one item per history message (content blocks as JSON, and
  ``at``: when it was first written), so no session meets the 400 KB item limit and the recent
  window is one Query.
* ``SESSION#<id>`` / ``OUTBOX#<seq>`` — server events kept for replay to a reconnecting app.
* ``SESSION#<id>`` / ``PART#<digest of the call id>#<index>`` — a part of a tool result sent in
  parts, until all are in (``shared.core.result_parts``).

State and history writes of one decision go in one transaction, so a tool-use message is never
stored without its results. Every item carries ``expires_at`` (DynamoDB TTL). With the session
reaper deployed (``shared.flows.session_reaper``), a session lives as long as its state: the ``STATE``
item expires a while after the session's last change, history messages only after a far backstop
(``history_ttl_seconds``), so a session in use keeps all of its history however long it lasts; when
the state expires, the reaper deletes what remains. Without it, history expires after the session
TTL from its last write.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from shared.adapters import outbox as kept_events
from shared.adapters import state_codec
from shared.adapters.history_reads import MAX_SEQ, HistoryReads, _msg_sk, session_pk
from shared.adapters.outbox_reads import OutboxReads
from shared.adapters.person_spend import PersonSpend
from shared.adapters.session_records import index_attributes
from shared.core import event_ids
from shared.core.decision import PartWrite
from shared.core.history_ops import AppendMessage, ExtendMessage, HistoryOp, ReplaceMessage
from shared.core.state import KeptEvent, SessionState

__all__ = ["ConnectionInfo", "DuplicateEvent", "SessionStore", "VersionConflict"]

STATE_SK = "STATE"
CONN_SK = "CONN"
CONNECTION_TTL_SECONDS = 3 * 3600  # API Gateway closes a connection after 2 h at most
# With the session reaper, a history message outlives its session only if the reaper failed: it is
# then deleted this long after it was last written, whatever happens.
HISTORY_BACKSTOP_SECONDS = 400 * 24 * 3600
BATCH_WRITE_MAX = 25  # DynamoDB's BatchWriteItem limit
DELETE_ATTEMPTS = 8


class VersionConflict(Exception):
    """Someone else changed the session first: reload and decide again."""


class DuplicateEvent(Exception):
    """The client event id was already taken by this session (``shared.core.event_ids``)."""


@dataclass(frozen=True)
class ConnectionInfo:
    connection_id: str
    session_id: str
    principal: str | None
    arrived_seq: int | None = None  # arrived beside a live connection: the next seq then
    replaces: str | None = None  # the connection it took the session over from at $connect


def kept_of(entries: Iterable[tuple[int, str]], targets: dict[int, str]) -> list[KeptEvent]:
    """A decision's kept frames (seq, frame) as events, each with the one device it is for, if one."""
    return [KeptEvent(seq=seq, frame=frame, to=targets.get(seq)) for seq, frame in entries]


def _part_sk(call_id: str, index: int | None) -> str:
    """A part of a call's result; the call by a digest of its id (any string the app chose)."""
    prefix = f"PART#{hashlib.sha256(call_id.encode()).hexdigest()[:32]}#"
    return prefix if index is None else f"{prefix}{index:03d}"


def _conflict_reasons(error: ClientError) -> list[str]:
    return [reason.get("Code", "") for reason in error.response.get("CancellationReasons", [])]


class SessionStore(HistoryReads, OutboxReads):
    """All DynamoDB access of the conductor, through the low-level boto3 client."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        ttl_seconds: int,
        ended_ttl_seconds: int | None = None,
        history_ttl_seconds: int | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._table = table_name
        self._ttl = ttl_seconds
        self._history_ttl = max(history_ttl_seconds or ttl_seconds, ttl_seconds)
        self._sleep = sleep
        self._ended_ttl = ttl_seconds if ended_ttl_seconds is None else ended_ttl_seconds
        self._clock = clock

    def person_spend(self) -> PersonSpend:
        """The persons' daily spend, kept in this table through this client (``person_spend``)."""
        return PersonSpend(self._client, self._table, self._clock)

    def _expires_at(self, seconds: int | None = None) -> dict[str, str]:
        return {"N": str(int(self._clock()) + (seconds or self._ttl))}

    def _history_expires_at(self) -> dict[str, str]:
        return self._expires_at(self._history_ttl)

    def _state_expires_at(self, state: SessionState) -> dict[str, str]:
        """An ended session is kept for the ended retention after it ended, whatever writes it
        still gets; any other session for the session TTL after its last change."""
        if state.ended_at is not None:
            return {"N": str(int(state.ended_at) + self._ended_ttl)}
        return self._expires_at()

    # ---- connections ---------------------------------------------------------------------

    def put_connection(
        self,
        connection_id: str,
        session_id: str,
        principal: str | None,
        *,
        arrived_seq: int | None = None,
        replaces: str | None = None,
    ) -> None:
        """``arrived_seq``: the session's next seq when the connection arrived beside a live one (it
        is caught up from there if it takes the session over); ``replaces``: the connection it took
        the session over from (told so on this one's first event)."""
        item = {
            "pk": {"S": f"CONN#{connection_id}"},
            "sk": {"S": CONN_SK},
            "session_id": {"S": session_id},
            "connected_at": {"N": str(int(self._clock()))},
            "expires_at": self._expires_at(CONNECTION_TTL_SECONDS),
        }
        if principal:
            item["principal"] = {"S": principal}
        if arrived_seq is not None:
            item["arrived_seq"] = {"N": str(arrived_seq)}
        if replaces is not None:
            item["replaces"] = {"S": replaces}
        self._client.put_item(TableName=self._table, Item=item)

    def get_connection(self, connection_id: str) -> ConnectionInfo | None:
        response = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": f"CONN#{connection_id}"}, "sk": {"S": CONN_SK}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is None:
            return None
        arrived = item.get("arrived_seq", {}).get("N")
        return ConnectionInfo(
            connection_id=connection_id,
            session_id=item["session_id"]["S"],
            principal=item.get("principal", {}).get("S"),
            arrived_seq=int(arrived) if arrived is not None else None,
            replaces=item.get("replaces", {}).get("S"),
        )

    def delete_connection(self, connection_id: str) -> None:
        self._client.delete_item(
            TableName=self._table, Key={"pk": {"S": f"CONN#{connection_id}"}, "sk": {"S": CONN_SK}}
        )

    # ---- session state -------------------------------------------------------------------

    def load(self, session_id: str) -> SessionState | None:
        response = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": STATE_SK}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return None if item is None else state_codec.decoded(item)

    def commit(
        self,
        state: SessionState,
        history: Iterable[HistoryOp] = (),
        *,
        claim_event_id: str | None = None,
        outbox: Iterable[tuple[int, str]] = (),
        outbox_ttl_seconds: int = 24 * 3600,
        part_writes: Iterable[PartWrite] = (),
        parts_dropped: Iterable[tuple[str, int]] = (),
        prepared: SessionState | None = None,
        outbox_targets: dict[int, str] | None = None,
    ) -> SessionState:
        """Write ``state`` if the stored version is still ``state.version``; returns the new state.

        History ops go in the same transaction. The client event that caused the change
        (``claim_event_id``) is recorded in the state written (``shared.core.event_ids``): an event
        is taken exactly when its effects are stored, and the decision made on the state read
        before saw whether it was taken already. The decision's events go to the outbox in the same
        transaction, so they can be replayed to a reconnecting app. ``prepared``: the state as it
        will be written, from ``prepared`` (when it was handed on before the write). Raises
        ``VersionConflict`` (decide again on fresh state).
        """
        history = list(history)
        part_writes, parts_dropped = list(part_writes), list(parts_dropped)
        new = kept_of(outbox, outbox_targets or {})
        if prepared is None:
            others = bool(history or part_writes or parts_dropped)
            prepared = self.prepared(state, bool(history), claim_event_id, kept=new, transaction=others)
        committed = prepared
        state_put = {
            "TableName": self._table,
            "Item": {
                "pk": {"S": session_pk(state.session_id)},
                "sk": {"S": STATE_SK},
                "version": {"N": str(committed.version)},
                **state_codec.encoded(committed),
                "incarnation": {"S": committed.incarnation},
                "wid": {"S": committed.write_id},
                "expires_at": self._state_expires_at(committed),
                **index_attributes(committed),
            },
        }
        if state.version == 0:
            state_put["ConditionExpression"] = "attribute_not_exists(pk)"
        elif state.incarnation and state.write_id:
            state_put["ConditionExpression"] = "version = :expected AND incarnation = :incarnation AND wid = :wid"
            state_put["ExpressionAttributeValues"] = {
                ":expected": {"N": str(state.version)},
                ":incarnation": {"S": state.incarnation},
                ":wid": {"S": state.write_id},
            }
        elif state.incarnation:
            state_put["ConditionExpression"] = "version = :expected AND incarnation = :incarnation"
            state_put["ExpressionAttributeValues"] = {
                ":expected": {"N": str(state.version)},
                ":incarnation": {"S": state.incarnation},
            }
        else:  # written before incarnations: this write gives it one
            state_put["ConditionExpression"] = "version = :expected"
            state_put["ExpressionAttributeValues"] = {":expected": {"N": str(state.version)}}
        extra = self._history_writes(state.session_id, history, committed.version)
        extra.extend(self._moved_writes(state, new, committed, outbox_ttl_seconds))
        extra.extend(self._part_writes(state.session_id, part_writes, parts_dropped))
        try:
            if not extra:
                self._client.put_item(**state_put)
            else:
                self._client.transact_write_items(TransactItems=[{"Put": state_put}, *extra])
        except ClientError as error:
            code = error.response["Error"]["Code"]
            if code == "ConditionalCheckFailedException":
                raise VersionConflict(state.session_id) from error
            if code == "TransactionCanceledException":
                reasons = _conflict_reasons(error)
                if any(reason in ("ConditionalCheckFailed", "TransactionConflict") for reason in reasons):
                    raise VersionConflict(state.session_id) from error
            raise
        return committed

    @staticmethod
    def prepared(
        state: SessionState,
        writes_history: bool,
        claim_event_id: str | None = None,
        *,
        kept: Sequence[KeptEvent] = (),
        transaction: bool = False,
    ) -> SessionState:
        """``state`` exactly as ``commit`` writes it: the next version (and the session's
        incarnation when it has none), the history version when history is written, the event
        taken, the kept events it holds (``kept``: the write's own; ``transaction``: the write has
        other items than the state). A decision's state can so be handed on while its write is
        still on its way."""
        held = kept_events.held_after(state.kept, kept, transaction=transaction or writes_history).held
        committed = state.model_copy(
            update={"version": state.version + 1, "write_id": uuid.uuid4().hex[:16], "kept": held}
        )
        if not committed.incarnation:
            committed.incarnation = uuid.uuid4().hex
        if writes_history:
            committed.history_version = committed.version
        if claim_event_id is not None:
            event_ids.record(committed, claim_event_id)
        return committed

    def _history_writes(self, session_id: str, ops: Iterable[HistoryOp], version: int) -> list[dict[str, Any]]:
        """Each written message records the state version that wrote it (``v``), so a history read
        beside a state read can tell whether it saw the same writes."""
        writes: list[dict[str, Any]] = []
        written, expires = {"N": str(version)}, self._history_expires_at()
        for op in ops:
            key = {"pk": {"S": session_pk(session_id)}, "sk": {"S": _msg_sk(op.seq)}}
            blocks = {"L": [{"S": json.dumps(block, ensure_ascii=False)} for block in op.content]}
            if isinstance(op, AppendMessage):
                writes.append(
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": {
                                **key,
                                "role": {"S": op.role},
                                "content": blocks,
                                "v": written,
                                "at": {"N": f"{self._clock():.3f}"},
                                "expires_at": expires,
                            },
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                )
            elif isinstance(op, ReplaceMessage):
                writes.append(
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": key,
                            "UpdateExpression": "SET content = :blocks, v = :v, expires_at = :exp",
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": {
                                ":blocks": blocks,
                                ":v": written,
                                ":exp": expires,
                            },
                        }
                    }
                )
            elif isinstance(op, ExtendMessage):
                writes.append(
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": key,
                            "UpdateExpression": (
                                "SET content = list_append(content, :blocks), v = :v, expires_at = :exp"
                            ),
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": {
                                ":blocks": blocks,
                                ":v": written,
                                ":exp": expires,
                            },
                        }
                    }
                )
        return writes

    # ---- tool results in parts ----------------------------------------------------------------

    def _part_writes(
        self, session_id: str, writes: Iterable[PartWrite], dropped: Iterable[tuple[str, int]]
    ) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        "pk": {"S": session_pk(session_id)},
                        "sk": {"S": _part_sk(write.call_id, write.index)},
                        "text": {"S": write.text},
                        "expires_at": self._expires_at(),
                    },
                }
            }
            for write in writes
        ]
        for call_id, count in dropped:
            ops.extend(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": {"pk": {"S": session_pk(session_id)}, "sk": {"S": _part_sk(call_id, index)}},
                    }
                }
                for index in range(count)
            )
        return ops

    def result_parts(self, session_id: str, call_id: str) -> list[tuple[int, str]]:
        """The stored parts of a call's result: (index, text), in index order."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {
                ":pk": {"S": session_pk(session_id)},
                ":prefix": {"S": _part_sk(call_id, None)},
            },
            "ConsistentRead": True,
        }
        items = self._query_all(kwargs)
        return [(int(item["sk"]["S"].rsplit("#", 1)[1]), item["text"]["S"]) for item in items]

    # ---- outbox (server events kept for replay) ----------------------------------------------

    def _moved_writes(
        self, state: SessionState, new: Sequence[KeptEvent], committed: SessionState, ttl_seconds: int
    ) -> list[dict[str, Any]]:
        """The outbox item of the kept events this write moves out of the state item (none mostly)."""
        held = {event.seq for event in committed.kept}
        moved = [event for event in [*state.kept, *new] if event.seq not in held]
        if not moved:
            return []
        item = kept_events.item_of(session_pk(state.session_id), moved, self._expires_at(ttl_seconds))
        return [{"Put": {"TableName": self._table, "Item": item}}]

    def outbox(self, session_id: str, after_seq: int = 0, before_seq: int = MAX_SEQ + 1) -> list[tuple[int, str]]:
        """The kept frames with ``after_seq < seq < before_seq``, in seq order."""
        return [(event.seq, event.frame) for event in self._kept(session_id, after_seq, before_seq)]

    def outbox_for(
        self, session_id: str, device_id: str, after_seq: int = 0, before_seq: int = MAX_SEQ + 1
    ) -> list[tuple[int, str]]:
        """The kept frames with ``after_seq < seq < before_seq`` that device ``device_id`` hears
        (those for every device, and those for it alone), in seq order."""
        kept = self._kept(session_id, after_seq, before_seq)
        return [(event.seq, event.frame) for event in kept if event.to is None or event.to == device_id]

    def _kept(self, session_id: str, after_seq: int, before_seq: int) -> list[KeptEvent]:
        def held() -> list[KeptEvent]:
            state = self.load(session_id)
            return state.kept if state is not None else []

        return self._kept_after(session_id, held, after_seq, before_seq)

    # ---- what an expired session leaves behind ---------------------------------------------------

    def expired_session_keys(self, session_id: str) -> list[dict[str, Any]]:
        """The keys of what remains of a session whose state expired. When the state is gone, that
        is everything under its key. When a new session with the same id was started meanwhile (a
        new incarnation), only the old history messages: those written before it was created."""
        state = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": STATE_SK}},
            ProjectionExpression="created_at",
            ConsistentRead=True,
        ).get("Item")
        items = self._query_all(
            {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": session_pk(session_id)}},
                "ProjectionExpression": "pk, sk, #at",
                "ExpressionAttributeNames": {"#at": "at"},
                "ConsistentRead": True,
            }
        )
        if state is not None:
            started = float(state.get("created_at", {}).get("N", "0"))
            items = [
                item
                for item in items
                if item["sk"]["S"].startswith("MSG#") and float(item.get("at", {}).get("N", "0")) < started
            ]
        return [{"pk": item["pk"], "sk": item["sk"]} for item in items]

    def delete_items(self, keys: list[dict[str, Any]]) -> int:
        """Delete ``keys`` in batches of 25, sending again what DynamoDB left unprocessed (with
        backoff). Returns how many were deleted; raises when some could not be."""
        for start in range(0, len(keys), BATCH_WRITE_MAX):
            requests = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + BATCH_WRITE_MAX]]
            for attempt in range(DELETE_ATTEMPTS):
                response = self._client.batch_write_item(RequestItems={self._table: requests})
                requests = response.get("UnprocessedItems", {}).get(self._table, [])
                if not requests:
                    break
                self._sleep(min(2.0, 0.05 * 2**attempt))
            if requests:
                raise RuntimeError(f"{len(requests)} items of the session could not be deleted")
        return len(keys)
