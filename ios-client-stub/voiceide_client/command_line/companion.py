"""``voiceide-client companion``: the desktop companion from the terminal.

It finds the session (``--session ID``, checked with the sessions API: an id that names none of the
person's sessions is refused rather than joined as a new, empty one; or ``--latest``: the signed-in
person's session with a connection open now, else the one most recently active that is not ended),
signs in as the other commands do (the token goes in the ``Authorization`` header of the
handshake and of the sessions API's requests, never in a URL), joins the session as a device
(``companion.session``) and runs its tools over ``--workspace`` until the session ends or Ctrl-C.

Exit codes: ``EXIT_CODES``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

from voiceide_client.companion.device import MAX_NAME, companion_device, folder_label, state_folder
from voiceide_client.companion.display import CompanionDisplay
from voiceide_client.companion.project_file import PROJECT_FILE, ProjectFileError, load_project_file
from voiceide_client.companion.session import ENDED_BY_SERVER, REFUSED, TAKEN_OVER, UNREACHABLE, Companion
from voiceide_client.companion.workspace_files import inside
from voiceide_client.connection.link import DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, ConductorUnavailable, without_session
from voiceide_client.connection.sessions_api import SessionsApi, SessionsApiError
from voiceide_client.connection.sign_in import SignInError
from voiceide_client.rendering.choice import transcript_renderer
from voiceide_client.rendering.terminal_text import printable

from .arguments import (
    EXIT_OK,
    EXIT_SERVER_ERROR,
    EXIT_SIGN_IN_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    OneLineErrorParser,
    _url,
    _uuid4,
    add_sessions_url_argument,
    add_sign_in_arguments,
    sign_in_from,
)
from .sessions import EXIT_NOT_FOUND, api_for, exit_code_of, title_of

URL_ENV = "VOICEIDE_URL"
DEFAULT_URL = "ws://127.0.0.1:8080/"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Either stops the companion cleanly: the connection closed, the commands still running killed."""
EXIT_CODES = {
    EXIT_OK: "stopped (Ctrl-C or SIGTERM): the commands still running were stopped too",
    EXIT_USAGE: "bad usage (an option, the URL, the workspace)",
    EXIT_UNREACHABLE: "the conductor or the sessions API could not be reached (or every reconnect failed)",
    EXIT_SIGN_IN_FAILED: "signing in failed, or the conductor wants a signed-in user (HTTP 401)",
    EXIT_SERVER_ERROR: "the session was ended or erased, already has four devices, or another connection took it over",
    EXIT_NOT_FOUND: "--session names no session of yours, or --latest found none to join",
}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="voiceide-client companion",
        description="Join one of your sessions from this computer and run its tools over a folder: read, "
        "search, edit (after your yes), git, and the build and test commands of the folder's "
        f"{PROJECT_FILE}. The phone or the browser console hears and speaks.",
        epilog="exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="the folder the tools act on (the current one by default)",
    )
    parser.add_argument(
        "--url",
        type=_url,
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"conductor WebSocket URL (${URL_ENV}; {DEFAULT_URL}, the local stack, by default)",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", type=_uuid4, metavar="UUID", help="the session to join")
    which.add_argument(
        "--latest",
        action="store_true",
        help="join your session with a connection open now (the phone's), else your most recently active one",
    )
    parser.add_argument("--name", help=f"the device's name on the session (at most {MAX_NAME} characters)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where the journal of calls is kept ($XDG_STATE_HOME/voiceide/companion by default)",
    )
    parser.add_argument(
        "--follow",
        metavar="FILE",
        help="the file you are working on (relative to the workspace): the session's context names it as the "
        "open file (the most recently modified file by default)",
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="send the session neither this folder's context (open file, branch, changed files, problems, "
        "running builds) nor its names",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing but errors and connection trouble (to stderr)"
    )
    add_sessions_url_argument(parser)
    add_sign_in_arguments(parser)
    return parser


def _checked(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    workspace = printable(str(args.workspace))
    if not args.workspace.exists():
        parser.error(f"--workspace: no such folder: {workspace}")
    if not args.workspace.is_dir():
        parser.error(f"--workspace: {workspace} is not a folder")
    if not os.access(args.workspace, os.R_OK | os.X_OK):
        parser.error(f"--workspace: {workspace} cannot be read (permission denied)")
    args.workspace = args.workspace.resolve()
    if args.follow is not None:
        followed = inside(args.workspace, args.follow)
        if followed is None:
            parser.error(f"--follow: {printable(args.follow)} is not a file of the workspace")
        args.follow = followed
    if any(key.lower() == "token" for key, _ in parse_qsl(urlsplit(args.url).query)):
        parser.error("--url must not carry a token: sign in with --username (the token goes in a header)")
    if args.name is not None and not 1 <= len(args.name) <= MAX_NAME:
        parser.error(f"--name: 1 to {MAX_NAME} characters")


async def latest_session(api: SessionsApi) -> dict[str, Any] | None:
    """The session with a connection open now (newest first), else the newest not ended."""
    page = await asyncio.to_thread(api.list, status="active", limit=1)
    sessions = page.get("sessions") or []
    if sessions:
        return dict(sessions[0])
    page = await asyncio.to_thread(api.list, limit=20)
    return next((dict(s) for s in page.get("sessions") or [] if s.get("status") != "ended"), None)


async def session_named(api: SessionsApi, session_id: str) -> dict[str, Any]:
    """The person's session ``session_id``; SessionsApiError (404) when there is none."""
    page = await asyncio.to_thread(api.show, session_id, limit=1)
    return dict(page.get("session") or {}) if isinstance(page, dict) else {}


async def run_companion(
    argv: Sequence[str],
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    backoff: Sequence[float] = DEFAULT_BACKOFF,
) -> int:
    """``voiceide-client companion …`` (``argv`` after ``companion``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _checked(args, parser)
    sign_in = sign_in_from(args, parser, stdin)
    if sign_in is not None:
        try:
            await asyncio.to_thread(sign_in.sign_in)
        except SignInError as exc:
            print(f"voiceide-client: {printable(str(exc))}", file=stderr)
            return EXIT_SIGN_IN_FAILED
    session_id = args.session
    api = api_for(args, parser, sign_in)
    if args.latest:
        try:
            found = await latest_session(api)
        except SessionsApiError as exc:
            print(f"voiceide-client: --latest: {printable(exc.message)}", file=stderr)
            return exit_code_of(exc)
        if found is None:
            print("voiceide-client: --latest: you have no session to join; start one on the phone first", file=stderr)
            return EXIT_NOT_FOUND
        session_id = str(found["id"])
        print(printable(f"joining your latest session {session_id}: {title_of(found)}"), file=stdout)
    else:
        try:
            await session_named(api, session_id)
        except SessionsApiError as exc:
            if exc.status == HTTPStatus.NOT_FOUND:
                print(
                    f"voiceide-client: --session {session_id}: no session of yours has this id "
                    "(check the id, or use --latest)",
                    file=stderr,
                )
            else:
                print(f"voiceide-client: --session: {printable(exc.message)}", file=stderr)
            return exit_code_of(exc)
    display = CompanionDisplay(transcript_renderer(stdout, stderr, quiet=args.quiet))
    device = companion_device(args.workspace, display=stdout.isatty() and not args.quiet, name=args.name)
    companion = Companion(
        args.url,
        session_id,
        args.workspace,
        device=device,
        display=display,
        journal_folder=state_folder(device, args.state_dir),
        handshake_headers=None if sign_in is None else sign_in.headers,
        backoff=backoff,
        on_progress=display.notice,
        send_context=not args.no_context,
        follow=args.follow,
    )
    try:
        return await _serve(companion, args, display)
    finally:
        display.inner.close()


async def _serve(companion: Companion, args: argparse.Namespace, display: CompanionDisplay) -> int:
    for line in describe(companion, args.url):
        display.line(line)
    loop = asyncio.get_running_loop()
    for stop_signal in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(stop_signal, companion.stop)
    try:
        try:
            await companion.connect(retries=DEFAULT_MAX_ATTEMPTS)
        except ConductorUnavailable as exc:
            display.notice(f"voiceide-client: {exc}")  # the display makes it printable
            return EXIT_SIGN_IN_FAILED if exc.status == HTTPStatus.UNAUTHORIZED else EXIT_UNREACHABLE
        if companion.ended() is None:  # refused or taken over at once: it says why below, never "ready"
            display.line("ready: the tools of this folder answer the session's calls (Ctrl-C to stop)")
        why = await companion.run()
    finally:
        for stop_signal in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(stop_signal)
        await companion.close()
    if why == TAKEN_OVER:
        device = companion.device.name or companion.device.id
        display.notice(f"voiceide-client: another connection took this session over as {device}: stopping")
        return EXIT_SERVER_ERROR
    if why == REFUSED:
        display.notice("voiceide-client: the session already has four devices: close one and start the companion again")
        return EXIT_SERVER_ERROR
    if why == ENDED_BY_SERVER:
        return EXIT_SERVER_ERROR
    if why == UNREACHABLE:
        display.notice("voiceide-client: lost the conductor; stopped")
        return EXIT_UNREACHABLE
    return EXIT_OK


def describe(companion: Companion, url: str) -> list[str]:
    """What the companion is about to do: the folder, the device, the session, what it may run."""
    device = companion.device
    lines = [
        f"companion for {folder_label(companion.workspace.root)}: device {device.id} "
        f"({', '.join(device.roles)}) on session {companion.client.session_id} at {without_session(url)}",
        context_line(companion),
    ]
    try:
        project = load_project_file(companion.workspace.root)
    except ProjectFileError as exc:
        return [*lines, f"[warning] {exc}; build.run and tests.run will answer with this error"]
    if project is None:
        return [*lines, f"no {PROJECT_FILE}: build.run and tests.run will say what to put in it; nothing else runs"]
    runs = [f"{key} `{shlex.join(argv)}`" for key, argv in project.commands.items()]
    what = ", ".join(runs) if runs else "no command"
    return [*lines, f"{PROJECT_FILE}: {what}; time limit {project.timeout_seconds:g} s"]


def context_line(companion: Companion) -> str:
    """What the companion tells the session about the folder, and how to stop it."""
    if companion.context is None:
        return "--no-context: the session is sent neither this folder's context nor its names"
    follows = f"follows {companion.context.follow}; " if companion.context.follow else ""
    return f"{follows}sends the session this folder's context and names, never a file's content (--no-context: neither)"
