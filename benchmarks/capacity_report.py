"""``make capacity``: how many people speaking at once each stage of cdk.json holds at AWS's default
quotas, on what ``doctor`` read of the stage's account, and on the quotas cdk.json plans; which limit
binds first and which AWS quota; what it would take to hold the stage's target; the cost per active
user-hour; and what long-term memory (AgentCore Memory) adds: its cost per session and per active
user-hour, and which of its quotas binds first.

    python benchmarks/capacity_report.py [--figures FILE] [--save FILE] [--sessions N] [--context FILE]

Without ``--figures`` it measures one speaker first (``benchmarks.speaker_meter``: each stage's model
and speculation setting, each on a local stack in a process of its own, about a minute); ``--save``
keeps those figures as JSON for a later ``--figures`` (``benchmarks/capacity_figures.json`` is the
committed one docs/capacity.md is written from). ``--context``: the quota readings (default: the
repository's cdk.context.json). The arithmetic is ``benchmarks.capacity_model``'s; the same inputs
give the same report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import aws_quotas
from benchmarks import capacity_memory as memory
from benchmarks.capacity_model import (
    COLUMN_TITLES,
    COLUMNS,
    TARGETS,
    TURN_FUNCTION,
    AccountQuotas,
    Capacity,
    Change,
    Limit,
    QuotaValue,
    SpeakerFigures,
    StageView,
    account_quotas,
    block_tokens_per_speaker,
    capacity,
    changes_to_hold,
    cost_per_user_hour,
    memory_assumptions,
    memory_capacity,
    memory_changes_to_hold,
    session_holds_event_rate,
    stages_of_cdk_json,
    under_load,
)
from benchmarks.costs import AGENTCORE_PRICES_AS_OF, PRICES, PRICES_AS_OF, event_billed_bytes

FIGURES_FILE = Path(__file__).resolve().parent / "capacity_figures.json"
"""The measured figures docs/capacity.md is written from (``--save`` it again to move them)."""
MARKS = {"setting": "=", "default": "d", "assumed": "a", "read": "r", "stated": "s"}
ROW_LABELS = {"pool": "Lambda unreserved pool (every function without a reservation in force)"}
WITH_MEMORY = {"defaults": "at AWS defaults", "read": "on what doctor read", "stated": "on the stated quotas"}
BEDROCK_DISCRETION = (
    'Bedrock grants tokens and requests per minute at its discretion ("Your request might be denied" '
    "where an account does not use what it has: AWS, Request an increase for Amazon Bedrock quotas)"
)

# ---- figures --------------------------------------------------------------------------------------


def load_figures(path: Path) -> list[SpeakerFigures]:
    return [SpeakerFigures.from_json(item) for item in json.loads(path.read_text(encoding="utf-8"))]


def save_figures(path: Path, measured: Sequence[SpeakerFigures]) -> None:
    path.write_text(json.dumps([f.to_json() for f in measured], indent=2) + "\n", encoding="utf-8")


def figures_for(stage: StageView, measured: Sequence[SpeakerFigures]) -> SpeakerFigures:
    """The figures measured with the stage's model and speculation setting (else its speculation
    setting, else whatever was measured), with the requests early launches lose under load
    (``under_load``)."""
    for fits in (
        lambda f: f.model == stage.model and f.speculation == stage.speculation,
        lambda f: f.speculation == stage.speculation,
        lambda f: True,
    ):
        found = next((f for f in measured if fits(f)), None)
        if found is not None:
            return under_load(found)
    raise ValueError("no figures measured")


def _flow_name(figures: SpeakerFigures) -> str:
    model = figures.model.removeprefix("anthropic.claude-") or "local model"
    return f"{model}, spec {'on' if figures.speculation else 'off'}"


def report_figures(measured: Sequence[SpeakerFigures], out: TextIO) -> None:
    print("\n== one active speaker, per minute of talk (measured on the local stack) ==", file=out)
    names = [_flow_name(f) for f in measured]
    print(f"  {'':<52}" + "".join(f"{name:>24}" for name in names), file=out)

    def row(label: str, pick: Any, fmt: str = ",.1f") -> None:
        print(f"  {label:<52}" + "".join(f"{format(pick(f), fmt):>24}" for f in measured), file=out)

    row("minutes measured", lambda f: f.minutes, ".2f")
    row("turns answered", lambda f: f.turns)
    row("WebSocket frames in (route requests)", lambda f: f.ws_in)
    row("WebSocket posts out (callback requests)", lambda f: f.posts)
    row("metered messages in + out", lambda f: f.ws_in_messages + f.ws_out_messages)
    row("connections opened", lambda f: f.connects, ".2f")
    functions = sorted({name for f in measured for name in f.seconds})
    for name in functions:
        row(f"Lambda {name}: invocations", lambda f, n=name: f.invocations.get(n, 0.0))
        row(f"Lambda {name}: concurrency-seconds", lambda f, n=name: f.seconds.get(n, 0.0), ",.2f")
    row("DynamoDB requests", lambda f: f.dynamodb_requests)
    row("DynamoDB RRU", lambda f: f.rru)
    row("DynamoDB WRU (table)", lambda f: f.wru)
    row("DynamoDB WRU (sessions index)", lambda f: f.index_wru)
    row("Bedrock requests", lambda f: f.bedrock_requests)
    row("Bedrock input tokens, all (endpoint: chars / 4)", lambda f: f.endpoint_input_tokens, ",.0f")
    row("Bedrock input tokens, all (as Claude 5.x counts)", _all_input, ",.0f")
    row("  of them uncached", lambda f: f.input_tokens, ",.0f")
    row("  of them read from the prompt cache", lambda f: f.cache_read_tokens, ",.0f")
    row("  of them written to the prompt cache", lambda f: f.cache_write_tokens, ",.0f")
    row("Bedrock output tokens (endpoint: chars / 4)", lambda f: f.endpoint_output_tokens, ",.0f")
    row("Bedrock output tokens (as Claude 5.x counts)", lambda f: f.output_tokens, ",.0f")
    row("Bedrock stream seconds in flight", lambda f: f.stream_seconds, ",.1f")


def _all_input(figures: SpeakerFigures) -> float:
    return figures.input_tokens + figures.cache_read_tokens + figures.cache_write_tokens


# ---- one stage -------------------------------------------------------------------------------------


@dataclass
class StageReport:
    """What the report says of one stage (docs/capacity.md is written from it)."""

    stage: StageView
    figures: SpeakerFigures
    columns: dict[str, Capacity | None]
    cost: dict[str, float]
    target: int | None = None
    changes: dict[str, list[Change]] = field(default_factory=dict)
    """Per column, what holding the target takes (absent: no reading)."""
    memory_quotas: Capacity | None = None
    """The AgentCore Memory quotas ranked, at AWS's defaults (None: the stage has no memory)."""
    memory_changes: list[Change] = field(default_factory=list)
    """What holding the target with memory on takes of the memory's quotas."""

    def people(self, column: str) -> float | None:
        found = self.columns.get(column)
        return None if found is None else found.people

    def people_with_memory(self, column: str) -> float | None:
        """People speaking at once with long-term memory on: the column's or the memory's first quota."""
        found = self.people(column)
        if found is None or self.memory_quotas is None:
            return found
        return min(found, self.memory_quotas.people)

    @property
    def memory_assumed(self) -> memory.MemoryAssumptions:
        return memory_assumptions(self.stage)

    @property
    def memory_hour(self) -> memory.MemoryUsage:
        return memory.hour_usage(self.figures.turns, self.memory_assumed)

    @property
    def memory_session(self) -> memory.MemoryUsage:
        a = self.memory_assumed
        return memory.session_usage(memory.session_turns(self.figures.turns, a), a)

    @property
    def cost_per_hour(self) -> float:
        return sum(self.cost.values())


