"""The first-token model (prefill on top of the published TTFT) and the placement benchmark."""

from __future__ import annotations

import pytest

from benchmarks import aws_latencies as aws
from benchmarks import first_token_levers as levers
from benchmarks.deployed_latency import Injector, claude_input_tokens, request_usage
from conductor_local.bedrock.cache import CacheUsage, PromptCache
from conductor_local.bedrock.script import Pause


@pytest.fixture(scope="module")
def models() -> dict[str, levers.StageModel]:
    return {model.stage: model for model in levers.stage_models()}


@pytest.mark.parametrize("prefill", [aws.HAIKU_PREFILL, aws.SONNET_PREFILL])
def test_the_prefill_grows_with_the_input_and_a_cached_token_costs_less(prefill: aws.Prefill) -> None:
    sizes = [0, 500, 1_000, 2_000, 10_000, 100_000]
    extras = [prefill.extra_ms(n) for n in sizes]
    assert extras == sorted(extras) and extras[0] == 0.0 and extras[-1] > extras[-2]
    assert prefill.extra_ms(prefill.reference_tokens) == 0.0  # the published figure already holds it
    # the same 20,000 tokens read from the cache instead of anew
    assert prefill.extra_ms(2_000, 18_000) < prefill.extra_ms(20_000)
    assert prefill.cached_ms_per_token < prefill.uncached_ms_per_token


def test_sonnet_reads_slower_than_haiku_and_every_figure_is_sourced() -> None:
    assert aws.MODELS["prod"].prefill.uncached_ms_per_token > aws.MODELS["dev"].prefill.uncached_ms_per_token
    for model in aws.MODELS.values():
        assert "http" in model.prefill.source and "assumed:" in model.prefill.source
        assert model.first_token_p50_ms(50_000) > model.first_token_p50_ms(50_000, 0) - 1e-9
        assert model.first_token_p50_ms(5_000, 45_000) < model.first_token_p50_ms(50_000)


def test_the_injected_first_pause_carries_the_prefill() -> None:
    class _Stack:
        pass

    injector = Injector(_Stack(), aws.Sampler(9), aws.MODELS["prod"], sleep=lambda _: None)
    steps = [{"messageStart": {}}, Pause(0.4), {"delta": 1}]
    drawn = injector.first_token(steps, prefill_ms=300.0)
    expected = (aws.Sampler(9).ms(aws.MODELS["prod"].first_token) + 300.0) / 1000
    assert drawn[1] == Pause(pytest.approx(expected))
    assert injector.waits.waits[0].kind == "model first token"


def test_cache_reads_move_claude_tokens_from_uncached_to_cached() -> None:
    fresh = claude_input_tokens(CacheUsage(4_000), "us.anthropic.claude-sonnet-5-5", tools=True)
    read = claude_input_tokens(CacheUsage(4_000, read=3_000), "us.anthropic.claude-sonnet-5-5", tools=True)
    assert sum(fresh) == pytest.approx(sum(read))  # the same request, counted the same
    assert read[0] < fresh[0] and read[1] > fresh[1] == 0


def test_asking_the_cache_ahead_leaves_it_as_it_was(models: dict[str, levers.StageModel]) -> None:
    model_id = models["prod"].model_id
    cache = PromptCache(min_tokens=1, clock=lambda: 0.0)
    body = levers.brain_for(model_id, prompt_cache=True).request(
        [
            {"role": "user", "content": [{"text": "hi " * 400}]},
            {"role": "assistant", "content": [{"text": "ok"}]},
            {"role": "user", "content": [{"text": "and then"}]},
        ]
    )
    ahead = request_usage(cache, model_id, body)
    again = request_usage(cache, model_id, body)
    assert ahead == again and ahead.read == 0 and ahead.write > 0  # nothing was written by asking
    assert cache.account(body, ahead.input_tokens, model_id) == ahead
    assert request_usage(cache, model_id, body).read > 0  # once written, a request reads it


def test_caching_off_reads_and_writes_nothing(models: dict[str, levers.StageModel]) -> None:
    run = levers.play(models["prod"], levers.OFF, 5)
    assert all(r.read == 0 and r.written == 0 for turn in run.figures for r in turn.requests)


def test_today_reads_the_history_at_20_turns_and_the_newest_text_point_reads_at_least_as_much(
    models: dict[str, levers.StageModel],
) -> None:
    off = levers.play(models["prod"], levers.OFF, 20)
    today = levers.play(models["prod"], levers.TODAY, 20)
    newest = levers.play(models["prod"], levers.NEWEST_TEXT, 20)
    assert today.mean(lambda t: t.first.read) > 0
    assert today.mean(lambda t: t.ttft_ms) < off.mean(lambda t: t.ttft_ms)
    assert newest.mean(lambda t: t.first.read) >= today.mean(lambda t: t.first.read)


def test_a_window_that_slides_every_turn_loses_the_cache_a_stepped_one_keeps(
    models: dict[str, levers.StageModel],
) -> None:
    sliding = levers.play(models["prod"], levers.SLIDING, 45)
    today = levers.play(models["prod"], levers.TODAY, 45)
    late = slice(35, None)  # once the history is longer than the window
    assert all(turn.first.read == 0 for turn in sliding.figures[late])
    assert sum(turn.first.read for turn in today.figures[late]) > 0


def test_at_60_turns_the_conductors_own_window_reads_from_the_cache(models: dict[str, levers.StageModel]) -> None:
    for stage in ("dev", "prod"):
        today = levers.play(models[stage], levers.TODAY, 60)
        sliding = levers.play(models[stage], levers.SLIDING, 60)
        late = today.figures[36:]  # the window was full twice over
        reading = [turn for turn in late if turn.first.read > turn.first.input / 2]
        assert len(reading) > len(late) / 2  # most turns read most of their request back
        assert today.mean(lambda t: t.first.read) > 2 * sliding.mean(lambda t: t.first.read)
        assert today.mean(lambda t: t.ttft_ms) < sliding.mean(lambda t: t.ttft_ms)
