"""AWS's latencies put into a running local stack, from the benchmark's process (no product code
changes): every wait is drawn from ``benchmarks.aws_latencies`` and kept, so a report can say where
a turn's milliseconds went.

* DynamoDB, the management API and Lambda's ``Invoke``: a ``before-send`` hook on the botocore
  session the handlers build their clients from (and on the clients already built) sleeps the drawn
  round trip before the request goes out;
* a Lambda's start: the gateway's call of a route's handler (``$connect``, ``$default``) waits for
  API Gateway's hop, and the turn runner's handler for the asynchronous hand-off; either may be a
  cold start (at ``cold_rate``: the platform's init plus the function's measured import time);
* the model's time to first token: the local Bedrock's first ``Pause`` of every paced reply is
  replaced by a draw for the stage's model (its published figure, for ~1,000 input tokens) plus
  the prefill of the request's own input (``aws.Prefill``): its uncached and cached tokens as the
  endpoint's prompt cache accounts them (``PromptCache.account(commit=False)``, asked before the
  endpoint answers), in Claude's tokens (``benchmarks.token_calibration``);
* the phone's network and API Gateway's egress: ``PhoneLink``, a TCP relay between the app and the
  gateway that holds each chunk, in order, for half a drawn round trip (plus the egress hop on the
  way to the phone).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks import aws_latencies as aws
from benchmarks import token_calibration as calibration
from conductor_local.bedrock.cache import CacheUsage, has_cache_points
from conductor_local.bedrock.script import Pause
from conductor_local.bedrock.validation import estimate_input_tokens

ROUTE_FUNCTIONS = {"$connect": "connect", "$default": "message", "$disconnect": "disconnect"}
HOOK_ID = "as-deployed-delay"


@dataclass(frozen=True)
class Wait:
    kind: str
    started: float
    ended: float


class Waits:
    """Every injected wait (perf_counter times), from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waits: list[Wait] = []

    def add(self, kind: str, started: float, seconds: float) -> None:
        with self._lock:
            self.waits.append(Wait(kind, started, started + seconds))

    def between(self, start: float, end: float) -> list[Wait]:
        with self._lock:
            return [w for w in self.waits if w.ended > start and w.started < end]


FIRST = "model first token"
"""An instant the model is working on its first token belongs to it: nothing the conductor does
beside it (a post, a write) holds the answer up."""


def time_sliced(waits: list[Wait], start: float, end: float) -> dict[str, float]:
    """Milliseconds of ``[start, end]`` per kind of wait: an instant of the model's first token is
    the model's; any other instant shared by k waits counts 1/k to each; the instants no wait covers
    are ``rest`` (the conductor's own work)."""
    edges = sorted(
        {start, end, *(min(max(w.started, start), end) for w in waits), *(min(max(w.ended, start), end) for w in waits)}
    )
    shares: dict[str, float] = {}
    for left, right in itertools.pairwise(edges):
        if right <= left:
            continue
        active = [w for w in waits if w.started < right and w.ended > left]
        if any(w.kind == FIRST for w in active):
            active = [w for w in active if w.kind == FIRST][:1]
        span = (right - left) * 1000
        if not active:
            shares["rest"] = shares.get("rest", 0.0) + span
            continue
        for wait in active:
            shares[wait.kind] = shares.get(wait.kind, 0.0) + span / len(active)
    return shares


def claude_input_tokens(usage: CacheUsage, model_id: str, *, tools: bool) -> tuple[float, float]:
    """(uncached, read from the cache) input of one request in Claude's tokens: the endpoint's
    estimates times the recorded ratio, and Claude's tool-use system prompt when the request carries
    tools (read with the cached prefix when the request read one, the tools being first). A written
    token is read by the model like any uncached one."""
    if not calibration.applies_to(model_id):
        return float(usage.input_tokens - usage.read), float(usage.read)
    system = calibration.TOOL_USE_SYSTEM_PROMPT_TOKENS if tools else 0
    uncached = (usage.input_tokens - usage.read) * calibration.INPUT_RATIO
    cached = usage.read * calibration.INPUT_RATIO
    if usage.read:
        return uncached, cached + system
    return uncached + system, cached


