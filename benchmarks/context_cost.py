"""What a device's workspace context costs each turn, measured on the local stack.

    python benchmarks/context_cost.py [--turns N] [--stage prod|dev] [--cache-min TOKENS] [--pace SPEC]

Two sessions on one local stack, each a phone (voice, display) and a desktop companion (tools)
joined to it over real WebSockets; the phone speaks the same growing conversation in both, turn by
turn in alternation. In one the companion sends nothing; in the other it first sends a typical
``workspaceContext`` (``COMPANION_CONTEXT``: workspace, open file with cursor, a 20-line
selection, branch, 5 changed files, 3 diagnostics, 1 running task), which the conductor keeps and
adds to every model request as a ``<context kind="workspace">`` block after the cached
prefix.

The model is the stage's (``cdk.json``: its id, maxTokens, effort, thinking and list prices, so
each ``turnUsage`` is priced as that stage prices it), answered by the offline brain at a voice
answer's length (``benchmarks.spoken_brain``: the history grows as a real conversation's does) and
the paced model's rate, with prompt caching on. The local Bedrock endpoint caches as Bedrock does
(``conductor_local.bedrock.cache``), at the model's own minimum in its estimated tokens
(``benchmarks.token_calibration``) unless ``--cache-min`` says otherwise. A throwaway session
first pays the lazy imports and warms the prefix every session shares (tools and system prompt),
as other people's sessions keep it warm when deployed. Each session's first words name its person
(names of one length), so no two sessions share a history prefix in the cache, as two people's
never do.

Per turn: input, cache read and cache write tokens and the estimated cost as the conductor reported
them (``turnUsage``, from the usage Bedrock's metadata gave), the time to the first
``assistantSpeechPartial`` as the phone saw it and the conductor's overhead before it (the model's
own wait left out: the paced model waits the same before its first token whatever the input, so
the block's prefill time is not in these figures); and the block itself as the requests carried
it (characters and the endpoint's token estimate, characters / 4 of its JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import token_calibration as calibration
from benchmarks.bench_stack import Bench, bench_stack
from benchmarks.figures import percentile
from benchmarks.load import TURN_TIMEOUT_S, TimedClient
from benchmarks.measured_turn import measured_turn
from benchmarks.report import cell
from benchmarks.spoken_brain import SpokenBrain
from conductor_local.bedrock.offline_brain import ModelPace
from shared.core.workspace_context import CONTEXT_OPEN
from shared.wire.model_rules import rules_for
from shared.wire.protocol import TurnUsage
from shared.wire.workspace import WorkspaceContext
from voiceide_client.companion.session import CompanionClient
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

PHONE = {"id": "phone", "name": "Phone", "roles": ["voice", "display"]}
DESK = {"id": "desk", "name": "Desk", "roles": ["tools"]}
WITHOUT, WITH = "without context", "with context"
FLOWS = (WITHOUT, WITH)
DEFAULT_TURNS = 8
QUICK_TURNS = 5
DEFAULT_STAGE = "prod"
CONTEXT_PREFIX = CONTEXT_OPEN.split("{", 1)[0]
STORED_WAIT_S = 5.0
PEOPLE = {"warm-up": "Eve", WITHOUT: "Ann", WITH: "Bob"}
"""Who speaks in each session (one length: the same tokens, another history prefix)."""

SELECTION = """\
export class UserRepository {
  constructor(private readonly db: Database, private readonly cache: Cache<User>) {}

  async getUserById(id: string): Promise<User | null> {
    const cached = this.cache.get(id);
    if (cached) {
      return cached;
    }
    const row = await this.db.query<UserRow>(
      "SELECT id, email, name, created_at FROM users WHERE id = $1",
      [Number(id)],
    );
    if (row.length === 0) {
      return null;
    }
    const user = toUser(row[0]);
    this.cache.set(user.id, user);
    return user;
  }
}"""

COMPANION_CONTEXT = WorkspaceContext.model_validate(
    {
        "workspace": "shop-api",
        "openFile": {"path": "src/users/repository.ts", "language": "typescript", "cursorLine": 42},
        "selection": {"path": "src/users/repository.ts", "startLine": 31, "endLine": 50, "text": SELECTION},
        "branch": "fix/user-lookup",
        "changedFiles": [
            "src/users/repository.ts",
            "src/users/service.ts",
            "src/users/routes.ts",
            "test/users/repository.test.ts",
            "package.json",
        ],
        "diagnostics": [
            {
                "path": "src/users/repository.ts",
                "line": 41,
                "severity": "error",
                "message": "Argument of type 'number' is not assignable to parameter of type 'string'.",
            },
            {
                "path": "src/users/service.ts",
                "line": 18,
                "severity": "warning",
                "message": "'logger' is declared but its value is never read.",
            },
            {
                "path": "test/users/repository.test.ts",
                "line": 7,
                "severity": "error",
                "message": "Cannot find name 'mockDatabase'.",
            },
        ],
        "runningTasks": ["npm test -- --watch users"],
    }
)
"""A companion's context as it is while the person works on a bug: every field a desktop fills."""

