"""The kept events read back for replay: those the state item holds and the outbox items after the
seq asked for (``shared.adapters.outbox`` says where a write puts them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shared.adapters import outbox as kept_events
from shared.adapters.history_reads import MAX_SEQ, session_pk
from shared.core.state import KeptEvent


class OutboxReads:
    """The outbox queries, through the low-level boto3 client the store holds."""

    _client: Any
    _table: str

    def _kept_after(
        self, session_id: str, read_held: Callable[[], Sequence[KeptEvent]], after_seq: int, before_seq: int
    ) -> list[KeptEvent]:
        """The kept events with ``after_seq < seq < before_seq``, in seq order. ``read_held``: what
        the state item holds, read first: an event moved out of it since is in an item by the
        Query's time."""
        before_seq = min(before_seq, MAX_SEQ + 1)
        if after_seq + 1 > before_seq - 1:
            return []
        held = read_held()
        return kept_events.kept_between(held, self._outbox_items(session_id, after_seq), after_seq, before_seq)

    def _outbox_items(self, session_id: str, after_seq: int) -> Iterator[dict[str, Any]]:
        """The outbox items holding events after ``after_seq``, oldest first, a page at a time (the
        caller stops reading past what it asked for)."""
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
