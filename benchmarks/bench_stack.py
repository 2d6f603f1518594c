"""One local stack with its meters, as every benchmark measures it: DynamoDB requests and round
trips, posts to connections, model streams (with the prefix a prompt cache could serve) and
Lambda invocations per function."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.meters import DynamoMeter, ModelMeter, PostMeter
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.bedrock.validation import estimate_input_tokens
from conductor_local.stack import LocalStack

STACK_ENV = {
    "CONDUCTOR_TURN_RESERVE_MS": "1000",  # the local message Lambda has 600 s; keep the check out of the way
    "CONDUCTOR_MAX_TURNS_PER_MINUTE": "1000000",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
}
NAIVE_ENV = {"CONDUCTOR_PARTIAL_FLUSH_MS": "0", "CONDUCTOR_PARTIAL_GROWTH": "0"}
ROUTE_FUNCTIONS = {"$default": "message", "$connect": "connect", "$disconnect": "disconnect"}


# ---- one stack with its meters ----------------------------------------------------------------


class LambdaMeter:
    """Invocations and durations per function: the gateway's routes (wrapping its handler call) and
    the turn runner (wrapping ``lambdas.turn.handler``, which the local Lambda looks up per call)."""

    def __init__(self, gateway: Any) -> None:
        import lambdas.turn

        self.calls: list[tuple[str, float, float]] = []
        """(function, started, seconds)"""
        self._lock = threading.Lock()
        call = gateway._call

        def timed_call(handler: Any, event: Any, route: str) -> Any:
            with self._timing(ROUTE_FUNCTIONS.get(route, route)):
                return call(handler, event, route)

        gateway._call = timed_call
        self._turn_module = lambdas.turn
        self._turn_handler = lambdas.turn.handler
        turn_handler = self._turn_handler

        def timed_turn(event: Any, context: Any) -> Any:
            watch = isinstance(event, dict) and bool(event.get("watch"))  # a speculation watcher's task
            with self._timing("watcher" if watch else "turn"):
                return turn_handler(event, context)

        lambdas.turn.handler = timed_turn

    @contextlib.contextmanager
    def _timing(self, function: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.calls.append((function, began, time.perf_counter() - began))

    def close(self) -> None:
        self._turn_module.handler = self._turn_handler

    def mark(self) -> int:
        with self._lock:
            return len(self.calls)

    def since(self, mark: int) -> list[tuple[str, float, float]]:
        with self._lock:
            return list(self.calls[mark:])


class PrefixMeter:
    """Wraps the local Bedrock responder: per stream (in the handler thread that then sends it), the
    input tokens before the newest message, i.e. what a prompt cache could serve."""

    def __init__(self, stack: Any) -> None:
        self._local = threading.local()
        responder = stack.bedrock_server.responder

        def measured(model_id: str, body: dict[str, Any]) -> Any:
            messages = body.get("messages") or []
            self._local.prefix = estimate_input_tokens({**body, "messages": messages[:-1]}) if messages else 0
            return responder(model_id, body)

        stack.bedrock_server.responder = measured

    def take(self) -> int:
        prefix = getattr(self._local, "prefix", 0)
        self._local.prefix = 0
        return prefix


@dataclass
class Bench:
    stack: LocalStack
    dynamo: DynamoMeter
    posts: PostMeter
    model: ModelMeter
    lambdas: LambdaMeter

    def marks(self) -> tuple[int, int, int, int, int]:
        return (
            self.dynamo.mark(),
            self.posts.mark(),
            self.model.mark(),
            self.lambdas.mark(),
            self.dynamo.round_trip_mark(),
        )


@contextlib.contextmanager
def bench_stack(
    pace: ModelPace | None, naive: bool, extra_env: dict[str, str] | None = None, brain_responder: Any = None
) -> Iterator[Bench]:
    """A fresh stack with its meters (``brain_responder``: answers the model's requests instead of the
    offline brain)."""
    env = STACK_ENV | (NAIVE_ENV if naive else {}) | (extra_env or {})
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the handlers print from threads
        with LocalStack(port=0, quiet=True, env=env, model_pace=pace, brain_responder=brain_responder) as stack:
            assert stack.gateway is not None
            from lambdas import runtime  # the handlers' own clients, as the stack built them

            model = ModelMeter()
            model.prefix_of = PrefixMeter(stack).take
            model.watch_sends(runtime.turn_runner().brain._client)
            lambdas = LambdaMeter(stack.gateway)
            dynamo = DynamoMeter(stack, client=runtime.store()._client, launcher=runtime.service().launcher._client)
            try:
                yield Bench(stack, dynamo, PostMeter(stack.gateway), model, lambdas)
            finally:
                lambdas.close()
                model.close()
        time.sleep(0.2)  # invocations cut short by the stop may still log a line
