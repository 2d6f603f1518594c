"""The sessions API's memories: what the conductor remembers of the signed-in person, listed and erased.

Only the person's own namespace is ever read or written (``/people/<sub>/``, the ``sub`` verified by
the API's authorizer). An id that is not theirs, not there or not an id at all is answered alike
(``NotFound``). Erasing also takes the records out of the blocks the person's open sessions carry, so
no later model request of theirs sees an erased record; and erasing everything deletes the person's
events too (what the strategies would extract from again).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from shared.core import person_memory as rules
from shared.core.decision import Outcome
from shared.core.person_memory import Recollection
from shared.core.state import SessionState
from shared.flows.session_service import BadRequest, NotFound
from shared.wire.session_api_models import Memory, MemoryList, timestamp
from shared.wire.session_cursors import BadCursor, CursorSeal

LIMIT_MAX = 100


class NoSuchMemory(NotFound):
    """No such record of this person: never made, forgotten, or another person's, alike."""


OPEN_SESSIONS_CLEARED = 100  # the person's most recently active sessions whose blocks an erase updates


class Memories(Protocol):
    def page(
        self, actor: str, namespace_path: str, *, limit: int, next_token: str | None = None
    ) -> tuple[list[Recollection], str | None]: ...
    def all_records(self, actor: str, namespace_path: str) -> Iterable[Recollection]: ...
    def record(self, actor: str, record_id: str) -> Recollection | None: ...
    def delete(self, record_id: str) -> bool: ...
    def delete_many(self, record_ids: list[str]) -> int: ...
    def sessions(self, actor: str) -> list[str]: ...
    def erase_session(self, actor: str, session_id: str) -> int: ...


class OpenSessions(Protocol):
    def open_session_ids(self, owner: str, limit: int) -> list[str]: ...


class Committer(Protocol):
    def apply(self, session_id: str, decide: Any, **options: Any) -> Any: ...


def memory_of(record: Recollection) -> Memory:
    return Memory(
        id=record.id,
        text=record.text,
        kind=record.kind,
        scope=record.scope,
        project=record.project,
        created_at=timestamp(record.created_at),
    )


class MemoryService:
    def __init__(self, memory: Memories | None, sessions: OpenSessions, committer: Committer, logger: Any) -> None:
        self._memory = memory
        self._sessions = sessions
        self._committer = committer
        self._log = logger

    def list(self, owner: str, cursors: CursorSeal, limit: int, cursor: str | None) -> MemoryList:
        if not 1 <= limit <= LIMIT_MAX:
            raise BadRequest(f"limit must be 1 to {LIMIT_MAX}")
        try:
            token = cursors.memories_start(owner, cursor) if cursor is not None else None
        except BadCursor as error:
            raise BadRequest(str(error)) from None
        if self._memory is None:
            return MemoryList(memories=[], next_cursor=None)
        records, following = self._memory.page(owner, rules.person_prefix(owner), limit=limit, next_token=token)
        return MemoryList(
            memories=[memory_of(record) for record in records],
            next_cursor=cursors.memories_cursor(owner, following) if following else None,
        )

    def forget(self, owner: str, record_id: str) -> None:
        """Delete one of the person's records; NotFound for any id that is not one."""
        if self._memory is None or not record_id.startswith("mem-") or len(record_id) > 50:
            raise NoSuchMemory(record_id)
        record = self._memory.record(owner, record_id)
        if record is None or not self._memory.delete(record_id):
            raise NoSuchMemory(record_id)
        self._clear_blocks(owner, (record,))

    def forget_all(self, owner: str) -> int:
        """Delete every record of the person, and every event the memory holds of their sessions."""
        if self._memory is None:
            return 0
        record_ids = [record.id for record in self._memory.all_records(owner, rules.person_prefix(owner))]
        deleted = self._memory.delete_many(record_ids) if record_ids else 0
        for session_id in self._memory.sessions(owner):
            self._memory.erase_session(owner, session_id)
        self._clear_blocks(owner, None)
        return deleted

    def erase_session(self, owner: str, session_id: str) -> None:
        """An erased session's events go with it (its extracted records stay until forgotten)."""
        if self._memory is not None:
            self._memory.erase_session(owner, rules.memory_session_id(session_id))

    def _clear_blocks(self, owner: str, records: tuple[Recollection, ...] | None) -> None:
        """Take erased records out of the blocks the person's open sessions carry (all: ``None``)."""
        for session_id in self._sessions.open_session_ids(owner, OPEN_SESSIONS_CLEARED):

            def cleared(state: SessionState) -> Outcome:
                lines = [] if records is None else rules.without(state.remembered, records)
                if lines == state.remembered:
                    return Outcome(state)
                return Outcome(state.model_copy(update={"remembered": lines}))

            try:
                self._committer.apply(session_id, cleared)
            except (
                Exception
            ):  # the record is gone; a session that could not be updated reads it no more at its next start
                self._log.exception("remembered block not cleared", extra={"session_id": session_id})
