"""``voiceide-client sessions list | show ID | rename ID TITLE | end ID | erase ID``, and the session
picker of ``voiceide-client --resume``: the sessions API (docs/sessions-api.md) from the terminal.

The API's base URL comes from ``--sessions-url`` (or ``$VOICEIDE_SESSIONS_URL``), else from the
WebSocket URL (``--url ws://HOST:PORT`` → ``http://HOST:PORT/sessions``, the local stack's). With
``--username`` the client signs in first and sends the same ID token as on the WebSocket.

Exit codes: ``EXIT_CODES``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from collections.abc import Sequence
from typing import Any, TextIO

from voiceide_client.connection.sessions_api import SESSIONS_URL_ENV, SessionsApi, SessionsApiError, sessions_url_for
from voiceide_client.connection.sign_in import CognitoSignIn, SignInError

from .arguments import OneLineErrorParser, add_sessions_url_argument, add_sign_in_arguments, sign_in_from

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_SIGN_IN_FAILED = 4
EXIT_API_ERROR = 5
EXIT_NOT_FOUND = 6
EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_USAGE: "bad usage, or a request the sessions API refused (400)",
    EXIT_UNREACHABLE: "the sessions API could not be reached",
    EXIT_SIGN_IN_FAILED: "signing in failed, or the API wants a sign-in (401)",
    EXIT_API_ERROR: "the sessions API failed (5xx or an unexpected answer)",
    EXIT_NOT_FOUND: "no such session (404), or none to resume",
}
RESUME_CHOICES = 20
"""How many of the newest sessions ``--resume`` offers."""
TITLE_WIDTH = 40
RESULT_WIDTH = 200


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", metavar="WS_URL", help="the conductor's WebSocket URL, e.g. ws://127.0.0.1:8080")
    add_sessions_url_argument(common)
    add_sign_in_arguments(common)
    parser = OneLineErrorParser(
        prog="voiceide-client sessions",
        description="The person's sessions through the conductor's sessions API.",
        epilog="exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", parents=[common], help="the sessions, newest activity first")
    listing.add_argument("--status", choices=("active", "idle", "ended"), help="only sessions with this status")
    listing.add_argument("--limit", type=int, metavar="N", help="sessions per page (1 to 100; 20)")
    listing.add_argument("--cursor", help="the page after this cursor (printed under a page that has more)")
    listing.add_argument("--all", action="store_true", help="every page")
    show = commands.add_parser("show", parents=[common], help="a session and its transcript")
    show.add_argument("id", metavar="ID")
    rename = commands.add_parser("rename", parents=[common], help="give a session a title")
    rename.add_argument("id", metavar="ID")
    rename.add_argument("title", metavar="TITLE")
    end = commands.add_parser("end", parents=[common], help="end a session (its open connection is closed)")
    end.add_argument("id", metavar="ID")
    erase = commands.add_parser("erase", parents=[common], help="erase a session and everything kept of it")
    erase.add_argument("id", metavar="ID")
    return parser


def api_for(args: argparse.Namespace, parser: argparse.ArgumentParser, sign_in: CognitoSignIn | None) -> SessionsApi:
    """The API the options point at; usage errors exit with 2."""
    try:
        if args.sessions_url:
            base = args.sessions_url
        elif args.url:
            base = sessions_url_for(args.url)
        else:
            parser.error(f"give --url (the conductor's WebSocket URL) or --sessions-url (or ${SESSIONS_URL_ENV})")
        return SessionsApi(base, None if sign_in is None else sign_in.id_token)
    except ValueError as exc:
        parser.error(str(exc))


async def run_sessions(argv: Sequence[str], *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """``voiceide-client sessions …`` (``argv`` after ``sessions``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    sign_in = sign_in_from(args, parser, stdin)
    api = api_for(args, parser, sign_in)
    try:
        if sign_in is not None:
            await asyncio.to_thread(sign_in.sign_in)
        return await asyncio.to_thread(_command, api, args, stdout)
    except SignInError as exc:
        print(f"voiceide-client: {exc}", file=stderr)
        return EXIT_SIGN_IN_FAILED
    except SessionsApiError as exc:
        print(f"voiceide-client: {exc.message}", file=stderr)
        return exit_code_of(exc)


def exit_code_of(error: SessionsApiError) -> int:
    return {0: EXIT_UNREACHABLE, 400: EXIT_USAGE, 401: EXIT_SIGN_IN_FAILED, 404: EXIT_NOT_FOUND}.get(
        error.status, EXIT_API_ERROR
    )


def next_page_command(args: argparse.Namespace, cursor: str) -> str:
    """The ``sessions list`` command for the page after ``cursor``, with the options that chose this
    one (where the API is, who signs in, the filter and page size; never a password)."""
    words = ["voiceide-client", "sessions", "list"]
    for option, value in (
        ("--url", args.url),
        ("--sessions-url", args.sessions_url),
        ("--username", args.username),
        ("--client-id", args.client_id),
        ("--cognito-endpoint", args.cognito_endpoint),
        ("--region", args.region),
        ("--status", args.status),
        ("--limit", args.limit),
    ):
        if value is not None and value != "":
            words += [option, str(value)]
    return shlex.join([*words, "--cursor", cursor])


def _command(api: SessionsApi, args: argparse.Namespace, out: TextIO) -> int:
    if args.command == "list":
        if args.all:
            sessions, cursor = list(api.list_all(status=args.status, limit=args.limit)), None
        else:
            page = api.list(status=args.status, limit=args.limit, cursor=args.cursor)
            sessions, cursor = page.get("sessions") or [], page.get("nextCursor")
        write_table(sessions, out)
        if cursor:
            print(f"more: {next_page_command(args, cursor)}  (or --all)", file=out)
    elif args.command == "show":
        session, entries = api.transcript(args.id)
        write_session(session, entries, out)
    elif args.command == "rename":
        session = api.rename(args.id, args.title)
        print(f"renamed {session['id']}: {session['title']}", file=out)
    elif args.command == "end":
        session = api.end(args.id)
        print(f"ended {session['id']} ({session['status']})", file=out)
    elif args.command == "erase":
        api.erase(args.id)
        print(f"erased {args.id}", file=out)
    return EXIT_OK


# ---- output ------------------------------------------------------------------------------------


def _clip(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(stamp: str | None) -> str:
    """``2026-11-24T16:31:52.013Z`` → ``2026-11-24 16:31`` (UTC)."""
    return (stamp or "")[:16].replace("T", " ")


def title_of(session: dict[str, Any]) -> str:
    if session.get("title"):
        return str(session["title"])
    said = session.get("lastUtterance")
    return f'(untitled) "{said}"' if said else "(untitled)"


def write_table(sessions: Sequence[dict[str, Any]], out: TextIO, *, numbered: bool = False) -> None:
    """The sessions as a table: id, status, turns, last activity (UTC) and title."""
    if not sessions:
        print("no sessions", file=out)
        return
    head = f"{'ID':36}  {'STATUS':6}  {'TURNS':>5}  {'LAST ACTIVE (UTC)':17}  TITLE"
    print(("  #  " if numbered else "") + head, file=out)
    for number, session in enumerate(sessions, 1):
        row = (
            f"{session['id']:36}  {session.get('status', ''):6}  {session.get('turns', 0):>5}  "
            f"{_when(session.get('lastActiveAt')):17}  {_clip(title_of(session), TITLE_WIDTH)}"
        )
        print((f"{number:>3}  " if numbered else "") + row, file=out)


def write_session(session: dict[str, Any], entries: Sequence[dict[str, Any]], out: TextIO) -> None:
    """The session's facts, then its transcript, one line per entry."""
    print(title_of(session), file=out)
    print(
        f"  {session['id']}  {session.get('status')}  {_turns(session.get('turns', 0))}  "
        f"created {_when(session.get('createdAt'))}  last active {_when(session.get('lastActiveAt'))} (UTC)"
        + ("  continued from chat" if session.get("origin") == "handoff" else ""),
        file=out,
    )
    if not entries:
        print("  (no transcript)", file=out)
    for entry in entries:
        print(entry_line(entry), file=out)


def _turns(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"


def entry_line(entry: dict[str, Any]) -> str:
    role = entry.get("role")
    if role == "user":
        return f"you: {entry.get('text', '')}"
    if role == "assistant":
        if entry.get("interrupted"):
            heard = entry.get("text") or ""
            return f"assistant [interrupted; heard: {heard!r}]" if heard else "assistant [interrupted; heard nothing]"
        return f"assistant: {entry.get('text', '')}"
    if role == "tool":
        outcome = entry.get("outcome", "?")
        arguments = _clip(_compact(entry.get("arguments")), RESULT_WIDTH)
        result = _clip(entry.get("result") or "", RESULT_WIDTH)
        return f"tool {entry.get('name')} {arguments} → {outcome}: {result}"
    return f"{role}: {entry}"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---- voiceide-client --resume ------------------------------------------------------------------


async def pick_session(api: SessionsApi, stdin: TextIO, out: TextIO, err: TextIO) -> tuple[str | None, int]:
    """Offer the newest sessions by number and read the pick (a line of stdin: a person at a terminal,
    or a script's first line); the chosen id, or None and the exit code to stop with."""
    try:
        page = await asyncio.to_thread(api.list, limit=RESUME_CHOICES)
    except SessionsApiError as exc:
        print(f"voiceide-client: --resume: {exc.message}", file=err)
        return None, exit_code_of(exc)
    sessions = page.get("sessions") or []
    if not sessions:
        print("voiceide-client: --resume: there is no session to resume", file=err)
        return None, EXIT_NOT_FOUND
    write_table(sessions, out, numbered=True)
    if stdin.isatty():
        print(f"resume which session? (1-{len(sessions)}) ", end="", file=out, flush=True)
    line = await asyncio.to_thread(stdin.readline)
    pick = line.strip()
    if not pick.isdigit() or not 1 <= int(pick) <= len(sessions):
        print(f"voiceide-client: --resume: {pick!r} is not a number from 1 to {len(sessions)}", file=err)
        return None, EXIT_USAGE
    chosen = sessions[int(pick) - 1]
    print(f"resuming {chosen['id']}: {title_of(chosen)}", file=out)
    return str(chosen["id"]), EXIT_OK
