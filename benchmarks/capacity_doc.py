"""docs/capacity.md's figures, written from the capacity report so the prose and the tables agree.

    python benchmarks/capacity_doc.py [--check] [--figures FILE] [--doc FILE]

The report runs on the committed figures (``benchmarks/capacity_figures.json``), cdk.json and the
quota readings of cdk.context.json, so it gives the same figures on every machine. The doc marks what
is generated:

* a block, ``<!-- capacity:NAME -->`` ... ``<!-- /capacity:NAME -->``: replaced whole (``BLOCKS``);
* a figure in the prose, ``<!-- v:KEY -->54<!-- /v -->``: the text between is the value of KEY.

Without ``--check`` it rewrites the doc; with it, it exits 1 when the doc differs (tests/bench checks
the same). After ``make capacity CAPACITY_ARGS="--save benchmarks/capacity_figures.json"``, run it again.
"""

from __future__ import annotations

import argparse
import io
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import aws_quotas, spoken_brain
from benchmarks import capacity_memory as memory
from benchmarks import token_calibration as calibration
from benchmarks.capacity_model import (
    MIN_UNRESERVED,
    TARGETS,
    Capacity,
    Limit,
    SpeakerFigures,
    block_tokens_per_speaker,
    functions_in_pool,
    stages_of_cdk_json,
    tpm_per_speaker,
)
from benchmarks.capacity_report import (
    FIGURES_FILE,
    StageReport,
    figures_for,
    load_figures,
    readings_for,
    report_figures,
    report_stage,
)
from benchmarks.costs import PRICES

DOC = Path(__file__).resolve().parents[1] / "docs" / "capacity.md"
BLOCK = re.compile(r"<!-- capacity:(?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /capacity:(?P=name) -->", re.DOTALL)
INLINE = re.compile(r"<!-- v:(?P<key>[\w.-]+) -->(?P<value>.*?)<!-- /v -->")


class DocError(ValueError):
    """The doc names a block or figure the report does not have."""


