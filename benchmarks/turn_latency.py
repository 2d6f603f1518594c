"""Turn latency of the conductor on the local stack, as the app sees it.

    python benchmarks/turn_latency.py [--turns N] [--sessions K]

Starts a ``LocalStack`` on a free loopback port (the deployed Lambda handlers behind the local
API Gateway, DynamoDB on a moto server, Bedrock answered by the offline brain) and drives it
with the client stub over real WebSockets. It measures, from the moment the transcript is sent:
the first server event (``convo.setState thinking``), the first ``assistantSpeechPartial``, the
``assistantSpeechFinal`` and ``convo.setState idle`` (the turn is over):

* N plain turns of one session (the brain streams "You said: …", one word per delta);
* N tool-call turns of one session (``call editor.openFile {...}``, answered at once by the
  client): also the ``toolCall`` and, after the result, the first partial of the resumed stream;
* K sessions taking turns at once, N/K turns each (rounded up).

It prints p50 / p95 / max in milliseconds, turns per second and, per turn, the DynamoDB requests
and the time spent inside moto answering them, and asserts nothing.

These are LOOPBACK figures with moto: they show the conductor's own overhead (frame parsing,
decisions, conditional DynamoDB commits per delta, management API posts, the local gateway's
thread per invocation), not AWS latency. Deployed, every DynamoDB call, every post and the
model itself add their network and service time; the offline brain answers at once and
streams as fast as the conductor reads.

Notes: each phase runs on a fresh stack (moto's cost grows with the table, see below) and starts
with one warm-up turn that is not counted (the handlers build their boto3 clients on first use);
the per-session turn rate limit is lifted (``CONDUCTOR_MAX_TURNS_PER_MINUTE``), as the benchmark
takes more turns per minute than a person.

moto brings a cost into the stack that deployed DynamoDB does not have: TransactWriteItems
deep-copies the whole table once per action, as its rollback snapshot, before applying any
action (all copies are identical; only the last is kept). The conductor commits most decisions
as transactions, so this grows with the table and dominates the local figures. Unless
``--moto-as-is`` is given, the benchmark makes one copy per table and transaction instead (in
its own process; semantics unchanged). What remains of moto is printed per turn ("inside moto");
the rest of a turn is the conductor, the local gateway and the client. (The stack itself serves
DynamoDB one request at a time and drops moto's tracked copies; see
tests/e2e/test_local_dynamodb.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import statistics
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import moto.dynamodb.models as moto_dynamodb
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

from conductor_local.stack import LocalStack
from shared.protocol import AssistantSpeechFinal, AssistantSpeechPartial, Event, ToolCall
from voiceide_client import ConductorClient, TurnTimeout, scaled_backoff

PLAIN = "please open the main file"
TOOL = 'call editor.openFile {"path": "Sources/App/main.swift"}'
TURN_TIMEOUT_S = 10.0
STACK_ENV = {
    "CONDUCTOR_TURN_RESERVE_MS": "1000",  # the local message Lambda has 600 s; keep the check out of the way
    "CONDUCTOR_MAX_TURNS_PER_MINUTE": "1000000",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
}


class MotoMeter:
    """WSGI middleware for the stack's moto server: counts DynamoDB requests and the time moto spends on them.

    The stack already serves DynamoDB requests one at a time; taking the same turn here first
    keeps the wait for that turn out of the measured time.
    """

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.requests: list[tuple[str, float]] = []
        """(operation, seconds inside moto) per request, in completion order."""
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        operation = str(environ.get("HTTP_X_AMZ_TARGET", "?")).rpartition(".")[2]
        with self._lock:
            began = time.perf_counter()
            try:
                return list(self.app(environ, start_response))
            finally:
                self.requests.append((operation, time.perf_counter() - began))


class OneTableCopy:
    """Stands in for ``copy`` in moto's DynamoDB models during one TransactWriteItems.

    moto takes its rollback snapshot once per action, of the same unchanged table; this makes
    the first copy and hands it out again. Anything but a table is copied as usual.
    """

    def __init__(self) -> None:
        self._tables: dict[int, Table] = {}

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if not isinstance(value, Table):
            return copy.deepcopy(value, memo)
        if id(value) not in self._tables:
            self._tables[id(value)] = copy.deepcopy(value)
        return self._tables[id(value)]


def one_table_copy_per_transaction() -> None:
    """Patch this process's moto (its requests run one at a time, so swapping a module global is safe)."""
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        moto_dynamodb.copy = OneTableCopy()  # type: ignore[assignment]
        try:
            transact(backend, transact_items)
        finally:
            moto_dynamodb.copy = copy

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def meter_local_dynamodb(stack: LocalStack) -> MotoMeter | None:
    """Wrap the stack's moto server (werkzeug reads ``server.app`` per request); None if not possible."""
    server = getattr(getattr(stack, "_moto", None), "_server", None)
    if server is None:
        return None
    meter = MotoMeter(server.app)
    server.app = meter
    return meter


