"""What each Bedrock model family accepts and how it behaves: one table, used to build every request
(the turn, the rolling summary, ``doctor``) and by the local Bedrock endpoint to answer as the model does.

Pure: no boto3, no I/O. Look a model up with ``rules_for(model_id)``: a foundation model id, a
cross-region inference profile id (``us.``, ``eu.``, ``global.``, ...) or an ARN of either. A Claude id
newer than the table (a version above the newest row) is treated as the newest row of its family; a
family the table does not know gets what every new Claude of the last year asks for (adaptive thinking
it may not turn off, no sampling parameters), so a new model works on the day it ships.

Why it matters: from Claude Opus 4.7 on, Bedrock refuses ``temperature``/``topP``/``top_k`` with a
400; Claude 5.x models think adaptively unless told not to (and some cannot be told), their
thinking tokens count against ``maxTokens``, and a prompt-cache checkpoint under the model's minimum
silently caches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

ThinkingMode = Literal["none", "budget", "adaptive"]
"""``none``: the model does not think. ``budget``: thinks only when asked (``thinking.type: enabled``
with ``budget_tokens``). ``adaptive``: decides itself when and how much to think
(``thinking.type: adaptive``); whether it may be turned off, and how, is in ``off``."""

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[str, ...] = get_args(Effort)
"""Every effort level Bedrock's ``outputConfig.effort`` knows, least first."""

ThinkingSetting = Literal["off", "adaptive"]
"""What a stage asks for: ``off`` where the model allows it, or ``adaptive``."""


@dataclass(frozen=True)
class ModelRules:
    family: str  # a readable name, e.g. "Claude Haiku 5.5"
    sampling: bool  # accepts temperature / topP / top_k
    thinking: ThinkingMode
    thinks_by_default: bool  # thinks when the request says nothing about thinking
    efforts: tuple[str, ...]  # accepted ``outputConfig.effort`` levels; () when effort is refused
    default_effort: str | None
    context_tokens: int
    max_output_tokens: int
    cache_min_tokens: int | None  # per cache checkpoint; None: no prompt caching (cachePoint refused)
    # The ``thinking.type`` that turns adaptive thinking off ("disabled"; Sonnet 5.5: "between_tools",
    # which still thinks between tool calls); None: it cannot be turned off (a 400 for "disabled").
    off: str | None = None
    off_effort_cap: str | None = None  # the highest effort accepted while thinking is off
    caches_tools: bool = True  # a cachePoint after the tools is honoured
    inline_reasoning_tag: str | None = None  # reasoning written into the text, e.g. <thinking>…</thinking>


BETWEEN_TOOLS = "between_tools"
"""Sonnet 5.5's lowest thinking: none before it answers, some between its tool calls."""

# ---- the table ---------------------------------------------------------------------------------
# Sources: Bedrock's adaptive-thinking and prompt-caching guides, Anthropic's model pages and
# migration guides (November 2026). Bedrock publishes no cache minimum for the 5.5 models: the ones
# below take Bedrock's figure for the family's previous model (Haiku 4.5: 4,096; Sonnet 4.6: 2,048;
# Opus 4.7: 4,096), above the Claude API's 512, so no estimate books savings the cache may not give.

_K = 1024
CLAUDE_LEGACY = ModelRules(
    family="Claude 3",
    sampling=True,
    thinking="none",
    thinks_by_default=False,
    efforts=(),
    default_effort=None,
    context_tokens=200_000,
    max_output_tokens=4096,
    cache_min_tokens=None,
)
"""Claude 3 Haiku/Sonnet/Opus and 3.5 Sonnet: no thinking, no prompt caching."""
_BUDGET = replace(CLAUDE_LEGACY, thinking="budget", max_output_tokens=64_000, cache_min_tokens=_K)
_ADAPTIVE = ModelRules(
    family="Claude 5",
    sampling=False,
    thinking="adaptive",
    thinks_by_default=True,
    efforts=EFFORTS,
    default_effort="high",
    context_tokens=1_000_000,
    max_output_tokens=128_000,
    cache_min_tokens=_K,
)

