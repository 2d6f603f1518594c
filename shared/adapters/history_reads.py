"""Reading a session's stored history: the model's window, ranges, and the transcript's pages.

The reads of ``SessionStore`` (``shared.adapters.store``), which writes the ``SESSION#<id>`` / ``MSG#<seq>``
items these read. Each message item holds its content blocks as JSON, the state version that
wrote it (``v``) and when it was first written (``at``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.core.messages import Message, is_plain_user_message, window_start
from shared.core.transcript import StoredMessage

MAX_SEQ = 10**10 - 1  # sequence numbers are stored zero-padded to ten digits


def session_pk(session_id: str) -> str:
    return f"SESSION#{session_id}"


def _msg_sk(seq: int) -> str:
    return f"MSG#{seq:010d}"


@dataclass(frozen=True)
class RecentHistory:
    messages: list[Message]
    first_seq: int  # the seq of ``messages[0]``
    last_version: int | None  # the state version that last wrote them (None: written before versions)


# Messages per Query page when reading up to a size. The first page holds a usual voice session's
# window (20 exchanges, or 10 turns with a tool round each) in one round trip, which matters on
# the way to the first word; later pages are smaller, so a session of big tool results stops
# reading soon after it has what a request could carry.
FIRST_HISTORY_PAGE = 40
HISTORY_PAGE = 16


def _item_chars(item: dict[str, Any]) -> int:
    return sum(len(block.get("S", "")) for block in item.get("content", {}).get("L", []))


def _is_plain_user_item(item: dict[str, Any]) -> bool:
    blocks = item.get("content", {}).get("L", [])
    return item.get("role", {}).get("S") == "user" and not any(
        block.get("S", "").startswith('{"toolResult"') for block in blocks
    )


def _message(item: dict[str, Any]) -> Message:
    return {"role": item["role"]["S"], "content": [json.loads(block["S"]) for block in item["content"]["L"]]}


class HistoryReads:
    """The history queries, through the low-level boto3 client the store holds."""

    _client: Any
    _table: str

    def _query_all(self, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item a Query matches, page after page."""
        items: list[dict[str, Any]] = []
        while True:
            response = self._client.query(**kwargs)
            items.extend(response.get("Items", []))
            if not response.get("LastEvaluatedKey"):
                return items
            kwargs = {**kwargs, "ExclusiveStartKey": response["LastEvaluatedKey"]}

    # ---- history -------------------------------------------------------------------------

    def history(self, session_id: str, window: int, *, max_chars: int | None = None) -> list[Message]:
        """The most recent messages (at most ``window``, and about ``max_chars`` of text),
        starting at a plain user message.

        When the last ``window`` messages hold none (a long tool loop), the window reaches back to
        the nearest one before them: the smallest valid window, never the whole history.
        """
        messages = [_message(item) for item in self._query_items(session_id, window, max_chars)]
        start = window_start(messages)
        if start == len(messages) and messages:
            messages = self._query_messages(session_id, limit=None)
            starts = [index for index, message in enumerate(messages) if is_plain_user_message(message)]
            earlier = [index for index in starts if index <= len(messages) - window]
            start = earlier[-1] if earlier else (starts[0] if starts else len(messages))
        return messages[start:]

    def messages(self, session_id: str) -> list[Message]:
        """The whole stored history, oldest first."""
        return self._query_messages(session_id, limit=None)

    def messages_between(self, session_id: str, start_seq: int, end_seq: int) -> list[Message]:
        """The stored messages with ``start_seq <= seq < end_seq``, oldest first."""
        if end_seq <= start_seq:
            return []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": {"S": session_pk(session_id)},
                ":low": {"S": _msg_sk(start_seq)},
                ":high": {"S": _msg_sk(end_seq - 1)},
            },
            "ConsistentRead": True,
        }
        return [_message(item) for item in self._query_all(kwargs)]

    def transcript_items(self, session_id: str, start_seq: int, limit: int) -> list[StoredMessage]:
        """Up to ``limit`` stored messages from ``start_seq`` on, oldest first, each with its seq
        and when it was stored (the sessions API's transcript); fewer only at the end."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": {"S": session_pk(session_id)},
                ":low": {"S": _msg_sk(max(start_seq, 0))},
                ":high": {"S": _msg_sk(MAX_SEQ)},
            },
            "ConsistentRead": True,
        }
        while len(items) < limit:
            response = self._client.query(**kwargs, Limit=limit - len(items))
            items.extend(response.get("Items", []))
            if not response.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return [
            StoredMessage(
                seq=int(item["sk"]["S"].split("#", 1)[1]),
                at=float(item["at"]["N"]) if "at" in item else None,
                role=item["role"]["S"],
                content=_message(item)["content"],
            )
            for item in items
        ]

    def recent_history(self, session_id: str, limit: int, *, max_chars: int | None = None) -> RecentHistory:
        """The last ``limit`` messages as stored (about ``max_chars`` of text), with where they
        start and the version that last wrote them: read beside the state, it tells whether both
        saw the same."""
        items = self._query_items(session_id, limit, max_chars)
        versions = [int(item["v"]["N"]) if "v" in item else None for item in items]
        return RecentHistory(
            messages=[_message(item) for item in items],
            first_seq=int(items[0]["sk"]["S"].split("#", 1)[1]) if items else 0,
            last_version=None if None in versions else max(versions, default=0),  # type: ignore[type-var]
        )

    def _query_messages(self, session_id: str, limit: int | None) -> list[Message]:
        return [_message(item) for item in self._query_items(session_id, limit)]

    def _query_items(self, session_id: str, limit: int | None, max_chars: int | None = None) -> list[dict[str, Any]]:
        """The newest messages, at most ``limit``; with ``max_chars``, reading stops (in pages of
        ``FIRST_HISTORY_PAGE`` then ``HISTORY_PAGE``) once they hold that much text and start at a
        plain user message: a long session with big tool results does not read what no request
        could carry."""
        items: list[dict[str, Any]] = []
        size = 0
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": session_pk(session_id)}, ":prefix": {"S": "MSG#"}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        while True:
            if limit is not None:
                kwargs["Limit"] = limit - len(items)
            if max_chars is not None:
                page_size = HISTORY_PAGE if items else FIRST_HISTORY_PAGE
                kwargs["Limit"] = min(kwargs.get("Limit", page_size), page_size)
            response = self._client.query(**kwargs)
            page = response.get("Items", [])
            items.extend(page)
            size += sum(_item_chars(item) for item in page)
            last = response.get("LastEvaluatedKey")
            if not last or (limit is not None and len(items) >= limit):
                break
            if max_chars is not None and size >= max_chars and any(map(_is_plain_user_item, items)):
                break
            kwargs["ExclusiveStartKey"] = last
        items.reverse()
        return items
