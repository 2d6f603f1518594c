"""Claude 5.x token counts from what the local Bedrock endpoint estimates (characters / 4).

The local endpoint counts a request's input as characters / 4 of its compact JSON and a reply's
output as characters / 4 of what it streamed. Claude 5.x counts more, and counts what the JSON
leaves out. Each figure below was recorded once, with its source; ``calibrated`` applies them to
one request of the measured speaker.

Input (recorded 2026-11-28 with ctok 1.3.0, an offline reconstruction of Claude's ``count_tokens``
from PyPI, github.com/sanderland/ctok, exact on its held-out sets for the v4.7 vocabulary, which
Claude Opus 4.8, Sonnet 5 and later use; its 6-token message frame left out):

* the conductor's system prompt (``shared.flows.config.DEFAULT_SYSTEM_PROMPT``, 771 characters):
  252 tokens;
* the ``tool_call`` wrapper's tool spec over the default catalog (``shared.core.wrapper``, 13 tools,
  3,542 characters of compact JSON): 1,445 tokens;
* together 1,697 tokens where characters / 4 gives 1,079: ``INPUT_RATIO`` 1.573 (JSON schemas and
  tool names cost more than prose: the prompt alone is 1.31, the spec 1.63).

Claude adds its tool-use system prompt to every request that carries tools: 346 tokens with
``tool_choice`` auto (Anthropic, "Tool use pricing and tokens", docs.anthropic.com/en/docs/
tool-use-pricing-and-tokens, for Claude 4 models and later; measured the same by claudecodeguides.com,
"How Tool Definitions Add 346 Tokens Per Call").

Output (recorded the same day, same tool):

* spoken answers (``benchmarks.spoken_brain``'s sentences and preamble, the offline brain's ``ramble``
  text, a read-back; 935 characters): 276 tokens where characters / 4 gives 234:
  ``OUTPUT_TEXT_RATIO`` 1.179 (the old Claude 3 tokenizer: 216, so 5.x counts 28 % more);
* the wrapper's input JSON (``{"name":"editor.openFile","arguments":{"path":...}}`` and a
  ``build.run``; 121 characters): 58 tokens where characters / 4 gives 31: ``TOOL_INPUT_RATIO`` 1.871;
* each tool use writes ``TOOL_USE_OUTPUT_TOKENS`` more than its input JSON: derived from two real
  Claude Sonnet 5 ConverseStream responses recorded by langchain-ai/langchain-aws
  (libs/aws/tests/cassettes/test_agent_loop_streaming[v0].yaml.gz, commit 0434c7f9; replayed by the
  team's Bedrock conformance kit): a tool use alone reported 55 output tokens for a 15-token input
  JSON (40 more), a sentence then a tool use 76 for 20 + 15 (41 more).

Thinking: the local endpoint writes a fixed number of reasoning tokens per effort (its own choice,
``conductor_local.bedrock.models.THINK_TOKENS``); they are counted as reported.

Re-record when the system prompt or the catalog changes much (``tests/bench`` checks their sizes
still match within ``RECORDED_SIZE_TOLERANCE``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

RECORDED_ON = "2026-11-28"
SOURCE = "ctok 1.3.0 (offline count_tokens reconstruction, v4.8+ family for Claude 5.x)"

PROMPT_CHARS = 771
PROMPT_TOKENS = 252
TOOL_SPEC_CHARS = 3_542
TOOL_SPEC_TOKENS = 1_445
RECORDED_SIZE_TOLERANCE = 0.10

INPUT_RATIO = (PROMPT_TOKENS + TOOL_SPEC_TOKENS) / math.ceil((PROMPT_CHARS + TOOL_SPEC_CHARS) / 4)
TOOL_USE_SYSTEM_PROMPT_TOKENS = 346
OUTPUT_TEXT_RATIO = 276 / 234
TOOL_INPUT_RATIO = 58 / 31
TOOL_USE_OUTPUT_TOKENS = 40
CHARS_PER_ESTIMATED_TOKEN = 4

_FAMILY_FIRST = re.compile(r"anthropic\.claude-[a-z]+-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
FIRST_VERSION = (4, 8)
"""Claude Opus 4.8, Sonnet 5 and every later model count with the tokenizer recorded here."""


def applies_to(model: str) -> bool:
    """Whether ``model`` (a foundation model id) counts with the Claude 5.x tokenizer recorded here."""
    found = _FAMILY_FIRST.search(model)
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= FIRST_VERSION


@dataclass(frozen=True)
class Usage:
    """Model requests as the local endpoint saw them (its estimates, characters / 4), summed."""

    input_tokens: float
    """The requests' whole estimates (cached parts included)."""
    tool_requests: float = 0.0
    """Requests that carried tool specs."""
    cache_read_tokens: float = 0.0
    cache_write_tokens: float = 0.0
    reading_requests: float = 0.0
    """Requests that read the prompt cache (from their start, where the tools are)."""
    writing_requests: float = 0.0
    """Requests that wrote the prompt cache without reading it."""
    text_chars: float = 0.0
    """Characters of answer text streamed."""
    tool_chars: float = 0.0
    """Characters of tool input JSON streamed."""
    tool_uses: float = 0.0
    reasoning_tokens: float = 0.0


@dataclass(frozen=True)
class Tokens:
    """What the model counts for the same requests, as its usage reports it."""

    input_tokens: float
    """Input neither read from nor written to the prompt cache."""
    cache_read_tokens: float
    cache_write_tokens: float
    output_tokens: float


def calibrated(usage: Usage) -> Tokens:
    """Claude 5.x's counts for ``usage``: the input parts times ``INPUT_RATIO``, and the tool-use system
    prompt of each request that carried tools (in the cached part when the request read the cache or
    wrote it from its start, where the tools are); the output text, tool input JSON and tool use framing,
    and the reasoning as the endpoint reported it."""
    system = TOOL_USE_SYSTEM_PROMPT_TOKENS
    fresh_requests = max(0.0, usage.tool_requests - usage.reading_requests - usage.writing_requests)
    fresh = max(0.0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    output = (
        usage.text_chars / CHARS_PER_ESTIMATED_TOKEN * OUTPUT_TEXT_RATIO
        + usage.tool_chars / CHARS_PER_ESTIMATED_TOKEN * TOOL_INPUT_RATIO
        + usage.tool_uses * TOOL_USE_OUTPUT_TOKENS
        + usage.reasoning_tokens
    )
    return Tokens(
        fresh * INPUT_RATIO + fresh_requests * system,
        usage.cache_read_tokens * INPUT_RATIO + usage.reading_requests * system,
        usage.cache_write_tokens * INPUT_RATIO + usage.writing_requests * system,
        output,
    )


def uncalibrated(usage: Usage) -> Tokens:
    """The endpoint's own estimates (for a model this calibration does not cover)."""
    fresh = max(0.0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    output = (usage.text_chars + usage.tool_chars) / CHARS_PER_ESTIMATED_TOKEN + usage.reasoning_tokens
    return Tokens(fresh, usage.cache_read_tokens, usage.cache_write_tokens, output)


def counted(usage: Usage, model: str) -> Tokens:
    """``usage`` as ``model`` counts it: calibrated where this module covers the model."""
    return calibrated(usage) if applies_to(model) else uncalibrated(usage)


def cache_minimum_in_estimates(minimum_tokens: int) -> int:
    """A model's prompt-cache minimum (Claude tokens) in the local endpoint's estimated tokens, so the
    endpoint caches where Claude 5.x would."""
    return math.ceil(minimum_tokens / INPUT_RATIO)
