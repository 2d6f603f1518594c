"""Claude 5.x's token counts from the local endpoint's characters / 4: what each recorded figure does."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import token_calibration as calibration
from benchmarks.token_calibration import Usage, calibrated, counted


def test_input_counts_the_recorded_ratio_and_the_tool_use_system_prompt_of_each_request() -> None:
    tokens = calibrated(Usage(input_tokens=10_000, tool_requests=4))
    assert pytest.approx(1_697 / 1_079) == calibration.INPUT_RATIO
    assert tokens.input_tokens == pytest.approx(10_000 * calibration.INPUT_RATIO + 4 * 346)
    assert tokens.cache_read_tokens == tokens.cache_write_tokens == 0


def test_the_tool_use_system_prompt_is_cached_with_the_tools_it_precedes() -> None:
    usage = Usage(
        input_tokens=10_000,
        tool_requests=4,
        cache_read_tokens=6_000,
        cache_write_tokens=1_000,
        reading_requests=2,
        writing_requests=1,
    )
    tokens = calibrated(usage)
    ratio = calibration.INPUT_RATIO
    assert tokens.cache_read_tokens == pytest.approx(6_000 * ratio + 2 * 346)
    assert tokens.cache_write_tokens == pytest.approx(1_000 * ratio + 1 * 346)
    assert tokens.input_tokens == pytest.approx(3_000 * ratio + 1 * 346)


def test_output_counts_prose_json_and_each_tool_uses_framing() -> None:
    usage = Usage(input_tokens=0, text_chars=400, tool_chars=80, tool_uses=2, reasoning_tokens=150)
    tokens = calibrated(usage)
    assert tokens.output_tokens == pytest.approx(100 * 276 / 234 + 20 * 58 / 31 + 2 * 40 + 150)
    # the endpoint's own estimate, for a model the calibration does not cover
    assert counted(usage, "amazon.nova-lite-v1:0").output_tokens == pytest.approx(480 / 4 + 150)


def test_the_calibration_covers_claude_5_and_opus_4_8_and_not_older_models() -> None:
    assert calibration.applies_to("anthropic.claude-sonnet-5-5")
    assert calibration.applies_to("anthropic.claude-haiku-5-5")
    assert calibration.applies_to("anthropic.claude-opus-4-8")
    assert not calibration.applies_to("anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert not calibration.applies_to("amazon.nova-lite-v1:0")


def test_the_cache_minimum_is_given_in_the_endpoints_estimates() -> None:
    assert calibration.cache_minimum_in_estimates(2048) == math.ceil(2048 / calibration.INPUT_RATIO)


def test_the_ratio_was_recorded_on_a_prompt_and_tool_spec_of_todays_size() -> None:
    """Re-record (ctok, benchmarks/token_calibration.py) when the prompt or the catalog grows or shrinks much."""
    from shared.core.tool_catalog import default_catalog
    from shared.core.wrapper import wrapper_tool_spec
    from shared.flows.config import DEFAULT_SYSTEM_PROMPT

    spec = json.dumps(wrapper_tool_spec(default_catalog()), separators=(",", ":"))
    tolerance = calibration.RECORDED_SIZE_TOLERANCE
    assert len(DEFAULT_SYSTEM_PROMPT) == pytest.approx(calibration.PROMPT_CHARS, rel=tolerance)
    assert len(spec) == pytest.approx(calibration.TOOL_SPEC_CHARS, rel=tolerance)
