"""The speculative turns' figures, printed: latency per flow, where the time goes, the hit rate,
the tokens the discarded speculations spent and the cost they add (``benchmarks.speculation``
measures them)."""

from __future__ import annotations

import math
from typing import TextIO

from benchmarks.costs import TurnUsage, cost_per_1000, stages
from benchmarks.report import cell
from benchmarks.speculation import (
    FINAL_AFTER_S,
    FIRST_TOKEN_S,
    GOAL_MS,
    MAX_SESSION_TURNS,
    PACE,
    WORD_INTERVAL_S,
    FlowRun,
)


def _per_1000(value: float, turns: int) -> str:
    return cell(value * 1000 / turns if turns else None, ".0f")


def report_speculation(
    runs: list[FlowRun], out: TextIO, *, stable_ms: int, sessions: int = 1, processes: int = 1
) -> None:
    if not runs:
        return
    turns = len(runs[0].turns)
    print(
        f"\n== speculative turns: the model starts on a partial that stayed the same {stable_ms} ms "
        f"(paced model: first token {FIRST_TOKEN_S * 1000:.0f} ms, {PACE.tokens_per_s:g} tokens/s; "
        f"the app: a word every {WORD_INTERVAL_S * 1000:.0f} ms, 6-8 words, the final "
        f"{FINAL_AFTER_S * 1000:.0f} ms after the last) ==",
        file=out,
    )
    print(
        f"  {turns} turns per flow, {sessions} session(s) at a time, on a stack of its own in a process of its own "
        f"({processes} flow(s) at once)",
        file=out,
    )
    print("  from the final transcript (ms, p50 / p99)", file=out)
    head = f"    {'flow':<34}{'first partial':>16}{'first tts.speak':>18}{'hit rate':>14}{'spec./turn':>12}"
    print(head + f"{'not idle':>10}{'other answer':>14}{'wall s':>8}", file=out)
    for run in runs:
        partial = " / ".join(cell(run.p("first_partial_ms", q), ".0f") for q in (50, 99))
        speak = " / ".join(cell(run.p("first_speak_ms", q), ".0f") for q in (50, 99))
        n = max(1, len(run.turns))
        speculated, promoted = run.counts["TurnsSpeculated"], run.counts["TurnsPromoted"]
        hit = f"{promoted}/{speculated} {promoted / speculated:.0%}" if speculated else "-"
        started = cell(run.counts["Speculations"] / n if run.flow.speculation else None, ".2f")
        missing = sum(not t.completed for t in run.turns)
        wrong = sum(t.completed and not t.answered_final for t in run.turns)
        print(
            f"    {run.flow.name:<34}{partial:>16}{speak:>18}{hit:>14}{started:>12}"
            f"{missing:>10}{wrong:>14}{run.seconds:>8.1f}",
            file=out,
        )
    off = next((r for r in runs if not r.flow.speculation), None)
    matching = next((r for r in runs if r.flow.speculation and r.flow.differ == 0), None)
    if off is not None and matching is not None:
        gains = {
            pick: (off.p(pick, 50) or math.nan) - (matching.p(pick, 50) or math.nan)
            for pick in ("first_partial_ms", "first_speak_ms")
        }
        met = gains["first_speak_ms"] >= GOAL_MS
        print(
            f"  where the time goes, p50 ms from the final (the last word {FINAL_AFTER_S * 1000:.0f} ms before it), "
            "for the model stream that spoke:",
            file=out,
        )
        for run in (off, matching):
            print(
                f"    {run.flow.name:<34}asked {cell(run.p('asked_ms', 50), '+.0f')}, "
                f"its first text at the endpoint {cell(run.p('first_text_ms', 50), '+.0f')}, "
                f"first partial {cell(run.p('first_partial_ms', 50), '+.0f')}, "
                f"first tts.speak {cell(run.p('first_speak_ms', 50), '+.0f')}",
                file=out,
            )
        off_asked, on_asked = off.p("asked_ms", 50), matching.p("asked_ms", 50)
        if off_asked is not None and on_asked is not None:
            head_start = FINAL_AFTER_S * 1000 - stable_ms
            lag = on_asked + head_start
            print(
                f"    so the gain is about the {head_start:.0f} ms between the stable partial and the final, "
                f"plus the {off_asked:.0f} ms the final takes to reach the model without speculation, "
                f"less the {lag:.0f} ms the watcher takes to ask it once the partial is stable "
                f"= {head_start + off_asked - lag:.0f} ms",
                file=out,
            )
        print(
            f"  p50 gain with matching finals: first partial {gains['first_partial_ms']:.0f} ms sooner, "
            f"first tts.speak {gains['first_speak_ms']:.0f} ms sooner "
            f"(goal >= {GOAL_MS:.0f} ms sooner first tts.speak: {'met' if met else 'NOT met'})",
            file=out,
        )

    print("  discarded speculations per 1,000 turns (input / output tokens: characters / 4)", file=out)
    print(
        f"    {'flow':<34}{'at the Bedrock endpoint: streams':>34}{'input':>10}{'output':>9}"
        f"{'the watcher counts: discarded':>32}{'input':>10}{'output':>9}",
        file=out,
    )
    for run in runs:
        if not run.flow.speculation:
            continue
        n, thrown = len(run.turns), run.discarded()
        counts = run.counts
        print(
            f"    {run.flow.name:<34}{_per_1000(len(thrown), n):>34}"
            f"{_per_1000(sum(r.input_tokens for r in thrown), n):>10}"
            f"{_per_1000(sum(math.ceil(r.output_chars / 4) for r in thrown), n):>9}"
            f"{_per_1000(counts['SpeculationsDiscarded'], n):>32}"
            f"{_per_1000(counts['SpeculationDiscardedInputTokens'], n):>10}"
            f"{_per_1000(counts['SpeculationDiscardedOutputTokens'], n):>9}",
            file=out,
        )
    thrown = [request for run in runs for request in run.discarded()]
    if thrown:
        n = len(thrown)
        print(
            f"    a discarded request, on average: input {sum(r.input_tokens for r in thrown) / n:.0f} tokens "
            f"({sum(r.prefix_tokens for r in thrown) / n:.0f} before the newest message), output "
            f"{sum(math.ceil(r.output_chars / 4) for r in thrown) / n:.1f}; the sessions' histories here are "
            f"short (at most {MAX_SESSION_TURNS} turns): input grows with a session's history",
            file=out,
        )
    report_added_cost([r for r in runs if r.flow.speculation], out)


