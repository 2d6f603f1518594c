"""``voiceide-client``: talk to a conductor from the terminal, typed lines standing in for speech.

Exit codes: ``EXIT_CODES``. On a terminal the growing answer is redrawn in place
(``rendering.live``); otherwise one plain line per final, tool call, state and error.

With ``--username`` (or ``VOICEIDE_USERNAME``) the client signs in to the conductor's Cognito
user pool first and sends the ID token on every handshake (``connection.sign_in.CognitoSignIn``).
``--handoff FILE.json`` continues a conversation from chat: the first ``sessionStart`` carries it.
``voiceide-client sessions …`` and ``--resume`` use the sessions API (``sessions``);
``voiceide-client companion …`` joins a session as the desktop companion (``command_line.companion``).
Typed on a terminal (or with ``--partials``), a line goes out as the app's recognizer sends speech:
partial transcripts word by word, then the final (``voice.recognizer``). The options are in ``arguments``.

The client is a device of its session (``device``: a kept id, a name, ``--roles``). When
the conductor stops it (another connection took the session over, or the session already has four
devices) it says so in one line and ends, without reading more input. A line too long for one frame
is refused before anything is sent. With ``--usage``, a turn's cost is printed before the next line
is taken (waiting at most ``USAGE_GRACE_S`` for it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import TextIO

from shared.wire.protocol import (
    SENTENCE_SPEECH,
    TOOLS,
    AssistantSpeechPartial,
    DevicesChanged,
    ErrorCode,
    ErrorPayload,
    Event,
    SessionReady,
    ToolProgress,
    TurnUsage,
)
from voiceide_client.connection.link import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    ClientClosed,
    ConductorUnavailable,
    Link,
)
from voiceide_client.connection.sign_in import CognitoSignIn, SignInError
from voiceide_client.conversation.capabilities import DEFAULT_CAPABILITIES
from voiceide_client.conversation.client import ConductorClient, TranscriptTooLarge
from voiceide_client.conversation.turn import TurnResult, TurnTimeout
from voiceide_client.rendering.choice import transcript_renderer
from voiceide_client.rendering.transcript import TranscriptRenderer, excerpt
from voiceide_client.tools.declarations import declared_tools
from voiceide_client.tools.router import ToolRouter
from voiceide_client.tools.workspace import Workspace
from voiceide_client.voice.recognizer import RecognizerPace
from voiceide_client.voice.speaker import make_speaker

from .arguments import (
    EXIT_OK,
    EXIT_SERVER_ERROR,
    EXIT_SIGN_IN_FAILED,
    EXIT_TURN_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    SPEECH_RATE,
    build_parser,
    load_handoff,
    recognizer_pace,
    script_lines,
    sign_in_from,
)
from .companion import run_companion
from .device import terminal_device
from .session_devices import SessionDevices
from .sessions import api_for, pick_session, run_sessions
from .usage_line import USAGE_GRACE_S, USAGE_WAIT_S, usage_line

BARGE_IN_LINE = "!"


class BargeInAfter:
    """Barges in once per turn when that turn has seen ``count`` assistant partials."""

    def __init__(self, count: int | None) -> None:
        self.count = count
        self.client: ConductorClient | None = None
        self._barged: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def on_event(self, event: Event) -> None:
        client = self.client
        if self.count is None or client is None or not client.turns:
            return
        if not isinstance(event.payload, AssistantSpeechPartial):
            return
        turn = client.turns[-1]
        if id(turn) not in self._barged and len(turn.partials) >= self.count:
            self._barged.add(id(turn))
            task = asyncio.create_task(client.barge_in())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _server_errors(turn: TurnResult) -> list[str]:
    """The codes of the ``error`` events the conductor sent during ``turn``."""
    return [event.payload.code for event in turn.events if isinstance(event.payload, ErrorPayload)]


@dataclass(frozen=True)
class TurnSettings:
    """How each line is said: the turn's time limit, the recognizer's pace (None: the final only),
    and how long to wait after the turn's end for its ``turnUsage`` (0: not at all)."""

    timeout: float
    pace: RecognizerPace | None = None
    usage_wait: float = 0.0


