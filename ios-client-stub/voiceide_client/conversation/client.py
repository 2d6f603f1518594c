"""ConductorClient: the iOS runtime's side of the VoiceIDE WebSocket, as an asyncio library.

One connection at a time; opening, reconnecting with backoff and going offline are in
``connection.link``. A supervisor task reads frames and this module dispatches them as events;
``toolCall`` events go to ``tool_runs`` (each callId run once). Outgoing events wait for a
live link, so a tool that finishes during a reconnect answers on the new connection; offline,
the LocalConductorStub takes them.

Frames that are not protocol events (JSON objects without ``kind``, such as API Gateway's own
``{"message": "Endpoint request timed out", ...}``) are logged and ignored.

Every ``assistantUIPatch`` is applied to the client's UI model (``ui``, starting as
``{"cards": []}``); the cards it adds are shown, a patch that does not apply is one warning.

An ``error`` ``session_ended`` or ``session_erased`` (the person ended or erased the session from
the sessions API) is followed by the server's close: the client then closes instead of
reconnecting (``closed_by_server`` holds the code). After ``taken_over`` (another connection took
the session over) or ``too_many_devices`` (the session has as many devices as it may) the client
stops at once: one line to ``on_progress``, the connection closed, no reconnect, ``connect()``
returning without waiting for a ``sessionReady`` that will not come.

A final transcript whose event would not fit in one frame is refused before anything is sent
(``TranscriptTooLarge``): API Gateway would close the connection on it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from shared.wire.protocol import (
    MAX_HEARD_TEXT,
    AssistantUIPatch,
    Device,
    ErrorCode,
    ErrorPayload,
    Event,
    Handoff,
    IgnoredEvent,
    ProtocolError,
    SessionReady,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnUsage,
    UserAudioTranscriptFinal,
    make_event,
    parse_event,
)
from shared.wire.protocol_tools import DeclaredTool
from shared.wire.workspace import Vocabulary
from voiceide_client.connection.incoming import SESSION_CLOSING, STOPPING, TRANSCRIPT_REFUSED, gateway_frame, raw_seq
from voiceide_client.connection.link import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    MAX_FRAME_BYTES,
    ClientClosed,
    ConnectionLifecycle,
    HandshakeHeaders,
    Link,
    Progress,
    Sleep,
    frames_of,
    session_url,
    url_session_id,
)
from voiceide_client.connection.local_stub import OFFLINE_REPLY, LocalConductorStub
from voiceide_client.rendering.transcript import NullRenderer, Renderer
from voiceide_client.rendering.ui_model import PatchError, UIModel
from voiceide_client.tools.result_parts import ResultTooLarge, fits, split_result
from voiceide_client.tools.router import ToolHandler, ToolRouter
from voiceide_client.voice.recognizer import RecognizerPace, final_transcript, send_transcript, speaking_time
from voiceide_client.voice.speaker import Speaker

from .capabilities import DEFAULT_CAPABILITIES, checked_capabilities
from .tool_runs import ToolRuns
from .turn import ToolInvocation, TurnResult, TurnTimeout

logger = logging.getLogger(__name__)

EventCallback = Callable[[Event], Any]


READY_TIMEOUT_S = 5.0
CONDUCTOR_TRANSCRIPT_LIMIT = 8000
"""The conductor's default limit on a final transcript, in characters (``transcript_too_long``)."""


class TranscriptTooLarge(ValueError):
    """A transcript too long for one frame: not sent (the connection would be closed on it)."""

    def __init__(self, text: str, size: int, max_frame_bytes: int) -> None:
        super().__init__(
            f"not sent: the line has {len(text):,} characters, more than one {max_frame_bytes // 1024} KB frame "
            f"holds (the conductor takes up to {CONDUCTOR_TRANSCRIPT_LIMIT:,})"
        )
        self.text = text
        self.size = size


def stop_line(code: str, message: str) -> str:
    """What the client says, once, when the conductor stops this connection (``STOPPING``)."""
    if code == ErrorCode.TAKEN_OVER:
        return "another connection took this session over: stopping"
    return f"not added to the session: {message or 'it has as many devices as it may'}; stopping"


