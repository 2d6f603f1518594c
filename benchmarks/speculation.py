"""Speculative turns: how much sooner the answer starts when the model starts on a stable partial
transcript, and what the speculations the final did not confirm cost.

The app (the client stub, announcing ``sentenceSpeech``) speaks requests of 6 to 8 words as its
recognizer sends them: a partial per word ``WORD_INTERVAL_S`` apart, the final ``FINAL_AFTER_S``
after the last word. The model is paced: ``FIRST_TOKEN_S`` to its first token, then the paced
model's default rate. Flows:

* speculation off (``CONDUCTOR_SPECULATION=false``): the same app, partials and all;
* speculation on, with 0 %, 30 % and 100 % of the finals differing from the last partial (their
  last word changed, as a recognizer revising its guess at the end; spread evenly over the turns).

Each flow runs on a stack of its own in a process of its own (spawned), one session at a time by
default: this one-process stack runs every Lambda, DynamoDB and Bedrock on one interpreter, and
sessions at once there delay partials past the 50 ms between a word's partial and the stable time,
starting speculations no app would cause. Flows run a few at once (``processes``): each process
idles most of the time (the person speaking, the model's first token). A session takes at most
``MAX_SESSION_TURNS`` turns after a greeting that is not counted.

Figures per flow: p50 / p99 from the final transcript leaving the app (``TurnResult.final_sent_at``)
to the first ``assistantSpeechPartial`` and to the first ``tts.speak``; where the time goes (when
the model was asked for the answer that spoke, and its first text at the endpoint); the hit rate
(``$default``'s ``TurnsPromoted`` / ``TurnsSpeculated``: finals that promoted the speculation
running when they came, over finals that found one) and the speculations started per turn; and the
tokens spent on discarded speculations per 1,000 turns, measured twice:

* at the local Bedrock endpoint: of a turn's ConverseStream requests that answer its words (a
  partial or the final), all but the last (the one that spoke) were speculations nobody heard; their
  input as the endpoint estimates it (characters / 4 of system prompt, messages and tools), their
  output as the endpoint sent it before the conductor closed the stream (characters / 4). Requests
  are told apart by session: each session's greeting, in every request's history, names it;
* as the speculation watcher counts them (``SpeculationsDiscarded``,
  ``SpeculationDiscardedInputTokens`` / ``SpeculationDiscardedOutputTokens``): the metrics sinks of
  the watcher and of ``$default`` are wrapped by one that keeps the counts (the local stack turns
  Powertools metrics off).

Then the Bedrock cost the discarded tokens add per 1,000 turns at list prices (``benchmarks.costs``),
for each stage's model.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import re
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from benchmarks.bench_stack import bench_stack
from benchmarks.figures import percentile
from benchmarks.load import TURN_TIMEOUT_S, TimedClient
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.bedrock.server import RejectRequest
from conductor_local.bedrock.validation import estimate_input_tokens
from voiceide_client.conversation.turn import TurnTimeout
from voiceide_client.voice.recognizer import RecognizerPace, cumulative_partials

FIRST_TOKEN_S = 0.7
PACE = ModelPace(first_token_s=FIRST_TOKEN_S)
WORD_INTERVAL_S = 0.25
FINAL_AFTER_S = 0.8
GOAL_MS = 500.0
"""The first tts.speak this much sooner at p50 with matching finals."""

# (what the person says, the last word a revising recognizer puts instead of its last one)
REQUESTS: tuple[tuple[str, str], ...] = (
    ("please open the main file in the editor", "terminal"),
    ("show me the failing tests for the parser", "lexer"),
    ("rename this function to load the settings", "config"),
    ("what does the build script do here", "now"),
    ("add a comment above the main loop", "function"),
    ("close every tab except this one", "file"),
)
MAX_SESSION_TURNS = 20
"""Its greeting stays in every request's history window (80 messages by default)."""
GREETING = "hello from desk {}"
"""A session's first words: in the history of every request the session makes, naming it."""
_GREETING = re.compile(r"hello from desk (\d+)")


@dataclass(frozen=True)
class Flow:
    name: str
    speculation: bool
    differ: float
    """The share of finals that differ from the last partial."""

    @property
    def env(self) -> dict[str, str]:
        return {"CONDUCTOR_SPECULATION": "true" if self.speculation else "false"}


FLOWS: tuple[Flow, ...] = (
    Flow("speculation off", False, 0.0),
    Flow("on, finals as the last partial", True, 0.0),
    Flow("on, 30 % of finals differ", True, 0.3),
    Flow("on, every final differs", True, 1.0),
)

COUNTED = (
    "Speculations",
    "SpeculationsDiscarded",
    "SpeculationDiscardedInputTokens",
    "SpeculationDiscardedOutputTokens",
    "TurnsSpeculated",
    "TurnsPromoted",
)


def differs(index: int, share: float) -> bool:
    """Whether the ``index``-th final differs: ``share`` of the turns, spread evenly."""
    return math.floor((index + 1) * share + 1e-9) > math.floor(index * share + 1e-9)


def revised(text: str, last_word: str) -> str:
    return " ".join([*text.split()[:-1], last_word])


