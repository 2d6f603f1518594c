"""A turn on a session of three devices: what each device is posted, against one device alone.

The phone talks (voice, display, announcing ``sentenceSpeech``), a desktop companion runs the
tools (tools, declaring ``editor.openFile``), a browser watches (display). The same plain short
answer and tool round as the single-device scenarios, measured per device: posts and bytes per
turn, and the DynamoDB requests of the turn (the devices add none: they live in the state).
"""

from __future__ import annotations

import asyncio
import threading
import urllib.parse
import uuid
from collections import Counter
from typing import Any, TextIO

from benchmarks.bench_stack import Bench, bench_stack
from benchmarks.load import PLAIN
from conductor_local.bedrock.offline_brain import ModelPace
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

TOOL = 'call editor.openFile {"path": "Sources/App/main.swift"}'
PHONE = {"id": "phone", "name": "Phone", "roles": ["voice", "display"]}
DESK = {"id": "desk", "name": "Desk", "roles": ["tools"]}
SCREEN = {"id": "screen", "name": "Screen", "roles": ["display"]}
OPEN_FILE = {"name": "editor.openFile", "description": "Open a file", "arguments": {"type": "object"}}


class PostsByConnection:
    """The management API's POSTs, per connection id (bytes), wrapped around the local gateway."""

    def __init__(self, gateway: Any) -> None:
        self.posts: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        manage = gateway._manage

        async def counted(request: Any) -> bytes:
            answer = await manage(request)
            if request.method == "POST":
                connection = urllib.parse.unquote(request.target.rsplit("/", 1)[-1])
                with self._lock:
                    self.posts.append((connection, len(request.body)))
            return answer

        gateway._manage = counted

    def mark(self) -> int:
        with self._lock:
            return len(self.posts)

    def since(self, mark: int) -> list[tuple[str, int]]:
        with self._lock:
            return list(self.posts[mark:])


async def _open_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"opened": arguments.get("path"), "lines": 120}


async def _turns(bench: Bench, meter: PostsByConnection, turns: int) -> dict[str, dict[str, float]]:
    session_id = str(uuid.uuid4())
    options: dict[str, Any] = {"backoff": scaled_backoff(0.01)}
    phone = ConductorClient(bench.stack.ws_url, session_id, device=PHONE, capabilities=("sentenceSpeech",), **options)
    desk = ConductorClient(
        bench.stack.ws_url,
        session_id,
        {"editor.openFile": _open_file},
        device=DESK,
        declared_tools=[OPEN_FILE],
        capabilities=(),
        **options,
    )
    screen = ConductorClient(bench.stack.ws_url, session_id, device=SCREEN, capabilities=(), **options)
    figures: dict[str, dict[str, float]] = {}
    async with phone:
        await phone.wait_for(lambda e: e.kind_name == "sessionReady", 5)
        async with desk, screen:
            for client in (desk, screen):
                await client.wait_for(lambda e: e.kind_name == "sessionReady", 5)
            await phone.say(PLAIN, timeout=20)  # warm
            names = {}
            for name, text in (("plain short answer", PLAIN), ("one tool round", TOOL)):
                counts: Counter[str] = Counter()
                sizes: Counter[str] = Counter()
                dynamo = 0
                for _ in range(turns):
                    mark, dynamo_mark = meter.mark(), bench.dynamo.mark()
                    await phone.say(text, timeout=20)
                    await asyncio.sleep(0.1)  # the turn's last posts
                    dynamo += len(bench.dynamo.since(dynamo_mark))
                    names = _connections(bench, session_id)
                    for connection, size in meter.since(mark):
                        device = names.get(connection, "?")
                        counts[device] += 1
                        sizes[device] += size
                row = {f"{d} posts": counts[d] / turns for d in ("phone", "desk", "screen")}
                row |= {f"{d} bytes": sizes[d] / turns for d in ("phone", "desk", "screen")}
                row["DynamoDB requests"] = dynamo / turns
                figures[name] = row
    return figures


def _connections(bench: Bench, session_id: str) -> dict[str, str]:
    """Connection id -> device, from the session's stored state."""
    from lambdas import runtime

    state = runtime.store().load(session_id)
    if state is None:
        return {}
    names = {entry.connection_id: entry.device_id for entry in state.devices}
    if state.connection_id is not None:
        names[state.connection_id] = state.device_id
    return names


def three_devices(turns: int) -> dict[str, dict[str, float]]:
    with bench_stack(ModelPace(), naive=False) as bench:
        meter = PostsByConnection(bench.stack.gateway)
        return asyncio.run(_turns(bench, meter, turns))


def report_devices(figures: dict[str, dict[str, float]], out: TextIO) -> None:
    print("\n== one session on three devices: phone (voice), desk (tools), screen (display); per turn ==", file=out)
    print(f"  {'scenario':<22}{'phone posts/bytes':>20}{'desk posts/bytes':>20}{'screen posts/bytes':>20}"
          f"{'DynamoDB req':>14}", file=out)  # fmt: skip
    for name, row in figures.items():
        cells = "".join(f"{row[f'{d} posts']:>9.1f} / {row[f'{d} bytes']:>7.0f}" for d in ("phone", "desk", "screen"))
        print(f"  {name:<22}{cells}{row['DynamoDB requests']:>14.1f}", file=out)
    print("  tts.speak goes to the phone alone, the tool call to the desk alone; the others get the numbered", file=out)
    print("  events and (displays) the partials. Compare each row's phone with the single-device run above.", file=out)


if __name__ == "__main__":
    import sys

    report_devices(three_devices(int(sys.argv[1]) if len(sys.argv) > 1 else 3), sys.stdout)