@dataclass
class Marks:
    """Milliseconds from the transcript sent to each point of one turn (None: not reached)."""

    thinking: float | None = None
    tool_call: float | None = None
    first_partial: float | None = None
    resumed_partial: float | None = None
    final: float | None = None
    idle: float | None = None


@dataclass
class Phase:
    name: str
    turns: list[Marks] = field(default_factory=list)
    timeouts: int = 0
    elapsed_s: float = 0.0
    dynamodb: list[tuple[str, float]] = field(default_factory=list)
    """The DynamoDB requests made while the counted turns ran."""
    moto: str = ""


class Window:
    """Times a phase's counted turns and collects the DynamoDB requests made meanwhile."""

    def __init__(self, phase: Phase, meter: MotoMeter | None) -> None:
        self.phase = phase
        self.meter = meter

    def __enter__(self) -> Window:
        self._began = time.perf_counter()
        self._first = len(self.meter.requests) if self.meter else 0
        return self

    def __exit__(self, *exc: object) -> None:
        self.phase.elapsed_s = time.perf_counter() - self._began
        if self.meter is not None:
            self.phase.dynamodb = self.meter.requests[self._first :]


class TimedClient:
    """A client stub that timestamps every received event, for one turn at a time."""

    def __init__(self, url: str, tools: dict[str, Any] | None = None) -> None:
        self.arrivals: list[tuple[float, Event]] = []
        self.client = ConductorClient(
            url,
            session_id=str(uuid.uuid4()),
            tools=tools,
            backoff=scaled_backoff(0.01),
            on_event=self._on_event,
        )

    def _on_event(self, event: Event) -> None:
        self.arrivals.append((time.perf_counter(), event))

    async def turn(self, text: str) -> Marks | None:
        """One turn; None when it timed out."""
        start_at = len(self.arrivals)
        sent = time.perf_counter()
        try:
            await self.client.say(text, timeout=TURN_TIMEOUT_S)
        except TurnTimeout:
            return None
        return marks(self.arrivals[start_at:], sent)


def marks(arrivals: list[tuple[float, Event]], sent: float) -> Marks:
    found = Marks()

    def ms(at: float) -> float:
        return (at - sent) * 1000

    for at, event in arrivals:
        payload = event.payload
        if isinstance(payload, ToolCall):
            if payload.name == "convo.setState" and '"thinking"' in payload.arguments and found.thinking is None:
                found.thinking = ms(at)
            elif payload.name == "convo.setState" and '"idle"' in payload.arguments:
                found.idle = ms(at)
            elif payload.name not in ("convo.setState", "tts.speak") and found.tool_call is None:
                found.tool_call = ms(at)
        elif isinstance(payload, AssistantSpeechPartial):
            if found.first_partial is None:
                found.first_partial = ms(at)
            if found.tool_call is not None and found.resumed_partial is None:
                found.resumed_partial = ms(at)
        elif isinstance(payload, AssistantSpeechFinal):
            found.final = ms(at)
    return found


async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"opened": arguments.get("path"), "lines": 120}


async def sequential(
    url: str, meter: MotoMeter | None, name: str, text: str, turns: int, tools: dict[str, Any] | None = None
) -> Phase:
    """One session taking ``turns`` turns of ``text``, back to back."""
    phase = Phase(name)
    timed = TimedClient(url, tools)
    async with timed.client:
        await timed.turn(PLAIN)  # warm-up, and the session is established before any tool call
        with Window(phase, meter):
            for _ in range(turns):
                result = await timed.turn(text)
                if result is None:
                    phase.timeouts += 1
                else:
                    phase.turns.append(result)
    return phase


