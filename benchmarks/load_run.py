"""``make load``: many people talking at once to the local stack, and the capacity model beside it.

    python benchmarks/load_run.py [--sessions 200] [--stagger 180] [--figures FILE] [--no-speculation]

``--sessions`` people (``benchmarks.talker.LOAD_SESSIONS``: two or three utterances each at
recognizer pace, think-time between them, a barge-in or a background build in half of them) start
evenly spread over ``--stagger`` seconds, so they overlap without all speaking in the same second.
The apps' client stubs run in a process of their own; the stack runs with ``service_processes``
(DynamoDB, Bedrock and the Lambda service each in a process beside the gateway's), speculation on,
the model paced (400 ms to the first token, ~80 tokens/s). The run stops by itself: every session
ends after its script, and the whole run is cut at ``DEADLINE_S`` (what had not finished counts as
lost).

Printed: turns answered and lost (a turn without its answer or ``idle``, a background report that
never came), p50/p99 from the final transcript to the first partial and to the first
``tts.speak``, the CPU each process spent per turn, and per turn what the capacity model's
per-speaker figures predict (frames in, posts out, ``$default`` invocations) beside what the
gateway counted; and the finals' turns launched alongside their writes (``shared.flows.early_launch``),
those held back by an announced memory write, and the share of early launches whose write lost its
race (their model request was wasted), with their model tokens and share of the run's (as the
turns' ``turnUsage`` events reported them). With speculation on, the partials before each final make it
launch after its write: ``--no-speculation`` runs the same people with speculation off. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.capacity_model import Flow, SpeakerFigures
from benchmarks.figures import percentile
from benchmarks.meters import PostMeter
from benchmarks.talker import LOAD_SESSIONS, SpokenTurn, talk, tools
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.stack import LocalStack
from shared.flows.early_launch import EARLY_LAUNCHES_HELD_METRIC, EARLY_LAUNCHES_METRIC, EARLY_WRITES_LOST_METRIC
from shared.wire.protocol import TurnUsage
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

DEADLINE_S = 540.0
"""The whole run ends within 9 minutes whatever happens (the stack's start and stop fit in the 10th)."""
STACK_ENV = {
    "CONDUCTOR_TURN_RESERVE_MS": "1000",
    "CONDUCTOR_MAX_TURNS_PER_MINUTE": "1000000",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
    "CONDUCTOR_SPECULATION": "true",
}
USAGE_WAIT_S = 2.0  # at most, after a session's script, for its turns' last ``turnUsage``
ROUTES = {"$default": "message", "$connect": "connect", "$disconnect": "disconnect"}


@dataclass
class Tokens:
    """The model tokens the turns' ``turnUsage`` events reported."""

    answered: int = 0
    """Of the turns' own requests: input (cache reads and writes included) and output."""
    dropped_input: int = 0
    """Of requests dropped before anyone heard them (``speculationInputTokens``): speculations on
    partial speech and early launches whose write lost its race."""
    dropped_output: int = 0

    def add(self, usage: TurnUsage) -> None:
        self.answered += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens + usage.output_tokens
        self.dropped_input += usage.speculation_input_tokens
        self.dropped_output += usage.speculation_output_tokens

    @property
    def dropped(self) -> int:
        return self.dropped_input + self.dropped_output

    @classmethod
    def total(cls, all_tokens: list[Tokens]) -> Tokens:
        summed = cls()
        for tokens in all_tokens:
            summed.answered += tokens.answered
            summed.dropped_input += tokens.dropped_input
            summed.dropped_output += tokens.dropped_output
        return summed


@dataclass
class SessionResult:
    turns: list[SpokenTurn] = field(default_factory=list)
    reports_expected: int = 0
    reports: int = 0
    frames_sent: int = 0
    finished: bool = False
    tokens: Tokens = field(default_factory=Tokens)


@dataclass
class AppsRun:
    sessions: list[SessionResult]
    seconds: float
    cpu_s: float


async def _one(url: str, index: int, delay: float, into: SessionResult) -> None:
    await asyncio.sleep(delay)
    script = LOAD_SESSIONS[index % len(LOAD_SESSIONS)]
    into.reports_expected = sum(u.await_report for u in script)
    client = ConductorClient(url, session_id=str(uuid.uuid4()), tools=tools(), backoff=scaled_backoff(0.05))
    await client.connect(retries=5)
    try:
        turns, reports = await talk(client, script)
        into.turns, into.reports = turns, reports
        into.frames_sent = len(client.sent)
        into.finished = True
        with contextlib.suppress(TimeoutError):  # the last turn's ``turnUsage`` comes after its idle
            await client.wait_until(lambda: len(client.usages) >= len(turns) + reports, timeout=USAGE_WAIT_S)
    finally:
        for usage in client.usages:
            into.tokens.add(usage)
        await client.close()


async def _all(url: str, sessions: int, stagger_s: float) -> list[SessionResult]:
    results = [SessionResult() for _ in range(sessions)]
    spacing = stagger_s / max(1, sessions - 1)
    tasks = [asyncio.create_task(_one(url, i, i * spacing, results[i])) for i in range(sessions)]
    done, pending = await asyncio.wait(tasks, timeout=DEADLINE_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        if task.exception() is not None:
            print(f"  a session failed: {task.exception()!r}", file=sys.stderr)
    return results


def _apps(url: str, sessions: int, stagger_s: float) -> AppsRun:
    began, cpu = time.perf_counter(), time.process_time()
    results = asyncio.run(_all(url, sessions, stagger_s))
    return AppsRun(results, time.perf_counter() - began, time.process_time() - cpu)


class RouteCounts:
    """Invocations and seconds of the gateway's routes (this process runs them)."""

    def __init__(self, gateway: Any) -> None:
        self.count: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        call = gateway._call

        def counted(handler: Any, event: Any, route: str) -> Any:
            began = time.perf_counter()
            try:
                return call(handler, event, route)
            finally:
                name = ROUTES.get(route, route)
                with self._lock:
                    self.count[name] = self.count.get(name, 0) + 1
                    self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began

        gateway._call = counted


class LaunchCounts:
    """``$default``'s counts of early launches (this process runs it), passing everything on."""

    NAMES = (EARLY_LAUNCHES_METRIC, EARLY_LAUNCHES_HELD_METRIC, EARLY_WRITES_LOST_METRIC)

    def __init__(self, service: Any) -> None:
        self.count_of: dict[str, int] = dict.fromkeys(self.NAMES, 0)
        self._lock = threading.Lock()
        self._inner = service.metrics
        service.metrics = self

    def count(self, name: str, value: int = 1) -> None:
        if name in self.count_of:
            with self._lock:
                self.count_of[name] += value
        self._inner.count(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self._inner.timing(name, milliseconds)


def _cpu(service: Any) -> float:
    return time.process_time() if service is None else (service.cpu_seconds() or 0.0)


def run(sessions: int, stagger_s: float, figures: SpeakerFigures | None, speculation: bool = True) -> None:
    from lambdas import runtime

    out = sys.stdout
    began = time.perf_counter()
    env = {**STACK_ENV, "CONDUCTOR_SPECULATION": "true" if speculation else "false"}
    with (
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stdout(quiet),
        LocalStack(port=0, quiet=True, env=env, model_pace=ModelPace(), service_processes=True) as stack,
    ):
        assert stack.gateway is not None
        posts = PostMeter(stack.gateway)
        routes = RouteCounts(stack.gateway)
        launches = LaunchCounts(runtime.service())
        services = {
            "gateway and $default": None,
            "Lambda service (turn runner, watcher)": stack.lambda_server,
            "Bedrock stand-in": stack.bedrock_server,
            "DynamoDB stand-in (moto)": stack._moto,
        }
        before = {name: _cpu(service) for name, service in services.items()}
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            apps = pool.submit(_apps, stack.ws_url, sessions, stagger_s).result()
        time.sleep(1.0)  # the last $disconnects
        spent = {name: _cpu(service) - before[name] for name, service in services.items()}
        posted = len(posts.since(0))
    report(apps, spent, posted, routes, figures, sessions, stagger_s, time.perf_counter() - began, out)
    report_launches(launches, speculation, Tokens.total([s.tokens for s in apps.sessions]), out)


def report_launches(launches: LaunchCounts, speculation: bool, tokens: Tokens, out: Any) -> None:
    """Early launches, and the share whose write lost its race: lost / launched alongside a write;
    then what their model requests spent, against all the run's model tokens (``turnUsage``: a lost
    launch's tokens join the session's dropped requests', reported by the turn that answers)."""
    early = launches.count_of[EARLY_LAUNCHES_METRIC]
    held = launches.count_of[EARLY_LAUNCHES_HELD_METRIC]
    lost = launches.count_of[EARLY_WRITES_LOST_METRIC]
    share = f"{100 * lost / early:.1f} % of early launches" if early else "no early launch"
    print(
        f"  finals launched alongside their write {early} (speculation {'on' if speculation else 'off'}), "
        f"held back by an announced memory write {held}; writes lost {lost}: {share}",
        file=out,
    )
    print(f"  {lost_tokens_line(lost, speculation, tokens)}", file=out)


def lost_tokens_line(lost: int, speculation: bool, tokens: Tokens) -> str:
    """The lost launches' tokens and their share of the run's model tokens. With speculation on,
    the dropped requests' tokens also hold the dropped speculations': theirs are at most that."""
    everything = tokens.answered + tokens.dropped
    share = f"{100 * tokens.dropped / everything:.2f} % of the run's {everything:,} model tokens" if everything else ""
    spent = f"{tokens.dropped_input:,} in / {tokens.dropped_output:,} out"
    if not speculation:
        return f"lost early launches' model tokens (turnUsage) {spent}: {share or 'no model token'}"
    if not lost:
        dropped = f"dropped speculations' {spent}" + (f": {share}" if share else "")
        return f"lost early launches' model tokens 0 (none lost); {dropped}"
    return f"lost early launches' model tokens at most the dropped requests' (speculations too) {spent}: {share}"


def report(
    apps: AppsRun,
    spent: dict[str, float],
    posted: int,
    routes: RouteCounts,
    figures: SpeakerFigures | None,
    sessions: int,
    stagger_s: float,
    wall_s: float,
    out: Any,
) -> None:
    turns = [t for s in apps.sessions for t in s.turns]
    expected = sum(len(LOAD_SESSIONS[i % len(LOAD_SESSIONS)]) for i in range(sessions))
    answered = sum(t.answered for t in turns)
    reports = sum(s.reports for s in apps.sessions)
    reports_expected = sum(s.reports_expected for s in apps.sessions)
    lost = (expected - answered) + (reports_expected - reports)
    all_turns = answered + reports
    print(f"\n== load: {sessions} sessions talking, starts spread over {stagger_s:.0f} s ==", file=out)
    print(
        f"  sessions finished {sum(s.finished for s in apps.sessions)}/{sessions}; "
        f"turns answered {answered}/{expected} "
        f"(barge-ins {sum(t.barged_in for t in turns)}), background reports {reports}/{reports_expected}; "
        f"lost {lost}",
        file=out,
    )
    print(f"  the apps took {apps.seconds:.0f} s; the whole run {wall_s:.0f} s", file=out)
    for label, pick in (
        ("first partial", lambda t: t.first_partial_ms),
        ("first tts.speak", lambda t: t.first_speak_ms),
    ):
        values = [v for v in map(pick, turns) if v is not None]
        if values:
            print(
                f"  {label} after the final: p50 {percentile(values, 50):.0f} ms, "
                f"p99 {percentile(values, 99):.0f} ms ({len(values)} turns)",
                file=out,
            )
    per_turn = {**spent, "the apps' client stubs": apps.cpu_s}
    total = sum(per_turn.values())
    n = max(1, all_turns)
    print(
        f"  CPU per turn {total * 1000 / n:.0f} ms on {os.cpu_count()} cores: "
        + ", ".join(f"{name} {seconds * 1000 / n:.0f}" for name, seconds in per_turn.items()),
        file=out,
    )
    frames = sum(s.frames_sent for s in apps.sessions)
    measured = {
        "frames in (route requests)": frames / n,
        "posts out": posted / n,
        "$default invocations": routes.count.get("message", 0) / n,
        "$connect invocations": routes.count.get("connect", 0) / n,
    }
    print("  per turn              measured   the model's speaker (make capacity)", file=out)
    predicted = {}
    if figures is not None and figures.turns:
        per = 1.0 / figures.turns
        predicted = {
            "frames in (route requests)": figures.ws_in * per,
            "posts out": figures.posts * per,
            "$default invocations": figures.invocations.get("message", 0.0) * per,
            "$connect invocations": figures.connects * per,
        }
    for name, value in measured.items():
        guess = predicted.get(name)
        print(f"    {name:<28}{value:>8.2f}   {'' if guess is None else f'{guess:.2f}'}", file=out)
    if figures is not None and figures.turns:
        per = 1.0 / figures.turns
        print(
            f"  the model's speaker per turn, not countable with the services in processes of their own: "
            f"DynamoDB {figures.dynamodb_requests * per:.1f} requests, {figures.rru * per:.1f} RRU, "
            f"{figures.wru * per:.1f} WRU; Bedrock {figures.bedrock_requests * per:.2f} requests, "
            f"{figures.input_tokens * per:,.0f} input and {figures.output_tokens * per:,.0f} output tokens",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--stagger", type=float, default=180.0, help="seconds over which the sessions start")
    parser.add_argument("--figures", type=Path, help="per-speaker figures saved by make capacity (--save)")
    parser.add_argument(
        "--no-speculation", dest="speculation", action="store_false", help="speculation off: finals launch early"
    )
    args = parser.parse_args(argv)
    sessions = max(1, min(args.sessions, 2000))
    stagger = min(max(0.0, args.stagger), DEADLINE_S / 2)
    figures = None
    if args.figures:
        raw = json.loads(args.figures.read_text(encoding="utf-8"))
        chosen = next((f for f in raw if f["speculation"] == args.speculation), raw[0])
        figures = SpeakerFigures.from_json(chosen)
    else:
        from benchmarks.speaker_meter import measure

        said = "on" if args.speculation else "off"
        print(f"measuring one speaker for the model's figures (speculation {said})...", flush=True)
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            figures = pool.submit(measure, Flow.local(args.speculation)).result()
    run(sessions, stagger, figures, args.speculation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
