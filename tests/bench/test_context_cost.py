"""The workspace context's cost per turn, measured on a local stack: the block the requests carried
shows up as uncached input, priced, and leaves the prompt cache's reads as they were."""

from __future__ import annotations

import io

import pytest

from benchmarks import token_calibration as calibration
from benchmarks.context_cost import (
    WITH,
    WITHOUT,
    ContextCost,
    context_cost,
    model_cache_minimum,
    report_context_cost,
)
from conductor_local.bedrock.offline_brain import ModelPace

TURNS = 2


@pytest.fixture(scope="module")
def cost() -> ContextCost:
    """Every checkpoint caches (minimum 0), so the shortest conversation reads the cache."""
    return context_cost(ModelPace(first_token_s=0.01, tokens_per_s=10_000), TURNS, cache_min_tokens=0)


def test_every_turn_of_both_flows_completed_with_its_figures(cost: ContextCost) -> None:
    for flow in (WITHOUT, WITH):
        turns = cost.turns[flow]
        assert len(turns) == TURNS
        assert all(t.completed and t.requests == 1 for t in turns), turns
        assert all(t.first_partial_ms is not None and t.overhead_ms is not None for t in turns)
        assert all(t.cost_usd is not None and t.cost_usd > 0 for t in turns)  # priced at the stage's prices
        assert all(t.endpoint_input_tokens == t.input_tokens for t in turns)  # turnUsage says what Bedrock said


def test_the_companions_context_reached_every_request_of_its_session_only(cost: ContextCost) -> None:
    assert all(t.block_chars == 0 and t.block_tokens == 0 for t in cost.turns[WITHOUT])
    assert all(t.block_chars == len(cost.block) > 0 for t in cost.turns[WITH])
    assert cost.block.startswith('<context kind="workspace">')
    for line in ("workspace: shop-api", "branch: fix/user-lookup", "running: npm test -- --watch users"):
        assert line in cost.block
    assert "selection: src/users/repository.ts lines 31-50" in cost.block
    assert cost.block.count("\n") >= 20 + 5  # the 20 selected lines among the others


def test_the_block_is_paid_as_uncached_input_and_leaves_the_cache_reads_as_they_were(cost: ContextCost) -> None:
    for without, with_ in zip(cost.turns[WITHOUT], cost.turns[WITH], strict=True):
        assert with_.input_tokens > without.input_tokens
        assert with_.input_tokens - without.input_tokens == pytest.approx(with_.block_tokens, abs=2)
        assert with_.cache_read_tokens == without.cache_read_tokens > 0
        assert with_.cache_write_tokens == without.cache_write_tokens
        assert with_.output_tokens == without.output_tokens
        assert with_.cost_usd is not None and without.cost_usd is not None and with_.cost_usd > without.cost_usd


def test_the_report_prints_both_flows_and_the_block(cost: ContextCost) -> None:
    out = io.StringIO()
    report_context_cost(cost, out)
    text = out.getvalue()
    assert f"{TURNS} turns of a growing conversation" in text
    assert f"the block: {len(cost.block)} characters" in text
    for label in ("input tokens (uncached)", "cache read tokens", "cache write tokens", "first partial p50 (ms)"):
        assert label in text


def test_the_endpoint_caches_where_the_model_would() -> None:
    assert model_cache_minimum("us.anthropic.claude-sonnet-5-5") == calibration.cache_minimum_in_estimates(2048)
    assert model_cache_minimum("us.anthropic.claude-haiku-5-5") == calibration.cache_minimum_in_estimates(4096)