CONVERSATION = (
    "why does get user by id return null for a user I just created",
    "where does the id get turned into a number",
    "is the users table keyed by a string or by an integer",
    "what would break if the repository took the id as a string",
    "show me where the service calls the repository",
    "are the routes passing the id straight from the request",
    "which of the tests cover the cache in the repository",
    "what does the warning about the logger mean in the service",
    "how would you write a test for an id with leading zeros",
    "is it safe to merge this branch once the tests pass",
)
"""What the person says, one line a turn: a conversation about the open file that grows."""


def said(person: str, turn: int) -> str:
    """The person's words at ``turn`` (from 0): the first names them."""
    line = CONVERSATION[turn % len(CONVERSATION)]
    return f"hi, this is {person}. {line}" if turn == 0 else line


# ---- measured ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextTurn:
    """One turn of one flow, as measured."""

    requests: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float | None
    first_partial_ms: float | None
    overhead_ms: float | None
    block_chars: int
    """Characters of every context block the turn's requests carried."""
    block_tokens: int
    """The endpoint's estimate of those blocks (characters / 4 of each block's JSON)."""
    endpoint_input_tokens: int
    """Input tokens as the local Bedrock endpoint reported them in the streams' metadata."""
    completed: bool


@dataclass
class ContextCost:
    stage: str
    model_id: str
    cache_min_tokens: int
    """The endpoint's caching minimum, in its estimated tokens."""
    pace: ModelPace | None
    turns: dict[str, list[ContextTurn]] = field(default_factory=dict)
    block: str = ""
    """The workspace block as the model got it (the last request of the flow with context)."""

    def mean(self, flow: str, pick: Any) -> float | None:
        values = [v for v in map(pick, self.turns.get(flow, [])) if v is not None]
        return statistics.fmean(values) if values else None

    def p(self, flow: str, pick: Any, q: float) -> float | None:
        values = [v for v in map(pick, self.turns.get(flow, [])) if v is not None]
        return percentile(values, q) if values else None


class RequestBlocks:
    """The context blocks of every model request, recorded as the local Bedrock endpoint gets it
    (wrapping its responder, as ``PrefixMeter`` does)."""

    def __init__(self, stack: Any) -> None:
        self.seen: list[list[str]] = []
        self._lock = threading.Lock()
        responder = stack.bedrock_server.responder

        def recorded(model_id: str, body: dict[str, Any]) -> Any:
            messages = body.get("messages") or []
            newest = messages[-1].get("content", []) if messages else []
            blocks = [
                b["text"] for b in newest if isinstance(b, dict) and str(b.get("text", "")).startswith(CONTEXT_PREFIX)
            ]
            with self._lock:
                self.seen.append(blocks)
            return responder(model_id, body)

        stack.bedrock_server.responder = recorded

    def mark(self) -> int:
        with self._lock:
            return len(self.seen)

    def since(self, mark: int) -> list[list[str]]:
        with self._lock:
            return list(self.seen[mark:])


def block_tokens(text: str) -> int:
    """The endpoint's estimate of one text block: characters / 4 of its compact JSON."""
    return math.ceil(len(json.dumps({"text": text}, separators=(",", ":"), ensure_ascii=False)) / 4)


class DeviceClient(TimedClient):
    """``TimedClient`` as one device of a shared session (the phone)."""

    def __init__(self, url: str, session_id: str, device: dict[str, Any]) -> None:
        self.arrivals = []
        self.client = ConductorClient(
            url,
            session_id=session_id,
            device=device,
            capabilities=("sentenceSpeech",),
            backoff=scaled_backoff(0.01),
            on_event=self._on_event,
        )


def stage_env(stage: str) -> tuple[str, dict[str, str]]:
    """The stage's model id and the stack's environment for it: its model, request fields and list
    prices, prompt caching on."""
    from infra.config import read_cdk_json_context, select_stage

    bedrock = select_stage(read_cdk_json_context().get("stages"), stage).bedrock
    env = {
        "BEDROCK_MODEL_ID": bedrock.model_id,
        "BEDROCK_MAX_TOKENS": str(bedrock.max_tokens),
        "BEDROCK_EFFORT": bedrock.effort,
        "BEDROCK_THINKING": bedrock.thinking,
        "BEDROCK_PROMPT_CACHE": "on",
    }
    if bedrock.prices is not None:
        env["CONDUCTOR_PRICES"] = bedrock.prices.model_dump_json()
    return bedrock.model_id, env