async def _take_turn(client: ConductorClient, text: str, settings: TurnSettings, renderer: TranscriptRenderer) -> int:
    try:
        turn = await client.say(text, timeout=settings.timeout, speaking=settings.pace)
    except TurnTimeout as exc:
        renderer.notice(f"voiceide-client: {exc}")
        return EXIT_TURN_TIMEOUT
    except TranscriptTooLarge as exc:
        renderer.notice(f"voiceide-client: {exc}")
        return EXIT_USAGE
    except ClientClosed:  # the session was ended or erased, or the conductor stopped this client
        renderer.notice(f"voiceide-client: not sent, the session is closed: {excerpt(text, 80)}")
        return EXIT_SERVER_ERROR
    if settings.usage_wait and turn.went_idle:
        await _usage_of(client, turn, settings.usage_wait)
    return EXIT_SERVER_ERROR if _server_errors(turn) else EXIT_OK


async def _usage_of(client: ConductorClient, turn: TurnResult, wait: float) -> None:
    """Wait (at most ``wait``) for the ``turnUsage`` the conductor sends after the turn's idle, so
    that its line comes before the next request."""
    with contextlib.suppress(TimeoutError):
        await client.wait_until(lambda: turn.usage is not None or client.link is not Link.CONNECTED, wait)


async def _run_script(
    client: ConductorClient, lines: list[str], settings: TurnSettings, renderer: TranscriptRenderer
) -> int:
    """One turn per line; a timeout stops the script, a server error is reported at the end."""
    exit_code = EXIT_OK
    for text in lines:
        if client.closed_by_server is not None:
            return EXIT_SERVER_ERROR
        outcome = await _take_turn(client, text, settings, renderer)
        if outcome == EXIT_TURN_TIMEOUT:
            return outcome
        exit_code = exit_code or outcome
    return exit_code


def _read_lines(stream: TextIO, queue: asyncio.Queue[str | None], loop: asyncio.AbstractEventLoop) -> None:
    """Feed stdin lines to the event loop from a daemon thread (a blocking read must not hold exit)."""
    try:
        for line in iter(stream.readline, ""):
            loop.call_soon_threadsafe(queue.put_nowait, line)
    finally:
        loop.call_soon_threadsafe(queue.put_nowait, None)


async def _end_input_when_closed(client: ConductorClient, lines: asyncio.Queue[str | None]) -> None:
    """A client the conductor stopped (or that closed) reads no more lines: the input ends."""
    await client.wait_until(lambda: client.link is Link.CLOSED, None)
    lines.put_nowait(None)


