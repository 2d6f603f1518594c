"""A cold ``$connect`` and first turn, as measured: a fresh interpreter imports the handlers, starts
a local stack and opens the first connection and turn of its life (every client built, every lazy
import paid on that path), then a second session does the same on the now warm stack.

Deployed, ``$connect``, ``$default`` and the turn runner are three functions: when all three are
cold, each pays Lambda's init and its own import on the first turn's path, one after another. The
report adds them (the imports as measured here, the init as ``benchmarks.aws_latencies`` has it) to
the loopback figures to give the cold first turn a person would wait for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from benchmarks import aws_latencies as aws
from benchmarks.cold_import import IMPORT_ENV, ROOT, outside_lambda_imports

HANDLERS = ("lambdas.connect", "lambdas.message", "lambdas.turn")

_CHILD = r"""
import asyncio, contextlib, json, os, sys, time
began = time.perf_counter()
imports = {}
for module in %(handlers)r:
    at = time.perf_counter()
    __import__(module)
    imports[module] = (time.perf_counter() - at) * 1000
from benchmarks.load import PLAIN, TimedClient
from conductor_local.stack import LocalStack
from benchmarks.bench_stack import STACK_ENV

async def session(url):
    timed = TimedClient(url)
    at = time.perf_counter()
    await timed.client.connect(retries=0)
    connected = (time.perf_counter() - at) * 1000
    sent = time.perf_counter()
    await timed.client.say(PLAIN, timeout=60)
    done = (time.perf_counter() - sent) * 1000
    first = next((t for t, e in timed.arrivals if type(e.payload).__name__ == "AssistantSpeechPartial"), None)
    await timed.client.close()
    return {"connect_ms": connected, "first_partial_ms": None if first is None else (first - sent) * 1000,
            "turn_ms": done}

with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
    with LocalStack(port=0, quiet=True, env=STACK_ENV) as stack:
        cold = asyncio.run(session(stack.ws_url))
        warm = asyncio.run(session(stack.ws_url))
print(json.dumps({"imports": imports, "cold": cold, "warm": warm}))
"""


def cold_first_turn() -> dict[str, Any]:
    """The child's figures: in-process imports (one after another: later ones share modules), the
    first and a second session's connect, first partial and whole turn (ms)."""
    env = {**os.environ, **IMPORT_ENV, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD % {"handlers": HANDLERS}],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"the cold stack failed: {run.stderr[-800:]}")
    return json.loads(lines[-1])


def report_cold_start(
    imports: dict[str, tuple[float, float]], out: TextIO, outside: dict[str, float] | None = None
) -> None:
    """``imports``: ``cold_import.cold_imports()`` (per handler, as in Lambda: with bytecode, without);
    ``outside``: ``cold_import.outside_lambda_imports()``, measured here when not given."""
    if outside is None:
        outside = outside_lambda_imports(1)
    print(
        "  the same imports outside Lambda, tracing off (no X-Ray SDK), bytecode: "
        + ", ".join(f"{module} {ms:.0f}" for module, ms in outside.items())
        + " ms",
        file=out,
    )
    figures = cold_first_turn()
    cold, warm = figures["cold"], figures["warm"]
    print(
        "\n== cold $connect + first turn (a fresh stack in a fresh interpreter, loopback, instant model) ==", file=out
    )

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    print(
        f"  first session:  connect {ms(cold['connect_ms'])} ms, first partial {ms(cold['first_partial_ms'])} ms, "
        f"turn {ms(cold['turn_ms'])} ms (every client built and every lazy import paid on the way)",
        file=out,
    )
    print(
        f"  second session: connect {ms(warm['connect_ms'])} ms, first partial {ms(warm['first_partial_ms'])} ms, "
        f"turn {ms(warm['turn_ms'])} ms",
        file=out,
    )
    extra = (cold["connect_ms"] - warm["connect_ms"]) + (
        (cold["first_partial_ms"] or 0) - (warm["first_partial_ms"] or 0)
    )
    own = {
        module: imports.get(module, (0.0, 0.0))[0] for module in ("lambdas.connect", "lambdas.message", "lambdas.turn")
    }
    deployed = 3 * aws.LAMBDA_INIT.p50_ms + sum(own.values()) + extra
    print(
        "  deployed, all three functions cold ($connect, $default, the turn runner one after another): "
        f"3 x Lambda init p50 {aws.LAMBDA_INIT.p50_ms:.0f} + imports "
        + " + ".join(f"{ms(v)}" for v in own.values())
        + f" (as in Lambda) + first calls {extra:.0f} = {deployed:.0f} ms more than a warm first turn",
        file=out,
    )


if __name__ == "__main__":  # pragma: no cover - a manual run
    from benchmarks.cold_import import cold_imports

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    report_cold_start(cold_imports(1), sys.stdout)