def model_cache_minimum(model_id: str) -> int:
    """The model's caching minimum in the endpoint's estimated tokens (where the model would cache)."""
    minimum = rules_for(model_id).cache_min_tokens or 0
    return calibration.cache_minimum_in_estimates(minimum) if calibration.applies_to(model_id) else minimum


async def _stored(session_id: str, device_id: str) -> None:
    """Wait until the session's state keeps the device's context (``workspaceContext`` posts nothing)."""
    from lambdas import runtime

    deadline = time.monotonic() + STORED_WAIT_S
    while time.monotonic() < deadline:
        state = await asyncio.to_thread(runtime.store().load, session_id)
        if state is not None and device_id in state.workspace:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"the companion's context was not kept within {STORED_WAIT_S} s")


class _Session:
    """A phone and a companion on one session; the companion sends ``context`` once joined."""

    def __init__(self, bench: Bench, context: WorkspaceContext | None) -> None:
        self.bench = bench
        self.context = context
        self.session_id = str(uuid.uuid4())
        url = bench.stack.ws_url
        self.phone = DeviceClient(url, self.session_id, PHONE)
        self.desk = CompanionClient(url, self.session_id, device=DESK, capabilities=(), backoff=scaled_backoff(0.01))

    async def open(self) -> None:
        await self.phone.client.connect()
        await self.phone.client.wait_for(lambda e: e.kind_name == "sessionReady", 5)
        await self.desk.connect()
        await self.desk.wait_for(lambda e: e.kind_name == "sessionReady", 5)
        if self.context is not None:
            assert await self.desk.send_workspace(self.context)
            await _stored(self.session_id, DESK["id"])

    async def close(self) -> None:
        for client in (self.desk, self.phone.client):
            await client.close()

    async def turn(self, text: str, blocks: RequestBlocks) -> tuple[ContextTurn, list[str]]:
        usages = len(self.phone.client.usages)
        mark = blocks.mark()
        figures = await measured_turn(self.bench, self.phone, text)
        await self.phone.client.wait_until(lambda: len(self.phone.client.usages) > usages, TURN_TIMEOUT_S)
        usage: TurnUsage = self.phone.client.usages[usages]
        carried = [block for request in blocks.since(mark) for block in request]
        turn = ContextTurn(
            requests=usage.requests,
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
            first_partial_ms=figures.first_partial_ms,
            overhead_ms=figures.overhead_ms,
            block_chars=sum(len(block) for block in carried),
            block_tokens=sum(block_tokens(block) for block in carried),
            endpoint_input_tokens=sum(s.usage.get("inputTokens", 0) for s in figures.streams),
            completed=figures.completed and figures.final_complete,
        )
        return turn, carried


async def _flows(bench: Bench, turns: int, blocks: RequestBlocks, cost: ContextCost) -> None:
    warm = _Session(bench, COMPANION_CONTEXT)  # lazy imports; the prefix every session shares
    await warm.open()
    await warm.turn(said(PEOPLE["warm-up"], 0), blocks)
    await warm.close()
    sessions = {WITHOUT: _Session(bench, None), WITH: _Session(bench, COMPANION_CONTEXT)}
    for session in sessions.values():
        await session.open()
    try:
        for n in range(turns):
            for flow, session in sessions.items():  # in alternation: both see the same stack's load
                turn, carried = await session.turn(said(PEOPLE[flow], n), blocks)
                cost.turns.setdefault(flow, []).append(turn)
                if carried:
                    cost.block = carried[-1]
    finally:
        for session in sessions.values():
            await session.close()


def context_cost(
    pace: ModelPace | None = None,
    turns: int = DEFAULT_TURNS,
    *,
    stage: str = DEFAULT_STAGE,
    cache_min_tokens: int | None = None,
) -> ContextCost:
    """Measure ``turns`` turns without and with the companion's context on ``stage``'s model
    (``pace`` None: the paced model's defaults); ``cache_min_tokens`` None: the model's own minimum."""
    pace = pace or ModelPace()
    model_id, env = stage_env(stage)
    minimum = model_cache_minimum(model_id) if cache_min_tokens is None else cache_min_tokens
    cost = ContextCost(stage=stage, model_id=model_id, cache_min_tokens=minimum, pace=pace)
    with bench_stack(pace, False, env, SpokenBrain(pace)) as bench:
        assert bench.stack.bedrock_server is not None
        bench.stack.bedrock_server.prompt_cache.min_tokens = minimum
        bench.stack.bedrock_server.prompt_cache.clear()
        blocks = RequestBlocks(bench.stack)
        asyncio.run(_flows(bench, max(1, turns), blocks, cost))
    return cost


