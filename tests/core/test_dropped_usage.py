"""A model request dropped before anyone heard it: its spend estimated when it was closed before
Bedrock's ``metadata``, and its tokens as a turn's ``speculation*Tokens`` count them."""

from __future__ import annotations

from shared.core.speculation import count_dropped
from shared.core.state import SessionState
from shared.core.usage import Prices, dropped_tokens, estimated_usage, usage_of


def test_a_request_closed_before_its_metadata_is_estimated_from_what_it_read_and_wrote() -> None:
    assert estimated_usage(4_000, 4.0, 10) == {"inputTokens": 1_000, "outputTokens": 3}
    assert estimated_usage(4_001, 4.0, 0) == {"inputTokens": 1_001, "outputTokens": 0}  # never less than spent
    assert estimated_usage(300, 0.2, 4)["inputTokens"] == 300  # a ratio below one character counts one


def test_an_estimate_is_priced_as_bedrocks_figures_are() -> None:
    prices = Prices(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)
    spent = estimated_usage(4_000, 4.0, 10)
    assert prices.cost(usage_of(spent, "m")) == (1_000 * 3.0 + 3 * 15.0) / 1_000_000


def test_a_dropped_requests_input_includes_what_it_read_from_and_wrote_to_the_cache() -> None:
    reported = {"inputTokens": 40, "outputTokens": 6, "cacheReadInputTokens": 1_000, "cacheWriteInputTokens": 200}
    assert dropped_tokens(reported) == (1_240, 6)
    assert dropped_tokens({}) == (0, 0)


def test_dropped_tokens_wait_in_the_state_for_the_turn_that_ends_next() -> None:
    state = SessionState(session_id="s", speculation_input_pending=40, speculation_output_pending=6)
    outcome = count_dropped(state, 1_240, 3)
    assert (outcome.state.speculation_input_pending, outcome.state.speculation_output_pending) == (1_280, 9)
    assert count_dropped(outcome.state, 0, 0).state == outcome.state  # nothing dropped: nothing written
