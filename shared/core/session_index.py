"""What a person's session list shows of a session, kept by the commits the conductor already makes.

The store writes these fields beside the session's state (a global secondary index keyed by the
person, newest activity first), so listing sessions is one Query and no turn pays a DynamoDB call
for it. Pure: the times are the caller's.
"""

from __future__ import annotations

import re

from shared.core.decision import Outcome
from shared.core.state import SessionState
from shared.wire.session_api_models import TITLE_MAX_CHARS, Status

UTTERANCE_MAX_CHARS = 120
LOCAL_PRINCIPAL = "local"  # the one person of a stage without sign-in

STATUSES: tuple[Status, ...] = ("active", "idle", "ended")

_SPACE = re.compile(r"\s+")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"


def _shorten(text: str, limit: int) -> str:
    """One printable line of at most ``limit`` characters, cut at a word with an ellipsis when long."""
    line = _SPACE.sub(" ", "".join(char if char.isprintable() else " " for char in text)).strip()
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def clean_title(text: str) -> str | None:
    """A title as a person would read it in a list: one line, no wrapping quotes or trailing
    full stop, at most ``TITLE_MAX_CHARS``; None when nothing is left."""
    line = _shorten(text, len(text) + 1).strip(_QUOTES).strip()
    line = re.sub(r"^(title|session title)\s*:\s*", "", line, flags=re.IGNORECASE).strip(_QUOTES).strip()
    line = line.rstrip(".").strip()
    return _shorten(line, TITLE_MAX_CHARS) or None


def note_utterance(state: SessionState, text: str, now: float) -> None:
    """A final transcript that starts a turn: the session's last words, activity and turn count."""
    state.last_utterance = _shorten(text, UTTERANCE_MAX_CHARS) or None
    state.last_active_at = max(state.last_active_at, now)
    state.turn_count += 1


def is_listed(state: SessionState) -> bool:
    """Whether the sessions list shows the session: not while it is empty (no request of the person
    ever started a turn, and no handoff brought a conversation), as after a first request refused
    (too long, rate limited) or a connection that only opened."""
    return state.turn_count > 0 or state.history_len > 0 or bool(state.summary)


def status_of(state: SessionState) -> Status:
    if state.ended_at is not None:
        return "ended"
    return "active" if state.connection_id is not None else "idle"


def owner_of(state: SessionState) -> str:
    """The index's partition: the signed-in person, or the local one."""
    return state.principal or LOCAL_PRINCIPAL


def needs_title(state: SessionState) -> bool:
    """A title is made once, after the model's first answer (a rename replaces it)."""
    return state.title is None and state.turn_count >= 1 and state.history_len >= 2 and state.last_role == "assistant"


def keep_title(state: SessionState, title: str) -> Outcome:
    """A made title, unless the session got one meanwhile (a rename wins)."""
    if state.title is None:
        state = state.model_copy(update={"title": clean_title(title)})
    return Outcome(state)


class EmptyTitle(ValueError):
    """A rename to a title with nothing left once cleaned."""


def rename(state: SessionState, title: str) -> Outcome:
    """The person's own title for the session; it replaces a made one and is never made again."""
    cleaned = clean_title(title)
    if cleaned is None:
        raise EmptyTitle("the title is empty")
    return Outcome(state.model_copy(update={"title": cleaned}))


def end_session(state: SessionState, now: float) -> Outcome:
    """The person ended the session: it is listed as ended from ``now`` (an ended one keeps the
    time it ended) and its connection no longer hears its events (the caller closes it). A later
    ``$connect`` with its id resumes it (``shared.core.connection.bind``)."""
    return Outcome(
        state.model_copy(
            update={
                "ended_at": state.ended_at if state.ended_at is not None else now,
                "listening": None,
                "connection_id": None,
                "catch_up_owner": None,
                "catch_up_since": None,
            }
        )
    )
