"""What remembering a person costs a session, measured on the local stack.

    python benchmarks/memory_cost.py [--turns N] [--records N]

One person with ``--records`` things remembered (preferences of a typical length, written straight
into the local AgentCore Memory), one new session of theirs over a real WebSocket, ``--turns``
ordinary turns. Every request the conductor makes of the memory is timed as the memory received it
(``time.perf_counter``, the clock the client stub stamps its events with), so each is placed: during
``sessionStart`` (before ``sessionReady``), between a final transcript and that turn's first
``assistantSpeechPartial`` (what the person would wait for), or after it. Printed: the requests of
each kind per place, the block every request of the session carries (as the session's state keeps it: characters,
and tokens at 4 characters a token, the endpoint's estimate), and the time ``sessionStart`` took
with and without the memory's read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3

from conductor_local.agentcore_memory.store import LOCAL_MEMORY_ID
from conductor_local.stack import LocalStack
from shared.adapters.store import SessionStore
from shared.core import person_memory
from shared.core.session_index import LOCAL_PRINCIPAL
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

PREFERENCES = (
    "prefers tabs over spaces, four columns wide",
    "runs the tests with pytest -x and wants the first failure read out",
    "uses pnpm, never npm, in every JavaScript project",
    "likes short spoken answers and the details on screen",
    "writes commit messages in the imperative mood",
    "keeps Swift files under 400 lines and splits views by feature",
    "wants a yes before any file is deleted",
    "calls the staging server 'blue' and production 'green'",
    "reviews diffs file by file, smallest first",
    "works in UTC and says times in 24-hour form",
    "prefers ripgrep to grep when searching",
    "names branches feature/<ticket>-<short-name>",
)
TURNS = ("what does the build script do", "explain the last test failure", "how is the parser organised")


class Timed:
    """Every request the local memory answers, with the time it arrived."""

    def __init__(self, server: Any) -> None:
        self.calls: list[tuple[float, str]] = []
        self._answer = server.call

        def call(operation: str, params: dict[str, Any]) -> dict[str, Any]:
            self.calls.append((time.perf_counter(), operation))
            return self._answer(operation, params)

        server.call = call

    def between(self, start: float, end: float) -> Counter[str]:
        return Counter(operation for at, operation in self.calls if start <= at < end)


def seed(stack: LocalStack, count: int) -> None:
    client = boto3.client(
        "bedrock-agentcore",
        endpoint_url=stack.memory_endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    now = datetime.now(UTC)
    texts = [
        PREFERENCES[index % len(PREFERENCES)] + ("" if index < len(PREFERENCES) else f" ({index})")
        for index in range(count)
    ]
    for start in range(0, len(texts), 100):
        client.batch_create_memory_records(
            memoryId=LOCAL_MEMORY_ID,
            records=[
                {
                    "requestIdentifier": f"seed-{start + offset}",
                    "namespaces": [person_memory.preferences_namespace(LOCAL_PRINCIPAL)],
                    "content": {"text": text},
                    "timestamp": now,
                }
                for offset, text in enumerate(texts[start : start + 100])
            ],
        )


async def session(stack: LocalStack, timed: Timed, turns: int) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "start": Counter(),
        "before_partial": Counter(),
        "after_partial": Counter(),
        "ready_ms": 0.0,
    }
    client = ConductorClient(stack.ws_url, session_id=str(uuid.uuid4()), backoff=scaled_backoff(0.01), capabilities=())
    began = time.perf_counter()
    async with client:
        figures["ready_ms"] = (time.perf_counter() - began) * 1000
        figures["start"] = timed.between(began, time.perf_counter())
        for index in range(turns):
            # A person listens to the answer before speaking again: the turn before has done its
            # work after its last post (its event written) by then.
            await asyncio.to_thread(stack.lambda_server.wait_idle)
            turn = await client.say(TURNS[index % len(TURNS)], timeout=60.0)
            sent, first = turn.final_sent_at, turn.first_partial_at or turn.first_speak_at
            assert sent is not None and first is not None
            figures["before_partial"] += timed.between(sent, first)
        await client.say("context", timeout=60.0)
        store = SessionStore(stack.dynamodb_client(), stack.table_name, ttl_seconds=3600)
        state = store.load(client.session_id)
        figures["block"] = (person_memory.block(state.remembered) if state is not None else None) or ""
    await asyncio.to_thread(stack.lambda_server.wait_idle)
    figures["after_partial"] = timed.between(began, time.perf_counter()) - figures["start"] - figures["before_partial"]
    return figures


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--records", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=3)
    args = parser.parse_args(argv)
    with LocalStack(port=0, quiet=True, env={"CONDUCTOR_LOCAL_READBACK": "spoken"}) as stack:
        seed(stack, args.records)
        timed = Timed(stack.memory_server)
        runs = [asyncio.run(session(stack, timed, args.turns)) for _ in range(args.sessions)]
    with LocalStack(port=0, quiet=True, memory=False) as bare:
        bare_ready = [asyncio.run(_ready_only(bare)) for _ in range(args.sessions)]
    block = runs[-1]["block"]
    print(
        f"memory: {args.records} records of one person, {args.sessions} sessions of {args.turns + 1} turns each",
        file=out,
    )
    print("requests of the memory per session:", file=out)
    for place, label in (
        ("start", "sessionStart (before sessionReady)"),
        ("before_partial", "final transcript → first partial"),
        ("after_partial", "after the first partial (off the hot path)"),
    ):
        total: Counter[str] = sum((run[place] for run in runs), Counter())
        shown = ", ".join(f"{name} {count / len(runs):.1f}" for name, count in sorted(total.items())) or "none"
        print(f"  {label:<44} {shown}", file=out)
    blocking = sum(sum(run["before_partial"].values()) for run in runs) / (len(runs) * args.turns)
    print(f"blocking requests of the memory before a turn's first partial: {blocking:.2f} per turn", file=out)
    cap = person_memory.MAX_BLOCK_CHARS
    print(
        f"remembered block: {len(block)} characters, ≈{len(block) / 4:.0f} tokens in every request of the session"
        f" (its lines capped at {cap} characters)",
        file=out,
    )
    ready, bare = statistics.median(run["ready_ms"] for run in runs), statistics.median(bare_ready)
    print(
        f"sessionStart → sessionReady, median: {ready:.0f} ms with memory, {bare:.0f} ms without (loopback)", file=out
    )
    return 0


async def _ready_only(stack: LocalStack) -> float:
    client = ConductorClient(stack.ws_url, session_id=str(uuid.uuid4()), backoff=scaled_backoff(0.01), capabilities=())
    began = time.perf_counter()
    async with client:
        return (time.perf_counter() - began) * 1000


if __name__ == "__main__":
    raise SystemExit(main())
