"""The as-deployed figures against their goals: today -> now -> goal -> met, per stage.

Printed at the end of ``make bench-deployed`` (``benchmarks.as_deployed``). ``today`` is the release
before this one's changes: its ``make bench-deployed`` (p50, as deployed, the stages' models, with this
release's latency model: the first token grows with the request's uncached input; three seeds pooled), its
``make bench`` (the first tts.speak after the first speakable phrase, the DynamoDB requests and write
units a turn cost) and its cold imports on a quiet machine. The figures this run does not measure
are rows that name the target that does, never a number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from benchmarks.cold_import import import_ms
from benchmarks.deployed_latency import FIRST
from benchmarks.figures import percentile

GOAL_STAGES = ("prod", "dev")
SPECULATION_FLOWS = {True: "speculation on", False: "speculation off"}
"""The as-deployed flows' names (``benchmarks.as_deployed.FLOWS``) by whether they speculate."""
PHONE_NETWORK = "phone network"
"""How the phone link's waits are named (up, and down with API Gateway's egress)."""
GOAL_IMPORTS = ("lambdas.message", "lambdas.turn")
IMPORT_REPEAT = 3
SHARE_KEY = "conductor share, dev, off"


@dataclass(frozen=True)
class Goal:
    key: str
    figure: str
    today: str
    goal: float | None
    """At most this (ms); None where another target measures the figure."""
    goal_text: str
    elsewhere: str = ""
    """The target that measures it, where this run does not."""


def first_speak_key(stage: str, speculation: bool) -> str:
    return f"first speak, {stage}, {SPECULATION_FLOWS[speculation]}"


def import_key(module: str) -> str:
    return f"cold import, {module}"


# today: the release before, its make bench-deployed (p50 ms); the other rows' today: that release's
# make bench and its cold imports on a quiet machine.
_FIRST_SPEAK_TODAY = {("prod", True): 1094, ("prod", False): 1612, ("dev", True): 451, ("dev", False): 1046}
_FIRST_SPEAK_GOAL = {("prod", True): 700, ("prod", False): 1200, ("dev", True): 300, ("dev", False): 700}

GOALS: tuple[Goal, ...] = (
    *(
        Goal(
            first_speak_key(stage, speculation),
            f"{stage}, end of speech -> first tts.speak p50 (ms), {SPECULATION_FLOWS[speculation]}",
            f"{_FIRST_SPEAK_TODAY[stage, speculation]:,}",
            _FIRST_SPEAK_GOAL[stage, speculation],
            f"<= {_FIRST_SPEAK_GOAL[stage, speculation]:,}",
        )
        for stage in GOAL_STAGES
        for speculation in (True, False)
    ),
    Goal(
        SHARE_KEY,
        "the conductor's own share, dev, speculation off (ms, mean)",
        "316",
        150,
        "<= 150",
    ),
    *(
        Goal(import_key(module), f"cold import of {module}, as in Lambda, bytecode (ms)", "~350", 250, "<= 250")
        for module in GOAL_IMPORTS
    ),
    Goal(
        "first speak after the phrase",
        "first tts.speak after the first speakable phrase, p99 (ms)",
        "62.5",
        None,
        "<= 50",
        "see make bench",
    ),
    Goal(
        "dynamodb cost",
        "DynamoDB cost per 1,000 turns (plain / 100-delta / tool round)",
        "requests+WRU",
        None,
        "-40 %",
        "see make bench",
    ),
    Goal("lost launches", "early launches lost under make load", "not measured", None, "<= 5 %", "see make load"),
)


@dataclass(frozen=True)
class GoalRow:
    figure: str
    today: str
    now: str
    goal: str
    met: str


class FlowRun(Protocol):
    """What the goals read of one stage and flow's run (``benchmarks.as_deployed.FlowFigures``)."""

    stage: str
    flow: str
    first_speak_ms: list[float]
    budgets: list[dict[str, float]]


def is_conductors(kind: str) -> bool:
    """A wait the conductor's design answers for: all but the model's first token and the phone's network."""
    return kind != FIRST and not kind.startswith(PHONE_NETWORK)


def conductor_share_ms(budgets: Sequence[Mapping[str, float]]) -> float | None:
    """Mean milliseconds per turn to the first tts.speak that are the conductor's (its own work and
    the AWS calls it makes); None without a turn."""
    if not budgets:
        return None
    return sum(ms for budget in budgets for kind, ms in budget.items() if is_conductors(kind)) / len(budgets)


def _median(values: Sequence[float]) -> float | None:
    return percentile(list(values), 50) if values else None


def measured_figures(runs: Iterable[FlowRun], imports: Mapping[str, float]) -> dict[str, float | None]:
    """The goals' ``now`` from the as-deployed runs and the handlers' cold imports (ms by module)."""
    found: dict[str, float | None] = {}
    by_flow = {(run.stage, run.flow): run for run in runs}
    for stage in GOAL_STAGES:
        for speculation, flow in SPECULATION_FLOWS.items():
            run = by_flow.get((stage, flow))
            found[first_speak_key(stage, speculation)] = _median(run.first_speak_ms) if run else None
    dev_off = by_flow.get(("dev", SPECULATION_FLOWS[False]))
    found[SHARE_KEY] = conductor_share_ms(dev_off.budgets) if dev_off else None
    for module in GOAL_IMPORTS:
        found[import_key(module)] = imports.get(module)
    return found


def goal_rows(measured: Mapping[str, float | None], goals: Sequence[Goal] = GOALS) -> list[GoalRow]:
    """One row per goal: what this run measured against the goal (met: yes / NO; ``-`` unmeasured)."""
    rows = []
    for goal in goals:
        if goal.elsewhere or goal.goal is None:
            rows.append(GoalRow(goal.figure, goal.today, goal.elsewhere, goal.goal_text, ""))
            continue
        value = measured.get(goal.key)
        if value is None:
            rows.append(GoalRow(goal.figure, goal.today, "-", goal.goal_text, "-"))
            continue
        rows.append(
            GoalRow(goal.figure, goal.today, f"{value:,.0f}", goal.goal_text, "yes" if value <= goal.goal else "NO")
        )
    return rows


def report_goals(measured: Mapping[str, float | None], out: TextIO) -> None:
    print("\n== the goals, as deployed: today (the release before) -> now -> goal ==", file=out)
    print(f"  {'figure':<66}{'today':>14}{'now':>16}{'goal':>10}   met", file=out)
    for row in goal_rows(measured):
        print(f"  {row.figure:<66}{row.today:>14}{row.now:>16}{row.goal:>10}   {row.met}".rstrip(), file=out)
    print(
        f"  cold imports: as in Lambda (tracing on), best of {IMPORT_REPEAT} on this machine now "
        "(the goal is for a quiet one)",
        file=out,
    )
    print(
        "  the conductor's share: the mean to the first tts.speak less the model's first token and the phone's network",
        file=out,
    )


def _import_with_bytecode(module: str) -> float:
    return import_ms(module, bytecode=True, in_lambda=True)


def best_imports(
    modules: Sequence[str] = GOAL_IMPORTS,
    repeat: int = IMPORT_REPEAT,
    measure: Callable[[str], float] = _import_with_bytecode,
) -> dict[str, float]:
    """Each module's best cold import (ms) of ``repeat``, interleaved."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        for module in modules:
            best[module] = min(best.get(module, float("inf")), measure(module))
    return best
