"""``voiceide-conductor``: ``local`` runs the whole conductor on this machine, no AWS account needed;
``doctor`` checks a deployed stage with the operator's AWS credentials.

A bad option, host or port is one line (exit code 2), and so is a port already in use (exit code 1):
never a traceback."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import shlex
import signal
import socket
import sys
import threading
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.doctor import command as doctor
from conductor_local.gateway.console import normalize_origin
from conductor_local.mcp_demo.servers import read_spec, read_specs
from conductor_local.stack import AUTH_MODES, LocalStack

EXIT_NO_CREDENTIALS = 2
EXIT_USAGE = 2
EXIT_CANNOT_START = 1
MODEL_PACE_ENV = "CONDUCTOR_LOCAL_MODEL_PACE"
MAX_PORT = 65535


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors as one line (``voiceide-conductor local: …``), exit code 2; ``--help`` has the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def port_number(value: str) -> int:
    """A TCP port to listen on: 1 to 65535, or 0 for any free one."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port: a number from 1 to {MAX_PORT}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a port: a number from 1 to {MAX_PORT}, or 0 for any free one")
    return port


def host_address(value: str) -> str:
    """An address or a host name this machine resolves (listening on it is tried at start)."""
    host = value.strip()
    if not host or any(character.isspace() for character in host):
        raise argparse.ArgumentTypeError(f"{value!r} is not a host: an address such as 127.0.0.1 or 0.0.0.0")
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise argparse.ArgumentTypeError(
            f"{host!r} is not an address or a host name this machine resolves ({reason})"
        ) from None
    return host


