"""The conversation's memory around the model: what one request holds, and the rolling summary.

A request fits a token budget (``shared.core.memory.stepped_window``): the newest turns verbatim,
older big tool results elided, the turns before them folded into a rolling summary carried in
the system prompt. The window's start moves in steps, about half of it at once, and the summary
is rewritten only then: between steps the requests' prefix stays the same and is read from the
prompt cache. The budget is counted in characters per token as Bedrock measured this
conversation's earlier requests: the ratio a request measured is kept by the commit that ends
its message (``calibration``), so it costs no write of its own. Folding costs a model call, so it
happens after the turn, off the hot path: never before the first partial. The turn's last commit
announces the write that follows (``SessionState.memory_writes``), so a transcript said meanwhile is
not launched alongside its own write, which would lose its race to this one and waste its model
request (``shared.flows.early_launch``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from shared.adapters.store import SessionStore
from shared.core import conductor
from shared.core.decision import Outcome
from shared.core.memory import Budget, calibrated, message_chars, stepped_window, summary_request, with_summary
from shared.core.messages import Message
from shared.core.session_index import clean_title, keep_title, needs_title
from shared.core.state import MemoryWrite, SessionState
from shared.core.stream import RunnerClaim
from shared.core.title import TITLE_MAX_TOKENS, title_request
from shared.core.wrapper import wrapper_tool_spec
from shared.flows.commit import Committer, Metrics
from shared.flows.config import Settings

# Recalibrate only when the measured ratio moved this much (a steady ratio keeps the state as it is).
CALIBRATION_STEP = 0.1
# How long an announced memory write holds transcripts' early launches back at most: it is one short
# model request and one write (seconds); a runner gone before making it never holds them longer.
MEMORY_WRITE_WAIT_S = 60.0
# Memory writes that landed with no live announcement (none was made, as after a turn that failed,
# or it had expired): only these can make a transcript launched alongside its write lose its race.
UNANNOUNCED_WRITES_METRIC = "MemoryWritesUnannounced"


class Summarizer(Protocol):
    def summarize(
        self, system: str, messages: list[Message], *, model_id: str | None = None, max_tokens: int = 400
    ) -> str: ...


@dataclass
class Fitted:
    messages: list[Message]  # what the request carries
    fold_until: int  # history seq where it starts: everything before belongs in the summary
    chars: int  # the request's size as the budget counts it


class MemoryKeeper:
    def __init__(
        self,
        *,
        store: SessionStore,
        summarizer: Summarizer,
        committer: Committer,
        settings: Settings,
        logger: Any,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.committer = committer
        self.settings = settings
        self.log = logger
        self.metrics = metrics
        self._tool_chars = len(json.dumps(wrapper_tool_spec(settings.catalog), separators=(",", ":")))

    def fit(self, state: SessionState, stored: list[Message]) -> Fitted:
        """The part of the stored window (its newest messages) that fits the token budget: from
        where the summary ends (the previous window's start) while that fits and was read, else
        from a step forward (``shared.core.memory.stepped_window``), so the request's prefix,
        summary included, changes only at a step."""
        tool_chars = self._tool_chars
        if state.tools is not None:
            tool_chars = len(json.dumps(wrapper_tool_spec(state.tools), separators=(",", ":")))
        fixed = len(with_summary(self.settings.system_prompt, state.summary)) + tool_chars
        budget = Budget(
            input_tokens=self.settings.input_budget_tokens,
            chars_per_token=state.chars_per_token,
            elide_over_chars=self.settings.elide_tool_results_over_chars,
        )
        first_seq = max(0, state.history_len - len(stored))
        keep_from = state.summary_until - first_seq
        window = stepped_window(
            stored,
            fixed_chars=fixed,
            budget=budget,
            keep_from=min(keep_from, len(stored)) if keep_from >= 0 else None,
            max_messages=self.window_size(state),
        )
        if not window.messages:  # no plain user message in it: send what was stored
            return Fitted(stored, state.summary_until, fixed + sum(map(message_chars, stored)))
        chars = fixed + sum(map(message_chars, window.messages))
        return Fitted(window.messages, first_seq + window.start, chars)

    def window_size(self, state: SessionState) -> int:
        """The most messages the stored window read for a request holds."""
        return min(self.settings.history_window, state.window_cap or self.settings.history_window)

    def calibration(self, state: SessionState, fitted: Fitted | None, usage: dict[str, int]) -> float | None:
        """The characters per token the request of ``fitted`` measured (Bedrock's input tokens,
        cached ones included), or None when it did not move enough to keep."""
        if fitted is None:
            return None
        tokens = sum(usage.get(key, 0) for key in ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"))
        ratio = calibrated(fitted.chars, tokens, state.chars_per_token)
        if abs(ratio - state.chars_per_token) < CALIBRATION_STEP * state.chars_per_token:
            return None
        return ratio

    def due(self, state: SessionState, fitted: Fitted | None) -> bool:
        """Whether ``after_turn`` has something to make after a run whose last commit wrote ``state``."""
        return (fitted is not None and fitted.fold_until > state.summary_until) or needs_title(state)

    def announce(self, state: SessionState, fitted: Fitted | None, claim: RunnerClaim, now: float) -> SessionState:
        """``state`` as a run's last commit writes it: announcing the memory write the run makes
        next, when it makes one (announcements past their time are dropped)."""
        if not self.due(state, fitted):
            return state
        kept = [write for write in state.memory_writes if write.until > now and write.runner != claim.runner]
        until = min(now + MEMORY_WRITE_WAIT_S, claim.deadline)
        return state.model_copy(update={"memory_writes": [*kept, MemoryWrite(runner=claim.runner, until=until)]})

    def after_turn(
        self, session_id: str, state: SessionState | None, fitted: Fitted | None, runner: str | None = None
    ) -> None:
        """Fold what left the window into the summary and name a new session, from the state the
        run last committed, in one write: the one that commit announced for ``runner`` (made even
        when nothing was, to withdraw the announcement). Whatever fails here, the conversation goes
        on (the next turn tries again)."""
        if state is None:
            return
        summary = self._summary(session_id, state, fitted)
        title = self._title(session_id, state)
        announced = next((write for write in state.memory_writes if write.runner == runner), None)
        if summary is None and title is None and announced is None:
            return
        text, until = summary if summary is not None else (None, 0)

        def remembered(fresh: SessionState) -> Outcome:
            outcome = conductor.remember_memory(fresh, summary=text, until=until, runner=runner)
            return keep_title(outcome.state, title) if title is not None else outcome

        try:
            self.committer.apply(session_id, remembered, hint=state)
        except Exception:
            self.log.exception("memory not written", extra={"session_id": session_id})
            if summary is not None:
                self.metrics.count("SummaryFailures")
            if title is not None:
                self.metrics.count("TitleFailures")
            return
        if announced is None or time.time() >= announced.until:
            self.metrics.count(UNANNOUNCED_WRITES_METRIC)

    def _title(self, session_id: str, state: SessionState) -> str | None:
        """The session's title, from its first turns, by the summary model (None: none is needed
        or none was made)."""
        if not needs_title(state):
            return None
        try:
            system, messages = title_request(self.store.messages_between(session_id, 0, min(state.history_len, 8)))
            made = self.summarizer.summarize(
                system, messages, model_id=self.settings.summary_model_id, max_tokens=TITLE_MAX_TOKENS
            )
        except Exception:
            self.log.exception("session not named", extra={"session_id": session_id})
            self.metrics.count("TitleFailures")
            return None
        if clean_title(made) is None:
            return None
        self.metrics.count("TitlesMade")
        return made

    def _summary(self, session_id: str, state: SessionState, fitted: Fitted | None) -> tuple[str, int] | None:
        """The summary of everything before the window ``fitted`` (None: nothing left the window,
        or the summary model failed), and the history seq it covers up to."""
        if fitted is None or fitted.fold_until <= state.summary_until:
            return None
        until = fitted.fold_until
        try:
            dropped = self.store.messages_between(session_id, state.summary_until, until)
            system, messages = summary_request(state.summary, dropped)
            summary = self.summarizer.summarize(system, messages, model_id=self.settings.summary_model_id)
        except Exception:
            self.log.exception("memory not updated", extra={"session_id": session_id})
            self.metrics.count("SummaryFailures")
            return None
        self.metrics.count("SummariesWritten")
        self.log.info("conversation summarized", extra={"session_id": session_id, "until": until})
        return summary, until