def render(text: str, blocks: Mapping[str, str], values: Mapping[str, str]) -> str:
    """``text`` with every marked block and figure written from ``blocks`` and ``values``."""

    def block(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            raise DocError(f"docs/capacity.md marks a block {name!r} the report does not write")
        return f"<!-- capacity:{name} -->\n\n{blocks[name].strip()}\n\n<!-- /capacity:{name} -->"

    def inline(match: re.Match[str]) -> str:
        key = match["key"]
        if key not in values:
            raise DocError(f"docs/capacity.md marks a figure {key!r} the report does not give")
        return f"<!-- v:{key} -->{values[key]}<!-- /v -->"

    return INLINE.sub(inline, BLOCK.sub(block, text))


# ---- what the report says ------------------------------------------------------------------------


def generated(measured: Sequence[SpeakerFigures], context: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The doc's blocks and figures from the report on ``measured`` and the readings in ``context``."""
    stages = stages_of_cdk_json()
    readings = readings_for(stages, context)
    speaker = io.StringIO()
    report_figures(measured, speaker)
    blocks = {"speaker": _fenced(speaker.getvalue())}
    values: dict[str, str] = {}
    reports: dict[str, StageReport] = {}
    for stage in stages:
        out = io.StringIO()
        found = report_stage(
            stage, figures_for(stage, measured), out, target=TARGETS.get(stage.name), reading=readings[stage.name]
        )
        reports[stage.name] = found
        blocks[stage.name] = _fenced(out.getvalue())
        values |= stage_values(found)
    blocks["costs"] = cost_table(reports.values())
    blocks["memory"] = memory_table(reports.values())
    values |= memory_assumption_values()
    if "prod" in reports:
        blocks["prod-quotas"] = quota_table(reports["prod"])
    values |= calibration_values()
    return blocks, values


def _fenced(text: str) -> str:
    return "```\n" + text.strip("\n") + "\n```"


def _people(value: float | None) -> str:
    if value is None:
        return "no reading"
    return "unbounded" if math.isinf(value) else f"{math.floor(value):,}"


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _millions(value: float) -> str:
    return f"{value / 1e6:,.1f} million"


def _limit(found: Capacity | None, key: str) -> Limit | None:
    if found is None:
        return None
    return next((limit for limit in found.ranked if limit.key == key), None)


SHORT = {
    "route": "the stage's route throttle",
    "account_rps": "API Gateway's account throttle",
    "new_connections": "API Gateway's new connections a second",
    "turn_reserved": "the turn function's reservation",
    "message_reserved": "$default's reservation",
    "pool": "the Lambda pool the functions share",
    "dynamodb_read": "the table's reads",
    "dynamodb_write": "the table's writes",
    "dynamodb_index": "the sessions index's writes",
    "dynamodb_partition": "the sessions index's one partition",
    "bedrock_tpm": "Bedrock's tokens per minute",
    "bedrock_rpm": "Bedrock's requests per minute",
    "memory_extraction": "AgentCore Memory's long-term extraction tokens per minute",
    "memory_create_event": "AgentCore Memory's CreateEvent requests a second",
    "memory_retrieve": "AgentCore Memory's RetrieveMemoryRecords requests a second",
    "memory_batch_create": "AgentCore Memory's BatchCreateMemoryRecords requests a second",
}


def stage_values(report: StageReport) -> dict[str, str]:
    """Every figure of one stage the prose may name, keyed ``<stage>.<name>``."""
    stage, figures = report.stage, report.figures
    target = report.target or 0
    name = stage.name
    values: dict[str, str] = {}
    for column, found in report.columns.items():
        prefix = f"{name}.{column}"
        values[f"{prefix}.people"] = _people(None if found is None else found.people)
        if found is None:
            continue
        first = found.ranked[0] if found.ranked else None
        values[f"{prefix}.binds"] = SHORT.get(first.key, first.name) if first else "nothing"
        quota = found.first_quota
        values[f"{prefix}.first_quota"] = SHORT.get(quota.key, quota.name) if quota else "none"
        values[f"{prefix}.first_quota_people"] = _people(quota.people if quota else math.inf)
        for key in ("route", "pool", "turn_reserved", "bedrock_tpm", "bedrock_rpm", "account_rps", "dynamodb_write"):
            limit = _limit(found, key)
            if limit is not None:
                values[f"{prefix}.{key}_people"] = _people(limit.people)
                values[f"{prefix}.{key}_value"] = _n(limit.value)
        if found.quotas is not None and found.quotas.lambda_concurrency.value is not None:
            values[f"{prefix}.lambda_value"] = _n(found.quotas.lambda_concurrency.value)
    route_rps = (figures.ws_in + figures.connects) / 60
    tpm = tpm_per_speaker(figures, stage.in_flight_max_tokens)
    all_input = figures.input_tokens + figures.cache_read_tokens + figures.cache_write_tokens
    calls: dict[str, Callable[[], str]] = {
        "turns": lambda: _n(figures.turns, 1),
        "requests": lambda: _n(figures.bedrock_requests, 1),
        "input_all": lambda: _n(all_input),
        "input_endpoint": lambda: _n(figures.endpoint_input_tokens),
        "input_per_request": lambda: _n(all_input / figures.bedrock_requests if figures.bedrock_requests else 0),
        "cache_read": lambda: _n(figures.cache_read_tokens),
        "cache_read_share": lambda: f"{100 * figures.cache_read_tokens / all_input if all_input else 0:.0f} %",
        "output": lambda: _n(figures.output_tokens),
        "output_endpoint": lambda: _n(figures.endpoint_output_tokens),
        "stream_seconds": lambda: _n(figures.stream_seconds, 1),
        "message_seconds": lambda: _n(figures.seconds.get("message", 0.0), 2),
        "max_tokens": lambda: _n(stage.max_tokens),
        "request_max_tokens": lambda: _n(stage.in_flight_max_tokens),
        "route_rps": lambda: _n(route_rps, 3),
        "route_rps_target": lambda: _n(target * route_rps),
        "account_rps_target": lambda: _n(target * (route_rps + figures.posts / 60)),
        "tpm_per_speaker": lambda: _n(tpm),
        "tpm_target": lambda: _millions(target * tpm),
        "rpm_target": lambda: _n(target * figures.bedrock_requests),
        "table_wru_target": lambda: _n(target * figures.wru / 60),
        "index_wru_target": lambda: _n(target * figures.index_wru / 60),
        "table_rru_target": lambda: _n(target * figures.rru / 60),
        "cost": lambda: f"${report.cost_per_hour:.2f}",
        "bedrock_cost": lambda: f"${report.cost['Bedrock']:.2f}",
        "cost_target": lambda: f"${target * report.cost_per_hour:,.0f}",
        "bedrock_cost_target": lambda: f"${target * report.cost['Bedrock']:,.0f}",
        "target": lambda: _n(target),
        "tpm_plan_margin": lambda: _margin(stage.bedrock_tpm, target * tpm),
    }
    values |= {f"{name}.{key}": make() for key, make in calls.items()}
    return values | memory_values(report)


def memory_values(report: StageReport) -> dict[str, str]:
    """The figures of long-term memory (AgentCore Memory) for one stage, keyed ``<stage>.memory.<name>``."""
    stage, figures = report.stage, report.figures
    a = report.memory_assumed
    hour, session = report.memory_hour, report.memory_session
    hour_cost, session_cost = memory.cost(hour, a), memory.cost(session, a)
    found = report.memory_quotas
    prefix = f"{stage.name}.memory"
    values = {
        "cost_hour": f"${sum(hour_cost.values()):.3f}",
        "cost_session": f"${sum(session_cost.values()):.3f}",
        "events_cost_hour": f"${hour_cost['events']:.4f}",
        "events_old_hour": f"${memory.events_at_the_old_price(hour):.3f}",
        "retrievals_cost_hour": f"${hour_cost['retrievals']:.4f}",
        "records_cost_hour": f"${hour_cost['records']:.4f}",
        "events_hour": _n(hour.events),
        "retrievals_hour": _n(hour.retrievals, 1),
        "session_turns": _n(session.turns),
        "session_retrievals": _n(session.retrievals, 1),
        "block_tokens": _n(block_tokens_per_speaker(figures, a)),
        "block_cost": f"${60 * block_tokens_per_speaker(figures, a) * PRICES.get(f'{stage.model}:input', 0.0):.2f}",
        "retention_days": f"{a.event_retention_days:g}",
    }
    if found is not None and found.ranked:
        first = found.ranked[0]
        values |= {
            "first_quota": SHORT.get(first.key, first.name),
            "first_quota_people": _people(first.people),
            "first_quota_value": _n(first.value),
            "first_quota_per_speaker": _n(first.per_speaker),
            "first_quota_target": _n(math.ceil(first.needed_for(report.target or 0))),
        }
        for limit in found.ranked:
            values[f"{limit.key}_people"] = _people(limit.people)
    for column in report.columns:
        values[f"{column}.people"] = _people(report.people_with_memory(column))
    return {f"{prefix}.{key}": value for key, value in values.items()}


def memory_assumption_values() -> dict[str, str]:
    a = memory.ASSUMED
    return {
        "memory.turns_per_search": f"{a.turns_per_search:g}",
        "memory.turns_per_write": f"{a.turns_per_write:g}",
        "memory.session_minutes": f"{a.session_minutes:g}",
        "memory.active_hours": f"{a.active_hours_per_month:g}",
        "memory.standing_records": _n(a.standing_records),
        "memory.records_person": _n(a.records_per_person),
        "memory.event_bytes": _n(a.event_bytes),
        "memory.event_tokens": _n(a.event_tokens),
        "memory.strategies": _n(a.strategies),
        "memory.block_chars": _n(a.block_chars),
        "memory.block_tokens_request": _n(a.block_tokens),
    }


def _margin(plan: float | None, need: float) -> str:
    """How far a plan is above (or below) a need, in percent."""
    if plan is None or need <= 0:
        return "none"
    return f"{100 * (plan / need - 1):.0f} %"


def calibration_values() -> dict[str, str]:
    c = calibration
    return {
        "speaker.answer_words": _n(spoken_brain.ANSWER_WORDS),
        "speaker.readback_words": _n(spoken_brain.READBACK_WORDS),
        "cal.input_ratio": f"{c.INPUT_RATIO:.2f}",
        "cal.prompt_tokens": _n(c.PROMPT_TOKENS),
        "cal.prompt_chars": _n(c.PROMPT_CHARS),
        "cal.spec_tokens": _n(c.TOOL_SPEC_TOKENS),
        "cal.spec_chars": _n(c.TOOL_SPEC_CHARS),
        "cal.estimate": _n(math.ceil((c.PROMPT_CHARS + c.TOOL_SPEC_CHARS) / 4)),
        "cal.counted": _n(c.PROMPT_TOKENS + c.TOOL_SPEC_TOKENS),
        "cal.tool_system": _n(c.TOOL_USE_SYSTEM_PROMPT_TOKENS),
        "cal.output_ratio": f"{c.OUTPUT_TEXT_RATIO:.2f}",
        "cal.tool_input_ratio": f"{c.TOOL_INPUT_RATIO:.2f}",
        "cal.tool_use_tokens": _n(c.TOOL_USE_OUTPUT_TOKENS),
    }


COST_PARTS = ("API Gateway", "Lambda", "DynamoDB", "Bedrock", "AgentCore Memory")


def cost_table(reports: Iterable[StageReport]) -> str:
    rows = [
        "| stage | " + " | ".join(COST_PARTS) + " | total |",
        "| --- | " + " | ".join("---" for _ in COST_PARTS) + " | --- |",
    ]
    for report in reports:
        cost = report.cost
        rows.append(
            f"| {report.stage.name} ({report.stage.model}) | "
            + " | ".join(f"${cost[part]:.4f}" for part in COST_PARTS)
            + f" | ${report.cost_per_hour:.2f} |"
        )
    return "\n".join(rows)


def memory_table(reports: Iterable[StageReport]) -> str:
    """Per stage: what long-term memory costs an active user-hour and a session, by part, and the
    first of its quotas to bind (at AWS's defaults)."""
    rows = [
        "| stage | per active user-hour | events | retrievals | records | per session | "
        "first AgentCore Memory quota to bind | people it holds | the target needs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for report in reports:
        if not report.stage.memory:
            rows.append(f"| {report.stage.name} | off (memory.enabled false) |" + " - |" * 7)
            continue
        a = report.memory_assumed
        hour, session = report.memory_hour, report.memory_session
        cost, per_session = memory.cost(hour, a), memory.cost(session, a)
        found = report.memory_quotas
        first = found.ranked[0] if found is not None and found.ranked else None
        quota = aws_quotas.quota(first.setting) if first is not None else None
        target = report.target or 0
        rows.append(
            f"| {report.stage.name} | ${sum(cost.values()):.4f} | ${cost['events']:.4f} ({_n(hour.events)}) | "
            f"${cost['retrievals']:.4f} ({_n(hour.retrievals, 1)}) | ${cost['records']:.4f} | "
            f"${sum(per_session.values()):.4f} ({_n(session.turns)} turns) | "
            + (
                f"{quota.name} ({quota.code}): {_n(first.value)} {first.unit}, {_n(first.per_speaker)} a speaker | "
                f"{_people(first.people)} | {_n(math.ceil(first.needed_for(target)))} for {_n(target)} |"
                if first is not None and quota is not None
                else "- | - | - |"
            )
        )
    return "\n".join(rows)


def quota_table(report: StageReport) -> str:
    """What the stage's target needs of the AWS quotas a stage states plans for: the default, the need
    (with the reservations the stage wants in force) and the plan."""
    stage, figures = report.stage, report.figures
    target = report.target or 0
    turn = stage.turn_reserved or 0
    message = stage.message_reserved or 0
    pool = functions_in_pool(stage.turn_reserved, stage.message_reserved)
    lambda_need = turn + message + max(MIN_UNRESERVED, math.ceil(target * figures.concurrency(pool)))
    tpm, rpm = aws_quotas.bedrock_tpm(stage.model), aws_quotas.bedrock_rpm(stage.model)
    lam = aws_quotas.quota("lambda_concurrency")
    rows = [
        f"| quota (Service Quotas name) | code | AWS default | {target:,} people need | cdk.json plans |",
        "| --- | --- | --- | --- | --- |",
    ]

    def plan(value: int | None) -> str:
        return "none" if value is None else _n(value)

    def default(quota: aws_quotas.Quota | None) -> str:
        if quota is None or quota.value is None:
            return "not documented"
        return _n(quota.value) + ("" if quota.documented else " (assumed: not documented)")

    if tpm is not None:
        need = math.ceil(target * tpm_per_speaker(figures, stage.in_flight_max_tokens))
        rows.append(f"| {tpm.name} | per model | {default(tpm)} | {_n(need)} | {plan(stage.bedrock_tpm)} |")
    if rpm is not None:
        need = math.ceil(target * figures.bedrock_requests)
        rows.append(f"| {rpm.name} | per model | {default(rpm)} | {_n(need)} | {plan(stage.bedrock_rpm)} |")
    planned = plan(stage.planned_concurrency)
    rows.append(f"| AWS Lambda {lam.name} | {lam.code} | {default(lam)} | {_n(lambda_need)} | {planned} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from infra.quota_readings import CDK_CONTEXT_JSON, load_context

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc is not what the report gives")
    parser.add_argument("--figures", type=Path, default=FIGURES_FILE)
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--context", type=Path, default=CDK_CONTEXT_JSON)
    args = parser.parse_args(argv)
    blocks, values = generated(load_figures(args.figures), load_context(args.context))
    text = args.doc.read_text(encoding="utf-8")
    written = render(text, blocks, values)
    if args.check:
        if written != text:
            print(f"{args.doc} is stale: run python benchmarks/capacity_doc.py", file=sys.stderr)
            return 1
        return 0
    args.doc.write_text(written, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