# ---- meters --------------------------------------------------------------------------------------


class Counts:
    """Counts of ``COUNTED`` metrics, from any thread."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, name: str, value: int) -> None:
        with self._lock:
            self._counts[name] += value

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


class MetricsTap:
    """A metrics sink that passes everything on to the one it wraps, keeping the ``COUNTED`` counts."""

    def __init__(self, inner: Any, counts: Counts) -> None:
        self.inner = inner
        self.counts = counts

    def count(self, name: str, value: int = 1) -> None:
        if name in COUNTED:
            self.counts.add(name, value)
        self.inner.count(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self.inner.timing(name, milliseconds)


@contextlib.contextmanager
def metrics_tapped() -> Iterator[Counts]:
    """Wraps the metrics sinks of ``$default`` (the finals' ``TurnsSpeculated`` / ``TurnsPromoted``)
    and of the speculation watcher (its ``Speculation*`` counts), as the running stack built them."""
    from lambdas import runtime

    # The stack's start resets the handlers' clients (``runtime.reset``) but not the watcher, which
    # would go on with the runner of an earlier stack of this process: it is built for this stack
    # here, and forgotten after it.
    runtime.speculation_watcher.cache_clear()
    counts = Counts()
    service, watcher = runtime.service(), runtime.speculation_watcher()
    sink = service.metrics
    service.metrics = MetricsTap(sink, counts)
    watcher.metrics = MetricsTap(watcher.metrics, counts)
    try:
        yield counts
    finally:
        service.metrics = sink
        runtime.speculation_watcher.cache_clear()


@dataclass
class ModelRequest:
    """One ConverseStream request the local Bedrock endpoint answered."""

    desk: int | None
    """The session that made it (its greeting's number), when its history names one."""
    asked: str
    """The newest user words: the partial or final transcript it answers."""
    requested_at: float
    input_tokens: int
    prefix_tokens: int
    """Input before the newest message (what a prompt cache could serve)."""
    output_chars: int = 0
    """Text and tool input the endpoint sent before the stream ended or was closed."""
    first_text_at: float | None = None


class RequestMeter:
    """Wraps the local Bedrock endpoint's responder: every request, by session, with what the
    endpoint streamed for it."""

    def __init__(self, stack: Any) -> None:
        self._lock = threading.Lock()
        self._by_desk: dict[int | None, list[ModelRequest]] = {}
        responder = stack.bedrock_server.responder

        def measured(model_id: str, body: dict[str, Any]) -> Any:
            messages = body.get("messages") or []
            request = ModelRequest(
                _desk_of(messages),
                _asked(messages),
                time.perf_counter(),
                estimate_input_tokens(body),
                estimate_input_tokens({**body, "messages": messages[:-1]}) if messages else 0,
            )
            with self._lock:
                self._by_desk.setdefault(request.desk, []).append(request)
            script = responder(model_id, body)
            return script if isinstance(script, RejectRequest) else self._counted(script, request)

        stack.bedrock_server.responder = measured

    @staticmethod
    def _counted(script: Iterable[Any], request: ModelRequest) -> Iterator[Any]:
        for step in script:
            delta = step.get("contentBlockDelta") if isinstance(step, dict) else None
            if delta is not None:
                body = delta["delta"]
                if "text" in body and request.first_text_at is None:
                    request.first_text_at = time.perf_counter()
                request.output_chars += len(body.get("text") or body.get("toolUse", {}).get("input", ""))
            yield step

    def count(self, desk: int) -> int:
        with self._lock:
            return len(self._by_desk.get(desk, []))

    def of(self, desk: int, start: int, end: int) -> list[ModelRequest]:
        with self._lock:
            return list(self._by_desk.get(desk, [])[start:end])


def _asked(messages: list[dict[str, Any]]) -> str:
    last = messages[-1] if messages else {}
    if last.get("role") != "user":
        return ""
    texts = [str(block["text"]) for block in last.get("content") or [] if isinstance(block, dict) and "text" in block]
    return texts[-1].strip() if texts else ""


def _desk_of(messages: list[dict[str, Any]]) -> int | None:
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in message.get("content") or []:
            found = _GREETING.search(str(block.get("text", ""))) if isinstance(block, dict) else None
            if found:
                return int(found.group(1))
        return None
    return None


# ---- the turns -----------------------------------------------------------------------------------


@dataclass
class SpokenTurn:
    differs: bool
    completed: bool
    answered_final: bool
    """The answer is the one to the final transcript (a promoted speculation must say the same)."""
    final_at: float | None
    first_partial_ms: float | None
    first_speak_ms: float | None
    desk: int
    requests: tuple[int, int]
    """The session's model requests made during the turn (indices in its list)."""
    heard: frozenset[str]
    """The turn's partial transcripts and its final."""
    asked_ms: float | None = None
    """From the final to the request of the stream that spoke (negative: a speculation's)."""
    first_text_ms: float | None = None
    """From the final to that stream's first text at the endpoint."""
    discarded: list[ModelRequest] = field(default_factory=list)


@dataclass
class FlowRun:
    flow: Flow
    turns: list[SpokenTurn]
    counts: Counter[str]
    seconds: float

    def p(self, pick: str, q: float) -> float | None:
        values = [v for v in (getattr(t, pick) for t in self.turns) if v is not None]
        return percentile(values, q) if values else None

    def discarded(self) -> list[ModelRequest]:
        return [request for turn in self.turns for request in turn.discarded]


def _ms_after(start: float | None, at: float | None) -> float | None:
    return None if start is None or at is None else (at - start) * 1000


class _Desk:
    """One session of the app: its greeting (not counted), then its share of the turns."""

    def __init__(self, url: str, meter: RequestMeter, desk: int) -> None:
        self.timed = TimedClient(url)
        self.meter = meter
        self.desk = desk

    async def greet(self) -> None:
        await self.timed.client.connect(retries=3)
        greeting = RecognizerPace(WORD_INTERVAL_S, FINAL_AFTER_S)
        await self.timed.client.say(GREETING.format(self.desk), timeout=TURN_TIMEOUT_S, speaking=greeting)

    async def speak(self, indices: list[int], flow: Flow, into: list[SpokenTurn]) -> None:
        for index in indices:
            text, other_word = REQUESTS[index % len(REQUESTS)]
            differ = differs(index, flow.differ)
            final = revised(text, other_word) if differ else text
            pace = RecognizerPace(WORD_INTERVAL_S, FINAL_AFTER_S, final)
            started = self.meter.count(self.desk)
            try:
                result = await self.timed.client.say(text, timeout=TURN_TIMEOUT_S, speaking=pace)
            except TurnTimeout as timeout:
                result = timeout.result
            into.append(
                SpokenTurn(
                    differs=differ,
                    completed=result.completed,
                    answered_final=result.final_text == f"You said: {final}",
                    final_at=result.final_sent_at,
                    first_partial_ms=_ms_after(result.final_sent_at, result.first_partial_at),
                    first_speak_ms=_ms_after(result.final_sent_at, result.first_speak_at),
                    desk=self.desk,
                    requests=(started, self.meter.count(self.desk)),
                    heard=frozenset([*cumulative_partials(text), final]),
                )
            )


_desks = itertools.count(1)


async def speculation_turns(bench: Any, flow: Flow, turns: int, sessions: int) -> FlowRun:
    """``turns`` spoken turns on ``bench``'s stack (started with ``flow.env`` and ``PACE``), from
    ``sessions`` sessions at once, once each has had a greeting turn (not counted). A session takes
    at most ``MAX_SESSION_TURNS`` (more sessions take the rest, one after another)."""
    meter = RequestMeter(bench.stack)
    at_once = max(1, min(sessions, turns))
    needed = max(at_once, math.ceil(turns / MAX_SESSION_TURNS))
    desks = [_Desk(bench.stack.ws_url, meter, next(_desks)) for _ in range(needed)]
    done: list[SpokenTurn] = []

    async def one_after_another(lane: list[int]) -> None:
        for k in lane:
            await desks[k].speak(list(range(k, turns, len(desks))), flow, done)

    with metrics_tapped() as counts:
        try:
            await asyncio.gather(*(desk.greet() for desk in desks))
            await asyncio.to_thread(bench.stack.lambda_server.wait_idle, 10.0)
            before = counts.snapshot()
            began = time.perf_counter()
            lanes = [list(range(lane, len(desks), at_once)) for lane in range(at_once)]
            await asyncio.gather(*(one_after_another(lane) for lane in lanes))
            seconds = time.perf_counter() - began
        finally:
            await asyncio.gather(*(desk.timed.client.close() for desk in desks))
        await asyncio.to_thread(bench.stack.lambda_server.wait_idle, 10.0)
        tally = counts.snapshot()
    tally.subtract(before)
    for turn in done:  # of the requests answering the turn's words, all but the last (which spoke) were discarded
        made = [request for request in meter.of(turn.desk, *turn.requests) if request.asked in turn.heard]
        if made:
            turn.discarded, spoke = made[:-1], made[-1]
            turn.asked_ms = _ms_after(turn.final_at, spoke.requested_at)
            turn.first_text_ms = _ms_after(turn.final_at, spoke.first_text_at)
    return FlowRun(flow, done, tally, seconds)


def flow_in_own_process(flow: Flow, turns: int, sessions: int) -> FlowRun:
    """``speculation_turns`` on a stack of its own, in this (child) process."""

    warnings.filterwarnings("ignore", message="No application metrics to publish")
    with bench_stack(PACE, False, flow.env) as bench:
        return asyncio.run(speculation_turns(bench, flow, turns, sessions))


def speculation_flows(turns: int, sessions: int, *, processes: int, flows: Iterable[Flow] = FLOWS) -> list[FlowRun]:
    """Every flow in a process of its own (spawned: nothing of this process's stacks in it),
    ``processes`` of them at once."""
    with ProcessPoolExecutor(max_workers=max(1, processes), mp_context=get_context("spawn")) as pool:
        running = [pool.submit(flow_in_own_process, flow, turns, sessions) for flow in flows]
        return [future.result() for future in running]


# ---- report --------------------------------------------------------------------------------------
