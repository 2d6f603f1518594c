"""The options of ``voiceide-client``: the parser, its value checks, exit codes, and the settings
the options stand for (sign-in, handoff, script lines, the recognizer's pace).

``cli`` runs the conversation; ``sessions`` shares the sign-in options and the parser class.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import uuid
from pathlib import Path
from typing import NoReturn, TextIO

from pydantic import ValidationError

from shared.wire.protocol import Handoff
from voiceide_client.connection.sessions_api import SESSIONS_URL_ENV
from voiceide_client.connection.sign_in import CognitoSignIn
from voiceide_client.connection.urls import check_url
from voiceide_client.voice.recognizer import PACE_SPEC, RecognizerPace

from .device import DEFAULT_ROLES, check_name, parse_roles

EXIT_OK = 0
EXIT_TURN_TIMEOUT = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_SIGN_IN_FAILED = 4
EXIT_SERVER_ERROR = 5
EXIT_CODES = {
    EXIT_OK: "every turn finished",
    EXIT_TURN_TIMEOUT: "a turn did not finish within --timeout",
    EXIT_USAGE: "bad usage (an option or the URL), or a line too long to send",
    EXIT_UNREACHABLE: "the conductor could not be reached (first connection after its retries, or every reconnect)",
    EXIT_SIGN_IN_FAILED: "signing in failed, or the conductor wants a signed-in user (HTTP 401)",
    EXIT_SERVER_ERROR: "a turn ended with an error from the conductor, or the conductor stopped this client "
    "(the session ended, another connection took it over, or it already has four devices)",
}
SIGN_IN_ENV = {
    "username": "VOICEIDE_USERNAME",
    "password": "VOICEIDE_PASSWORD",
    "client_id": "VOICEIDE_CLIENT_ID",
    "cognito_endpoint": "VOICEIDE_COGNITO_ENDPOINT",
    "region": "VOICEIDE_REGION",
}
"""Environment variables standing in for the sign-in options (a password there stays out of ``ps``)."""
SPEECH_RATE = 180.0
"""Words a minute of printed speech when typing on a terminal: as long as saying it takes, so "!"
cuts it short and the barge-in reports the words heard so far."""
DEFAULT_PACE = RecognizerPace(longest_s=2.0)
"""``--partials`` without a value: 200 ms a word, 800 ms of silence before the final; a long text
(a paste) goes out in about 3 s, its partials growing by several words each."""


def add_sessions_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sessions-url",
        default=os.environ.get(SESSIONS_URL_ENV),
        metavar="URL",
        help="the sessions API (a deployed stage's SessionsApiUrl); by default the --url host's /sessions "
        f"(the local stack); ${SESSIONS_URL_ENV}",
    )


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


def _roles(value: str) -> tuple[str, ...]:
    try:
        return parse_roles(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _name(value: str) -> str:
    try:
        return check_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _pace(value: str) -> RecognizerPace:
    try:
        return RecognizerPace.parse(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors as one line (``voiceide-client: …``), exit code 2; ``--help`` has the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def _exit_codes_help() -> str:
    return "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="voiceide-client",
        description="A stand-in for the VoiceIDE iOS app: each line is what the person says (a transcript). "
        "`voiceide-client sessions list|show|rename|end|erase` manages sessions (see `voiceide-client sessions -h`); "
        "`voiceide-client companion --latest --workspace DIR` runs a session's tools over a folder on this computer "
        "(see `voiceide-client companion -h`).",
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
        "--usage",
        action="store_true",
        help="print what each turn cost, one line a turn: tokens, the estimated cost and the timings (turnUsage)",
    )
    add_device_arguments(parser)
    add_partials_arguments(parser)
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


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--roles`` and ``--name``: which device of the session this client is."""
    device = parser.add_argument_group(
        "device",
        "The client is one device of its session (an id kept in $XDG_CONFIG_HOME/voiceide/device-id); "
        "other devices, such as the desktop companion, may join it.",
    )
    device.add_argument(
        "--roles",
        type=_roles,
        default=DEFAULT_ROLES,
        metavar="ROLE,…",
        help="what this device does: voice (hears and speaks), display (shows the conversation), tools (runs "
        "the model's tools on --workspace); default: voice,display,tools. With a companion running the tools: "
        "--roles voice,display",
    )
    device.add_argument(
        "--name",
        type=_name,
        metavar="NAME",
        help="the name the session's other devices show for this one (default: Terminal — <host>)",
    )


def add_partials_arguments(parser: argparse.ArgumentParser) -> None:
    """``--partials [MS_PER_WORD:SILENCE_MS]`` and ``--no-partials`` (``args.partials``: a pace,
    False, or None when neither is given)."""
    partials = parser.add_mutually_exclusive_group()
    partials.add_argument(
        "--partials",
        nargs="?",
        const=DEFAULT_PACE,
        type=_pace,
        metavar=PACE_SPEC,
        help="send each line as the app's recognizer does: a partial transcript per word, MS_PER_WORD apart, "
        "then the final after SILENCE_MS (default 200:800, a long text such as a paste within about 3 s); "
        "on when typing on a terminal without --script",
    )
    partials.add_argument(
        "--no-partials",
        dest="partials",
        action="store_const",
        const=False,
        help="send each line as a final transcript only (the default for --script and piped input)",
    )


def recognizer_pace(args: argparse.Namespace, stdin: TextIO) -> RecognizerPace | None:
    """The pace lines are sent at (None: finals only): as the options say, else partials at the
    default pace when a person types on a terminal, and none for a script or piped input."""
    if args.partials is None:
        return DEFAULT_PACE if args.script is None and stdin.isatty() else None
    return args.partials or None


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


def sign_in_from(args: argparse.Namespace, parser: argparse.ArgumentParser, stdin: TextIO) -> CognitoSignIn | None:
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


def script_lines(path: Path) -> list[str]:
    """The turns of a ``--script`` file: its non-empty lines that are not ``#`` comments."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]
