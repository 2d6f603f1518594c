"""Amazon Bedrock AgentCore Memory (boto3 ``bedrock-agentcore``): what the conductor remembers of people.

One memory per stage (``CONDUCTOR_MEMORY_ID``). Each person is an actor (their verified ``sub``); the
rules of where their records live and what they mean are in ``shared.core.person_memory``. This
adapter only speaks the data plane: events in (one per committed turn), records out, records and a
session's events deleted.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from shared.core.person_memory import Recollection, placed

MAX_EVENT_TEXT = 100_000  # one conversational payload's text (the service's limit)
MAX_RECORD_TEXT = 16_000
PAGE = 100  # the most records or events one list call returns
MAX_ERASED = 5_000  # records of a person erased in one request, at most (pages of PAGE)


def _when(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else 0.0


def _token(*parts: str) -> str:
    """A client token for an idempotent request: the same parts, the same token."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:64]


def not_found(error: ClientError) -> bool:
    return bool(error.response.get("Error", {}).get("Code") == "ResourceNotFoundException")


class AgentCoreMemory:
    """``client``: a ``bedrock-agentcore`` client, or a function that makes one when first needed (the
    service model is then read only by a container that uses the memory)."""

    def __init__(self, client: Any, memory_id: str) -> None:
        self._client: Callable[[], Any] = functools.cache(client) if callable(client) else (lambda: client)
        self.memory_id = memory_id

    # ---- records --------------------------------------------------------------------------------

    def _read(self, actor: str, summary: dict[str, Any]) -> Recollection | None:
        """A record as the conductor reads it; None when none of its namespaces is the actor's."""
        for namespace in summary.get("namespaces") or []:
            where = placed(actor, namespace)
            if where is not None:
                kind, scope, project = where
                return Recollection(
                    id=summary["memoryRecordId"],
                    text=(summary.get("content") or {}).get("text", ""),
                    kind=kind,
                    scope=scope,
                    project=project,
                    created_at=_when(summary.get("createdAt")),
                )
        return None

    def retrieve(self, actor: str, namespace_path: str, query: str, top_k: int) -> list[Recollection]:
        """The actor's records under ``namespace_path`` most relevant to ``query``, best first."""
        answer = self._client().retrieve_memory_records(
            memoryId=self.memory_id,
            namespacePath=namespace_path,
            searchCriteria={"searchQuery": query[:10_000], "topK": top_k},
            maxResults=top_k,
        )
        found = (self._read(actor, summary) for summary in answer.get("memoryRecordSummaries", []))
        return [record for record in found if record is not None]

    def page(
        self, actor: str, namespace_path: str, *, limit: int, next_token: str | None = None
    ) -> tuple[list[Recollection], str | None]:
        """One page of the actor's records under ``namespace_path``, newest first, and the next page's token."""
        request: dict[str, Any] = {"memoryId": self.memory_id, "namespacePath": namespace_path, "maxResults": limit}
        if next_token:
            request["nextToken"] = next_token
        answer = self._client().list_memory_records(**request)
        found = (self._read(actor, summary) for summary in answer.get("memoryRecordSummaries", []))
        return [record for record in found if record is not None], answer.get("nextToken") or None

    def all_records(self, actor: str, namespace_path: str) -> Iterator[Recollection]:
        token: str | None = None
        seen = 0
        while seen < MAX_ERASED:
            records, token = self.page(actor, namespace_path, limit=PAGE, next_token=token)
            yield from records
            seen += len(records)
            if not token:
                return

    def record(self, actor: str, record_id: str) -> Recollection | None:
        """The actor's record ``record_id``; None when there is none, or it is another actor's."""
        try:
            answer = self._client().get_memory_record(memoryId=self.memory_id, memoryRecordId=record_id)
        except ClientError as error:
            if not_found(error) or error.response.get("Error", {}).get("Code") == "ValidationException":
                return None
            raise
        return self._read(actor, answer.get("memoryRecord") or {})

    def create(self, namespace: str, text: str, *, request_key: str, now: float) -> str:
        """A record written as is (no extraction), its id. ``request_key`` makes a repeat of the same
        request create nothing more."""
        token = _token(self.memory_id, namespace, request_key)
        answer = self._client().batch_create_memory_records(
            memoryId=self.memory_id,
            records=[
                {
                    "requestIdentifier": token[:80],
                    "namespaces": [namespace],
                    "content": {"text": text[:MAX_RECORD_TEXT]},
                    "timestamp": datetime.fromtimestamp(now, UTC),
                }
            ],
            clientToken=token,
        )
        made = answer.get("successfulRecords") or []
        if not made:
            failed = (answer.get("failedRecords") or [{}])[0]
            raise MemoryFailed(str(failed.get("errorMessage") or "the record was not created"))
        return str(made[0]["memoryRecordId"])

    def delete(self, record_id: str) -> bool:
        """Delete one record; False when it was already gone."""
        try:
            self._client().delete_memory_record(memoryId=self.memory_id, memoryRecordId=record_id)
        except ClientError as error:
            if not_found(error):
                return False
            raise
        return True

    def delete_many(self, record_ids: list[str]) -> int:
        deleted = 0
        for start in range(0, len(record_ids), PAGE):
            chunk = record_ids[start : start + PAGE]
            answer = self._client().batch_delete_memory_records(
                memoryId=self.memory_id, records=[{"memoryRecordId": record_id} for record_id in chunk]
            )
            deleted += len(answer.get("successfulRecords") or [])
        return deleted

    # ---- events ---------------------------------------------------------------------------------

    def add_turn(
        self,
        actor: str,
        session_id: str,
        said: str,
        answered: str,
        *,
        project: str,
        turn_key: str,
        now: float,
        extract: bool = True,
    ) -> str:
        """One committed turn as an event (the person's words and the answer): the strategies extract
        preferences, facts and the session's summary from it (not when ``extract`` is False: the turn
        managed the memory itself). Its id."""
        payload = [{"conversational": {"content": {"text": said[:MAX_EVENT_TEXT]}, "role": "USER"}}]
        if answered:
            payload.append({"conversational": {"content": {"text": answered[:MAX_EVENT_TEXT]}, "role": "ASSISTANT"}})
        request: dict[str, Any] = {
            "memoryId": self.memory_id,
            "actorId": actor,
            "sessionId": session_id,
            "eventTimestamp": datetime.fromtimestamp(now, UTC),
            "payload": payload,
            "clientToken": _token(self.memory_id, actor, session_id, turn_key),
            "extractionConfig": {"namespaceVariables": {"project": project}},
        }
        if not extract:
            request["extractionMode"] = "SKIP"
        answer = self._client().create_event(**request)
        return str(answer["event"]["eventId"])

    def sessions(self, actor: str) -> list[str]:
        """The actor's sessions that have events (at most ``MAX_ERASED``)."""
        found: list[str] = []
        token: str | None = None
        while len(found) < MAX_ERASED:
            request: dict[str, Any] = {"memoryId": self.memory_id, "actorId": actor, "maxResults": PAGE}
            if token:
                request["nextToken"] = token
            try:
                answer = self._client().list_sessions(**request)
            except ClientError as error:
                if not_found(error):
                    return found
                raise
            found.extend(summary["sessionId"] for summary in answer.get("sessionSummaries", []))
            token = answer.get("nextToken")
            if not token:
                break
        return found

    def erase_session(self, actor: str, session_id: str) -> int:
        """Delete every event of the actor's session; how many there were. Each page is deleted
        whole and the first page read again, so no event is skipped by a page that moved."""
        erased = 0
        for _ in range(MAX_ERASED // PAGE):
            try:
                answer = self._client().list_events(
                    memoryId=self.memory_id,
                    actorId=actor,
                    sessionId=session_id,
                    includePayloads=False,
                    maxResults=PAGE,
                )
            except ClientError as error:
                if not_found(error):
                    return erased
                raise
            events = answer.get("events", [])
            if not events:
                return erased
            for event in events:
                try:
                    self._client().delete_event(
                        memoryId=self.memory_id, actorId=actor, sessionId=session_id, eventId=event["eventId"]
                    )
                    erased += 1
                except ClientError as error:
                    if not not_found(error):
                        raise
        return erased


class MemoryFailed(Exception):
    """The memory refused or failed a request."""