# Claude families by (family name, first version), oldest first within a family. The newest row of a
# family also answers for versions above it.
_CLAUDE: tuple[tuple[str, float, ModelRules], ...] = (
    ("haiku", 3.5, replace(CLAUDE_LEGACY, family="Claude Haiku 3.5", max_output_tokens=8192, cache_min_tokens=2048)),
    ("haiku", 4.5, replace(_BUDGET, family="Claude Haiku 4.5", cache_min_tokens=4096)),
    ("haiku", 5.5, replace(
        _ADAPTIVE, family="Claude Haiku 5.5", default_effort="medium", off="disabled", off_effort_cap="high",
        cache_min_tokens=4096,
    )),
    ("sonnet", 3.7, replace(_BUDGET, family="Claude Sonnet 3.7")),
    ("sonnet", 4.0, replace(_BUDGET, family="Claude Sonnet 4")),
    ("sonnet", 4.6, replace(
        _ADAPTIVE, family="Claude Sonnet 4.6", sampling=True, thinks_by_default=False, off="disabled",
        efforts=("low", "medium", "high"), max_output_tokens=64_000, cache_min_tokens=2048,
    )),
    ("sonnet", 5.0, replace(_ADAPTIVE, family="Claude Sonnet 5", off="disabled", off_effort_cap="high")),
    ("sonnet", 5.5, replace(
        _ADAPTIVE, family="Claude Sonnet 5.5", off=BETWEEN_TOOLS, off_effort_cap="high", cache_min_tokens=2048,
    )),
    ("opus", 4.0, replace(_BUDGET, family="Claude Opus 4", max_output_tokens=32_000)),
    ("opus", 4.5, replace(_BUDGET, family="Claude Opus 4.5", cache_min_tokens=4096)),
    ("opus", 4.6, replace(
        _ADAPTIVE, family="Claude Opus 4.6", sampling=True, thinks_by_default=False, off="disabled",
        efforts=("low", "medium", "high", "max"), cache_min_tokens=4096,
    )),
    # Opus 4.7 thinks only when asked, and only adaptively: "disabled" is refused, leaving it out is off.
    ("opus", 4.7, replace(_ADAPTIVE, family="Claude Opus 4.7", thinks_by_default=False, cache_min_tokens=4096)),
    ("opus", 5.0, replace(
        _ADAPTIVE, family="Claude Opus 5", off="disabled", off_effort_cap="high", cache_min_tokens=512,
    )),
    ("opus", 5.5, replace(_ADAPTIVE, family="Claude Opus 5.5", default_effort="medium", cache_min_tokens=4096)),
    ("fable", 5.0, replace(_ADAPTIVE, family="Claude Fable 5")),
    ("mythos", 5.0, replace(_ADAPTIVE, family="Claude Mythos 5")),
)  # fmt: skip

NOVA = replace(
    CLAUDE_LEGACY,
    family="Amazon Nova",
    context_tokens=300_000,
    max_output_tokens=10_000,
    cache_min_tokens=1536,
    caches_tools=False,
    inline_reasoning_tag="thinking",
)
"""First-generation Nova: writes its reasoning inline as ``<thinking>…</thinking>`` text (around
tool calls, and sometimes without them); caches system and messages but not tools."""
_NOVA_SIZES = {"micro": (128_000, 1536), "lite": (300_000, 1536), "pro": (300_000, _K), "premier": (1_000_000, _K)}

OTHER = replace(CLAUDE_LEGACY, family="other")
"""Any other provider (Llama, Titan, Mistral, gpt-oss, ...) and ids this table cannot read (an
application inference profile's ARN): sampling accepted, no thinking fields, no prompt caching."""


# ---- reading a model id ------------------------------------------------------------------------

