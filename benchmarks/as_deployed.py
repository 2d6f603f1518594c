"""The silence a person on a phone would hear, as deployed: the local stack with AWS's latencies put
in (``benchmarks.deployed_latency``, figures and sources in ``benchmarks.aws_latencies``).

    python benchmarks/turn_latency.py --as-deployed [--quick]   (make bench-deployed)

Per stage (dev: Claude Haiku, prod: Claude Sonnet, each with its model's time to first token), with
speculation off and on, an app that speaks a request word by word (``benchmarks.speculation``'s
spoken turns, over the phone's network) and then interrupts long answers:

* end of speech (the final transcript leaving the phone) -> the first ``assistantSpeechPartial`` on
  the phone, and -> the first ``tts.speak``; p50 / p99;
* barge-in -> the model's output stops (its last delta at Bedrock), -> the last speech event reaches
  the phone, -> ``idle`` reaches the phone; p50 / p99;
* where the milliseconds to the first ``tts.speak`` go: each turn's span time-sliced among the
  injected waits (an instant shared by k waits counts 1/k to each; ``rest`` is the conductor's own
  work on loopback), averaged over the turns;

then the published anchors for a voice agent's silence, and the figures against their goals
(``benchmarks.deployed_goals``).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from typing import Any, TextIO

from benchmarks import aws_latencies as aws
from benchmarks.barge_in import _is_idle, _is_partial
from benchmarks.bench_stack import bench_stack
from benchmarks.context_cost import model_cache_minimum, stage_env
from benchmarks.deployed_goals import best_imports, measured_figures, report_goals
from benchmarks.deployed_latency import Injector, phone_link, time_sliced
from benchmarks.figures import percentile
from benchmarks.load import TURN_TIMEOUT_S, TimedClient
from benchmarks.report import cell
from benchmarks.speculation import Flow, speculation_turns
from conductor_local.bedrock.offline_brain import ModelPace
from shared.wire.protocol import ToolCall

FLOWS = (Flow("speculation off", False, 0.0), Flow("speculation on", True, 0.0))
LONG_ANSWER = "ramble 400"
BARGE_AFTER_S = 1.5
HANDLERS = {"connect": "lambdas.connect", "message": "lambdas.message", "turn": "lambdas.turn"}


@dataclass
class FlowFigures:
    stage: str
    flow: str
    first_partial_ms: list[float] = field(default_factory=list)
    first_speak_ms: list[float] = field(default_factory=list)
    budgets: list[dict[str, float]] = field(default_factory=list)
    """Per turn: ms to the first tts.speak per kind of wait."""
    model_stop_ms: list[float] = field(default_factory=list)
    last_speech_ms: list[float] = field(default_factory=list)
    idle_ms: list[float] = field(default_factory=list)
    turns: int = 0
    unanswered: int = 0
    cold_starts: int = 0


class _StackView:
    """The stack as the app reaches it: through the phone link."""

    def __init__(self, stack: Any, ws_url: str) -> None:
        self._stack = stack
        self.ws_url = ws_url

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stack, name)


def _is_speech(event: Any) -> bool:
    payload = event.payload
    return _is_partial(event) or (isinstance(payload, ToolCall) and payload.name == "tts.speak")


async def barge_ins(bench: Any, turns: int) -> list[tuple[float, float, float | None]]:
    """``turns`` long answers interrupted ``BARGE_AFTER_S`` after their first partial: per turn (model
    output after the barge-in, last speech event on the phone after it, idle on the phone) in ms."""
    timed = TimedClient(bench.stack.ws_url)
    found = []
    async with timed.client:
        for _ in range(turns):
            client = timed.client
            mark, since = bench.model.mark(), len(client.events)
            saying = asyncio.create_task(client.say(LONG_ANSWER, timeout=TURN_TIMEOUT_S))
            await client.wait_for(_is_partial, timeout=TURN_TIMEOUT_S, since=since)
            await asyncio.sleep(BARGE_AFTER_S)
            barged = time.perf_counter()
            await client.barge_in()
            await saying
            await asyncio.to_thread(bench.stack.lambda_server.wait_idle, 10.0)
            after = [(at, event) for at, event in timed.arrivals if at >= barged]
            streams = bench.model.since(mark)
            last_delta = max((s.last_delta or 0.0 for s in streams), default=0.0)
            idle = next((at for at, event in after if _is_idle(event)), None)
            last_speech = max((at for at, event in after if _is_speech(event)), default=barged)
            found.append(
                (
                    max(0.0, last_delta - barged) * 1000,
                    (last_speech - barged) * 1000,
                    None if idle is None else (idle - barged) * 1000,
                )
            )
    return found


def run_flow(
    stage: str,
    flow: Flow,
    turns: int,
    barge_turns: int,
    network: str,
    cold_rate: float,
    import_ms: dict[str, float],
    seed: int,
) -> FlowFigures:
    """One stage and flow on a stack of its own (in this, a child, process)."""
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    model = aws.MODELS[stage]
    pace = ModelPace(first_token_s=model.first_token.p50_ms / 1000, tokens_per_s=model.tokens_per_s)
    figures = FlowFigures(stage, flow.name)
    model_id, model_env = stage_env(stage)  # the stage's model, request fields and prices, caching on
    with bench_stack(pace, False, {**model_env, **flow.env}) as bench:
        # The endpoint estimates characters / 4: its cache starts where the stage's model would.
        bench.stack.bedrock_server.prompt_cache.min_tokens = model_cache_minimum(model_id)
        sampler = aws.Sampler(seed)
        injector = Injector(bench.stack, sampler, model, cold_rate=cold_rate, import_ms=import_ms).install()
        try:
            with phone_link(bench.stack.port, aws.PHONE_NETWORKS[network], sampler, injector.waits) as link:
                view = replace(bench, stack=_StackView(bench.stack, link.url))
                run = asyncio.run(speculation_turns(view, flow, turns, 1))
                barges = asyncio.run(barge_ins(view, barge_turns)) if barge_turns else []
        finally:
            injector.close()
    for turn in run.turns:
        figures.turns += 1
        if turn.first_speak_ms is None or turn.final_at is None:
            figures.unanswered += 1
            continue
        figures.first_speak_ms.append(turn.first_speak_ms)
        if turn.first_partial_ms is not None:
            figures.first_partial_ms.append(turn.first_partial_ms)
        end = turn.final_at + turn.first_speak_ms / 1000
        figures.budgets.append(time_sliced(injector.waits.between(turn.final_at, end), turn.final_at, end))
    for model_stop, last_speech, idle in barges:
        figures.model_stop_ms.append(model_stop)
        figures.last_speech_ms.append(last_speech)
        if idle is not None:
            figures.idle_ms.append(idle)
    figures.cold_starts = injector.cold_starts
    return figures


def measured_imports() -> dict[str, float]:
    """Each function's handler import, with bytecode, in a fresh interpreter (its cold start's share)."""
    from benchmarks.cold_import import import_ms

    return {function: import_ms(module, bytecode=True) for function, module in HANDLERS.items()}


def as_deployed_runs(
    turns: int, barge_turns: int, network: str, cold_rate: float, seed: int, processes: int
) -> tuple[list[FlowFigures], dict[str, float]]:
    imports = measured_imports()
    jobs = [(stage, flow) for stage in aws.MODELS for flow in FLOWS]
    with ProcessPoolExecutor(max_workers=max(1, processes), mp_context=get_context("spawn")) as pool:
        running = [
            pool.submit(
                run_flow,
                stage,
                flow,
                turns,
                barge_turns if not flow.speculation else 0,
                network,
                cold_rate,
                imports,
                seed + index,
            )
            for index, (stage, flow) in enumerate(jobs)
        ]
        return [future.result() for future in running], imports


# ---- report -------------------------------------------------------------------------------------


def _p(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 50):.0f} / {percentile(values, 99):.0f}"


def report_as_deployed(
    runs: list[FlowFigures], imports: dict[str, float], network: str, cold_rate: float, out: TextIO
) -> None:
    phone = aws.PHONE_NETWORKS[network]
    print("\n== as deployed: the local stack with AWS's latencies put in (benchmarks/aws_latencies.py) ==", file=out)
    print(
        f"  phone: {phone.name} (p50 {phone.p50_ms:.0f} ms, p99 {phone.p99_ms:.0f} ms); cold starts at "
        f"{cold_rate:.1%} of invocations (Lambda init p50 {aws.LAMBDA_INIT.p50_ms:.0f} ms + the handler's import: "
        + ", ".join(f"{name} {ms:.0f}" for name, ms in imports.items())
        + " ms)",
        file=out,
    )
    for stage, model in aws.MODELS.items():
        by_flow = {run.flow: run for run in runs if run.stage == stage}
        if not by_flow:
            continue
        flows = list(by_flow)
        print(
            f"\n  {stage}: {model.model} (time to first token p50 {model.first_token.p50_ms:.0f} ms, "
            f"p99 {model.first_token.p99_ms:.0f} ms; {model.tokens_per_s:g} tokens/s)",
            file=out,
        )
        print("    person-felt, ms p50 / p99" + " " * 18 + "".join(f"{flow:>20}" for flow in flows), file=out)
        rows = [
            ("end of speech -> first partial", "first_partial_ms"),
            ("end of speech -> first tts.speak", "first_speak_ms"),
            ("barge-in -> model output stops", "model_stop_ms"),
            ("barge-in -> last speech on the phone", "last_speech_ms"),
            ("barge-in -> idle on the phone", "idle_ms"),
        ]
        for label, name in rows:
            print(f"    {label:<44}" + "".join(f"{_p(getattr(r, name)):>20}" for r in by_flow.values()), file=out)
        counts = "; ".join(
            f"{r.flow}: {r.turns} turns, {r.unanswered} without a tts.speak, {r.cold_starts} cold starts"
            for r in by_flow.values()
        )
        print(f"    ({counts})", file=out)
        print("    where the ms to the first tts.speak go (mean per turn, time-sliced among the waits)", file=out)
        kinds = sorted(
            {kind for r in by_flow.values() for budget in r.budgets for kind in budget},
            key=lambda kind: -max(_mean(r, kind) for r in by_flow.values()),
        )
        for kind in kinds:
            label = "the conductor's own work (loopback)" if kind == "rest" else kind
            cells = "".join(f"{cell(_mean(r, kind), '.0f'):>20}" for r in by_flow.values())
            print(f"      {label:<42}{cells}", file=out)
        totals = [sum(sum(b.values()) for b in r.budgets) / max(1, len(r.budgets)) for r in by_flow.values()]
        print(f"      {'total (mean)':<42}" + "".join(f"{t:>20.0f}" for t in totals), file=out)
    print("\n  anchors (docs/performance.md, 'As deployed'):", file=out)
    for text, url in aws.ANCHORS:
        print(f"    {text} ({url})", file=out)
    print(
        "    the figures above start at the final transcript and stop at the first tts.speak: the app's "
        "endpointing before them and its voice's first audio after them come on top",
        file=out,
    )


def _mean(run: FlowFigures, kind: str) -> float:
    if not run.budgets:
        return math.nan
    return statistics.fmean(budget.get(kind, 0.0) for budget in run.budgets)


def run_as_deployed(
    out: TextIO,
    *,
    quick: bool = False,
    network: str = "4g",
    cold_rate: float = aws.COLD_START_RATE,
    seed: int = 1,
    processes: int = 2,
) -> int:
    turns, barge_turns = (6, 3) if quick else (20, 6)
    began = time.perf_counter()
    runs, imports = as_deployed_runs(turns, barge_turns, network, cold_rate, seed, processes)
    report_as_deployed(runs, imports, network, cold_rate, out)
    print(f"  ({time.perf_counter() - began:.0f} s)", file=out)
    report_goals(measured_figures(runs, best_imports()), out)
    return 0
