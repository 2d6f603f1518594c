"""Decide and commit: every state change of a session goes through ``Committer.apply``.

A decision is made on the stored state and committed with a conditional write on its version;
on a lost race it is made again on fresh state. The decision's events are numbered and kept in
the outbox in the same transaction (all but partials), so they can be replayed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from shared.adapters.person_spend import PersonSpend
from shared.adapters.store import DuplicateEvent, SessionStore, VersionConflict, kept_of
from shared.core import devices, event_ids
from shared.core.decision import Outcome
from shared.core.state import SessionState
from shared.core.usage import priced
from shared.flows.config import Settings
from shared.wire.protocol import AssistantSpeechPartial, ErrorPayload, TurnUsage, make_event

COMMIT_ATTEMPTS = 12
# How long a decision made on a state handed on before its write (a turn launched alongside the
# write that starts it) waits for that write, and its first pause between reads.
LANDING_WAIT_S = 3.0
LANDING_PAUSE_S = 0.005
ERROR_EVENTS_METRIC = "ErrorEvents"


class Metrics(Protocol):
    def count(self, name: str, value: int = 1) -> None: ...

    def timing(self, name: str, milliseconds: float) -> None: ...


class NullMetrics:
    def count(self, name: str, value: int = 1) -> None:
        return None

    def timing(self, name: str, milliseconds: float) -> None:
        return None


def error_metric_name(code: str) -> str:
    """The count of ``error`` events with ``code`` the conductor sent (``ErrorEvents.bedrock_error``)."""
    return f"{ERROR_EVENTS_METRIC}.{code}"


class ConductorBusy(Exception):
    """A session's state kept changing under us; the request is answered with conductor_error."""


@dataclass
class Committed:
    """A stored decision and its events, numbered and serialized, ready to post."""

    outcome: Outcome
    frames: list[tuple[int, str]]
    # Unnumbered events posted after the frames and never kept (a turn's usage, priced).
    after: list[str] = field(default_factory=list)
    # The one device each frame is for (None: every device present), in the frames' order.
    targets: list[str | None] = field(default_factory=list)
    # Kept events posted before the frames: those of a decision whose stream this one ended before
    # its runner claimed it (the runner would have posted them; ``shared.flows.early_launch``).
    before: list[str] = field(default_factory=list)

    @property
    def state(self) -> SessionState:
        return self.outcome.state

    @property
    def run_model(self) -> str | None:
        return self.outcome.run_model


def backoff(attempt: int) -> None:
    """A short random pause before deciding again after a lost race."""
    time.sleep(random.uniform(0, 0.01 * (attempt + 1)))


