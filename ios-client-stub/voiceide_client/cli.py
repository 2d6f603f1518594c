"""``voiceide-client``: talk to a conductor from the terminal, typed lines standing in for speech.

Exit codes: ``EXIT_CODES``. On a terminal the growing answer is redrawn in place
(``live_render``); otherwise one plain line per final, tool call, state and error.

With ``--username`` (or ``VOICEIDE_USERNAME``) the client signs in to the conductor's Cognito
user pool first and sends the ID token on every handshake (``sign_in.CognitoSignIn``).
``--handoff FILE.json`` continues a conversation from chat: the first ``sessionStart`` carries it.
``voiceide-client sessions …`` and ``--resume`` use the sessions API (``sessions_cli``).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import io
import json
import os
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from pydantic import ValidationError

from shared.protocol import SENTENCE_SPEECH, AssistantSpeechPartial, ErrorCode, ErrorPayload, Event, Handoff

from .client import (
    DEFAULT_BACKOFF,
    DEFAULT_CAPABILITIES,
    DEFAULT_MAX_ATTEMPTS,
    ClientClosed,
    ConductorClient,
    ConductorUnavailable,
)
from .declarations import declared_tools
from .render import TranscriptRenderer, transcript_renderer
from .sessions_cli import add_sessions_url_argument, api_for, pick_session, run_sessions
from .sign_in import CognitoSignIn, SignInError
from .speech import make_speaker
from .tools import ToolRouter
from .turn import TurnResult, TurnTimeout
from .urls import check_url
from .workspace_tools import Workspace

EXIT_OK = 0
EXIT_TURN_TIMEOUT = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_SIGN_IN_FAILED = 4
EXIT_SERVER_ERROR = 5
EXIT_CODES = {
    EXIT_OK: "every turn finished",
    EXIT_TURN_TIMEOUT: "a turn did not finish within --timeout",
    EXIT_USAGE: "bad usage (an option or the URL)",
    EXIT_UNREACHABLE: "the conductor could not be reached (first connection after its retries, or every reconnect)",
    EXIT_SIGN_IN_FAILED: "signing in failed",
    EXIT_SERVER_ERROR: "a turn ended with an error from the conductor",
}
SIGN_IN_ENV = {
    "username": "VOICEIDE_USERNAME",
    "password": "VOICEIDE_PASSWORD",
    "client_id": "VOICEIDE_CLIENT_ID",
    "cognito_endpoint": "VOICEIDE_COGNITO_ENDPOINT",
    "region": "VOICEIDE_REGION",
}
"""Environment variables standing in for the sign-in options (a password there stays out of ``ps``)."""
BARGE_IN_LINE = "!"
SPEECH_RATE = 180.0
"""Words a minute of printed speech when typing on a terminal: as long as saying it takes, so "!"
cuts it short and the barge-in reports the words heard so far."""


def _uuid4(value: str) -> str:
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a UUID") from None
    if parsed.version != 4:
        raise argparse.ArgumentTypeError(f"{value!r} is not a version-4 UUID")
    return str(parsed)


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: must be a number of seconds greater than 0")
    return number


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _rate(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of words a minute") from None
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: must be 0 (at once) or more words a minute")
    return number


def _url(value: str) -> str:
    problem = check_url(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors as one line (``voiceide-client: …``), exit code 2; ``--help`` has the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def _exit_codes_help() -> str:
    return "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="voiceide-client",
        description="A stand-in for the VoiceIDE iOS app: each line is a final transcript. "
        "`voiceide-client sessions list|show|rename|end|erase` manages sessions (see `voiceide-client sessions -h`).",
        epilog=_exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url",
        required=True,
        type=_url,
        help="conductor WebSocket URL: ws://127.0.0.1:8080 for `make run`, wss://… for a deployed stage",
    )
    parser.add_argument("--session", type=_uuid4, metavar="UUID", help="session UUID (v4) to use; a new one by default")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="list your sessions and resume the one you pick by number (read from stdin: a script's first line)",
    )
    add_sessions_url_argument(parser)
    parser.add_argument(
        "--script", type=Path, metavar="FILE", help="send each non-empty, non-# line of FILE, one turn each"
    )
    parser.add_argument("--speak-to", type=Path, metavar="DIR", help="write speech as WAV files into DIR")
    parser.add_argument(
        "--barge-in-after", type=_count, metavar="N", help="barge in after N assistant partials of a turn"
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="folder the IDE tools (open, read, search, list, git status) act on; the current one by default",
    )
    parser.add_argument(
        "--build-seconds",
        type=_positive,
        metavar="S",
        help="simulate build.run and tests.run: they succeed after S seconds (refused otherwise)",
    )
    parser.add_argument(
        "--declare-tools",
        action="store_true",
        help="declare the stub's tools in sessionStart (as the catalog describes them) instead of relying on it",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing but errors and connection trouble (to stderr)"
    )
    parser.add_argument("--timeout", type=_positive, default=60.0, metavar="S", help="seconds a turn may take")
    parser.add_argument(
        "--speech-rate",
        type=_rate,
        metavar="WPM",
        help=(
            "words a minute at which printed speech plays, word by word, when espeak-ng is not installed "
            f"(a barge-in reports the words heard so far); {SPEECH_RATE:g} when typing on a terminal, "
            "else 0: at once"
        ),
    )
    parser.add_argument(
        "--handoff",
        type=Path,
        metavar="FILE.json",
        help='continue a conversation from chat: {"summary": "...", "recentTurns": [{"role": "user", "text": "..."}]}',
    )
    parser.add_argument(
        "--no-sentence-speech",
        dest="sentence_speech",
        action="store_false",
        help="do not announce sentenceSpeech: the conductor then speaks each answer once it is complete",
    )
    add_sign_in_arguments(parser)
    return parser


def add_sign_in_arguments(parser: argparse.ArgumentParser) -> None:
    """The sign-in options (also of ``voiceide-client sessions``)."""
    sign_in = parser.add_argument_group(
        "sign-in", "Sign in to the conductor's Cognito user pool and send the ID token on every handshake."
    )
    sign_in.add_argument(
        "--username", default=os.environ.get(SIGN_IN_ENV["username"]), help="sign in as this user; $VOICEIDE_USERNAME"
    )
    sign_in.add_argument(
        "--password",
        default=os.environ.get(SIGN_IN_ENV["password"]),
        help="the user's password; $VOICEIDE_PASSWORD; asked for when neither is given and stdin is a terminal",
    )
    sign_in.add_argument(
        "--client-id", default=os.environ.get(SIGN_IN_ENV["client_id"]), help="the app client id; $VOICEIDE_CLIENT_ID"
    )
    sign_in.add_argument(
        "--cognito-endpoint",
        default=os.environ.get(SIGN_IN_ENV["cognito_endpoint"]),
        metavar="URL",
        help="cognito-idp endpoint (the local stack's moto server); AWS's by default; $VOICEIDE_COGNITO_ENDPOINT",
    )
    sign_in.add_argument(
        "--region",
        default=os.environ.get(SIGN_IN_ENV["region"]),
        help="region of the user pool; $VOICEIDE_REGION, else $AWS_REGION, else us-east-1",
    )


def _sign_in_from(args: argparse.Namespace, parser: argparse.ArgumentParser, stdin: TextIO) -> CognitoSignIn | None:
    """The sign-in the options ask for (None without a username); usage errors exit with 2."""
    if not args.username:
        if args.password or args.client_id:
            parser.error("--password and --client-id need --username")
        return None
    if not args.client_id:
        parser.error("--username needs --client-id (or VOICEIDE_CLIENT_ID)")
    password = args.password
    if not password:
        if not stdin.isatty():
            parser.error("--username needs --password (or VOICEIDE_PASSWORD)")
        password = getpass.getpass(f"password for {args.username}: ")
    return CognitoSignIn(
        args.client_id, args.username, password, region=args.region, endpoint_url=args.cognito_endpoint
    )


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


def load_handoff(path: Path) -> Handoff:
    """The handoff in ``path``, checked as the conductor checks it; ValueError (one line) if bad."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: a handoff is a JSON object with summary and recentTurns")
    try:
        return Handoff.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'handoff'}: {error['msg']}" for error in exc.errors()[:3]
        )
        raise ValueError(f"{path} is not a valid handoff: {problems}") from None


