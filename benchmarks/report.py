"""The benchmark's report: a scenario's figures beside the naive flow, and the cost of 1,000 turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from benchmarks.costs import cost_per_1000, stages
from benchmarks.figures import Result, Scenario, TurnFigures
from shared.wire.model_rules import rules_for

Row = tuple[str, Callable[[Result], float | None], str]


def _ms(pick: Callable[[TurnFigures], float | None], q: float) -> Callable[[Result], float | None]:
    return lambda result: result.p(pick, q)


def _per_turn(pick: Callable[[TurnFigures], float | None]) -> Callable[[Result], float | None]:
    return lambda result: result.mean(pick)


ROWS: list[Row] = [
    ("first partial p50 (ms)", _ms(lambda t: t.first_partial_ms, 50), ".0f"),
    ("first partial p99 (ms)", _ms(lambda t: t.first_partial_ms, 99), ".0f"),
    ("overhead before it p50 (ms)", _ms(lambda t: t.overhead_ms, 50), ".0f"),
    ("overhead before it p99 (ms)", _ms(lambda t: t.overhead_ms, 99), ".0f"),
    ("first tts.speak p50 (ms)", _ms(lambda t: t.first_speak_ms, 50), ".0f"),
    ("first tts.speak p99 (ms)", _ms(lambda t: t.first_speak_ms, 99), ".0f"),
    ("DynamoDB requests / turn", _per_turn(lambda t: len(t.dynamo)), ".1f"),
    ("  blocking before 1st partial", _per_turn(lambda t: t.blocking), ".1f"),
    ("  blocking after the tool result", _per_turn(lambda t: t.blocking_after_result), ".1f"),
    ("WRU / turn", _per_turn(lambda t: sum(r.wru for r in t.dynamo)), ".1f"),
    ("  + the sessions index", _per_turn(lambda t: sum(r.index_wru for r in t.dynamo)), ".1f"),
    ("RRU / turn", _per_turn(lambda t: sum(r.rru for r in t.dynamo)), ".1f"),
    ("posts / turn", _per_turn(lambda t: len(t.posts)), ".1f"),
    ("  partials / turn", _per_turn(lambda t: sum(p.kind == "assistantSpeechPartial" for p in t.posts)), ".1f"),
    ("bytes posted / turn", _per_turn(lambda t: sum(p.size for p in t.posts)), ".0f"),
    ("turns without idle", lambda r: sum(not t.completed for t in r.turns), ".0f"),
    ("finals without the whole text", lambda r: sum(not t.final_complete for t in r.turns), ".0f"),
]


def cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(value: float | None, baseline: float | None) -> str:
    if value is None or baseline is None:
        return "-"
    if baseline == 0:
        return "=" if value == 0 else "inf"
    return f"{value / baseline:.2f}x"


def report_scenario(scenario: Scenario, results: dict[tuple[str, bool], Result], paces: list[str], out: TextIO) -> None:
    print(f"\n== {scenario.name} ({scenario.text!r}), {scenario.turns} turns each ==", file=out)
    head = f"  {'':<32}"
    for pace in paces:
        head += f"{pace:>10}{'naive':>10}{'ratio':>8} |"
    print(head, file=out)
    for label, pick, spec in ROWS:
        line = f"  {label:<32}"
        for pace in paces:
            mine, naive = pick(results[pace, False]), pick(results[pace, True])
            line += f"{cell(mine, spec):>10}{cell(naive, spec):>10}{_ratio(mine, naive):>8} |"
        print(line, file=out)
    for pace in paces:
        for naive in (False, True):
            result = results[pace, naive]
            mix = ", ".join(f"{op} {n / len(result.turns):.1f}" for op, n in sorted(result.operations().items()))
            print(f"  {pace}{' naive' if naive else ''}: DynamoDB per turn: {mix}", file=out)


def report_costs(scenarios: list[Scenario], results: dict[tuple[str, str, bool], Result], out: TextIO) -> None:
    print("\n== cost per 1,000 turns, USD at us-east-1 list prices (paced model; see benchmarks/costs.py) ==", file=out)
    print(
        "  Lambda at each function's configured memory (infra/config.py), local durations; Bedrock without /"
        " with prompt caching",
        file=out,
    )
    parts = ("apigw", "lambda", "dynamodb", "bedrock", "bedrock_cached")
    print(
        f"  {'scenario':<28}{'stage':<6}{'flow':<7}" + "".join(f"{p:>15}" for p in parts) + f"{'total*':>11}", file=out
    )
    for stage in stages():
        for scenario in scenarios:
            for naive in (False, True):
                costs = cost_per_1000(results[scenario.name, "paced", naive].usage(), stage)
                if not costs:
                    continue
                total = costs["apigw"] + costs["lambda"] + costs["dynamodb"] + costs["bedrock_cached"]
                print(
                    f"  {scenario.name:<28}{stage.name:<6}{'naive' if naive else 'new':<7}"
                    + "".join(f"{costs[p]:>15.4f}" for p in parts)
                    + f"{total:>11.4f}",
                    file=out,
                )
    print(f"  * total with prompt caching; models: {', '.join(f'{s.name} {s.model}' for s in stages())}", file=out)
    for scenario in scenarios:
        usage = results[scenario.name, "paced", False].usage()
        n = max(1, usage.turns)
        if usage.cache_read_tokens or usage.cache_write_tokens:
            cache = f"cache read {usage.cache_read_tokens / n:.0f}, cache write {usage.cache_write_tokens / n:.0f}"
        else:
            minimums = ", ".join(f"{s.name} {rules_for(s.model).cache_min_tokens}" for s in stages())
            cacheable = usage.cacheable_tokens / n
            cache = f"cacheable prefix {cacheable:.0f}, read from the cache only over the model's minimum ({minimums})"
        print(
            f"  tokens / turn, {scenario.name}: input {usage.input_tokens / n:.0f} ({cache}), "
            f"output {usage.output_tokens / n:.0f} (chars / 4)",
            file=out,
        )