async def concurrent(url: str, meter: MotoMeter | None, sessions: int, turns: int) -> Phase:
    """``sessions`` sessions taking ``turns`` plain turns each, all at once."""
    phase = Phase(f"{sessions} sessions at once, {turns} plain turns each")
    clients = [TimedClient(url) for _ in range(sessions)]
    for timed in clients:
        await timed.client.connect()
    try:
        await asyncio.gather(*(timed.turn(PLAIN) for timed in clients))  # warm-up

        async def run(timed: TimedClient) -> None:
            for _ in range(turns):
                result = await timed.turn(PLAIN)
                if result is None:
                    phase.timeouts += 1
                else:
                    phase.turns.append(result)

        with Window(phase, meter):
            await asyncio.gather(*(run(timed) for timed in clients))
    finally:
        await asyncio.gather(*(timed.client.close() for timed in clients))
    return phase


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def report(phase: Phase, rows: Rows, out: TextIO) -> None:
    done = len(phase.turns)
    timeouts = f", {phase.timeouts} timed out" if phase.timeouts else ""
    print(f"\n{phase.name}: {done} turns in {phase.elapsed_s:.2f} s{timeouts}", file=out)
    print(f"  {'ms from transcript sent to':<40}{'p50':>8}{'p95':>8}{'max':>8}", file=out)
    for label, pick in rows:
        values = [value for value in map(pick, phase.turns) if value is not None]
        if not values:
            print(f"  {label:<40}{'-':>8}{'-':>8}{'-':>8}", file=out)
            continue
        p50, p95, top = statistics.median(values), percentile(values, 95), max(values)
        print(f"  {label:<40}{p50:>8.1f}{p95:>8.1f}{top:>8.1f}", file=out)
    rate = done / phase.elapsed_s if phase.elapsed_s else 0.0
    print(f"  throughput: {rate:.1f} turns/s", file=out)
    turns = done + phase.timeouts
    if phase.dynamodb and turns:
        by_operation: dict[str, int] = {}
        for operation, _ in phase.dynamodb:
            by_operation[operation] = by_operation.get(operation, 0) + 1
        inside_ms = sum(seconds for _, seconds in phase.dynamodb) * 1000 / turns
        mix = ", ".join(f"{name} {count / turns:.1f}" for name, count in sorted(by_operation.items()))
        print(f"  per turn: {len(phase.dynamodb) / turns:.1f} DynamoDB requests ({mix})", file=out)
        print(f"            {inside_ms:.0f} ms inside moto answering them (moto {phase.moto})", file=out)


Rows = list[tuple[str, Callable[[Marks], float | None]]]
TURN_ROWS: Rows = [
    ("first server event (setState thinking)", lambda m: m.thinking),
    ("first assistantSpeechPartial", lambda m: m.first_partial),
    ("assistantSpeechFinal", lambda m: m.final),
    ("setState idle (turn over)", lambda m: m.idle),
]
TOOL_ROWS: Rows = [
    ("first server event (setState thinking)", lambda m: m.thinking),
    ("toolCall editor.openFile", lambda m: m.tool_call),
    ("first partial after the result", lambda m: m.resumed_partial),
    ("assistantSpeechFinal", lambda m: m.final),
    ("setState idle (turn over)", lambda m: m.idle),
    (
        "  toolCall → resumed partial (round)",
        lambda m: None if m.tool_call is None or m.resumed_partial is None else m.resumed_partial - m.tool_call,
    ),
]


PhaseRun = Callable[[str, MotoMeter | None], Awaitable[Phase]]


def phases(turns: int, sessions: int) -> list[tuple[PhaseRun, Rows]]:
    tools = {"editor.openFile": open_file}
    per_session = -(-turns // sessions)  # about as many turns as the other phases
    return [
        (lambda url, meter: sequential(url, meter, f"plain turns, one session ({PLAIN!r})", PLAIN, turns), TURN_ROWS),
        (lambda url, meter: sequential(url, meter, "tool-call turns, one session", TOOL, turns, tools), TOOL_ROWS),
        (lambda url, meter: concurrent(url, meter, sessions, per_session), TURN_ROWS),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="turns per phase; default 30")
    parser.add_argument(
        "--sessions", type=int, default=5, help="sessions taking turns at once (N/K turns each); default 5"
    )
    parser.add_argument(
        "--moto-as-is",
        action="store_true",
        help="leave moto as the stack runs it (a copy of the table per transaction action; see the docstring)",
    )
    args = parser.parse_args(argv)
    turns, sessions = max(1, args.turns), max(1, args.sessions)

    out = sys.stdout
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    if not args.moto_as_is:
        one_table_copy_per_transaction()
    began = time.perf_counter()
    print("VoiceIDE conductor: turn latency on the local stack (a fresh stack per phase)", file=out)
    print(
        "loopback, moto DynamoDB, offline brain = the conductor's own overhead (plus moto's), NOT AWS latency", file=out
    )
    for run, rows in phases(turns, sessions):
        # The handlers print (logs, metrics) to stdout from their threads: keep the figures readable.
        with (
            open(os.devnull, "w") as quiet,
            contextlib.redirect_stdout(quiet),
            LocalStack(port=0, quiet=True, env=STACK_ENV) as stack,
        ):
            meter = meter_local_dynamodb(stack)
            phase = asyncio.run(run(stack.ws_url, meter))
            phase.moto = "as the stack runs it" if args.moto_as_is else "with one table copy per transaction"
        report(phase, rows, out)
    print(f"\ntotal {time.perf_counter() - began:.1f} s", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