def stage_report(stage: StageView, figures: SpeakerFigures, reading: Any, target: int | None) -> StageReport:
    columns: dict[str, Capacity | None] = {}
    changes: dict[str, list[Change]] = {}
    for column in COLUMNS:
        quotas = account_quotas(stage, column, reading)
        columns[column] = None if quotas is None else capacity(stage, figures, quotas)
        if quotas is not None and target is not None:
            changes[column] = changes_to_hold(stage, figures, target, quotas)
    return StageReport(
        stage,
        figures,
        columns,
        cost_per_user_hour(stage, figures),
        target,
        changes,
        memory_capacity(stage, figures) if stage.memory else None,
        memory_changes_to_hold(figures, target, memory_assumptions(stage)) if stage.memory and target else [],
    )


def report_stage(
    stage: StageView, figures: SpeakerFigures, out: TextIO, *, target: int | None, reading: Any = None
) -> StageReport:
    report = stage_report(stage, figures, reading, target)
    spec = "on" if stage.speculation else "off"
    print(f"\n== {stage.name}: {_headline(report)} ==", file=out)
    print(f"  model {stage.model}, speculation {spec}, auth {stage.auth}; {_max_tokens(stage)}", file=out)
    reserves = ", ".join(
        f"{name} {value:,}"
        for name, value in (("turn function", stage.turn_reserved), ("$default", stage.message_reserved))
        if value
    )
    print(
        f"  stage settings: route throttle {stage.rate_limit:g}/s (burst {stage.burst_limit}); "
        f"reserved concurrency wanted: {reserves or 'none'}",
        file=out,
    )
    if not stage.account:
        print(
            f"  account: not pinned (stages.{stage.name}.account): no doctor reading can cover the stage",
            file=out,
        )
    elif reading is None:
        print(
            f"  account {stage.account}: no reading in cdk.context.json for {stage.region} "
            f"(voiceide-conductor doctor --stage {stage.name})",
            file=out,
        )
    if stage.max_turns_per_minute is not None and stage.max_turns_per_minute < math.ceil(figures.turns):
        print(
            f"  warning: max_turns_per_minute {stage.max_turns_per_minute} is below the speaker's "
            f"{figures.turns:.1f} turns a minute: the stage refuses some of their turns",
            file=out,
        )
    _report_columns(report, out)
    _report_limits(report, out)
    if target is not None:
        _report_ramp(stage, figures, target, out)
    costs = report.cost
    print(
        f"  cost per active user-hour: ${report.cost_per_hour:.2f} ("
        + ", ".join(f"{name} ${value:.4f}" for name, value in costs.items())
        + f"; list prices as of {PRICES_AS_OF}, AgentCore's {AGENTCORE_PRICES_AS_OF})",
        file=out,
    )
    if target is not None:
        _report_changes(report, target, out)
    _report_memory(report, out)
    return report


