"""A barge-in while a long answer streams: how soon the conductor stops, as the app and Bedrock see it.

Per turn the app asks for a long answer (``ramble 400``: some 15 s on the paced model) and barges
in ``BARGE_AFTER_S`` after its first partial, when partials have grown far apart, plus an offset
that spreads the turns evenly over one stop-check period (so the figures cover the worst moment to
barge in as well as the best). Figures:

* to idle: from the app sending its barge-in to ``convo.setState idle`` arriving;
* model after it: how long the local Bedrock endpoint still produced deltas for the stream, and
  how many characters (what Bedrock would bill for nobody);
* partials after it: partials the app received after sending its barge-in.

Run on the coalesced flow for an app that announces ``sentenceSpeech`` (its sentence commits,
about once a second, check the stream too) and for one that does not (only partials and the stop
check do), and on the naive flow (a consistent read before every delta's partial).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, TextIO

from benchmarks.figures import percentile
from benchmarks.load import TURN_TIMEOUT_S, TimedClient
from benchmarks.report import cell
from shared.wire.protocol import AssistantSpeechPartial, Event, ToolCall

LONG_ANSWER = "ramble 400"
BARGE_AFTER_S = 4.0
"""After the first partial: late enough that partials come seconds apart (growth 0.5)."""


@dataclass(frozen=True)
class BargeIn:
    to_idle_ms: float | None
    model_after_ms: float
    model_chars_after: int
    partials_after: int


def _is_partial(event: Event) -> bool:
    return isinstance(event.payload, AssistantSpeechPartial)


def _is_idle(event: Event) -> bool:
    payload = event.payload
    if not isinstance(payload, ToolCall) or payload.name != "convo.setState":
        return False
    arguments = json.loads(payload.arguments)
    return isinstance(arguments, dict) and arguments.get("state") == "idle"


async def barge_in_turn(bench: Any, timed: TimedClient, delay_s: float) -> BargeIn:
    """One long answer, interrupted; ``bench`` is the benchmark's stack with its meters."""
    client = timed.client
    mark = bench.model.mark()
    since = len(client.events)
    saying = asyncio.create_task(client.say(LONG_ANSWER, timeout=TURN_TIMEOUT_S))
    await client.wait_for(_is_partial, timeout=TURN_TIMEOUT_S, since=since)
    await asyncio.sleep(delay_s)
    stream = bench.model.since(mark)[-1]
    chars_before = len(stream.text)
    barged = time.perf_counter()
    await client.barge_in()
    await saying
    await asyncio.to_thread(bench.stack.lambda_server.wait_idle, 10.0)
    after = [(at, event) for at, event in timed.arrivals if at >= barged]
    idle_at = next((at for at, event in after if _is_idle(event)), None)
    last = stream.last_delta or barged
    return BargeIn(
        to_idle_ms=None if idle_at is None else (idle_at - barged) * 1000,
        model_after_ms=max(0.0, last - barged) * 1000,
        model_chars_after=len(stream.text) - chars_before,
        partials_after=sum(_is_partial(event) for _, event in after),
    )


async def barge_in_turns(
    bench: Any, turns: int, period_s: float, *, sentence_speech: bool, after_s: float = BARGE_AFTER_S
) -> list[BargeIn]:
    """``turns`` interrupted answers, the k-th barging in ``after_s`` plus ``k / turns`` of
    ``period_s`` after its first partial."""
    timed = TimedClient(bench.stack.ws_url, sentence_speech=sentence_speech)
    async with timed.client:
        return [await barge_in_turn(bench, timed, after_s + period_s * k / turns) for k in range(turns)]


def report_barge_in(
    by_flow: dict[str, list[BargeIn]], stop_check_ms: int, out: TextIO, *, barge_in_check_ms: int | None = None
) -> None:
    checks = f"stop check every {barge_in_check_ms} ms once shown" if barge_in_check_ms else "stop check"
    print(
        f"\n== a barge-in {BARGE_AFTER_S:g}-{BARGE_AFTER_S + stop_check_ms / 1000:g} s after the first partial "
        f"of '{LONG_ANSWER}', paced model ({checks}; goal: model output after it p50 <= 150 ms, p99 <= 300) ==",
        file=out,
    )
    flows = list(by_flow)
    print("  " + " " * 36 + "".join(f"{flow:>18}" for flow in flows), file=out)
    rows: list[tuple[str, Any]] = [
        ("to idle p50 (ms)", lambda t: [x.to_idle_ms for x in t if x.to_idle_ms is not None], 50),
        ("to idle p99 (ms)", lambda t: [x.to_idle_ms for x in t if x.to_idle_ms is not None], 99),
        ("model output after it p50 (ms)", lambda t: [x.model_after_ms for x in t], 50),
        ("model output after it p99 (ms)", lambda t: [x.model_after_ms for x in t], 99),
        ("model chars after it p50", lambda t: [float(x.model_chars_after) for x in t], 50),
        ("model chars after it p99", lambda t: [float(x.model_chars_after) for x in t], 99),
        ("partials after it (max)", lambda t: [float(x.partials_after) for x in t], 100),
    ]
    for label, values, q in rows:
        cells = []
        for flow in flows:
            found = values(by_flow[flow])
            cells.append(cell(percentile(found, q) if found else None, ".0f"))
        print(f"  {label:<36}" + "".join(f"{c:>18}" for c in cells), file=out)