class Committer:
    def __init__(self, store: SessionStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        # A person's spend a day, kept only when the stage has a daily ceiling.
        self.spend: PersonSpend | None = store.person_spend() if settings.daily_budget_usd > 0 else None

    def apply(
        self,
        session_id: str,
        decide: Callable[[SessionState], Outcome],
        *,
        hint: SessionState | None = None,
        create: bool = False,
        claim_event_id: str | None = None,
        before_write: Callable[[Outcome, SessionState, list[tuple[int, str]]], None] | None = None,
    ) -> Committed | None:
        """Decide and commit with optimistic locking; None when the session does not exist.

        The decision's events are kept in the outbox in the same transaction, except partials:
        each partial carries the whole text so far, so the next one (or the final) supersedes it.
        ``before_write`` gets the first decision, its state as it will be written and its kept
        events, just before the write goes out (to start what needs them alongside the write).

        A ``hint`` newer than the stored state was handed on by an invocation whose write is still
        on its way: a lost race against it waits for it to land (``LANDING_WAIT_S``) before
        deciding again.
        """
        state = hint if hint is not None else self.store.load(session_id)
        for attempt in range(COMMIT_ATTEMPTS):
            if state is None:
                if not create:
                    return None
                state = SessionState(session_id=session_id)
            if claim_event_id is not None and event_ids.taken(state, claim_event_id):
                raise DuplicateEvent(claim_event_id)
            outcome = decide(state)
            frames = [(seq, make_event(payload, seq=seq).to_json()) for seq, payload in outcome.numbered_events()]
            unchanged = not frames and not outcome.history and outcome.state == state
            if unchanged and claim_event_id is None and not outcome.part_writes and not outcome.parts_dropped:
                return Committed(outcome, frames)
            kept = [
                frame
                for frame, payload in zip(frames, outcome.events, strict=True)
                if not isinstance(payload, AssistantSpeechPartial)
            ]
            targets = [devices.target_of(outcome.state, payload) for payload in outcome.events]
            to_device = {seq: to for (seq, _frame), to in zip(frames, targets, strict=True) if to}
            prepared = self.store.prepared(
                outcome.state,
                bool(outcome.history),
                claim_event_id,
                kept=kept_of(kept, to_device),
                transaction=bool(outcome.part_writes or outcome.parts_dropped),
            )
            if before_write is not None and attempt == 0:
                before_write(outcome, prepared, kept)
            try:
                outcome.state = self.store.commit(
                    outcome.state,
                    outcome.history,
                    claim_event_id=claim_event_id,
                    outbox=kept,
                    outbox_ttl_seconds=self.settings.outbox_ttl_seconds,
                    part_writes=outcome.part_writes,
                    parts_dropped=outcome.parts_dropped,
                    prepared=prepared,
                    outbox_targets=to_device,
                )
                self._count_errors(outcome)
                return Committed(
                    outcome, frames, self._after(outcome), targets=targets, before=self._unposted(state, outcome)
                )
            except VersionConflict:
                self.metrics.count("StateConflicts")
                backoff(attempt)
                state = self._landed(session_id, hint if attempt == 0 else None)
        raise ConductorBusy(session_id)

    def _landed(self, session_id: str, hint: SessionState | None) -> SessionState | None:
        """The stored state after a lost race; when the hint is newer (its write is still on its
        way), once it has landed or ``LANDING_WAIT_S`` has passed."""
        state = self.store.load(session_id)
        if hint is None:
            return state
        waited, pause = 0.0, LANDING_PAUSE_S
        while (
            state is not None
            and state.incarnation == hint.incarnation
            and state.version < hint.version  # the same version written by another is no wait
            and waited < LANDING_WAIT_S
        ):
            time.sleep(pause)
            waited += pause
            pause = min(pause * 2, 0.1)
            state = self.store.load(session_id)
        return state

    def _unposted(self, base: SessionState, outcome: Outcome) -> list[str]:
        """The kept events of the decision that launched ``base``'s stream, when no runner claimed
        it (so none posted them) and this decision ended it."""
        stream = base.turn.stream if base.turn is not None else None
        if stream is None or stream.unposted is None:
            return []
        after = outcome.state.turn.stream if outcome.state.turn is not None else None
        if after is not None and after.stream_id == stream.stream_id:
            return []
        first, last = stream.unposted
        return [frame for _seq, frame in self.store.outbox(base.session_id, after_seq=first - 1, before_seq=last + 1)]

    def _after(self, outcome: Outcome) -> list[str]:
        """The unnumbered events, a turn's usage priced (the person's day's spend already counts
        each of its requests: ``shared.flows.spend_guard``)."""
        prices = self.settings.prices
        frames = []
        for payload in outcome.unnumbered:
            if isinstance(payload, TurnUsage):
                payload = priced(payload, prices)
            frames.append(make_event(payload).to_json())
        return frames

    def _count_errors(self, outcome: Outcome) -> None:
        """Count the stored decision's ``error`` events by code (a lost race counts nothing)."""
        for payload in outcome.events:
            if isinstance(payload, ErrorPayload):
                self.metrics.count(error_metric_name(payload.code))
