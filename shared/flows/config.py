"""The conductor's configuration, read once per container from environment variables."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.core.decision import CoreSettings
from shared.core.person_memory import MEMORY_TOOLS
from shared.core.speculation import SpeculationSettings
from shared.core.tool_catalog import default_catalog
from shared.core.usage import Prices
from shared.core.wrapper import ClientTool
from shared.wire.model_rules import Effort, Inference, ThinkingSetting
from shared.wire.protocol_tools import MEMORY_TOOL_NAMES

DEFAULT_SYSTEM_PROMPT = """\
You are the voice of VoiceIDE, a coding assistant the user talks to while working in their \
IDE on an iPhone or iPad. Everything you write is spoken aloud by text-to-speech, so answer \
in short, natural spoken sentences: no markdown, no code blocks, no lists, no emoji. Read \
out only what helps; summarize code instead of reciting it.
To act in the user's app (open or read files, search, build, run tests, show cards) call \
the tool_call tool with the app tool's name and arguments; you may call it several times \
in one reply to run actions in parallel. Say briefly what you are about to do before you \
call tools, and report results in a sentence or two. If a tool fails, say so plainly and \
suggest a next step. If you were interrupted, do not repeat yourself unless asked.\
"""


class Settings(BaseModel):
    """Every knob of the conductor; env var names are in ``from_env``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    table_name: str = "voiceide-conductor"
    model_id: str = "us.anthropic.claude-haiku-5-5"
    bedrock_region: str | None = None
    # The answer's token budget; a thinking model gets room for its thinking on top (``model_rules``).
    max_tokens: int = Field(default=1024, ge=1)
    # How hard the model works before it speaks: voice wants the first word soon. ``thinking`` "off"
    # turns thinking off where the model allows it; a model that always thinks does so at ``effort``.
    effort: Effort = "low"
    thinking: ThinkingSetting = "off"
    # Sent only to models that accept sampling parameters (none of Claude's from Opus 4.7 on).
    temperature: float | None = Field(default=None, ge=0, le=1)
    bedrock_connect_timeout_s: float = 5.0
    bedrock_max_attempts: int = Field(default=4, ge=1)
    max_tool_rounds: int = Field(default=8, ge=1)
    history_window: int = Field(default=80, ge=2)
    session_ttl_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    # How long a history message is kept after it was last written. Unset: the session TTL. With the
    # session reaper deployed (it deletes a session's history when its state expires), a far
    # backstop (400 days): a session in use then keeps all of its history.
    history_ttl_seconds: int | None = Field(default=None, ge=60)
    # How long an ended session is kept after it ended (the sessions API's end rewrites every item's
    # expiry; later writes of the ended state keep it).
    ended_retention_seconds: int = Field(default=30 * 24 * 3600, ge=60)
    turn_reserve_ms: int = Field(default=15_000, ge=0)
    require_principal: bool = False
    # The AgentCore Memory the conductor remembers people in across sessions (empty: it remembers
    # nothing, and the model is offered no memory tools).
    memory_id: str = ""
    # A call of a tool on an MCP server still running after this long goes on in the background.
    mcp_foreground_s: float = Field(default=12.0, gt=0, le=600)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    catalog: list[ClientTool] = Field(default_factory=default_catalog)
    max_frame_bytes: int = Field(default=128 * 1024, ge=256)
    max_transcript_chars: int = Field(default=8000, ge=1)
    max_turns_per_minute: int = Field(default=30, ge=1)
    stream_idle_timeout_s: float = Field(default=30.0, gt=0)
    outbox_ttl_seconds: int = Field(default=24 * 3600, ge=60)
    max_tool_result_chars: int = Field(default=16_000, ge=100)
    turn_function: str = "voiceide-conductor-turn"
    stream_start_timeout_s: float = Field(default=90.0, gt=0)
    # Coalesced partials: after the first, one per flush window (or at a sentence/clause end) adding at
    # least ``partial_growth`` of the text already shown; 0 and 0 give one partial per model delta.
    partial_flush_ms: int = Field(default=120, ge=0)
    partial_growth: float = Field(default=0.5, ge=0, le=4)
    # A running stream reads the session at least this often to see whether a barge-in or a new
    # transcript stopped it (a commit counts): the bound on model output generated for nobody.
    # The speak interval's second: a spoken answer's sentence commits already check about as often.
    stop_check_ms: int = Field(default=1000, ge=50)
    # Once the answer is shown or heard, a barge-in (or the person speaking again) may come at any
    # moment: the stream reads the session this often, between the model's deltas, so the model is
    # stopped within about this plus one read and one delta (and no tokens are spent for nobody).
    barge_in_check_ms: int = Field(default=150, ge=20)
    # Sentence speech: after a segment's first tts.speak, the next ones at most this often.
    speak_interval_ms: int = Field(default=1000, ge=0)
    # Bedrock prompt caching: "auto" = on for models that support it.
    prompt_cache: Literal["auto", "on", "off"] = "auto"
    # Memory: what one request may hold (tokens), tool results elided from older rounds, the
    # model that rewrites the rolling summary (None: the conversation's model).
    input_budget_tokens: int = Field(default=24_000, ge=1000)
    elide_tool_results_over_chars: int = Field(default=2000, ge=100)
    summary_model_id: str | None = None
    # How long the app may take to answer a tool call of the model (the catalog may say more per tool).
    tool_deadline_s: float = Field(default=60.0, gt=0, le=3600)
    # Speculative turns (``shared.core.speculation``): the model starts on a partial transcript that
    # stayed the same ``speculation_stable_ms``; its runner reads every ``speculation_poll_ms`` whether
    # the final confirmed or dropped it, and gives it up ``speculation_hold_ms`` after it started.
    speculation: bool = False
    speculation_stable_ms: int = Field(default=300, ge=0, le=5000)
    speculation_poll_ms: int = Field(default=50, ge=10, le=1000)
    speculation_hold_ms: int = Field(default=4000, ge=500, le=30_000)
    max_speculations_per_utterance: int = Field(default=3, ge=1, le=20)
    # Fair sharing (``shared.core.admission``): a partial transcript with new words sooner than this
    # after the last one kept is dropped; events other than partials beyond this many a second in
    # one session are answered ``rate_limited`` (without ``seq``: send again).
    min_partial_interval_ms: int = Field(default=150, ge=0, le=5000)
    max_events_per_second: int = Field(default=50, ge=1)
    # "Still running …" (``shared.core.progress``): a foreground call unanswered this long gets one
    # spoken line, then at most one every progress_every_ms; 0 turns it off.
    progress_after_ms: int = Field(default=3000, ge=0, le=600_000)
    progress_every_ms: int = Field(default=10_000, ge=2000, le=600_000)
    # The model's list prices (CONDUCTOR_PRICES, JSON: input, output, cache_write, cache_read in
    # US dollars per million tokens, and as_of, the day they were read; cdk.json's bedrock.prices):
    # each turn's estimated cost. None: tokens only.
    prices: Prices | None = None
    # A person's spend a day (US dollars at ``prices``, UTC days): past it a turn is not started. 0: no ceiling.
    daily_budget_usd: float = Field(default=0.0, ge=0)

    @field_validator("prices", mode="before")
    @classmethod
    def _prices_from_json(cls, value: object) -> object:
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, dict):
            return Prices(
                input=float(value["input"]),
                output=float(value["output"]),
                cache_write=float(value["cache_write"]),
                cache_read=float(value["cache_read"]),
                as_of=str(value.get("as_of", "")),
            )
        return value

    @property
    def inference(self) -> Inference:
        """How a turn's request asks the model to answer."""
        return Inference(
            max_tokens=self.max_tokens, effort=self.effort, thinking=self.thinking, temperature=self.temperature
        )

    @property
    def history_read_chars(self) -> int:
        """How much history text is worth reading for one request: the budget at 8 characters
        per token (more than any model's measured ratio)."""
        return self.input_budget_tokens * 8

    @cached_property
    def speculating(self) -> SpeculationSettings:
        return SpeculationSettings(
            enabled=self.speculation,
            stable_s=self.speculation_stable_ms / 1000,
            max_per_utterance=self.max_speculations_per_utterance,
            hold_s=self.speculation_hold_ms / 1000,
            min_interval_s=self.min_partial_interval_ms / 1000,
        )

    @cached_property
    def core(self) -> CoreSettings:
        return CoreSettings(
            catalog_names=frozenset(tool.name for tool in self.catalog),
            max_tool_rounds=self.max_tool_rounds,
            max_turns_per_minute=self.max_turns_per_minute,
            max_tool_result_chars=self.max_tool_result_chars,
            stream_start_timeout_s=self.stream_start_timeout_s,
            tool_deadline_s=self.tool_deadline_s,
            tool_deadlines=tuple((tool.name, tool.deadline_s) for tool in self.catalog if tool.deadline_s),
            changing_tools=frozenset(tool.name for tool in self.catalog if tool.effects == "changes"),
            background_tools=frozenset(tool.name for tool in self.catalog if tool.background),
            progress_after_s=self.progress_after_ms / 1000,
            progress_every_s=self.progress_every_ms / 1000,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        names = {
            "table_name": "CONDUCTOR_TABLE",
            "model_id": "BEDROCK_MODEL_ID",
            "bedrock_region": "BEDROCK_REGION",
            "max_tokens": "BEDROCK_MAX_TOKENS",
            "temperature": "BEDROCK_TEMPERATURE",
            "effort": "BEDROCK_EFFORT",
            "thinking": "BEDROCK_THINKING",
            "bedrock_max_attempts": "BEDROCK_MAX_ATTEMPTS",
            "max_tool_rounds": "CONDUCTOR_MAX_TOOL_ROUNDS",
            "history_window": "CONDUCTOR_HISTORY_WINDOW",
            "session_ttl_seconds": "CONDUCTOR_SESSION_TTL_SECONDS",
            "history_ttl_seconds": "CONDUCTOR_HISTORY_TTL_SECONDS",
            "ended_retention_seconds": "CONDUCTOR_ENDED_RETENTION_SECONDS",
            "turn_reserve_ms": "CONDUCTOR_TURN_RESERVE_MS",
            "require_principal": "CONDUCTOR_REQUIRE_PRINCIPAL",
            "system_prompt": "CONDUCTOR_SYSTEM_PROMPT",
            "max_frame_bytes": "CONDUCTOR_MAX_FRAME_BYTES",
            "max_transcript_chars": "CONDUCTOR_MAX_TRANSCRIPT_CHARS",
            "max_turns_per_minute": "CONDUCTOR_MAX_TURNS_PER_MINUTE",
            "stream_idle_timeout_s": "CONDUCTOR_STREAM_IDLE_TIMEOUT_S",
            "outbox_ttl_seconds": "CONDUCTOR_OUTBOX_TTL_SECONDS",
            "max_tool_result_chars": "CONDUCTOR_MAX_TOOL_RESULT_CHARS",
            "turn_function": "CONDUCTOR_TURN_FUNCTION",
            "stream_start_timeout_s": "CONDUCTOR_STREAM_START_TIMEOUT_S",
            "partial_flush_ms": "CONDUCTOR_PARTIAL_FLUSH_MS",
            "partial_growth": "CONDUCTOR_PARTIAL_GROWTH",
            "stop_check_ms": "CONDUCTOR_STOP_CHECK_MS",
            "barge_in_check_ms": "CONDUCTOR_BARGE_IN_CHECK_MS",
            "speak_interval_ms": "CONDUCTOR_SPEAK_INTERVAL_MS",
            "prompt_cache": "BEDROCK_PROMPT_CACHE",
            "tool_deadline_s": "CONDUCTOR_TOOL_DEADLINE_S",
            "input_budget_tokens": "CONDUCTOR_INPUT_BUDGET_TOKENS",
            "elide_tool_results_over_chars": "CONDUCTOR_ELIDE_TOOL_RESULTS_OVER_CHARS",
            "summary_model_id": "CONDUCTOR_SUMMARY_MODEL_ID",
            "speculation": "CONDUCTOR_SPECULATION",
            "speculation_stable_ms": "CONDUCTOR_SPECULATION_STABLE_MS",
            "speculation_poll_ms": "CONDUCTOR_SPECULATION_POLL_MS",
            "speculation_hold_ms": "CONDUCTOR_SPECULATION_HOLD_MS",
            "max_speculations_per_utterance": "CONDUCTOR_MAX_SPECULATIONS_PER_UTTERANCE",
            "min_partial_interval_ms": "CONDUCTOR_MIN_PARTIAL_INTERVAL_MS",
            "max_events_per_second": "CONDUCTOR_MAX_EVENTS_PER_SECOND",
            "progress_after_ms": "CONDUCTOR_PROGRESS_AFTER_MS",
            "progress_every_ms": "CONDUCTOR_PROGRESS_EVERY_MS",
            "prices": "CONDUCTOR_PRICES",
            "daily_budget_usd": "CONDUCTOR_DAILY_BUDGET_USD",
            "memory_id": "CONDUCTOR_MEMORY_ID",
            "mcp_foreground_s": "CONDUCTOR_MCP_FOREGROUND_S",
        }
        values: dict[str, object] = {field: env[var] for field, var in names.items() if env.get(var)}
        catalog_path = env.get("CONDUCTOR_TOOL_CATALOG")
        if catalog_path:
            values["catalog"] = json.loads(Path(catalog_path).read_text(encoding="utf-8"))
        return cls.model_validate(values)

    @model_validator(mode="after")
    def _memory_tools_offered(self) -> Settings:
        """With a memory, the model's catalog holds the memory tools (answered by the conductor)."""
        if self.memory_id and not any(tool.name in MEMORY_TOOL_NAMES for tool in self.catalog):
            object.__setattr__(self, "catalog", [*self.catalog, *MEMORY_TOOLS])
        return self