def _script_lines(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _server_errors(turn: TurnResult) -> list[str]:
    """The codes of the ``error`` events the conductor sent during ``turn``."""
    return [event.payload.code for event in turn.events if isinstance(event.payload, ErrorPayload)]


async def _take_turn(client: ConductorClient, text: str, timeout: float, renderer: TranscriptRenderer) -> int:
    try:
        turn = await client.say(text, timeout=timeout)
    except TurnTimeout as exc:
        renderer.notice(f"voiceide-client: {exc}")
        return EXIT_TURN_TIMEOUT
    except ClientClosed:  # the session was ended or erased from the sessions API
        renderer.notice(f"voiceide-client: not sent, the session is closed: {text}")
        return EXIT_SERVER_ERROR
    return EXIT_SERVER_ERROR if _server_errors(turn) else EXIT_OK


async def _run_script(client: ConductorClient, lines: list[str], timeout: float, renderer: TranscriptRenderer) -> int:
    """One turn per line; a timeout stops the script, a server error is reported at the end."""
    exit_code = EXIT_OK
    for text in lines:
        if client.closed_by_server is not None:
            return EXIT_SERVER_ERROR
        outcome = await _take_turn(client, text, timeout, renderer)
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


async def _run_interactive(client: ConductorClient, stdin: TextIO, timeout: float, renderer: TranscriptRenderer) -> int:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    transcripts: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_read_lines, args=(stdin, lines, loop), daemon=True).start()
    exit_code = EXIT_OK

    async def take_turns() -> None:
        nonlocal exit_code
        while (text := await transcripts.get()) is not None:
            outcome = await _take_turn(client, text, timeout, renderer)
            if outcome == EXIT_TURN_TIMEOUT or exit_code == EXIT_OK:
                exit_code = outcome

    turns = asyncio.create_task(take_turns())
    while client.closed_by_server is None and (line := await lines.get()) is not None:
        text = line.strip()
        if text == BARGE_IN_LINE:
            await client.barge_in()  # at once, even in the middle of a turn
        elif text:
            transcripts.put_nowait(text)
    transcripts.put_nowait(None)
    await turns
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
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.session is not None:
        parser.error("--resume picks the session: leave out --session")
    if args.script is not None and not args.script.is_file():
        parser.error(f"--script: no such file: {args.script}")
    if args.handoff is not None:
        try:
            args.handoff = load_handoff(args.handoff)
        except ValueError as exc:
            parser.error(f"--handoff: {exc}")
    sign_in = _sign_in_from(args, parser, input_stream)
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
        on_event=barge_in.on_event,
        handshake_headers=None if sign_in is None else sign_in.headers,
        backoff=backoff,
        on_progress=renderer.notice,
        capabilities=_capabilities(args.sentence_speech),
        handoff=args.handoff,
    )
    barge_in.client = client
    try:
        await client.connect(retries=DEFAULT_MAX_ATTEMPTS)
    except ConductorUnavailable as exc:
        if not renderer.live:  # a terminal display has just shown it as an [error] line
            renderer.notice(f"voiceide-client: {exc}")
        return EXIT_UNREACHABLE
    try:
        if args.script is not None:
            exit_code = await _run_script(client, _script_lines(args.script), args.timeout, renderer)
        else:
            if input_stream.isatty():
                renderer.line(f"session {client.session_id}: type what you would say, '!' to barge in, Ctrl-D to quit")
            exit_code = await _run_interactive(client, input_stream, args.timeout, renderer)
        await barge_in.drain()
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
