"""What the model's first token waits for, per prompt-cache placement: input read from the cache,
written, left uncached, the modeled time to first token and the cost of a turn.

    python benchmarks/first_token_levers.py [--quick]

For each stage of cdk.json (its model id, list prices) and sessions of 5, 20 and 60 turns, a voice
conversation is played turn after turn: the person asks (a line of ``benchmarks.context_cost``'s
conversation, with its workspace context), the model answers at a voice answer's length
(``benchmarks.spoken_brain``), and every third turn it first opens a file (a preamble and a
``tool_call``, the file's text as the result, then a read-back). Each model request is built by the
conductor's request builder (``shared.adapters.brain.BedrockBrain.request``) from the history window
the conductor sends: the stored window read (the newest ``history_window`` messages from a plain user
message) cut by the conductor's own memory (``shared.flows.memory_keeper.MemoryKeeper.fit``: the
window's start kept while it fits, then stepped forward by about half, and the rolling summary in
the system prompt rewritten after a turn that stepped), accounted by the local Bedrock's prompt cache
(``conductor_local.bedrock.cache``, at the model's minimum in its estimated tokens, 5 minutes' TTL,
20-block lookback) on a clock: turns 20 s apart, a 6-minute pause every 12 turns (assumed: the
person reads or edits code).

Token counts are Claude's (``benchmarks.token_calibration``); the modeled time to first token is the
stage's published p50 plus the prefill of the request's uncached and cached input
(``benchmarks.aws_latencies.Prefill``); the cost counts every request of the turn at the stage's
prices (``benchmarks.costs``; a 1-hour cache write at twice the input price, Anthropic's published
multiplier).

Placements compared:

* ``off``: no cachePoint;
* ``today``: the request builder's own (after the tools, after the system prompt, at the end of the
  message before the newest);
* ``newest text``: today's plus one at the end of the newest message's own blocks, before the
  context blocks: the next request reads everything but the reply and the new message;
* ``today, 1h``: today's points with a one-hour TTL;
* ``sliding (before)``: today's points on the window the conductor sent before its window stepped:
  the newest part that fits, dropping the oldest turn every turn once the history is longer than the
  window, and the summary rewritten after every such turn: no request's prefix is the one before's.

``--big-files``: the opened file is 8 KB instead of 1.5 KB, over the memory's elision threshold, so
older tool results are sent as one line: shows whether elision keeps the prefix stable.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import aws_latencies as aws
from benchmarks import token_calibration as calibration
from benchmarks.context_cost import COMPANION_CONTEXT, CONVERSATION
from benchmarks.costs import PRICES
from benchmarks.spoken_brain import ANSWER_SENTENCES, PREAMBLE, lengthened
from conductor_local.bedrock.cache import CacheUsage, PromptCache
from conductor_local.bedrock.validation import cache_point_problem, converse_validation_error, estimate_input_tokens
from shared.adapters.brain import CACHE_POINT, MAX_CACHE_POINTS, BedrockBrain
from shared.core.memory import Budget, fit_budget, with_summary
from shared.core.messages import Message, fit_window
from shared.core.state import SessionState
from shared.core.tool_catalog import default_catalog
from shared.core.workspace_context import CONTEXT_CLOSE, CONTEXT_OPEN, render
from shared.core.wrapper import wrapper_tool_spec
from shared.flows.commit import NullMetrics
from shared.flows.config import DEFAULT_SYSTEM_PROMPT, Settings
from shared.flows.memory_keeper import MemoryKeeper
from shared.wire.model_rules import Inference, rules_for

HISTORY_TURNS = (5, 20, 60)
QUICK_HISTORY_TURNS = (5, 20)
TURN_GAP_S = 20.0
PAUSE_EVERY_TURNS = 12
PAUSE_S = 360.0
TOOL_EVERY_TURNS = 3
ONE_HOUR_WRITE_MULTIPLIER = 2.0
"""A one-hour cache write costs twice the input price (Anthropic's prompt-caching pricing; a 5-minute
write 1.25 times, as the stages' ``cache_write`` prices say)."""
ANSWER_WORDS = 45
READBACK_WORDS = 25
SHORTER_PROMPT_SHARE = 0.5

OFF, TODAY, NEWEST_TEXT, ONE_HOUR = "off", "today", "newest text", "today, 1h"
SLIDING = "sliding (before)"
PLACEMENTS = (OFF, TODAY, NEWEST_TEXT, ONE_HOUR, SLIDING)

FILE_TEXT = (
    "export async function createUser(db: Database, input: NewUser): Promise<User> {\n"
    "  const id = await db.nextId('users');\n"
    "  await db.query('INSERT INTO users (id, email, name) VALUES ($1, $2, $3)', [id, input.email, input.name]);\n"
    "  return { id: String(id), email: input.email, name: input.name, createdAt: new Date() };\n"
    "}\n"
) * 4
"""A file the model opens: about 1,500 characters (under the memory's elision threshold)."""
BIG_FILE_TEXT = FILE_TEXT * 5 + "\n".join(f"// line {n}" for n in range(60))
"""``--big-files``: about 8 KB, over the elision threshold."""


@dataclass(frozen=True)
class StageModel:
    stage: str
    model_id: str
    foundation: str
    latency: aws.ModelLatency

    def price(self, kind: str) -> float:
        return PRICES.get(f"{self.foundation}:{kind}", 0.0)


def stage_models() -> list[StageModel]:
    """dev and prod as cdk.json names their models."""
    from infra.config import read_cdk_json_context, select_stage

    stages = read_cdk_json_context().get("stages")
    found = []
    for name in ("dev", "prod"):
        bedrock = select_stage(stages, name).bedrock
        found.append(StageModel(name, bedrock.model_id, bedrock.foundation_model_id, aws.MODELS[name]))
    return found


# ---- one request's figures ---------------------------------------------------------------------


@dataclass(frozen=True)
class Counted:
    """One request in Claude's tokens."""

    uncached: float
    """Read by the model without the cache: written to it or not."""
    read: float
    written: float
    written_1h: float
    output: float

    @property
    def input(self) -> float:
        return self.uncached + self.read


def counted(usage: CacheUsage, model_id: str, *, tools: bool, output_chars: int, tool_uses: int) -> Counted:
    """``usage`` (the endpoint's estimates) as Claude counts it."""
    written = usage.write
    tokens = calibration.counted(
        calibration.Usage(
            input_tokens=usage.input_tokens,
            tool_requests=1.0 if tools else 0.0,
            cache_read_tokens=usage.read,
            cache_write_tokens=written,
            reading_requests=1.0 if tools and usage.read else 0.0,
            writing_requests=1.0 if tools and written and not usage.read else 0.0,
            text_chars=output_chars,
            tool_uses=tool_uses,
        ),
        model_id,
    )
    one_hour = tokens.cache_write_tokens * usage.written.get("1h", 0) / written if written else 0.0
    return Counted(
        tokens.input_tokens + tokens.cache_write_tokens,
        tokens.cache_read_tokens,
        tokens.cache_write_tokens,
        one_hour,
        tokens.output_tokens,
    )


def cost_usd(request: Counted, model: StageModel) -> float:
    five_minute = request.written - request.written_1h
    fresh = request.uncached - request.written
    return (
        fresh * model.price("input")
        + request.read * model.price("cache_read")
        + five_minute * model.price("cache_write")
        + request.written_1h * model.price("input") * ONE_HOUR_WRITE_MULTIPLIER
        + request.output * model.price("output")
    )


# ---- placements ----------------------------------------------------------------------------------


def _offline_client() -> Any:
    """What ``BedrockBrain`` needs of a client to build requests (it registers one event)."""
    return SimpleNamespace(meta=SimpleNamespace(events=SimpleNamespace(register=lambda *_, **__: None)))


def brain_for(model_id: str, *, prompt_cache: bool, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> BedrockBrain:
    settings = Settings()
    return BedrockBrain(
        _offline_client(),
        model_id=model_id,
        system_prompt=system_prompt,
        tool_spec=wrapper_tool_spec(default_catalog()),
        inference=Inference(max_tokens=1024),
        prompt_cache=prompt_cache,
        history_window=settings.history_window,
    )


def _cache_points(request: dict[str, Any]) -> int:
    sections = [request["toolConfig"]["tools"], request["system"], *(m["content"] for m in request["messages"])]
    return sum(1 for blocks in sections for block in blocks if "cachePoint" in block)


def with_newest_text_point(
    brain: BedrockBrain, messages: list[Message], summary: str | None, context: Sequence[str]
) -> dict[str, Any]:
    """Today's request with one more cachePoint at the end of the newest message's own blocks (before
    its context blocks), when the request builder placed a history checkpoint (the window leaves room
    for the next request to start the same) and a fourth point is allowed."""
    request = brain.request(messages, summary=summary)
    wired = request["messages"]
    newest = wired[-1]
    content = newest["content"]
    history_point = any("cachePoint" in block for message in wired[:-1] for block in message["content"])
    allowed = _cache_points(request) < MAX_CACHE_POINTS and "reasoningContent" not in content[-1]
    if history_point and allowed:
        content = [*content, CACHE_POINT]
    content = [*content, *({"text": text} for text in context)]
    return {**request, "messages": [*wired[:-1], {**newest, "content": content}]}


def with_ttl(request: dict[str, Any], ttl: str) -> dict[str, Any]:
    """``request`` with every cachePoint given ``ttl``."""

    def timed(blocks: list[Any]) -> list[Any]:
        return [{"cachePoint": {"type": "default", "ttl": ttl}} if "cachePoint" in b else b for b in blocks]

    return {
        **request,
        "toolConfig": {**request["toolConfig"], "tools": timed(request["toolConfig"]["tools"])},
        "system": timed(request["system"]),
        "messages": [{**m, "content": timed(m["content"])} for m in request["messages"]],
    }


Builder = Callable[[list[Message], str | None, Sequence[str]], dict[str, Any]]


def builder(placement: str, model_id: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> Builder:
    brain = brain_for(model_id, prompt_cache=placement != OFF, system_prompt=system_prompt)
    if placement == NEWEST_TEXT:
        return lambda messages, summary, context: with_newest_text_point(brain, messages, summary, context)
    if placement == SLIDING:
        placement = TODAY
    if placement == ONE_HOUR:
        return lambda messages, summary, context: with_ttl(
            brain.request(messages, summary=summary, context=context), "1h"
        )
    return lambda messages, summary, context: brain.request(messages, summary=summary, context=context)


# ---- the conversation ------------------------------------------------------------------------------


def workspace_block() -> str:
    return f"{CONTEXT_OPEN.format(kind='workspace')}\n{render(COMPANION_CONTEXT)}\n{CONTEXT_CLOSE}"


def answer(words: int, turn: int) -> str:
    opening = ANSWER_SENTENCES[turn % len(ANSWER_SENTENCES)]
    return lengthened(opening, words)


def summary_text(version: int) -> str:
    """A rolling summary of about 200 words (the summary prompt's bound), another each rewrite."""
    words = (
        "The developer is fixing why getUserById returns null for a new user in src/users/repository.ts: "
        "ids are strings in the API and numbers in the table, and the cache keys them as strings. "
    )
    return f"(rewrite {version}) " + (words * 6).strip()


@dataclass
class Session:
    """One person's conversation, its stored history, its summary and the clock."""

    sliding: bool = False
    """The window as the conductor cut it before it stepped (``sliding (before)``)."""
    stored: list[Message] = field(default_factory=list)
    summary: str | None = None
    summary_until: int = 0
    summaries: int = 0
    now: float = 0.0


@dataclass
class TurnFigures:
    first: Counted
    """The request whose first token the person waits for (the turn's first)."""
    requests: list[Counted]
    ttft_ms: float


@dataclass
class Run:
    stage: str
    placement: str
    turns: int
    figures: list[TurnFigures]

    def mean(self, pick: Callable[[TurnFigures], float]) -> float:
        return statistics.fmean(pick(turn) for turn in self.figures)


def memory_keeper(system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> MemoryKeeper:
    """The conductor's memory, for its ``fit`` alone (it reads and writes nothing there)."""
    settings = Settings(system_prompt=system_prompt)
    unused: Any = None
    return MemoryKeeper(
        store=unused, summarizer=unused, committer=unused, settings=settings, logger=unused, metrics=NullMetrics()
    )


def _window(session: Session, keeper: MemoryKeeper, fixed_chars: int) -> tuple[list[Message], int]:
    """The messages the conductor sends (the stored window read, cut by its memory) and the index of
    the first one in the stored history."""
    settings = keeper.settings
    stored = session.stored
    windowed = fit_window(stored, settings.history_window) or stored  # the store's read
    first = len(stored) - len(windowed)
    if not session.sliding:
        state = SessionState(
            session_id="bench",
            history_len=len(stored),
            summary=session.summary,
            summary_until=session.summary_until,
        )
        fitted = keeper.fit(state, windowed)
        return fitted.messages, fitted.fold_until
    budget = Budget(input_tokens=settings.input_budget_tokens, elide_over_chars=settings.elide_tool_results_over_chars)
    cut = fit_budget(windowed, fixed_chars=fixed_chars, budget=budget)
    if not cut.messages:
        return windowed, first
    return cut.messages, first + cut.start


def play(
    model: StageModel,
    placement: str,
    turns: int,
    *,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    file_text: str = FILE_TEXT,
) -> Run:
    """``turns`` turns of one session, every request built and accounted in order."""
    build = builder(placement, model.model_id, system_prompt)
    keeper = memory_keeper(system_prompt)
    rules = rules_for(model.model_id)
    minimum = calibration.cache_minimum_in_estimates(rules.cache_min_tokens or 0)
    session = Session(sliding=placement == SLIDING)
    cache = PromptCache(min_tokens=minimum, clock=lambda: session.now)
    tool_chars = len(json.dumps(wrapper_tool_spec(default_catalog()), separators=(",", ":")))
    context = [workspace_block()]
    figures: list[TurnFigures] = []
    for turn in range(turns):
        if turn and turn % PAUSE_EVERY_TURNS == 0:
            session.now += PAUSE_S
        session.now += TURN_GAP_S
        words = CONVERSATION[turn % len(CONVERSATION)]
        session.stored.append({"role": "user", "content": [{"text": words}]})
        fixed = len(with_summary(system_prompt, session.summary)) + tool_chars
        uses_tool = turn % TOOL_EVERY_TURNS == TOOL_EVERY_TURNS - 1
        replies: list[tuple[Message, int, int]] = []
        if uses_tool:
            tool_id = f"tooluse_{turn:04d}"
            call = {"name": "editor.openFile", "arguments": {"path": "src/users/create.ts"}}
            replies.append(
                (
                    {
                        "role": "assistant",
                        "content": [
                            {"text": PREAMBLE},
                            {"toolUse": {"toolUseId": tool_id, "name": "tool_call", "input": call}},
                        ],
                    },
                    len(PREAMBLE),
                    1,
                )
            )
            result = {"toolResult": {"toolUseId": tool_id, "content": [{"text": file_text}], "status": "success"}}
            replies.append(({"role": "user", "content": [result]}, 0, 0))
            text = answer(READBACK_WORDS, turn)
        else:
            text = answer(ANSWER_WORDS, turn)
        replies.append(({"role": "assistant", "content": [{"text": text}]}, len(text), 0))
        requests: list[Counted] = []
        for message, chars, tool_uses in replies:
            if message["role"] == "user":
                session.stored.append(message)
                continue
            window, first_index = _window(session, keeper, fixed)
            request = build(window, session.summary, context)
            problem = converse_validation_error(request) or cache_point_problem(request)
            if problem is not None:
                raise AssertionError(f"{placement}: Bedrock would refuse the request: {problem}")
            usage = cache.account(request, estimate_input_tokens(request), model.model_id)
            requests.append(counted(usage, model.model_id, tools=True, output_chars=chars, tool_uses=tool_uses))
            session.stored.append(message)
            session.now += 2.0  # the model's answer and the app's tool call
        first = requests[0]
        ttft = model.latency.first_token_p50_ms(first.uncached, first.read)
        figures.append(TurnFigures(first, requests, ttft))
        if first_index > session.summary_until:  # the turns that left the window are folded in (``due``)
            session.summaries += 1
            session.summary = summary_text(session.summaries)
            session.summary_until = first_index
    return Run(model.stage, placement, turns, figures)


# ---- the report ---------------------------------------------------------------------------------------


def _row(run: Run) -> str:
    ttfts = [turn.ttft_ms for turn in run.figures]
    cost = run.mean(lambda t: sum(cost_usd(r, _MODELS[run.stage]) for r in t.requests))
    return (
        f"  {run.turns:>5} {run.placement:<16}"
        f" {run.mean(lambda t: t.first.input):>8,.0f} {run.mean(lambda t: t.first.read):>8,.0f}"
        f" {run.mean(lambda t: t.first.written):>8,.0f} {run.mean(lambda t: t.first.uncached):>9,.0f}"
        f" {statistics.median(ttfts):>9,.0f} {ttfts[-1]:>9,.0f} {cost * 1000:>10.3f}"
    )


_MODELS: dict[str, StageModel] = {}


def prompt_lines(model: StageModel) -> list[str]:
    """The system prompt's own size and what a shorter one would save per request."""
    prompt_tokens = calibration.PROMPT_TOKENS
    saved = prompt_tokens * SHORTER_PROMPT_SHARE
    prefill = model.latency.prefill
    return [
        f"  system prompt: {prompt_tokens} tokens ({calibration.PROMPT_CHARS} characters); tool spec "
        f"{calibration.TOOL_SPEC_TOKENS} + tool-use system prompt {calibration.TOOL_USE_SYSTEM_PROMPT_TOKENS}",
        f"  half as long: {saved:.0f} tokens fewer: {saved * prefill.uncached_ms_per_token:.1f} ms off an uncached "
        f"request's first token, {saved * prefill.cached_ms_per_token:.1f} ms off a cached one, "
        f"${saved * model.price('input') * 1000:.4f} per 1,000 uncached requests",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sessions of 5 and 20 turns only")
    parser.add_argument("--big-files", action="store_true", help="8 KB files, over the elision threshold")
    args = parser.parse_args(argv)
    file_text = BIG_FILE_TEXT if args.big_files else FILE_TEXT
    lengths = QUICK_HISTORY_TURNS if args.quick else HISTORY_TURNS
    for model in stage_models():
        _MODELS[model.stage] = model
        prefill = model.latency.prefill
        print(
            f"\n{model.stage}: {model.model_id} (TTFT p50 {model.latency.first_token.p50_ms:.0f} ms at "
            f"{prefill.reference_tokens:,} input tokens; +{prefill.uncached_ms_per_token} ms per uncached token, "
            f"+{prefill.cached_ms_per_token} ms per cached; cache minimum "
            f"{rules_for(model.model_id).cache_min_tokens or 0:,})"
        )
        print(
            "  turns placement           input     read  written  uncached  TTFT p50  last turn  $/1k turns\n"
            "                          (the turn's first request, Claude tokens, mean)      (ms)      (ms)"
        )
        for turns in lengths:
            for placement in PLACEMENTS:
                print(_row(play(model, placement, turns, file_text=file_text)))
        for line in prompt_lines(model):
            print(line)
    print(
        "\nTTFT p50: the median over the session's turns of the modeled median (the stage's published p50 plus "
        "the prefill of the turn's first request); $/1k turns: every request of a turn, at the stage's prices."
    )


if __name__ == "__main__":
    main()
