"""What an early launch whose write lost its race spent, counted.

Its runner asks the model before it finds its stream gone, and stops it. That request's tokens go
to the runner's metrics (``EarlyLaunchLost*Tokens``), its reservation of the person's ceiling is
settled at what it spent (Bedrock's counts when its ``metadata`` came first, else estimated from
what it read and wrote), and the tokens join the session's dropped requests', which the turn that
answers reports in its ``turnUsage`` (``speculationInputTokens`` / ``speculationOutputTokens``)
and prices in its cost.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter

import pytest

from conductor_local.bedrock.server import message
from lambdas import runtime
from shared.adapters.store import SessionStore
from shared.core.usage import Prices, day_of
from shared.wire.protocol import TurnUsage
from tests.handlers.conftest import TABLE, Connection, Harness
from tests.handlers.test_early_launch_memory import (
    ANSWER,
    CountedMetrics,
    early,
    lost_launch,
    ready,
    run_task,
    said,
    stored,
)
from tests.handlers.test_turn_runner import launches_held
from tests.handlers.test_turn_usage import dynamodb as dynamodb  # the table's client, a fixture

PRICES = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3, "as_of": "2026-01-01"}
ANSWERED = {"input_tokens": 1500, "output_tokens": 9}  # the answering request's metadata


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Prices and a daily ceiling on the stage; what ``$default`` and the turn runner count."""
    monkeypatch.setenv("CONDUCTOR_PRICES", json.dumps(PRICES))
    monkeypatch.setenv("CONDUCTOR_DAILY_BUDGET_USD", "10")
    runtime.reset()
    counted: Counter[str] = Counter()
    service, runner = runtime.service(), runtime.turn_runner()
    service.metrics = CountedMetrics(service.metrics, counted)
    runner.metrics = CountedMetrics(runner.metrics, counted)
    return counted


def usages(conductor: Harness, conn: Connection) -> list[TurnUsage]:
    return [e.payload for e in conductor.all_events(conn) if isinstance(e.payload, TurnUsage)]  # type: ignore[misc]


def spent_today(dynamodb: object, conn: Connection) -> float:
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend()
    return spend.spent(conn.session_id, day_of(time.time()))


def lost_tokens(counts: Counter[str]) -> tuple[int, int]:
    return counts["EarlyLaunchLostInputTokens"], counts["EarlyLaunchLostOutputTokens"]


def test_a_lost_launch_stopped_mid_answer_counts_its_estimated_tokens_everywhere(
    conductor: Harness, counts: Counter[str], monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    conn, (lost, answering) = lost_launch(conductor, monkeypatch)
    conductor.script.push(message(ANSWER, input_tokens=900, output_tokens=5))  # never reaches its metadata
    conductor.script.push(message(ANSWER, **ANSWERED))
    run_task(lost)
    assert early(counts) == {"EarlyLaunches": 1, "EarlyLaunchWritesLost": 1, "EarlyLaunchesLost": 1}
    spent_input, spent_output = lost_tokens(counts)
    # What it read, at the conversation's characters per token: the system prompt and tools too.
    assert spent_input >= len(runtime.turn_runner().settings.system_prompt) / stored(conn).chars_per_token
    assert 1 <= spent_output <= math.ceil(len(ANSWER) / 4)  # what it wrote before it was stopped
    assert counts["InputTokens"] == 0  # not among the answering requests' own tokens
    prices = Prices(**PRICES)
    lost_usd = (spent_input * prices.input + spent_output * prices.output) / 1_000_000
    assert spent_today(dynamodb, conn) == pytest.approx(lost_usd)  # its reservation settled at what it spent
    state = stored(conn)
    assert (state.speculation_input_pending, state.speculation_output_pending) == (spent_input, spent_output)

    run_task(answering)
    assert said(conductor, conn).count(("final", ANSWER)) == 1
    conductor.finish_turn(conn)
    (usage,) = usages(conductor, conn)
    assert (usage.input_tokens, usage.output_tokens) == (ANSWERED["input_tokens"], ANSWERED["output_tokens"])
    assert (usage.speculation_input_tokens, usage.speculation_output_tokens) == (spent_input, spent_output)
    answered_usd = (ANSWERED["input_tokens"] * prices.input + ANSWERED["output_tokens"] * prices.output) / 1_000_000
    assert usage.cost_usd == pytest.approx(answered_usd + lost_usd)
    assert spent_today(dynamodb, conn) == pytest.approx(usage.cost_usd)  # the day counts what the turns report
    after = stored(conn)
    assert (after.speculation_input_pending, after.speculation_output_pending) == (0, 0)
    assert after.usage_total.speculation_input_tokens == spent_input


def test_a_lost_launch_whose_answer_ended_first_counts_bedrocks_own_figures(
    conductor: Harness, counts: Counter[str], monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    conn, (lost, answering) = lost_launch(conductor, monkeypatch)
    # Nothing to show or say: the stream is not checked before its end, so its metadata came.
    conductor.script.push(message(input_tokens=900, output_tokens=5))
    conductor.script.push(message(ANSWER, **ANSWERED))
    run_task(lost)
    assert counts["EarlyLaunchesLost"] == 1
    assert lost_tokens(counts) == (900, 5)
    assert spent_today(dynamodb, conn) == pytest.approx((900 * 3.0 + 5 * 15.0) / 1_000_000)
    run_task(answering)
    conductor.finish_turn(conn)
    (usage,) = usages(conductor, conn)
    assert (usage.speculation_input_tokens, usage.speculation_output_tokens) == (900, 5)
    assert spent_today(dynamodb, conn) == pytest.approx(usage.cost_usd)


def test_a_launch_that_won_its_race_counts_nothing_dropped(
    conductor: Harness, counts: Counter[str], dynamodb: object
) -> None:
    conn = ready(conductor)
    with launches_held(conductor) as tasks:
        conductor.say(conn, "hello")
    assert len(tasks) == 1 and tasks[0].get("frames") is not None  # launched alongside its write
    conductor.script.push(message(ANSWER, **ANSWERED))
    run_task(tasks[0])
    conductor.finish_turn(conn)
    assert early(counts) == {"EarlyLaunches": 1}
    assert lost_tokens(counts) == (0, 0)
    (usage,) = usages(conductor, conn)
    assert (usage.speculation_input_tokens, usage.speculation_output_tokens) == (0, 0)
    assert counts["InputTokens"] == ANSWERED["input_tokens"]
    assert spent_today(dynamodb, conn) == pytest.approx(usage.cost_usd)