async def _run_interactive(
    client: ConductorClient,
    stdin: TextIO,
    settings: TurnSettings,
    renderer: TranscriptRenderer,
    *,
    cut_in: bool = False,
) -> int:
    """Each line a turn. ``!`` barges in at once while an answer is on its way or playing (and only
    then). With ``cut_in`` (a person typing), a line typed during an answer is said over it, as in
    the app: playback stops, the barge-in tells what was heard, and the new request replaces the
    turn; otherwise (piped input) lines wait for the turn before them. The input ends at its end
    (Ctrl-D) or when the client is stopped."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    transcripts: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(stdin, lines, loop), daemon=True).start()
    watch = asyncio.create_task(_end_input_when_closed(client, lines))
    exit_code = EXIT_OK
    cutting: set[asyncio.Task[int]] = set()

    def finished(turn: asyncio.Task[int]) -> None:
        nonlocal exit_code
        cutting.discard(turn)
        if turn.cancelled() or turn.exception() is not None:
            return
        outcome = turn.result()
        if outcome == EXIT_TURN_TIMEOUT or exit_code == EXIT_OK:
            exit_code = outcome

    async def take_turns() -> None:
        while (text := await transcripts.get()) is not None:
            if client.link is Link.CLOSED:
                continue  # stopped: what was typed meanwhile is not said
            turn = asyncio.create_task(_take_turn(client, text, settings, renderer))
            cutting.add(turn)
            turn.add_done_callback(finished)
            if not cut_in:
                await turn
            else:
                await asyncio.sleep(0)  # the turn's transcript is on its way before the next line

    turns = asyncio.create_task(take_turns())
    while client.closed_by_server is None and (line := await lines.get()) is not None:
        text = line.strip()
        if text == BARGE_IN_LINE:
            if client.answering or cutting or not transcripts.empty():
                await client.barge_in()  # at once, even in the middle of a turn
            else:
                renderer.line("(nothing to interrupt: '!' stops the assistant while it answers)")
        elif text:
            if cut_in and client.speaking:
                await client.barge_in()
            transcripts.put_nowait(text)
    transcripts.put_nowait(None)
    watch.cancel()
    await turns
    await asyncio.gather(watch, *cutting, return_exceptions=True)
    return exit_code


async def run(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    backoff: Sequence[float] = DEFAULT_BACKOFF,
) -> int:
    """The CLI inside a running event loop (what ``main`` runs; tests call it directly, with a
    shorter ``backoff``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    input_stream = stdin or sys.stdin
    if argv[:1] == ["sessions"]:
        return await run_sessions(argv[1:], stdin=input_stream, stdout=out, stderr=err)
    if argv[:1] == ["companion"]:
        return await run_companion(argv[1:], stdin=input_stream, stdout=out, stderr=err, backoff=backoff)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.session is not None:
        parser.error("--resume picks the session: leave out --session")
    if args.script is not None and not args.script.is_file():
        parser.error(f"--script: no such file: {args.script}")
    if args.declare_tools and TOOLS not in args.roles:
        parser.error("--declare-tools needs the tools role (--roles …,tools)")
    if args.handoff is not None:
        try:
            args.handoff = load_handoff(args.handoff)
        except ValueError as exc:
            parser.error(f"--handoff: {exc}")
    sign_in = sign_in_from(args, parser, input_stream)
    if sign_in is not None:
        try:
            await asyncio.to_thread(sign_in.sign_in)
        except SignInError as exc:
            print(f"voiceide-client: {exc}", file=err)
            return EXIT_SIGN_IN_FAILED
    if args.resume:
        args.session, exit_code = await pick_session(api_for(args, parser, sign_in), input_stream, out, err)
        if args.session is None:
            return exit_code
    renderer = transcript_renderer(out, err, quiet=args.quiet)
    try:
        return await _converse(args, renderer, input_stream, sign_in, backoff)
    finally:
        renderer.close()


async def _converse(
    args: argparse.Namespace,
    renderer: TranscriptRenderer,
    input_stream: TextIO,
    sign_in: CognitoSignIn | None,
    backoff: Sequence[float],
) -> int:
    barge_in = BargeInAfter(args.barge_in_after)
    device = terminal_device(roles=args.roles, name=args.name)
    devices = SessionDevices()
    devices.own_id = device.id
    typing = renderer.live and args.script is None and input_stream.isatty()
    rate = args.speech_rate if args.speech_rate is not None else (SPEECH_RATE if typing else 0.0)
    handlers = Workspace(args.workspace, build_seconds=args.build_seconds).handlers()
    client = ConductorClient(
        args.url,
        args.session,
        ToolRouter(
            make_speaker(
                speak_to=args.speak_to, quiet=args.quiet, out=RendererLines(renderer), words_per_minute=rate or None
            ),
            handlers,
        ),
        declared_tools=declared_tools(handlers) if args.declare_tools else None,
        renderer=renderer,
        on_event=_on_event(barge_in, renderer, devices, usage=args.usage),
        handshake_headers=None if sign_in is None else sign_in.headers,
        backoff=backoff,
        on_progress=renderer.notice,
        capabilities=_capabilities(args.sentence_speech),
        handoff=args.handoff,
        device=device,
    )
    barge_in.client = client
    try:
        await client.connect(retries=DEFAULT_MAX_ATTEMPTS)
    except ConductorUnavailable as exc:
        renderer.notice(f"voiceide-client: {exc}")  # once: the transcript leaves ws_connect_failed to it
        return EXIT_SIGN_IN_FAILED if exc.status == HTTPStatus.UNAUTHORIZED else EXIT_UNREACHABLE
    settings = TurnSettings(args.timeout, recognizer_pace(args, input_stream), USAGE_GRACE_S if args.usage else 0.0)
    try:
        if client.closed_by_server is not None:  # refused at once: the client said why
            return EXIT_SERVER_ERROR
        if args.script is not None:
            exit_code = await _run_script(client, script_lines(args.script), settings, renderer)
        else:
            if input_stream.isatty():
                renderer.line(f"session {client.session_id}: type what you would say, '!' to barge in, Ctrl-D to quit")
            exit_code = await _run_interactive(client, input_stream, settings, renderer, cut_in=input_stream.isatty())
        await barge_in.drain()
        if args.usage and client.link is not Link.CLOSED:
            await _usage_of_every_turn(client)
    finally:
        await client.close()
    if exit_code != EXIT_TURN_TIMEOUT and ErrorCode.RECONNECT_FAILED in client.error_codes:
        renderer.notice("voiceide-client: lost the conductor; answers came from the offline stub")
        return EXIT_UNREACHABLE
    if client.closed_by_server is not None:  # ended or erased: the client has told how (on_progress)
        return EXIT_SERVER_ERROR
    if exit_code == EXIT_SERVER_ERROR:
        renderer.notice("voiceide-client: the conductor answered a turn with an error (exit code 5)")
    return exit_code


def _on_event(
    barge_in: BargeInAfter, renderer: TranscriptRenderer, devices: SessionDevices, *, usage: bool
) -> Callable[[Event], None]:
    """What the CLI does with each event: barge in when asked to, show the session's other devices
    (who joined or left, the progress of the calls they run) and, with ``--usage``, print a
    ``turnUsage`` as one line."""

    def on_event(event: Event) -> None:
        barge_in.on_event(event)
        payload = event.payload
        if isinstance(payload, TurnUsage):
            if usage:
                renderer.line(usage_line(payload))
        elif isinstance(payload, ToolProgress):
            if (line := devices.progress(payload)) is not None:
                renderer.line(line, "progress")
        elif isinstance(payload, DevicesChanged):
            for line in devices.changed(payload):
                renderer.line(line, "device")
        elif isinstance(payload, SessionReady):
            devices.ready(payload)

    return on_event


async def _usage_of_every_turn(client: ConductorClient) -> None:
    """The ``turnUsage`` of a turn comes after its idle: before closing, wait a little for the
    last turns' lines (a conductor that sends none costs at most ``USAGE_WAIT_S``)."""
    with contextlib.suppress(TimeoutError):
        await client.wait_until(
            lambda: all(turn.usage is not None for turn in client.turns if turn.went_idle), USAGE_WAIT_S
        )


def _capabilities(sentence_speech: bool) -> tuple[str, ...]:
    """What the CLI announces: every capability of the client, sentence speech unless turned off."""
    return tuple(name for name in DEFAULT_CAPABILITIES if sentence_speech or name != SENTENCE_SPEECH)


class RendererLines(io.TextIOBase):
    """A text stream whose lines go to the renderer (the printed stand-in for speech)."""

    def __init__(self, renderer: TranscriptRenderer) -> None:
        self._renderer = renderer
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._renderer.line(line)
        return len(text)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(run(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