def _headline(report: StageReport) -> str:
    defaults = report.people("defaults")
    read = report.people("read")
    stated = report.people("stated")
    read_text = "no reading" if read is None else f"{_people(read)} on what doctor read"
    return (
        f"{_people(defaults or 0)} people speaking at once at AWS defaults; {read_text}; "
        f"{_people(stated or 0)} on the stated quotas (unconfirmed)"
    )


def _max_tokens(stage: StageView) -> str:
    extra = stage.in_flight_max_tokens - stage.max_tokens
    room = f" + {extra:,} thinking room" if extra > 0 else ""
    return f"requests carry maxTokens {stage.in_flight_max_tokens:,} (bedrock.max_tokens {stage.max_tokens:,}{room})"


def _quota_cell(value: QuotaValue) -> str:
    if value.value is None:
        return "not held (no default)"
    return f"{value.value:,.0f} [{value.basis}]"


def _reservation_cell(stage: StageView, quotas: AccountQuotas) -> str:
    if not (stage.turn_reserved or stage.message_reserved):
        return "none wanted"
    if not quotas.reserves:
        return "none"
    parts = [
        f"turn {stage.turn_reserved:,}" if stage.turn_reserved else "",
        f"$default {stage.message_reserved:,}" if stage.message_reserved else "",
    ]
    return ", ".join(p for p in parts if p)


def _binding_cell(limit: Limit | None) -> str:
    if limit is None:
        return "-"
    return f"{_short(limit)} [{limit.kind}]"


def _short(limit: Limit) -> str:
    return {
        "route": "route throttle",
        "account_rps": "API Gateway account throttle",
        "new_connections": "API Gateway new connections",
        "turn_reserved": "turn function reservation",
        "message_reserved": "$default reservation",
        "pool": "Lambda unreserved pool",
        "dynamodb_read": "DynamoDB table reads",
        "dynamodb_write": "DynamoDB table writes",
        "dynamodb_index": "DynamoDB index writes",
        "dynamodb_partition": "DynamoDB index partition",
        "bedrock_tpm": "Bedrock tokens/min",
        "bedrock_rpm": "Bedrock requests/min",
        "memory_extraction": "long-term extraction tokens/min",
        "memory_create_event": "CreateEvent",
        "memory_retrieve": "RetrieveMemoryRecords",
        "memory_batch_create": "BatchCreateMemoryRecords",
    }.get(limit.key, limit.name)


