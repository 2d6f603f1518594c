"""What the local AgentCore Memory holds: its memories (each with its strategies), their events,
sessions and long-term records, and the client tokens already answered. One lock guards it all (the
server answers each request on a thread of its own).

Tests read it through ``records(memory_id)`` and ``events(memory_id)`` (newest first, in the API's
``MemoryRecord`` and ``Event`` shapes) and empty it with ``clear()``.
"""

from __future__ import annotations

import copy
import itertools
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conductor_local.agentcore_memory.errors import not_found

LOCAL_MEMORY_ID = "voiceide_local-0123456789"
"""The local stack's memory (botocore's ``MemoryId`` pattern: a name, ``-``, ten characters)."""
_MEMORY_ARN = re.compile(r"arn:[^:]+:bedrock-agentcore:[^:]*:[0-9]{12}:memory/(.+)")


@dataclass(frozen=True)
class Strategy:
    """A built-in strategy of a memory: its id and the namespace template its records go to."""

    strategy_id: str
    name: str
    namespace_template: str


PREFERENCES = Strategy("preferences-0123456789", "preferences", "/people/{actorId}/preferences")
FACTS = Strategy("facts-0123456789", "facts", "/people/{actorId}/projects/{project}")
SUMMARIES = Strategy("summaries-0123456789", "summaries", "/people/{actorId}/sessions/{sessionId}")
DEFAULT_STRATEGIES = (PREFERENCES, FACTS, SUMMARIES)
"""The conductor's memory as deployed (``infra/constructs/memory.py``); the local ids end in ten characters."""


def _template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts))


@dataclass
class Event:
    memory_id: str
    actor_id: str
    session_id: str
    event_id: str
    event_timestamp: datetime
    payload: list[dict[str, Any]]
    branch: dict[str, Any] | None
    metadata: dict[str, Any] | None
    seq: int

    def shape(self, include_payload: bool = True) -> dict[str, Any]:
        """The API's ``Event``."""
        event: dict[str, Any] = {
            "memoryId": self.memory_id,
            "actorId": self.actor_id,
            "sessionId": self.session_id,
            "eventId": self.event_id,
            "eventTimestamp": self.event_timestamp,
        }
        if include_payload:
            event["payload"] = copy.deepcopy(self.payload)
        if self.branch is not None:
            event["branch"] = dict(self.branch)
        if self.metadata:
            event["metadata"] = copy.deepcopy(self.metadata)
        return event

    @property
    def branch_name(self) -> str:
        return str((self.branch or {}).get("name", "main"))


@dataclass
class Record:
    memory_id: str
    record_id: str
    text: str
    strategy_id: str | None
    namespace: str | None
    created_at: datetime
    timestamp: datetime
    seq: int
    written_seq: int
    """The store's sequence number at the record's last write (a merge rewrites it)."""
    metadata: dict[str, Any] | None = None
    expires_at: datetime | None = None

    def summary(self, score: float | None = None) -> dict[str, Any]:
        """The API's ``MemoryRecordSummary`` (with ``score`` in a search's answer)."""
        summary = self._common()
        if score is not None:
            summary["score"] = score
        return summary

    def shape(self) -> dict[str, Any]:
        """The API's ``MemoryRecord``."""
        record = self._common()
        if self.expires_at is not None:
            record["expiresAt"] = self.expires_at
        return record

    def _common(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "memoryRecordId": self.record_id,
            "content": {"text": self.text},
            "namespaces": [self.namespace] if self.namespace is not None else [],
            "createdAt": self.created_at,
            "timestamp": self.timestamp,
        }
        if self.strategy_id is not None:
            record["memoryStrategyId"] = self.strategy_id
        if self.metadata:
            record["metadata"] = copy.deepcopy(self.metadata)
        return record

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass
class Session:
    actor_id: str
    session_id: str
    created_at: datetime
    seq: int


@dataclass
class Memory:
    """One memory resource and everything in it."""

    memory_id: str
    strategies: tuple[Strategy, ...]
    events: dict[str, Event] = field(default_factory=dict)
    sessions: dict[tuple[str, str], Session] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    answered: dict[tuple[str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Client tokens already answered: (operation, token) -> (the request's fingerprint, the answer)."""

    def strategy(self, strategy_id: str) -> Strategy | None:
        return next((s for s in self.strategies if s.strategy_id == strategy_id), None)

    def strategy_of_namespace(self, namespace: str) -> Strategy | None:
        """The strategy whose namespace template the namespace fits (a record written without one)."""
        return next((s for s in self.strategies if _template_pattern(s.namespace_template).fullmatch(namespace)), None)

    def clear(self) -> None:
        self.events.clear()
        self.sessions.clear()
        self.records.clear()
        self.answered.clear()


def new_record_id() -> str:
    """``mem-`` and 36 characters: the model's ``MemoryRecordId`` is 40 to 50 characters."""
    return "mem-" + secrets.token_hex(18)


def new_event_id(timestamp: datetime) -> str:
    """``<epoch milliseconds>#<hex>`` (the model's ``EventId`` pattern ``[0-9]+#[a-fA-F0-9]+``)."""
    return f"{max(0, int(timestamp.timestamp() * 1000))}#{secrets.token_hex(8)}"


class MemoryStore:
    """The memories served, by id (``memory_ids``, each with ``strategies``); ``lock`` guards them."""

    def __init__(
        self, memory_ids: tuple[str, ...] = (LOCAL_MEMORY_ID,), strategies: tuple[Strategy, ...] = DEFAULT_STRATEGIES
    ) -> None:
        self.lock = threading.RLock()
        self._memories: dict[str, Memory] = {}
        self._seq = itertools.count(1)
        for memory_id in memory_ids:
            self.add_memory(memory_id, strategies)

    def add_memory(self, memory_id: str, strategies: tuple[Strategy, ...] = DEFAULT_STRATEGIES) -> None:
        with self.lock:
            self._memories[memory_id] = Memory(memory_id, tuple(strategies))

    def memory(self, memory_id: str) -> Memory:
        """The memory a request names (by id or ARN); ``ResourceNotFoundException`` when there is none."""
        arn = _MEMORY_ARN.fullmatch(memory_id)
        key = arn.group(1) if arn else memory_id
        with self.lock:
            memory = self._memories.get(key)
        if memory is None:
            raise not_found(f"Memory not found: {memory_id}")
        return memory

    def next_seq(self) -> int:
        return next(self._seq)

    # ---- the test handle ----------------------------------------------------------------------

    def records(self, memory_id: str = LOCAL_MEMORY_ID) -> list[dict[str, Any]]:
        """Every long-term record of the memory (``MemoryRecord`` shapes), newest first."""
        with self.lock:
            found = sorted(self.memory(memory_id).records.values(), key=lambda r: (r.created_at, r.seq), reverse=True)
            return [record.shape() for record in found]

    def events(self, memory_id: str = LOCAL_MEMORY_ID) -> list[dict[str, Any]]:
        """Every event of the memory (``Event`` shapes, payloads included), newest first."""
        with self.lock:
            events = self.memory(memory_id).events.values()
            found = sorted(events, key=lambda e: (e.event_timestamp, e.seq), reverse=True)
            return [event.shape() for event in found]

    def clear(self) -> None:
        """Forget every event, session, record and client token (the memories stay)."""
        with self.lock:
            for memory in self._memories.values():
                memory.clear()
