"""Helpers of the reliability suites: frames, gated scripts, a routing Bedrock responder, an eager app."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from moto.core.model_instances import reset_model_data

from conductor_local.bedrock.server import RecordedRequest, RejectRequest, Script, Step
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.lambda_runtime.turn_functions import TURN_FUNCTION
from lambdas import message, runtime
from shared.wire.protocol import Event, now_timestamp, parse_event
from tests.handlers.conftest import Connection, Harness

OK = {"statusCode": 200}
THINKING = ("toolCall", "convo.setState", {"state": "thinking"})
IDLE = ("toolCall", "convo.setState", {"state": "idle"})
FALLBACK_LINE_START = "Sorry, I lost my train of thought"


# ---- frames --------------------------------------------------------------------------------


def frame(kind: str, payload: Any, event_id: str | None = None) -> str:
    """One client frame, serialized."""
    return json.dumps({"id": event_id or str(uuid.uuid4()), "timestamp": now_timestamp(), "kind": {kind: payload}})


def send_frame_as(
    harness: Harness, conn: Connection, body: str, *, principal: str | None, timeout_s: float = 900
) -> dict[str, Any]:
    """``$default`` with an authorizer context (``principalId``) on the MESSAGE event.

    ``Harness.send_raw`` builds anonymous MESSAGE events; API Gateway copies the ``$connect``
    authorizer's context onto every message of the connection, which this reproduces.
    """
    context = harness._context(conn.connection_id, "$default", "MESSAGE")
    context["messageId"] = uuid.uuid4().hex[:16]
    if principal is not None:
        context["authorizer"] = {"principalId": principal, "sessionId": conn.session_id}
    event = {"requestContext": context, "body": body, "isBase64Encoded": False}
    mark = harness.lambdas.started
    response = message.handler(event, LocalLambdaContext(function_name="message", timeout_seconds=timeout_s))
    harness.wait_for_turns(since=mark)
    return response


# ---- what the app saw ------------------------------------------------------------------------


def seqs(events: Iterable[Event]) -> list[int]:
    return [event.seq for event in events if event.seq is not None]


def non_partial(events: Iterable[Event]) -> list[Event]:
    return [event for event in events if event.kind_name != "assistantSpeechPartial"]


def errors(events: Iterable[Event]) -> list[str]:
    return [event.payload.code for event in events if event.kind_name == "error"]


def tool_calls(events: Iterable[Event], name: str | None = None) -> list[Event]:
    return [e for e in events if e.kind_name == "toolCall" and (name is None or e.payload.name == name)]


def model_calls(events: Iterable[Event]) -> list[Event]:
    """The tool calls the model asked for (not the conductor's own setState / speak)."""
    return [e for e in tool_calls(events) if e.payload.name not in ("convo.setState", "tts.speak")]


def by_seq(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda event: event.seq or 0)


def outbox_seqs(session_id: str) -> list[int]:
    """The seqs the conductor kept for replay (every non-partial event of the session)."""
    return [seq for seq, _ in runtime.store().outbox(session_id.lower())]


def count_partials(events: list[Event]) -> int:
    return sum(1 for event in events if event.kind_name == "assistantSpeechPartial")


def wait_partials(harness: Harness, conn: Connection, n: int, timeout: float = 10) -> list[Event]:
    return harness.wait_for(conn, lambda events: count_partials(events) >= n, timeout)


# ---- Bedrock scripts -------------------------------------------------------------------------


def gated(
    steps: list[Step], gate: threading.Event, *, after_deltas: int, timeout: float = 20, **more: threading.Event
) -> Script:
    """``steps``, holding everything after the first ``after_deltas`` content deltas until ``gate`` is set.

    The local Bedrock server sends steps as the script produces them, so the stream stalls
    exactly there: a test can act mid-stream without sleeping, then release it. More gates can
    be given as ``after_<n>=event`` (held after the n-th delta).
    """
    gates = {after_deltas: gate, **{int(name.removeprefix("after_")): event for name, event in more.items()}}

    def run() -> Iterator[Step]:
        deltas = 0
        for step in steps:
            yield step
            if isinstance(step, dict) and "contentBlockDelta" in step:
                deltas += 1
                if deltas in gates:
                    gates[deltas].wait(timeout)

    return run()


def request_texts(request: dict[str, Any]) -> list[str]:
    """Every text block of a ConverseStream request, in order."""
    return [block["text"] for msg in request.get("messages", []) for block in msg["content"] if "text" in block]


def answers_tools(request: dict[str, Any]) -> bool:
    last = request["messages"][-1]
    return any("toolResult" in block for block in last["content"])


def last_user_text(request: dict[str, Any]) -> str:
    """The newest utterance: the last text block of the last message (utterances the user heard
    no answer to are merged into one message, oldest first)."""
    last = request["messages"][-1]
    texts = [block["text"] for block in last["content"] if "text" in block]
    return texts[-1] if texts else ""


class RoutingResponder:
    """Answers each ConverseStream request with ``route(request)``; records every request.

    Unlike a queue of scripts, a race whose loser never reaches Bedrock leaves nothing behind
    that would answer the next iteration's request.
    """

    def __init__(self, route: Callable[[dict[str, Any]], Script | RejectRequest]) -> None:
        self.route = route
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []

    def __call__(self, model_id: str, request: dict[str, Any]) -> Script | RejectRequest:
        with self._lock:
            self._requests.append(RecordedRequest(model_id, request))
        return self.route(request)

    def requests_with(self, tag: str) -> list[dict[str, Any]]:
        """Requests of the session whose conversation mentions ``tag`` (one tag per session)."""
        with self._lock:
            requests = list(self._requests)
        return [r.body for r in requests if any(tag in text for text in request_texts(r.body))]


# ---- an app that answers every tool call the moment it sees it ---------------------------------


def default_result(name: str) -> str:
    return '{"spoken":true}' if name == "tts.speak" else '{"ok":true}'


class EagerApp:
    """Answers every toolCall of a connection as soon as it is posted, each in its own thread.

    Each answer is a concurrent ``$default`` invocation, so answers race the invocation that is
    still streaming (and posting) the call, and each other.
    """

    def __init__(self, harness: Harness, conn: Connection) -> None:
        self.harness = harness
        self.conn = conn
        self.answered: list[str] = []
        self.failures: list[BaseException] = []
        self._threads: list[threading.Thread] = []

    def _answer(self, call_id: str, name: str) -> None:
        try:
            self.harness.answer(self.conn, call_id, default_result(name))
        except BaseException as error:  # reported by run()
            self.failures.append(error)

    def run(self, until: Callable[[list[Event]], bool], timeout: float = 20) -> list[Event]:
        """Answer calls until ``until(events)`` holds and every answer has returned."""

        def unanswered(events: list[Event]) -> list[Event]:
            return [e for e in tool_calls(events) if e.payload.call_id not in self.answered]

        while True:
            events = self.harness.wait_for(self.conn, lambda evs: bool(unanswered(evs)) or until(evs), timeout)
            fresh = unanswered(events)
            for call in fresh:
                self.answered.append(call.payload.call_id)
                thread = threading.Thread(target=self._answer, args=(call.payload.call_id, call.payload.name))
                thread.start()
                self._threads.append(thread)
            if not fresh and until(events):
                for thread in self._threads:
                    thread.join(timeout)
                    assert not thread.is_alive(), "an answer did not return"
                events = self.harness.events(self.conn)
                if not unanswered(events) and until(events):
                    assert not self.failures, self.failures
                    return events


def run_in_threads(*targets: Callable[[], object], timeout: float = 30) -> list[object]:
    """Run the targets at the same instant (a barrier), return their results; re-raise failures."""
    barrier = threading.Barrier(len(targets))
    results: list[object] = [None] * len(targets)
    failures: list[BaseException] = []

    def runner(index: int, target: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout)
            results[index] = target()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=runner, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive(), "a racing handler did not return"
    if failures:
        raise failures[0]
    return results


class Background:
    """A call running in a thread; ``result()`` joins it and returns its value or re-raises."""

    def __init__(self, target: Callable[[], object]) -> None:
        self._value: object = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(target,), daemon=True)
        self._thread.start()

    def _run(self, target: Callable[[], object]) -> None:
        try:
            self._value = target()
        except BaseException as error:
            self._error = error

    def result(self, timeout: float = 30) -> object:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the handler did not return"
        if self._error is not None:
            raise self._error
        return self._value