def request_usage(prompt_cache: Any, model_id: str, body: dict[str, Any]) -> CacheUsage:
    """What ``body`` will read from and write to the endpoint's prompt cache (nothing changed)."""
    tokens = estimate_input_tokens(body)
    if prompt_cache is None or not has_cache_points(body):
        return CacheUsage(tokens)
    return prompt_cache.account(body, tokens, model_id, commit=False)


class Injector:
    """Installs the delays into the running stack; ``close()`` takes the wrappers out again."""

    def __init__(
        self,
        stack: Any,
        sampler: aws.Sampler,
        model: aws.ModelLatency,
        *,
        cold_rate: float = aws.COLD_START_RATE,
        import_ms: dict[str, float] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stack = stack
        self.sampler = sampler
        self.model = model
        self.cold_rate = cold_rate
        self.import_ms = dict(import_ms or {})
        """Per function (connect, message, turn): its handler's cold import, measured."""
        self.sleep = sleep
        self.waits = Waits()
        self.cold_starts = 0
        self.prefills: list[tuple[float, float]] = []
        """Per model request: its (uncached, cached) input in Claude's tokens."""
        self._undo: list[Callable[[], None]] = []

    # ---- one wait ---------------------------------------------------------------------------

    def wait(self, kind: str, ms: float) -> None:
        self.waits.add(kind, time.perf_counter(), ms / 1000)
        self.sleep(ms / 1000)

    def maybe_cold(self, function: str) -> None:
        if self.cold_rate > 0 and self.sampler.chance(self.cold_rate):
            self.cold_starts += 1
            self.wait("Lambda cold start", self.sampler.ms(aws.LAMBDA_INIT) + self.import_ms.get(function, 0.0))

    # ---- botocore ---------------------------------------------------------------------------

    def before_send(self, event_name: str = "", **_: Any) -> None:
        """A ``before-send`` hook: sleeps the drawn round trip of the call (returns nothing, so the
        request goes on)."""
        _, service, operation = [*event_name.split("."), "", ""][:3]
        if service == "dynamodb":
            self.wait(f"DynamoDB {operation}", self.sampler.dynamodb_ms(operation))
        elif service == "apigatewaymanagementapi" and operation == "PostToConnection":
            self.wait("PostToConnection", self.sampler.ms(aws.POST_TO_CONNECTION))
        elif service == "lambda" and operation == "Invoke":
            self.wait("Lambda Invoke accepted", self.sampler.ms(aws.LAMBDA_ASYNC_ACCEPT))

    def hook_client(self, client: Any) -> None:
        client.meta.events.register("before-send", self.before_send, unique_id=HOOK_ID)

    def install(self) -> Injector:
        from lambdas import runtime

        session = runtime._aws_session()  # clients built from now on copy its handlers
        session.register("before-send", self.before_send, unique_id=HOOK_ID)
        self._undo.append(lambda: session.unregister("before-send", unique_id=HOOK_ID))
        for client in (runtime.store()._client, runtime.service().launcher._client):
            self.hook_client(client)
            self._undo.append(lambda c=client: c.meta.events.unregister("before-send", unique_id=HOOK_ID))
        self._wrap_gateway(self.stack.gateway)
        self._wrap_turn()
        self._wrap_model(self.stack.bedrock_server)
        return self

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()

    # ---- Lambda starts ------------------------------------------------------------------------

    def _wrap_gateway(self, gateway: Any) -> None:
        call = gateway._call

        def delayed(handler: Any, event: Any, route: str) -> Any:
            function = ROUTE_FUNCTIONS.get(route)
            if function is not None:
                self.wait("API Gateway ingress", self.sampler.ms(aws.APIGW_INGRESS))
                self.maybe_cold(function)
            return call(handler, event, route)

        gateway._call = delayed
        self._undo.append(lambda: setattr(gateway, "_call", call))

    def _wrap_turn(self) -> None:
        import lambdas.turn

        handler = lambdas.turn.handler

        def started(event: Any, context: Any) -> Any:
            self.wait("Lambda async start", self.sampler.ms(aws.LAMBDA_ASYNC_START))
            self.maybe_cold("turn")
            return handler(event, context)

        lambdas.turn.handler = started
        self._undo.append(lambda: setattr(lambdas.turn, "handler", handler))

    # ---- the model -----------------------------------------------------------------------------

    def first_token(self, steps: Any, prefill_ms: float = 0.0) -> Any:
        """A paced reply with its first pause (the time to first token) drawn for the model, plus
        ``prefill_ms`` for the request's input beyond the published figure's."""
        if not isinstance(steps, list):
            return steps
        for index, step in enumerate(steps):
            if isinstance(step, Pause):
                ms = self.sampler.ms(self.model.first_token) + prefill_ms
                self.waits.add(FIRST, time.perf_counter(), ms / 1000)
                return [*steps[:index], Pause(ms / 1000), *steps[index + 1 :]]
        return steps

    def prefill_ms(self, prompt_cache: Any, model_id: str, body: dict[str, Any]) -> float:
        """What the request's input adds to the stage model's time to first token."""
        usage = request_usage(prompt_cache, model_id, body)
        uncached, cached = claude_input_tokens(usage, model_id, tools=bool(body.get("toolConfig")))
        self.prefills.append((uncached, cached))
        return self.model.prefill.extra_ms(uncached, cached)

    def _wrap_model(self, server: Any) -> None:
        responder = server.responder

        def drawn(model_id: str, body: dict[str, Any]) -> Any:
            prefill = self.prefill_ms(getattr(server, "prompt_cache", None), model_id, body)
            return self.first_token(responder(model_id, body), prefill)

        server.responder = drawn
        self._undo.append(lambda: setattr(server, "responder", responder))


# ---- the phone's network ---------------------------------------------------------------------------


class PhoneLink:
    """A TCP relay from the app (``url``) to the gateway on ``target_port``: every chunk waits half a
    drawn round trip of the phone's network (and API Gateway's egress hop on the way down), in order,
    as TCP delivers. The handshake's ``Host`` is rewritten to the gateway's port."""

    def __init__(self, target_port: int, network: aws.Latency, sampler: aws.Sampler, waits: Waits) -> None:
        self.target_port = target_port
        self.network = network
        self.sampler = sampler
        self.waits = waits
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def uplink_ms(self) -> float:
        return self.sampler.ms(self.network) / 2

    def downlink_ms(self) -> float:
        return self.sampler.ms(self.network) / 2 + self.sampler.ms(aws.APIGW_EGRESS)

    def start(self) -> PhoneLink:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="phone-link", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        return self

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop relaying: every relayed connection is cut both ways (the gateway sees the app go)."""
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._cut(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop = None

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await asyncio.sleep(0.05)
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        host = (f"127.0.0.1:{self.port}".encode(), f"127.0.0.1:{self.target_port}".encode())
        await asyncio.gather(
            self._pipe(reader, up_writer, self.uplink_ms, "phone network (up)", host),
            self._pipe(up_reader, writer, self.downlink_ms, "phone network and API Gateway egress (down)", None),
            return_exceptions=True,
        )
        self._writers -= {writer, up_writer}

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        delay_ms: Callable[[], float],
        kind: str,
        host: tuple[bytes, bytes] | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()
        last = 0.0

        async def deliver() -> None:
            while True:
                at, data = await queue.get()
                await asyncio.sleep(max(0.0, at - loop.time()))
                if data is None:
                    with contextlib.suppress(OSError):
                        sink.close()
                    return
                sink.write(data)
                with contextlib.suppress(OSError):
                    await sink.drain()

        delivering = asyncio.create_task(deliver())
        first = True
        try:
            while True:
                data = await source.read(65536)
                if first and host is not None and data:
                    data = data.replace(b"Host: " + host[0], b"Host: " + host[1], 1)
                first = False
                wait_s = delay_ms() / 1000
                at = max(last, loop.time() + wait_s)
                last = at
                if data:
                    self.waits.add(kind, time.perf_counter(), at - loop.time())
                queue.put_nowait((at, data or None))
                if not data:
                    break
        except (OSError, asyncio.CancelledError):
            queue.put_nowait((last, None))
        with contextlib.suppress(asyncio.CancelledError):
            await delivering


@contextlib.contextmanager
def phone_link(target_port: int, network: aws.Latency, sampler: aws.Sampler, waits: Waits) -> Iterator[PhoneLink]:
    link = PhoneLink(target_port, network, sampler, waits).start()
    try:
        yield link
    finally:
        link.stop()