def added_cost_per_1000(run: FlowRun) -> dict[str, tuple[float, float]]:
    """Per stage: USD per 1,000 turns the discarded speculations add (without / with prompt caching),
    from the tokens measured at the endpoint, priced at the stage's model."""
    thrown = run.discarded()
    if not thrown or not run.turns:
        return {stage.name: (0.0, 0.0) for stage in stages()}
    usage = TurnUsage(  # per discarded request, so the caching minimum applies to each request
        turns=len(thrown),
        input_tokens=sum(r.input_tokens for r in thrown),
        output_tokens=sum(math.ceil(r.output_chars / 4) for r in thrown),
        cacheable_tokens=sum(r.prefix_tokens for r in thrown),
    )
    share = len(thrown) / len(run.turns)
    found = {}
    for stage in stages():
        costs = cost_per_1000(usage, stage)
        found[stage.name] = (costs["bedrock"] * share, costs["bedrock_cached"] * share)
    return found


def report_added_cost(runs: list[FlowRun], out: TextIO) -> None:
    models = ", ".join(f"{s.name} {s.model}" for s in stages())
    print(
        f"  Bedrock cost the discarded speculations add per 1,000 turns, USD at list prices "
        f"(benchmarks/costs.py; {models}), without / with prompt caching",
        file=out,
    )
    for run in runs:
        cells = "   ".join(
            f"{stage} {plain:.4f} / {cached:.4f}" for stage, (plain, cached) in added_cost_per_1000(run).items()
        )
        print(f"    {run.flow.name:<34}{cells}", file=out)
