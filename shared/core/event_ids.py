"""Which of the app's events a session has already taken: the idempotency of ``$default``.

An event the app sends again (the same ``id``: after a reconnect, or a retry of an unanswered
send) must not be applied twice. The ids of the latest events taken are kept in the session's
state itself, as short digests, so recording one costs no write of its own: it rides on the
conditional write of the decision it caused. The events resent in practice are the last few an
app sent before its connection dropped; ``REMEMBERED`` covers far more than that. The app's
acknowledgements of the conductor's own calls (a sentence spoken) and progress reports are
idempotent by themselves and are not recorded.
"""

from __future__ import annotations

import base64
import hashlib

from shared.core.state import SessionState

REMEMBERED = 24  # the latest events taken that a resend is recognised against
DIGEST_BYTES = 9  # 72 bits: 12 characters of base64url


def digest(event_id: str) -> str:
    raw = hashlib.sha256(event_id.encode("utf-8", errors="surrogatepass")).digest()[:DIGEST_BYTES]
    return base64.urlsafe_b64encode(raw).decode("ascii")


def taken(state: SessionState, event_id: str) -> bool:
    """Whether the session has already taken the event with this id."""
    return digest(event_id) in state.seen_events


def record(state: SessionState, event_id: str) -> None:
    """Remember the event as taken (the oldest remembered one is forgotten past ``REMEMBERED``)."""
    mark = digest(event_id)
    if mark not in state.seen_events:
        state.seen_events = [*state.seen_events[-(REMEMBERED - 1) :], mark]
