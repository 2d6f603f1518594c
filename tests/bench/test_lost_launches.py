"""Lost early launches in the load run's printout and in the capacity model."""

from __future__ import annotations

import pytest

from benchmarks import capacity_model
from benchmarks.capacity_model import SpeakerFigures, under_load
from benchmarks.load_run import Tokens, lost_tokens_line
from shared.wire.protocol import TurnUsage


def usage(**counts: int) -> TurnUsage:
    return TurnUsage(turn_id="t", **counts)


def test_the_turns_usage_adds_up_to_the_runs_model_tokens_and_its_dropped_ones() -> None:
    one, two = Tokens(), Tokens()
    one.add(usage(input_tokens=1_000, output_tokens=20, cache_read_tokens=500, speculation_input_tokens=900))
    two.add(usage(input_tokens=2_000, output_tokens=30, speculation_output_tokens=5))
    total = Tokens.total([one, two])
    assert (total.answered, total.dropped_input, total.dropped_output, total.dropped) == (3_550, 900, 5, 905)


def test_without_speculation_the_dropped_tokens_are_the_lost_launches() -> None:
    tokens = Tokens(answered=9_095, dropped_input=900, dropped_output=5)
    line = lost_tokens_line(1, False, tokens)
    assert "lost early launches' model tokens (turnUsage) 900 in / 5 out" in line
    assert "9.05 % of the run's 10,000 model tokens" in line


def test_with_speculation_the_dropped_tokens_bound_the_lost_launches() -> None:
    tokens = Tokens(answered=9_095, dropped_input=900, dropped_output=5)
    assert lost_tokens_line(0, True, tokens).startswith("lost early launches' model tokens 0 (none lost)")
    assert "at most" in lost_tokens_line(2, True, tokens)


def test_the_capacity_model_adds_the_lost_launches_share_of_bedrock(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = SpeakerFigures(
        speculation=False, minutes=1.0, bedrock_requests=3.0, input_tokens=900.0, output_tokens=90.0
    )
    assert under_load(figures) == figures  # as measured: none lost
    monkeypatch.setattr(capacity_model, "LOST_EARLY_LAUNCHES", {False: 0.1, True: 0.0})
    loaded = under_load(figures)
    assert loaded.input_tokens == pytest.approx(1_000.0) and loaded.output_tokens == pytest.approx(100.0)
    assert loaded.bedrock_requests == pytest.approx(3.0 / 0.9)
    assert under_load(SpeakerFigures(speculation=True, minutes=1.0, input_tokens=900.0)).input_tokens == 900.0
