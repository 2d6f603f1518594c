"""What one person speaking costs per minute, measured on the local stack.

The person of ``benchmarks.talker.SESSION`` talks through the client stub to a local stack whose
handlers run in this process, where meters look into every service as AWS would bill or throttle
it:

* WebSocket: the frames the app sent (each a route request) and the gateway's @connections posts
  (``PostMeter``), metered in 32 KB messages;
* Lambda: every invocation of ``$default``, ``$connect`` and ``$disconnect`` (the gateway's handler
  call) and of the turn function (``lambdas.turn.handler``, which the local Lambda looks up per
  call), told apart as the turn runner and the speculation watcher by the task's ``watch`` flag;
  its duration is the execution it holds (concurrency-seconds);
* DynamoDB: every request with its read and write units (``DynamoMeter``, by DynamoDB's sizing
  rules), and what each write cost the sessions index (``meters.index_write_units``: nothing when
  the session's entry is unchanged, two writes when its last activity moves);
* Bedrock: every request the model was asked (``SpokenBrain``, which answers at a voice answer's
  length) and every stream with what it wrote, its cache use and how long it was in flight
  (``ModelMeter``); the tokens as the stage's model counts them (``benchmarks.token_calibration``:
  the endpoint estimates characters / 4, Claude 5.x counts more). A request cut short counts as
  much as Bedrock bills it, a turn launched alongside a write that lost its race included; one
  speaker alone never races, so the capacity model adds their share under load
  (``capacity_model.LOST_EARLY_LAUNCHES``, measured by ``make load``).

Each flow is one stage's model (with its maxTokens, effort and thinking) and speculation setting.
Everything is divided by the minutes the session took, from before its connection to after its
last invocation. The model is paced (``ModelPace``: 400 ms to the first token, ~80 tokens/s); the
endpoint's prompt cache keeps the model's own minimum, in its estimated tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from benchmarks import token_calibration as calibration
from benchmarks.bench_stack import STACK_ENV, LambdaMeter
from benchmarks.capacity_model import Flow, SpeakerFigures
from benchmarks.costs import websocket_messages
from benchmarks.meters import DynamoMeter, ModelMeter, ModelStream, PostMeter
from benchmarks.spoken_brain import Request, SpokenBrain
from benchmarks.talker import SESSION, SpokenTurn, Utterance, talk, tools
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.stack import LocalStack
from shared.wire.model_rules import rules_for
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient


class CacheMeter:
    """What every request read from and wrote to the local endpoint's prompt cache, as the endpoint
    accounts it when the request arrives (a stream cut short later still counts, as on Bedrock)."""

    def __init__(self, cache: Any) -> None:
        self.used: list[Any] = []
        self._lock = threading.Lock()
        account = cache.account

        def counted(request: Any, input_tokens: int, model_id: str | None = None) -> Any:
            usage = account(request, input_tokens, model_id)
            with self._lock:
                self.used.append(usage)
            return usage

        cache.account = counted

    def mark(self) -> int:
        with self._lock:
            return len(self.used)

    def since(self, mark: int) -> list[Any]:
        with self._lock:
            return list(self.used[mark:])


async def _speaker(url: str, script: tuple[Utterance, ...]) -> tuple[list[SpokenTurn], int, list[int]]:
    client = ConductorClient(url, session_id=str(uuid.uuid4()), tools=tools(), backoff=scaled_backoff(0.01))
    await client.connect(retries=3)
    try:
        turns, reports = await talk(client, script)
        sizes = [len(event.to_json().encode("utf-8")) for event in client.sent]
    finally:
        await client.close()
    return turns, reports, sizes


def measure(flow: Flow, sessions: int = 1, script: tuple[Utterance, ...] = SESSION) -> SpeakerFigures:
    """``sessions`` people one after another, each speaking ``script`` to ``flow``'s model (answered by
    ``SpokenBrain``, paced); their figures per minute, the model's tokens as the model counts them
    (``benchmarks.token_calibration``)."""
    env = STACK_ENV | {
        "CONDUCTOR_SPECULATION": "true" if flow.speculation else "false",
        "BEDROCK_MODEL_ID": flow.model_id,
        "BEDROCK_MAX_TOKENS": str(flow.max_tokens),
        "BEDROCK_EFFORT": flow.effort,
        "BEDROCK_THINKING": flow.thinking,
    }
    brain = SpokenBrain(ModelPace())
    with (
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stdout(quiet),
        LocalStack(port=0, quiet=True, env=env, model_pace=ModelPace(), brain_responder=brain) as stack,
    ):
        assert stack.gateway is not None and stack.lambda_server is not None and stack.bedrock_server is not None
        minimum = rules_for(flow.model_id).cache_min_tokens
        if minimum and calibration.applies_to(flow.model):  # cache where the model's own count would
            stack.bedrock_server.prompt_cache.min_tokens = calibration.cache_minimum_in_estimates(minimum)
        model = ModelMeter()
        cache = CacheMeter(stack.bedrock_server.prompt_cache)
        functions = LambdaMeter(stack.gateway)
        dynamo = DynamoMeter(stack)
        posts = PostMeter(stack.gateway)
        try:
            # a warm-up session, not counted: the first invocations pay lazy imports
            asyncio.run(_speaker(stack.ws_url, (Utterance("hello there", 0.0),)))
            stack.lambda_server.wait_idle(10.0)
            time.sleep(0.5)
            marks = (
                functions.mark(),
                dynamo.mark(),
                posts.mark(),
                model.mark(),
                brain.mark(),
                cache.mark(),
            )
            began = time.perf_counter()
            turns: list[SpokenTurn] = []
            reports, frames = 0, []
            for _ in range(sessions):
                spoken, heard, sizes = asyncio.run(_speaker(stack.ws_url, script))
                turns += spoken
                reports += heard
                frames += sizes
            stack.lambda_server.wait_idle(30.0)
            time.sleep(0.5)  # $disconnect runs after the close
            minutes = (time.perf_counter() - began) / 60.0
            calls = functions.since(marks[0])
            requests = dynamo.since(marks[1])
            sent = posts.since(marks[2])
            streams = model.since(marks[3])
            asked = brain.since(marks[4])
            cached = cache.since(marks[5])
        finally:
            functions.close()
            model.close()
    per = 1.0 / minutes
    invocations: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for function, _, duration in calls:
        invocations[function] = invocations.get(function, 0.0) + per
        seconds[function] = seconds.get(function, 0.0) + math.ceil(duration * 1000) / 1000 * per
    usage = model_usage(asked, cached, streams)
    tokens = calibration.counted(usage, flow.model)
    endpoint = calibration.uncalibrated(usage)
    return SpeakerFigures(
        speculation=flow.speculation,
        model=flow.model,
        minutes=minutes,
        turns=(sum(t.answered for t in turns) + reports) * per,
        ws_in=len(frames) * per,
        ws_in_messages=websocket_messages(frames) * per,
        posts=len(sent) * per,
        ws_out_messages=websocket_messages([p.size for p in sent]) * per,
        connects=invocations.get("connect", 0.0),
        disconnects=invocations.get("disconnect", 0.0),
        invocations=invocations,
        seconds=seconds,
        dynamodb_requests=len(requests) * per,
        rru=sum(r.rru for r in requests) * per,
        wru=sum(r.wru for r in requests) * per,
        index_wru=sum(r.index_wru for r in requests) * per,
        bedrock_requests=len(asked) * per,
        input_tokens=tokens.input_tokens * per,
        output_tokens=tokens.output_tokens * per,
        cache_read_tokens=tokens.cache_read_tokens * per,
        cache_write_tokens=tokens.cache_write_tokens * per,
        endpoint_input_tokens=usage.input_tokens * per,
        endpoint_output_tokens=endpoint.output_tokens * per,
        stream_seconds=sum((s.ended or s.requested) - s.requested for s in streams) * per,
    )


def model_usage(asked: list[Request], cached: list[Any], streams: list[ModelStream]) -> calibration.Usage:
    """The requests the model was asked (every one, cut-short streams too: Bedrock counts a request's
    input, and its cache reads and writes, when it starts), their prompt cache use (``CacheUsage`` of
    those with cache points) and what the streams wrote, as the local endpoint estimated them."""
    return calibration.Usage(
        input_tokens=sum(r.input_tokens for r in asked),
        tool_requests=sum(1 for r in asked if r.tools),
        cache_read_tokens=sum(u.read for u in cached),
        cache_write_tokens=sum(u.write for u in cached),
        reading_requests=sum(1 for u in cached if u.read),
        writing_requests=sum(1 for u in cached if u.write and not u.read),
        text_chars=sum(len(s.text) for s in streams),
        tool_chars=sum(s.tool_chars for s in streams),
        tool_uses=sum(s.tool_uses for s in streams),
        reasoning_tokens=sum(math.ceil(s.reasoning_chars / calibration.CHARS_PER_ESTIMATED_TOKEN) for s in streams),
    )


def measure_flows(flows: list[Flow], sessions: int = 1) -> list[SpeakerFigures]:
    """Each flow at once (two at a time), each on a stack in a process of its own (spawned)."""
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(measure, flow, sessions) for flow in flows]
        return [future.result() for future in futures]