def mcp_server(value: str) -> str:
    """An ``--mcp`` value: ``demo``, an http(s) URL or ``name=URL`` (``mcp_demo.servers``)."""
    try:
        read_spec(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value.strip()


def cannot_start(error: OSError, host: str, port: int) -> str:
    """Why the stack could not listen, in one line a person can act on."""
    if error.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use (another `make run`?): stop it, or pick another port with --port "
            "(0: any free one)"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}: it is not an address of this machine (127.0.0.1, or 0.0.0.0 for every one)"
    if error.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges this user does not have: pick a port from 1024 up"
    return f"cannot start the local stack: {error.strerror or error}"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="voiceide-conductor", description="The VoiceIDE conductor.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    local = commands.add_parser(
        "local",
        help="run the conductor locally (WebSocket API, DynamoDB, offline brain)",
        description="Run the conductor on this machine: a local API Gateway WebSocket API, DynamoDB (moto) "
        "and the deterministic offline brain in place of Bedrock.",
    )
    local.add_argument(
        "--host", type=host_address, default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    local.add_argument(
        "--port",
        type=port_number,
        default=8080,
        help="port to listen on, 1 to 65535, or 0 for any free one (default: %(default)s)",
    )
    local.add_argument(
        "--bedrock",
        action="store_true",
        help="use the real Amazon Bedrock with your AWS credentials and region instead of the offline brain",
    )
    local.add_argument(
        "--model-pace",
        default=os.environ.get(MODEL_PACE_ENV, "instant"),
        help="how fast the offline brain streams: instant, paced (400 ms to the first token, then about "
        "80 tokens/s in deltas of 3 tokens, as a real model) or <first token ms>:<tokens per s> "
        f"(default: ${MODEL_PACE_ENV} or %(default)s)",
    )
    local.add_argument("--quiet", action="store_true", help="do not log each event in and out")
    local.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages from this origin (scheme://host[:port], or * for any) open sessions; by default "
        "only native apps (no Origin) and the console's own origin may; repeatable",
    )
    local.add_argument(
        "--auth",
        choices=AUTH_MODES,
        default="none",
        help="sign-in in front of $connect: none, or cognito (a local user pool with a test user; clients "
        "send its ID token) (default: %(default)s)",
    )
    local.add_argument(
        "--mcp",
        action="append",
        default=[],
        type=mcp_server,
        metavar="URL|demo|name=URL",
        help="an MCP server whose tools the conductor offers the model: demo (a demo server started here: "
        "issues.search, issues.close, ci.run), an http(s) URL (named mcp1, mcp2, ...) or name=URL; repeatable",
    )
    check = commands.add_parser(
        "doctor",
        help="check a stage's AWS account before and after a deploy: model access, profile regions, quotas, "
        "the API Gateway logging role, the stack, the table",
        description="Check a stage with your AWS credentials, before and after `cdk deploy`: the configured Bedrock "
        "model is Active, the account may use it (Marketplace subscription, Anthropic's use-case form) and it "
        "answers the request the conductor sends; the regions its inference profile routes to are the ones "
        "cdk.json grants; the Bedrock and Lambda quotas leave room for the stage; the account has the API "
        "Gateway CloudWatch Logs role the stage's access logging needs; after a deploy, the stack, WebSocket API "
        "and DynamoDB table. One line per check ('!' for a warning); exit code 0 only when no check failed.",
    )
    check.add_argument("--stage", default=None, help="stage in cdk.json (default: dev)")
    check.add_argument("--region", default=None, help="region of the stack (default: the stage's region)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        return doctor.main(args.stage, args.region)
    return run_local(args)


def run_local(args: argparse.Namespace) -> int:
    try:
        pace = ModelPace.parse(args.model_pace)
    except ValueError as error:
        print(f"voiceide-conductor: --model-pace: {error}", file=sys.stderr)
        return 2
    if args.bedrock:
        # Checked before anything starts: without credentials every connect would fail later.
        try:
            doctor.credentialed_session()
        except doctor.CannotRun as reason:
            print(f"voiceide-conductor: --bedrock needs AWS credentials: {reason}", file=sys.stderr)
            return EXIT_NO_CREDENTIALS
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Metrics are off locally (no CloudWatch); Powertools still warns on every invocation.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    try:
        origins = tuple(normalize_origin(origin) for origin in args.allow_origin)
    except ValueError as error:
        print(f"voiceide-conductor: --allow-origin: {error}", file=sys.stderr)
        return 2
    try:
        read_specs(args.mcp)
    except ValueError as error:
        print(f"voiceide-conductor: --mcp: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    # The readable event lines say what happens; the handlers' JSON logs only when something is wrong.
    env = {"POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING")}
    stack = LocalStack(
        args.host,
        args.port,
        use_real_bedrock=args.bedrock,
        quiet=args.quiet,
        env=env,
        auth=args.auth,
        model_pace=pace,
        allowed_origins=origins,
        mcp_servers=args.mcp,
    )
    try:
        stack.start()
    except OSError as error:
        print(f"voiceide-conductor: {cannot_start(error, args.host, args.port)}", file=sys.stderr)
        return EXIT_CANNOT_START
    try:
        brain = "Amazon Bedrock" if args.bedrock else "the offline brain (deterministic, no AWS)"
        if not args.bedrock and pace is not None:
            brain += f", paced: first token {pace.first_token_s * 1000:.0f} ms, {pace.tokens_per_s:g} tokens/s"
        print(f"VoiceIDE conductor listening on {stack.session_url(str(uuid.uuid4()))}", flush=True)
        services = "DynamoDB" if stack.user_pool is None else "DynamoDB and Cognito"
        print(f"  brain: {brain}; {services}: moto at {stack.dynamodb_endpoint}", flush=True)
        if stack.user_pool is None:
            print(f"  try it: {client_command()} --url {stack.ws_url}    (Ctrl-C to stop)", flush=True)
        else:
            pool = stack.user_pool
            print(f"  sign-in: Cognito user pool {pool.user_pool_id} (moto); connections need its ID token", flush=True)
            print(f"  test user: {pool.username} / password {pool.password}", flush=True)
            print(f"  try it: {sign_in_command(stack)}    (Ctrl-C to stop)", flush=True)
        print(f"  console: {stack.console_url}    (talk to it in a browser)", flush=True)
        print(f"  sessions API: {stack.sessions_url}    (docs/sessions-api.md)", flush=True)
        if stack.memory_endpoint is not None:
            memory = stack.memory_endpoint
            print(f"  memory: the local AgentCore Memory at {memory}    (what it remembers of you)", flush=True)
        for line in mcp_lines(stack):
            print(line, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        stack.stop()
    return 0


def mcp_lines(stack: LocalStack) -> list[str]:
    """One line per MCP server the conductor calls tools on (none without ``--mcp``)."""
    lines = []
    for server in stack.mcp_server_setting():
        line = f"  MCP server {server['name']}: {server['url']}"
        if stack.mcp_demo is not None and server["url"] == stack.mcp_demo.url:
            line += f"    (the demo: {', '.join(stack.mcp_demo.tools)})"
        lines.append(line)
    return lines


def client_command() -> str:
    """How to start the client stub from here: the script installed next to this Python (``make run``
    puts it in the checkout's ``.venv/bin``, which is not on PATH), relative to the current folder
    when it is inside it, else absolute; the bare name when no script is installed there."""
    script = Path(sys.executable).parent / "voiceide-client"
    if not script.is_file():
        return "voiceide-client"
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown)


def sign_in_command(stack: LocalStack) -> str:
    """The client stub's command line that signs in as the test user and connects."""
    pool = stack.user_pool
    assert pool is not None
    return " ".join(
        [
            client_command(),
            f"--url {stack.ws_url}",
            f"--username {shlex.quote(pool.username)}",
            f"--password {shlex.quote(pool.password)}",
            f"--client-id {pool.client_id}",
            f"--cognito-endpoint {pool.endpoint}",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
