"""A small scripted conductor on 127.0.0.1 for the client's tests.

Each transcript runs the ``turn`` script as its own task, so a turn outlives the connection
it started on; everything it sends goes to the session's current connection (waiting for a
reconnect when there is none) and tool results are matched per session, not per connection.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from shared.wire.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    ParseOutcome,
    SessionReady,
    SessionStart,
    ToolCall,
    ToolResult,
    UserAudioTranscriptFinal,
    make_event,
    parse_event,
)

TEST_TIMEOUT = 10.0


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop, bounded in time."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), TEST_TIMEOUT))

    return wrapper


class Changes:
    """Wake-ups for ``wait_until`` whenever something is recorded."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.add(waiter)
                try:
                    await waiter
                finally:
                    self._waiters.discard(waiter)


@dataclass
class FakeConnection:
    ws: ServerConnection
    index: int
    session_id: str | None
    frames: list[str | bytes] = field(default_factory=list)
    outcomes: list[ParseOutcome] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [o for o in self.outcomes if isinstance(o, Event)]

    @property
    def session_start(self) -> SessionStart | None:
        starts = [e.payload for e in self.events if isinstance(e.payload, SessionStart)]
        return starts[0] if starts else None


class FakeSession:
    """The conductor's view of one sessionId: current connection, seq counter, pending calls."""

    def __init__(self, session_id: str, changes: Changes) -> None:
        self.session_id = session_id
        self.connection: FakeConnection | None = None
        self.sent: list[Event] = []
        self.received: list[tuple[int, Event]] = []
        self.pending: dict[str, asyncio.Future[ToolResult]] = {}
        self._changes = changes
        self._seq = itertools.count(1)
        self._call_ids = itertools.count(1)

    # -- what turn scripts use --

    def next_seq(self) -> int:
        return next(self._seq)

    async def send(self, payload: Any, *, seq: bool = True) -> Event:
        event = make_event(payload, seq=self.next_seq() if seq else None)
        await self.send_event(event)
        return event

    async def send_event(self, event: Event) -> None:
        await self.send_raw(event.to_json())
        self.sent.append(event)
        self._changes.notify()

    async def send_raw(self, frame: str | bytes) -> None:
        await self._changes.wait_until(lambda: self.connection is not None)
        assert self.connection is not None
        await self.connection.ws.send(frame)

    async def call_nowait(self, name: str, arguments: dict[str, Any] | str) -> asyncio.Future[ToolResult]:
        """Send a toolCall; the returned future resolves with its toolResult."""
        call_id = f"call-{next(self._call_ids)}"
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self.pending[call_id] = future
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        await self.send(ToolCall(call_id=call_id, name=name, arguments=text))
        return future

    async def call(self, name: str, arguments: dict[str, Any] | str) -> ToolResult:
        return await (await self.call_nowait(name, arguments))

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        await self._changes.wait_until(condition, timeout)

    # -- what tests inspect --

    def results(self) -> list[ToolResult]:
        return [e.payload for _, e in self.received if isinstance(e.payload, ToolResult)]

    def errors(self) -> list[ErrorPayload]:
        return [e.payload for _, e in self.received if isinstance(e.payload, ErrorPayload)]

    def transcripts(self) -> list[str]:
        return [e.payload.text for _, e in self.received if isinstance(e.payload, UserAudioTranscriptFinal)]

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What the latest ``sessionStart`` announced (as the conductor, the latest one applies)."""
        starts = [e.payload for _, e in self.received if isinstance(e.payload, SessionStart)]
        return tuple(starts[-1].capabilities or ()) if starts else ()

    def _on_event(self, connection: FakeConnection, event: Event) -> None:
        self.received.append((connection.index, event))
        payload = event.payload
        if isinstance(payload, ToolResult):
            future = self.pending.pop(payload.call_id, None)
            if future is not None and not future.done():
                future.set_result(payload)


TurnScript = Callable[[FakeSession, str], Awaitable[None]]


def standard_turn(reply: str = "Hi there, how can I help?") -> TurnScript:
    """The conductor's turn: thinking → cumulative partials → final → tts.speak → idle."""

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await speak(session, reply)
        await session.call_nowait("convo.setState", {"state": "idle"})

    return turn


async def speak(session: FakeSession, reply: str) -> ToolResult:
    """Partials word by word (unnumbered, as the conductor sends them), the final, then tts.speak
    (awaiting its result)."""
    words = reply.split()
    for count in range(1, len(words) + 1):
        await session.send(AssistantSpeechPartial(text=" ".join(words[:count])), seq=False)
    await session.send(AssistantSpeechFinal(text=reply))
    return await session.call("tts.speak", {"text": reply})


