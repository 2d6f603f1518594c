"""``make capacity``: how many people speaking at once each stage of cdk.json holds, which limit
binds first, what it would take to hold the stage's target, and the cost per active user-hour.

    python benchmarks/capacity_report.py [--figures FILE] [--save FILE] [--sessions N]

Without ``--figures`` it measures one speaker first (``benchmarks.speaker_meter``, speculation on
and off, each on a local stack in a process of its own, about a minute); ``--save`` keeps those
figures as JSON for a later ``--figures``. The arithmetic is ``benchmarks.capacity_model``'s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import aws_quotas
from benchmarks.capacity_model import (
    TARGETS,
    TURN_FUNCTION,
    Capacity,
    SpeakerFigures,
    StageView,
    bedrock_limit,
    capacity,
    changes_to_hold,
    cost_per_user_hour,
    stages_of_cdk_json,
)
from benchmarks.costs import PRICES_AS_OF

# ---- report ----------------------------------------------------------------------------------------


def figures_for(stage: StageView, measured: Mapping[bool, SpeakerFigures]) -> SpeakerFigures:
    """The figures measured with the stage's speculation setting (else whatever was measured)."""
    return measured.get(stage.speculation) or next(iter(measured.values()))


def report_figures(measured: Mapping[bool, SpeakerFigures], out: TextIO) -> None:
    print("\n== one active speaker, per minute of talk (measured on the local stack) ==", file=out)
    flows = sorted(measured.items(), key=lambda item: not item[0])
    names = [f"speculation {'on' if on else 'off'}" for on, _ in flows]
    print(f"  {'':<44}" + "".join(f"{name:>18}" for name in names), file=out)

    def row(label: str, pick: Any, fmt: str = ",.1f") -> None:
        print(f"  {label:<44}" + "".join(f"{format(pick(f), fmt):>18}" for _, f in flows), file=out)

    row("minutes measured", lambda f: f.minutes, ".2f")
    row("turns answered", lambda f: f.turns)
    row("WebSocket frames in (route requests)", lambda f: f.ws_in)
    row("WebSocket posts out (callback requests)", lambda f: f.posts)
    row("metered messages in + out", lambda f: f.ws_in_messages + f.ws_out_messages)
    row("connections opened", lambda f: f.connects, ".2f")
    functions = sorted({name for _, f in flows for name in f.seconds})
    for name in functions:
        row(f"Lambda {name}: invocations", lambda f, n=name: f.invocations.get(n, 0.0))
        row(f"Lambda {name}: concurrency-seconds", lambda f, n=name: f.seconds.get(n, 0.0), ",.2f")
    row("DynamoDB requests", lambda f: f.dynamodb_requests)
    row("DynamoDB RRU", lambda f: f.rru)
    row("DynamoDB WRU (table)", lambda f: f.wru)
    row("DynamoDB WRU (sessions index)", lambda f: f.index_wru)
    row("Bedrock requests", lambda f: f.bedrock_requests)
    row("Bedrock input tokens", lambda f: f.input_tokens, ",.0f")
    row("Bedrock output tokens", lambda f: f.output_tokens, ",.0f")
    row("Bedrock stream seconds in flight", lambda f: f.stream_seconds, ",.1f")