def _report_columns(report: StageReport, out: TextIO) -> None:
    width = 34
    print((f"  {'':<38}" + "".join(f"{COLUMN_TITLES[c]:<{width}}" for c in COLUMNS)).rstrip(), file=out)
    stage = report.stage

    def row(label: str, cell: Any) -> None:
        cells = []
        for column in COLUMNS:
            found = report.columns[column]
            cells.append("no reading" if found is None or found.quotas is None else cell(found))
        print((f"  {label:<38}" + "".join(f"{c:<{width}}" for c in cells)).rstrip(), file=out)

    row("Lambda concurrent executions", lambda c: _quota_cell(c.quotas.lambda_concurrency))
    row("Bedrock tokens per minute", lambda c: _quota_cell(c.quotas.bedrock_tpm))
    row("Bedrock requests per minute", lambda c: _quota_cell(c.quotas.bedrock_rpm))
    row("reserved concurrency in force", lambda c: _reservation_cell(stage, c.quotas))
    row("people speaking at once", lambda c: _people(c.people))
    row("binds first", lambda c: _binding_cell(c.ranked[0] if c.ranked else None))
    row("first AWS quota to bind", _first_quota_cell)
    for column in COLUMNS:
        found = report.columns[column]
        if found is not None and found.quotas is not None and found.quotas.note:
            print(f"  {COLUMN_TITLES[column]}: {found.quotas.note}", file=out)


def _first_quota_cell(found: Capacity) -> str:
    limit = found.first_quota
    return "-" if limit is None else f"{_short(limit)} at {_people(limit.people)}"


def _report_limits(report: StageReport, out: TextIO) -> None:
    rows: dict[str, dict[str, Limit]] = {}
    for column in COLUMNS:
        found = report.columns[column]
        for limit in found.ranked if found is not None else []:
            rows.setdefault(limit.key, {})[column] = limit
    first = next(c for c in COLUMNS if report.columns[c] is not None)
    order = sorted(rows, key=lambda key: rows[key].get(first, next(iter(rows[key].values()))).people)
    legend = ", ".join(f"{mark} {basis}" for basis, mark in MARKS.items())
    print(f"  people it holds / the limit, per column ({legend}):", file=out)
    print(
        f"  {'limit':<66}{'per speaker':>12}  {'unit':<14}" + "".join(f"{COLUMN_TITLES[c]:>26}" for c in COLUMNS),
        file=out,
    )
    for key in order:
        cells = rows[key]
        sample = next(iter(cells.values()))
        label = ROW_LABELS.get(key, sample.name)
        line = f"  {label:<66}{_per_speaker(cells):>12}  {sample.unit:<14}"
        for column in COLUMNS:
            limit = cells.get(column)
            if report.columns[column] is None:
                line += f"{'no reading':>26}"
            elif limit is None:
                line += f"{'-':>26}"
            else:
                line += f"{_people(limit.people):>9} / {limit.value:>11,.0f} {MARKS[limit.basis]}"
        print(line, file=out)


def _per_speaker(cells: Mapping[str, Limit]) -> str:
    values = sorted({round(limit.per_speaker, 6) for limit in cells.values()})
    return "/".join(f"{value:,.4g}" for value in values)


def _report_ramp(stage: StageView, figures: SpeakerFigures, target: int, out: TextIO) -> None:
    steps = target_ramp(figures, target)
    print(
        f"  ramp to {target:,} from cold: Lambda adds 1,000 executions a function per 10 s, "
        f"{math.ceil(steps) * 10} s at most",
        file=out,
    )
    fresh = aws_quotas.value("dynamodb_new_table_wru")
    for name, per_minute, warm, setting in (
        ("table", figures.wru, stage.warm_write_units, "capacity.warm_write_units_per_second"),
        (
            "sessions index",
            figures.index_wru,
            stage.index_warm_write_units,
            "capacity.index_warm_write_units_per_second",
        ),
    ):
        need = target * per_minute / 60
        start = max(fresh, warm or 0)
        if need <= start:
            where = f"pre-warmed to {warm:,} ({setting})" if warm else f"a new on-demand {name} starts at {fresh:,.0f}"
            print(
                f"  DynamoDB {name}: {target:,} need {need:,.0f} WRU/s from the first minute; {where}: held", file=out
            )
        else:
            print(
                f"  DynamoDB {name}: {target:,} need {need:,.0f} WRU/s from the first minute and it starts at "
                f"{start:,.0f}: pre-warm it ({setting} {math.ceil(need / 500) * 500}) or grow the load over 30 minutes",
                file=out,
            )