# ---- report ------------------------------------------------------------------------------------


def report_context_cost(cost: ContextCost, out: TextIO) -> None:
    pace = cost.pace or ModelPace()
    turns = len(cost.turns.get(WITH, []))
    print(
        f"\n== the companion's workspace context, per turn: {turns} turns of a growing conversation, "
        f"{cost.stage} model {cost.model_id}, prompt caching on ==",
        file=out,
    )
    print(
        f"  paced model (first token {pace.first_token_s * 1000:.0f} ms, {pace.tokens_per_s:g} tokens/s); "
        f"the endpoint caches from {cost.cache_min_tokens} estimated tokens a checkpoint (the model's minimum)",
        file=out,
    )
    block_chars = len(cost.block)
    lines = cost.block.count("\n") + 1 if cost.block else 0
    print(
        f"  the block: {block_chars} characters, {lines} lines, ~{block_tokens(cost.block) if cost.block else 0} "
        "tokens (characters / 4 of its JSON; Claude 5.x counts about "
        f"{calibration.INPUT_RATIO:.2f}x that for prose and JSON)",
        file=out,
    )
    print(f"  per turn (mean) {'':<26}{WITHOUT:>18}{WITH:>18}{'difference':>14}", file=out)
    rows: list[tuple[str, Any, str]] = [
        ("model requests", lambda t: t.requests, ".1f"),
        ("input tokens (uncached)", lambda t: t.input_tokens, ".0f"),
        ("cache read tokens", lambda t: t.cache_read_tokens, ".0f"),
        ("cache write tokens", lambda t: t.cache_write_tokens, ".0f"),
        ("output tokens", lambda t: t.output_tokens, ".0f"),
        ("context block tokens (est.)", lambda t: t.block_tokens, ".0f"),
        ("cost per 1,000 turns (USD)", lambda t: None if t.cost_usd is None else t.cost_usd * 1000, ".4f"),
    ]
    for label, pick, spec in rows:
        without, with_ = cost.mean(WITHOUT, pick), cost.mean(WITH, pick)
        diff = None if without is None or with_ is None else with_ - without
        print(f"  {label:<42}{cell(without, spec):>18}{cell(with_, spec):>18}{cell(diff, '+' + spec):>14}", file=out)
    for label, pick in (
        ("first partial", lambda t: t.first_partial_ms),
        ("overhead before it", lambda t: t.overhead_ms),
    ):
        for q in (50, 99):
            without, with_ = cost.p(WITHOUT, pick, q), cost.p(WITH, pick, q)
            diff = None if without is None or with_ is None else with_ - without
            name = f"{label} p{q} (ms)"
            print(f"  {name:<42}{cell(without, '.0f'):>18}{cell(with_, '.0f'):>18}{cell(diff, '+.0f'):>14}", file=out)
    columns = f"{'input':>8}{'read':>8}{'write':>8}{'1st partial':>13}"
    print(f"  by turn {'turn':>13} | {WITHOUT + ':':<37}| {WITH + ':'}", file=out)
    print(f"  {'':<21} | {columns}  | {columns}", file=out)
    for n, pair in enumerate(zip(cost.turns.get(WITHOUT, []), cost.turns.get(WITH, []), strict=False), 1):
        cells = [
            f"{t.input_tokens:>8}{t.cache_read_tokens:>8}{t.cache_write_tokens:>8}{cell(t.first_partial_ms, '.0f'):>13}"
            for t in pair
        ]
        print(f"  {n:>20}  | {cells[0]}  | {cells[1]}", file=out)
    lost = sum(not t.completed for flow in FLOWS for t in cost.turns.get(flow, []))
    print(
        "  tokens and cost from each turn's turnUsage (the stage's list prices); the block rides after every\n"
        f"  cachePoint, so it is paid as uncached input on every request; turns not completed: {lost}",
        file=out,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS, help="turns per flow")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns per flow")
    parser.add_argument("--stage", default=DEFAULT_STAGE, help="the cdk.json stage whose model answers")
    parser.add_argument("--cache-min", type=int, help="the endpoint's caching minimum (estimated tokens)")
    parser.add_argument(
        "--pace",
        default=os.environ.get("CONDUCTOR_LOCAL_MODEL_PACE", "paced"),
        help="paced or <first token ms>:<tokens per s>",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    pace = ModelPace.parse(args.pace) or ModelPace()
    turns = QUICK_TURNS if args.quick else args.turns
    report_context_cost(context_cost(pace, turns, stage=args.stage, cache_min_tokens=args.cache_min), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