# anthropic.claude-3-7-sonnet-…, anthropic.claude-sonnet-4-5-…, anthropic.claude-haiku-5-5 (version
# numbers are one or two digits; a date or -v1 may follow).
_CLAUDE_VERSION_FIRST = re.compile(r"anthropic\.claude-(\d{1,2})(?:-(\d{1,2}))?-([a-z]+)(?![a-z])")
_CLAUDE_FAMILY_FIRST = re.compile(r"anthropic\.claude-([a-z]+)-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
_NOVA = re.compile(r"amazon\.nova-(2-)?(micro|lite|pro|premier)(?![a-z])")


def base_model_id(model_id: str) -> str:
    """The foundation model behind an id: an ARN's last part, without an inference profile's
    geography (``us.``, ``eu.``, ``apac.``, ``global.``, ...)."""
    name = model_id.rsplit("/", 1)[-1]
    provider = re.search(r"(?:^|\.)((?:anthropic|amazon|meta|mistral|openai|cohere|ai21|deepseek|qwen)\..*)$", name)
    return provider.group(1) if provider else name


def claude_version(model_id: str) -> tuple[str, float] | None:
    """``("haiku", 5.5)`` for a Claude id, None for anything else."""
    base = base_model_id(model_id)
    if match := _CLAUDE_VERSION_FIRST.match(base):
        major, minor, family = match.groups()
        return family, float(f"{major}.{minor or 0}")
    if match := _CLAUDE_FAMILY_FIRST.match(base):
        family, major, minor = match.groups()
        return family, float(f"{major}.{minor or 0}")
    return None


def rules_for(model_id: str) -> ModelRules:
    """The rules of the model behind ``model_id``."""
    if version := claude_version(model_id):
        return _claude_rules(*version)
    if match := _NOVA.match(base_model_id(model_id)):
        second_generation, size = match.groups()
        if second_generation:  # Nova 2 reasons in reasoning blocks (off unless asked), not inline
            return replace(
                NOVA,
                family="Amazon Nova 2",
                context_tokens=1_000_000,
                max_output_tokens=65_536,
                inline_reasoning_tag=None,
            )
        window, cache_min = _NOVA_SIZES[size]
        return replace(
            NOVA, family=f"Amazon Nova {size.capitalize()}", context_tokens=window, cache_min_tokens=cache_min
        )
    return OTHER


def _claude_rules(family: str, version: float) -> ModelRules:
    rows = [(first, rules) for name, first, rules in _CLAUDE if name == family]
    if not rows:  # a family the table does not know: as the newest Claude do, thinking it cannot turn off
        return replace(_ADAPTIVE, family=f"Claude {family.capitalize()} (newer than this table)")
    fitting = [rules for first, rules in rows if first <= version]
    return fitting[-1] if fitting else CLAUDE_LEGACY


# ---- what a request carries --------------------------------------------------------------------

# Tokens added to ``maxTokens`` when the model may think, so thinking (which counts against it)
# cannot cut the answer short: roughly what adaptive thinking spends at that effort on a voice turn,
# with room to spare.
THINKING_HEADROOM: Mapping[str, int] = {"low": 4096, "medium": 8192, "high": 16_384, "xhigh": 32_768, "max": 65_536}
BUDGET_THINKING_TOKENS: Mapping[str, int] = {"low": 1024, "medium": 4096, "high": 8192, "xhigh": 16_384, "max": 32_768}
"""``budget_tokens`` for a model that thinks only with a budget, when thinking is asked for."""


@dataclass(frozen=True)
class Inference:
    """How a request of this conductor asks a model to answer."""

    max_tokens: int  # for the answer itself; thinking gets its headroom on top
    effort: Effort = "low"
    thinking: ThinkingSetting = "off"
    temperature: float | None = None  # only for models that accept sampling parameters


def effort_for(rules: ModelRules, effort: str) -> str | None:
    """The model's nearest accepted level at or below ``effort`` (its lowest when none is)."""
    if not rules.efforts:
        return None
    wanted = EFFORTS.index(effort) if effort in EFFORTS else 0
    below = [level for level in rules.efforts if EFFORTS.index(level) <= wanted]
    return below[-1] if below else rules.efforts[0]


def thinks(rules: ModelRules, inference: Inference) -> bool:
    """Whether a request built with ``inference`` lets the model think before it answers."""
    if rules.thinking == "none":
        return False
    if inference.thinking == "adaptive":
        return True
    return rules.thinking == "adaptive" and rules.thinks_by_default and rules.off is None


def request_fields(rules: ModelRules, inference: Inference) -> dict[str, Any]:
    """The Converse/ConverseStream members for ``inference`` on a model with ``rules``:
    ``inferenceConfig`` always; ``additionalModelRequestFields.thinking`` and ``outputConfig.effort``
    where the model has them. No sampling parameter reaches a model that refuses them, and none
    goes with thinking (Claude takes no temperature but 1 while it thinks). Thinking "off" is sent
    as the model turns it off (``disabled``, ``between_tools``, or nothing where off is its default);
    a model that cannot stop thinking thinks at ``effort``."""
    thinking = thinks(rules, inference)
    effort = effort_for(rules, inference.effort)
    max_tokens = inference.max_tokens
    additional: dict[str, Any] = {}
    if rules.thinking == "adaptive":
        if thinking:
            additional["thinking"] = {"type": "adaptive"}
            max_tokens += THINKING_HEADROOM[effort or "low"]
        elif rules.thinks_by_default and rules.off is not None:
            additional["thinking"] = {"type": rules.off}
            if effort is not None and rules.off_effort_cap is not None:
                effort = min(effort, rules.off_effort_cap, key=EFFORTS.index)
            if rules.off == BETWEEN_TOOLS:  # no thinking before the first word, but after tool results
                max_tokens += THINKING_HEADROOM[effort or "low"]
    elif rules.thinking == "budget" and thinking:
        budget = BUDGET_THINKING_TOKENS[inference.effort if inference.effort in EFFORTS else "low"]
        additional["thinking"] = {"type": "enabled", "budget_tokens": budget}
        max_tokens += budget
    config: dict[str, Any] = {"maxTokens": min(max_tokens, rules.max_output_tokens)}
    if rules.sampling and inference.temperature is not None and not thinking:
        config["temperature"] = inference.temperature
    fields: dict[str, Any] = {"inferenceConfig": config}
    if additional:
        fields["additionalModelRequestFields"] = additional
    if effort is not None:
        fields["outputConfig"] = {"effort": effort}
    return fields