def report_stage(stage: StageView, figures: SpeakerFigures, out: TextIO, *, target: int | None) -> Capacity:
    result = capacity(stage, figures)
    spec = "on" if stage.speculation else "off"
    print(
        f"\n== {stage.name}: {_people(result.people)} people speaking at once "
        f"(model {stage.model}, speculation {spec}, auth {stage.auth}) ==",
        file=out,
    )
    quota = "stated" if stage.account_stated else "not stated: the documented default assumed"
    print(
        f"  route throttle {stage.rate_limit:g}/s (burst {stage.burst_limit}); turn function reserved "
        f"{stage.turn_reserved or 'none'}, $default reserved {stage.message_reserved or 'none'}; "
        f"account Lambda concurrency {stage.account_concurrency:,} ({quota})",
        file=out,
    )
    print(f"  Bedrock quotas of the model: {_bedrock_quotas(stage)}", file=out)
    if stage.max_turns_per_minute is not None and stage.max_turns_per_minute < math.ceil(figures.turns):
        print(
            f"  warning: max_turns_per_minute {stage.max_turns_per_minute} is below the speaker's "
            f"{figures.turns:.1f} turns a minute: the stage refuses some of their turns",
            file=out,
        )
    print(f"  {'limit':<66}{'people':>10}{'limit':>14}{'per speaker':>14}  {'unit':<14}figure", file=out)
    for rank, limit in enumerate(result.ranked):
        mark = ">" if rank == 0 else ("+" if rank < 3 else " ")
        print(
            f"  {mark} {limit.name:<64}{_people(limit.people):>10}{limit.value:>14,.0f}"
            f"{limit.per_speaker:>14,.4g}  {limit.unit:<14}{limit.basis}",
            file=out,
        )
    names = [limit.name for limit in result.binding]
    print(f"  binds first: {names[0]}; then: {'; '.join(names[1:])}", file=out)
    if target is not None:
        steps = target_ramp(stage, figures, target)
        print(
            f"  ramp to {target:,} from cold: Lambda adds 1,000 executions a function per 10 s, "
            f"{math.ceil(steps) * 10} s at most",
            file=out,
        )
        fresh = aws_quotas.value("dynamodb_new_table_wru")
        wru_s = target * max(figures.wru, figures.index_wru) / 60
        if wru_s > fresh:
            print(
                f"  a new on-demand table starts at {fresh:,.0f} WRU/s and {target:,} need {wru_s:,.0f}: "
                "pre-warm it (warm throughput) or grow the load over 30 minutes",
                file=out,
            )
    costs = cost_per_user_hour(stage, figures)
    print(
        f"  cost per active user-hour: ${sum(costs.values()):.4f} ("
        + ", ".join(f"{name} ${value:.4f}" for name, value in costs.items())
        + f"; list prices as of {PRICES_AS_OF})",
        file=out,
    )
    if target is not None:
        needed = changes_to_hold(stage, figures, target)
        if result.people >= target and not needed:
            print(f"  target {target:,}: held", file=out)
        else:
            print(f"  to hold {target:,}:", file=out)
            for change in needed:
                print(
                    f"    raise {change.setting} from {change.current:,.0f} to {change.needed:,.0f}: {change.how}",
                    file=out,
                )
    return result


def target_ramp(stage: StageView, figures: SpeakerFigures, people: float) -> float:
    """10-second steps of Lambda's scaling rate the busiest function needs to reach ``people``."""
    if math.isinf(people):
        return 0.0
    busiest = max(figures.concurrency(TURN_FUNCTION), figures.concurrency(["message"]))
    return people * busiest / aws_quotas.value("lambda_scaling_per_10s")


def _bedrock_quotas(stage: StageView) -> str:
    """Tokens and requests per minute the stage is held to, each with where it comes from."""
    shown = []
    for metric, label in (("tokens", "tokens/min"), ("requests", "requests/min")):
        found = bedrock_limit(stage, metric)
        if found is None:
            shown.append(f"{label} not stated (no default to assume: not held to one)")
            continue
        value, setting, basis = found
        where = {
            "stated": f"stated in {setting}",
            "default": "not stated: the documented default",
            "assumed": "not stated: assumed, no documented default",
        }[basis]
        shown.append(f"{value:,.0f} {label} ({where})")
    return "; ".join(shown)


def _people(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{math.floor(value):,}"


def report_quotas(out: TextIO) -> None:
    print("\n== quotas used (benchmarks/aws_quotas.py) ==", file=out)
    for quota in aws_quotas.QUOTAS.values():
        shown = "no default assumed" if quota.value is None else f"{quota.value:,.0f} {quota.unit}"
        flag = "" if quota.documented or quota.value is None else " [not documented for this model: nearest figure]"
        print(f"  {quota.name}: {shown}{flag} -- {quota.source_title}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--figures", type=Path, help="per-speaker figures measured before (JSON), instead of measuring")
    parser.add_argument("--save", type=Path, help="write the measured per-speaker figures here (JSON)")
    parser.add_argument("--sessions", type=int, default=1, help="speaker sessions measured per flow (default 1)")
    args = parser.parse_args(argv)
    out = sys.stdout
    if args.figures:
        raw = json.loads(args.figures.read_text(encoding="utf-8"))
        measured = {bool(f["speculation"]): SpeakerFigures.from_json(f) for f in raw}
    else:
        from benchmarks.speaker_meter import measure_flows

        print("measuring one speaker on the local stack (speculation on and off, a process each)...", file=out)
        out.flush()
        measured = measure_flows(sessions=max(1, args.sessions))
    if args.save:
        args.save.write_text(json.dumps([f.to_json() for f in measured.values()], indent=2) + "\n", encoding="utf-8")
    report_figures(measured, out)
    for stage in stages_of_cdk_json():
        report_stage(stage, figures_for(stage, measured), out, target=TARGETS.get(stage.name))
    report_quotas(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
