"""The kept events read back for replay: from the state item and the outbox items after it
(``shared.adapters.outbox`` says where a write puts them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shared.adapters import outbox as kept_events
from shared.adapters.history_reads import MAX_SEQ, session_pk
from shared.core.state import SessionState


class OutboxReads:
    """The outbox queries, through the low-level boto3 client the store holds."""

    _client: Any
    _table: str

    def load(self, session_id: str) -> SessionState | None:
        raise NotImplementedError  # the store's consistent read of the state item

    def outbox(self, session_id: str, after_seq: int = 0, before_seq: int = MAX_SEQ + 1) -> list[tuple[int, str]]:
        """The kept frames with ``after_seq < seq < before_seq``, in seq order."""
        return [(seq, frame) for seq, frame, _to in self._kept(session_id, after_seq, before_seq)]

    def outbox_for(
        self, session_id: str, device_id: str, after_seq: int = 0, before_seq: int = MAX_SEQ + 1
    ) -> list[tuple[int, str]]:
        """The kept frames with ``after_seq < seq < before_seq`` that device ``device_id`` hears
        (those for every device, and those for it alone), in seq order."""
        kept = self._kept(session_id, after_seq, before_seq)
        return [(seq, frame) for seq, frame, to in kept if to is None or to == device_id]

    def _kept(self, session_id: str, after_seq: int, before_seq: int) -> list[tuple[int, str, str | None]]:
        before_seq = min(before_seq, MAX_SEQ + 1)
        if after_seq + 1 > before_seq - 1:
            return []
        state = self.load(session_id)  # first: what it holds then is in an item by the Query's time
        held = state.kept if state is not None else []
        events = kept_events.kept_between(held, self._outbox_items(session_id, after_seq), after_seq, before_seq)
        return [(event.seq, event.frame, event.to) for event in events]

    def _outbox_items(self, session_id: str, after_seq: int) -> Iterator[dict[str, Any]]:
        """The outbox items holding events after ``after_seq``, oldest first, a page at a time."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": {"S": session_pk(session_id)},
                ":low": {"S": kept_events.outbox_sk(after_seq + 1)},
                ":high": {"S": kept_events.outbox_sk(MAX_SEQ)},
            },
            "ConsistentRead": True,
        }
        while True:
            response = self._client.query(**kwargs)
            yield from response.get("Items", [])
            if not response.get("LastEvaluatedKey"):
                return
            kwargs = {**kwargs, "ExclusiveStartKey": response["LastEvaluatedKey"]}