class ConductorClient(ConnectionLifecycle):
    """Connects as the iOS app does, runs tool calls, and reports each turn.

    ``events`` are the distinct events received (server and, once offline, the local stub),
    ``sent`` the events written to the WebSocket, ``errors`` the client-side error events
    (``ws_*``, ``decode_error``, ``reconnect_failed``), ``gateway_frames`` the ignored frames
    that are not protocol events. ``on_event`` (sync or async) sees both received events and
    client-side errors. Events longer than ``max_frame_bytes`` are sent in several frames.
    ``handshake_headers`` is awaited before every handshake, reconnects included, for headers
    to send with it (``CognitoSignIn.headers`` gives ``Authorization: Bearer <ID token>``); a
    ``ConnectionError`` it raises fails that connection attempt. ``on_progress`` is told how the
    connection is doing: retries of the first connection, reconnect attempts, the offline stub
    taking over, the conductor being back. ``capabilities`` are announced in every
    ``sessionStart`` (none: the field is left out and the conductor uses its plain flow).
    ``handoff`` (a conversation continued from chat) goes in the first ``sessionStart`` only;
    ``declared_tools`` (the tools the model may call, else the conductor's catalog) and ``device``
    (which device this is, for a session several devices share) in every one. A tool result too big
    for one frame is sent in parts (``tools.result_parts``), each part with the same event id every time
    it is sent again, so the conductor takes a resent part as the resent event it is.
    ``ui`` is the UI model the conductor's ``assistantUIPatch`` events are applied to; ``vocabulary``
    the phrases of the conductor's latest ``vocabulary``, for the recognizer.
    """

    def __init__(
        self,
        url: str,
        session_id: str | None = None,
        tools: ToolRouter | Mapping[str, ToolHandler] | None = None,
        *,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on_event: EventCallback | None = None,
        renderer: Renderer | None = None,
        speaker: Speaker | None = None,
        last_seq: int | None = None,
        sleep: Sleep = asyncio.sleep,
        open_timeout: float = 10.0,
        close_timeout: float = 2.0,
        offline_reply: str = OFFLINE_REPLY,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        handshake_headers: HandshakeHeaders | None = None,
        on_progress: Progress | None = None,
        capabilities: Sequence[str] = DEFAULT_CAPABILITIES,
        handoff: Handoff | Mapping[str, Any] | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        declared_tools: Sequence[DeclaredTool | Mapping[str, Any]] | None = None,
        device: Device | Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(tools, ToolRouter):
            if speaker is not None:
                raise ValueError("pass the speaker to the ToolRouter, not to both")
            self.tools = tools
        else:
            self.tools = ToolRouter(speaker, tools)
        self.session_id = session_id or url_session_id(url) or str(uuid.uuid4())
        self.url = session_url(url, self.session_id)
        self.capabilities = checked_capabilities(capabilities)
        self.handoff = handoff if handoff is None or isinstance(handoff, Handoff) else Handoff.model_validate(handoff)
        self.backoff = tuple(backoff)
        self.max_attempts = max_attempts
        self.last_seq = last_seq
        self.open_timeout = open_timeout
        self.close_timeout = close_timeout
        self.offline_reply = offline_reply
        self.max_frame_bytes = max_frame_bytes
        self._on_event = on_event
        self._renderer: Renderer = renderer or NullRenderer()
        self._sleep = sleep
        self._handshake_headers = handshake_headers
        self._on_progress = on_progress

        self.events: list[Event] = []
        self.sent: list[Event] = []
        self.errors: list[Event] = []
        self.duplicates: list[Event] = []
        self.ignored: list[IgnoredEvent] = []
        self.gateway_frames: list[dict[str, Any]] = []  # e.g. API Gateway's {"message": ...}: ignored
        self.turns: list[TurnResult] = []
        self.ui = UIModel()
        self.connections = 0
        self.reconnect_attempts = 0
        self.stub: LocalConductorStub | None = None
        self.ready_timeout = ready_timeout
        self.declared_tools = (
            None
            if declared_tools is None
            else tuple(t if isinstance(t, DeclaredTool) else DeclaredTool.model_validate(t) for t in declared_tools)
        )
        self.device = device if device is None or isinstance(device, Device) else Device.model_validate(device)
        self.session_ready: SessionReady | None = None  # the answer to the latest sessionStart
        # the latest phrases the conductor gave for the recognizer's custom vocabulary (``vocabulary``)
        self.vocabulary: tuple[str, ...] = ()
        # session_ended / session_erased / taken_over / too_many_devices: never reconnect
        self.closed_by_server: str | None = None
        self.closed_message: str | None = None  # what the conductor said with that code
        self._session_ready = asyncio.Event()

        self._link = Link.NEW
        self._ready = asyncio.Event()
        self._ws: ClientConnection | None = None
        self._send_lock = asyncio.Lock()
        self._supervisor: asyncio.Task[None] | None = None
        self._turn: TurnResult | None = None
        self._turn_sent_on: int | None = None  # the connection (its number) the turn's final went out on
        self.restarts = 0  # reconnects that found the conductor without this conversation
        self._waiters: set[asyncio.Future[None]] = set()
        self._seen_ids: set[str] = set()
        self._seen_seqs: set[int] = set()
        self._tool_runs = ToolRuns(
            self.tools,
            self._send_answer,
            on_change=self._notify,
            on_turn_done=lambda turn: self._finish_turn(turn, completed=True),
        )
        self.tools.add_state_listener(self._on_state)

    # ---- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self, *, retries: int = 0) -> None:
        """Open the first connection and send ``sessionStart``; raises ConductorUnavailable.

        With ``retries``, a failure that waiting can mend (nothing listening yet, a timeout, a 5xx)
        is tried again up to that many times, after the backoff's delays; a refused handshake
        (4xx) or a TLS mismatch fails at once.
        """
        if self._link is not Link.NEW:
            raise RuntimeError(f"connect() called on a {self._link} client")
        ws = await self._open_first(retries)
        self._supervisor = asyncio.create_task(self._supervise(ws), name="voiceide-client supervisor")
        await self._wait_session_ready()

    async def _wait_session_ready(self) -> None:
        """Wait (at most ``ready_timeout``) for the ``sessionReady`` that answers the latest
        ``sessionStart``: then the capabilities are set and nothing of the next answer is held back.
        A conductor that never answers (an older one) costs the wait once per connection."""
        if self._session_ready.is_set() or not self.connected:
            return
        try:
            async with asyncio.timeout(self.ready_timeout):
                await self._session_ready.wait()
        except TimeoutError:
            logger.info("no sessionReady within %.1f s; going on", self.ready_timeout)
            self._session_ready.set()

    async def _closed_by_server(self) -> None:
        """The session was ended or erased and the server closed its connection: closed for good."""
        self._ws = None
        self._set_link(Link.CLOSED)
        await asyncio.gather(*self._tool_runs.cancel(), return_exceptions=True)
        if self._turn is not None:
            self._finish_turn(self._turn, completed=False)
        self._progress(f"the session was closed by the conductor ({self.closed_by_server}); not reconnecting")

    def _stop(self, error: ErrorPayload) -> None:
        """The conductor stopped this connection (``STOPPING``): closed for good, said once. The
        supervisor closes the socket and cancels the running tools."""
        self.closed_by_server = error.code
        self.closed_message = error.message
        self._set_link(Link.CLOSED)
        self._session_ready.set()  # connect() waits for no sessionReady now
        if self._turn is not None:
            self._finish_turn(self._turn, completed=False)
        self._progress(stop_line(error.code, error.message))

    async def _shut(self, ws: ClientConnection) -> None:
        if self._ws is ws:
            self._ws = None
        await asyncio.gather(*self._tool_runs.cancel(), return_exceptions=True)
        await ws.close()

    async def close(self) -> None:
        """Close the connection (with a close handshake) and cancel running tools."""
        if self._link is Link.CLOSED:
            supervisor = self._supervisor
            if supervisor is not None and supervisor is not asyncio.current_task():
                await asyncio.gather(supervisor, return_exceptions=True)  # a stop still closing the socket
            return
        ws = self._ws
        self._ws = None
        self._set_link(Link.CLOSED)
        tasks = self._tool_runs.cancel()
        if self._supervisor is not None:
            self._supervisor.cancel()
            tasks.append(self._supervisor)
        if ws is not None:
            await ws.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._turn is not None:
            self._finish_turn(self._turn, completed=False)

    # ---- state -------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The conversation state last set by ``convo.setState``."""
        return self.tools.state

    @property
    def tool_calls(self) -> list[ToolInvocation]:
        """Every tool call run, in the order received (each callId once)."""
        return self._tool_runs.invocations

    @property
    def repeated_calls(self) -> list[ToolCall]:
        """``toolCall`` events for a callId already run: answered again, not run again."""
        return self._tool_runs.repeated

    @property
    def speaking(self) -> bool:
        """Whether an answer is being played now."""
        return self.tools.speaker.is_playing

    @property
    def answering(self) -> bool:
        """Whether a turn is open (its answer on its way) or an answer is being played."""
        return self._turn is not None or self.speaking

    @property
    def link(self) -> Link:
        return self._link

    @property
    def connected(self) -> bool:
        return self._link is Link.CONNECTED

    @property
    def offline(self) -> bool:
        """True once reconnection failed and the LocalConductorStub answers instead."""
        return self._link is Link.OFFLINE

    @property
    def error_codes(self) -> list[str]:
        return [e.payload.code for e in self.errors if isinstance(e.payload, ErrorPayload)]

    # ---- what tests and the CLI call ---------------------------------------------------------

    async def say(self, text: str, timeout: float = 30.0, *, speaking: RecognizerPace | None = None) -> TurnResult:
        """Send a final transcript and wait until the turn ends (``convo.setState idle`` handled).

        With ``speaking``, partials go first, word by word at that pace (added to ``timeout``).
        A turn still open is closed as not completed: a new transcript replaces it.
        Raises TurnTimeout (carrying what happened) when the turn does not end in time, and
        TranscriptTooLarge, before anything is sent, when the final would not fit in one frame.
        """
        final = make_event(UserAudioTranscriptFinal(text=final_transcript(text, speaking)))
        size = len(final.to_json().encode("utf-8"))
        if size > self.max_frame_bytes:
            raise TranscriptTooLarge(text, size, self.max_frame_bytes)
        if self._turn is not None:
            self._finish_turn(self._turn, completed=False)
        turn = TurnResult(transcript=final_transcript(text, speaking))
        self._turn = turn
        self._turn_sent_on = None
        self.turns.append(turn)
        self.tools.new_request()  # a barge-in held speech until the user's next request
        try:
            async with asyncio.timeout(timeout + speaking_time(text, speaking)):
                await self._wait_session_ready()
                await send_transcript(self._send, text, speaking)
                await turn.done.wait()
        except TimeoutError:
            self._finish_turn(turn, completed=False)
            raise TurnTimeout(turn, timeout) from None
        return turn

    async def barge_in(self, message: str = "user interrupted playback", *, heard_text: str | None = None) -> None:
        """Tell the conductor the user talked over it and stop playback.

        The event carries ``heardText``: the words of the answer the user heard so far (or
        ``heard_text`` when given). Speech waiting to be played is dropped, and so is any
        ``tts.speak`` that arrives before the next ``say`` (the conductor may have sent it before
        it heard the barge-in); each of them answers ``{"spoken": false, "heardText": …}`` once
        the interruption is on its way.
        """
        self.tools.hold_speech()
        heard = self.tools.heard_text if heard_text is None else heard_text[:MAX_HEARD_TEXT]
        if not self._ready.is_set():
            self.tools.interrupt()  # the user must not wait for a reconnect to be heard
        payload = ErrorPayload(code=str(ErrorCode.AUDIO_OUTPUT_INTERRUPTED), message=message, heard_text=heard)
        await self._send(make_event(payload))
        self.tools.interrupt()

    async def send_progress(self, call_id: str, fraction: float | None = None, message: str = "") -> None:
        """Tell the conductor how far a call this app runs has got (``toolProgress``)."""
        await self._send(make_event(ToolProgress(callId=call_id, fraction=fraction, message=message)))

    @property
    def usages(self) -> list[TurnUsage]:
        """What each turn cost, as the conductor reported it (``turnUsage``), oldest first."""
        return [event.payload for event in self.events if isinstance(event.payload, TurnUsage)]

    async def drop_connection(self) -> None:
        """Simulate a network drop: abort the transport with no close handshake."""
        ws = self._ws
        if ws is None:
            raise RuntimeError("no open connection to drop")
        self._mark_down(ws)
        ws.transport.abort()

    async def send_raw(self, data: str | bytes) -> None:
        """Write a frame as is (for bad-input tests); not recorded in ``sent``."""
        await self._ready.wait()
        ws = self._ws
        if self._link is not Link.CONNECTED or ws is None:
            raise ClientClosed(f"cannot send a raw frame while {self._link}")
        async with self._send_lock:
            await ws.send(data)

    async def wait_until(self, condition: Callable[[], bool], timeout: float | None = 5.0) -> None:
        """Wait until ``condition()`` holds; re-checked whenever the client's state changes
        (``timeout`` None: as long as it takes)."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while not condition():
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.add(waiter)
                try:
                    await waiter
                finally:
                    self._waiters.discard(waiter)

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 5.0, *, since: int = 0) -> Event:
        """The first received event from index ``since`` on that matches ``predicate``."""
        found: list[Event] = []
        position = since

        def match() -> bool:
            nonlocal position
            while position < len(self.events):
                event = self.events[position]
                position += 1
                if predicate(event):
                    found.append(event)
                    return True
            return False

        await self.wait_until(match, timeout)
        return found[0]

    async def wait_connected(self, timeout: float = 5.0) -> None:
        await self.wait_until(lambda: self._link is Link.CONNECTED, timeout)

    # ---- sending -----------------------------------------------------------------------------

    async def _send(self, event: Event) -> None:
        """Deliver ``event`` on the live link, waiting out a reconnect; offline, to the stub."""
        if self._link is Link.NEW:
            raise RuntimeError("connect() the client before sending")
        while True:
            await self._ready.wait()
            if self._link is Link.CONNECTED and not self._session_ready.is_set():
                # what the conductor answers first says whether it still has the conversation
                await self._wait_session_ready()
                continue
            if self._link is Link.CLOSED:
                raise ClientClosed(f"client closed; {event.kind_name} not sent")
            if self._turn is not None:
                self._turn.sending(event)
            if self._link is Link.OFFLINE:
                assert self.stub is not None
                self._renderer.sent(event)
                await self.stub.receive(event)
                return
            ws = self._ws
            assert ws is not None
            try:
                async with self._send_lock:
                    await ws.send(frames_of(event.to_json(), self.max_frame_bytes))
            except ConnectionClosed as exc:
                self._mark_down(ws)
                await self._client_error(
                    ErrorCode.WS_SEND_FAILED, f"{event.kind_name} not sent ({exc}); will resend after reconnect"
                )
                continue
            self._record_sent(event)
            return

    def _record_sent(self, event: Event) -> None:
        self.sent.append(event)
        if isinstance(event.payload, UserAudioTranscriptFinal) and self._turn is not None:
            self._turn_sent_on = self.connections
        self._renderer.sent(event)
        self._notify()

    # ---- receiving ---------------------------------------------------------------------------

    async def _on_frame(self, frame: str | bytes) -> None:
        notice = gateway_frame(frame)
        if notice is not None:
            logger.debug("ignoring a frame that is not a protocol event: %s", notice)
            self.gateway_frames.append(notice)
            self._notify()
            return
        outcome = parse_event(frame)
        if isinstance(outcome, ProtocolError):
            await self._client_error(ErrorCode.DECODE_ERROR, f"{outcome.code}: {outcome.message}")
        elif isinstance(outcome, IgnoredEvent):
            seq = raw_seq(frame)
            if not self._is_duplicate(outcome.id, seq):
                self._remember(outcome.id, seq)
                self.ignored.append(outcome)
        else:
            await self._dispatch(outcome)

    async def _dispatch(self, event: Event) -> None:
        event_id = str(event.id)
        if self._is_duplicate(event_id, event.seq):
            self.duplicates.append(event)
            return
        self._remember(event_id, event.seq)
        self.events.append(event)
        if isinstance(event.payload, TurnUsage):
            # sent after the turn's idle: it belongs to the turn that ended, not to one just opened
            ended = self._ended_turn()
            if ended is not None and ended.usage is None:
                ended.usage = event.payload
            self._renderer.received(event)
            self._notify()
            await self._emit(event)
            return
        turn = self._turn
        if turn is not None:
            turn.received(event)
            if isinstance(event.payload, ErrorPayload):
                turn.errors.append(event.payload)
                if event.payload.code in TRANSCRIPT_REFUSED:  # no turn started: nothing else comes
                    self._finish_turn(turn, completed=False)
        if isinstance(event.payload, ErrorPayload) and event.payload.code in SESSION_CLOSING:
            self.closed_by_server = event.payload.code
        self._renderer.received(event)
        if isinstance(event.payload, AssistantUIPatch):
            self._apply_ui_patch(event.payload.patch)
        elif isinstance(event.payload, SessionReady):
            self._on_session_ready(event.payload)
        elif isinstance(event.payload, Vocabulary):
            self.vocabulary = event.payload.phrases
        self._notify()
        if isinstance(event.payload, ToolCall):
            self._tool_runs.take(event.payload, turn)
            # let a tool that finishes at once (convo.setState) take effect before the next event
            await asyncio.sleep(0)
        await self._emit(event)
        if isinstance(event.payload, ErrorPayload) and event.payload.code in STOPPING and self.connected:
            self._stop(event.payload)  # after on_event: the app knows why before the line is said

    def _on_session_ready(self, ready: SessionReady) -> None:
        """The answer to the latest ``sessionStart``. A conductor that does not have the conversation
        the client was in (``resumed: false`` after events were seen: a local stack restarted, the
        session expired) numbers its events from 1 again: the client forgets the numbers it saw and
        says so once; a request it sent before the reconnect was lost with the conversation."""
        self.session_ready = ready
        if not ready.resumed and self._seen_seqs:
            self._seen_seqs.clear()
            self.last_seq = None
            self.restarts += 1
            lost = self._turn is not None and self._turn_sent_on is not None and self._turn_sent_on < self.connections
            self._progress(
                "the conductor did not have this conversation (restarted, or the session expired): "
                "it goes on as a new one" + ("; the request in progress was lost, say it again" if lost else "")
            )
            if lost and self._turn is not None:
                self._finish_turn(self._turn, completed=False)
        self._session_ready.set()

    def _apply_ui_patch(self, patch: str) -> None:
        try:
            cards = self.ui.apply(patch)
        except PatchError as exc:
            logger.warning("assistantUIPatch not applied: %s", exc)
            self._renderer.warning(f"UI patch not applied: {exc}")
            return
        if cards:
            self._renderer.cards(cards)

    def _is_duplicate(self, event_id: str, seq: int | None) -> bool:
        return event_id in self._seen_ids or (seq is not None and seq in self._seen_seqs)

    def _remember(self, event_id: str, seq: int | None) -> None:
        self._seen_ids.add(event_id)
        if seq is not None:
            self._seen_seqs.add(seq)
            self.last_seq = seq if self.last_seq is None else max(self.last_seq, seq)

    # ---- tool answers and turns --------------------------------------------------------------

    async def _send_answer(self, answer: Event) -> bool:
        """Send a tool's answer; one too big for a frame goes as parts, each an event of its own."""
        events = [answer]
        if isinstance(answer.payload, ToolResult) and not fits(answer.payload, self.max_frame_bytes):
            try:
                parts = split_result(answer.payload, self.max_frame_bytes)
                events = [make_event(part, event_id=uuid.uuid5(answer.id, f"part-{part.part}")) for part in parts]
            except ResultTooLarge as exc:
                failed = ToolResult(
                    call_id=answer.payload.call_id, result=None, error=f"result too large to send: {exc}"
                )
                events = [make_event(failed)]
        try:
            for event in events:
                await self._send(event)
        except ClientClosed:
            return False
        return True

    def _ended_turn(self) -> TurnResult | None:
        """The latest turn the conductor ended (set ``idle`` in), which a ``turnUsage`` describes."""
        return next((turn for turn in reversed(self.turns) if turn.went_idle), None)

    def _finish_turn(self, turn: TurnResult, *, completed: bool) -> None:
        turn.finish(completed=completed)
        if self._turn is turn:
            self._turn = None
        self._notify()

    def _on_state(self, state: str) -> None:
        self._renderer.state(state)
        self._notify()

    # ---- reporting ---------------------------------------------------------------------------

    async def _client_error(self, code: ErrorCode, message: str) -> None:
        payload = ErrorPayload(code=str(code), message=message)
        event = make_event(payload)
        self.errors.append(event)
        if self._turn is not None:
            self._turn.errors.append(payload)
        self._renderer.client_error(payload)
        self._notify()
        await self._emit(event)

    async def _emit(self, event: Event) -> None:
        if self._on_event is None:
            return
        try:
            outcome = self._on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("on_event callback failed")

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