def target_ramp(figures: SpeakerFigures, people: float) -> float:
    """10-second steps of Lambda's scaling rate the busiest function needs to reach ``people``."""
    if math.isinf(people):
        return 0.0
    busiest = max(figures.concurrency(TURN_FUNCTION), figures.concurrency(["message"]))
    return people * busiest / aws_quotas.value("lambda_scaling_per_10s")


def _report_changes(report: StageReport, target: int, out: TextIO) -> None:
    bedrock = False
    for column in COLUMNS:
        if column not in report.changes:
            continue
        needed = report.changes[column]
        held = report.people(column) or 0
        title = COLUMN_TITLES[column]
        if held >= target and not needed:
            print(f"  target {target:,} at {title}: held", file=out)
            continue
        print(f"  to hold {target:,} at {title}:", file=out)
        for change in needed:
            bedrock = bedrock or change.setting.startswith(("bedrock", "cdk.json bedrock"))
            print(
                f"    raise {change.setting} from {change.current:,.0f} to {change.needed:,.0f}: {change.how}", file=out
            )
    if bedrock:
        print(f"  note: {BEDROCK_DISCRETION}", file=out)


def _report_memory(report: StageReport, out: TextIO) -> None:
    """Long-term memory: its cost per active user-hour and per session, its quotas at AWS's defaults,
    what the remembered block adds to the model's input, and the assumptions behind them."""
    stage, figures = report.stage, report.figures
    if not stage.memory:
        print("  long-term memory: off (memory.enabled false): no AgentCore Memory", file=out)
        return
    a = report.memory_assumed
    print(f"  long-term memory (AgentCore Memory, {_memory_assumptions(a)}):", file=out)
    hour, session = report.memory_hour, report.memory_session
    hour_cost, session_cost = memory.cost(hour, a), memory.cost(session, a)
    print(
        f"    per active user-hour ${sum(hour_cost.values()):.4f}: {hour.events:,.0f} events "
        f"${hour_cost['events']:.4f} (each counted as {event_billed_bytes(a.event_bytes) / 1000:g} KB at "
        f"${PRICES['agentcore_event_ingest_gb']:.2f}/GB ingested, stored at "
        f"${PRICES['agentcore_event_storage_gb_month']:.2f}/GB-month; "
        f"${memory.events_at_the_old_price(hour):.4f} at the $0.25 per 1,000 events of before 2026-10-06), "
        f"{hour.retrievals:,.1f} retrievals ${hour_cost['retrievals']:.4f} "
        f"(${PRICES['agentcore_retrieval'] * 1000:.2f} per 1,000), records ${hour_cost['records']:.4f} "
        f"({a.records_per_person:,.0f} a person a month at ${PRICES['agentcore_record_month'] * 1000:.2f} "
        f"per 1,000, over {a.active_hours_per_month:g} active hours); prices as of {AGENTCORE_PRICES_AS_OF}",
        file=out,
    )
    print(
        f"    per {a.session_minutes:g}-minute session of {session.turns:,.0f} turns "
        f"${sum(session_cost.values()):.4f}: "
        f"{session.events:,.0f} events ${session_cost['events']:.4f}, {session.retrievals:,.1f} retrievals "
        f"${session_cost['retrievals']:.4f}, records ${session_cost['records']:.4f} "
        f"({a.summaries_per_session} summary and its share of the standing records)",
        file=out,
    )
    found = report.memory_quotas
    if found is None:
        return
    print(
        "    its quotas at AWS defaults, people each holds: "
        + "; ".join(
            f"{_short(limit)} {_people(limit.people)} ({limit.per_speaker:,.4g} of {limit.value:,.0f} {limit.unit}"
            + (f", {aws_quotas.quota(limit.setting).code})" if aws_quotas.quota(limit.setting).code else ")")
            for limit in found.ranked
        ),
        file=out,
    )
    first = found.ranked[0]
    floor = " at most (its tokens are a floor)" if first.key == "memory_extraction" else ""
    with_memory = [
        f"{_people(held)} {WITH_MEMORY[column]}"
        for column in COLUMNS
        if (held := report.people_with_memory(column)) is not None
    ]
    print(
        f"    first to bind: {_short(first)} at {_people(first.people)}{floor}; with memory on the stage holds "
        + ", ".join(with_memory),
        file=out,
    )
    rate = figures.turns / 60
    session_quota = aws_quotas.value("agentcore_create_event_session_rps")
    verdict = "held" if session_holds_event_rate(figures) else "exceeded"
    print(
        f"    one session commits {rate:.2f} events a second of the {session_quota:g} a second per actor and "
        f"session: {verdict}",
        file=out,
    )
    block = block_tokens_per_speaker(figures, a)
    price = PRICES.get(f"{stage.model}:input", 0.0)
    print(
        f"    the remembered block (at most {a.block_chars:,} characters, {a.block_tokens:,.0f} tokens) is uncached "
        f"input in every request: +{block:,.0f} Bedrock quota tokens a minute per speaker, "
        f"+${60 * block * price:.2f} an hour at {stage.model}'s input price (not in the measured figures)",
        file=out,
    )
    if report.target is None:
        return
    if not report.memory_changes:
        print(f"    target {report.target:,} with memory on: the memory's quotas hold it", file=out)
    for change in report.memory_changes:
        print(
            f"    to hold {report.target:,} with memory on, raise {change.setting} from {change.current:,.0f} "
            f"to {change.needed:,.0f}: {change.how}",
            file=out,
        )


