"""The conductor's hot path on the local stack, as the app sees it and as AWS would bill it.

    python benchmarks/turn_latency.py [--turns N] [--quick] [--sessions K] [--session-turns M]
        [--speculation-turns N] [--speculation-sessions K] [--speculation-processes P] [--skip-speculation]

Starts ``LocalStack``s on free loopback ports (the deployed Lambda handlers behind the local API
Gateway, DynamoDB on moto, Bedrock answered by the offline brain) and drives them with the client
stub over real WebSockets, announcing ``sentenceSpeech`` when the stub can.

Scenarios, each on the PACED model (``ModelPace``: 400 ms to the first token, ~80 tokens/s in
deltas of ~3 tokens) and on the INSTANT one, each against the NAIVE BASELINE too (the same stack
with ``CONDUCTOR_PARTIAL_FLUSH_MS=0`` and ``CONDUCTOR_PARTIAL_GROWTH=0``: one partial per delta):

* a plain short answer (``You said: ...``);
* a plain answer of 100 deltas (``ramble 100``), several sentences;
* one tool round (``call editor.openFile {...}``, answered at once by the client, then the model
  reads the result back).

Per scenario: p50/p99 of the time to the first ``assistantSpeechPartial`` and of the conductor's
overhead before it (that time minus the time the model spent before its first text, measured at
the local Bedrock endpoint), the time to the first ``tts.speak``; per turn the DynamoDB requests
by operation, the BLOCKING ones before the first partial (the longest chain of one-after-another
DynamoDB round trips, as the conductor's client issued and got them, that completed between the
transcript and the post of the first partial, except those that ended in the shadow of the
model, after its request went out and before its first text), WRU
and RRU (``benchmarks.capacity``), and the posts and bytes posted to the connection.

Then: the first partial and first ``tts.speak`` with thinking off (the stages' default) and left on
(``benchmarks.thinking``), the cost of 1,000 turns at list prices (``benchmarks.costs``), how soon a barge-in stops a
long answer (``benchmarks.barge_in``), how much sooner speculative turns start the answer of an app that
sends partial transcripts and what the speculations the final did not confirm cost
(``benchmarks.speculation``), the handlers' cold import time
(``benchmarks.cold_import``), what a desktop companion's workspace context costs a turn
(``benchmarks.context_cost``) and K sessions taking M turns each at once on the paced model (turns
completed, events lost: a turn without ``idle`` or a final without the whole text; p50/p99 of the
first partial).

These are LOOPBACK figures with moto: the conductor's own overhead, not AWS latency. Deployed,
every DynamoDB call and post adds its network and service time, which is why the counts and the
blocking chain matter more than the milliseconds here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.barge_in import BargeIn, barge_in_turns, report_barge_in
from benchmarks.bench_stack import NAIVE_ENV, STACK_ENV, Bench, bench_stack
from benchmarks.cold_import import cold_imports
from benchmarks.devices_bench import report_devices, three_devices
from benchmarks.figures import Result, Scenario, percentile
from benchmarks.first_phrase import report as report_first_phrase
from benchmarks.hot_path_table import measured, report_table
from benchmarks.load import PLAIN, TimedClient, sessions_in_own_process
from benchmarks.measured_turn import measured_turn
from benchmarks.report import cell, report_costs, report_scenario
from benchmarks.speculation import speculation_flows
from benchmarks.speculation_report import report_speculation
from benchmarks.thinking import FLOWS as THINKING_FLOWS
from benchmarks.thinking import MODEL_ID as THINKING_MODEL
from benchmarks.thinking import report_thinking
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.stack import LocalStack
from shared.flows.config import Settings

RAMBLE = "ramble 100"
RAMBLE_NAME = "plain 100-delta answer"
THINKING_TURNS = 3  # a thinking turn on the paced model takes seconds: a few show the difference
TOOL = 'call editor.openFile {"path": "Sources/App/main.swift"}'
PACE_ENV = "CONDUCTOR_LOCAL_MODEL_PACE"


async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"opened": arguments.get("path"), "lines": 120}


async def run_scenario(bench: Bench, scenario: Scenario) -> Result:
    """One fresh session: a warm-up turn (not counted), then ``scenario.turns`` turns back to back."""
    result = Result()
    timed = TimedClient(bench.stack.ws_url, {"editor.openFile": open_file} if scenario.tools else None)
    async with timed.client:
        await measured_turn(bench, timed, PLAIN)
        for _ in range(scenario.turns):
            result.turns.append(await measured_turn(bench, timed, scenario.text))
    return result


# ---- report --------------------------------------------------------------------------------------


def scenarios_for(turns: int) -> list[Scenario]:
    return [
        Scenario("plain short answer", PLAIN, turns),
        Scenario(RAMBLE_NAME, RAMBLE, max(2, turns // 2)),
        Scenario("one tool round", TOOL, turns, tools=True),
    ]


def report_load(pace: ModelPace, sessions: int, turns: int, out: TextIO) -> None:
    """The sessions at once: the apps in a process of their own, the stack's DynamoDB, Bedrock and
    Lambda service (the turn runner) each in another, as on AWS (no meters look into them here);
    and the CPU time each process spent per turn."""
    with (
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stdout(quiet),
        LocalStack(port=0, quiet=True, env=STACK_ENV, model_pace=pace, service_processes=True) as stack,
    ):
        services = {
            "gateway and $default": None,
            "turn runner": stack.lambda_server,
            "Bedrock stand-in": stack.bedrock_server,
            "DynamoDB stand-in (moto)": stack._moto,
        }
        before = {name: _cpu_seconds(service) for name, service in services.items()}
        run = sessions_in_own_process(stack.ws_url, sessions, turns)
        spent = {name: _cpu_seconds(service) - before[name] for name, service in services.items()}
    load = run.turns
    lost = sum(not t.completed or not t.final_complete for t in load)
    done = sum(t.completed for t in load)
    firsts = [t.first_partial_ms for t in load if t.first_partial_ms is not None]
    p50, p99 = (percentile(firsts, 50), percentile(firsts, 99)) if firsts else (None, None)
    print(f"\n== {sessions} sessions x {turns} turns at once, paced model ==", file=out)
    print("  processes: the apps' stubs; DynamoDB; Bedrock; the turn runner; the gateway and $default", file=out)
    print(f"  turns completed {done}/{sessions * turns} in {run.seconds:.1f} s; events lost: {lost}", file=out)
    print(f"  first partial p50 {cell(p50, '.0f')} ms, p99 {cell(p99, '.0f')} ms", file=out)
    per_turn = {**spent, "the apps' client stubs": run.apps_cpu_s}
    total = sum(per_turn.values())
    print(
        f"  CPU per turn, {total * 1000 / max(1, len(load)):.0f} ms on {os.cpu_count()} cores: "
        + ", ".join(f"{name} {seconds * 1000 / max(1, len(load)):.0f}" for name, seconds in per_turn.items()),
        file=out,
    )


def _cpu_seconds(service: Any) -> float:
    """CPU time of a service process so far; of this process (the gateway and $default) for None."""
    if service is None:
        return time.process_time()
    return service.cpu_seconds() or 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10, help="turns per scenario (half for the long answer)")
    parser.add_argument("--sessions", type=int, default=50, help="sessions at once in the load phase")
    parser.add_argument("--session-turns", type=int, default=10, help="turns per session in the load phase")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3 turns per scenario, 4 spoken turns per speculation flow, 10 sessions x 3 turns, imports measured once",
    )
    parser.add_argument(
        "--pace",
        default=os.environ.get(PACE_ENV, "paced"),
        help=f"the paced model: paced or <first token ms>:<tokens per s> (default: ${PACE_ENV} or paced)",
    )
    parser.add_argument(
        "--speculation-turns", type=int, default=40, help="spoken turns per speculation flow (--quick: 4)"
    )
    parser.add_argument("--speculation-sessions", type=int, default=1, help="sessions at once in a speculation flow")
    parser.add_argument(
        "--speculation-processes",
        type=int,
        help="speculation flows at once, each in a process of its own (default 2; --quick: 4; 4 takes half the "
        "time but starts a few more speculations on partials that come late, widening p99)",
    )
    parser.add_argument("--skip-speculation", action="store_true", help="leave out the speculative turns")
    parser.add_argument("--skip-load", action="store_true", help="leave out the concurrent sessions")
    parser.add_argument("--skip-imports", action="store_true", help="leave out the cold import times")
    parser.add_argument("--load-only", action="store_true", help="only the concurrent sessions (in this process)")
    parser.add_argument(
        "--as-deployed",
        action="store_true",
        help="only the person-felt figures with AWS's latencies put in, per stage (benchmarks/as_deployed.py)",
    )
    args = parser.parse_args(argv)
    turns, sessions, session_turns = max(1, args.turns), max(1, args.sessions), max(1, args.session_turns)
    speculation_turns, speculation_processes = max(1, args.speculation_turns), 2
    if args.quick:
        turns, sessions, session_turns = 3, 10, 3
        speculation_turns, speculation_processes = 4, 4
    speculation_processes = max(1, args.speculation_processes or speculation_processes)
    pace = ModelPace.parse(args.pace) or ModelPace()

    out = sys.stdout
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    if args.load_only:
        report_load(pace, sessions, session_turns, out)
        return 0
    if args.as_deployed:
        from benchmarks.as_deployed import run_as_deployed

        return run_as_deployed(out, quick=args.quick)
    began = time.perf_counter()
    print("VoiceIDE conductor: the hot path on the local stack (loopback, moto DynamoDB, offline brain)", file=out)
    print(
        f"paced model: first token {pace.first_token_s * 1000:.0f} ms, {pace.tokens_per_s:g} tokens/s, "
        f"~{pace.tokens_per_delta} tokens per delta; naive = {NAIVE_ENV}",
        file=out,
    )
    scenarios = scenarios_for(turns)
    with bench_stack(None, False) as bench:  # not counted: the process's first stack pays lazy imports
        for scenario in scenarios:
            asyncio.run(run_scenario(bench, Scenario(scenario.name, scenario.text, 1, scenario.tools)))
    results: dict[tuple[str, str, bool], Result] = {}
    for pace_name, model_pace in (("paced", pace), ("instant", None)):
        for naive in (False, True):
            with bench_stack(model_pace, naive) as bench:
                for scenario in scenarios:
                    results[scenario.name, pace_name, naive] = asyncio.run(run_scenario(bench, scenario))
    for scenario in scenarios:
        by_flow = {(p, n): results[scenario.name, p, n] for p in ("paced", "instant") for n in (False, True)}
        report_scenario(scenario, by_flow, ["paced", "instant"], out)
    report_costs(scenarios, results, out)
    out.flush()

    thinking: dict[str, dict[str, Result]] = {}
    for flow, flow_env in THINKING_FLOWS:
        with bench_stack(pace, False, {"BEDROCK_MODEL_ID": THINKING_MODEL, **flow_env}) as bench:
            thinking[flow] = {
                s.name: asyncio.run(run_scenario(bench, replace(s, turns=THINKING_TURNS)))
                for s in scenarios
                if s.name != RAMBLE_NAME
            }
    report_thinking(thinking, out)
    out.flush()

    stop_check_ms = Settings.from_env({**os.environ, **STACK_ENV}).stop_check_ms
    barge_ins: dict[str, list[BargeIn]] = {}
    for flow, naive, sentence_speech in (
        ("new, sentenceSpeech", False, True),
        ("new, plain app", False, False),
        ("naive, plain app", True, False),
    ):
        with bench_stack(pace, naive) as bench:
            barge_ins[flow] = asyncio.run(
                barge_in_turns(bench, turns, stop_check_ms / 1000, sentence_speech=sentence_speech)
            )
    barge_in_check_ms = Settings.from_env({**os.environ, **STACK_ENV}).barge_in_check_ms
    report_barge_in(barge_ins, stop_check_ms, out, barge_in_check_ms=barge_in_check_ms)
    out.flush()

    if not args.skip_speculation:
        at_once = max(1, args.speculation_sessions)
        speculation = speculation_flows(speculation_turns, at_once, processes=speculation_processes)
        stable_ms = Settings.from_env({**os.environ, **STACK_ENV}).speculation_stable_ms
        report_speculation(speculation, out, stable_ms=stable_ms, sessions=at_once, processes=speculation_processes)
        out.flush()

    imports: dict[str, tuple[float, float]] | None = None
    if not args.skip_imports:
        print("\n== cold import of the handlers (ms, best of a few, fresh interpreter) ==", file=out)
        imports = cold_imports(1 if args.quick else 3)
        for module, (warm, cold) in imports.items():
            print(f"  {module:<20} with bytecode {warm:>7.0f}   without (compiled from source) {cold:>7.0f}", file=out)
        from benchmarks.cold_start import report_cold_start

        report_cold_start(imports, out)
        out.flush()

    if not args.skip_load:  # from a fresh interpreter: nothing of the stacks above in its heap
        load = ["--load-only", "--pace", args.pace, "--sessions", str(sessions), "--session-turns", str(session_turns)]
        subprocess.run([sys.executable, str(Path(__file__).resolve()), *load], check=True)

    report_first_phrase(out, pace, sweep=False)
    report_devices(three_devices(2 if args.quick else 5), out)
    from benchmarks.context_cost import DEFAULT_TURNS, QUICK_TURNS, context_cost, report_context_cost  # uses this

    report_context_cost(context_cost(pace, QUICK_TURNS if args.quick else DEFAULT_TURNS), out)
    from benchmarks.memory_cost import main as memory_cost

    print("\n== what remembering the person costs a session (benchmarks/memory_cost.py)", file=out)
    memory_cost(["--sessions", "2" if args.quick else "3"], out)
    out.flush()
    print("\n== what a call of a tool on an MCP server adds (benchmarks/mcp_cost.py)", file=out, flush=True)
    mcp = [
        sys.executable,
        str(Path(__file__).resolve().parent / "mcp_cost.py"),
        "--calls",
        "50" if args.quick else "200",
    ]
    subprocess.run(mcp, check=True, stdout=out if out is not sys.stdout else None)
    report_table(measured(results, barge_ins, imports, pace), out)
    print(f"\ntotal {time.perf_counter() - began:.1f} s", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
