"""What long-term memory (Amazon Bedrock AgentCore Memory) adds to a stage's load and bill, from the
turn rate the capacity model measured and the assumptions below (``MemoryAssumptions``).

What the conductor does with the memory, per the memory's contract:

* one ``CreateEvent`` per committed turn, holding the person's words and the spoken answer; the
  memory's three built-in strategies (preferences, facts, summaries) extract records from it;
* one ``RetrieveMemoryRecords`` at each session's start (the remembered block), one per
  ``memory.search`` the model makes, and one per ``memory.write`` (its near-duplicate check), which
  then writes its record with ``BatchCreateMemoryRecords``;
* records held per person: one summary per session and the person's standing preferences and
  project facts.

How often the model searches and writes, how long a session is and how many hours a month a person
talks are not measured: they are stated here and printed with the figures. Prices are
``benchmarks.costs.PRICES`` (dated there), quotas ``benchmarks.aws_quotas``. Pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.costs import BYTES_PER_GB, HOURS_PER_MONTH, PRICES, event_billed_bytes
from benchmarks.spoken_brain import ANSWER_WORDS
from benchmarks.token_calibration import OUTPUT_TEXT_RATIO

PERSON_WORDS = 10
"""Words of a spoken request (the talker's run 3 to 10)."""
CHARS_PER_WORD = 6
"""Five letters and a space."""
EVENT_TOKENS = (PERSON_WORDS + ANSWER_WORDS) * CHARS_PER_WORD / 4 * OUTPUT_TEXT_RATIO
"""Tokens of one turn's event as Claude 5.x counts spoken prose: the request and an answer of
``spoken_brain.ANSWER_WORDS`` words."""


@dataclass(frozen=True)
class MemoryAssumptions:
    """What the model and the people do with the memory: stated, not measured."""

    turns_per_search: float = 20.0
    """One ``memory.search`` the model makes per this many turns."""
    turns_per_write: float = 100.0
    """One ``memory.write`` per this many turns (a retrieval for its near-duplicate check, then a
    ``BatchCreateMemoryRecords``)."""
    session_minutes: float = 30.0
    """Minutes of active talk in one session (each session starts with one retrieval and leaves one
    summary)."""
    active_hours_per_month: float = 20.0
    """Hours of active talk per person a month (an hour on each of 20 working days)."""
    standing_records: int = 10
    """Preferences and project facts a person keeps (besides the sessions' summaries)."""
    summaries_per_session: int = 1
    strategies: int = 3
    """Built-in strategies that read every event (preferences, facts, summaries)."""
    event_tokens: float = EVENT_TOKENS
    event_bytes: int = 1_000
    """One event as stored: its two messages, their roles and the event's ids."""
    event_retention_days: float = 30.0
    """The memory's ``eventExpiryDuration`` (7 to 365 days)."""
    block_chars: int = 1_200
    """The conductor's cap on the remembered block each model request carries."""

    @property
    def sessions_per_month(self) -> float:
        return self.active_hours_per_month * 60 / self.session_minutes

    @property
    def records_per_person(self) -> float:
        """Records held per person in a month: the month's sessions' summaries and the standing ones.
        (Summaries kept longer add a month's worth each month: the strategies set no expiry.)"""
        return self.sessions_per_month * self.summaries_per_session + self.standing_records

    @property
    def block_tokens(self) -> float:
        """The remembered block at its cap, as Claude 5.x counts prose."""
        return self.block_chars / 4 * OUTPUT_TEXT_RATIO


ASSUMED = MemoryAssumptions()


@dataclass(frozen=True)
class MemoryUsage:
    """What the memory is asked to do over a stretch of talk (a session, an hour, a minute)."""

    turns: float
    sessions: float
    events: float
    """``CreateEvent`` calls: one per committed turn."""
    retrievals: float
    """``RetrieveMemoryRecords`` calls: session starts, searches and writes' near-duplicate checks."""
    record_writes: float
    """``BatchCreateMemoryRecords`` calls (``memory.write``)."""
    extraction_tokens: float
    """What the built-in strategies read of the events (a floor: their own prompts are not counted)."""
    record_months: float
    """Record-months of storage the stretch bears (its share of the person's records)."""


def usage(turns: float, sessions: float, a: MemoryAssumptions = ASSUMED) -> MemoryUsage:
    """``turns`` committed turns over ``sessions`` sessions; storage: each session bears an equal share
    of its person's monthly records."""
    return MemoryUsage(
        turns=turns,
        sessions=sessions,
        events=turns,
        retrievals=sessions + turns / a.turns_per_search + turns / a.turns_per_write,
        record_writes=turns / a.turns_per_write,
        extraction_tokens=turns * a.event_tokens * a.strategies,
        record_months=sessions * a.records_per_person / a.sessions_per_month,
    )


def session_usage(turns: int, a: MemoryAssumptions = ASSUMED) -> MemoryUsage:
    """One session of ``turns`` committed turns."""
    return usage(turns, 1.0, a)


def hour_usage(turns_per_minute: float, a: MemoryAssumptions = ASSUMED) -> MemoryUsage:
    """An hour of active talk at the measured turn rate."""
    return usage(60 * turns_per_minute, 60 / a.session_minutes, a)


def minute_usage(turns_per_minute: float, a: MemoryAssumptions = ASSUMED) -> MemoryUsage:
    """A minute of active talk: what one speaker asks of the memory's quotas."""
    return usage(turns_per_minute, 1 / a.session_minutes, a)


def session_turns(turns_per_minute: float, a: MemoryAssumptions = ASSUMED) -> int:
    """Turns in a session of ``a.session_minutes`` at the measured turn rate."""
    return round(turns_per_minute * a.session_minutes)


def cost(used: MemoryUsage, a: MemoryAssumptions = ASSUMED) -> dict[str, float]:
    """USD by part at ``PRICES``: events (ingested, then stored until they expire), retrievals and the
    records' storage."""
    ingested = used.events * event_billed_bytes(a.event_bytes) / BYTES_PER_GB
    stored = used.events * a.event_bytes / BYTES_PER_GB * a.event_retention_days * 24 / HOURS_PER_MONTH
    return {
        "events": ingested * PRICES["agentcore_event_ingest_gb"] + stored * PRICES["agentcore_event_storage_gb_month"],
        "retrievals": used.retrievals * PRICES["agentcore_retrieval"],
        "records": used.record_months * PRICES["agentcore_record_month"],
    }


def events_at_the_old_price(used: MemoryUsage) -> float:
    """The same events at the per-event price short-term memory had until 2026-10-05."""
    return used.events * PRICES["agentcore_event_until_2026_10_05"]
