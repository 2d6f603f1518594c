"""The sessions API's work (docs/sessions-api.md): a person's sessions, one session's transcript,
renaming, ending and erasing, on the table the WebSocket side writes.

A session is the caller's when its owner (``shared.core.session_index.owner_of``) is the caller;
any other session is answered exactly as one that does not exist. State changes go through the
committer, as every other change of a session does, so they never overwrite a turn's commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from shared.adapters.history_reads import session_pk
from shared.adapters.session_records import SessionRecords, SessionRow
from shared.adapters.store import SessionStore
from shared.core import devices
from shared.core.conductor import handle_barge_in
from shared.core.decision import Outcome
from shared.core.session_index import STATUSES, EmptyTitle, end_session, owner_of, rename
from shared.core.state import SessionState
from shared.core.transcript import Entry, StoredMessage, entry_of, has_tool_use, transcript_entries
from shared.core.usage import counts_of
from shared.flows.commit import Committer
from shared.wire.protocol import ErrorCode, error_event
from shared.wire.session_api_models import (
    LIST_LIMIT_MAX,
    TRANSCRIPT_LIMIT_MAX,
    DeviceInfo,
    Session,
    SessionDetail,
    SessionList,
    UsageTotals,
)
from shared.wire.session_cursors import BadCursor, CursorSeal
from shared.wire.wire_formats import is_uuid_v4

Entries = list[Entry]  # named outside the class: its method ``list`` hides the builtin there

ENDED_MESSAGE = "the session was ended from the sessions API; connect again with its id to resume it"
ERASED_MESSAGE = "the session was erased from the sessions API"


class NotFound(LookupError):
    """No such session for this person (also: another person's)."""


class BadRequest(ValueError):
    """A request this API does not take; the message says why."""


class Gateway(Protocol):
    def post(self, endpoint: str, connection_id: str, frame: str) -> bool: ...

    def close(self, endpoint: str, connection_id: str) -> bool: ...


def session_id_of(value: str) -> str:
    """The session id as stored (lower case); BadRequest unless it is a UUID v4."""
    if not is_uuid_v4(value):
        raise BadRequest("the session id must be a UUID v4")
    return value.lower()


def _check_limit(limit: int, most: int) -> None:
    if not 1 <= limit <= most:
        raise BadRequest(f"limit must be between 1 and {most}")


class SessionService:
    def __init__(
        self,
        store: SessionStore,
        records: SessionRecords,
        committer: Committer,
        gateway: Gateway,
        websocket_endpoint: str,
        ended_retention_seconds: int,
        clock: Callable[[], float] = time.time,
        *,
        items_follow_state: bool = False,
    ) -> None:
        self._store = store
        self._records = records
        self._committer = committer
        self._gateway = gateway
        self._endpoint = websocket_endpoint
        self._retention = ended_retention_seconds
        # With the session reaper deployed, a session's items are deleted with its expired state: ending
        # re-dates the state alone (its commit does), and a resumed session keeps all it said.
        self._items_follow_state = items_follow_state
        self._clock = clock

    # ---- reading ---------------------------------------------------------------------------

    def list(
        self, owner: str, cursors: CursorSeal, status: str | None = None, limit: int = 20, cursor: str | None = None
    ) -> SessionList:
        """The person's sessions, newest activity first; ``cursor`` is one ``cursors`` made for
        ``owner``'s list (BadRequest for any other)."""
        _check_limit(limit, LIST_LIMIT_MAX)
        if status is not None and status not in STATUSES:
            raise BadRequest("status must be active, idle or ended")
        try:
            start_key = cursors.list_start(owner, cursor) if cursor is not None else None
        except BadCursor as error:
            raise BadRequest(str(error)) from None
        page = self._records.page(owner, limit=limit, start_key=start_key, status=status)
        following = cursors.list_cursor(owner, page.last_key) if page.last_key is not None else None
        return SessionList(sessions=[Session.of_row(row) for row in page.rows], next_cursor=following)

    def _usage(self, state: SessionState) -> UsageTotals:
        total = state.usage_total
        prices = self._committer.settings.prices
        return UsageTotals(
            **counts_of(total),
            cost_usd=round(prices.cost(total), 8) if prices is not None else None,
            prices_as_of=(prices.as_of or None) if prices is not None else None,
        )

    def show(
        self, owner: str, session_id: str, cursors: CursorSeal, limit: int = 50, cursor: str | None = None
    ) -> SessionDetail:
        """The session and ``limit`` entries of its transcript after ``cursor`` (one ``cursors``
        made for ``owner`` and this session), oldest first."""
        session_id = session_id_of(session_id)
        _check_limit(limit, TRANSCRIPT_LIMIT_MAX)
        try:
            start = cursors.transcript_start(owner, session_id, cursor) if cursor is not None else (0, 0)
        except BadCursor as error:
            raise BadRequest(str(error)) from None
        state = self._owned(owner, session_id)
        entries = self._entries(session_id, start, limit)
        following = entries[limit] if len(entries) > limit else None
        return SessionDetail(
            session=_session(state),
            devices=[
                DeviceInfo(name=seen.name, roles=list(seen.roles), connected_since=seen.connected_at)  # type: ignore[arg-type]
                for seen in devices.seen(state)
            ],
            usage=self._usage(state),
            transcript=[entry_of(entry) for entry in entries[:limit]],
            next_cursor=(
                cursors.transcript_cursor(owner, session_id, following.seq, following.part)
                if following is not None
                else None
            ),
        )

    def _entries(self, session_id: str, start: tuple[int, int], limit: int) -> Entries:
        """At least ``limit + 1`` entries from ``start`` on (fewer at the end): the last one says
        where the next page starts. A message with tool calls is read with the one after it, which
        holds their results."""
        start_seq, start_part = start
        messages: list[StoredMessage] = []
        next_seq = start_seq
        while True:
            batch = self._store.transcript_items(session_id, next_seq, limit + 1)
            messages.extend(batch)
            at_end = len(batch) < limit + 1
            if batch:
                next_seq = batch[-1].seq + 1
            if not at_end and has_tool_use(messages[-1]):
                continue
            entries = [
                entry for entry in transcript_entries(messages) if (entry.seq, entry.part) >= (start_seq, start_part)
            ]
            if at_end or len(entries) > limit:
                return entries

    # ---- changing --------------------------------------------------------------------------

    def rename(self, owner: str, session_id: str, title: str) -> Session:
        session_id = session_id_of(session_id)

        def decide(state: SessionState) -> Outcome:
            self._check_owner(state, owner)
            try:
                return rename(state, title)
            except EmptyTitle as error:
                raise BadRequest(str(error)) from error

        return _session(self._apply(session_id, decide))

    def end(self, owner: str, session_id: str) -> Session:
        """Ended: a turn in progress is stopped as a barge-in stops it (its events kept for a
        resuming app), the open connection gets ``session_ended`` and is closed, and every item
        of the session now expires ``ended_retention_seconds`` after it ended: the state by its commit,
        and the other items with it (by the session reaper where ``items_follow_state``, else each
        re-dated here)."""
        session_id = session_id_of(session_id)
        now = self._clock()
        connection: list[str | None] = [None]

        def decide(state: SessionState) -> Outcome:
            self._check_owner(state, owner)
            connection[0] = state.connection_id
            if state.turn is None:
                return end_session(state, now)
            stopped = handle_barge_in(state)
            ended = end_session(stopped.state, now)
            return Outcome(ended.state, stopped.events, stopped.history, None, stopped.notes, stopped.first_seq)

        state = self._apply(session_id, decide)
        if connection[0] is not None:
            self._say_and_close(connection[0], ErrorCode.SESSION_ENDED, ENDED_MESSAGE)
        assert state.ended_at is not None
        if not self._items_follow_state:
            self._records.set_expiry(session_pk(session_id), int(state.ended_at) + self._retention)
        return _session(state)

    def erase(self, owner: str, session_id: str) -> None:
        """Every item of the session deleted (its state first, which stops a turn in progress:
        its next conditional write fails); the open connection gets ``session_erased`` and is
        closed. NotFound when there is no such session of ``owner``'s: never made, already erased
        or another person's, alike. Leftovers of an erase that failed halfway (items without their
        state, which nobody can read) are deleted then, and the answer is still NotFound."""
        session_id = session_id_of(session_id)
        state = self._store.load(session_id)
        if state is None:
            if self._records.session_keys(session_pk(session_id)):
                self._records.erase(session_pk(session_id), [])
            raise NotFound(session_id)
        self._check_owner(state, owner)
        connections = [state.connection_id] if state.connection_id else []
        self._records.erase(session_pk(session_id), connections)
        for connection_id in connections:
            self._say_and_close(connection_id, ErrorCode.SESSION_ERASED, ERASED_MESSAGE)

    # ---- helpers ---------------------------------------------------------------------------

    def _owned(self, owner: str, session_id: str) -> SessionState:
        state = self._store.load(session_id)
        if state is None:
            raise NotFound(session_id)
        self._check_owner(state, owner)
        return state

    @staticmethod
    def _check_owner(state: SessionState, owner: str) -> None:
        if owner_of(state) != owner:
            raise NotFound(state.session_id)

    def _apply(self, session_id: str, decide: Callable[[SessionState], Outcome]) -> SessionState:
        committed = self._committer.apply(session_id, decide)
        if committed is None:
            raise NotFound(session_id)
        return committed.state

    def _say_and_close(self, connection_id: str, code: ErrorCode, message: str) -> None:
        self._gateway.post(self._endpoint, connection_id, error_event(code, message).to_json())
        self._gateway.close(self._endpoint, connection_id)


def _session(state: SessionState) -> Session:
    return Session.of_row(SessionRow.of_state(state))