def _memory_assumptions(a: memory.MemoryAssumptions) -> str:
    return (
        f"assumed: a memory.search every {a.turns_per_search:g} turns, a memory.write every {a.turns_per_write:g}, "
        f"{a.session_minutes:g}-minute sessions, {a.active_hours_per_month:g} active hours a person a month, "
        f"{a.standing_records} standing records each, events of {a.event_bytes:,} bytes and {a.event_tokens:,.0f} "
        f"tokens kept {a.event_retention_days:g} days, read by {a.strategies} strategies (a floor: their prompts "
        "are not counted)"
    )


def _people(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{math.floor(value):,}"


def report_quotas(out: TextIO) -> None:
    print("\n== AWS default quotas used (benchmarks/aws_quotas.py) ==", file=out)
    for quota in aws_quotas.QUOTAS.values():
        shown = "no default assumed" if quota.value is None else f"{quota.value:,.0f} {quota.unit}"
        flag = "" if quota.documented or quota.value is None else " [not documented for this model: nearest figure]"
        print(f"  {quota.name}: {shown}{flag} -- {quota.source_title}", file=out)


def readings_for(stages: Sequence[StageView], context: Mapping[str, Any]) -> dict[str, Any]:
    """Each stage's quota reading (None without one), as synth finds it."""
    from infra.quota_readings import reading_for

    return {stage.name: reading_for(context, stage.account, stage.region) for stage in stages}


def report(measured: Sequence[SpeakerFigures], context: Mapping[str, Any], out: TextIO) -> list[StageReport]:
    """The whole report from measured figures and the quota readings; the stages' reports."""
    report_figures(measured, out)
    stages = stages_of_cdk_json()
    readings = readings_for(stages, context)
    found = [
        report_stage(
            stage, figures_for(stage, measured), out, target=TARGETS.get(stage.name), reading=readings[stage.name]
        )
        for stage in stages
    ]
    report_quotas(out)
    return found


def main(argv: list[str] | None = None) -> int:
    from infra.quota_readings import CDK_CONTEXT_JSON, load_context

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--figures", type=Path, help="per-speaker figures measured before (JSON), instead of measuring")
    parser.add_argument("--save", type=Path, help="write the measured per-speaker figures here (JSON)")
    parser.add_argument("--sessions", type=int, default=1, help="speaker sessions measured per flow (default 1)")
    parser.add_argument("--context", type=Path, default=CDK_CONTEXT_JSON, help="the quota readings (cdk.context.json)")
    args = parser.parse_args(argv)
    out = sys.stdout
    if args.figures:
        measured = load_figures(args.figures)
    else:
        from benchmarks.speaker_meter import measure_flows

        flows = list(dict.fromkeys(stage.flow() for stage in stages_of_cdk_json()))
        print(f"measuring one speaker on the local stack ({len(flows)} flows, a process each)...", file=out)
        out.flush()
        measured = measure_flows(flows, sessions=max(1, args.sessions))
    if args.save:
        save_figures(args.save, measured)
    report(measured, load_context(args.context), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