async def speak_sentences(session: FakeSession, sentences: list[str]) -> list[ToolResult]:
    """The ``sentenceSpeech`` flow of one segment: a partial per sentence, and a tts.speak for each
    sentence once the next one has begun; then the final (the whole text) and a tts.speak of the
    last sentence. Every speak's result is awaited after all were sent; the results in call order."""
    calls: list[asyncio.Future[ToolResult]] = []
    for count in range(1, len(sentences) + 1):
        await session.send(AssistantSpeechPartial(text=" ".join(sentences[:count])), seq=False)
        if count > 1:
            calls.append(await session.call_nowait("tts.speak", {"text": sentences[count - 2]}))
    await session.send(AssistantSpeechFinal(text=" ".join(sentences)))
    calls.append(await session.call_nowait("tts.speak", {"text": sentences[-1]}))
    return [await call for call in calls]


def sentence_turn(sentences: list[str]) -> TurnScript:
    """A turn for a client that announced ``sentenceSpeech`` (the plain one otherwise): idle only
    after the result of the last tts.speak."""

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        if "sentenceSpeech" in session.capabilities:
            await speak_sentences(session, sentences)
        else:
            await speak(session, " ".join(sentences))
        await session.call_nowait("convo.setState", {"state": "idle"})

    return turn


class FakeConductor:
    """``async with FakeConductor(turn) as fake:`` then connect a client to ``fake.url``."""

    def __init__(self, turn: TurnScript | None = None) -> None:
        self.turn = turn or standard_turn()
        self.connections: list[FakeConnection] = []
        self.sessions: dict[str, FakeSession] = {}
        self.refuse_handshakes = 0
        self.handshakes = 0
        self.answers_session_start = True  # False: a conductor from before sessionReady
        self.full = False  # True: every sessionStart is answered too_many_devices (four devices already)
        self.changes = Changes()
        self.turn_errors: list[BaseException] = []
        self._turns: set[asyncio.Task[None]] = set()
        self._server: Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    async def __aenter__(self) -> FakeConductor:
        self._server = await serve(self._handle, "127.0.0.1", 0, process_request=self._process_request)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Close every connection and stop listening."""
        for task in self._turns:
            task.cancel()
        await asyncio.gather(*self._turns, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def session(self, session_id: str) -> FakeSession:
        return self.sessions.setdefault(session_id, FakeSession(session_id, self.changes))

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        await self.changes.wait_until(condition, timeout)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.handshakes += 1
        if self.refuse_handshakes > 0:
            self.refuse_handshakes -= 1
            return Response(HTTPStatus.SERVICE_UNAVAILABLE, "Service Unavailable", Headers(), b"busy\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        session_id = dict(parse_qsl(urlsplit(ws.request.path).query)).get("sessionId")
        connection = FakeConnection(ws=ws, index=len(self.connections), session_id=session_id)
        self.connections.append(connection)
        session = self.session(session_id or "")
        session.connection = connection
        self.changes.notify()
        try:
            async for frame in ws:
                connection.frames.append(frame)
                outcome = parse_event(frame)
                connection.outcomes.append(outcome)
                if isinstance(outcome, Event):
                    session._on_event(connection, outcome)
                    if isinstance(outcome.payload, SessionStart) and self.full:
                        refused = ErrorPayload(code=str(ErrorCode.TOO_MANY_DEVICES), message="at most 4 devices")
                        await ws.send(make_event(refused).to_json())
                    elif isinstance(outcome.payload, SessionStart) and self.answers_session_start:
                        ready = SessionReady(
                            resumed=bool(session.transcripts()[:-1] or session.sent),
                            lastSeq=len([e for e in session.sent if e.seq is not None]),
                            capabilities=tuple(outcome.payload.capabilities or ()),
                        )
                        await ws.send(make_event(ready).to_json())
                    if isinstance(outcome.payload, UserAudioTranscriptFinal):
                        self._start_turn(session, outcome.payload.text)
                self.changes.notify()
        except ConnectionClosed:  # a dropped connection ends the handler like a close does
            pass
        finally:
            if session.connection is connection:
                session.connection = None
            self.changes.notify()

    def _start_turn(self, session: FakeSession, text: str) -> None:
        task = asyncio.create_task(self._run_turn(session, text))
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    async def _run_turn(self, session: FakeSession, text: str) -> None:
        try:
            await self.turn(session, text)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.turn_errors.append(exc)
            raise
