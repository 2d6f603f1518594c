"""One measured turn on the bench's local stack: its latencies from the client's side, and the
DynamoDB requests, posts and model streams the conductor made for it (the blocking chain before the
first partial: requests one after another, a model request's wait counted once)."""

from __future__ import annotations

import asyncio
import math
import time

from benchmarks.bench_stack import Bench
from benchmarks.figures import TurnFigures
from benchmarks.load import TURN_TIMEOUT_S, TimedClient
from benchmarks.meters import DynamoRequest, ModelStream
from shared.wire.protocol import AssistantSpeechFinal, AssistantSpeechPartial, ToolCall
from voiceide_client.conversation.turn import TurnTimeout

TOOL_NAME = "editor.openFile"  # the tool round's call: its result starts the round's timings


def longest_chain(requests: list[DynamoRequest]) -> int:
    """The most requests that ran one after another (each started after the previous ended)."""
    chain, last_end = 0, -math.inf
    for request in sorted(requests, key=lambda r: r.ended):
        if request.started >= last_end:
            chain, last_end = chain + 1, request.ended
    return chain


def blocking_chain(
    round_trips: list[DynamoRequest],
    streams: list[ModelStream],
    sends: list[float],
    partial_at: float,
    invokes: list[tuple[float, float]] = (),  # type: ignore[assignment]
) -> int:
    """The DynamoDB round trips the first partial waited for: the longest chain of one-after-another
    round trips (as the conductor's client issued and got them) that ended before it, leaving out
    those that ended while the model was working on the stream that spoke (after its request went
    out, before its first text: they cost the user nothing) and those in flight alongside a launch
    of the turn runner (a write issued with the Invoke that starts the turn: the runner does not
    wait for it before asking the model)."""
    alongside = [
        r for r in round_trips if any(r.started <= answered and r.ended >= issued for issued, answered in invokes)
    ]
    before = [r for r in round_trips if r.ended <= partial_at and r not in alongside]
    speaking = [s for s in streams if s.requested <= partial_at and s.first_text is not None]
    if not speaking:
        return longest_chain(before)
    stream = speaking[-1]
    assert stream.first_text is not None
    sent = max((at for at in sends if at <= stream.requested), default=stream.requested)
    return longest_chain([r for r in before if r.ended <= sent or r.ended >= stream.first_text])


def model_wait_ms(streams: list[ModelStream], until: float) -> float:
    """How long the model worked before its first text (up to ``until``): every stream's time from
    request to its first text, or to its end when it had none (a tool use)."""
    total = 0.0
    for stream in streams:
        if stream.requested >= until:
            continue
        stop = stream.first_text or stream.ended or until
        total += max(0.0, min(stop, until) - stream.requested)
    return total * 1000


async def measured_turn(bench: Bench, timed: TimedClient, text: str) -> TurnFigures:
    marks = bench.marks()
    arrived_at, sent_at = len(timed.arrivals), len(timed.client.sent)
    sent = time.perf_counter()
    completed = True
    try:
        await timed.client.say(text, timeout=TURN_TIMEOUT_S)
    except TurnTimeout:
        completed = False
    ended = time.perf_counter()
    assert bench.stack.lambda_server is not None
    await asyncio.to_thread(bench.stack.lambda_server.wait_idle, 10.0)
    await asyncio.sleep(0.02)
    dynamo = [r for r in bench.dynamo.since(marks[0]) if r.started >= sent]
    round_trips = [r for r in bench.dynamo.round_trips_since(marks[4]) if r.started >= sent]
    posts = bench.posts.since(marks[1])
    streams = bench.model.since(marks[2])
    arrivals = timed.arrivals[arrived_at:]
    first_partial = next((at for at, e in arrivals if isinstance(e.payload, AssistantSpeechPartial)), None)
    first_speak = next(
        (at for at, e in arrivals if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"), None
    )
    finals = [e.payload.text for _, e in arrivals if isinstance(e.payload, AssistantSpeechFinal)]
    said = "".join(stream.text for stream in streams)
    partial_post = next((p.at for p in posts if p.kind == "assistantSpeechPartial"), None)
    invokes = [(issued, answered) for issued, answered in bench.dynamo.invokes if issued >= sent]
    # A tool round: from the $default invocation that took the app's result to the answer's first partial.
    asked_tool = next(
        (at for at, e in arrivals if isinstance(e.payload, ToolCall) and e.payload.name == TOOL_NAME), None
    )
    result_at = (
        None
        if asked_tool is None
        else next(
            (start for fn, start, _ in bench.lambdas.since(marks[3]) if fn == "message" and start >= asked_tool), None
        )
    )
    partial_after = (
        None
        if result_at is None
        else next((p.at for p in posts if p.kind == "assistantSpeechPartial" and p.at >= result_at), None)
    )
    return TurnFigures(
        completed=completed,
        final_complete=bool(finals) and " ".join(finals[-1].split()) == " ".join(streams[-1].text.split())
        if streams
        else bool(finals) or not said,
        first_partial_ms=None if first_partial is None else (first_partial - sent) * 1000,
        overhead_ms=None
        if first_partial is None
        else (first_partial - sent) * 1000 - model_wait_ms(streams, first_partial),
        first_speak_ms=None if first_speak is None else (first_speak - sent) * 1000,
        turn_s=ended - sent,
        dynamo=dynamo,
        blocking=None
        if partial_post is None
        else blocking_chain(round_trips, streams, bench.model.sends_since(sent), partial_post, invokes),
        blocking_after_result=None
        if result_at is None or partial_after is None
        else blocking_chain(
            [r for r in round_trips if r.started >= result_at],
            [s for s in streams if s.requested >= result_at],
            bench.model.sends_since(result_at),
            partial_after,
            invokes,
        ),
        posts=posts,
        streams=streams,
        lambda_calls=bench.lambdas.since(marks[3]),
        client_frames=len(timed.client.sent) - sent_at,
    )


# ---- scenarios -----------------------------------------------------------------------------------
