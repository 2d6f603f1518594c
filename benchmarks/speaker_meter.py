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
  rules), and the writes of a session's ``STATE`` item, each of which moves the session's entry in
  the sessions index (a delete and a put there: 2 WRU, the index's items are under 1 KB);
* Bedrock: every stream of the local endpoint with its reported usage and how long it was in
  flight (``ModelMeter``).

Everything is divided by the minutes the session took, from before its connection to after its
last invocation. The model is paced (``ModelPace``: 400 ms to the first token, ~80 tokens/s).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from benchmarks.bench_stack import STACK_ENV, LambdaMeter
from benchmarks.capacity_model import SpeakerFigures
from benchmarks.costs import websocket_messages
from benchmarks.meters import DynamoMeter, ModelMeter, PostMeter
from benchmarks.talker import SESSION, SpokenTurn, Utterance, talk, tools
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.stack import LocalStack
from voiceide_client import ConductorClient, scaled_backoff

STATE_SK = "STATE"
INDEX_WRU_PER_STATE_WRITE = 2.0


class StateWrites:
    """Counts the DynamoDB writes of sessions' ``STATE`` items (outermost layer of the server)."""

    def __init__(self, stack: Any) -> None:
        self.count = 0
        self._lock = threading.Lock()
        server = stack._moto._server
        inner = server.app

        def counted(environ: dict[str, Any], start: Any) -> Any:
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(raw)
            operation = str(environ.get("HTTP_X_AMZ_TARGET", "?")).rpartition(".")[2]
            try:
                request = json.loads(raw or b"{}")
                targets = DynamoMeter._write_targets(operation, request)
            except (ValueError, KeyError, TypeError, AttributeError):
                targets = []
            states = sum(1 for _, key, _ in targets if key.get("sk", {}).get("S") == STATE_SK)
            if states:
                with self._lock:
                    self.count += states
            return inner(environ, start)

        server.app = counted


async def _speaker(url: str, script: tuple[Utterance, ...]) -> tuple[list[SpokenTurn], int, list[int]]:
    client = ConductorClient(url, session_id=str(uuid.uuid4()), tools=tools(), backoff=scaled_backoff(0.01))
    await client.connect(retries=3)
    try:
        turns, reports = await talk(client, script)
        sizes = [len(event.to_json().encode("utf-8")) for event in client.sent]
    finally:
        await client.close()
    return turns, reports, sizes


def measure(speculation: bool, sessions: int = 1, script: tuple[Utterance, ...] = SESSION) -> SpeakerFigures:
    """``sessions`` people one after another, each speaking ``script``; their figures per minute."""
    env = STACK_ENV | {"CONDUCTOR_SPECULATION": "true" if speculation else "false"}
    with (
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stdout(quiet),
        LocalStack(port=0, quiet=True, env=env, model_pace=ModelPace()) as stack,
    ):
        assert stack.gateway is not None and stack.lambda_server is not None
        model = ModelMeter()
        functions = LambdaMeter(stack.gateway)
        dynamo = DynamoMeter(stack)
        states = StateWrites(stack)
        posts = PostMeter(stack.gateway)
        try:
            # a warm-up session, not counted: the first invocations pay lazy imports
            asyncio.run(_speaker(stack.ws_url, (Utterance("hello there", 0.0),)))
            stack.lambda_server.wait_idle(10.0)
            time.sleep(0.5)
            marks = (functions.mark(), dynamo.mark(), states.count, posts.mark(), model.mark())
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
            state_writes = states.count - marks[2]
            sent = posts.since(marks[3])
            streams = model.since(marks[4])
        finally:
            functions.close()
            model.close()
    per = 1.0 / minutes
    invocations: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for function, _, duration in calls:
        invocations[function] = invocations.get(function, 0.0) + per
        seconds[function] = seconds.get(function, 0.0) + math.ceil(duration * 1000) / 1000 * per
    output = sum(s.usage.get("outputTokens", math.ceil(s.output_chars / 4)) for s in streams)
    return SpeakerFigures(
        speculation=speculation,
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
        index_wru=state_writes * INDEX_WRU_PER_STATE_WRITE * per,
        bedrock_requests=len(streams) * per,
        input_tokens=sum(s.usage.get("inputTokens", 0) for s in streams) * per,
        output_tokens=output * per,
        cache_read_tokens=sum(s.usage.get("cacheReadInputTokens", 0) for s in streams) * per,
        cache_write_tokens=sum(s.usage.get("cacheWriteInputTokens", 0) for s in streams) * per,
        stream_seconds=sum((s.ended or s.requested) - s.requested for s in streams) * per,
    )


def measure_flows(sessions: int = 1) -> dict[bool, SpeakerFigures]:
    """Speculation on and off, at once, each on a stack in a process of its own (spawned)."""
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        futures = {flag: pool.submit(measure, flag, sessions) for flag in (True, False)}
        return {flag: future.result() for flag, future in futures.items()}