class ControlledContext(LocalLambdaContext):
    """A Lambda context whose remaining time the test sets (``remaining_ms``), not the wall clock."""

    def __init__(self, remaining_ms: int) -> None:
        super().__init__(function_name="turn")
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def send_with_turn_context(
    harness: Harness, conn: Connection, body: str, context: LocalLambdaContext
) -> dict[str, Any]:
    """``$default``, with the turns it launches running under ``context`` (to control their time)."""
    functions = harness.lambdas.functions
    original = functions[TURN_FUNCTION]
    functions[TURN_FUNCTION] = dataclasses.replace(original, handler=lambda event, _: original.handler(event, context))
    try:
        return harness.send_raw(conn, body)
    finally:
        functions[TURN_FUNCTION] = original


def frame_count(harness: Harness, conn: Connection) -> int:
    """How many frames the connection has received (cheap: nothing is parsed)."""
    return len(harness.management.frames[conn.connection_id])


def events_since(harness: Harness, conn: Connection, start: int) -> list[Event]:
    """The events the connection received after its first ``start`` frames (without the
    ``sessionReady`` answering each sessionStart: tests/handlers/test_session_ready.py checks it)."""
    events = [parse_event(item) for item in harness.management.frames[conn.connection_id][start:]]
    assert all(isinstance(event, Event) for event in events), events
    return [event for event in events if event.kind_name != "sessionReady"]  # type: ignore[union-attr]


def release_moto_copies() -> None:
    """Drop moto's references to every model instance it ever made.

    moto tracks each instance for its dashboard, including the copy of the whole table that every
    ``TransactWriteItems`` takes for its rollback; over thousands of transactions that is millions
    of objects the garbage collector keeps walking (and the process frees at exit). Only the
    tracking lists are cleared: the tables keep their items.
    """
    reset_model_data()
